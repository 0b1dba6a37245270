"""The tensor dtypes of each place, recorded per folder while its units are made.

Compare needs every dtype a rank/step stored in (``DumpQuery.place_dtypes``: the run's precision) before
it judges the first op.  Read from the stored units that is a JSON walk of every packed tensor list
(~46 ms a side at 20k files, on the first compare after a build).  The reader that packs a folder's
units already holds each tensor's dtype (a lone tensor record) or its packed list, which the CANN layout
shares between every file of one tensor layout: recording the names there costs a set insertion a unit
and one JSON parse per distinct list, in the pool's workers.  The index stores one row per folder and
place (``dir_dtypes``), so the query is a union over a place's folders.

A record says ``None`` (read the units instead) where the stored units may not be what was packed
(``op_groups.merge_stats_only`` drops or shrinks statistics-only units).  Both ways read a packed list
with ``names_in``: the non-empty string dtypes of its entries (a packed list of a non-finite tensor's
statistics holds ``NaN``/``Infinity``, which Python reads; SQLite before 3.42 did not, and the walk it
once did there found no dtype at all).
"""

from __future__ import annotations

import json
from typing import Iterable, NamedTuple, Optional


class PlaceDtypes(NamedTuple):
    """The distinct dtype names of the units of one rank/step read from one folder (or chunk of it).  (Its
    stored row says NULL once ``op_groups.merge_stats_only`` changed the place's units: read them instead.)"""

    rank: int
    step: int
    names: tuple[str, ...]


#: dtype names of a packed tensor list (``UnitRecord.tensors``), by its text: the CANN layout hands the
#: same string to every file of one layout, so it is parsed once
_NAMES: dict[str, frozenset[str]] = {}
_NAMES_MAX = 4096


def names_in(tensors: str) -> frozenset[str]:
    """The non-empty string dtypes (``[io, slot, dtype, …]``'s third item) of a packed list's entries; none
    from text that is no list of entries (a damaged unit says so where its tensors are read)."""
    got = _NAMES.get(tensors)
    if got is not None:
        return got
    try:
        entries = json.loads(tensors)
    except (TypeError, ValueError):
        entries = None
    names = frozenset(e[2] for e in (entries if isinstance(entries, list) else ())
                      if isinstance(e, list) and len(e) > 2 and isinstance(e[2], str) and e[2])
    if len(_NAMES) >= _NAMES_MAX:
        _NAMES.clear()
    _NAMES[tensors] = names
    return names


def records(packed: Iterable[tuple[int, int, str]], lone: Iterable[tuple[int, int, object]]) -> list[PlaceDtypes]:
    """One record per place: ``packed`` holds (rank, step, tensors text) of units, ``lone`` (rank, step,
    dtype) of tensor records packed one a unit (their entry's dtype is that dtype)."""
    found: dict[tuple[int, int], set[str]] = {}
    for rank, step, tensors in packed:
        found.setdefault((rank, step), set()).update(names_in(tensors))
    for rank, step, dtype in lone:
        names = found.setdefault((rank, step), set())
        if isinstance(dtype, str) and dtype:
            names.add(dtype)
    return [PlaceDtypes(rank, step, tuple(sorted(names))) for (rank, step), names in found.items()]


def stored_text(names: tuple[str, ...]) -> str:
    return json.dumps(names)


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
