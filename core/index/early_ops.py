"""Early ops of a cold build: a plain CANN place is finalized as soon as its folder is stored.

The explorer shows a place's ops while the pool still reads the rest of a big tree; the last
``finalize`` keeps them only where nothing since could have changed them (see ``_EarlyOps``).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Optional

from dumpscope.core.index import finalize as finalizing
from dumpscope.core.layouts.walk import Scanned
from dumpscope.core.units import UNIT_COLUMNS

if TYPE_CHECKING:
    from dumpscope.core.index.dump_index import DumpIndex

_STORAGE = UNIT_COLUMNS.index("storage")
_RANK_STEP = operator.itemgetter(UNIT_COLUMNS.index("rank"), UNIT_COLUMNS.index("step"))


class _EarlyOps:
    """Cold builds: ops of a plain CANN place are made as soon as its folder is stored.

    After the walk, a place no pending folder maps to (by its path) and that no other folder
    touched is finalized right away by ``finalize.finalize_early``, while the pool still reads
    other folders; the last ``finalize`` keeps those ops only if the place's units are still
    the same and still plain (no graph or execution order found for it since), else redoes it.
    """

    def __init__(self, index: "DumpIndex") -> None:
        self.index = index
        self.touched: set[tuple[int, int]] = set()
        #: plain places stored by one folder so far, waiting for the walk: (first id, last id, graphs)
        self.waiting: dict[tuple[int, int], tuple[int, int, frozenset]] = {}
        self.pending: Optional[dict[tuple[int, int], int]] = None  # known once the walk is over

    def walk_done(self, pending_parts: list[tuple[str, ...]]) -> None:
        from dumpscope.core.layouts.paths import place_of

        self.pending = {}
        for parts in pending_parts:
            key = _place_key(place_of(parts))
            self.pending[key] = self.pending.get(key, 0) + 1
        self._make()

    def stored(self, scanned: Scanned, first: int, units: list[tuple], columns: Optional[list[tuple]] = None) -> None:
        """A folder's ``units`` were stored from id ``first`` on; ``columns``: their columns, when the caller
        has them (a folder of one place, the common case, is not split into columns again)."""
        from dumpscope.core.layouts.paths import CONSTANTS_STEP, place_of

        groups = _spans(list(map(_RANK_STEP, units)))  # stored sorted by rank, step: a place is one id range
        if self.pending is not None:
            key = _place_key(place_of(scanned.parts))
            if key in self.pending:
                self.pending[key] -= 1
        plain = set(finalizing.PLAIN_PRODUCERS)
        for place, (lo, hi) in groups.items():
            if place in self.touched:  # a second folder for this place: the last finalize decides
                self.waiting.pop(place, None)
                continue
            self.touched.add(place)
            # a column at a time: the checks run in C, not per unit in Python
            cols = columns if columns and (lo, hi) == (0, len(units)) else list(zip(*units[lo:hi]))
            storages = set(cols[_STORAGE])
            if place[1] == CONSTANTS_STEP or not set(cols[0]) <= plain or _any_holds(cols[4], "_To_") \
                    or "Parameter" in cols[2] or _repeats(cols[7], cols[3]) or \
                    ("none" in storages and len(storages) > 1):
                # not plain (see plain_places.plain_place), or statistics the last finalize may merge
                # into payload records: the last finalize decides
                continue
            self.waiting[place] = (first + lo, first + hi - 1, frozenset(cols[7]))
        self._make()

    def _make(self) -> None:
        """Finalize the waiting places no pending folder maps to (once the walk is over)."""
        if self.pending is None or not self.waiting:
            return
        if not self.index.early_only:  # a (partial) finalize has run: it owns the ops table now
            self.waiting.clear()
            return
        if self.index.query("SELECT 1 FROM graph_files UNION ALL SELECT 1 FROM exec_orders LIMIT 1"):
            self.waiting.clear()  # something to join: every place goes through the last finalize
            return
        for place in [p for p in self.waiting if self.pending.get(p, 0) <= 0]:
            lo, hi, graphs = self.waiting.pop(place)
            finalizing.finalize_early(self.index, place, lo, hi, graphs)


def _spans(keys: list) -> dict[Any, list[int]]:
    """``[first index, last index + 1]`` of each key of ``keys``; searched in C when there are few
    distinct keys (a folder is almost always one place), else in one pass."""
    distinct = dict.fromkeys(keys)
    if len(distinct) <= 8:
        back = keys[::-1]
        return {key: [keys.index(key), len(keys) - back.index(key)] for key in distinct}
    spans: dict[Any, list[int]] = {}
    for k, key in enumerate(keys):
        span = spans.get(key)
        if span is None:
            spans[key] = [k, k + 1]
        else:
            span[1] = k + 1
    return spans


def _repeats(graphs: tuple, names: tuple) -> bool:
    """Does a (graph, name) pair occur twice?  One graph (the common case): the names alone."""
    if len(set(graphs)) == 1:
        return len(set(names)) != len(names)
    return len(set(zip(graphs, names))) != len(names)


def _any_holds(texts: tuple, part: str) -> bool:
    """Does any of ``texts`` (None allowed) contain ``part``?  One join and one search, not a loop."""
    try:
        return part in "\n".join(texts)
    except TypeError:  # a None among them
        return any(part in t for t in texts if t)


def _place_key(place) -> tuple[int, int]:
    return (place.rank, place.step)
