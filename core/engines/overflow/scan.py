"""Scan output tensors for NaN/Inf across many ops: the process pool, the cache, the batched writes.

Files are read once each (``core.nonfinite``), by the same kind of process pool the index uses,
in batches; results are kept per stored unit (a unit id is never reused, so a cached count is
never stale) in the ``nonfinite`` table and summed per op into the ops table, so a warm run
answers from the index without reading a byte.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from dumpscope.core.tensors.nonfinite import UnitJob, scan_batch
from dumpscope.core.units import unpack

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery

#: below this many bytes to read, files are counted in this process (a pool costs more than it saves)
INLINE_BYTES = 8 << 20
BATCH_BYTES = 16 << 20
BATCH_UNITS = 256


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

    def add_unit(self, tensors: Iterable[tuple], error: Optional[str] = None) -> None:
        """One stored unit's scan result: its output tensors' ``(io, slot, nan, +inf, -inf, first)``."""
        for _io, slot, nan, pos, neg, first in tensors:
            self.add(slot, nan, pos, neg, first)
        if error:
            self.errors.append(error)

    @property
    def bad(self) -> bool:
        return bool(self.nan or self.posinf or self.neginf)


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


def _result(fut, batch: list[UnitJob]) -> list[tuple]:
    try:
        return fut.result()
    except Exception:  # a worker died or could not start: count the batch here
        return scan_batch(batch)


def count_ops(q: "DumpQuery", op_ids: set[int], unit_rows: list[tuple],
              progress: Optional[Callable[[int, int], None]] = None,
              workers: Optional[int] = None) -> dict[int, OpCount]:
    """Output counts of the ops ``op_ids`` from their ``unit_rows`` ``(id, op_id, path, storage, tensors)``:
    cached units from the index, the rest read (each file once) in the pool, stored in batches.
    Every op's count is returned: for a few ops (``scan_places`` is the whole-job path)."""
    rows = [r for r in unit_rows if r[1] in op_ids]
    place = PlaceJob(None, lambda: rows, keep=set(op_ids))
    kept, _counted = scan_places(q, [place], len(rows), progress, workers, record=False)
    return kept


@dataclass
class PlaceJob:
    """One place of a whole-job scan: its key, a loader of its unit rows (called when its turn comes, so
    only a few places' rows are in memory at once) and the ops whose counts the caller wants back even
    when clean (``keep``; bad ops always come back)."""

    key: Any
    units: Callable[[], list[tuple]]
    keep: set[int] = field(default_factory=set)


class _PlaceState:
    __slots__ = ("job", "op_of", "counts", "left")

    def __init__(self, job: PlaceJob, op_of: dict[int, int]) -> None:
        self.job = job
        self.op_of = op_of
        self.counts: dict[int, OpCount] = defaultdict(OpCount)
        self.left = 0  # batches not yet back

    def add(self, results: Iterable[tuple]) -> None:
        for uid, tensors, err in results:
            self.counts[self.op_of[uid]].add_unit(tensors, err)


def scan_places(q: "DumpQuery", places: Iterable[PlaceJob], total: int,
                progress: Optional[Callable[[int, int], None]] = None, workers: Optional[int] = None,
                record: bool = True) -> tuple[dict[int, OpCount], dict[Any, int]]:
    """Count the outputs of every unit of ``places``, a place at a time, in bounded memory.

    Why a place at a time: a million-file job cannot hold every unit row, job and result at once
    (the whole-job scan is issue 21's RSS <= 500 MB path).  Each place's units are loaded when its
    turn comes; their files are read in batches, in the pool once more than ``INLINE_BYTES`` wait,
    with a bounded number of batches in flight, so the next place loads while the last ones are read.
    A place's op counts are summed once all its batches are back, recorded on the ops
    (``record``), and dropped except for bad ops and ``keep`` ops.  ``total``: the units expected
    (the progress denominator; skipped units count as done).  Returns (kept counts by op id,
    ops counted per place key)."""
    q.overflow.ensure_counts_table()
    kept: dict[int, OpCount] = {}
    counted: dict[Any, int] = {}
    finished = 0
    pending: list[tuple] = []
    queue: deque[tuple[_PlaceState, list[UnitJob]]] = deque()
    in_flight: dict[Any, tuple[_PlaceState, list[UnitJob]]] = {}
    pool = None
    pool_tried = False
    window = 0
    seen_bytes = seen_batches = 0
    if progress is not None:
        progress(0, total)

    def finish(st: _PlaceState) -> None:
        done_counts = {op_id: c for op_id, c in st.counts.items() if c.counted or c.errors}
        if record:
            record_counts(q, done_counts)
        counted[st.job.key] = sum(1 for c in done_counts.values() if c.counted)
        for op_id, c in done_counts.items():
            if c.bad or c.errors or op_id in st.job.keep:
                kept[op_id] = c

    def back(st: _PlaceState, results: list[tuple]) -> None:
        nonlocal finished, pending
        st.add(results)
        pending.extend(results)
        finished += len(results)
        if len(pending) >= 2000:
            q.overflow.store_counts(pending)
            pending = []
        st.left -= 1
        if st.left == 0:
            finish(st)
        if progress is not None:
            progress(finished, max(total, finished))

    def pump(drain: bool) -> None:
        """Read the queued batches: inline without a pool; else keep ``window`` in flight and return
        once all are submitted (``drain``: once all are back)."""
        from concurrent.futures import FIRST_COMPLETED, wait

        while queue and pool is None:
            st, batch = queue.popleft()
            back(st, scan_batch(batch))
        while queue or (drain and in_flight):
            while queue and len(in_flight) < window:
                st, batch = queue.popleft()
                in_flight[pool.submit(scan_batch, batch)] = (st, batch)
            if not queue and not drain:
                return  # the next place loads while these are read
            done, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
            for fut in done:
                st, batch = in_flight.pop(fut)
                back(st, _result(fut, batch))

    try:
        for job in places:
            rows = job.units()
            jobs, op_of, size = _output_jobs(rows)
            st = _PlaceState(job, op_of)
            cached = q.overflow.cached_counts([j[0] for j in jobs])
            st.add(cached.values())
            finished += len(cached) + len(rows) - len(jobs)  # units without outputs to read count as done
            del rows
            batches = _batches([j for j in jobs if j[0] not in cached], size)
            st.left = len(batches)
            if not batches:
                finish(st)
                if progress is not None:
                    progress(finished, max(total, finished))
                continue
            queue.extend((st, b) for b in batches)
            seen_bytes += sum(size.values()) - sum(size.get(uid, 0) for uid in cached)
            seen_batches += len(batches)
            if not pool_tried and seen_bytes > INLINE_BYTES and seen_batches > 1:
                from dumpscope.core.index.pool import pool_size, process_pool

                pool_tried = True
                pool = process_pool(workers)  # started once the parent is past its first places: a small fork
                window = 2 * pool_size(workers)
            pump(drain=False)
        pump(drain=True)
        q.overflow.store_counts(pending)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return kept, counted


def record_counts(q: "DumpQuery", counts: dict[int, OpCount]) -> None:
    """Remember op totals on the ops (badges, warm answers); ops with nothing counted stay unknown."""
    q.record_nonfinite({op_id: (c.nan, c.posinf, c.neginf) for op_id, c in counts.items() if c.counted})
