"""A restricted reader for single-tensor torch ``.pt`` files (zip format), without torch.

A ``.pt`` is a zip holding ``{archive}/data.pkl`` (a pickle) and ``{archive}/data/{key}``
(raw storage bytes).  Unpickling would execute whatever the pickle names, so this module
never calls ``pickle.load``: it walks the opcode stream with ``pickletools.genops`` and
interprets a small, closed set of opcodes into plain Python values.  The only callables it
"calls" are recognised by name (``torch._utils._rebuild_tensor_v2`` and friends,
``collections.OrderedDict``) and are interpreted, not imported.  Anything else is refused
with ``PtFormatError("... unsupported pickle content (...): refusing to execute")``.
"""

from __future__ import annotations

import os
import pickletools
import warnings
import zipfile
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

MAX_PICKLE_BYTES = 1 << 20
MAX_OPS = 100_000


class PtFormatError(ValueError):
    """A ``.pt`` file this reader cannot or will not read (message names the file)."""


#: torch storage class name → numpy spelling of its element type
STORAGE_DTYPES: dict[str, str] = {
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
    "UntypedStorage": "uint8",
}

#: ``torch.<dtype>`` global name → numpy spelling (new-style storages carry a dtype)
TORCH_DTYPES: dict[str, str] = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
    "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32",
    "int16": "int16", "short": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
    "complex64": "complex64", "cfloat": "complex64", "complex128": "complex128",
    "cdouble": "complex128",
}

_REBUILDERS = {
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_parameter"),
    ("collections", "OrderedDict"),
}


@dataclass(frozen=True, slots=True)
class _Global:
    module: str
    name: str


@dataclass(frozen=True, slots=True)
class _Storage:
    dtype: str
    key: str
    location: str
    numel: int


@dataclass(frozen=True, slots=True)
class PtTensorInfo:
    """What ``data.pkl`` says about the tensor; enough to locate and view its bytes."""

    shape: tuple[int, ...]
    dtype: str  # numpy spelling; "bfloat16" is loaded as exact float32
    stride: tuple[int, ...]
    storage_offset: int  # in elements
    storage_key: str
    storage_numel: int
    entry: str  # zip member holding the storage bytes
    byteorder: str = "little"
    requires_grad: bool = False


def _refuse(name: str, what: str) -> PtFormatError:
    return PtFormatError(f"{name}: unsupported pickle content ({what}): refusing to execute")


def _global(name: str, module: str, attr: str) -> _Global:
    """Resolve a GLOBAL reference to an inert marker, refusing anything unknown."""
    if (module, attr) in _REBUILDERS:
        return _Global(module, attr)
    if module in ("torch", "torch.storage", "torch.cuda") and attr in STORAGE_DTYPES:
        return _Global("torch", attr)
    if module == "torch" and attr in TORCH_DTYPES:
        return _Global("torch", attr)
    raise _refuse(name, f"global {module}.{attr}")


def _storage_from_pid(name: str, pid: Any) -> _Storage:
    if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
        raise _refuse(name, "persistent id is not a storage tuple")
    stype, key, location, numel = pid[1:]
    if not isinstance(stype, _Global) or not isinstance(numel, int) or numel < 0:
        raise _refuse(name, "malformed storage reference")
    dtype = STORAGE_DTYPES.get(stype.name) or TORCH_DTYPES.get(stype.name)
    if dtype is None:
        raise _refuse(name, f"storage type {stype.name}")
    return _Storage(dtype, str(key), str(location), numel)


def _int_tuple(value: Any) -> bool:
    return isinstance(value, tuple) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    )


def _reduce(name: str, func: Any, args: Any) -> Any:
    """Interpret the few allowed REDUCE calls into plain values (nothing is imported)."""
    if not isinstance(func, _Global) or not isinstance(args, tuple):
        raise _refuse(name, "REDUCE on a non-allowed callable")
    if func.name == "OrderedDict":
        if args not in ((), ([],)):
            raise _refuse(name, "non-empty OrderedDict")
        return {}
    if func.name == "_rebuild_parameter":
        if not args or not isinstance(args[0], PtTensorInfo):
            raise _refuse(name, "parameter without tensor")
        return args[0]
    if func.name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
        if len(args) < 4 or not isinstance(args[0], _Storage):
            raise _refuse(name, f"{func.name} arguments")
        storage, offset, size, stride = args[:4]
        if not (isinstance(offset, int) and offset >= 0 and _int_tuple(size) and _int_tuple(stride)):
            raise _refuse(name, f"{func.name} offset/size/stride")
        if len(size) != len(stride) or any(s < 0 for s in size) or any(s < 0 for s in stride):
            raise PtFormatError(f"{name}: inconsistent tensor size/stride")
        grad = bool(args[4]) if len(args) > 4 and isinstance(args[4], bool) else False
        return PtTensorInfo(
            shape=size, dtype=storage.dtype, stride=stride, storage_offset=offset,
            storage_key=storage.key, storage_numel=storage.numel, entry="", requires_grad=grad,
        )
    raise _refuse(name, f"call {func.module}.{func.name}")


_MARK = object()


def interpret_pickle(data: bytes, name: str = "<pickle>") -> Any:
    """Run a pickle's opcodes on a plain stack machine; return the value STOP leaves.

    Only literals, tuples/lists/dicts, memo ops, allowed GLOBALs, storage persistent ids
    and allowed REDUCEs are understood; everything else is refused before it can run.
    """
    stack: list[Any] = []
    memo: dict[int, Any] = {}

    def pop_mark() -> list[Any]:
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is _MARK:
                items = stack[i + 1:]
                del stack[i:]
                return items
        raise PtFormatError(f"{name}: malformed pickle (no MARK)")

    try:
        with warnings.catch_warnings():  # protocol-0 string escapes warn inside pickletools
            warnings.simplefilter("ignore", DeprecationWarning)
            return _run(data, name, stack, memo, pop_mark)
    except PtFormatError:
        raise
    except Exception as exc:  # malformed opcode stream: genops/struct/stack errors
        raise PtFormatError(f"{name}: malformed pickle ({type(exc).__name__})") from None


def _run(data: bytes, name: str, stack: list[Any], memo: dict[int, Any], pop_mark: Any) -> Any:
    """The opcode loop of ``interpret_pickle`` (errors other than PtFormatError escape)."""
    for count, (op, arg, _pos) in enumerate(pickletools.genops(data)):
        if count > MAX_OPS:
            raise PtFormatError(f"{name}: pickle too long")
        code = op.name
        if code in ("PROTO", "FRAME"):
            continue
        if code == "STOP":
            if len(stack) != 1:
                raise PtFormatError(f"{name}: malformed pickle (stack at STOP)")
            return stack[0]
        if code in ("BININT", "BININT1", "BININT2", "LONG1", "LONG4", "LONG", "BINFLOAT", "FLOAT",
                    "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE",
                    "SHORT_BINSTRING", "BINSTRING", "STRING",
                    "SHORT_BINBYTES", "BINBYTES", "BINBYTES8"):
            stack.append(arg)
        elif code == "INT":  # protocol 0 also spells booleans as I00/I01
            stack.append(arg)
        elif code == "NONE":
            stack.append(None)
        elif code == "NEWTRUE":
            stack.append(True)
        elif code == "NEWFALSE":
            stack.append(False)
        elif code == "MARK":
            stack.append(_MARK)
        elif code == "EMPTY_TUPLE":
            stack.append(())
        elif code in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(code[-1])
            if len(stack) < n:
                raise PtFormatError(f"{name}: malformed pickle (stack underflow)")
            items = stack[-n:]
            del stack[-n:]
            stack.append(tuple(items))
        elif code == "TUPLE":
            stack.append(tuple(pop_mark()))
        elif code == "EMPTY_LIST":
            stack.append([])
        elif code == "LIST":
            stack.append(pop_mark())
        elif code == "APPEND":
            value = stack.pop()
            _as(stack[-1], list, name).append(value)
        elif code == "APPENDS":
            items = pop_mark()
            _as(stack[-1], list, name).extend(items)
        elif code == "EMPTY_DICT":
            stack.append({})
        elif code == "DICT":
            items = pop_mark()
            stack.append(_pairs_to_dict(items, name))
        elif code == "SETITEM":
            value = stack.pop()
            key = stack.pop()
            _as(stack[-1], dict, name)[_hashable(key, name)] = value
        elif code == "SETITEMS":
            items = pop_mark()
            _as(stack[-1], dict, name).update(_pairs_to_dict(items, name))
        elif code in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[int(arg)] = stack[-1]
        elif code == "MEMOIZE":
            memo[len(memo)] = stack[-1]
        elif code in ("BINGET", "LONG_BINGET", "GET"):
            if int(arg) not in memo:
                raise PtFormatError(f"{name}: malformed pickle (memo miss)")
            stack.append(memo[int(arg)])
        elif code == "GLOBAL":
            module, _, attr = str(arg).partition(" ")
            stack.append(_global(name, module, attr))
        elif code == "STACK_GLOBAL":
            attr, module = stack.pop(), stack.pop()
            if not (isinstance(module, str) and isinstance(attr, str)):
                raise _refuse(name, "STACK_GLOBAL with non-string names")
            stack.append(_global(name, module, attr))
        elif code == "BINPERSID":
            stack.append(_storage_from_pid(name, stack.pop()))
        elif code == "REDUCE":
            args = stack.pop()
            func = stack.pop()
            stack.append(_reduce(name, func, args))
        else:
            raise _refuse(name, f"opcode {code}")
    raise PtFormatError(f"{name}: malformed pickle (no STOP)")


def _as(obj: Any, kind: type, name: str) -> Any:
    if not isinstance(obj, kind):
        raise PtFormatError(f"{name}: malformed pickle (expected {kind.__name__})")
    return obj


def _hashable(key: Any, name: str) -> Any:
    if isinstance(key, (str, int, float, bool, bytes, tuple)) or key is None:
        try:
            hash(key)
            return key
        except TypeError:
            pass
    raise PtFormatError(f"{name}: malformed pickle (unhashable dict key)")


def _pairs_to_dict(items: list[Any], name: str) -> dict[Any, Any]:
    if len(items) % 2:
        raise PtFormatError(f"{name}: malformed pickle (odd dict items)")
    return {_hashable(items[i], name): items[i + 1] for i in range(0, len(items), 2)}


def _open_zip(path: str) -> zipfile.ZipFile:
    name = os.path.basename(path)
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise PtFormatError(f"{name}: not a torch zip file (legacy or non-torch .pt)") from None
    except OSError as exc:
        raise PtFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None


def _read_info(zf: zipfile.ZipFile, name: str) -> PtTensorInfo:
    members = zf.namelist()
    pkl = [m for m in members if m.endswith("/data.pkl") or m == "data.pkl"]
    if len(pkl) != 1:
        raise PtFormatError(f"{name}: no single data.pkl in the zip")
    prefix = pkl[0][: -len("data.pkl")]
    try:
        zinfo = zf.getinfo(pkl[0])
        if zinfo.file_size > MAX_PICKLE_BYTES:
            raise PtFormatError(f"{name}: data.pkl too large ({zinfo.file_size} bytes)")
        data = zf.read(pkl[0])
        order = zf.read(prefix + "byteorder").decode("ascii", "replace").strip() \
            if prefix + "byteorder" in members else "little"
    except PtFormatError:
        raise
    except Exception as exc:  # zlib/CRC/unsupported compression
        raise PtFormatError(f"{name}: broken zip member ({type(exc).__name__})") from None
    value = interpret_pickle(data, name)
    if not isinstance(value, PtTensorInfo):
        raise _refuse(name, f"top-level {type(value).__name__}, expected one tensor")
    if order not in ("little", "big"):
        raise PtFormatError(f"{name}: unknown byteorder {order[:20]!r}")
    entry = f"{prefix}data/{value.storage_key}"
    if entry not in members:
        raise PtFormatError(f"{name}: storage {value.storage_key!r} missing from the zip")
    return PtTensorInfo(
        shape=value.shape, dtype=value.dtype, stride=value.stride,
        storage_offset=value.storage_offset, storage_key=value.storage_key,
        storage_numel=value.storage_numel, entry=entry, byteorder=order,
        requires_grad=value.requires_grad,
    )


def read_pt_header(path: str) -> PtTensorInfo:
    """Shape/dtype/stride of the single tensor in ``path``, without reading its data."""
    with _open_zip(path) as zf:
        return _read_info(zf, os.path.basename(path))


def _np_dtype(dtype: str, order: str) -> np.dtype:
    storage = "uint16" if dtype == "bfloat16" else dtype
    dt = np.dtype(storage)
    return dt.newbyteorder("<" if order == "little" else ">") if dt.itemsize > 1 else dt


def load_pt(path: str, info: Optional[PtTensorInfo] = None) -> np.ndarray:
    """Load the tensor of ``path`` as a new numpy array (bfloat16 → exact float32)."""
    name = os.path.basename(path)
    with _open_zip(path) as zf:
        info = info or _read_info(zf, name)
        try:
            raw = zf.read(info.entry)
        except Exception as exc:
            raise PtFormatError(f"{name}: cannot read storage ({type(exc).__name__})") from None
    dt = _np_dtype(info.dtype, info.byteorder)
    have = len(raw) // dt.itemsize
    if have < info.storage_numel:
        raise PtFormatError(f"{name}: storage truncated ({have} < {info.storage_numel} elements)")
    flat = np.frombuffer(raw, dtype=dt, count=info.storage_numel)
    if any(s == 0 for s in info.shape):
        out = np.zeros(info.shape, dtype=dt)
    else:
        last = info.storage_offset + sum((s - 1) * st for s, st in zip(info.shape, info.stride))
        if last >= info.storage_numel:
            raise PtFormatError(f"{name}: tensor view exceeds its storage")
        base = flat[info.storage_offset:]
        out = np.lib.stride_tricks.as_strided(
            base, shape=info.shape, strides=tuple(st * dt.itemsize for st in info.stride),
            writeable=False,
        ).copy()
    out = out.astype(out.dtype.newbyteorder("="), copy=False)
    if info.dtype == "bfloat16":
        out = (out.astype(np.uint32) << 16).view(np.float32)
    return out


def stored_payload(path: str) -> Optional[tuple[int, PtTensorInfo]]:
    """``(file offset of the tensor's first byte, info)`` when the tensor can be read straight off the
    file: its storage member stored uncompressed (``torch.save`` writes it so) and the tensor
    C-contiguous in it, little-endian; else None (``load_pt`` reads it whole)."""
    import struct

    name = os.path.basename(path)
    with _open_zip(path) as zf:
        info = _read_info(zf, name)
        zinfo = zf.getinfo(info.entry)
    if zinfo.compress_type != zipfile.ZIP_STORED or zinfo.flag_bits & 0x1 or info.byteorder != "little":
        return None
    dt = _np_dtype(info.dtype, info.byteorder)
    expect, step = [], 1
    for size in reversed(info.shape):
        expect.append(step)
        step *= size
    if any(st != want for st, want, size in zip(info.stride, reversed(expect), info.shape) if size > 1):
        return None
    count = step
    if info.storage_offset + count > info.storage_numel:
        raise PtFormatError(f"{name}: tensor view exceeds its storage")
    if zinfo.file_size < (info.storage_offset + count) * dt.itemsize:
        raise PtFormatError(f"{name}: storage truncated ({zinfo.file_size // dt.itemsize} < "
                            f"{info.storage_offset + count} elements)")
    with open(path, "rb") as fh:
        fh.seek(zinfo.header_offset)
        local = fh.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise PtFormatError(f"{name}: broken zip member header")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return zinfo.header_offset + 30 + name_len + extra_len + info.storage_offset * dt.itemsize, info
