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
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

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
    held = getattr(_local, "held", None)
    if held is not None:
        got = held.get(id(ds))
        if got is not None and got[0] is ds:
            return got[1]
    made = _columns(ds)
    if held is not None:
        held[id(ds)] = (ds, made)
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
    held = getattr(_local, "texts", None)
    if held is not None:
        got = held.get(id(column))
        if got is not None and got[0] is column:
            return got[1]
    made = list(map(float.__repr__, column))
    if held is not None:
        held[id(column)] = (column, made)
    return made
