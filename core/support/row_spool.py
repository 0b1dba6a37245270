"""Rows of a big document kept in a temporary file, not in memory: ``compare`` prints ~2.4 KB of
row per tensor pair, and one place of 200k pairs held them all until the document was written.

``RowSpool`` is appended to like a list and read back in order as often as needed (``--json``,
``--csv``, the table and ``--output`` each iterate it).  Rows are plain values (dicts of str, int,
float, bool, None, lists; ``plain`` makes any value so, as JSON gives it back), and a numpy scalar in
one comes back as its Python value.  They are stored pickled (protocol 5) in blocks of ``BLOCK_ROWS``
rows, one pickler a block, so a block's keys and repeated texts are written once; a compare row costs
~2 µs to store and ~5 µs to read back, against ~14 and ~10 µs as JSON.  The file is read with an
unpickler that refuses every global (``_Loader``): only the built-in containers and scalars can come
out of it, never an object, a callable or code, whatever its bytes — and the file is this process's
own, unnamed (``TemporaryFile``).  ``extra`` adds keys to every row (the target's place of a
cross-place compare) as the rows are read.  A row read back by number (``spool[k]``) costs the decoding
of its block.  The file is gone when the spool is closed or collected, or the process ends.
"""

from __future__ import annotations

import bisect
import io
import json
import pickle
import struct
from collections.abc import Sequence
from itertools import chain
from typing import Any, Callable, Iterable, Iterator, Optional

#: bytes gathered before they are written to the file
_BUFFER_BYTES = 1 << 20


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


def _decode(data: bytes) -> Any:
    """One pickle written by ``_Writer`` (a test's seam: what ``_Loader`` makes of any bytes)."""
    return _Loader(io.BytesIO(data)).load()


#: rows in one block: one pickler writes them, one unpickler reads them, so a key written once is
#: referenced after (its memo); a block is decoded whole to read any of its rows
BLOCK_ROWS = 128
_BLOCK_HEAD = struct.Struct("<II")  # bytes of the block's pickles, rows in it


class RowSpool(Sequence):
    """An append-only list of row dicts stored in a temporary file, in blocks of up to ``BLOCK_ROWS``
    rows pickled one after the other by one pickler (keys and repeated texts written once a block).
    A row is pickled as it is appended (changing it later changes nothing stored; an object found again
    in the same block is stored as a reference to its first pickling, so rows sharing one come back
    sharing one, as a list of them would); the pickler's memo keeps a block's rows alive until the
    block is written out, at most ``BLOCK_ROWS`` of them."""

    def __init__(self) -> None:
        import tempfile

        self._fh = tempfile.TemporaryFile(mode="w+b", prefix="dumpscope-rows-")
        self._buffer = bytearray()  # whole blocks not yet in the file
        self._written = 0  # bytes in the file
        self._n = 0
        self._block = io.BytesIO()  # the open block's pickles
        self._pickler: Optional[_Writer] = None  # the open block's (None: no block open)
        self._block_rows = 0
        self._block_at: list[int] = []  # byte offset of each block (in the file and buffer together)
        self._block_first: list[int] = []  # row number of each block's first row
        self.extra: dict[str, Any] = {}  # fields added to every row (after its own)

    # -- writing ---------------------------------------------------------------------

    def append(self, row: dict[str, Any]) -> None:
        if self._pickler is None:
            self._open_block()
        block = self._block
        at = block.tell()
        try:
            self._pickler.dump(row)  # type: ignore[union-attr]
        except _NotPlain:  # the memo may name objects of the part written: the block ends before this row
            block.seek(at)
            block.truncate()
            self._close_block()
            self._open_block()
            self._pickler.dump(plain(row))  # type: ignore[union-attr]
        self._n += 1
        self._block_rows += 1
        if self._block_rows >= BLOCK_ROWS:
            self._close_block()

    def extend(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            self.append(row)

    def _open_block(self) -> None:
        self._block = io.BytesIO()
        self._pickler = _Writer(self._block, protocol=5)
        self._block_rows = 0

    def _close_block(self) -> None:
        if self._pickler is None:
            return
        self._pickler = None
        if self._block_rows:
            data = self._block.getvalue()
            self._block_at.append(self._written + len(self._buffer))
            self._block_first.append(self._n - self._block_rows)
            self._buffer += _BLOCK_HEAD.pack(len(data), self._block_rows)
            self._buffer += data
            if len(self._buffer) >= _BUFFER_BYTES:
                self._flush()
        self._block = io.BytesIO()
        self._block_rows = 0

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
        """``count`` rows from row number ``first``: its block is decoded from its start."""
        self._close_block()  # (rows appended after this read start a new block)
        self._flush()
        b = bisect.bisect_right(self._block_first, first) - 1
        extra, fh = self.extra, self._fh
        done = 0
        while done < count and 0 <= b < len(self._block_at):
            fh.seek(self._block_at[b])  # (each block seeks to its place: the file may be read elsewhere meanwhile)
            size, n = _BLOCK_HEAD.unpack(fh.read(_BLOCK_HEAD.size))
            loader = _Loader(io.BytesIO(fh.read(size)))
            row_no = self._block_first[b]
            for _ in range(n):
                row = loader.load()
                row_no += 1
                if row_no <= first:  # before the first row asked for
                    continue
                if extra:
                    row.update(extra)
                done += 1
                yield row
                if done >= count:
                    return
            b += 1

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
