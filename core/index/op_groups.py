"""Stored tensor records (units) into op executions: one op per name and run, with its scope and counts.

A unit is one dumped file (or one statistics row); ``group_ops`` makes the ops of one rank/step, splitting
an op name that ran several times in a step (a loop body) into runs.  Statistics rows with a payload twin
are merged first (``merge_stats_only``), and Dump-Watch snapshot files are told apart from ops
(``mark_watch_snapshots``).  Part of ``finalize``; it reads the index's tables and writes only units.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from dumpscope.core.layouts.paths import CONSTANTS_STEP
from dumpscope.core.names import sanitize_name
from dumpscope.core.units import dumps_entries, nonfinite_sums, slot_label

if TYPE_CHECKING:
    from dumpscope.core.index.dump_index import DumpIndex



@dataclass(slots=True)
class OpAcc:
    rank: int
    step: int
    graph: str
    name: str
    file_name: str
    type: str
    producer: str
    folder: str
    first_ts: Optional[int] = None
    order_hint: float = float("inf")
    scope: Optional[str] = None
    task: Optional[int] = None
    stream: Optional[int] = None
    unit_ids: list[int] = field(default_factory=list)  # the first one is the op's id
    joined: Optional[str] = None
    join_rule: Optional[str] = None
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    has_stats: bool = False
    watch_of: Optional[str] = None  # Dump-Watch snapshot of this watched op (file-side name)
    watch_after: Optional[str] = None  # … taken after this layer op (file-side name)
    run: int = 0  # which run of the op this is, when it ran several times in the step (a loop body)
    csv_name: Optional[str] = None  # the execution-order CSV's name, when no graph file joins
    note: Optional[str] = None  # why no graph-side name was found (shown with a ``?``)
    _sfile: Optional[str] = None

    @property
    def sfile(self) -> str:
        """``sanitize_name(file_name)``, computed once (joins and orders ask for it repeatedly)."""
        if self._sfile is None:
            self._sfile = sanitize_name(self.file_name)
        return self._sfile


#: what an op-table row is: an executed op, or a value the graph holds (DESIGN.md: not ops)
KIND_OP = "op"
KIND_PARAMETER = "parameter"
KIND_CONSTANT = "constant"


def op_kind(op_type: str, step: int) -> str:
    """MindSpore writes graph constants in ``constants/`` (no step) and every ``Parameter.*``
    after the step's last kernel: neither ran, so neither is an op (no execution index)."""
    if step == CONSTANTS_STEP:
        return KIND_CONSTANT
    if op_type == "Parameter":
        return KIND_PARAMETER
    return KIND_OP


def scope_of(name: str) -> str:
    return name.rsplit("/", 1)[0] if "/" in name else ""


def merge_stats_only(index: "DumpIndex") -> None:
    """Where a tensor has both a payload file and a stats-CSV row, keep one record.

    The payload record keeps the CSV statistics (so a first look needs no decoding).
    A stats-only unit holds one tensor, or the rows of one per-op CSV; payload units (a CANN
    file) may hold several.  A stats-only tensor with a payload twin leaves its unit; a unit
    left empty is dropped, and its place's dtypes are no longer known per folder (``place_dtypes``).
    """
    if not index.query("SELECT 1 FROM meta WHERE key='stats_only'") or \
            not index.query("SELECT 1 FROM units WHERE storage='none' LIMIT 1") or \
            not index.query("SELECT 1 FROM units WHERE storage!='none' LIMIT 1"):
        return
    rows = index.query(
        "SELECT id, rank, step, graph, file_name, storage, tensors FROM units "
        "WHERE (rank, step, graph, file_name) IN (SELECT rank, step, graph, file_name "
        "FROM units WHERE storage='none') ORDER BY id")
    by_key: dict[tuple, list[tuple]] = defaultdict(list)
    for row in rows:
        by_key[row[1:5]].append(row)
    drop: list[tuple[int]] = []
    rewrite: dict[int, list[list]] = {}
    shrink: list[tuple] = []
    changed: set[tuple[int, int]] = set()  # places whose stored units are no longer the ones packed
    for group in by_key.values():
        payload = {r[0]: json.loads(r[6]) for r in group if r[5] != "none"}
        where = {(e[0], e[1]): (uid, e) for uid, entries in payload.items() for e in entries}
        for r in group:
            if r[5] != "none":
                continue
            stats_only = json.loads(r[6])
            left = []
            for entry in stats_only:
                hit = where.get((entry[0], entry[1]))
                if hit is None:
                    left.append(entry)
                    continue
                uid, target = hit
                if target[10] is None and entry[10] is not None:
                    target[10] = entry[10]
                    rewrite[uid] = payload[uid]
            if len(left) < len(stats_only):
                changed.add((r[1], r[2]))
            if not left:
                drop.append((r[0],))
            elif len(left) < len(stats_only):
                shrink.append((dumps_entries(left), len(left), " ".join(slot_label(e[0], e[1]) for e in left),
                               *nonfinite_sums(left), r[0]))
    if drop or shrink:
        with index._lock:
            cur = index.conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            cur.executemany("UPDATE units SET tensors=?, nan=?, posinf=?, neginf=? WHERE id=?",
                            [(dumps_entries(entries), *nonfinite_sums(entries), uid)
                             for uid, entries in rewrite.items()])
            cur.executemany("UPDATE units SET tensors=?, ntensors=?, slots=?, nan=?, posinf=?, neginf=? WHERE id=?",
                            shrink)
            cur.executemany("DELETE FROM units WHERE id=?", drop)
            # a dropped tensor's dtype may be no other's: those places' dtypes are read from their units
            cur.executemany("UPDATE dir_dtypes SET names=NULL WHERE rank=? AND step=?", sorted(changed))
            cur.execute("COMMIT")


_UNIT_COLS = ("id, graph, op_name, file_name, op_type, ts, producer, order_hint, task, stream, path, storage, "
              "scope, nan, posinf, neginf, slots")


def group_ops(index: "DumpIndex", rank: int, step: int) -> dict[tuple, OpAcc]:
    """Group units (a CANN file, or one tensor) into op executions.

    Units of one op name at one rank/step/graph form one op, unless the same input or
    output slot occurs more than once: then the op ran several times in that step (a loop,
    a subgraph called twice), and each run becomes its own op, in timestamp order.  A CANN
    file is always one run, so its tensors stay together.
    """
    units_by_key: dict[tuple, list[tuple]] = defaultdict(list)
    for row in index.query(f"SELECT {_UNIT_COLS} FROM units WHERE rank=? AND step=? ORDER BY id", (rank, step)):
        units_by_key[(row[1], row[2])].append(row)
    ops: dict[tuple, OpAcc] = {}
    for (graph, op_name), units in units_by_key.items():
        if len(units) == 1:
            runs = [units]
        else:
            slots = [s for u in units for s in u[16].split()]
            runs = [units] if len(set(slots)) == len(slots) else split_runs(units)
        for occurrence, run in enumerate(runs):
            (uid, _g, _n, file_name, op_type, ts, producer, order_hint, task, stream, path, _storage, scope,
             nan, posinf, neginf, _slots) = run[0]
            acc = ops[(rank, step, graph, op_name, occurrence)] = OpAcc(
                rank, step, graph, op_name, file_name, op_type, producer, _folder(path),
                first_ts=ts, order_hint=order_hint if order_hint is not None else float("inf"), scope=scope,
                task=task, stream=stream, unit_ids=[uid], run=occurrence)
            if nan is not None:
                acc.has_stats = True
                acc.nan, acc.posinf, acc.neginf = nan, posinf, neginf
            for u in run[1:]:
                acc.unit_ids.append(u[0])
                if u[5] is not None and (acc.first_ts is None or u[5] < acc.first_ts):
                    acc.first_ts = u[5]
                if u[7] is not None and u[7] < acc.order_hint:
                    acc.order_hint = u[7]
                if acc.scope is None and u[12]:
                    acc.scope = u[12]
                if u[13] is not None:
                    acc.has_stats = True
                    acc.nan += u[13]
                    acc.posinf += u[14]
                    acc.neginf += u[15]
    return ops


def _folder(path: str) -> str:
    head, sep, _ = path.rpartition(os.sep)
    return head if head else os.path.dirname(path)


def split_runs(units: list[tuple]) -> list[list[tuple]]:
    """Split one op name's units into runs: units by time, each joining the first run whose
    slots it does not repeat.

    Linear for many files of one op in a step folder (a loop, dynamic shapes: every file repeats
    the slots, so each starts a run of its own): the first run a unit can join is found from, per
    slot, the first run not holding that slot (``free``), instead of trying every run in turn (65k
    files took 7.5 min).  Every run before ``free[s]`` holds ``s``, so the first run free of all the
    unit's slots is at or after the largest of them; the runs' slot sets only grow, so each
    ``free[s]`` only moves forward."""
    ordered = sorted(units, key=lambda u: (u[5] or 0, u[0]))
    runs: list[list[tuple]] = []
    seen: list[set[str]] = []
    free: dict[str, int] = {}  # slot -> the first run not holding it
    for unit in ordered:
        slots = set(unit[16].split())
        i = max((free.get(s, 0) for s in slots), default=0)
        while i < len(runs) and not seen[i].isdisjoint(slots):
            i += 1
        if i == len(runs):
            runs.append([])
            seen.append(set())
        runs[i].append(unit)
        used = seen[i]
        used |= slots
        for s in slots:
            f = free.get(s, 0)
            while f < len(seen) and s in seen[f]:
                f += 1
            free[s] = f
    return runs


def mark_watch_snapshots(ops: dict[tuple, OpAcc]) -> None:
    """Recognise Dump-Watch snapshot files (op name ``{L}_To_{W}``, FORMATS.md §8.2).

    Scoped names may contain ``_To_`` themselves, so the split is checked against the
    names of the ops dumped in the same rank/step.
    """
    from dumpscope.core.names import WATCH_SEP, split_watch_name

    by_place: dict[tuple[int, int], list[OpAcc]] = defaultdict(list)
    for acc in ops.values():
        by_place[(acc.rank, acc.step)].append(acc)
    for group in by_place.values():
        if not any("_To_" in a.file_name for a in group):
            continue
        known = frozenset(a.sfile for a in group if "_To_" not in a.file_name)
        by_sfile = {a.sfile: a for a in group if "_To_" not in a.file_name}
        for acc in group:
            if "_To_" not in acc.file_name:
                continue
            split = split_watch_name(acc.sfile, known)
            if split is not None:
                acc.watch_after, acc.watch_of = split
                # the header spells both names (``net/B/Sub_To_net/C/Add``): cut it at the watched
                # op's own header name, so the trigger keeps its real name even when it was not dumped
                watched = by_sfile.get(acc.watch_of)
                tail = WATCH_SEP + watched.name if watched is not None else None
                if tail and acc.name.endswith(tail) and len(acc.name) > len(tail):
                    acc.watch_after = acc.name[:-len(tail)]
