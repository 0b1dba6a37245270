"""Many small tensor pairs measured at once: ``metrics.measure_streams``' answer, bit for bit, as columns.

A compare of two 20k-file CANN trees is 40,000 pairs of 1-2k elements.  Measured one by one, numpy's
cost per call and the per-pair records are most of the work, so pairs with the same element count and
dtypes go through one (pairs × n) float64 pass here, and what the single-pair pass would record of each
pair is kept as one row of numbers (``SmallBlock``): a pool worker sends these columns back (16 floats a
pair, not a pickled record with five dicts) and the records are made where they are used
(``SmallBlock.results``).  Rows holding NaN/Inf are left to the single-pair pass (``small_block``
returns -1 for them).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Union

import numpy as np

from dumpscope.core.engines.compare.metrics import (_DOT_ROW, HIST_SHIFT, CompareResult, Stream,
                                                    Tolerance, _dtype_name, _eps, measure_streams, q90_index)
from dumpscope.core.tensors.layout_plans import planned_flat

#: a pair side: its values, or a CANN tensor undecoded (``load.Stored``: buffer, offset, plan)
Values = Union[np.ndarray, tuple]

#: tensors below one dot-product row (each sum is then one einsum call) can be measured together
SMALL_MAX = _DOT_ROW - 1

#: the columns of ``SmallBlock.values``, in order
COLUMNS = ("cosine", "euc_dist", "max_abs_err", "max_rel_err", "one_thousandth_ratio", "five_thousandth_ratio",
           "golden_max", "golden_min", "golden_mean", "golden_l2norm", "target_max", "target_min", "target_mean",
           "target_l2norm", "max_scaled_err", "rel_err_q90")


@lru_cache(maxsize=1)
def rows_exact() -> bool:
    """Whether numpy's row-wise sums ("ij,ij->i" einsum, ``add.reduce`` on axis 1) are the 1-D sums of
    each row bit for bit (the same kernel over the same contiguous elements), checked once per process
    on awkward sizes and magnitudes; if not, ``measure_small_many`` measures pair by pair.  The values
    are scrambled from ``arange`` (``_scrambled``), not drawn from ``numpy.random``: importing that costs
    each pool worker more than this check."""
    for n in (1, 3, 7, 8, 9, 15, 16, 17, 100, 127, 128, 129, 255, 256, 1000, 1023, 1024, 1025, 4097, SMALL_MAX):
        m = (_scrambled(3 * n, 1.0) - 0.5).reshape(3, n) * np.exp(60.0 * _scrambled(3 * n, 2.0) - 30.0).reshape(3, n)
        e = (_scrambled(3 * n, 3.0) - 0.5).reshape(3, n)
        dots, gt, sums = np.einsum("ij,ij->i", m, m), np.einsum("ij,ij->i", m, e), np.add.reduce(m, axis=1)
        for k in range(3):
            if (float(np.einsum("i,i->", m[k], m[k])) != float(dots[k])
                    or float(np.einsum("i,i->", m[k], e[k])) != float(gt[k])
                    or float(np.add.reduce(m[k])) != float(sums[k])):
                return False
    return True


def _scrambled(count: int, seed: float) -> np.ndarray:
    """``count`` values spread over [0, 1) without a pattern a sum could exploit (the fractional part of a
    large multiple of a sine: the classic shader hash), the same on every run."""
    x = np.sin(np.arange(count) * 12.9898 + seed * 78.233) * 43758.5453
    return x - np.floor(x)


def small_kind(dt: np.dtype) -> bool:
    """Value dtypes the batched kernel takes: real numbers numpy casts itself (no complex, no ml_dtypes)."""
    return dt.kind in "biuf"


@dataclass(slots=True)
class SmallBlock:
    """What ``measure_streams`` records of each finite pair of one ``small_block`` call, as columns.

    Every row has ``n`` elements a side, the same dtypes and tolerance; ``values`` holds the
    :data:`COLUMNS` (cosine NaN: None — a real cosine is never NaN), ``close_failed`` the elements
    outside ``--atol/--rtol`` (None without them), ``hists`` the moved histogram of each row that has
    one (``metrics.moved_count``)."""

    golden_dtype: str
    target_dtype: str
    rtol: float
    n: int
    shapes: list[tuple[int, ...]]
    target_shapes: list[tuple[int, ...]]
    values: np.ndarray  # (rows, len(COLUMNS)) float64
    close_failed: Optional[np.ndarray]
    hists: dict[int, dict[int, int]]

    def results(self) -> list[CompareResult]:
        """The rows as the records ``measure_streams`` makes (verdict and rule left empty); new objects
        each call."""
        close = self.close_failed.tolist() if self.close_failed is not None else None
        gname, tname, rtol, n, hists = self.golden_dtype, self.target_dtype, self.rtol, self.n, self.hists
        out = []
        for k, (row, shape, tshape) in enumerate(zip(self.values.tolist(), self.shapes, self.target_shapes)):
            cos, euc, mab, mrel, r1, r5, gmax, gmin, gmean, gl2, tmax, tmin, tmean, tl2, msc, q90 = row
            hist = hists.get(k)
            # positional (2.5x faster than by keyword): CompareResult's fields in order, from verdict to
            # extra; a field moved there puts a value in the wrong place, which the bit-for-bit tests see
            out.append(CompareResult(
                "", "", shape, tshape, gname, tname, None if cos != cos else cos, euc, mab, mrel, r1, r5, n,
                0, 0, 0, 0, 0, close[k] if close is not None else None, None, None,
                {"max": gmax, "min": gmin, "mean": gmean, "l2norm": gl2},
                {"max": tmax, "min": tmin, "mean": tmean, "l2norm": tl2},
                rtol, dict(hist) if hist else {}, msc, q90, n,
                {"golden_only_nan": 0, "target_only_nan": 0, "golden_only_inf": 0, "target_only_inf": 0}))
        return out


def small_block(pairs: list[tuple[Values, Values]], tol: Tolerance
                ) -> tuple[Optional[SmallBlock], list[int]]:
    """``measure_streams`` of many in-memory pairs at once, bit for bit: the block of the finite pairs
    and, per pair, its row there or -1 (NaN/Inf, or numpy's row sums not exact here: measure it alone).
    A side is an array or a ``Stored`` tensor (``OnceReader.stored``: gathered here, a plan's
    consecutive tensors together).

    Every pair has the same element count ``n`` (1..``SMALL_MAX``) on both sides, every golden the
    same dtype, every target the same dtype, both real (``small_kind``).  The elementwise steps and the
    exact reductions (min, max, counts) run once over a (pairs × n) float64 block; each sum is the same
    einsum / pairwise sum over the same contiguous row as the single-pair pass (``rows_exact``), and
    what ``metrics._fill`` computes from them is the same IEEE operations on whole columns (a sum starts
    at 0.0: ``0.0 + x``, so -0.0 becomes 0.0 as there)."""
    if not pairs:
        return None, []
    if not rows_exact():
        return None, [-1] * len(pairs)
    g0, t0 = pairs[0]
    gdt, tdt = np.dtype(_dtype_of(g0).name), np.dtype(_dtype_of(t0).name)
    n = _size_of(g0)
    k_rows = len(pairs)
    size = k_rows * n
    G, T, D, W, S, B = (a[:size].reshape(k_rows, n) for a in _workspace(size))
    _fill(G, [g for g, _ in pairs])
    _fill(T, [t for _, t in pairs])
    with np.errstate(all="ignore"):
        sgg = np.einsum("ij,ij->i", G, G)
        stt = np.einsum("ij,ij->i", T, T)
        finite = np.isfinite(sgg) & np.isfinite(stt)  # NaN/Inf propagate into sums of squares
        fin = np.flatnonzero(finite)
        if fin.size == 0:
            return None, [-1] * k_rows
        if fin.size < k_rows:
            G, T, sgg, stt = G[fin], T[fin], sgg[fin], stt[fin]
        m = fin.size
        twin = _twins(G, T, sgg, stt, tol)
        if twin is None:
            V, close_failed, hists = _columns(G, T, sgg, stt, n, tol, _eps(gdt), D[:m], W[:m], S[:m], B[:m])
        else:  # rows with the same values on both sides: what the pass computes is known from the golden's
            V = np.empty((m, len(COLUMNS)))
            V[twin] = _twin_columns(G[twin], sgg[twin], n)
            other = np.flatnonzero(~twin)
            close_failed, hists = None, {}
            if other.size:
                k = other.size
                V[other], close_failed, got = _columns(G[other], T[other], sgg[other], stt[other], n, tol, _eps(gdt),
                                                       D[:k], W[:k], S[:k], B[:k])
                hists = {int(other[r]): h for r, h in got.items()}
    rows = [-1] * k_rows
    for r, i in enumerate(fin.tolist()):
        rows[i] = r
    kept = [pairs[i] for i in fin.tolist()] if fin.size < k_rows else pairs
    block = SmallBlock(_dtype_name(gdt), _dtype_name(tdt), tol.rtol, n, [_shape_of(g) for g, _ in kept],
                       [_shape_of(t) for _, t in kept], V, close_failed, hists)
    return block, rows


def _dtype_of(x: Values) -> np.dtype:
    return x[2].dtype if type(x) is tuple else x.dtype


def _size_of(x: Values) -> int:
    return x[2].size if type(x) is tuple else int(x.size)


def _shape_of(x: Values) -> tuple[int, ...]:
    return x[2].shape if type(x) is tuple else x.shape


def values_of(x: Values) -> np.ndarray:
    """A pair side's values as an array (a ``Stored`` tensor gathered by its plan, in its shape)."""
    return planned_flat(*x).reshape(x[2].shape) if type(x) is tuple else x


def _fill(out: np.ndarray, items: list[Values]) -> None:
    """``out``'s rows (float64, one an item) the items' values: an array's cast (consecutive arrays in
    one ``concatenate``: a cast call costs microseconds before its first element), consecutive
    ``Stored`` tensors of one plan copied into one (rows × stored elements) array, gathered by one
    ``take`` along the rows and cast in one pass: 80,000 per-tensor ``take``s (each a new array, copied
    again into the block) were a fifth of compare's worker time.  The same values either way: a
    gather only moves elements, and the cast is numpy's same one."""
    k = len(items)
    i = 0
    while i < k:
        first = items[i]
        j = i + 1
        if type(first) is tuple:
            plan = first[2]
            while j < k and type(items[j]) is tuple and items[j][2] is plan:
                j += 1
            m = j - i
            dt, count = plan.dtype, plan.count
            raw = _scratch(0, m * plan.nbytes).view(dt).reshape(m, count)
            np.concatenate([np.frombuffer(d, dt, count, o) for d, o, _p in items[i:j]], out=raw.reshape(-1))
            if plan.transpose is not None:  # the gather as a transposed copy, cast on the way
                dims, axes = plan.transpose
                np.copyto(out[i:j].reshape((m,) + tuple(dims[a] for a in axes)),
                          raw.reshape((m,) + dims).transpose((0,) + tuple(a + 1 for a in axes)), casting="unsafe")
                i = j
                continue
            if plan.index is not None:
                taken = _scratch(1, m * plan.index.size * dt.itemsize).view(dt).reshape(m, plan.index.size)
                np.take(raw, plan.index, axis=1, out=taken)
                raw = taken
            np.copyto(out[i:j], raw, casting="unsafe")
        else:
            while j < k and type(items[j]) is not tuple:
                j += 1
            # (compare's reader gives 1-D values: not reshaped again)
            np.concatenate([a if a.ndim == 1 else a.reshape(-1) for a in items[i:j]], out=out[i:j].reshape(-1),
                           casting="unsafe")
        i = j


def _scratch(which: int, nbytes: int) -> np.ndarray:
    """This thread's byte buffer ``which`` (0: stored tensors, 1: gathered), at least ``nbytes`` long
    (kept: see ``_workspace``)."""
    bufs = getattr(_WORK, "scratch", None)
    if bufs is None:
        bufs = _WORK.scratch = [np.empty(0, np.uint8), np.empty(0, np.uint8)]
    if bufs[which].size < nbytes:
        bufs[which] = np.empty(max(nbytes, 1 << 19), np.uint8)
    return bufs[which][:nbytes]


def _twins(G: np.ndarray, T: np.ndarray, sgg: np.ndarray, stt: np.ndarray, tol: Tolerance) -> Optional[np.ndarray]:
    """Which rows hold bit for bit the same float64 values on both sides (None: none), where that decides
    everything but the golden's own statistics: every difference is +0.0, so no element moved (a
    tolerance >= 0) and, without --atol/--rtol (whose limit may be below 0), none fails.  Only rows whose
    sums of squares agree are compared (nearly never a row that differs)."""
    if tol.allclose is not None or not tol.rtol >= 0.0:
        return None
    cand = np.flatnonzero(sgg == stt)
    if cand.size == 0:
        return None
    if cand.size == len(sgg):
        same = np.equal(G.view(np.int64), T.view(np.int64)).all(axis=1)
    else:
        same = np.zeros(len(sgg), np.bool_)
        same[cand] = np.equal(G[cand].view(np.int64), T[cand].view(np.int64)).all(axis=1)
    return same if same.any() else None


def _twin_columns(G: np.ndarray, sgg: np.ndarray, n: int) -> np.ndarray:
    """``_columns`` of rows whose target is the golden bit for bit: the target's max, min, sums are the
    golden's (the same kernels on the same values), G·T is G·G; |T - G| is +0.0 everywhere, so the
    differences' sum of squares, maximum and scaled maximum (0/x, or 0/0 everywhere: 0.0) are 0.0, and
    every relative error is 0.0 (0/|g|, or 0/eps where g == 0): maximum and 90th percentile 0.0, all
    elements below 0.001 and 0.005."""
    V = np.empty((len(G), len(COLUMNS)))
    G.max(axis=1, out=V[:, 6])
    G.min(axis=1, out=V[:, 7])
    V[:, 10], V[:, 11] = V[:, 6], V[:, 7]
    gsum = np.add.reduce(G, axis=1)
    V[:, [2, 3, 14, 15]] = 0.0
    V[:, [4, 5]] = n / n
    zero = np.zeros(len(G))
    _finish(V, n, sgg, sgg, sgg, zero, gsum, gsum)
    return V


def _columns(G: np.ndarray, T: np.ndarray, sgg: np.ndarray, stt: np.ndarray, n: int, tol: Tolerance, eps: float,
             D: np.ndarray, W: np.ndarray, S: np.ndarray, B: np.ndarray
             ) -> tuple[np.ndarray, Optional[np.ndarray], dict[int, dict[int, int]]]:
    """The :data:`COLUMNS` of finite rows, elements outside --atol/--rtol (None without) and the moved
    histograms; ``D``, ``W``, ``S``, ``B``: buffers of the block's shape."""
    sgt = np.einsum("ij,ij->i", G, T)
    V = np.empty((len(G), len(COLUMNS)))
    G.max(axis=1, out=V[:, 6])
    G.min(axis=1, out=V[:, 7])
    T.max(axis=1, out=V[:, 10])
    T.min(axis=1, out=V[:, 11])
    gsum, tsum = np.add.reduce(G, axis=1), np.add.reduce(T, axis=1)
    np.subtract(T, G, out=D)
    sdd = np.einsum("ij,ij->i", D, D)
    np.abs(D, out=D)
    D.max(axis=1, out=V[:, 2])
    np.abs(G, out=W)
    # |g| + rms: the row's rms spread over S, then |g| added in place (x + y is y + x bit for bit; every
    # value here is finite): a third less time than adding a broadcast column to W
    np.copyto(S, np.sqrt(sgg / n)[:, None])
    np.add(S, W, out=S)
    np.divide(D, S, out=S)
    msc = np.fmax.reduce(S, axis=1)
    V[:, 14] = np.where(msc != msc, 0.0, msc)  # all 0/0: the single pass says 0.0
    close_failed = None
    if tol.allclose is not None:
        np.multiply(W, tol.allclose[1], out=S)
        S += tol.allclose[0]
        close_failed = _count(np.greater(D, S, out=B))
    np.divide(D, W, out=W)
    max_rel = W.max(axis=1)
    redo = np.flatnonzero(~np.isfinite(max_rel))
    if redo.size:  # a zero golden (0/0, x/0) or an overflow: eps at B == 0, as the single pass does
        w = np.abs(G[redo])
        w[G[redo] == 0.0] = eps
        np.divide(D[redo], w, out=w)
        W[redo] = w
        max_rel[redo] = w.max(axis=1)
    V[:, 3] = max_rel
    np.divide(_count(np.less(W, 0.001, out=B)), n, out=V[:, 4])
    np.divide(_count(np.less(W, 0.005, out=B)), n, out=V[:, 5])
    moved = np.greater(W, tol.rtol, out=B)
    hists = _hists(D, moved, S) if moved.any() else {}
    k90 = q90_index(n)
    # the k-th smallest of each row, in place (W is not used after this) and on the bits: every W here
    # is a finite float >= +0.0 (|difference| / a positive |golden| or eps), whose bit patterns sort
    # as the values do, so the element found is the float partition's; numpy's int64 selection is
    # 2-3x faster than its float one (NaN-aware compares)
    bits = W.view(np.int64)
    bits.partition(k90, axis=1)
    V[:, 15] = W[:, k90]
    _finish(V, n, sgg, stt, sgt, sdd, gsum, tsum)
    return V, close_failed, hists


def _finish(V: np.ndarray, n: int, sgg: np.ndarray, stt: np.ndarray, sgt: np.ndarray, sdd: np.ndarray,
            gsum: np.ndarray, tsum: np.ndarray) -> None:
    """``metrics._fill`` on whole columns: the sums as the single pass holds them (they start at 0.0),
    then its arithmetic (means, norms, distance, cosine)."""
    sgg, stt, sgt, sdd = sgg + 0.0, stt + 0.0, sgt + 0.0, sdd + 0.0
    np.divide(gsum + 0.0, n, out=V[:, 8])
    np.divide(tsum + 0.0, n, out=V[:, 12])
    ng, nt = np.sqrt(sgg), np.sqrt(stt)
    V[:, 9], V[:, 13] = ng, nt
    np.sqrt(sdd, out=V[:, 1])
    prod = sgg * stt
    c = sgt / np.where(np.isfinite(prod) & (prod > 0.0), np.sqrt(prod), ng * nt)
    cos = np.where(np.isfinite(c), np.minimum(1.0, np.maximum(-1.0, c)), np.nan)
    g0_, t0_ = ng == 0.0, nt == 0.0
    V[:, 0] = np.where(g0_ & t0_, 1.0, np.where(g0_ | t0_, 0.0, cos))


_WORK = threading.local()


def _workspace(size: int) -> tuple[np.ndarray, ...]:
    """This thread's block buffers (five float64, one bool) of at least ``size`` elements: a fresh
    256 KB array a step costs page faults each time (malloc returns big blocks to the system), which
    made a pool worker's blocks 1.6x slower at 2**15 elements than at 2**14 or 2**16."""
    ws = getattr(_WORK, "ws", None)
    if ws is None or ws[0].size < size:
        ws = _WORK.ws = tuple(np.empty(size) for _ in range(5)) + (np.empty(size, np.bool_),)
    return ws


def _count(mask: np.ndarray) -> np.ndarray:
    """True elements per row (``count_nonzero(axis=1)`` is a third as fast: it casts to intp first).  A
    bool is one byte, 0 or 1, so where a row is whole 8-byte words its count is the sum of the words'
    set bits (``bitwise_count``): 3x faster than adding the bytes widened to int64."""
    if _POPCOUNT and mask.shape[-1] % 8 == 0 and mask.flags.c_contiguous:
        return np.add.reduce(np.bitwise_count(mask.view(np.uint64)), axis=1, dtype=np.int64)
    return np.add.reduce(mask.view(np.uint8), axis=1, dtype=np.int64)


#: numpy >= 2.0 counts set bits
_POPCOUNT = hasattr(np, "bitwise_count")


def _hists(D: np.ndarray, moved: np.ndarray, scratch: np.ndarray) -> dict[int, dict[int, int]]:
    """Per row with moved elements: the counts of their |difference| bits >> ``HIST_SHIFT`` without bin 0,
    keys ascending (``metrics._fill``'s ``moved_hist``), from one bincount over the block: |difference|
    where moved and 0.0 (bin 0) elsewhere, as the streaming pass takes it, each row's bins shifted to
    its own range of the block's few octaves.  ``scratch``: a float64 buffer of the block's shape."""
    bits = scratch.view(np.int64)
    np.multiply(D, moved, out=scratch)
    np.right_shift(bits, HIST_SHIFT, out=bits)
    hi = int(bits.max())
    if hi == 0:
        return {}
    lo = max(1, int(np.min(bits, where=moved, initial=hi)))
    width = hi - lo + 2  # column 0: not moved, or bin 0
    np.subtract(bits, lo - 1, out=bits)
    np.maximum(bits, 0, out=bits)
    rows = bits.shape[0]
    bits += (np.arange(rows, dtype=np.int64) * width)[:, None]
    counts = np.bincount(bits.reshape(-1), minlength=rows * width).reshape(rows, width)[:, 1:]
    at_row, at_col = np.nonzero(counts)
    row_of = at_row.tolist()
    bins = (at_col + lo).tolist()
    got = counts[at_row, at_col].tolist()
    out: dict[int, dict[int, int]] = {}
    start = 0
    for stop in (np.flatnonzero(np.diff(at_row)) + 1).tolist() + [len(row_of)]:
        if stop > start:
            out[row_of[start]] = dict(zip(bins[start:stop], got[start:stop]))
        start = stop
    return out


def measure_small_many(pairs: list[tuple[Values, Values]], tol: Tolerance) -> list[CompareResult]:
    """:func:`small_block`'s pairs as records: those of the block, the others by ``measure_streams``."""
    block, rows = small_block(pairs, tol)
    made = block.results() if block is not None else []
    return [made[r] if r >= 0 else measure_streams(as_stream(values_of(g)), as_stream(values_of(t)), tol)
            for (g, t), r in zip(pairs, rows)]


def as_stream(a: np.ndarray) -> Stream:
    """An in-memory tensor as the stream ``OnceReader.value_chunks`` makes of it."""
    return (lambda: iter([a.reshape(-1)]), tuple(a.shape), np.dtype(a.dtype.name))
