"""Synthesise CANN binary dump files (FORMATS.md §1.2) for tests, samples and benchmarks.

Values are encoded to the stored bits here (bfloat16 round-to-nearest-even from float32, float8
by an arithmetic encoder written from the bit definitions, int4/int2 packed low bits first, uint1
most significant bit first — the MindSpore conventions), moved to the device layout by
``device_layout.to_device`` and written after a ``DumpData`` header, in the order inputs,
outputs, buffers, spaces.  Opdebug payloads are produced elsewhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np

from dumpscope.core.formats.device_format import FORMAT_CODE_OF, canonical_format
from dumpscope.core.formats.dtypes import PROTO_CODE_OF, itemsize_bits, normalize_dtype
from dumpscope.core.formats import dump_data_pb2 as pb
from synth.device_layout import to_device


@dataclass
class SynthTensor:
    """A tensor to write: logical values plus how the device stores them.

    ``source`` is the axis order of ``array`` for 4-/5-D device formats (default NCHW/NCDHW);
    ``original_shape`` defaults to ``array.shape`` (``()`` with ``record_original_shape=False``
    leaves the header field out).  ``size`` overrides the declared byte size; ``dtype_code`` /
    ``format_code`` override the header enums (to test unknown values).
    """

    array: np.ndarray
    dtype: str
    format: str = "ND"
    original_shape: Optional[Sequence[int]] = None
    c0: Optional[int] = None
    source: Optional[str] = None
    sub_format: int = 0
    original_op: str = ""
    record_original_shape: bool = True
    size: Optional[int] = None
    dtype_code: Optional[int] = None
    format_code: Optional[int] = None


# ---------------------------------------------------------------------------------------------
# value -> stored element codes


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, round to nearest even; NaN -> quiet NaN."""
    u = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    return np.where(nan, ((u >> 16) | 0x0040).astype(np.uint16), rounded).astype(np.uint16)


def _minifloat_codes(values: np.ndarray, ebits: int, mbits: int, bias: int, e4m3fn: bool) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    sign = np.signbit(v).astype(np.int64) << 7
    a = np.abs(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        _, ex = np.frexp(np.where(a > 0, a, 1.0))
        e = np.maximum(ex - 1, 1 - bias)  # exponent of the leading bit, clamped to the subnormal range
        m = np.round(np.where(np.isfinite(a), a, 0.0) / np.ldexp(1.0, e - mbits)).astype(np.int64)  # half-even
    bump = m >= (2 << mbits)
    e = np.where(bump, e + 1, e)
    m = np.where(bump, m >> 1, m)
    normal = m >= (1 << mbits)
    field = np.where(normal, e + bias, 0)
    man = np.where(normal, m - (1 << mbits), m)
    emax = (1 << ebits) - 1
    code = (field << mbits) | man
    if e4m3fn:
        overflow = (field > emax) | ((field == emax) & (man == (1 << mbits) - 1)) | np.isinf(a)
        code = np.where(overflow | np.isnan(a), 0x7F, code)
    else:
        overflow = (field >= emax) | np.isinf(a)
        code = np.where(overflow, emax << mbits, code)
        code = np.where(np.isnan(a), (emax << mbits) | 1, code)
    return (np.where(np.isnan(a), code, code | sign)).astype(np.uint8)


def fp8_codes(values: np.ndarray, dtype: str) -> np.ndarray:
    """float values -> float8 codes (round to nearest even; exact for representable values)."""
    name = normalize_dtype(dtype)
    if name == "float8_e5m2":
        return _minifloat_codes(values, 5, 2, 15, False)
    if name == "float8_e4m3fn":
        return _minifloat_codes(values, 4, 3, 7, True)
    if name == "float8_e8m0fnu":
        v = np.asarray(values, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            code = np.clip(np.round(np.log2(v)), -127, 127) + 127
        return np.where(np.isnan(code) | (v <= 0), 255, code).astype(np.uint8)
    raise ValueError(f"not a float8 dtype: {dtype}")


def element_codes(array: np.ndarray, dtype: str) -> np.ndarray:
    """Logical values -> one stored code per element (same shape), ready for the layout transform."""
    name = normalize_dtype(dtype)
    a = np.asarray(array)
    if name == "bool":
        return (a != 0).astype(np.uint8)
    if name == "bfloat16":
        return bf16_bits(a.astype(np.float32))
    if name.startswith("float8_"):
        return fp8_codes(a, name)
    if name == "complex32":
        c = a.astype(np.complex64)
        re = c.real.astype(np.float16).view(np.uint16).astype(np.uint32)
        im = c.imag.astype(np.float16).view(np.uint16).astype(np.uint32)
        return re | (im << 16)
    if name in ("int4", "int2"):
        lo, hi = (-8, 7) if name == "int4" else (-2, 1)
        if a.size and (a.min() < lo or a.max() > hi):
            raise ValueError(f"values out of {name} range")
        return a.astype(np.int8)
    if name in ("uint1", "uint2"):
        return a.astype(np.uint8)
    return a.astype(np.dtype(name).newbyteorder("<"))


def pack_codes(codes: np.ndarray, dtype: str) -> bytes:
    """Device-layout codes -> bytes on disk."""
    name = normalize_dtype(dtype)
    flat = codes.reshape(-1)
    if name == "int4":
        nib = (flat.astype(np.int16) & 0xF).astype(np.uint8)
        if nib.size % 2:
            nib = np.append(nib, np.uint8(0))
        return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()
    if name in ("int2", "uint2"):
        q = (flat.astype(np.int16) & 0x3).astype(np.uint8)
        q = np.concatenate([q, np.zeros((-q.size) % 4, np.uint8)])
        return (q[0::4] | (q[1::4] << 2) | (q[2::4] << 4) | (q[3::4] << 6)).astype(np.uint8).tobytes()
    if name == "uint1":
        return np.packbits(flat.astype(np.uint8) & 1, bitorder="big").tobytes()
    if name == "complex32":
        return flat.astype("<u4").tobytes()
    return np.ascontiguousarray(flat).tobytes()


def device_bytes(t: SynthTensor) -> tuple[bytes, tuple[int, ...], tuple[int, ...]]:
    """(payload bytes, device shape, original shape) of one tensor."""
    name = normalize_dtype(t.dtype)
    codes = element_codes(t.array, name)
    fmt = canonical_format(t.format)
    dev = to_device(codes, fmt, c0=t.c0, source=t.source, groups=max(1, t.sub_format),
                    itemsize_bits=itemsize_bits(name))
    original = tuple(t.original_shape) if t.original_shape is not None else tuple(np.shape(t.array))
    return pack_codes(dev, name), tuple(dev.shape), original


# ---------------------------------------------------------------------------------------------
# DumpData header + file


def _fill(msg, t: SynthTensor, payload: bytes, dev: tuple[int, ...], original: tuple[int, ...]) -> None:
    name = normalize_dtype(t.dtype)
    msg.data_type = t.dtype_code if t.dtype_code is not None else PROTO_CODE_OF[name]
    fmt = canonical_format(t.format)
    msg.format = t.format_code if t.format_code is not None else FORMAT_CODE_OF.get(fmt, FORMAT_CODE_OF["ND"])
    msg.shape.dim.extend(dev)
    if t.record_original_shape:
        msg.original_shape.dim.extend(original)
    msg.sub_format = t.sub_format
    msg.size = t.size if t.size is not None else len(payload)


def encode_dump(op_name: str, inputs: Sequence[SynthTensor], outputs: Sequence[SynthTensor], dump_time: int,
                buffers: Sequence[bytes] = (), spaces: Sequence[bytes] = (), version: str = "2.0",
                attrs: Optional[dict[str, str]] = None) -> bytes:
    """A complete dump file image: u64 header length, DumpData header, payloads in §1.2 order."""
    msg = pb.DumpData()
    msg.version = version
    msg.dump_time = dump_time
    msg.op_name = op_name
    payloads: list[bytes] = []
    for t in inputs:
        data, dev, orig = device_bytes(t)
        _fill(msg.input.add(), t, data, dev, orig)
        payloads.append(data)
    for t in outputs:
        data, dev, orig = device_bytes(t)
        out = msg.output.add()
        _fill(out, t, data, dev, orig)
        if t.original_op:
            out.original_op.name = t.original_op
        payloads.append(data)
    for b in buffers:
        msg.buffer.add(buffer_type=0, size=len(b))
        payloads.append(bytes(b))
    for s in spaces:
        msg.space.add(type=0, size=len(s))
        payloads.append(bytes(s))
    for k, v in (attrs or {}).items():
        msg.attr.add(name=k, value=v)
    header = msg.SerializeToString()
    return len(header).to_bytes(8, "little") + header + b"".join(payloads)


def varint(v: int) -> bytes:
    """A protobuf base-128 varint (for hand-assembled headers)."""
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if not v:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def header_template(inputs: Sequence[SynthTensor], outputs: Sequence[SynthTensor]) -> tuple[bytes, bytes]:
    """(header without op_name/dump_time, payload) of one encoded dump, for stamping many files fast."""
    img = encode_dump("", inputs, outputs, 0)
    h = int.from_bytes(img[:8], "little")
    return img[8:8 + h], img[8 + h:]


def stamp_dump(template: tuple[bytes, bytes], op_name: str, dump_time: int) -> bytes:
    """A whole dump file from a ``header_template``: ``dump_time`` (field 2) and ``op_name`` (field 6)
    appended as protobuf fields, so every file has a valid, distinct header."""
    head, payload = template
    nb = op_name.encode()
    head = head + b"\x10" + varint(dump_time) + b"\x32" + varint(len(nb)) + nb
    return len(head).to_bytes(8, "little") + head + payload


def file_name_of(name: str) -> str:
    """An op name spelled as the dump writer spells it in file names (written apart from the readers)."""
    for ch in "/.\\ ":
        name = name.replace(ch, "_")
    return name


def write_dump(directory: Union[str, os.PathLike], op_type: str, op_name: str, task: int, stream: Optional[int],
               ts: int, inputs: Sequence[SynthTensor] = (), outputs: Sequence[SynthTensor] = (),
               buffers: Sequence[bytes] = (), spaces: Sequence[bytes] = (), suffix: str = "",
               file_name: Optional[str] = None) -> Path:
    """Write ``{op_type}.{op_name}.{task}.{stream}.{ts}{suffix}`` (names sanitised) and return its path.

    ``stream=None`` gives the old 4-field name; ``suffix`` e.g. ``".4.1.0.0"`` gives an FFTS+ name;
    ``file_name`` overrides the name entirely (mapping.csv aliases).
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if file_name is None:
        mid = f"{task}.{stream}" if stream is not None else f"{task}"
        file_name = f"{file_name_of(op_type)}.{file_name_of(op_name)}.{mid}.{ts}{suffix}"
    path = d / file_name
    path.write_bytes(encode_dump(op_name, inputs, outputs, ts, buffers, spaces))
    return path


def write_sparse_dump(path: Union[str, os.PathLike], op_name: str, fmt: str, device_shape: Sequence[int],
                      original: Sequence[int]) -> int:
    """A CANN dump file of one float16 output in ``fmt`` whose payload is a hole of zeros (a multi-GB weight
    costs no disk): the header of a 1-element stand-in, its shape fields rewritten.  Returns the payload's
    bytes.  The memory test and benchmark of device-layout weights write their big files with it."""
    small = np.zeros((1,) * len(original), np.float16)
    blob = encode_dump(op_name, [], [SynthTensor(small, "float16", fmt)], 1718260502000000)
    msg = pb.DumpData()
    msg.ParseFromString(blob[8:8 + int.from_bytes(blob[:8], "little")])
    out = msg.output[0]
    del out.shape.dim[:]
    out.shape.dim.extend(device_shape)
    del out.original_shape.dim[:]
    out.original_shape.dim.extend(original)
    out.size = int(np.prod(device_shape)) * 2
    head = msg.SerializeToString()
    with open(path, "wb") as fh:
        fh.write(len(head).to_bytes(8, "little") + head)
        fh.truncate(8 + len(head) + out.size)
    return out.size
