"""The tensor dtypes of each place, recorded per folder while its units are made.

Compare needs every dtype a rank/step stored in (``DumpQuery.place_dtypes``: the run's precision) before
it judges the first op.  Read from the stored units that is a JSON walk of every packed tensor list in
SQLite (~46 ms a side at 20k files, on the first compare after a build).  The reader that packs a folder's
units already holds each tensor's dtype (a lone tensor record) or its packed list, which the CANN layout
shares between every file of one tensor layout: recording the names there costs a set insertion a unit
and one JSON parse per distinct list, in the pool's workers.  The index stores one row per folder and
place (``dir_dtypes``), so the query is a union over a place's folders.

A record says ``None`` (read the units instead, as before) where the stored units may not be what was
packed (``op_groups.merge_stats_only`` drops or shrinks statistics-only units), a dtype is not a plain
string, or a packed list holds ``NaN``/``Infinity`` (statistics of a non-finite tensor: Python writes
them, and SQLite before 3.42 rejects such text as JSON, so the walk's answer there is SQLite's to give):
every answer stays the one the walk gives.
"""

from __future__ import annotations

import json
from typing import Iterable, NamedTuple, Optional


class PlaceDtypes(NamedTuple):
    """The distinct dtype names of the units of one rank/step read from one folder (or chunk of it);
    ``names`` None: not known here, the place's units are read instead."""

    rank: int
    step: int
    names: Optional[tuple[str, ...]]


#: dtype names of a packed tensor list (``UnitRecord.tensors``), by its text: the CANN layout hands the
#: same string to every file of one layout, so it is parsed once
_NAMES: dict[str, Optional[frozenset[str]]] = {}
_NAMES_MAX = 4096


def names_of_packed(tensors: str) -> Optional[frozenset[str]]:
    """The names ``json_extract(entry, '$[2]')`` gives over a packed list's entries, empty and null left out
    (the walk's filter); None for anything else than a list of entries with a string or null dtype."""
    got = _NAMES.get(tensors)
    if got is not None or tensors in _NAMES:
        return got
    try:
        entries = None if _not_plain_json(tensors) else json.loads(tensors)
    except ValueError:
        entries = None
    names: Optional[set[str]] = set() if isinstance(entries, list) else None
    for entry in entries if names is not None else ():
        dtype = entry[2] if isinstance(entry, list) and len(entry) > 2 else False
        if isinstance(dtype, str):
            if dtype:
                names.add(dtype)
        elif dtype is not None:  # a number, list or object: what SQLite makes of it is left to SQLite
            names = None
            break
    out = frozenset(names) if names is not None else None
    if len(_NAMES) >= _NAMES_MAX:
        _NAMES.clear()
    _NAMES[tensors] = out
    return out


def _not_plain_json(tensors: str) -> bool:
    """Text Python's encoder writes for a float NaN or infinity (no such word is quoted in a packed list
    but a name holding it: reading those units too only costs time)."""
    return "NaN" in tensors or "Infinity" in tensors


def records(packed: Iterable[tuple[int, int, str]],
            lone: Iterable[tuple[int, int, object, str]]) -> list[PlaceDtypes]:
    """One record per place: ``packed`` holds (rank, step, tensors text) of units, ``lone`` (rank, step,
    dtype, tensors text) of tensor records packed one a unit (their entry's dtype is that dtype)."""
    found: dict[tuple[int, int], Optional[set[str]]] = {}
    for rank, step, tensors in packed:
        names = found.setdefault((rank, step), set())
        if names is None:
            continue
        more = names_of_packed(tensors)
        if more is None:
            found[(rank, step)] = None
        else:
            names |= more
    for rank, step, dtype, tensors in lone:
        names = found.setdefault((rank, step), set())
        if names is None:
            continue
        if _not_plain_json(tensors):
            found[(rank, step)] = None
        elif isinstance(dtype, str):
            if dtype:
                names.add(dtype)
        elif dtype is not None:
            found[(rank, step)] = None
    return [PlaceDtypes(rank, step, tuple(sorted(names)) if names is not None else None)
            for (rank, step), names in found.items()]


def stored_text(names: Optional[tuple[str, ...]]) -> Optional[str]:
    return json.dumps(names) if names is not None else None


def union(rows: Iterable[tuple[Optional[str]]]) -> Optional[set[str]]:
    """The names of a place from its ``dir_dtypes`` rows; None when one of them is not known, or there is
    none (a place without units, or units stored some other way: reading them is the answer either way)."""
    out: set[str] = set()
    seen = False
    for (text,) in rows:
        if text is None:
            return None
        seen = True
        out.update(json.loads(text))
    return out if seen else None
