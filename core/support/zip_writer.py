"""A zip archive of deflated parts, each part deflated as it is written, in segments that can be changed
alone afterwards (the compare workbook's first-divergence cells, known once every row is written).

Why not ``zipfile``: it deflates a part as it is written and cannot change a byte of it after, so the
workbook's sheets were written twice (their XML to a temporary file, then copied through the filling of
the first-divergence cells into the archive, deflated then: ~36 MB of XML written, read and scanned for a
compare of two 20k trees).  Here a part (``DeflatedPart``) is deflated into a scratch file as it is
written, with a full flush every ``SEGMENT_BYTES`` of text (the deflater starts afresh there, so each
segment inflates alone); a change to a few segments (``ZipWriter.add_part``'s ``replaced``) inflates,
changes and deflates those again, and the part's CRC-32 is made from the recorded CRCs of the others
(``crc32_combine``: zlib's, which Python does not expose).

The archive is what ``zipfile`` reads (``tests/test_zip_writer.py``): local headers with the sizes known,
ZIP64 fields only where a size or an offset needs them, every entry dated 1980-01-01 (the same rows, the
same bytes).
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_right
from typing import IO, Iterable, Iterator, Optional

#: text between two full flushes: each adds ~5 bytes and loses the window (~1 % more bytes on a compare's
#: sheet at 1 MiB), and a segment changed is inflated and deflated again whole (~2 ms at 1 MiB)
SEGMENT_BYTES = 1 << 20
#: deflate level 3: on a compare's sheet as fast as level 1 (longer matches, fewer of them) and a quarter
#: smaller; level 6 halves it again at twice the cost
LEVEL = 3
#: zlib's memLevel (hash table of 2**(MEM_LEVEL+7) entries): 5 deflated the 36.5 MB sheet of a compare of two
#: 20k trees in 43 ms against 49 ms at zlib's default 8 (a table that stays in cache), 1 % more bytes
MEM_LEVEL = 5

#: sizes and offsets from which ZIP64 fields are written (a constant here so a test can make it small)
ZIP64_LIMIT = 0xFFFFFFFF
_LOCAL = struct.Struct("<4s2B4HL2L2H")
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")
_END = struct.Struct("<4s4H2LH")
_END64 = struct.Struct("<4sQ2H2L4Q")
_LOCATOR64 = struct.Struct("<4sLQL")
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01
_DOS_TIME = 0
_UNIX = 3  # "made by" system: the file attributes are Unix modes
_ATTRS = 0o600 << 16


# -- CRC-32 of two texts joined (zlib's crc32_combine) ----------------------------------------------------

_POLY = 0xEDB88320  # (reflected)


def _multmodp(a: int, b: int) -> int:
    """a times b modulo the CRC polynomial (bit-reflected, as zlib's ``multmodp``)."""
    m = 1 << 31
    p = 0
    while True:
        if a & m:
            p ^= b
            if (a & (m - 1)) == 0:
                break
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return p


def _x2n_table() -> list[int]:
    table = [1 << 30]  # x**1
    for _ in range(31):
        table.append(_multmodp(table[-1], table[-1]))
    return table


_X2N = _x2n_table()  # x**(2**k) modulo the polynomial


def _x2nmodp(n: int, k: int) -> int:
    """x**(n * 2**k) modulo the polynomial."""
    p = 1 << 31  # x**0
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return p


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of ``A + B`` from ``crc1`` (of A), ``crc2`` (of B) and B's length (zlib's function)."""
    return _multmodp(_x2nmodp(len2, 3), crc1) ^ crc2


# -- a part deflated in segments ------------------------------------------------------------------------


class DeflatedPart:
    """One part's text deflated into ``out`` (a binary scratch file, written at its end) as it is written,
    a full flush before each ``tag``-ged write that starts a segment (``SEGMENT_BYTES`` of text since the
    last).  ``tag`` names where a segment starts for its writer (the workbook: a sheet's row number), so a
    segment can be found again (``segment_at``), read back as text (``text_of``) and replaced when the part
    is put in the archive (``ZipWriter.add_part``)."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        out.seek(0, 2)
        self.start = out.tell()  # the part's first deflated byte in ``out``
        self._z: Optional["zlib._Compress"] = zlib.compressobj(LEVEL, zlib.DEFLATED, -15, MEM_LEVEL)
        self.crc = 0
        self.size = 0  # text bytes
        self.csize = 0  # deflated bytes
        self.tags: list[int] = []  # each segment's tag
        self._starts: list[tuple[int, int, int]] = []  # each segment's (text offset, deflated offset, CRC before)
        self._since = -1  # text since the segment started (-1: none started)

    def write(self, data: bytes, tag: int = 0) -> None:
        """Deflate ``data``; a new segment starts here when the current one is full (or none started yet)."""
        if self._since < 0 or self._since >= SEGMENT_BYTES:
            if self._since >= 0:
                self._put(self._z.flush(zlib.Z_FULL_FLUSH))  # type: ignore[union-attr]
            self.tags.append(tag)
            self._starts.append((self.size, self.csize, self.crc))
            self._since = 0
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self._since += len(data)
        self._put(self._z.compress(data))  # type: ignore[union-attr]

    def _put(self, data: bytes) -> None:
        if data:
            self._out.write(data)
            self.csize += len(data)

    def finish(self) -> None:
        """The deflated stream's end (after the part's last text)."""
        if self._z is not None:
            if self._since < 0:  # (an empty part: one empty segment)
                self.tags.append(0)
                self._starts.append((0, 0, 0))
            self._put(self._z.flush())
            self._z = None

    def segment_at(self, tag: int) -> int:
        """The segment holding what was written with ``tag`` or after it, before the next segment's tag
        (tags increase along the part)."""
        return max(0, bisect_right(self.tags, tag) - 1)

    def _bounds(self, k: int) -> tuple[int, int, int, int, int]:
        """Segment ``k``'s (text start, text end, deflated start, deflated end, CRC before it)."""
        u0, c0, crc0 = self._starts[k]
        u1, c1 = (self._starts[k + 1][:2] if k + 1 < len(self._starts) else (self.size, self.csize))
        return u0, u1, c0, c1, crc0

    def _deflated(self, c0: int, c1: int) -> Iterator[bytes]:
        out = self._out
        at = c0
        while at < c1:
            out.seek(self.start + at)
            data = out.read(min(c1 - at, 1 << 20))
            if not data:
                raise OSError("the scratch file ends early")
            at += len(data)
            yield data
        out.seek(0, 2)

    def text_of(self, k: int) -> bytes:
        """Segment ``k``'s text, inflated."""
        u0, u1, c0, c1, _ = self._bounds(k)
        inflate = zlib.decompressobj(-15)
        text = b"".join(map(inflate.decompress, self._deflated(c0, c1))) + inflate.flush()
        if len(text) != u1 - u0:
            raise OSError(f"segment {k} inflates to {len(text)} bytes, not {u1 - u0}")
        return text

    def assembled(self, replaced: dict[int, bytes]) -> tuple[int, int, int, list[tuple[int, int, Optional[bytes]]]]:
        """``(crc, text size, deflated size, pieces)`` of the part with the segments ``replaced`` (index:
        new text): each piece is ``(deflated start, end, None)`` read from the scratch file or
        ``(0, 0, bytes)`` deflated anew."""
        assert self._z is None, "finish() first"
        if not replaced:
            return self.crc, self.size, self.csize, [(0, self.csize, None)]
        first = min(replaced)
        crc = self._starts[first][2]
        size, csize = self._starts[first][0], self._starts[first][1]
        pieces: list[tuple[int, int, Optional[bytes]]] = [(0, csize, None)] if csize else []
        last = len(self._starts) - 1
        for k in range(first, last + 1):
            u0, u1, c0, c1, crc0 = self._bounds(k)
            text = replaced.get(k)
            if text is None:
                # this segment's own CRC, from the CRCs before and after it in the part as written
                crc_end = self._starts[k + 1][2] if k < last else self.crc
                own = crc_end ^ _multmodp(_x2nmodp(u1 - u0, 3), crc0)
                crc = crc32_combine(crc, own, u1 - u0)
                size += u1 - u0
                csize += c1 - c0
                if pieces and pieces[-1][2] is None and pieces[-1][1] == c0:
                    pieces[-1] = (pieces[-1][0], c1, None)
                else:
                    pieces.append((c0, c1, None))
            else:
                z = zlib.compressobj(LEVEL, zlib.DEFLATED, -15, MEM_LEVEL)
                data = z.compress(text) + z.flush(zlib.Z_FINISH if k == last else zlib.Z_FULL_FLUSH)
                crc = zlib.crc32(text, crc)
                size += len(text)
                csize += len(data)
                pieces.append((0, 0, data))
        return crc, size, csize, pieces

    def pieces_bytes(self, pieces: list[tuple[int, int, Optional[bytes]]]) -> Iterator[bytes]:
        """The deflated bytes of ``assembled``'s pieces, in order."""
        for c0, c1, data in pieces:
            if data is not None:
                yield data
            else:
                yield from self._deflated(c0, c1)


# -- the archive ------------------------------------------------------------------------------------------


class ZipWriter:
    """Entries written one after the other into ``fh`` (a binary file), the central directory by ``close``."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh
        self._at = fh.tell()
        self._entries: list[tuple[bytes, int, int, int, int]] = []  # name, crc, csize, size, header offset

    def add(self, name: str, text: bytes) -> None:
        """A part whose whole text is at hand, deflated here."""
        z = zlib.compressobj(LEVEL, zlib.DEFLATED, -15, MEM_LEVEL)
        data = z.compress(text) + z.flush()
        self._entry(name, zlib.crc32(text), len(text), len(data), [data])

    def add_part(self, name: str, part: DeflatedPart, replaced: Optional[dict[int, bytes]] = None) -> None:
        """A part deflated as it was written, with the segments ``replaced`` (index: new text)."""
        part.finish()
        crc, size, csize, pieces = part.assembled(replaced or {})
        self._entry(name, crc, size, csize, part.pieces_bytes(pieces))

    def _entry(self, name: str, crc: int, size: int, csize: int, data: Iterable[bytes]) -> None:
        raw = name.encode("ascii")
        offset = self._at
        big = size >= ZIP64_LIMIT or csize >= ZIP64_LIMIT
        extra = struct.pack("<HHQQ", 1, 16, size, csize) if big else b""
        head = _LOCAL.pack(b"PK\x03\x04", 45 if big else 20, 0, 0, zlib.DEFLATED, _DOS_TIME, _DOS_DATE, crc,
                           0xFFFFFFFF if big else csize, 0xFFFFFFFF if big else size, len(raw), len(extra))
        write = self._fh.write
        write(head + raw + extra)
        written = 0
        for chunk in data:
            write(chunk)
            written += len(chunk)
        if written != csize:
            raise OSError(f"{name}: {written} deflated bytes written, {csize} expected")
        self._at += len(head) + len(raw) + len(extra) + csize
        self._entries.append((raw, crc, csize, size, offset))

    def close(self) -> None:
        """The central directory and the end records (ZIP64 ones where the archive needs them)."""
        start = self._at
        out = []
        for raw, crc, csize, size, offset in self._entries:
            fields = [v for v, big in ((size, size >= ZIP64_LIMIT), (csize, csize >= ZIP64_LIMIT),
                                        (offset, offset >= ZIP64_LIMIT)) if big]
            extra = struct.pack(f"<HH{len(fields)}Q", 1, 8 * len(fields), *fields) if fields else b""
            version = 45 if fields else 20
            out.append(_CENTRAL.pack(
                b"PK\x01\x02", version, _UNIX, version, 0, 0, zlib.DEFLATED, _DOS_TIME, _DOS_DATE, crc,
                0xFFFFFFFF if csize >= ZIP64_LIMIT else csize, 0xFFFFFFFF if size >= ZIP64_LIMIT else size,
                len(raw), len(extra), 0, 0, 0, _ATTRS, 0xFFFFFFFF if offset >= ZIP64_LIMIT else offset)
                + raw + extra)
        central = b"".join(out)
        n, size, end = len(self._entries), len(central), start + len(central)
        if n >= 0xFFFF or start >= ZIP64_LIMIT or size >= ZIP64_LIMIT:  # (as zipfile writes them)
            central += _END64.pack(b"PK\x06\x06", _END64.size - 12, 45, 45, 0, 0, n, n, size, start)
            central += _LOCATOR64.pack(b"PK\x06\x07", 0, end, 1)
        central += _END.pack(b"PK\x05\x06", 0, 0, min(n, 0xFFFF), min(n, 0xFFFF), min(size, 0xFFFFFFFF),
                             min(start, 0xFFFFFFFF), 0)
        self._fh.write(central)
        self._at += len(central)
