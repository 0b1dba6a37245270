"""Dicts that share one tuple of keys read column by column, once for everyone who reads them so.

A compare's block of rows is read column by column twice as it is stored: by its table (``--output``:
``table_columns.chunk_columns``) and by its print (``--json``: ``json_text._dicts_parts``), each
``zip(*map(dict.values, rows))`` over the rows and over their sides, ~1.4 us a row of the 20k pair's
~47 values.  ``RowSpool`` stores a block inside ``one_transpose_each``: there (in that thread)
``columns_of`` remembers what it made for a sequence by the sequence's identity (the sequence held
meanwhile, so its identity is not reused), and the print finds the table's columns, its sides' columns
too (the same tuple objects).
The rows must not change meanwhile (a spool's rows must not change after they are appended anyway).

A column of floats is spelled for both alike (``repr``: the JSON's number, the workbook's): ``float_texts``
remembers the texts of a column by its identity as well, so the table and the print spell each float once
(a compare of real tensors: every statistic new, ~0.3 us each).
"""

from __future__ import annotations

import threading
from array import array
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, Sequence, TypeVar

_T = TypeVar("_T")

#: while a block is stored, in this thread: ``held``, id(sequence) -> (sequence, its columns) (a thread's
#: own: the explorer compares in a worker while it prints elsewhere)
_local = threading.local()


@contextmanager
def one_transpose_each() -> Iterator[None]:
    """Within (in this thread): ``columns_of`` makes each sequence's columns once, ``float_texts`` each
    column's texts once."""
    outer = getattr(_local, "held", None), getattr(_local, "texts", None)
    _local.held, _local.texts = {}, {}
    try:
        yield
    finally:
        _local.held, _local.texts = outer


def columns_of(ds: Sequence[dict]) -> Optional[tuple[tuple, list[tuple]]]:
    """``(keys, columns)`` of ``ds``, dicts that share one tuple of keys (in one order): each key's values
    as a tuple, in the keys' order; None when they do not (or ``ds`` is empty).  A TypeError where one of
    ``ds`` is no dict (the callers know they are: a check here would cost each of them again)."""
    return _once(getattr(_local, "held", None), ds, _columns)


def _once(held: Optional[dict[int, tuple[Any, Any]]], seq: Any, make: Callable[[Any], _T]) -> _T:
    """``make(seq)``, remembered in ``held`` (when within ``one_transpose_each``) by ``seq``'s identity, with
    ``seq`` itself (held meanwhile: its identity is not reused)."""
    if held is not None:
        got = held.get(id(seq))
        if got is not None and got[0] is seq:
            return got[1]
    made = make(seq)
    if held is not None:
        held[id(seq)] = (seq, made)
    return made


def _columns(ds: Sequence[dict]) -> Optional[tuple[tuple, list[tuple]]]:
    if not ds:
        return None
    keys = tuple(ds[0])
    if list(map(tuple, ds)).count(keys) != len(ds):
        return None
    return keys, list(zip(*map(dict.values, ds)))


def float_texts(column: Sequence[float]) -> list[str]:
    """``float.__repr__`` of each of ``column`` (floats: a TypeError at another type, as ``float.__repr__``
    raises), made once for a column within ``one_transpose_each`` (by its identity, the column held
    meanwhile).  The list is shared: its takers must not change it."""
    return _once(getattr(_local, "texts", None), column, _reprs)


def _reprs(column: Sequence[float]) -> list[str]:
    return list(map(float.__repr__, column))


class FloatSpellings:
    """The ``repr`` of each float of a column (the tables' number: the JSON's, the CSV's, the workbook's),
    remembered by value, up to ``kept`` at a time: an op's output statistics are the next op's input's,
    identical sides give the same statistics twice, the metrics of equal tensors are 0.0 and 1.0 (56-96 % of
    the float cells of the compares of tests/data recur), and a lookup costs a tenth of a ``repr``.  A
    column with a value not remembered is spelled whole by ``float_texts`` (one C-level ``map``, shared
    with the print of the block: not a Python call a new value) and remembered.  -0.0 equals 0.0 as a key:
    a column holding one is spelled, not looked up, and not remembered.

    ``look_up=False``: every column is spelled by ``float_texts``, nothing looked up nor remembered, for a
    table whose rows are printed as JSON too (``compare --json --output``): the print spells each column
    anyway, once for both, and a lookup would only add to it."""

    def __init__(self, kept: int = 8192, look_up: bool = True) -> None:
        self.known: dict[float, str] = {}
        self.kept = kept
        self.look_up = look_up

    def of(self, column: Sequence[float]) -> list[str]:
        """The texts of ``column``: finite floats (a NaN is never remembered but spelled ``nan``; ±Inf
        ``inf``/``-inf``: the callers that spell them otherwise check first).  A column of one value (the
        metrics of equal tensors) is that value's text once."""
        if one_value(column):
            return [float.__repr__(column[0])] * len(column)
        if not self.look_up or (0.0 in column and has_negative_zero(column)):
            return float_texts(column)
        known = self.known
        got = list(map(known.get, column))
        if all(got):  # (every text is a non-empty string: a None is a value not remembered)
            return got  # type: ignore[return-value]
        texts = float_texts(column)
        if len(known) + len(texts) > self.kept:
            known.clear()
        known.update(zip(column, texts))
        return texts


def one_value(column: Sequence[float]) -> bool:
    """Whether ``column`` (floats, not empty) holds one value throughout, spelled alike: its ends equal
    first, then every row; not a -0.0 among zeros (equal, spelled apart); a NaN is never one value."""
    v = column[0]
    return column[-1] == v and column.count(v) == len(column) and not (v == 0 and has_negative_zero(column))


#: the bytes of -0.0 in an array of doubles
_NEGATIVE_ZERO = array("d", [-0.0]).tobytes()


def has_negative_zero(values: Sequence[float]) -> bool:
    """Whether ``values`` (numbers) hold a -0.0: its bytes found in their doubles' bytes at a double's
    start (a match across two doubles, as a 0.0 then a double whose lowest byte is 0x80 makes, is not one)."""
    data = array("d", values).tobytes()
    at = data.find(_NEGATIVE_ZERO)
    while at >= 0:
        if not at & 7:
            return True
        at = data.find(_NEGATIVE_ZERO, at + 1)
    return False
