"""The float engine of ``core.tensors.stats``: 32/64-bit numbers (ints and complex magnitudes as
float64) reduced per sub-block (pass 1: extremes, zeros, exponent sum, shifted float64 moments merged
by Chan's update), then binned with exact edges (pass 2).  The why of each step, and its cost
against one numpy pass, is in ``core.tensors.stats``'s docstring.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import deque
from typing import Any, Callable, Iterable, Iterator, Optional

import numpy as np

from dumpscope.core.tensors.stats_bins import (
    _BadIndex,
    _bin_index_exact,
    _BucketMap,
    _choose_edges,
    _LinearMap,
    _typical_from_exponents,
)
from dumpscope.core.tensors.stats_record import TensorStats

#: Sub-block of the float engine: its float64 work buffer (1 MB) stays in L2.
_FSUB = 1 << 17
#: The histogram pass bins this many pass-1 sub-blocks at once (its counts are integers: the part
#: size changes no answer; fewer, longer numpy calls save ~5% of that pass).
_HIST_PARTS = 4
#: A block's shifted moments are recomputed around the exact block mean when the shift is this
#: far from it (relative to the block's spread), i.e. when more than ~4 digits would cancel.
_SHIFT_GUARD = 1e-4
#: A running mean with ``mean² <= _ZERO_SHIFT * mean(x²)`` (|mean| below ~rms/300: the sampling noise of a
#: 128K-element sub-block's mean is ~rms/360) shifts the next sub-block by 0 (no subtraction).
_ZERO_SHIFT = 1e-5

#: work buffers of the float engine, one set per thread (blocks are reduced on several threads)
_LOCAL = threading.local()


def _aligned(size: int, dtype: Any) -> np.ndarray:
    """An uninitialised ``size``-element array starting on a 64-byte boundary: every thread's scratch
    has the same alignment, so no SIMD/BLAS kernel can sum it in an alignment-dependent order."""
    dt = np.dtype(dtype)
    raw = np.empty(size * dt.itemsize + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start : start + size * dt.itemsize].view(dt)


def _work_buffers(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``m``-element float64, uint64 and bool scratch arrays of the calling thread."""
    bufs = getattr(_LOCAL, "bufs", None)
    if bufs is None or bufs[0].size < m:
        size = max(m, _FSUB)
        bufs = _LOCAL.bufs = (_aligned(size, np.float64), _aligned(size, np.uint64), np.empty(size, np.bool_))
    return bufs[0][:m], bufs[1][:m], bufs[2][:m]


def _bin_buffer(role: str, dtype: np.dtype) -> np.ndarray:
    """A ``_FSUB * _HIST_PARTS``-element scratch array of the calling thread for the histogram pass."""
    bufs = getattr(_LOCAL, "bins", None)
    if bufs is None:
        bufs = _LOCAL.bins = {}
    key = (role, dtype.str)
    buf = bufs.get(key)
    size = _FSUB * _HIST_PARTS
    if buf is None or buf.size < size:
        buf = bufs[key] = np.empty(size, dtype=dtype)
    return buf


#: Row length of the sum of squares: ``np.vecdot`` of rows this short runs BLAS ``ddot`` on the
#: calling thread (OpenBLAS threads a single ``ddot`` only above ~10k elements, and its spinning
#: threads would take the second core from the other reducing thread).
_DOT_ROW = 4096


def _sums(g: np.ndarray) -> tuple[float, float]:
    """``Σ g`` and ``Σ g²`` in float64, summed in an order that depends only on ``g.size``."""
    m = g.size
    k = m - m % _DOT_ROW
    if k == 0:
        return float(np.add.reduce(g)), float(np.vecdot(g, g))
    rows = g[:k].reshape(-1, _DOT_ROW)
    s1 = float(np.add.reduce(np.add.reduce(rows, axis=1)))
    s2 = float(np.add.reduce(np.vecdot(rows, rows)))
    if k < m:
        s1 += float(np.add.reduce(g[k:]))
        s2 += float(np.vecdot(g[k:], g[k:]))
    return s1, s2


def _shifted_sums(x: np.ndarray, c: float, g: np.ndarray) -> tuple[float, float]:
    """``Σ(x-c)`` and ``Σ(x-c)²`` in float64 (``g``: scratch).  The float32 → float64 widening is
    its own copy (a mixed-type ``subtract`` casts in small buffered chunks, ~2x slower), and
    ``c == 0`` subtracts nothing."""
    if x.dtype == np.float64:
        if c == 0:
            return _sums(x)
        np.subtract(x, c, out=g)
    else:
        np.copyto(g, x)  # exact
        if c != 0:
            np.subtract(g, c, out=g)
    return _sums(g)


def _ordered_map(work: Callable[[np.ndarray, int], Any], blocks: Iterable[tuple[np.ndarray, int]],
                 workers: int) -> Iterator[Any]:
    """``work(block, offset)`` of every block, results in block order, on ``workers`` threads.

    Results are merged by the caller in that order, so they do not depend on the number of threads
    or their timing; at most ``workers + 1`` blocks are in flight (memory stays bounded)."""
    if workers <= 1:
        for block, offset in blocks:
            yield work(block, offset)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dumpscope-stats") as pool:
        pending: deque = deque()
        try:
            for block, offset in blocks:
                pending.append(pool.submit(work, block, offset))
                if len(pending) > workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for fut in pending:
                fut.cancel()


class _FloatAcc:
    """Streaming statistics of 32/64-bit numbers (ints, floats, complex magnitudes).

    Pass 1, per sub-block: ``min``/``max`` on the raw data (a non-finite min or max is the only
    trigger for the masked slow path), zero count, the exponent-field sum (typical magnitude), and
    shifted sums ``S1 = Σ(x-c)``, ``S2 = Σ(x-c)²`` in float64 with ``c`` the running mean, merged
    with Chan's update (re-centred on the exact block mean when the shift would cancel digits).
    Pass 2 (histogram): a monotone binning map in the data's own float type with exact edges.
    """

    def __init__(self, first_bad_n: int, shift: Optional[float] = None, shift_rms2: float = 0.0) -> None:
        #: the first shift ``c`` of the moments (then the running mean): blocks reduced apart start from
        #: the first block's mean (and mean square), so they rarely need re-centring
        self.shift = shift
        self.shift_rms2 = shift_rms2
        self.n = 0
        self.nan = self.posinf = self.neginf = self.zeros = 0
        self.nfin = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.sumsq = 0.0
        self.lo = math.inf
        self.hi = -math.inf
        self.exp_sum = 0.0
        self.nonzero = 0
        self.bad = _BadIndex(first_bad_n)
        self.bad_ranges: list[tuple[int, int]] = []  # flat [start, end) of sub-blocks with NaN/Inf
        self.wdtype: Optional[np.dtype] = None  # float32/float64 working dtype of the data
        self.mixed = False

    # -- helpers -----------------------------------------------------------------------------

    def _prep(self, block: np.ndarray) -> np.ndarray:
        x = _as_numbers(block)
        if self.wdtype is None:
            self.wdtype = x.dtype
        elif x.dtype != self.wdtype:
            self.mixed = True
        return x

    def merge(self, o: "_FloatAcc") -> None:
        """Take in the statistics of the elements right after this one's (``o`` covers the next
        blocks): counts add, extremes combine, moments by Chan's parallel update."""
        self.n += o.n
        self.nan += o.nan
        self.posinf += o.posinf
        self.neginf += o.neginf
        self.zeros += o.zeros
        self.exp_sum += o.exp_sum
        self.nonzero += o.nonzero
        self.sumsq += o.sumsq
        self.lo = min(self.lo, o.lo)
        self.hi = max(self.hi, o.hi)
        if o.nfin:
            if not self.nfin:
                self.mean, self.m2 = o.mean, o.m2
            else:
                tot = self.nfin + o.nfin
                delta = o.mean - self.mean
                self.mean += delta * o.nfin / tot
                self.m2 += o.m2 + delta * delta * self.nfin * o.nfin / tot
            self.nfin += o.nfin
        need = self.bad.limit - len(self.bad.flat)
        if need > 0:
            self.bad.flat.extend(o.bad.flat[:need])
        for r in o.bad_ranges:
            if self.bad_ranges and self.bad_ranges[-1][1] == r[0]:
                self.bad_ranges[-1] = (self.bad_ranges[-1][0], r[1])
            else:
                self.bad_ranges.append(r)
        if self.wdtype is None:
            self.wdtype = o.wdtype
        elif o.wdtype is not None and o.wdtype != self.wdtype:
            self.mixed = True
        self.mixed = self.mixed or o.mixed

    _PLAIN_INT = ("n", "nan", "posinf", "neginf", "zeros", "nfin", "nonzero")
    _PLAIN_FLOAT = ("mean", "m2", "sumsq", "lo", "hi", "exp_sum")

    def to_plain(self) -> dict[str, Any]:
        """Everything :meth:`merge` and :meth:`hist_plan` read, as JSON-able plain numbers (floats
        round-trip exactly through JSON, NaN/Infinity included): how a forked child hands it over."""
        d: dict[str, Any] = {k: int(getattr(self, k)) for k in self._PLAIN_INT}
        d.update((k, float(getattr(self, k))) for k in self._PLAIN_FLOAT)
        d["bad"] = [int(i) for i in self.bad.flat]
        d["bad_ranges"] = [[int(a), int(b)] for a, b in self.bad_ranges]
        d["wdtype"] = None if self.wdtype is None else self.wdtype.str
        d["mixed"] = bool(self.mixed)
        return d

    @classmethod
    def from_plain(cls, d: dict[str, Any], first_bad_n: int) -> "_FloatAcc":
        acc = cls(first_bad_n)
        for k in cls._PLAIN_INT:
            setattr(acc, k, int(d[k]))
        for k in cls._PLAIN_FLOAT:
            setattr(acc, k, float(d[k]))
        acc.bad.flat = [int(i) for i in d["bad"]][: acc.bad.limit]
        acc.bad_ranges = [(int(a), int(b)) for a, b in d["bad_ranges"]]
        acc.wdtype = None if d["wdtype"] is None else np.dtype(str(d["wdtype"]))
        acc.mixed = bool(d["mixed"])
        return acc

    # -- pass 1 ------------------------------------------------------------------------------

    def add(self, block: np.ndarray, offset: int) -> None:
        x = self._prep(block)
        self.n += x.size
        with np.errstate(over="ignore", invalid="ignore"):  # x² of values near the float max
            for i in range(0, x.size, _FSUB):
                self._add_sub(x[i : i + _FSUB], offset + i)

    def _shift_for_block(self) -> float:
        """The shift ``c`` of the next sub-block's moments: the running mean (else the hint), or 0 —
        which saves the subtraction — when that mean is within ~``rms / 300`` of 0 (then the block's
        mean is almost surely within the ``_SHIFT_GUARD`` of 0 too: no digit cancels)."""
        if self.nfin:
            c, rms2 = self.mean, self.sumsq / self.nfin
        elif self.shift is not None:
            c, rms2 = self.shift, self.shift_rms2
        else:
            return 0.0  # nothing known yet: the guard re-centres if the mean is not near 0
        return 0.0 if c * c <= _ZERO_SHIFT * rms2 else c

    def _add_sub(self, x: np.ndarray, offset: int) -> None:
        m = x.size
        lo = float(np.minimum.reduce(x))
        hi = float(np.maximum.reduce(x))
        if not (math.isfinite(lo) and math.isfinite(hi)):  # NaN propagates; ±Inf is an extreme
            fin = np.isfinite(x)
            nf = int(np.count_nonzero(fin))
            nan = int(np.count_nonzero(np.isnan(x)))
            pos = int(np.count_nonzero(x == np.inf))
            self.nan += nan
            self.posinf += pos
            self.neginf += m - nf - nan - pos
            if not self.bad.full:
                self.bad.add(~fin, offset)
            if self.bad_ranges and self.bad_ranges[-1][1] == offset:
                self.bad_ranges[-1] = (self.bad_ranges[-1][0], offset + m)
            else:
                self.bad_ranges.append((offset, offset + m))
            x = x[fin]
            m = nf
            if m == 0:
                return
            lo = float(np.minimum.reduce(x))
            hi = float(np.maximum.reduce(x))
        self.lo = min(self.lo, lo)
        self.hi = max(self.hi, hi)
        g, ubuf, mask = _work_buffers(m)
        # |x| bits shifted left past the sign: 0 only for ±0.0 (most blocks have none: one min tells),
        # then the exponent field; its sum → mean floor(log2|x|) of the non-zero values (exact integer
        # sums: 255 * _FSUB < 2**32)
        if x.itemsize == 4:
            u = ubuf.view(np.uint32)[:m]
            np.left_shift(x.view(np.uint32), np.uint32(1), out=u)
            zeros = 0 if np.minimum.reduce(u) else int(np.count_nonzero(np.equal(u, 0, out=mask)))
            np.right_shift(u, np.uint32(24), out=u)
            bias = 127.0
        else:
            u = ubuf
            np.left_shift(x.view(np.uint64), np.uint64(1), out=u)
            zeros = 0 if np.minimum.reduce(u) else int(np.count_nonzero(np.equal(u, 0, out=mask)))
            np.right_shift(u, np.uint64(53), out=u)
            bias = 1023.0
        field_sum = float(np.add.reduce(u, dtype=u.dtype))
        self.zeros += zeros
        nonzero = m - zeros
        self.exp_sum += field_sum - bias * nonzero
        self.nonzero += nonzero
        # shifted moments around c (float64 throughout; exact when c is the block mean)
        c = self._shift_for_block()
        s1, s2 = _shifted_sums(x, c, g)
        d = s1 / m
        if d * d > _SHIFT_GUARD * (s2 / m) or not math.isfinite(s2):
            c = c + d  # re-centre on the block mean: no cancellation
            s1, s2 = _shifted_sums(x, c, g)
            d = s1 / m
        mean_b = c + d
        m2_b = max(s2 - s1 * d, 0.0)
        self.sumsq += m2_b + m * mean_b * mean_b
        n_a = self.nfin
        tot = n_a + m
        delta = mean_b - self.mean
        self.mean += delta * m / tot
        self.m2 += m2_b + delta * delta * n_a * m / tot
        self.nfin = tot

    def stats(self, shape: tuple[int, ...], dtype: str) -> TensorStats:
        st = TensorStats(
            count=self.n, zeros=self.zeros, nan=self.nan, posinf=self.posinf, neginf=self.neginf,
            dtype=dtype, shape=shape, first_bad=self.bad.tuples(shape),
        )
        if self.nfin:
            st.min, st.max, st.mean = self.lo, self.hi, self.mean
            st.std = math.sqrt(max(self.m2, 0.0) / self.nfin)
            st.l2norm = math.sqrt(self.sumsq)
        return st

    # -- pass 2 ------------------------------------------------------------------------------

    def _has_bad(self, start: int, end: int) -> bool:
        r = self.bad_ranges
        if not r:
            return False
        i = bisect.bisect_right(r, (start, math.inf)) - 1
        if i >= 0 and r[i][1] > start:
            return True
        return i + 1 < len(r) and r[i + 1][0] < end

    def _finite_parts(self, block: np.ndarray, offset: int, dtype: np.dtype) -> Iterator[np.ndarray]:
        """The finite values of one block in ``dtype``, ``_HIST_PARTS`` sub-blocks at a time (only parts
        that overlap a sub-block pass 1 found NaN/Inf in are masked).  Reads nothing of ``self`` but what pass 1 left: thread-safe."""
        x = _as_numbers(block)
        if x.dtype != dtype:
            x = x.astype(dtype)
        step = _FSUB * _HIST_PARTS
        for i in range(0, x.size, step):
            part = x[i : i + step]
            if self._has_bad(offset + i, offset + i + part.size):
                part = part[np.isfinite(part)]
            if part.size:
                yield part

    def hist_plan(self, bins: int) -> tuple[np.ndarray, bool, Optional[Callable[[np.ndarray, int], np.ndarray]]]:
        """``(edges, log, count)``: the histogram's edges and ``count(block, offset)``, the int64 bin
        counts of one block's finite values (None when every finite value is in bin 0: min == max).
        Depends only on what pass 1 left, so every process that has it builds the same plan."""
        typical = _typical_from_exponents(self.exp_sum, self.nonzero)
        edges, log = _choose_edges(self.lo, self.hi, typical, bins)
        nb = len(edges) - 1
        if self.lo == self.hi:
            return edges, log, None
        dtype = np.dtype(np.float64) if self.mixed or self.wdtype is None else self.wdtype
        if not log:
            lmap = _LinearMap(self.lo, self.hi, nb, dtype)
            exact = lmap.edges(self.lo, self.hi) if lmap.ok else None
            if exact is None and dtype != np.float64:
                dtype = np.dtype(np.float64)
                lmap = _LinearMap(self.lo, self.hi, nb, dtype)
                exact = lmap.edges(self.lo, self.hi) if lmap.ok else None
            if exact is not None:
                return exact, False, lambda b, o: self._count_linear(b, o, lmap, dtype)
            bmap = None
        else:
            bmap = _BucketMap(edges, dtype)
            if not bmap.ok:
                bmap = None

        def count(block: np.ndarray, offset: int) -> np.ndarray:
            out = np.zeros(nb, dtype=np.int64)
            for x in self._finite_parts(block, offset, dtype):
                idx = bmap.index(x) if bmap is not None else _bin_index_exact(x.astype(np.float64), edges)
                out += np.bincount(idx, minlength=nb)
            return out

        return edges, log, count

    def histogram(self, blocks: Iterable[tuple[np.ndarray, int]], bins: int,
                  workers: int = 1) -> tuple[np.ndarray, np.ndarray, bool]:
        edges, log, count = self.hist_plan(bins)
        counts = np.zeros(len(edges) - 1, dtype=np.int64)
        if count is None:
            counts[0] = self.nfin
            return edges, counts, log
        for c in _ordered_map(count, blocks, workers):
            counts += c
        return edges, counts, log

    def _count_linear(self, block: np.ndarray, offset: int, lmap: _LinearMap, dtype: np.dtype) -> np.ndarray:
        """Counts of one block's finite values in the bins of ``lmap``."""
        nb = lmap.nb
        fbuf = _bin_buffer("f", dtype)
        if nb <= 256:  # two uint8 bins per uint16: half the bincount work
            ibuf = _bin_buffer("i", np.dtype(np.uint8))
            kbuf = _bin_buffer("k", np.dtype(np.intp))  # bincount would cast (holding the GIL) itself
            pairs = np.zeros(256 * nb, dtype=np.int64)
            counts = np.zeros(nb, dtype=np.int64)
            for x in self._finite_parts(block, offset, dtype):
                idx = lmap.index(x, fbuf, ibuf[: x.size])
                even = x.size & ~1
                if even:
                    keys = kbuf[: even // 2]
                    np.copyto(keys, idx[:even].view(np.uint16))
                    pairs += np.bincount(keys, minlength=256 * nb)
                if even < x.size:
                    counts[idx[-1]] += 1
            grid = pairs.reshape(nb, 256)[:, :nb]  # [odd element's bin, even element's bin]
            return counts + grid.sum(axis=0) + grid.sum(axis=1)
        ibuf = _bin_buffer("i", np.dtype(np.int32))
        counts = np.zeros(nb, dtype=np.int64)
        for x in self._finite_parts(block, offset, dtype):
            counts += np.bincount(lmap.index(x, fbuf, ibuf[: x.size]), minlength=nb)
        return counts


def _as_numbers(block: np.ndarray) -> np.ndarray:
    """A block as the 1-D native float32/float64 values the float engine reduces (``_FloatAcc._prep``
    without its bookkeeping)."""
    x = block
    if x.dtype.kind == "c":
        x = np.abs(x)
    if x.dtype.kind != "f" or x.dtype.itemsize not in (4, 8):
        x = x.astype(np.float64)
    elif not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    return np.ascontiguousarray(x).reshape(-1)
