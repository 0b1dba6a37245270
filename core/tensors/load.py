"""Load a tensor's values lazily, in its logical layout, whatever stored it.

Views and engines never open dump files themselves: they hand an indexed tensor to
``load_tensor`` (values) or ``stats_source`` (chunks for the stats engine, so a multi-GB
tensor never needs to be decoded at once).
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable, Optional, Union

import numpy as np

from dumpscope.core.formats.shapes import element_count, impossible_header
from dumpscope.core.tensors.layout_plans import (Stored, cann_groups, entry_flat, entry_planned, entry_stored,
                                                 learn_plan)
from dumpscope.core.model import (STORAGE_CANN, STORAGE_H5, STORAGE_NONE, STORAGE_NPY, STORAGE_PT, STORAGE_RAW,
                                  STORAGE_VALUE)



class TensorLoadError(Exception):
    """A tensor cannot be loaded; the message is one line naming the file and the problem."""


@dataclass(slots=True)
class TensorRef:
    """What the loaders need to find one tensor (a row of the index's tensor table)."""

    path: str
    storage: str
    io: str
    slot: int
    dtype: str
    stored_dtype: str
    shape: tuple[int, ...]
    format: str = "ND"
    device_shape: tuple[int, ...] = ()
    offset: int = 0
    nbytes: int = 0
    sub_format: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def load_error(ref: TensorRef, exc: BaseException | str) -> TensorLoadError:
    """``exc`` as one line naming the tensor's file (the reader and the slicer say failures alike)."""
    text = str(exc).strip() or type(exc).__name__
    text = text.splitlines()[0]
    if ref.path not in text and os.path.basename(ref.path) not in text:
        text = f"{ref.path}: {text}"
    return TensorLoadError(text)


#: the last few CANN headers read, by (path, size, mtime): the tensors of one file are loaded one
#: after another (convert, compare, slots in the explorer), and a file with 3,000 inputs must not
#: have its 3,000-entry header decoded 3,000 times
_HEADER_MEMO: "OrderedDict[tuple, Any]" = OrderedDict()
_HEADER_MEMO_MAX = 4
_HEADER_LOCK = threading.Lock()


def _cann_header(path: str):
    from dumpscope.core.formats.cann_dump import read_header

    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns, st.st_ino)
    with _HEADER_LOCK:
        header = _HEADER_MEMO.get(key)
        if header is not None:
            _HEADER_MEMO.move_to_end(key)
            return header
    header = read_header(path)
    with _HEADER_LOCK:
        _HEADER_MEMO[key] = header
        while len(_HEADER_MEMO) > _HEADER_MEMO_MAX:
            _HEADER_MEMO.popitem(last=False)
    return header


def cann_tensor(ref: TensorRef):
    """The header entry of a CANN file's tensor (its dtype, shapes and payload place); raises
    ``TensorLoadError`` when the file has no such slot."""
    header = _cann_header(ref.path)
    group = header.inputs if ref.io == "input" else header.outputs
    if ref.slot >= len(group):
        raise TensorLoadError(f"{ref.path}: no {ref.io} {ref.slot} in this dump file (it has {len(group)})")
    t = group[ref.slot]
    bad = impossible_header(t.shape, t.dtype, t.size)
    if bad:  # the indexer named the same problem: every command says it the same way
        raise TensorLoadError(f"{ref.path}: {ref.io}.{ref.slot}: {bad}")
    return t


def _cann_tensor_named(ref: TensorRef):
    """``cann_tensor`` with any other failure (a damaged header) said as this tensor's ``TensorLoadError``."""
    try:
        return cann_tensor(ref)
    except TensorLoadError:
        raise
    except Exception as exc:
        raise load_error(ref, exc) from None


def load_tensor(ref: TensorRef) -> np.ndarray:
    """The tensor's values in its logical layout (bfloat16/float8 as exact float32)."""
    try:
        if ref.storage == STORAGE_NPY:
            from dumpscope.core.formats.npy_header import load_npy

            return _words_decoded(ref, load_npy(ref.path))
        if ref.storage == STORAGE_RAW:
            return _load_raw(ref)
        if ref.storage == STORAGE_CANN:
            from dumpscope.core.formats.cann_dump import load_tensor as load_cann

            return load_cann(ref.path, cann_tensor(ref))
        if ref.storage == STORAGE_PT:
            from dumpscope.core.formats.pt_reader import load_pt

            return load_pt(ref.path)
        if ref.storage == STORAGE_H5:
            from dumpscope.core.layouts.torch_h5 import load_dataset

            return load_dataset(ref.path, ref.extra.get("dataset", ""))
        if ref.storage == STORAGE_NONE:
            raise TensorLoadError(f"{ref.path}: statistics only, this dump holds no tensor data")
        if ref.storage == STORAGE_VALUE:
            raise TensorLoadError(f"{ref.path}: {ref.io} {ref.slot} is a non-tensor argument, not a tensor")
    except TensorLoadError:
        raise
    except MemoryError:
        raise TensorLoadError(f"{ref.path}: tensor too large to load into memory") from None
    except Exception as exc:  # every reader error becomes one line naming the file
        raise load_error(ref, exc) from None
    raise TensorLoadError(f"{ref.path}: unknown storage {ref.storage!r}")


#: what the readers of each storage import on first use (lazily: most commands read no tensor)
_READER_MODULES = {
    STORAGE_CANN: ("dumpscope.core.formats.cann_dump",),  # its protobuf header and device formats with it
    STORAGE_NPY: ("dumpscope.core.formats.npy_header", "dumpscope.core.formats.dtypes"),
    STORAGE_RAW: ("dumpscope.core.formats.dtypes",),
    STORAGE_PT: ("dumpscope.core.formats.pt_reader",),
}


def import_readers(storages: Iterable[str]) -> None:
    """Import now what reading tensors of these storages will import: a process about to fork the
    workers that read them (compare's pool) does it once, not each worker after the fork (a CANN
    reader and its protobuf module: ~20 ms a worker)."""
    import importlib

    for storage in storages:
        for name in _READER_MODULES.get(storage, ()):
            importlib.import_module(name)


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)
_UNREAD = object()  # a file ``OnceReader`` has not opened yet

#: files up to this size are read whole, once, by ``OnceReader`` (cann_dump memory-maps payloads from 4 MiB)
ONCE_MAX_BYTES = 4 << 20
#: ``OnceReader``'s first read of a file: most dump files of a model are a few KB
ONCE_FIRST_READ = 64 << 10


class OnceReader:
    """Loads a known set of tensors reading each small dump file once.

    Made with every ref it will be asked for (compare: the tensors of one op, both sides), it reads a
    CANN or ``.npy`` file of at most ``ONCE_MAX_BYTES`` whole in one ``read``, parses its header once and
    decodes each of its tensors from that buffer; the buffer is dropped as soon as its last tensor is
    loaded, so memory stays one small file per side.  Bigger files, other storages and any file whose
    one-read path fails go through ``load_tensor`` (memory maps, streaming, the usual one-line errors),
    so the values and the error messages are those of ``load_tensor``.
    """

    def __init__(self, refs: Iterable[TensorRef], max_bytes: int = ONCE_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._left: dict[str, int] = {}
        for r in refs:
            if r.storage in (STORAGE_CANN, STORAGE_NPY):
                self._left[r.path] = self._left.get(r.path, 0) + 1
        self._files: dict[str, Any] = {}  # path -> (bytes, parsed header) or None (use load_tensor)

    def load(self, ref: TensorRef) -> np.ndarray:
        """``load_tensor(ref)``, from the file's one buffer when it is small."""
        arr = self._buffered(ref)
        return load_tensor(ref) if arr is None else arr

    def value_chunks(self, ref: TensorRef) -> tuple[Callable[[], Iterable[np.ndarray]], tuple[int, ...], np.dtype]:
        """``value_chunks(ref)`` (same shape, dtype and values in C order), from the file's one buffer
        when it is small; any other file streams as ``value_chunks`` streams it."""
        return self.value_source(ref)[1]

    def value_source(self, ref: TensorRef):
        """``(array, stream)``: the tensor decoded from its file's one buffer and the ``value_chunks``
        stream made of it, or ``(None, value_chunks(ref))`` for a file that streams."""
        arr = self.array(ref)
        return (None, value_chunks(ref)) if arr is None else (arr, array_stream(arr))

    def array(self, ref: TensorRef) -> Optional[np.ndarray]:
        """The tensor decoded from its file's one buffer when it has the indexed shape, else None (it
        streams: ``value_chunks(ref)``).  Either way the file's count of tensors to come goes down."""
        arr = self._buffered(ref)
        if arr is None or arr.shape != tuple(ref.shape):
            return None
        return arr

    def flat(self, ref: TensorRef) -> Optional[np.ndarray]:
        """``array(ref)``'s values as a 1-D C-order array (a view of the file's buffer where the values
        lie in it as they are: ``detached`` copies those, a gathered array has no ``base``), or None
        where ``array`` gives None: the batched kernel takes rows, so a tensor its layout's plan
        gathers is not shaped only to be flattened again."""
        return self._from_file(ref, self._flat)

    def _flat(self, ref: TensorRef, got) -> Optional[np.ndarray]:
        if ref.storage == STORAGE_CANN:
            group = got[1][0] if ref.io == "input" else got[1][1]
            if ref.slot >= len(group):
                return None
            made = entry_flat(group[ref.slot], got[0])
            if made is not None:
                shape = ref.shape
                return made[0] if made[1] == (shape if type(shape) is tuple else tuple(shape)) else None
        arr = self._decode(ref, got)  # no plan (yet): the canonical decoder
        if arr is None or arr.shape != tuple(ref.shape):
            return None
        return arr.reshape(-1)

    def stored(self, ref: TensorRef) -> Union[np.ndarray, Stored, None]:
        """``flat(ref)``, except that a CANN tensor its layout's plan reads is given undecoded
        (``layout_plans.entry_stored``; ``planned_flat`` of it is ``flat``'s array): compare's small-pair
        kernel gathers the tensors of one plan together, straight into its block."""
        # (``_from_file`` of the CANN case written out: called for each of compare's 80,000 tensors)
        path = ref.path
        left = self._left.get(path)
        if left is None:
            return None
        try:
            got = self._files.get(path, _UNREAD)
            if got is _UNREAD:
                got = self._open(ref)
            if got is None:
                return None
            if ref.storage == STORAGE_CANN:
                data, groups = got
                group = groups[0] if ref.io == "input" else groups[1]
                if ref.slot >= len(group):
                    return None
                made = entry_stored(group[ref.slot], data)
                if made is not None:
                    shape = ref.shape
                    return made if made[2].shape == (shape if type(shape) is tuple else tuple(shape)) else None
            return self._flat(ref, got)
        except Exception:  # the canonical loader says what is wrong (or reads what this one would not)
            return None
        finally:
            if left > 1:
                self._left[path] = left - 1
            else:
                del self._left[path]
                self._files.pop(path, None)

    def _buffered(self, ref: TensorRef) -> Optional[np.ndarray]:
        """The tensor decoded from its file's one buffer, or None: the existing path must load it."""
        return self._from_file(ref, self._decode)

    def _from_file(self, ref: TensorRef,
                   use: Callable[[TensorRef, Any], Optional[np.ndarray]]) -> Optional[np.ndarray]:
        """``use(ref, (bytes, header))`` of the file's one buffer (read at its first tensor), or None: the
        existing path must load it.  Either way the file's count of tensors to come goes down, and its
        buffer is dropped with its last tensor."""
        path = ref.path
        left = self._left.get(path)
        if left is None:
            return None
        try:
            got = self._files.get(path, _UNREAD)
            if got is _UNREAD:
                got = self._open(ref)
            return use(ref, got) if got is not None else None
        except Exception:  # the canonical loader says what is wrong (or reads what this one would not)
            return None
        finally:
            if left > 1:
                self._left[path] = left - 1
            else:
                del self._left[path]
                self._files.pop(path, None)

    def _open(self, ref: TensorRef):
        self._files[ref.path] = None
        fd = os.open(ref.path, _READ_FLAGS)
        try:
            # a read of a regular file stops short only at its end: a file smaller than the first read
            # is read whole without asking its size (an fstat less a file: ~3 % of compare's workers)
            data = os.read(fd, ONCE_FIRST_READ)
            if len(data) == ONCE_FIRST_READ:
                size = os.fstat(fd).st_size
                if size > self.max_bytes or size < len(data):
                    return None
                if size > len(data):  # read again whole from the start: one buffer, no copy of the parts
                    os.lseek(fd, 0, os.SEEK_SET)
                    parts, have = [], 0
                    while have < size:
                        chunk = os.read(fd, size - have)
                        if not chunk:
                            return None  # shrunk since fstat: the canonical loader says what is left
                        parts.append(chunk)
                        have += len(chunk)
                    data = parts[0] if len(parts) == 1 else b"".join(parts)
        finally:
            os.close(fd)
        if len(data) > self.max_bytes:
            return None
        if ref.storage == STORAGE_CANN:
            header = cann_groups(ref.path, data)
        else:
            header = _npy_layout(ref.path, data)
        self._files[ref.path] = got = (data, header)
        return got

    @staticmethod
    def _decode(ref: TensorRef, got) -> Optional[np.ndarray]:
        data, header = got
        if ref.storage == STORAGE_CANN:
            group = header[0] if ref.io == "input" else header[1]
            if ref.slot >= len(group):
                return None
            e = group[ref.slot]
            arr = entry_planned(e, data)
            if arr is None:
                from dumpscope.core.formats.cann_dump import load_tensor as load_cann

                arr = load_cann(ref.path, e.tensor, data=data)
                learn_plan(e.tensor, arr, data)
            return arr
        if header is None:
            return None
        shape, fortran, dt, offset = header
        count = 1
        for d in shape:
            count *= d
        arr = np.frombuffer(data, dtype=dt, count=count, offset=offset) if count else np.zeros(0, dt)
        return _words_decoded(ref, arr.reshape(shape[::-1]).transpose() if fortran else arr.reshape(shape))


def detached(a: np.ndarray) -> np.ndarray:
    """``a`` without a hold on its file's buffer (a plain-layout tensor is a view of the bytes read)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return a.copy() if root.base is not None else a


@lru_cache(maxsize=64)
def value_dtype(dt: np.dtype) -> np.dtype:
    """The dtype a stream of these values declares (native byte order, by name)."""
    return np.dtype(dt.name)


def array_stream(arr: np.ndarray) -> tuple[Callable[[], Iterable[np.ndarray]], tuple[int, ...], np.dtype]:
    """An in-memory tensor as a ``value_chunks`` stream (its C-order chunks, shape and value dtype)."""
    return (lambda: _chunks(arr), tuple(arr.shape), value_dtype(arr.dtype))


def npy_words_dtype(ref: TensorRef, header: np.dtype) -> Optional[np.dtype]:
    """The integer dtype to read a ``.npy``'s words as when they are the bit patterns of the type its
    name gives (``dtypes.npy_words``: ``<u2`` words of a file named bfloat16), else None (values);
    ``TensorLoadError`` when the name says bit patterns the words cannot be."""
    from dumpscope.core.formats.dtypes import npy_words, npy_words_problem

    words = npy_words(ref.dtype, header)
    if words is None:
        return None
    if not words:
        raise TensorLoadError(f"{ref.path}: {npy_words_problem(ref.dtype, header)}")
    return np.dtype(BITS_DTYPES[ref.dtype])


def _words_decoded(ref: TensorRef, arr: np.ndarray) -> np.ndarray:
    """``arr`` as read by numpy, or its words decoded as the name's bit-pattern type (exact float32)."""
    bits = npy_words_dtype(ref, arr.dtype)
    if bits is None:
        return arr
    from dumpscope.core.formats.dtypes import decode

    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    return decode(flat, ref.dtype, arr.size).reshape(arr.shape)


def _npy_layout(path: str, data: bytes):
    """(shape, fortran order, exact dtype, data offset) of a whole ``.npy`` file, or None when
    ``load_npy`` must judge it (truncated, unusual version); the checks are ``load_npy``'s."""
    import io

    from dumpscope.core.formats.npy_header import MAX_HEADER_READ, parse_npy_header, read_array_header

    head = parse_npy_header(data[:MAX_HEADER_READ], len(data), os.path.basename(path))
    if head.truncated or head.oversized:
        return None
    fh = io.BytesIO(data)
    header = read_array_header(fh)
    if header is None:
        return None
    shape, fortran, dt = header
    if dt.hasobject or fh.tell() != head.data_offset:
        return None
    return tuple(shape), fortran, dt, fh.tell()


def check_raw_size(ref: TensorRef, size: int, need: Optional[int] = None) -> None:
    """A raw payload must be exactly what its name's shape and dtype need: fewer bytes is a truncated
    file, more means the name does not describe the data (see ``NpyHeader.oversized``)."""
    from dumpscope.core.formats.dtypes import nbytes_for

    stored = ref.stored_dtype or ref.dtype
    if need is None:
        need = nbytes_for(stored, element_count(ref.shape))
    have = size - ref.offset
    if have < need:
        raise TensorLoadError(f"{ref.path}: truncated: {have} bytes of data, shape {list(ref.shape)} {stored} "
                              f"needs {need}")
    if have > need:
        raise TensorLoadError(f"{ref.path}: payload of {have} bytes, its name says {stored} {list(ref.shape)} "
                              f"which needs {need}: the name does not describe the data, not decoded")


def _load_raw(ref: TensorRef) -> np.ndarray:
    from dumpscope.core.formats.dtypes import decode, nbytes_for

    stored = ref.stored_dtype or ref.dtype
    count = element_count(ref.shape)
    need = nbytes_for(stored, count)  # packed int4/uint1 take less than a byte each
    size = os.path.getsize(ref.path)
    check_raw_size(ref, size, need)
    raw = np.memmap(ref.path, dtype=np.uint8, mode="r", offset=ref.offset, shape=(need,)) if need else \
        np.zeros(0, np.uint8)
    return decode(raw, stored, count).reshape(ref.shape)


def stats_source(ref: TensorRef) -> tuple[Callable[[], Iterable[np.ndarray]], tuple[int, ...], str]:
    """Chunks for the stats engine: ``(make_chunks, logical shape, logical dtype)``.

    Streamed a chunk at a time: plain-layout CANN tensors, raw files and C-order ``.npy`` (raw bit
    patterns for bfloat16/float8, which the engine understands), device-layout CANN tensors
    (``core.formats.device_chunks``: NC1HWC0, NDC1HWC0, FRACTAL_NZ, FRACTAL_Z, FRACTAL_Z_3D, C1HWNCoC0),
    ``.pt`` storages stored uncompressed and contiguous (``_stream_pt``),
    ``.h5`` datasets (a block of rows at a time, h5py) and packed int4/int2/uint1 (decoded per chunk).
    Loaded whole, because the format gives no cheaper way: other device formats (FRACTAL_ZN_LSTM…,
    or a non-default target layout), a deflated or non-contiguous ``.pt``, a
    Fortran-order or structured ``.npy``.
    """
    from dumpscope.core.formats.device_format import PLAIN_FORMATS  # formats stored as the logical tensor

    streamed = None  # each storage's streamer, or None where it cannot stream this tensor
    if ref.storage == STORAGE_CANN and (not ref.format or ref.format in PLAIN_FORMATS):
        t = _cann_tensor_named(ref)
        streamed = _stream_plain(ref, t.offset, t.size, t.dtype)
    elif ref.storage == STORAGE_CANN:
        streamed = _stream_device(ref)
    elif ref.storage == STORAGE_NPY:
        streamed = _stream_npy(ref)
    elif ref.storage == STORAGE_RAW:
        stored = ref.stored_dtype or ref.dtype
        try:
            size = os.path.getsize(ref.path)
        except OSError as exc:
            raise load_error(ref, exc) from None
        check_raw_size(ref, size)
        streamed = _stream_plain(ref, ref.offset, max(0, size - ref.offset), stored)
    elif ref.storage == STORAGE_PT:
        streamed = _stream_pt(ref)
    elif ref.storage == STORAGE_H5:
        from dumpscope.core.layouts.torch_h5 import dataset_chunks

        made = dataset_chunks(ref.path, ref.extra.get("dataset", ""))
        if made is not None:
            streamed = made[0], made[1], made[2].name
    if streamed is not None:
        return streamed
    # whole: a compressed or non-contiguous .pt, a Fortran-order or object .npy, a device layout
    # device_chunks does not stream (FRACTAL_ZN_LSTM, …)
    arr = load_tensor(ref)
    logical = arr.dtype.name
    return (lambda: _chunks(arr), tuple(arr.shape), logical)


def _stream_pt(ref: TensorRef):
    """A ``.pt`` whose tensor lies uncompressed and C-contiguous in its zip (what ``torch.save``
    writes): read straight off the file in chunks, never unpickled, never whole."""
    from dumpscope.core.formats.pt_reader import stored_payload

    try:
        found = stored_payload(ref.path)
    except Exception as exc:
        raise load_error(ref, exc) from None
    if found is None:
        return None
    offset, info = found
    sdt = payload_dtype(info.dtype)
    if sdt is None or (tuple(ref.shape) and tuple(info.shape) != tuple(ref.shape)):
        return None
    count = element_count(info.shape)
    if count == 0:
        return (lambda: iter([np.zeros(0, sdt)]), tuple(info.shape), info.dtype)
    return (FileChunks(ref.path, offset, count, sdt), tuple(info.shape), info.dtype)


BITS_DTYPES = {"bfloat16": np.uint16, "float8_e5m2": np.uint8, "float8_e4m3fn": np.uint8,
                "float8_e8m0fnu": np.uint8}


def _stream_plain(ref: TensorRef, offset: int, size: int, dtype: str):
    count = element_count(ref.shape)
    if dtype in _PACKED:
        return _stream_packed(ref, offset, size, dtype, count)
    if dtype in BITS_DTYPES:
        sdt = np.dtype(BITS_DTYPES[dtype])
    else:
        try:
            sdt = np.dtype(dtype)
        except TypeError:
            return None
        if sdt.kind not in "biufc":
            return None
    if count * sdt.itemsize > size or os.path.getsize(ref.path) < offset + count * sdt.itemsize:
        raise TensorLoadError(f"{ref.path}: truncated: payload of {ref.io} {ref.slot} ends past the end of file")
    if count == 0:
        return (lambda: iter([np.zeros(0, sdt)]), tuple(ref.shape), dtype)
    return (FileChunks(ref.path, offset, count, sdt), tuple(ref.shape), dtype)


#: sub-byte integer types packed several to a byte (core.dtypes decodes them)
_PACKED = ("int4", "int2", "uint2", "uint1")
#: bytes of a packed payload decoded at a time
PACKED_CHUNK_BYTES = 1 << 22


def _stream_packed(ref: TensorRef, offset: int, size: int, dtype: str, count: int):
    """Packed int4/int2/uint1 payloads decoded a chunk of bytes at a time (a whole number of
    elements per byte, so chunks split between elements)."""
    from dumpscope.core.formats.dtypes import decode, decoded_numpy_dtype, itemsize_bits, nbytes_for

    need = nbytes_for(dtype, count)
    if need > size or os.path.getsize(ref.path) < offset + need:
        raise TensorLoadError(f"{ref.path}: truncated: payload of {ref.io} {ref.slot} ends past the end of file")
    per_byte = 8 // itemsize_bits(dtype)
    out = decoded_numpy_dtype(dtype)

    def make() -> Iterable[np.ndarray]:
        left = count
        for raw in _read_chunks(ref.path, offset, need, np.dtype(np.uint8), PACKED_CHUNK_BYTES):
            n = min(left, raw.size * per_byte)
            yield decode(raw, dtype, n)
            left -= n
        if count == 0:
            yield np.zeros(0, out)

    return (make, tuple(ref.shape), out.name)


def payload_dtype(dtype: str) -> Optional[np.dtype]:
    """The element type to read a payload as: bit patterns for bfloat16/float8, else plain numbers."""
    if dtype in BITS_DTYPES:
        return np.dtype(BITS_DTYPES[dtype])
    try:
        sdt = np.dtype(dtype)
    except TypeError:
        return None
    return sdt if sdt.kind in "biufc" else None


def device_stream(ref: TensorRef):
    """``(make_chunks, logical shape, stored dtype)`` of a CANN tensor in a streamable device layout
    (chunks in logical C order, stored element bits), else ``None``: for convert and stats."""
    if ref.storage != STORAGE_CANN:
        return None
    return _stream_device(ref)


def _stream_device(ref: TensorRef):
    """A CANN tensor in a device layout (NC1HWC0, NDC1HWC0, FRACTAL_NZ, and the weights FRACTAL_Z,
    FRACTAL_Z_3D, C1HWNCoC0), converted slab by slab (``core.formats.device_chunks``): stats of a
    2 GiB tensor stay within a few chunks of memory."""
    from dumpscope.core.formats.device_chunks import device_chunks

    t = _cann_tensor_named(ref)
    sdt = payload_dtype(t.dtype)
    if sdt is None or t.size < element_count(t.shape) * sdt.itemsize:
        return None  # packed / odd sizes: the whole-tensor loader handles (and names) them
    if os.path.getsize(ref.path) < t.offset + element_count(t.shape) * sdt.itemsize:
        raise TensorLoadError(f"{ref.path}: truncated: payload of {ref.io} {ref.slot} ends past the end of file")
    made = device_chunks(ref.path, t.offset, t.format, t.shape, t.original_shape, sdt, target=None,
                         sub_format=t.sub_format)
    if made is None:
        return None
    make, shape = made
    if tuple(shape) != tuple(ref.shape):
        return None
    return (make, tuple(shape), t.dtype)


def _stream_npy(ref: TensorRef):
    """Chunks of a C-order ``.npy`` of plain numbers read straight off the file, else None."""
    from dumpscope.core.formats.npy_header import read_array_header, read_npy_header

    try:
        head = read_npy_header(ref.path)
        if head.fortran_order or head.truncated or head.oversized:
            return None  # the loader reports a payload of the wrong size / handles Fortran order
        with open(ref.path, "rb") as fh:
            header = read_array_header(fh)
            if header is None:
                return None
            shape, _fortran, sdt = header
    except Exception as exc:
        raise load_error(ref, exc) from None
    bits = npy_words_dtype(ref, sdt)
    if bits is not None:  # bfloat16/float8 bit patterns stored as integer words: the engine decodes them
        sdt, logical = bits, ref.dtype
    elif sdt.hasobject or sdt.kind not in "biufc" or sdt.names is not None or sdt.subdtype is not None:
        return None
    else:
        logical = sdt.name
    count = element_count(shape)
    if count == 0:
        return (lambda: iter([np.zeros(0, sdt)]), tuple(shape), logical)
    return (FileChunks(ref.path, head.data_offset, count, sdt), tuple(shape), logical)


class FileChunks:
    """``count`` elements of ``sdt`` stored from ``offset`` of a file: called, the chunks of
    :func:`_read_chunks`; ``read_range(start, stop)`` reads any element range alone, so the stats
    engine can split a big tensor over forked processes, each reading its own part of the file."""

    def __init__(self, path: str, offset: int, count: int, sdt: np.dtype, chunk: Optional[int] = None) -> None:
        self.path, self.offset, self.count, self.sdt, self._chunk = path, offset, count, np.dtype(sdt), chunk

    @property
    def chunk(self) -> int:
        """Elements per chunk (all but the last): the stats engine splits only at multiples of its block."""
        return self._chunk or _read_chunks.__defaults__[0]  # type: ignore[index]

    def __call__(self) -> Iterable[np.ndarray]:
        return _read_chunks(self.path, self.offset, self.count, self.sdt, self.chunk)

    def read_range(self, start: int, stop: int) -> np.ndarray:
        """Elements ``[start, stop)``: a read-only map of just that part of the file (no copy; the
        pages leave the resident set when the array is dropped), or a plain read where mapping fails."""
        n = max(0, min(stop, self.count) - start)
        pos = self.offset + start * self.sdt.itemsize
        want = n * self.sdt.itemsize
        if want == 0:
            return np.zeros(0, self.sdt)
        try:
            with open(self.path, "rb") as fh:
                have = os.fstat(fh.fileno()).st_size - pos
                if have < want:
                    raise TensorLoadError(f"{self.path}: truncated: file ended {start + max(0, have) // self.sdt.itemsize} "
                                          f"elements into a tensor of {self.count}")
                got = _map_part(fh, pos, n, self.sdt)
                if got is None:  # a file system without mmap
                    fh.seek(pos)
                    buf = fh.read(want)
                    if len(buf) != want:
                        raise TensorLoadError(f"{self.path}: truncated: file ended "
                                              f"{start + len(buf) // self.sdt.itemsize} elements into a tensor of "
                                              f"{self.count}")
                    got = np.frombuffer(buf, dtype=self.sdt)
        except OSError as exc:
            raise TensorLoadError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        return got


#: chunks of at least this many bytes are mapped rather than read (a read into a fresh buffer
#: faults in, zeroes and copies every page: ~3x the cost of reducing float64 data once)
MAP_MIN_BYTES = 1 << 20


def _map_part(fh: Any, pos: int, n: int, sdt: np.dtype) -> Optional[np.ndarray]:
    """``n`` elements of ``sdt`` at byte ``pos`` of the open file, mapped read-only (the mapping lives
    as long as the array), or None where the file cannot be mapped.  The caller has checked the size."""
    base = pos - pos % mmap.ALLOCATIONGRANULARITY
    try:
        mapped = mmap.mmap(fh.fileno(), pos + n * sdt.itemsize - base, access=mmap.ACCESS_READ, offset=base)
    except (OSError, ValueError):
        return None
    return np.frombuffer(mapped, dtype=sdt, count=n, offset=pos - base)


def _read_chunks(path: str, offset: int, count: int, sdt: np.dtype, chunk: int = 1 << 22) -> Iterable[np.ndarray]:
    """``count`` elements of ``sdt`` from ``offset`` in chunks.  Chunks of ``MAP_MIN_BYTES`` or more
    are mapped one at a time (no copy; the resident memory stays about one chunk however large the
    tensor, as the mapping goes with the chunk), smaller ones read; a file that ends early raises
    ``TensorLoadError`` at the chunk it cannot give."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise TensorLoadError(f"{path}: cannot open: {exc.strerror or exc}") from None
    with fh:
        try:
            size = os.fstat(fh.fileno()).st_size
        except OSError:
            size = -1
        pos = offset
        left = count
        can_map = True
        while left > 0:
            n = min(chunk, left)
            want = n * sdt.itemsize
            got = None
            if can_map and want >= MAP_MIN_BYTES and pos + want <= size:
                got = _map_part(fh, pos, n, sdt)
                can_map = got is not None
            if got is None:
                fh.seek(pos)
                buf = fh.read(want)
                if len(buf) != want:
                    raise TensorLoadError(f"{path}: truncated: file ended {count - left + len(buf) // sdt.itemsize} "
                                          f"elements into a tensor of {count}")
                got = np.frombuffer(buf, dtype=sdt)
            yield got
            pos += want
            left -= n


def _chunks(arr: np.ndarray, chunk: int = 1 << 22) -> Iterable[np.ndarray]:
    flat = arr.reshape(-1) if arr.flags.c_contiguous else np.ravel(arr)
    for start in range(0, flat.size, chunk):
        yield flat[start:start + chunk]
    if flat.size == 0:
        yield flat


def value_chunks(ref: TensorRef) -> tuple[Callable[[], Iterable[np.ndarray]], tuple[int, ...], np.dtype]:
    """The tensor's decoded values in C-order chunks, in bounded memory where the storage allows
    (plain files, device layouts): ``(make_chunks, logical shape, value dtype)`` for compare.
    bfloat16/float8 come decoded (exact float32), as ``load_tensor`` gives them; a file that ends
    early raises ``TensorLoadError`` while the chunks are read."""
    from dumpscope.core.formats.dtypes import decode, decoded_numpy_dtype

    make, shape, dtype = stats_source(ref)
    if dtype in BITS_DTYPES:
        out = decoded_numpy_dtype(dtype)

        def decoded() -> Iterable[np.ndarray]:
            for c in make():
                yield decode(np.ascontiguousarray(c).reshape(-1).view(np.uint8), dtype, c.size).astype(out, copy=False)

        return _guarded(ref, decoded), tuple(shape), out
    return _guarded(ref, make), tuple(shape), np.dtype(dtype)


def _guarded(ref: TensorRef, make: Callable[[], Iterable[np.ndarray]]) -> Callable[[], Iterable[np.ndarray]]:
    def chunks() -> Iterable[np.ndarray]:
        try:
            yield from make()
        except TensorLoadError:
            raise
        except (ValueError, OSError) as exc:
            raise load_error(ref, exc) from None

    return chunks


def compute_tensor_stats(ref: TensorRef, first_bad_n: int = 10, bins: int = 32):
    """Full statistics of one tensor in bounded memory (for plain layouts)."""
    from dumpscope.core.tensors.stats import compute_stats_chunks

    make, shape, dtype = stats_source(ref)
    try:
        return compute_stats_chunks(make, shape, dtype, first_bad_n=first_bad_n, bins=bins)
    except ValueError as exc:
        raise load_error(ref, exc) from None


def signature(ref: TensorRef) -> Optional[str]:
    """A cache key that changes when the file changes (ctime and inode too: a rewrite in place that
    keeps the size and puts the old mtime back still moves ctime; a replaced file has a new inode)."""
    try:
        st = os.stat(ref.path)
    except OSError:
        return None
    return (f"{ref.path}|{ref.storage}|{ref.io}|{ref.slot}|{ref.offset}|{st.st_size}|{st.st_mtime_ns}|"
            f"{st.st_ctime_ns}|{st.st_ino}")
