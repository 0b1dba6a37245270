"""CANN binary operator dump files (FORMATS.md §1.2, §1.6).

Layout: ``uint64 LE H`` | ``H`` bytes protobuf ``toolkit.dumpdata.DumpData`` | raw tensor bytes in the
order inputs, outputs, buffers, spaces (NOT proto field order).  ``read_prefix_header`` is the
indexing hot path: one ``open``, one bounded read of the first 2 KiB (a second read only when the
header is larger; ``lseek`` instead of ``fstat`` for the size), one protobuf parse, and the tensor
descriptions taken from a cache of header layouts (upb attribute access, not parsing, dominates the
cost, and ops of the same shapes share a layout; a pure-Python wire decoder measured slower).
Tensor payloads are read lazily by ``load_raw`` /
``load_tensor`` (pread for small tensors, read-only memmap for large ones).

Never writes into the dump tree.  Bad input raises ``DumpFormatError`` whose message is one line
starting with the file path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from math import prod
from typing import Optional, Union

import numpy as np

from dumpscope.core.formats import dtypes
from dumpscope.core.formats.shapes import impossible_header
from dumpscope.core.formats.device_format import FORMAT_NAMES, DeviceFormatError, to_logical
from dumpscope.core.formats.device_format import logical_shape as device_logical_shape
from dumpscope.core.formats import dump_data_pb2

PathLike = Union[str, "os.PathLike[str]"]

_FIRST_READ = 2 << 10  # headers are usually < 1 KiB; larger ones get one more pread
_MMAP_FROM = 4 << 20  # payloads at least this big are memory-mapped instead of read
NANO_MAGIC = b"\x5a\x5a\x5a\x5a"
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)
_DumpData = dump_data_pb2.DumpData


class DumpFormatError(ValueError):
    """A CANN dump file whose header (or requested tensor) cannot be read."""


@dataclass(slots=True)
class CannTensor:
    """One tensor slice of a dump file.

    ``io`` is "input", "output", "buffer" or "space".  ``shape`` is the device shape,
    ``original_shape`` the logical shape as recorded (empty when the writer left it out).
    ``offset`` is the absolute byte offset of the payload in the file; ``truncated`` is True when
    the file ends before ``offset + size``.
    """

    io: str
    slot: int
    dtype: str  # canonical spelling or "unknown(N)"
    dtype_code: int
    format: str  # "NC1HWC0", … or "UNKNOWN(N)"
    format_code: int
    shape: tuple[int, ...]
    original_shape: tuple[int, ...]
    sub_format: int
    size: int
    offset: int
    original_op_name: str = ""
    truncated: bool = False

    @property
    def logical_shape(self) -> tuple[int, ...]:
        """The shape ``load_tensor`` returns: ``original_shape`` when recorded, else derived
        from the device shape (padded channels kept; plain formats keep the device shape)."""
        if self.original_shape:
            return self.original_shape
        return device_logical_shape(self.format, self.shape, ())


@dataclass(slots=True)
class CannHeader:
    """The decoded header of one dump file plus where each payload lives."""

    path: str
    file_size: int
    version: str
    dump_time: int
    op_name: str
    inputs: list[CannTensor]
    outputs: list[CannTensor]
    buffers: list[CannTensor]
    spaces: list[CannTensor]
    header_len: int
    data_offset: int
    complete: bool  # every declared payload byte is present in the file
    expected_size: int = 0  # 8 + H + sum of all payload sizes
    attrs: dict[str, str] = field(default_factory=dict)

    @property
    def tensors(self) -> list[CannTensor]:
        """All slices in file order: inputs, outputs, buffers, spaces."""
        return self.inputs + self.outputs + self.buffers + self.spaces

    @property
    def trailing_bytes(self) -> int:
        """Bytes after the last declared payload (0 for a well-formed file)."""
        return max(0, self.file_size - self.expected_size)


def _read_prefix(path: str, at: Optional[tuple[int, str]] = None) -> tuple[int, bytes, int]:
    """(file size, first bytes, fd) — the caller closes fd.  ``at`` = (folder fd, file name)
    opens relative to an open folder: the kernel resolves one name, not the whole path."""
    try:
        fd = os.open(path, _OPEN_FLAGS) if at is None else os.open(at[1], _OPEN_FLAGS, dir_fd=at[0])
    except OSError as exc:
        raise DumpFormatError(f"{path}: cannot open: {exc.strerror or exc}") from None
    try:
        buf = os.read(fd, _FIRST_READ)
        # a short read is the whole file; otherwise one lseek (cheaper than fstat) gives its size
        size = len(buf) if len(buf) < _FIRST_READ else os.lseek(fd, 0, os.SEEK_END)
    except OSError as exc:
        os.close(fd)
        raise DumpFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return size, buf, fd


def _read_more(fd: int, path: str, buf: bytes, want: int) -> bytes:
    parts = [buf]
    have = len(buf)
    while have < want:
        chunk = os.pread(fd, want - have, have)
        if not chunk:
            raise DumpFormatError(f"{path}: file ended after {have} bytes while reading a {want}-byte header")
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts)


def read_prefix_header(path: PathLike, max_header_bytes: int = 64 << 20,
                       at: Optional[tuple[int, str]] = None) -> tuple[str, int, int, "HeaderFields"]:
    """(path, file size, header length H, decoded fields) of a CANN dump file: the indexer's
    hot path, with no per-tensor objects built (see ``HeaderFields``; ``at`` as in ``_read_prefix``)."""
    p = os.fspath(path)
    size, buf, fd = _read_prefix(p, at)
    try:
        h = _header_length(p, size, buf, max_header_bytes)
        if 8 + h > len(buf):
            buf = _read_more(fd, p, buf, 8 + h)
    finally:
        os.close(fd)
    return p, size, h, _decode(p, buf, h)


def _header_length(p: str, size: int, buf: bytes, max_header_bytes: int) -> int:
    """H from the first bytes of a file of ``size`` bytes, checked against the file and the limit."""
    if size < 8 or len(buf) < 8:
        raise DumpFormatError(f"{p}: file is {size} bytes, too short for a dump header")
    h = int.from_bytes(buf[:8], "little")
    if buf[8:12] == NANO_MAGIC:
        raise DumpFormatError(f"{p}: nano/TLV dump container (magic 0x5A5A5A5A) is not supported")
    if h > size - 8:
        raise DumpFormatError(f"{p}: header length {h} exceeds file size {size}")
    if h > max_header_bytes:
        raise DumpFormatError(f"{p}: header length {h} exceeds the {max_header_bytes}-byte limit")
    return h


def header_from_bytes(path: PathLike, data: bytes, max_header_bytes: int = 64 << 20) -> CannHeader:
    """``read_header`` of a file already read whole into ``data`` (same checks, same result): compare
    reads each small dump file once and decodes its header and every payload from that one buffer."""
    p = os.fspath(path)
    h, fields = fields_from_bytes(p, data, max_header_bytes)
    return build_header(p, len(data), h, fields)


def fields_from_bytes(path: str, data: bytes, max_header_bytes: int = 64 << 20) -> tuple[int, HeaderFields]:
    """``(H, decoded header)`` of a file read whole (``header_from_bytes``' checks): what ``build_header``
    makes of it depends on the path, ``op_name`` and ``dump_time`` only in those fields, so a reader can
    keep the rest per (layout, H, file size)."""
    h = _header_length(path, len(data), data, max_header_bytes)
    return h, _decode(path, data, h)


def read_header(path: PathLike, max_header_bytes: int = 64 << 20) -> CannHeader:
    """Read and validate the header of a CANN dump file (bounded: 8 + H bytes at most).

    Raises ``DumpFormatError`` when the header itself is unreadable (too short, length beyond
    the file, bad protobuf, nano/TLV container).  A file whose payloads extend past its end
    (still being written, truncated copy) is returned with ``complete=False`` and the affected
    tensors marked ``truncated``.
    """
    p, size, h, fields = read_prefix_header(path, max_header_bytes)
    return build_header(p, size, h, fields)


@dataclass(frozen=True, slots=True)
class TensorLayout:
    """What a header says of its tensors, apart from the op name and dump time.

    Headers of ops with the same shapes differ only in ``op_name`` and ``dump_time``, so one
    decoded layout is shared by all of them (``_decode`` caches it): ``inputs``/``outputs``
    hold ``(dtype code, format code, shape, original shape, sub_format, size, original op)``.
    """

    version: str
    inputs: tuple
    outputs: tuple
    buffers: tuple
    spaces: tuple
    attrs: tuple  # ((name, value), ...)
    payload: int  # sum of every payload size
    #: per header length, what a layout made of it (the CANN layout keeps its packed tensors here)
    memo: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class HeaderFields:
    dump_time: int
    op_name: str
    layout: TensorLayout


_LAYOUTS: dict[bytes, TensorLayout] = {}
_LAYOUTS_MAX = 4096  # distinct tensor layouts kept; a model has a few hundred at most


def _tensor_desc(t, has_op: bool) -> tuple:
    op = t.original_op.name if has_op and t.HasField("original_op") else ""
    return (t.data_type, t.format, tuple(t.shape.dim), tuple(t.original_shape.dim), t.sub_format, t.size, op)


def _decode(path: str, buf: bytes, h: int) -> HeaderFields:
    """Parse the DumpData protobuf; tensor descriptions come from the layout cache (``_layout_of``)."""
    msg = _parsed(path, buf, h)
    op_name, dump_time = msg.op_name, msg.dump_time
    return HeaderFields(dump_time, op_name, _layout_of(msg))


def layout_from_bytes(path: str, data: bytes, max_header_bytes: int = 64 << 20) -> tuple[int, TensorLayout]:
    """``(H, layout)`` of a file read whole: ``fields_from_bytes`` without the op name and dump time,
    which compare's reader does not need (the same checks and layout object, ~15 % less time)."""
    h = _header_length(path, len(data), data, max_header_bytes)
    return h, _layout_of(_parsed(path, data, h))


def _parsed(path: str, buf: bytes, h: int):
    """The DumpData message of the header in ``buf`` (``H`` bytes after the length), or the one-line error."""
    msg = _DumpData()
    try:
        msg.ParseFromString(buf[8:8 + h])  # a slice of a small header beats a memoryview
    except Exception as exc:  # protobuf raises DecodeError (and others on junk)
        raise _not_protobuf(path, exc) from None
    return msg


def _layout_of(msg) -> TensorLayout:
    """The layout of a parsed header, from the cache.  Reading every tensor attribute through upb costs four
    times the parse itself, so the message minus ``op_name``/``dump_time`` (cleared here: read them first)
    is re-serialised as the cache key."""
    msg.ClearField("op_name")
    msg.ClearField("dump_time")
    key = msg.SerializeToString()  # DumpData has no map fields: serialisation is already canonical
    layout = _LAYOUTS.get(key)
    return layout if layout is not None else _new_layout(key, msg)


def _not_protobuf(path: str, exc: Exception) -> DumpFormatError:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return DumpFormatError(f"{path}: header is not a valid DumpData protobuf ({reason})")


def _new_layout(key: bytes, msg) -> TensorLayout:
    """The ``TensorLayout`` of a parsed header without op name and dump time (serialised: ``key``), kept."""
    ins = tuple(_tensor_desc(t, False) for t in msg.input)
    outs = tuple(_tensor_desc(t, True) for t in msg.output)
    bufs = tuple(b.size for b in msg.buffer)
    spcs = tuple(s.size for s in msg.space)
    payload = sum(t[5] for t in ins) + sum(t[5] for t in outs) + sum(bufs) + sum(spcs)
    layout = TensorLayout(msg.version, ins, outs, bufs, spcs, tuple((a.name, a.value) for a in msg.attr), payload)
    if len(_LAYOUTS) >= _LAYOUTS_MAX:
        _LAYOUTS.clear()
    _LAYOUTS[key] = layout
    return layout


def _format_name(code: int) -> str:
    name = FORMAT_NAMES.get(code)
    return name if name is not None else f"UNKNOWN({code})"


def _tensor(io: str, slot: int, t: tuple, offset: int, size_file: int) -> CannTensor:
    dcode, fcode, shape, orig, sub, size, op = t
    return CannTensor(io, slot, dtypes.proto_dtype_name(dcode), dcode, _format_name(fcode), fcode, shape, orig, sub,
                      size, offset, op, offset + size > size_file)


def build_header(path: str, size: int, h: int, fields: HeaderFields) -> CannHeader:
    """The full ``CannHeader`` (per-tensor objects, offsets, truncation) from ``read_prefix_header``."""
    lay = fields.layout
    off = 8 + h
    inputs: list[CannTensor] = []
    for i, t in enumerate(lay.inputs):
        inputs.append(_tensor("input", i, t, off, size))
        off += t[5]
    outputs: list[CannTensor] = []
    for i, t in enumerate(lay.outputs):
        outputs.append(_tensor("output", i, t, off, size))
        off += t[5]
    extra: tuple[list[CannTensor], list[CannTensor]] = ([], [])
    for k, io, sizes in ((0, "buffer", lay.buffers), (1, "space", lay.spaces)):
        for i, n in enumerate(sizes):
            extra[k].append(CannTensor(io, i, "uint8", 4, "ND", 2, (n,), (n,), 0, n, off, "", off + n > size))
            off += n
    return CannHeader(path, size, lay.version, fields.dump_time, fields.op_name, inputs, outputs, extra[0],
                      extra[1], h, 8 + h, off <= size, off, dict(lay.attrs))


def check_complete(header: Union[CannHeader, PathLike]) -> bool:
    """True when the file now holds every payload byte its header declares (re-stats the file)."""
    if not isinstance(header, CannHeader):
        return read_header(header).complete
    try:
        now = os.stat(header.path).st_size
    except OSError as exc:
        raise DumpFormatError(f"{header.path}: cannot stat: {exc.strerror or exc}") from None
    return now >= header.expected_size


# ---------------------------------------------------------------------------------------------
# payloads


def _label(t: CannTensor) -> str:
    return f"{t.io}[{t.slot}]"


def _element_count(t: CannTensor) -> int:
    return prod(t.shape) if t.shape else 1


def _read_bytes(path: str, t: CannTensor, nbytes: int, data: Optional[bytes] = None) -> np.ndarray:
    if data is not None:  # the whole file, already read (``header_from_bytes``)
        if t.offset + nbytes > len(data):
            raise DumpFormatError(f"{path}: {_label(t)} is truncated: needs bytes up to {t.offset + nbytes}, "
                                  f"file has {len(data)}")
        return np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=t.offset)
    try:
        now = os.stat(path).st_size
    except OSError as exc:
        raise DumpFormatError(f"{path}: cannot stat: {exc.strerror or exc}") from None
    if t.offset + nbytes > now:
        raise DumpFormatError(f"{path}: {_label(t)} is truncated: needs bytes up to {t.offset + nbytes}, "
                              f"file has {now}")
    if nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    if nbytes >= _MMAP_FROM:
        return np.memmap(path, dtype=np.uint8, mode="r", offset=t.offset, shape=(nbytes,))
    with open(path, "rb", buffering=0) as f:
        data = os.pread(f.fileno(), nbytes, t.offset)
    if len(data) != nbytes:
        raise DumpFormatError(f"{path}: {_label(t)}: short read ({len(data)} of {nbytes} bytes)")
    return np.frombuffer(data, dtype=np.uint8)


def load_raw(path: PathLike, t: CannTensor, data: Optional[bytes] = None) -> np.ndarray:
    """The tensor decoded to exact values, still in the DEVICE layout (shaped ``t.shape``); ``data``:
    the whole file when the caller already read it (no file access then)."""
    p = os.fspath(path)
    if t.dtype.startswith("unknown("):
        raise DumpFormatError(f"{p}: {_label(t)} has unknown data type code {t.dtype_code}")
    count = _element_count(t)
    try:
        need = dtypes.nbytes_for(t.dtype, count)
    except dtypes.DtypeError as exc:
        raise DumpFormatError(f"{p}: {_label(t)}: {exc}") from None
    bad = impossible_header(t.shape, t.dtype, t.size)
    if bad:  # the indexer's problem text, word for word
        raise DumpFormatError(f"{p}: {t.io}.{t.slot}: {bad}")
    raw = _read_bytes(p, t, need, data)
    try:
        flat = dtypes.decode(raw, t.dtype, count)
    except dtypes.DtypeError as exc:
        raise DumpFormatError(f"{p}: {_label(t)}: {exc}") from None
    return flat.reshape(t.shape)


def load_tensor(path: PathLike, t: CannTensor, target: Optional[str] = None,
                data: Optional[bytes] = None) -> np.ndarray:
    """The tensor in its LOGICAL layout (``original_shape``, padding removed; see device_format).

    ``target`` names the axis order of ``original_shape`` when it is not the default
    (NCHW / NCDHW / ND); ``data`` as in ``load_raw``.
    """
    raw = load_raw(path, t, data)
    try:
        return to_logical(raw, t.format, t.shape, t.original_shape, t.sub_format, target)
    except DeviceFormatError as exc:
        raise DumpFormatError(f"{os.fspath(path)}: {_label(t)}: {exc}") from None
