"""Scan output tensors for NaN/Inf across many ops: the process pool, the cache, the batched writes.

Files are read once each (``core.nonfinite``), by the same kind of process pool the index uses,
in batches; results are kept per stored unit (a unit id is never reused, so a cached count is
never stale) in the ``nonfinite`` table and summed per op into the ops table, so a warm run
answers from the index without reading a byte.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from dumpscope.core.nonfinite import UnitJob, scan_batch
from dumpscope.core.units import unpack

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery

#: below this many bytes to read, files are counted in this process (a pool costs more than it saves)
INLINE_BYTES = 8 << 20
BATCH_BYTES = 16 << 20
BATCH_UNITS = 256

_TABLE = "CREATE TABLE IF NOT EXISTS nonfinite(unit_id INTEGER PRIMARY KEY, data TEXT, error TEXT)"


@dataclass(slots=True)
class OpCount:
    """Summed output counts of one op; ``first_bad``: (slot, flat index) of its first bad output."""

    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    counted: int = 0  # output tensors counted
    first_bad: Optional[tuple[int, int]] = None
    errors: list[str] = field(default_factory=list)

    def add(self, slot: int, nan: int, pos: int, neg: int, first: Optional[int]) -> None:
        self.nan += nan
        self.posinf += pos
        self.neginf += neg
        self.counted += 1
        if first is not None and (nan or pos or neg) and (self.first_bad is None or slot < self.first_bad[0]):
            self.first_bad = (slot, first)

    @property
    def bad(self) -> bool:
        return bool(self.nan or self.posinf or self.neginf)


def ensure_table(q: "DumpQuery") -> None:
    with q.index._lock:
        try:
            q.index.conn.execute(_TABLE)
        except sqlite3.OperationalError:
            pass  # locked by a writer: nothing cached this time


def _output_jobs(rows: Iterable[tuple]) -> tuple[list[UnitJob], dict[int, int], dict[int, int]]:
    """Jobs for the payload outputs of units ``(id, op_id, path, storage, tensors)``; unit -> op, unit -> bytes."""
    jobs: list[UnitJob] = []
    op_of: dict[int, int] = {}
    size: dict[int, int] = {}
    for uid, op_id, path, storage, packed in rows:
        if storage in ("none", "value"):
            continue
        outs = [t for t in unpack(packed) if t["io"] == "output" and t.get("dtype") != "none"]
        if not outs:
            continue
        jobs.append((uid, path, storage, [(t["io"], t["slot"], t["dtype"], list(t["shape"]), t["format"],
                                           list(t["device_shape"]), t["stored_dtype"], t["offset"], t["nbytes"],
                                           t["sub_format"], t["extra"] or None) for t in outs]))
        op_of[uid] = op_id
        size[uid] = sum(int(t["nbytes"] or 0) for t in outs)
    return jobs, op_of, size


def _batches(jobs: list[UnitJob], size: dict[int, int]) -> list[list[UnitJob]]:
    out: list[list[UnitJob]] = []
    cur: list[UnitJob] = []
    nbytes = 0
    for j in sorted(jobs, key=lambda j: j[1]):  # by path: neighbours on disk together
        cur.append(j)
        nbytes += size.get(j[0], 0)
        if len(cur) >= BATCH_UNITS or nbytes >= BATCH_BYTES:
            out.append(cur)
            cur, nbytes = [], 0
    if cur:
        out.append(cur)
    return out


def _store(q: "DumpQuery", results: list[tuple]) -> None:
    """One transaction per batch of results; skipped (not cached) while another writer holds the file."""
    if not results:
        return
    rows = [(uid, json.dumps(tensors), err) for uid, tensors, err in results]
    with q.index._lock:
        cur = q.index.conn.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")
            cur.executemany("INSERT OR REPLACE INTO nonfinite VALUES(?, ?, ?)", rows)
            cur.execute("COMMIT")
        except sqlite3.OperationalError:
            if q.index.conn.in_transaction:
                cur.execute("ROLLBACK")


def _result(fut, batch: list[UnitJob]) -> list[tuple]:
    try:
        return fut.result()
    except Exception:  # a worker died or could not start: count the batch here
        return scan_batch(batch)


def cached_results(q: "DumpQuery", unit_ids: list[int]) -> dict[int, tuple]:
    out: dict[int, tuple] = {}
    for k in range(0, len(unit_ids), 900):
        part = unit_ids[k:k + 900]
        for uid, data, err in q.index.query(
                f"SELECT unit_id, data, error FROM nonfinite WHERE unit_id IN ({','.join('?' * len(part))})", part):
            out[uid] = (uid, json.loads(data), err)
    return out


def count_ops(q: "DumpQuery", op_ids: set[int], unit_rows: list[tuple],
              progress: Optional[Callable[[int, int], None]] = None,
              workers: Optional[int] = None) -> dict[int, OpCount]:
    """Output counts of the ops ``op_ids`` from their ``unit_rows`` ``(id, op_id, path, storage, tensors)``:
    cached units from the index, the rest read (each file once) in the pool, stored in batches."""
    ensure_table(q)
    jobs, op_of, size = _output_jobs(r for r in unit_rows if r[1] in op_ids)
    done = cached_results(q, [j[0] for j in jobs])
    todo = [j for j in jobs if j[0] not in done]
    total = len(jobs)
    finished = len(done)
    if progress is not None:
        progress(finished, total)
    if todo:
        batches = _batches(todo, size)
        pool = None
        if sum(size.get(j[0], 0) for j in todo) > INLINE_BYTES and len(batches) > 1:
            from dumpscope.core.index import process_pool

            pool = process_pool(workers)
        try:
            if pool is None:
                results_iter: Iterable[list[tuple]] = (scan_batch(b) for b in batches)
            else:
                from concurrent.futures import as_completed

                futures = {pool.submit(scan_batch, b): b for b in batches}
                results_iter = (_result(f, futures[f]) for f in as_completed(futures))
            pending: list[tuple] = []
            for results in results_iter:
                for r in results:
                    done[r[0]] = r
                pending.extend(results)
                finished += len(results)
                if len(pending) >= 2000:
                    _store(q, pending)
                    pending = []
                if progress is not None:
                    progress(finished, total)
            _store(q, pending)
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
    counts: dict[int, OpCount] = defaultdict(OpCount)
    for uid, tensors, err in done.values():
        c = counts[op_of[uid]]
        for _io, slot, nan, pos, neg, first in tensors:
            c.add(slot, nan, pos, neg, first)
        if err:
            c.errors.append(err)
    return dict(counts)


def record_counts(q: "DumpQuery", counts: dict[int, OpCount]) -> None:
    """Remember op totals on the ops (badges, warm answers); ops with nothing counted stay unknown."""
    q.record_nonfinite({op_id: (c.nan, c.posinf, c.neginf) for op_id, c in counts.items() if c.counted})
