"""Writers for small API-level dump trees (msprobe, Troubleshooter) and torch ``.pt`` files.

Tests, benchmarks and the sample generator need these trees without torch, MindSpore or
an NPU.  The layout mimics the real tools (see FORMATS.md §9/§10); values come from a tiny
numpy conv → batchnorm → relu network so two runs can be compared meaningfully.
"""

from __future__ import annotations

import math

import io
import json
import os
import struct
import zipfile
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

# ----------------------------------------------------------------------------- API calls


@dataclass
class ApiCall:
    """One API call of a run: ``{api_type}.{api_name}.{count}.{direction}`` in msprobe terms."""

    api_type: str  # "Functional", "Tensor", "Torch", ...
    api_name: str  # "conv2d", "__add__", ...
    count: int
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    direction: str = "forward"
    module: str = ""  # owning module path ("conv1"), used for construct.json / LAYER markers
    module_class: str = ""  # owning module class ("Conv2d")
    stack: list[str] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)  # non-tensor kwargs

    @property
    def msprobe_name(self) -> str:
        return f"{self.api_type}.{self.api_name}.{self.count}.{self.direction}"

    @property
    def ts_name(self) -> str:
        ts_type = {"Module": "NN", "Cell": "NN"}.get(self.api_type, self.api_type)
        return f"{ts_type}_{self.api_name}_{self.count}_{self.direction}"

    @property
    def module_node(self) -> str:
        """msprobe name of the owning module call ("" when the call is top level)."""
        if not self.module:
            return ""
        return f"Module.{self.module}.{self.module_class or 'Module'}.{self.direction}.0"


def _conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """3x3 'same' convolution, stride 1, NCHW, via im2col (float64 accumulation)."""
    n, c, h, wd = x.shape
    k = w.shape[-1]
    pad = k // 2
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.stack(
        [xp[:, :, i:i + h, j:j + wd] for i in range(k) for j in range(k)], axis=2
    )  # n, c, k*k, h, w
    wf = w.astype(np.float64).reshape(w.shape[0], c, k * k)
    out = np.einsum("nckhw,ock->nohw", cols, wf) + b.astype(np.float64)[None, :, None, None]
    return out.astype(np.float32)


def simulate_small_net(eps: float = 1e-5, seed: int = 0) -> list[ApiCall]:
    """conv2d → batch_norm (inference, running stats) → relu on fixed random data.

    Only the BatchNorm output depends on ``eps``: comparing two runs with different eps
    must name ``Functional.batch_norm.0.forward`` output 0 as the first divergence.
    Running variances are small (0.01–0.05) so a changed eps moves the output visibly.
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(4) * 0.1).astype(np.float32)
    conv = _conv2d(x, w, b)
    mean = rng.standard_normal(4).astype(np.float32) * 0.1
    var = rng.uniform(0.01, 0.05, 4).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 4).astype(np.float32)
    beta = (rng.standard_normal(4) * 0.1).astype(np.float32)
    shape = (1, 4, 1, 1)
    bn = ((conv - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + np.float32(eps))
          * gamma.reshape(shape) + beta.reshape(shape)).astype(np.float32)
    relu = np.maximum(bn, 0).astype(np.float32)
    src = "File /home/user/net.py, line {n}, in forward, \n {code}"
    return [
        ApiCall("Functional", "conv2d", 0, [x, w, b], [conv], module="conv1",
                module_class="Conv2d", stack=[src.format(n=12, code="x = self.conv1(x)")]),
        ApiCall("Functional", "batch_norm", 0, [conv, mean, var, gamma, beta], [bn],
                module="bn1", module_class="BatchNorm2d", kwargs={"eps": eps},
                stack=[src.format(n=13, code="x = self.bn1(x)")]),
        ApiCall("Functional", "relu", 0, [bn], [relu], module="relu", module_class="ReLU",
                stack=[src.format(n=14, code="return self.relu(x)")]),
    ]


# ----------------------------------------------------------------------------- .pt writer

_STORAGE_OF = {
    "float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage", "int64": "LongStorage", "int32": "IntStorage",
    "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage",
    "complex64": "ComplexFloatStorage", "complex128": "ComplexDoubleStorage",
}


def to_bfloat16_bits(a: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bit patterns (uint16), round to nearest even, NaN kept NaN."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(a, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), rounded).astype(np.uint16)


def _op_str(text: str) -> bytes:
    raw = text.encode("utf-8")
    return b"X" + struct.pack("<I", len(raw)) + raw


def _op_int(value: int) -> bytes:
    if 0 <= value < 256:
        return b"K" + bytes([value])
    if -(2 ** 31) <= value < 2 ** 31:
        return b"J" + struct.pack("<i", value)
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw  # LONG1


def _op_int_tuple(values: Sequence[int]) -> bytes:
    return b"(" + b"".join(_op_int(v) for v in values) + b"t"


def rebuild_tensor_pickle(storage_type: str, key: str, numel: int, offset: int,
                          size: Sequence[int], stride: Sequence[int],
                          requires_grad: bool = False, storage_module: str = "torch") -> bytes:
    """A protocol-2 pickle laid out like torch's ``_rebuild_tensor_v2`` output."""
    return b"".join([
        b"\x80\x02",  # PROTO 2
        b"ctorch._utils\n_rebuild_tensor_v2\nq\x00",  # GLOBAL + BINPUT 0
        b"((",  # MARK (args)  MARK (persistent id)
        _op_str("storage"),
        f"c{storage_module}\n{storage_type}\n".encode(), b"q\x01",
        _op_str(key), _op_str("cpu"), _op_int(numel),
        b"tq\x02Q",  # TUPLE, BINPUT 2, BINPERSID
        _op_int(offset), _op_int_tuple(size), _op_int_tuple(stride),
        b"\x88" if requires_grad else b"\x89",  # NEWTRUE / NEWFALSE
        b"ccollections\nOrderedDict\nq\x03)R",  # OrderedDict() via REDUCE
        b"tq\x04R.",  # TUPLE, BINPUT, REDUCE, STOP
    ])


def write_pt(path: str, array: np.ndarray, *, dtype: Optional[str] = None,
             offset: int = 0, stride: Optional[Sequence[int]] = None,
             storage: Optional[np.ndarray] = None, archive: str = "archive",
             pickle_bytes: Optional[bytes] = None) -> str:
    """Write ``array`` as torch would ``torch.save`` a single tensor (zip format).

    ``dtype="bfloat16"`` stores bfloat16 bits of a float32 array.  ``storage``/``offset``/
    ``stride`` write a strided view of a larger storage; ``pickle_bytes`` replaces the
    pickle entirely (for refusal tests).
    """
    logical = dtype or np.asarray(array).dtype.name
    a = np.asarray(array)
    base = np.asarray(storage) if storage is not None else np.ascontiguousarray(a).reshape(-1)
    if logical == "bfloat16":
        raw = to_bfloat16_bits(base.astype(np.float32)).astype("<u2").tobytes()
    else:
        raw = base.astype(np.dtype(logical).newbyteorder("<")).tobytes()
    if stride is None:
        stride, acc = [], 1
        for d in reversed(a.shape):
            stride.insert(0, acc)
            acc *= max(d, 1)
    pkl = pickle_bytes or rebuild_tensor_pickle(
        _STORAGE_OF[logical], "0", int(base.size), offset, a.shape, stride)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, payload in ((f"{archive}/data.pkl", pkl), (f"{archive}/byteorder", "little"),
                              (f"{archive}/data/0", raw), (f"{archive}/version", "3\n")):
            # a fixed timestamp keeps generated samples byte-identical between runs
            zf.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), payload)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(buf.getvalue())
    return path


# ----------------------------------------------------------------------------- msprobe

_MS_DTYPES = {
    "float32": "Float32", "float16": "Float16", "float64": "Float64", "bfloat16": "BFloat16",
    "int64": "Int64", "int32": "Int32", "int8": "Int8", "uint8": "UInt8", "bool": "Bool",
}


def _stats(a: np.ndarray) -> dict[str, Any]:
    f = np.asarray(a, dtype=np.float64)
    if f.size == 0:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    # exactly rounded sums (math.fsum): the same digits whatever numpy's summation order
    return {"Max": float(f.max()), "Min": float(f.min()), "Mean": math.fsum(f.reshape(-1).tolist()) / f.size,
            "Norm": math.sqrt(math.fsum((f * f).reshape(-1).tolist()))}


def write_msprobe_tree(root: str, calls: Sequence[ApiCall], *, framework: str = "pytorch",
                       task: str = "tensor", step: int = 0, rank: Optional[int] = 0,
                       pt_names: Sequence[str] = (), stack_layout: str = "new") -> str:
    """Write ``{root}/step{step}/rank{rank}/`` (``rank`` without id when ``rank`` is None).

    Tensors go to ``dump_tensor_data/{name}.{io}.{i}.npy``; data names listed in
    ``pt_names`` are written as ``.pt`` instead.  Returns the rank directory.
    """
    rank_dir = os.path.join(root, f"step{step}", "rank" if rank is None else f"rank{rank}")
    data_dir = os.path.join(rank_dir, "dump_tensor_data")
    os.makedirs(data_dir if task == "tensor" else rank_dir, exist_ok=True)
    ttype = "torch.Tensor" if framework == "pytorch" else "mindspore.Tensor"
    data: dict[str, Any] = {}
    construct: dict[str, Optional[str]] = {}
    stacks: dict[str, list[str]] = {}

    def item(a: np.ndarray, base: str) -> dict[str, Any]:
        name = a.dtype.name
        dt = f"torch.{name}" if framework == "pytorch" else _MS_DTYPES.get(name, name)
        entry: dict[str, Any] = {"type": ttype, "dtype": dt, "shape": list(a.shape), **_stats(a)}
        if framework == "pytorch":
            entry["requires_grad"] = False
        if task == "tensor":
            ext = ".pt" if base in pt_names else ".npy"
            entry["data_name"] = base + ext
            if ext == ".pt":
                write_pt(os.path.join(data_dir, base + ext), a)
            else:
                np.save(os.path.join(data_dir, base + ext), a)
        return entry

    for call in calls:
        name = call.msprobe_name
        ins = [item(a, f"{name}.input.{i}") for i, a in enumerate(call.inputs)]
        outs = [item(a, f"{name}.output.{i}") for i, a in enumerate(call.outputs)]
        if call.direction == "forward":
            kwargs = {k: {"type": type(v).__name__, "value": v} for k, v in call.kwargs.items()}
            data[name] = {"input_args": ins, "input_kwargs": kwargs, "output": outs}
        else:
            data[name] = {"input": ins, "output": outs}
        node = call.module_node
        construct[name] = node or None
        if node:
            construct.setdefault(node, "")
        if call.stack:
            stacks[name] = list(call.stack)

    meta = {"task": task, "level": "mix", "framework": framework,
            "dump_data_dir": data_dir if task == "tensor" else None, "data": data}
    _write_json(os.path.join(rank_dir, "dump.json"), meta)
    _write_json(os.path.join(rank_dir, "construct.json"), construct)
    if stack_layout == "new":
        groups: dict[tuple[str, ...], list[str]] = {}
        for name, lines in stacks.items():
            groups.setdefault(tuple(lines), []).append(name)
        stack_obj: Any = {str(i): [names, list(lines)] for i, (lines, names) in enumerate(groups.items())}
    else:
        stack_obj = stacks
    _write_json(os.path.join(rank_dir, "stack.json"), stack_obj)
    return rank_dir


def _write_json(path: str, obj: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1)


# ----------------------------------------------------------------------------- Troubleshooter


def write_troubleshooter_tree(root: str, calls: Sequence[ApiCall], *, framework: str = "torch",
                              rank: int = 0, dump_step: int = 0, markers: bool = True,
                              info_ext: str = ".csv", skip_npy: Sequence[str] = ()) -> str:
    """Write a Troubleshooter 1.0.18 ``api_dump`` tree for ``rank``; return the rank dir.

    ``{fw}_api_dump/{prefix}.npy``, ``{fw}_api_dump_info{info_ext}`` (one JSON array per
    line: ``[prefix, step, [], dtype, shape, [max, min, mean], md5, l2norm]``) and
    ``{fw}_api_dump_stack.json``.  With ``markers`` (torch/mindtorch), a
    ``LAYER_{module}_forward_input`` marker (npy + info row) precedes the first call of
    each module.
    Prefixes in ``skip_npy`` get an info row but no file (statistics-only).
    """
    rank_dir = os.path.join(root, f"rank{rank}")
    npy_dir = os.path.join(rank_dir, f"{framework}_api_dump")
    os.makedirs(npy_dir, exist_ok=True)
    rows: list[str] = []
    stacks: dict[str, list[str]] = {}
    last_module = None

    def put(prefix: str, a: np.ndarray) -> None:
        f = np.asarray(a, dtype=np.float64)
        dtype = f"torch.{a.dtype.name}" if framework != "mindspore" else _MS_DTYPES.get(a.dtype.name, a.dtype.name)
        stats = ([float(f.max()), float(f.min()), math.fsum(f.reshape(-1).tolist()) / f.size] if f.size
                 else [float("nan")] * 3)
        l2 = float(np.sqrt((f * f).sum())) if f.size else float("nan")
        rows.append(json.dumps([prefix, dump_step, [], dtype, list(a.shape), stats, [], l2]))
        if prefix not in skip_npy:
            np.save(os.path.join(npy_dir, prefix + ".npy"), a)

    for call in calls:
        if markers and framework != "mindspore" and call.module and call.module != last_module:
            put(f"LAYER_{call.module}_forward_input", np.zeros(1, dtype=np.float32))
            last_module = call.module
        base = call.ts_name
        for io_kind, arrays in (("input", call.inputs), ("output", call.outputs)):
            for i, a in enumerate(arrays):
                put(f"{base}_{io_kind}.{i}" if len(arrays) > 1 else f"{base}_{io_kind}", a)
        if call.stack and call.direction == "forward":
            stacks[f"{base}_stack_info"] = list(call.stack)
    info = os.path.join(rank_dir, f"{framework}_api_dump_info{info_ext}")
    with open(info, "w", encoding="utf-8") as fh:
        fh.write("\n".join(rows) + "\n")
    _write_json(os.path.join(rank_dir, f"{framework}_api_dump_stack.json"), stacks)
    return rank_dir
