"""Header-only reading of ``.npy`` files, and a pickle-free loader.

Indexing touches every ``.npy`` of a dump, so the header reader does one ``open`` and one
bounded read (≤ 64 KiB) and never looks at the payload.  Loading goes through
``np.load(..., allow_pickle=False)`` so object arrays can never be unpickled.
"""

from __future__ import annotations

import ast
import re
import os
import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"\x93NUMPY"
MAX_HEADER_READ = 64 * 1024
_FIRST_READ = 4096  # numpy's own headers are 128 bytes (a multiple of 64): one small read
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)
OBJECT_REFUSED = "object arrays are not supported (would need pickle)"


#: the descr MindSpore writes for a bfloat16 tensor (2.10 on CPU: ``{'descr': '<E2', …}`` in a file named
#: ``….BFloat16.npy``, the payload the tensor's bit patterns); numpy knows no such type, so the header
#: says ``dtype`` "bfloat16" and the payload is read as its little-endian 16-bit words
BF16_DESCR = "<E2"
BF16_WORDS = "<u2"


class NpyFormatError(ValueError):
    """A file is not a readable ``.npy`` (the message names the file)."""


@dataclass(frozen=True, slots=True)
class NpyHeader:
    shape: tuple[int, ...]
    dtype: str  # numpy spelling: "float32", "int64", "bool", "complex64", ...
    fortran_order: bool
    data_offset: int  # where the payload starts
    nbytes: int  # payload length the header promises
    file_size: int

    @property
    def truncated(self) -> bool:
        """True when the file holds fewer bytes than the header promises."""
        return self.file_size < self.data_offset + self.nbytes

    @property
    def oversized(self) -> bool:
        """True when the file holds more bytes than the header needs.  numpy's writer never pads
        after the payload, so the header is wrong: MindSpore 2.10 on CPU with ``to_float(float16)``
        writes ``'<f2'`` headers over float32 payloads, and reading them as labelled gives other
        numbers (and false NaN/Inf) with no error at all (``np.load`` ignores the extra bytes)."""
        return self.file_size > self.data_offset + self.nbytes

    def size_problem(self, name: str) -> "str | None":
        """One line naming a payload that does not match the header, or None."""
        have, need = self.file_size - self.data_offset, self.nbytes
        if self.truncated:
            return f"{name}: truncated .npy ({self.file_size} bytes, header promises {self.data_offset + need})"
        if not self.oversized:
            return None
        try:
            size = 2 if self.dtype == "bfloat16" else np.dtype(self.dtype).itemsize
        except TypeError:
            size = 0
        count = need // size if size and self.dtype != "void" else 0
        guess = ""
        if count and have % count == 0:
            fits = {2: "float16/bfloat16", 4: "float32", 8: "float64"}.get(have // count)
            guess = f" ({have // count} bytes an element: {fits}?)" if fits else f" ({have // count} bytes an element)"
        return (f"{name}: payload of {have} bytes, header says {self.dtype} {list(self.shape)} which needs {need}"
                f"{guess}: the header does not describe the data, not decoded")


def read_npy_header(path: str) -> NpyHeader:
    """Read the header of ``path``; raise ``NpyFormatError`` naming the file on bad input.

    One open, one 4 KiB read (more only for a longer header, never beyond 64 KiB), and the file
    size from the short read itself or one ``lseek``."""
    name = os.path.basename(path)
    try:
        fd = os.open(path, _OPEN_FLAGS)
        try:
            head = os.read(fd, _FIRST_READ)
            if len(head) < _FIRST_READ:
                size = len(head)
            else:
                size = os.lseek(fd, 0, os.SEEK_END)
                try:
                    start, hlen = _header_span(head, name)
                except NpyFormatError:  # reported by parse_npy_header below
                    start = hlen = 0
                if start + hlen > len(head):
                    head += os.pread(fd, min(start + hlen, MAX_HEADER_READ) - len(head), len(head))
        finally:
            os.close(fd)
    except OSError as exc:
        raise NpyFormatError(f"{name}: cannot read ({exc.strerror or exc})") from None
    return parse_npy_header(head, size, name)


def _header_span(head: bytes, name: str) -> tuple[int, int]:
    """(where the header dict starts, its length in bytes) from the preamble of a ``.npy``."""
    if len(head) < 10 or not head.startswith(MAGIC):
        raise NpyFormatError(f"{name}: not a .npy file (bad magic)")
    major, minor = head[6], head[7]
    if major == 1:
        return 10, struct.unpack_from("<H", head, 8)[0]
    if major in (2, 3):
        if len(head) < 12:
            raise NpyFormatError(f"{name}: truncated .npy header")
        return 12, struct.unpack_from("<I", head, 8)[0]
    raise NpyFormatError(f"{name}: unsupported .npy version {major}.{minor}")


#: parsed headers by their bytes: the files of one dump share a few dozen distinct headers
_PARSED: dict[bytes, tuple] = {}
_PARSED_MAX = 4096


#: the header dict exactly as ``numpy.lib.format`` writes it (simple dtypes only)
_STANDARD_HEADER = re.compile(
    r"\{'descr': '([<>|=]?[a-zA-Z]\d*)', 'fortran_order': (True|False), 'shape': \(((?:\d+, ?)*\d*)\), \}\s*$")


def parse_npy_header(head: bytes, file_size: int, name: str = "<npy>") -> NpyHeader:
    """Parse the first bytes of a ``.npy`` file (pure function, used by the fuzz tests)."""
    start, hlen = _header_span(head, name)
    end = start + hlen
    if end > MAX_HEADER_READ:
        raise NpyFormatError(f"{name}: .npy header too large ({hlen} bytes)")
    if end > len(head):
        raise NpyFormatError(f"{name}: truncated .npy header")
    known = _PARSED.get(head[:end])
    if known is not None:
        return NpyHeader(*known, file_size)
    encoding = "utf-8" if head[6] == 3 else "latin1"
    try:
        text = head[start:end].decode(encoding)
        m = _STANDARD_HEADER.match(text)
        if m is not None:
            # numpy's own writer always produces this exact dict text: skip the parser
            shape = tuple(int(d) for d in m.group(3).split(",") if d.strip())
            meta = {"descr": m.group(1), "fortran_order": m.group(2) == "True", "shape": shape}
        else:
            meta = ast.literal_eval(text.strip())
    except (UnicodeDecodeError, ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise NpyFormatError(f"{name}: unreadable .npy header dict") from None
    header = _header_from_dict(meta, end, file_size, name)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[head[:end]] = (header.shape, header.dtype, header.fortran_order, header.data_offset, header.nbytes)
    return header


def _header_from_dict(meta: object, data_offset: int, file_size: int, name: str) -> NpyHeader:
    if not isinstance(meta, dict) or not {"descr", "fortran_order", "shape"} <= set(meta):
        raise NpyFormatError(f"{name}: .npy header is not a descr/fortran_order/shape dict")
    extra = sorted(str(k)[:40] for k in meta if k not in ("descr", "fortran_order", "shape"))
    if extra:  # numpy itself refuses these headers: no writer of dumps produces them
        raise NpyFormatError(f"{name}: unexpected key {', '.join(map(repr, extra[:3]))} in .npy header")
    descr, fortran, shape = meta["descr"], meta["fortran_order"], meta["shape"]
    if not isinstance(fortran, bool):
        raise NpyFormatError(f"{name}: bad fortran_order in .npy header")
    if not isinstance(shape, tuple) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise NpyFormatError(f"{name}: bad shape in .npy header")
    if isinstance(descr, str) and descr.lstrip("<>|=!").startswith("O"):
        raise NpyFormatError(f"{name}: {OBJECT_REFUSED}")
    if descr == BF16_DESCR:  # MindSpore's bfloat16 (numpy has none): little-endian 16-bit words
        dt, dtype = np.dtype(BF16_WORDS), "bfloat16"
    else:
        try:
            dt = np.dtype(descr)
        except (TypeError, ValueError, SyntaxError, KeyError, MemoryError, RecursionError):
            raise NpyFormatError(f"{name}: bad dtype {str(descr)[:40]!r} in .npy header") from None
        dtype = dtype_name(dt)
    if dt.hasobject:
        raise NpyFormatError(f"{name}: {OBJECT_REFUSED}")
    count = 1
    for d in shape:
        count *= d
    return NpyHeader(
        shape=tuple(shape),
        dtype=dtype,
        fortran_order=fortran,
        data_offset=data_offset,
        nbytes=count * dt.itemsize,
        file_size=file_size,
    )


def read_array_header(fh) -> "tuple[tuple[int, ...], bool, np.dtype] | None":
    """numpy's own (shape, fortran order, dtype) from an open ``.npy`` stream at its start, leaving the
    stream at the data; None for a format version numpy's readers here do not handle (1.0 and 2.0 only).
    MindSpore's bfloat16 header (``BF16_DESCR``, which numpy refuses) comes back as its 16-bit words."""
    version = np.lib.format.read_magic(fh)
    if version not in ((1, 0), (2, 0)):
        return None
    start = fh.tell()
    try:
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(fh)
        return np.lib.format.read_array_header_2_0(fh)
    except ValueError:
        fh.seek(0)
        head = fh.read(MAX_HEADER_READ)
        try:
            header = parse_npy_header(head, len(head))
        except NpyFormatError:
            header = None
        if header is None or header.dtype != "bfloat16":
            fh.seek(start)
            raise
        fh.seek(header.data_offset)
        return header.shape, header.fortran_order, np.dtype(BF16_WORDS)


def dtype_name(dt: np.dtype) -> str:
    """Numpy spelling without byte order ("float32" for ``>f4`` too); structured → "void"."""
    if dt.names is not None:
        return "void"
    return dt.name


def load_npy(path: str, mmap: bool = True) -> np.ndarray:
    """Load a ``.npy`` without ever unpickling; memory-map it when possible."""
    head = read_npy_header(path)
    name = os.path.basename(path)
    problem = head.size_problem(name)
    if problem:
        raise NpyFormatError(problem)
    if head.dtype == "bfloat16":  # MindSpore's '<E2': the words, which numpy cannot load as such
        return _load_words(path, head)
    if mmap and not head.fortran_order and head.nbytes > 0:
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError):
            pass  # e.g. a filesystem without mmap: fall back to a plain read
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise NpyFormatError(f"{name}: cannot load ({exc})") from None


def _load_words(path: str, head: NpyHeader) -> np.ndarray:
    """The 16-bit words of a MindSpore bfloat16 ``.npy`` (``BF16_DESCR``), shaped as its header says
    (the caller decodes them: ``tensor_io`` reads words named bfloat16 as bfloat16)."""
    count = head.nbytes // 2
    with open(path, "rb") as fh:
        fh.seek(head.data_offset)
        words = np.frombuffer(fh.read(head.nbytes), dtype=BF16_WORDS, count=count)
    shape = head.shape
    return words.reshape(shape[::-1]).transpose() if head.fortran_order else words.reshape(shape)

