"""Rows of a big document kept in a temporary file, not in memory: ``compare`` prints ~2.4 KB of
row per tensor pair, and one place of 200k pairs held them all until the document was written.

``RowSpool`` is appended to like a list and read back in order as often as needed (``--json``,
``--csv``, the table and ``--output`` each iterate it).  Rows are plain values (dicts of str, int,
float, bool, None, lists; ``plain`` makes any value so, as JSON gives it back), and a numpy scalar in
one comes back as its Python value.  They are stored as JSON (``float.__repr__``: every float read
back is the one written; NaN and ±Inf as JSON's ``NaN``/``Infinity``; any string, unpaired surrogates
included, escaped to ASCII), each row encoded as it is appended, in blocks of ``BLOCK_ROWS`` rows read
back with one decoder call a block (the decoder's per-call cost was a quarter of reading a compare row).
No pickle: the project reads no pickled data anywhere (``test_robustness``), its own included.
``extra`` adds keys to every row (the target's place of a cross-place compare) as the rows are read.
``sink`` is handed the rows a block at a time (a list of up to ``BLOCK_ROWS`` rows, in order), before
they are stored and before any of them is read back (``compare --output`` fills the rows' sides and
writes the table on the way: ``table_file.TableAsMade``): one call a block, not three a row (~0.6 us a
row of a compare's 20k pair).  A row appended is held, as the dict given, until its block is stored: it
must not change after it is appended.
A row read back by number (``spool[k]``) costs the decoding of its block.  The file lives in the
system's temporary directory and is gone when the spool is closed or collected, or the process ends.
"""

from __future__ import annotations

import bisect
import json
import struct
from collections.abc import Sequence
from itertools import chain
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from dumpscope.core.support.row_columns import one_transpose_each

#: bytes gathered before they are written to the file
_BUFFER_BYTES = 1 << 20


def _item(v: Any) -> Any:
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


_json_encode = json.JSONEncoder(separators=(",", ":"), check_circular=False, default=_item).encode
_json_decode = json.JSONDecoder().decode


def plain(v: Any) -> Any:
    """``v`` as JSON gives it back (``json.loads(json.dumps(v))``, NaN and ±Inf kept): numpy scalars as
    Python values, tuples as lists, keys as JSON spells them; None and JSON's scalars as they are."""
    if v is None or type(v) in (str, int, float, bool):
        return v
    return json.loads(_json_encode(v))


#: rows in one block: a block is one JSON array, decoded whole to read any of its rows
BLOCK_ROWS = 128
_BLOCK_HEAD = struct.Struct("<II")  # bytes of the block's text, rows in it


class RowSpool(Sequence):
    """An append-only list of row dicts stored in a temporary file, in blocks of up to ``BLOCK_ROWS``
    rows.  A block's rows are encoded when it is stored (after ``sink``, if given, has seen them): a row
    must not change after it is appended."""

    def __init__(self, sink: Optional[Callable[[list[dict[str, Any]]], Any]] = None) -> None:
        import tempfile

        self._fh = tempfile.TemporaryFile(mode="w+b", prefix="dumpscope-rows-")
        self._buffer = bytearray()  # whole blocks not yet in the file
        self._written = 0  # bytes in the file
        self._n = 0
        self._pending: list[dict[str, Any]] = []  # the open block's rows
        self._block_at: list[int] = []  # byte offset of each block (in the file and buffer together)
        self._block_first: list[int] = []  # row number of each block's first row
        self.extra: dict[str, Any] = {}  # fields added to every row (after its own)
        self._sink = sink

    # -- writing ---------------------------------------------------------------------

    def append(self, row: dict[str, Any]) -> None:
        self._pending.append(row)
        self._n += 1
        if len(self._pending) >= BLOCK_ROWS:
            self._close_block()

    def extend(self, rows: Iterable[dict[str, Any]]) -> None:
        pending = self._pending
        for row in rows:
            pending.append(row)
            self._n += 1
            if len(pending) >= BLOCK_ROWS:
                self._close_block()
                pending = self._pending

    def _close_block(self) -> None:
        rows = self._pending
        if not rows:
            return
        self._pending = []
        with one_transpose_each():  # (the sink's table and the printer read the rows by column once)
            if self._sink is not None:
                self._sink(rows)
            self._store_block(self._block_text(rows), len(rows))

    def finish_block(self) -> None:
        """Store the open block now (its rows are no longer held: the sink, the printer have seen every row)."""
        self._close_block()

    def _block_text(self, rows: list[dict[str, Any]]) -> bytes:
        """A block's rows as stored (one JSON array)."""
        return ("[" + ",".join(map(_json_encode, rows)) + "]").encode("ascii")

    def _store_block(self, data: bytes, rows: int) -> None:
        self._block_at.append(self._written + len(self._buffer))
        self._block_first.append(self._n - rows)
        self._buffer += _BLOCK_HEAD.pack(len(data), rows)
        self._buffer += data
        if len(self._buffer) >= _BUFFER_BYTES:
            self._flush()

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
        extra = self.extra
        done = 0
        while done < count and 0 <= b < len(self._block_at):
            rows = self._decode_block(self._block_bytes(b))
            row_no = self._block_first[b]
            for row in rows:
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

    def _block_bytes(self, b: int) -> bytes:
        fh = self._fh
        fh.seek(self._block_at[b])  # (each block seeks to its place: the file may be read elsewhere meanwhile)
        size, _rows = _BLOCK_HEAD.unpack(fh.read(_BLOCK_HEAD.size))
        return fh.read(size)

    @staticmethod
    def _decode_block(data: bytes) -> list[dict[str, Any]]:
        return _json_decode(data.decode("ascii"))

    def close(self) -> None:
        self._fh.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._n} rows)"


class PrintedRows(RowSpool):
    """Rows kept as the ``--json`` document prints them: ``printer`` makes a block's text (the rows as
    items of the document's top-level ``rows`` list, joined by the list's separators), and the CLI's
    printer copies the blocks (``printed_blocks``) instead of decoding every row and printing it again.
    Read as dicts (a first divergence's row, ``--exit-code``), a block's text is decoded: the rows come
    back as the document shows them (NaN and ±Inf as the strings the CLI prints).  Rows are held until
    their block is printed (at most ``BLOCK_ROWS``): a row must not change after it is appended.  Keys
    added by ``extra`` are in the dicts, not in the printed blocks: a caller that sets it prints dicts."""

    def __init__(self, printer: Callable[[list[dict[str, Any]]], str],
                 sink: Optional[Callable[[list[dict[str, Any]]], Any]] = None) -> None:
        super().__init__(sink)
        self._printer = printer

    def _block_text(self, rows: list[dict[str, Any]]) -> bytes:
        # (the JSON printer escapes a string's unpaired surrogate; another printer's is kept as it is)
        return self._printer(rows).encode("utf-8", "surrogatepass")

    @staticmethod
    def _decode_block(data: bytes) -> list[dict[str, Any]]:
        return _json_decode("[" + data.decode("utf-8", "surrogatepass") + "]")

    def printed_blocks(self, as_bytes: bool = False) -> Iterator[Union[str, bytes]]:
        """The text of every block in order (the caller joins them with the list's separator); ``as_bytes``:
        as stored, UTF-8 (a writer to a UTF-8 byte stream copies them: decoding the 63 MB of a compare of
        two 20k trees and encoding it again on the way out cost 0.1 s CPU)."""
        self._close_block()
        self._flush()
        for b in range(len(self._block_at)):
            data = self._block_bytes(b)
            yield data if as_bytes else data.decode("utf-8", "surrogatepass")


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


def printed_parts(value: Any, as_bytes: bool = False) -> Optional[list[Iterable[Union[str, bytes]]]]:
    """The printed blocks of each part of ``value`` when every part is ``PrintedRows`` with no ``extra``
    (the JSON printer copies them; ``as_bytes``: UTF-8, as stored), else None (it prints the rows)."""
    parts = value.parts if isinstance(value, ChainedRows) else [value]
    if not parts or not all(type(p) is PrintedRows and not p.extra for p in parts):
        return None
    return [p.printed_blocks(as_bytes) for p in parts if len(p)]
