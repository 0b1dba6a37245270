"""Measure the tensor pairs of many ops: in this process, or in the index's process pool.

A place of 20,000 ops is mostly small files; reading, decoding and measuring them is pure CPU in
Python and numpy, so threads only take turns on the GIL.  Ops are cut into batches (a few hundred
pairs or a few tens of MB each) and each batch is measured in a worker process (fork: the workers
inherit the imported readers).  Within a batch each op's files are read once (``tensor_io.OnceReader``);
small pairs with the same element count and dtypes are measured together (``small_pairs``, bit for
bit the single-pair pass) and stay columns (``Packed``: 16 floats a pair cross the pipe, not a record);
big tensors stream in bounded memory in whichever process measures them.  The process that uses the
results makes the records and runs the fixed rules (``judged``), in op order whatever order the
workers finish in, so the answer is the inline one.  Where no process pool can be used (one core,
inside the explorer, a restricted sandbox) or the place is small, the same batches run here.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterable, Iterator, Optional, Union

import numpy as np

from dumpscope.core.engines.compare.metrics import CompareResult, Tolerance, measure_streams
from dumpscope.core.engines.compare.small_pairs import (SMALL_MAX, SmallBlock, as_stream, rows_exact, small_block,
                                                        small_kind, values_of)
from dumpscope.core.engines.compare.verdict import (ERROR, PASS, Context, Thresholds, element_rtol, fixed_verdict,
                                                   small_passes)
from dumpscope.core.support.gc_pause import gc_paused
from dumpscope.core.tensors.layout_plans import planned_flat
from dumpscope.core.tensors.load import (OnceReader, TensorLoadError, TensorRef, array_stream, detached,
                                         import_readers, value_chunks, value_dtype)

#: ``TensorRef``'s fields in order (a tuple pickles twenty times faster than the dataclass)
RefFields = tuple
#: one op's loaded pairs (golden, target), in row order
Pairs = list[tuple[TensorRef, TensorRef]]
#: per pair: the measurement, or the one-line reason the tensors could not be read
Outcome = Union[CompareResult, str]
#: one op's loaded pairs as the index's tensor rows (``query.TensorRow``: golden, target) with each one's
#: io and row kind; a pool worker is sent them as a ``Wire``
OpJob = list[tuple[Any, Any, str, str]]
#: a batch as a pool worker is sent it (``wire``): each layout once, and per op its two files and per
#: pair the number of its layout (or, when that cannot say it, the pair's ``RefFields``)
Wire = tuple[list[tuple], list[tuple]]
#: what comes back for one op: per loaded pair (outcome, verdict, rule) — the fixed rules' verdict, or a pass
#: for the walk to judge — or, for a small block's row the fixed rules pass, that row (a list: the
#: :data:`small_pairs.COLUMNS`, then its ``SmallBlock``; ``judged``)
Judged = list[Union[tuple[Outcome, str, str], list]]
#: what a batch's measurement is sent back as: per op, per loaded pair, its row in the batch's blocks
#: (an int: the blocks' rows numbered on from block to block) or its outcome
Packed = tuple[list[list[Union[int, Outcome]]], list[SmallBlock]]

#: below this many matched ops a pool costs more (fork, pickling) than it saves
POOL_MIN_OPS = 256
#: a batch closes at this many pairs or bytes (both sides), whichever comes first
BATCH_PAIRS = 256
BATCH_BYTES = 64 << 20
#: in-process threads only pay off when numpy's long loops (big tensors) dominate
THREAD_MIN_BYTES = 1 << 20
#: elements of one (pairs × n) block of the small-pair kernel (its six buffers, ``small_pairs._workspace``:
#: 2.6 MB a process): fewer numpy calls a pair; measuring both 20k pairs' 40,000 pairs took 4-6 % less CPU
#: at 2**16 than at 2**15 (2**14: 5-8 % more; 2**17 about as 2**16), and no less in the main process
#: beside two workers at 2**14 (blocks within a core's cache)
SMALL_BLOCK = 1 << 16


def judge_batch(jobs: list[OpJob], th: Thresholds) -> Packed:
    """``measure_packed`` of consecutive ops, in this process; the process that uses the records makes
    them and runs their fixed rules (``judged``)."""
    with gc_paused():  # results are small records without cycles (see gc_pause)
        return measure_packed([[(g.ref(), t.ref()) for g, t, _io, _kind in pairs] for pairs in jobs], _allclose(th))


def judge_wire(batch: Wire, allclose: Optional[tuple[float, float]]) -> Packed:
    """``judge_batch`` of a batch sent as a ``Wire`` (the unit of work of a pool worker)."""
    return measure_packed(unwire(batch), allclose)


def _allclose(th: Thresholds) -> Optional[tuple[float, float]]:
    return (th.atol or 0.0, th.rtol or 0.0) if th.allclose else None


def wire(jobs: list[OpJob]) -> Wire:
    """Consecutive ops' jobs as a pool worker is sent them: what a 40,000-pair compare pickled as two
    ``RefFields`` a pair (14 MB: each file's path twice, every dtype name and shape a new string or
    tuple, so pickle could not share them) is each op's two paths and per pair the number of its layout
    (every field of ``TensorRef`` but the path; the two sides' the same, nothing in ``extra``), each
    layout sent once a batch: 7.7 MB, pickled and unpickled in ~20 ms CPU, not ~100 (with making the
    refs on both ends, ~155 -> ~80 ms).  A pair in files other than the op's first pair's (a ``.npy``
    a tensor) goes as its two paths and its layout number; one whose sides are laid out apart or that
    has an ``extra`` as its two ``RefFields``.  ``unwire`` makes the same ``TensorRef``s of each."""
    layouts: dict[tuple, int] = {}
    ops: list[tuple] = []
    for job in jobs:
        if not job:
            ops.append(())
            continue
        gp, tp = job[0][0].path, job[0][1].path
        entries: list[Any] = []
        for g, t, _io, _kind in job:
            key = (g.storage, g.io, g.slot, g.dtype, g.stored_dtype, g.shape, g.format, g.device_shape, g.offset,
                   g.nbytes, g.sub_format)
            if (not g.extra and not t.extra and type(g.extra) is dict and type(t.extra) is dict
                    and key == (t.storage, t.io, t.slot, t.dtype, t.stored_dtype, t.shape, t.format, t.device_shape,
                                t.offset, t.nbytes, t.sub_format)):
                k = layouts.get(key)
                if k is None:
                    k = layouts[key] = len(layouts)
                entries.append(k if g.path == gp and t.path == tp else (g.path, t.path, k))
            else:
                entries.append((ref_fields(g), ref_fields(t)))
        ops.append((gp, tp, entries))
    return list(layouts), ops


def unwire(batch: Wire) -> list[Pairs]:
    """The ``TensorRef`` pairs of each op of a ``wire`` batch (each its own ``extra`` dict, as from the rows)."""
    layouts, ops = batch
    out: list[Pairs] = []
    for op in ops:
        pairs: Pairs = []
        if op:
            gp, tp, entries = op
            for e in entries:
                if type(e) is int:
                    g, t = gp, tp
                elif len(e) == 3:  # files of its own
                    g, t, e = e
                else:
                    pairs.append((TensorRef(*e[0]), TensorRef(*e[1])))
                    continue
                st, io, slot, dt, sdt, shape, fmt, dshape, off, nb, sub = layouts[e]
                pairs.append((TensorRef(g, st, io, slot, dt, sdt, shape, fmt, dshape, off, nb, sub, {}),
                              TensorRef(t, st, io, slot, dt, sdt, shape, fmt, dshape, off, nb, sub, {})))
        out.append(pairs)
    return out


def judged(packed: Packed, jobs: list[OpJob], th: Thresholds) -> list[Judged]:
    """The records of a batch with the fixed rules' verdicts (dtype kind, shape, NaN/Inf, argument,
    allclose: ``verdict.fixed_verdict``); what those leave open is judged by the engine's walk over the
    ops in order (``origin.Walk``), so it is not judged here.

    A small block's row whose fixed rules are known to answer None (``small_passes``: most pairs) gets
    no record: it stays its row of the block's values (a list: the :data:`small_pairs.COLUMNS`, then the
    block), and the engine reads it as the record would say it (``engine._take``)."""
    contexts: dict[str, Context] = {}
    out: list[Judged] = []
    slots, blocks = packed
    with gc_paused():
        # every block row numbered on from block to block (``measure_packed``): its values with its block,
        # ``None`` where the fixed rules may answer (a record is made for it below)
        lists: list[Optional[list]] = []
        for b in blocks:
            vals = b.values.tolist()
            if small_passes(b.golden_dtype, b.target_dtype, th):
                for at, shape, tshape in zip(vals, b.shapes, b.target_shapes):
                    if shape == tshape:
                        at.append(b)
                        lists.append(at)
                    else:
                        lists.append(None)
            else:
                lists += [None] * len(vals)
        made: Optional[list[CompareResult]] = None  # the blocks' records, made when one is needed
        for pairs, outcomes in zip(jobs, slots):
            row: Judged = []
            for (_g, _t, _io, kind), r in zip(pairs, outcomes):
                if type(r) is int:
                    small = lists[r]
                    if small is not None and kind != "scalar":
                        row.append(small)
                        continue
                    if made is None:
                        made = [m for b in blocks for m in b.results()]
                    r = made[r]
                elif isinstance(r, str):
                    row.append((r, ERROR, r))
                    continue
                ctx = contexts.get(kind)
                if ctx is None:
                    ctx = contexts[kind] = Context(th, kind=kind)
                r.verdict, r.rule = fixed_verdict(r, ctx) or (PASS, "")
                row.append((r, r.verdict, r.rule))
            out.append(row)
    return out


def outcomes_of(packed: Packed) -> list[list[Outcome]]:
    """What ``measure_packed`` measured, as records (made here: new objects each call)."""
    slots, blocks = packed
    made = [r for b in blocks for r in b.results()] if blocks else []
    return [[made[e] if type(e) is int else e for e in op] for op in slots]


def measure_batch(jobs: list[Pairs], allclose: Optional[tuple[float, float]],
                  together: bool = True) -> list[list[Outcome]]:
    """Every loaded pair of consecutive ops, as records (``measure_packed``)."""
    return outcomes_of(measure_packed(jobs, allclose, together))


def _kept(x: Any) -> tuple[Any, int, np.dtype]:
    """A tensor ``OnceReader.stored`` gave, as kept for the batched kernel (an array ``detached`` from its
    file's buffer; a ``Stored`` as it is: its plan's array says its size and dtype), its size and dtype."""
    if type(x) is tuple:
        return x, x[2].size, x[2].dtype
    return (detached(x) if x.base is not None else x), x.size, x.dtype


def measure_packed(jobs: list[Pairs], allclose: Optional[tuple[float, float]], together: bool = True) -> Packed:
    """Every loaded pair of consecutive ops, reading each op's files once.  ``together``: small
    in-memory pairs go through the batched kernel (``small_pairs``; False: pair by pair, the
    reference the batched results are tested against), whose rows stay columns."""
    out: list[list[Any]] = [[] for _ in jobs]
    groups: dict[tuple, list[tuple[int, int, np.ndarray, np.ndarray]]] = {}
    # per (size, golden dtype, target dtype) as read: its group's members, or None (not for the batched
    # kernel); the group's key (value dtypes, tolerance: a dataclass hashed field by field) is made and
    # hashed once per batch, not once per pair
    member_lists: dict[tuple, Optional[list]] = {}
    for i, job in enumerate(jobs):
        reader = OnceReader([r for pair in job for r in pair])
        row = out[i]
        for g, t in job:
            # (never raises: None streams) the values 1-D (``_shaped`` gives them back their shape: the
            # ref's, which ``OnceReader`` checked), or a CANN tensor undecoded (``Stored``: its plan
            # says its size and dtype, ``small_block`` gathers it); kept, arrays are ``detached`` from
            # the file's buffer
            ga, ta = reader.stored(g), reader.stored(t)
            if together and ga is not None and ta is not None:
                ga, gn, gdt = _kept(ga)
                ta, tn, tdt = _kept(ta)
                if gn == tn:
                    kind = (gn, gdt, tdt)
                    members = member_lists.get(kind, _UNSEEN)
                    if members is _UNSEEN:
                        members = member_lists[kind] = _group_of(groups, gn, gdt, tdt, allclose)
                    if members is not None:
                        members.append((i, len(row), ga, ta, g.shape, t.shape))
                        row.append(None)  # filled below, in place
                        continue
            if type(ga) is tuple:
                ga = planned_flat(*ga)
            if type(ta) is tuple:
                ta = planned_flat(*ta)
            try:
                gs = array_stream(_shaped(ga, g.shape)) if ga is not None else value_chunks(g)
                ts = array_stream(_shaped(ta, t.shape)) if ta is not None else value_chunks(t)
                row.append(measure_streams(gs, ts, _tolerance(gs[2], ts[2], allclose)))
            except TensorLoadError as exc:
                row.append(f"unreadable: {exc}")
    blocks: list[SmallBlock] = []
    rows = 0
    for (n, _gdt, _tdt, tol), members in groups.items():
        step = max(1, SMALL_BLOCK // n)
        # a plan's tensors side by side, gathered together (``small_pairs._fill``): each row is measured
        # on its own (``rows_exact``), so where it lies in which block changes none of its values, and
        # ``out`` numbers the rows as they come
        members.sort(key=_plans_of)
        for k in range(0, len(members), step):
            part = members[k:k + step]
            block, at = small_block([(m[2], m[3]) for m in part], tol)
            for (i, j, g, t, gs, ts), r in zip(part, at):
                out[i][j] = rows + r if r >= 0 else measure_streams(as_stream(_shaped(values_of(g), gs)),
                                                                    as_stream(_shaped(values_of(t), ts)), tol)
            if block is not None:
                # the shapes as the refs hold them (``OnceReader.flat`` gives only values of the ref's
                # shape): the same tuple objects for every pair of a layout, so a worker pickles each once
                kept = [m for m, r in zip(part, at) if r >= 0]
                block.shapes = [m[4] if type(m[4]) is tuple else tuple(m[4]) for m in kept]
                block.target_shapes = [m[5] if type(m[5]) is tuple else tuple(m[5]) for m in kept]
                blocks.append(block)
                rows += len(block.shapes)
    return out, blocks


_UNSEEN: Any = object()


def _plans_of(member: tuple) -> tuple[int, int]:
    """A group member's order: by its sides' plans (``id``; 0: an array)."""
    g, t = member[2], member[3]
    return (id(g[2]) if type(g) is tuple else 0, id(t[2]) if type(t) is tuple else 0)


def _group_of(groups: dict[tuple, list], size: int, gdt: np.dtype, tdt: np.dtype,
              allclose: Optional[tuple[float, float]]) -> Optional[list]:
    """The members list of the batched kernel's group for pairs of ``size`` elements a side read as
    ``gdt``/``tdt``, made on first use; None when such pairs are measured alone (no elements, too
    many, or a dtype the kernel does not take)."""
    if not (0 < size <= SMALL_MAX and small_kind(gdt) and small_kind(tdt)):
        return None
    gv, tv = value_dtype(gdt), value_dtype(tdt)
    return groups.setdefault((size, gv, tv, _tolerance(gv, tv, allclose)), [])


@lru_cache(maxsize=256)
def _tolerance(gdt: np.dtype, tdt: np.dtype, allclose: Optional[tuple[float, float]]) -> Tolerance:
    return Tolerance(rtol=element_rtol(str(gdt), str(tdt)), allclose=allclose)


def _shaped(flat: np.ndarray, shape: Any) -> np.ndarray:
    """``OnceReader.flat``'s values in the shape ``OnceReader.array`` gives them (the ref's)."""
    return flat.reshape(shape if type(shape) is tuple else tuple(shape))


def ref_fields(t: Any) -> RefFields:
    """What ``TensorRef`` is made of, from an index tensor row (``query.TensorRow``)."""
    return (t.path, t.storage, t.io, t.slot, t.dtype, t.stored_dtype, t.shape, t.format, t.device_shape, t.offset,
            t.nbytes, t.sub_format, t.extra)


def _job_bytes(job: OpJob) -> int:
    total = 0
    for g, t, _io, _kind in job:
        total += max(0, g.nbytes or 0) + max(0, t.nbytes or 0)
    return total


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
    """A process pool like the index's (same size and start method, None where it would be None), but
    not niced: here the parent waits on the workers, so they are the ones to hurry."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from dumpscope.core.index.pool import pool_size

    n = pool_size(workers)
    if n <= 1:
        return None
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    try:
        return ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context(method),
                                   initializer=_worker_start)
    except Exception:
        return None


def _worker_start() -> None:
    """A worker's cycle collector off for good: a batch's arguments are unpickled before ``judge_batch``
    can pause it, ~60,000 tuples and strings each that set off collections walking every object the
    worker inherited (a seventh of a worker's CPU in a 40,000-pair compare, finding nothing).  The
    batches make no cycles (plain tuples, arrays and records, see ``gc_pause``), so reference counting
    frees all of it; ``freeze`` also keeps the inherited objects' pages shared with the parent."""
    import gc

    gc.freeze()
    gc.disable()


def prestart(workers: Optional[int] = None, storages: Iterable[str] = ()) -> None:
    """Inside ``shared_pool``: start the pool's workers now, before the caller loads a big place's ops.
    Forked later, each worker began as a copy of a parent holding every op of both sides (a 100k-op
    place: ~385 MB a worker, half of it soon private as refcounts touch the pages).  What every worker
    would do first is done here once, before the fork: the readers of ``storages`` (the place's, see
    ``DumpQuery.place_storages``) imported and the small-pair kernel's check run (``rows_exact``)."""
    if _SHARED is None or workers == 1 or _SHARED.get(workers) is not None:  # (``Measurer``'s conditions)
        return
    import_readers(storages)
    rows_exact()
    pool = _pool(workers)
    if pool is None:
        return
    try:
        pool.submit(int).result()  # a fork pool starts every worker on its first task
    except Exception:
        pool.shutdown(wait=False, cancel_futures=True)
        return
    _SHARED[workers] = pool


class Measurer:
    """Measures jobs as they are handed in, in batches: in the process pool when ``pool`` (and one is
    available), else here (a batch of big tensors on a thread, numpy's long loops run without the
    GIL).  ``ready`` gives finished batches strictly in submission order, so the caller can judge the
    first ops while the workers measure the next ones; the answer is the same as measuring inline."""

    def __init__(self, th: Thresholds, workers: Optional[int] = None, pool: bool = False) -> None:
        self.th = th
        self._pool = None
        self._owns_pool = False
        if pool and workers != 1:
            self._pool = _SHARED.get(workers) if _SHARED else None
            if self._pool is None:
                self._pool = _pool(workers)
                if _SHARED is not None and self._pool is not None:
                    _SHARED[workers] = self._pool  # kept for the next places, shut by shared_pool()
                else:
                    self._owns_pool = True
        self._threads = ThreadPoolExecutor(max_workers=max(1, workers or 2), thread_name_prefix="dumpscope-compare") \
            if self._pool is None and workers != 1 else None
        self._pending: deque[tuple[int, int, list[OpJob], Any]] = deque()  # futures of ``Packed``
        self._next = 0  # op number of the next job handed in

    @property
    def pooled(self) -> bool:
        return self._pool is not None

    def submit(self, jobs: list[OpJob]) -> None:
        """Hand in the next ops' jobs (numbered on from the previous ones)."""
        for a, b in batches(jobs):
            part = jobs[a:b]
            fut: Any = None
            if self._pool is not None:
                try:
                    fut = self._pool.submit(judge_wire, wire(part), _allclose(self.th))
                except Exception:  # no process can be started here: measure the rest in this process
                    self._give_up()
            if fut is None and self._threads is not None and _job_bytes_all(part) >= THREAD_MIN_BYTES * max(
                    1, sum(len(j) for j in part)):
                fut = self._threads.submit(judge_batch, part, self.th)
            self._pending.append((self._next + a, self._next + b, part, fut if fut is not None else
                                  _Done(judge_batch(part, self.th))))
        self._next += len(jobs)

    @property
    def ops_pending(self) -> int:
        """Ops handed in whose outcomes were not taken yet."""
        return self._next - self._pending[0][0] if self._pending else 0

    def ready(self, wait: bool = False, keep: Optional[int] = None) -> Iterator[tuple[int, int, list[Judged]]]:
        """``(first op, end op, outcomes)`` of each finished batch in order; ``wait``: all of them;
        ``keep``: waits for the oldest until at most this many ops are pending."""
        from concurrent.futures.process import BrokenProcessPool

        while self._pending and (wait or self._pending[0][3].done()
                                 or (keep is not None and self.ops_pending > keep)):
            a, b, part, fut = self._pending.popleft()
            try:
                got = fut.result()
            except BrokenProcessPool:  # a worker died (killed, out of memory): this batch here
                self._give_up()
                got = judge_batch(part, self.th)
            yield a, b, judged(got, part, self.th)

    def _give_up(self) -> None:
        if self._pool is not None:
            if _SHARED:
                for k, v in list(_SHARED.items()):
                    if v is self._pool:
                        del _SHARED[k]
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        for ex in (self._pool if self._owns_pool else None, self._threads):
            if ex is not None:
                ex.shutdown(wait=True, cancel_futures=True)
        self._pool = self._threads = None


#: pools kept across the places of one ``shared_pool`` block (by ``workers``), else None
_SHARED: Optional[dict[Optional[int], Any]] = None


@contextmanager
def shared_pool() -> Iterator[None]:
    """Measurers made inside the block share one process pool (started by the first that needs it,
    shut at the end): ``compare --step all`` over 20 places forks the workers once, not 20 times."""
    global _SHARED
    if _SHARED is not None:  # nested: the outer block owns the pools
        yield
        return
    _SHARED = {}
    try:
        yield
    finally:
        pools, _SHARED = _SHARED, None
        for p in pools.values():
            p.shutdown(wait=True, cancel_futures=True)


class _Done:
    """A batch measured on the spot, shaped like a future."""

    def __init__(self, value: Packed) -> None:
        self._value = value

    def done(self) -> bool:
        return True

    def result(self) -> Packed:
        return self._value


def _job_bytes_all(jobs: list[OpJob]) -> int:
    return sum(_job_bytes(j) for j in jobs)
