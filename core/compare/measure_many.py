"""Measure the tensor pairs of many ops: in this process, or in the index's process pool.

A place of 20,000 ops is mostly small files; reading, decoding and measuring them is pure CPU in
Python and numpy, so threads only take turns on the GIL.  Ops are cut into batches (a few hundred
pairs or a few tens of MB each) and each batch is measured in a worker process (fork: the workers
inherit the imported readers), which returns plain picklable ``CompareResult`` records.  Results
come back in op order whatever order the workers finish in, so the answer is the inline one.
Within a batch each op's files are read once (``tensor_io.OnceReader``); small pairs with the same
element count and dtypes are measured together (``metrics.measure_small_many``, bit for bit the
single-pair pass); big tensors stream in bounded memory in whichever process measures them.  Where
no process pool can be used (one core, inside the explorer, a restricted sandbox) or the place is
small, the same batches run here.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any, Callable, Optional, Union

import numpy as np

from dumpscope.core.compare.metrics import (SMALL_MAX, CompareResult, Tolerance, measure_small_many, measure_streams,
                                            small_kind)
from dumpscope.core.compare.verdict import element_rtol
from dumpscope.core.tensor_io import OnceReader, TensorLoadError, TensorRef

#: ``TensorRef``'s fields in order (a tuple pickles twenty times faster than the dataclass)
RefFields = tuple
#: one op's loaded pairs (golden, target), in row order
OpJob = list[tuple[RefFields, RefFields]]
#: per pair: the measurement, or the one-line reason the tensors could not be read
Outcome = Union[CompareResult, str]

#: below this many loaded pairs a pool costs more (fork, pickling) than it saves
POOL_MIN_PAIRS = 512
#: a batch closes at this many pairs or bytes (both sides), whichever comes first
BATCH_PAIRS = 256
BATCH_BYTES = 64 << 20
#: in-process threads only pay off when numpy's long loops (big tensors) dominate
THREAD_MIN_BYTES = 1 << 20
#: elements of one (pairs × n) block of the small-pair kernel
SMALL_BLOCK = 1 << 14


def measure_batch(jobs: list[OpJob], allclose: Optional[tuple[float, float]],
                  together: bool = True) -> list[list[Outcome]]:
    """Every loaded pair of consecutive ops (the unit of work sent to a pool worker), reading each op's
    files once.  ``together``: small in-memory pairs go through the batched kernel (False: pair by
    pair, the reference the batched results are tested against)."""
    out: list[list[Any]] = [[] for _ in jobs]
    groups: dict[tuple, list[tuple[int, int, np.ndarray, np.ndarray]]] = {}
    for i, fields in enumerate(jobs):
        job = [(TensorRef(*g), TensorRef(*t)) for g, t in fields]
        reader = OnceReader([r for pair in job for r in pair])
        row = out[i]
        for g, t in job:
            try:
                ga, gs = reader.value_source(g)
                ta, ts = reader.value_source(t)
                tol = _tolerance(gs[2], ts[2], allclose)
                if (together and ga is not None and ta is not None and 0 < ga.size == ta.size <= SMALL_MAX
                        and small_kind(gs[2]) and small_kind(ts[2])):
                    groups.setdefault((ga.size, gs[2], ts[2], tol), []).append(
                        (i, len(row), _detached(ga), _detached(ta)))
                    row.append(None)  # filled below, in place
                else:
                    row.append(measure_streams(gs, ts, tol))
            except TensorLoadError as exc:
                row.append(f"unreadable: {exc}")
    for (n, _gdt, _tdt, tol), members in groups.items():
        step = max(1, SMALL_BLOCK // n)
        for k in range(0, len(members), step):
            part = members[k:k + step]
            for (i, j, _g, _t), r in zip(part, measure_small_many([(m[2], m[3]) for m in part], tol)):
                out[i][j] = r
    return out


@lru_cache(maxsize=256)
def _tolerance(gdt: np.dtype, tdt: np.dtype, allclose: Optional[tuple[float, float]]) -> Tolerance:
    return Tolerance(rtol=element_rtol(str(gdt), str(tdt)), allclose=allclose)


def _detached(a: np.ndarray) -> np.ndarray:
    """``a`` without a hold on its file's buffer (a plain-layout tensor is a view of the bytes read)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return a.copy() if root.base is not None else a


def ref_fields(t: Any) -> RefFields:
    """What ``TensorRef`` is made of, from an index tensor row (``query.TensorRow``)."""
    return (t.path, t.storage, t.io, t.slot, t.dtype, t.stored_dtype, t.shape, t.format, t.device_shape, t.offset,
            t.nbytes, t.sub_format, t.extra)


_NBYTES = 10  # position of ``nbytes`` in RefFields


def _job_bytes(job: OpJob) -> int:
    return sum(max(0, g[_NBYTES] or 0) + max(0, t[_NBYTES] or 0) for g, t in job)


def batches(jobs: list[OpJob]) -> list[tuple[int, int]]:
    """``(start, stop)`` ranges of consecutive ops, each about ``BATCH_PAIRS`` pairs or ``BATCH_BYTES``."""
    out: list[tuple[int, int]] = []
    start = pairs = size = 0
    for i, job in enumerate(jobs):
        pairs += len(job)
        size += _job_bytes(job)
        if pairs >= BATCH_PAIRS or size >= BATCH_BYTES:
            out.append((start, i + 1))
            start, pairs, size = i + 1, 0, 0
    if start < len(jobs):
        out.append((start, len(jobs)))
    return out


def _pool(workers: Optional[int]):
    from dumpscope.core.index import process_pool

    return process_pool(workers)


def measure_jobs(jobs: list[OpJob], allclose: Optional[tuple[float, float]], workers: Optional[int] = None,
                 done: Optional[Callable[[int, int], None]] = None) -> list[list[Outcome]]:
    """``measure_batch`` of every job, in job order.  ``done(start, stop)`` after each finished range
    of ops (in order).  ``workers``: pool size (None: the index's default; 1: this process only)."""
    n_pairs = sum(len(j) for j in jobs)
    ranges = batches(jobs)
    pool = _pool(workers) if n_pairs >= POOL_MIN_PAIRS and len(ranges) > 1 and workers != 1 else None
    if pool is None:
        return _inline(jobs, ranges, allclose, workers, done)
    from concurrent.futures.process import BrokenProcessPool

    out: list[list[Outcome]] = []
    try:
        futures = []
        for a, b in ranges:
            try:
                futures.append(pool.submit(measure_batch, jobs[a:b], allclose))
            except Exception:  # no process can be started here: measure the rest inline
                futures.append(None)
        for (a, b), fut in zip(ranges, futures):
            try:
                got = fut.result() if fut is not None else None
            except BrokenProcessPool:  # a worker died (killed, out of memory): this batch inline
                got = None
            out.extend(got if got is not None else measure_batch(jobs[a:b], allclose))
            if done is not None:
                done(a, b)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return out


def _inline(jobs: list[OpJob], ranges: list[tuple[int, int]], allclose: Optional[tuple[float, float]],
            workers: Optional[int], done: Optional[Callable[[int, int], None]]) -> list[list[Outcome]]:
    """This process, batch by batch; on a few threads when big tensors (numpy's GIL-free loops) dominate."""
    n_pairs = sum(len(j) for j in jobs)
    big = n_pairs > 0 and sum(_job_bytes(j) for j in jobs) >= THREAD_MIN_BYTES * n_pairs
    threads = max(1, workers or 2)
    if big and threads > 1 and len(jobs) > 1:  # one op per task: a big op is a batch of its own anyway
        ranges = [(i, i + 1) for i in range(len(jobs))]
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dumpscope-compare") as tp:
            results = tp.map(lambda r: measure_batch(jobs[r[0]:r[1]], allclose), ranges)
            return _collect(zip(ranges, results), done)
    return _collect(((r, measure_batch(jobs[r[0]:r[1]], allclose)) for r in ranges), done)


def _collect(results, done: Optional[Callable[[int, int], None]]) -> list[list[Outcome]]:
    out: list[list[Outcome]] = []
    for (a, b), got in results:
        out.extend(got)
        if done is not None:
            done(a, b)
    return out
