"""Rows of a big document kept in a temporary file, not in memory: ``compare`` prints ~2.4 KB of
row per tensor pair, and one place of 200k pairs held them all until the document was written.

``RowSpool`` is appended to like a list and read back in order as often as needed (``--json``,
``--csv``, the table and ``--output`` each iterate it).  Rows are plain values (dicts of str, int,
float, bool, None, lists; ``plain`` makes any value so, as JSON gives it back), and a numpy scalar in
one comes back as its Python value.  They are stored pickled (protocol 5, a row at a time), a
quarter of the cost of JSON both ways (14 + 10 µs a compare row, against 3.3 + 3.5), and read with an
unpickler that refuses every global (``_Loader``): only the built-in containers and scalars can come
out of the file, never an object, a callable or code, whatever its bytes — the file is this process's
own, unnamed (``TemporaryFile``), and nothing else can make it run anything.  ``extra`` adds keys to
every row (the target's place of a cross-place compare) as the rows are read; groups
(``start_group``: compare's ops) let a row be read back from its group's start, not the file's.  The
file is gone when the spool is closed or collected, or the process ends.
"""

from __future__ import annotations

import bisect
import io
import json
import pickle
import struct
from collections.abc import Sequence
from itertools import chain
from typing import Any, Callable, Iterable, Iterator

#: bytes gathered before they are written to the file
_BUFFER_BYTES = 1 << 20
_LEN = struct.Struct("<I")


def _item(v: Any) -> Any:
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


_json_encode = json.JSONEncoder(separators=(",", ":"), check_circular=False, default=_item).encode


def plain(v: Any) -> Any:
    """``v`` as JSON gives it back (``json.loads(json.dumps(v))``, NaN and ±Inf kept): numpy scalars as
    Python values, tuples as lists, keys as JSON spells them; None and JSON's scalars as they are."""
    if v is None or type(v) in (str, int, float, bool):
        return v
    return json.loads(_json_encode(v))


class _Loader(pickle.Unpickler):
    """Reads back what ``RowSpool`` wrote: built-in containers and scalars only (``find_class`` refuses
    every global, so no bytes can make it build an object or call anything)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"row spool: {module}.{name} refused (rows hold plain values only)")


class _NotPlain(Exception):
    pass


class _Writer(pickle.Pickler):
    """A pickler of plain values: the C pickler asks ``reducer_override`` only about objects that are no
    built-in value (exact str, int, float, bool, None, dict, list, tuple…), so a row of plain values
    never leaves C, and any other object (a numpy scalar, a subclass) stops it."""

    def reducer_override(self, obj: Any) -> Any:
        raise _NotPlain


class _Encoder:
    """One pickler and buffer reused for every row (each row a whole pickle: the memo is cleared)."""

    def __init__(self) -> None:
        self._buf = io.BytesIO()
        self._pickler = _Writer(self._buf, protocol=5)

    def __call__(self, row: dict[str, Any]) -> bytes:
        buf = self._buf
        buf.seek(0)
        buf.truncate()
        self._pickler.clear_memo()
        try:
            self._pickler.dump(row)
        except _NotPlain:
            return pickle.dumps(plain(row), protocol=5)
        return buf.getvalue()


def _decode(data: bytes) -> Any:
    return _Loader(io.BytesIO(data)).load()


class RowSpool(Sequence):
    """An append-only list of row dicts stored in a temporary file."""

    def __init__(self) -> None:
        import tempfile

        self._fh = tempfile.TemporaryFile(mode="w+b", prefix="dumpscope-rows-")
        self._encode = _Encoder()
        self._buffer = bytearray()
        self._written = 0  # bytes in the file
        self._n = 0
        self._group_at: list[int] = []  # byte offset of each group's first row (``start_group``)
        self._group_rows: list[int] = []  # row number of each group's first row
        self.extra: dict[str, Any] = {}  # fields added to every row (after its own)

    # -- writing ---------------------------------------------------------------------

    def start_group(self) -> int:
        """The rows appended from now on form the next group (compare: one op's rows); its number."""
        self._group_at.append(self._written + len(self._buffer))
        self._group_rows.append(self._n)
        return len(self._group_at) - 1

    def append(self, row: dict[str, Any]) -> None:
        data = self._encode(row)
        self._buffer += _LEN.pack(len(data))
        self._buffer += data
        self._n += 1
        if len(self._buffer) >= _BUFFER_BYTES:
            self._flush()

    def extend(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            self.append(row)

    def _flush(self) -> None:
        if self._buffer:
            self._fh.seek(self._written)
            self._fh.write(self._buffer)
            self._written += len(self._buffer)
            self._buffer = bytearray()

    # -- reading ---------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._read(0, self._n)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return list(self)[k]
        if k < 0:
            k += self._n
        if not 0 <= k < self._n:
            raise IndexError("row index out of range")
        return next(self._read(k, 1))

    def _read(self, first: int, count: int) -> Iterator[dict[str, Any]]:
        """``count`` rows from row number ``first``, starting at the nearest group before it."""
        self._flush()
        rows, at = self._group_rows, self._group_at
        g = bisect.bisect_right(rows, first) - 1  # the last group starting at or before it (-1: none)
        pos, row_no = (at[g], rows[g]) if g >= 0 else (0, 0)
        extra, fh = self.extra, self._fh
        buf, buf_at = b"", pos  # a block of the file read at once (offset ``buf_at``)
        done = 0
        while done < count and row_no < self._n:
            while g + 1 < len(rows) and rows[g + 1] <= row_no:  # (an empty group starts where the next does)
                g += 1
            k = pos - buf_at
            size = _LEN.unpack_from(buf, k)[0] if k + 4 <= len(buf) else -1
            if size < 0 or k + 4 + size > len(buf):
                fh.seek(pos)  # (each block seeks to its place: the file may be read elsewhere meanwhile)
                buf, buf_at, k = fh.read(max(_BUFFER_BYTES, 4 + max(size, 0))), pos, 0
                size = _LEN.unpack_from(buf, 0)[0]
                if 4 + size > len(buf):
                    buf += fh.read(4 + size - len(buf))
            pos += 4 + size
            row_no += 1
            if row_no <= first:  # before the first row asked for
                continue
            row = _decode(buf[k + 4:k + 4 + size])
            if extra:
                row.update(extra)
            done += 1
            yield row

    def close(self) -> None:
        self._fh.close()

    def __repr__(self) -> str:
        return f"RowSpool({self._n} rows)"


class ChainedRows(Sequence):
    """Several row sequences read one after the other (the rows of every place of a compare)."""

    def __init__(self, parts: list[Sequence]) -> None:
        self.parts = parts

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return chain.from_iterable(self.parts)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return list(self)[k]
        if k < 0:
            k += len(self)
        for p in self.parts:
            if k < len(p):
                return p[k]
            k -= len(p)
        raise IndexError("row index out of range")


class MappedRows(Sequence):
    """Rows of another sequence passed through ``fn`` as they are read (the rows are not kept)."""

    def __init__(self, rows: Sequence, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.rows = rows
        self.fn = fn

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(self.fn, self.rows)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return list(self)[k]
        return self.fn(self.rows[k])


def is_rows(value: Any) -> bool:
    """Whether ``value`` is one of these row sequences (JSON writers print them as lists)."""
    return isinstance(value, (RowSpool, ChainedRows, MappedRows))
