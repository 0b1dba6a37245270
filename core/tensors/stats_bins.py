"""Histogram edges, value tables and the bucket engine of ``core.tensors.stats``.

Every type of at most 16 bits (float16, bfloat16, float8, int8/16, uint8/16, bool) is reduced by
one ``np.bincount`` of its raw bit patterns (``_BucketAcc``), exact from a 256/65536-entry value
table; the edges (``_choose_edges``: equal width, or symmetric-log past ``LOG_SPAN``) and the two
binning maps of 32/64-bit data (``_LinearMap``, ``_BucketMap``) are shared with the float engine
(``core.tensors.stats_float``).  The why of each choice is in ``core.tensors.stats``'s docstring.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from dumpscope.core.tensors.stats_record import TensorStats

#: Finite non-zero magnitudes spanning more than this ratio switch the histogram to log bins.
LOG_SPAN = 1e4
#: Sub-block of the bucket engine: its intp index copy (2 MB) stays in L2/L3.
_SUB = 1 << 18


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """Inner product without BLAS: OpenBLAS threads make ``np.dot`` 10x slower on a busy machine."""
    return float(np.einsum("i,i->", a, b))

# --------------------------------------------------------------------------------------------
# value tables for the bucket engine


def _fp8_e4m3fn_table() -> np.ndarray:
    b = np.arange(256, dtype=np.int64)
    sign = np.where(b >> 7, -1.0, 1.0)
    exp = (b >> 3) & 0xF
    man = b & 7
    val = np.where(exp == 0, man / 8.0 * 2.0**-6, (1.0 + man / 8.0) * np.exp2(exp - 7.0))
    val = sign * val
    val[(b & 0x7F) == 0x7F] = np.nan
    return val


def _fp8_e8m0_table() -> np.ndarray:
    b = np.arange(256, dtype=np.float64)
    val = np.exp2(b - 127.0)
    val[255] = np.nan
    return val


def _value_table(kind: str) -> np.ndarray:
    """float64 value of every bit pattern of a ≤16-bit logical dtype (numpy spelling)."""
    if kind == "float16":
        return np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    if kind == "bfloat16":
        return (np.arange(65536, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)
    if kind == "float8_e5m2":
        return (np.arange(256, dtype=np.uint16) << 8).view(np.float16).astype(np.float64)
    if kind == "float8_e4m3fn":
        return _fp8_e4m3fn_table()
    if kind in ("float8_e8m0fnu", "float8_e8m0"):
        return _fp8_e8m0_table()
    if kind == "bool":
        return (np.arange(256) != 0).astype(np.float64)
    if kind in ("int8", "uint8", "int16", "uint16"):
        width = np.dtype(kind).itemsize
        raw = np.arange(1 << (8 * width), dtype=np.uint32).astype(np.dtype(f"u{width}"))
        return raw.view(np.dtype(kind)).astype(np.float64)
    raise ValueError(f"no value table for dtype {kind!r}")


_TABLES: dict[str, np.ndarray] = {}
_RAW_FLOATS = ("float16", "bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu", "float8_e8m0")
_BUCKET_KINDS = _RAW_FLOATS + ("bool", "int8", "uint8", "int16", "uint16")


def _table(kind: str) -> np.ndarray:
    if kind not in _TABLES:
        with np.errstate(invalid="ignore"):  # signalling-NaN patterns warn when widened
            _TABLES[kind] = _value_table(kind)
    return _TABLES[kind]


# --------------------------------------------------------------------------------------------
# histogram edges


def _typical_from_exponents(exp_sum: float, nonzero: int) -> float:
    """Typical magnitude 2**(mean floor(log2|x|) + 0.5) of the non-zero values (0 when none)."""
    return 0.0 if nonzero <= 0 else float(2.0 ** (exp_sum / nonzero + 0.5))


#: the smallest positive float64 (a subnormal): the log grid's first magnitude never goes below it
_TINY = float(np.nextafter(0.0, 1.0))


def _choose_edges(lo: float, hi: float, typical: float, bins: int) -> tuple[np.ndarray, bool]:
    """Edges covering ``[lo, hi]``: equal width, or symmetric-log when max|x| > LOG_SPAN × typical|x|."""
    bins = max(1, int(bins))
    if lo == hi:
        return np.array([lo, hi], dtype=np.float64), False
    amax = max(abs(lo), abs(hi))
    if not (typical > 0 and amax / typical > LOG_SPAN and bins >= 3):
        return np.linspace(lo, hi, bins + 1), False
    g0 = typical * typical / amax  # as far below the typical magnitude as max|x| is above it
    if not 0 < g0 < amax:  # typical² under/overflowed (float64 subnormals, values near the float max)
        g0 = min(max(2.0 ** (2 * math.log2(typical) - math.log2(amax)), _TINY), amax / 2)
    if lo < 0 < hi:
        k = max(1, (bins - 1) // 2)
        grid = _geomspace(g0, amax, k + 1)
        return np.concatenate((-grid[::-1], grid)), True
    m_lo = lo if lo >= 0 else -hi  # one-sided: work on magnitudes, mirror for negatives
    if m_lo >= g0 and m_lo > 0:
        edges = _geomspace(m_lo, amax, bins + 1)
    else:
        edges = np.concatenate(([0.0], _geomspace(g0, amax, bins)))
    return (edges if lo >= 0 else -edges[::-1]), True


def _geomspace(start: float, stop: float, num: int) -> np.ndarray:
    """``np.geomspace`` without its spurious overflow warning next to the float64 maximum (numpy
    rounds the last power over it, then sets the end point to ``stop`` exactly)."""
    with np.errstate(over="ignore"):
        return np.geomspace(start, stop, num)


def _bin_index_exact(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin of each value (all inside ``[edges[0], edges[-1]]``), last bin closed."""
    idx = np.searchsorted(edges, values, side="right") - 1
    np.clip(idx, 0, len(edges) - 2, out=idx)
    return idx


# --------------------------------------------------------------------------------------------
# accumulators


class _BadIndex:
    """Collects the first N flat indices of non-finite values."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, int(limit))
        self.flat: list[int] = []

    @property
    def full(self) -> bool:
        return len(self.flat) >= self.limit

    def add(self, bad_mask: np.ndarray, offset: int) -> None:
        need = self.limit - len(self.flat)
        if need > 0:
            hits = np.flatnonzero(bad_mask)[:need]
            self.flat.extend(int(i) + offset for i in hits)

    def tuples(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        if not self.flat:
            return []
        if not shape:
            return [() for _ in self.flat]
        ix = np.unravel_index(np.asarray(self.flat, dtype=np.intp), shape)
        return [tuple(int(a[k]) for a in ix) for k in range(len(self.flat))]


class _BucketAcc:
    """Exact statistics of ≤16-bit data from bit-pattern counts."""

    def __init__(self, kind: str, first_bad_n: int) -> None:
        self.table = _table(kind)
        self.width = 1 if len(self.table) == 256 else 2
        self.udtype = np.uint8 if self.width == 1 else np.uint16
        self.counts = np.zeros(len(self.table), dtype=np.int64)
        self.bad_keys = ~np.isfinite(self.table)
        self.has_bad_keys = bool(self.bad_keys.any())
        self.bad = _BadIndex(first_bad_n)
        self.n = 0
        self._idx = np.empty(_SUB, dtype=np.intp)

    def add(self, block: np.ndarray, offset: int) -> None:
        bits = np.ascontiguousarray(block).view(self.udtype).reshape(-1)
        nkeys = len(self.table)
        for i in range(0, bits.size, _SUB):
            part = bits[i : i + _SUB]
            idx = self._idx[: part.size]
            np.copyto(idx, part)  # bincount would allocate this intp copy itself
            c = np.bincount(idx, minlength=nkeys)
            if self.has_bad_keys and not self.bad.full and c[self.bad_keys].any():
                self.bad.add(self.bad_keys[part], offset + i)
            self.counts += c
        self.n += bits.size

    def finish(self, bins: int, shape: tuple[int, ...], dtype: str) -> TensorStats:
        vals, cnt = self.table, self.counts
        present = cnt > 0
        fin = np.isfinite(vals)
        st = TensorStats(count=int(self.n), dtype=dtype, shape=shape)
        st.nan = int(cnt[np.isnan(vals)].sum())
        st.posinf = int(cnt[vals == np.inf].sum())
        st.neginf = int(cnt[vals == -np.inf].sum())
        st.zeros = int(cnt[vals == 0].sum())
        st.first_bad = self.bad.tuples(shape)
        keep = present & fin
        nfin = int(cnt[keep].sum())
        if nfin == 0:
            return st
        v = vals[keep]
        w = cnt[keep].astype(np.float64)
        mean = float(_dot(w, v) / nfin)
        st.min, st.max, st.mean = float(v.min()), float(v.max()), mean
        st.std = math.sqrt(float(_dot(w, (v - mean) ** 2)) / nfin)
        st.l2norm = math.sqrt(float(_dot(w, v * v)))
        nz = v != 0
        exps = np.frexp(v[nz])[1] - 1  # floor(log2|v|)
        typical = _typical_from_exponents(float(_dot(w[nz], exps)), int(cnt[keep][nz].sum()))
        edges, log = _choose_edges(st.min, st.max, typical, bins)
        idx = _bin_index_exact(v, edges)
        hc = np.bincount(idx, weights=w, minlength=len(edges) - 1)
        st.hist_edges = [float(e) for e in edges]
        st.hist_counts = [int(round(x)) for x in hc]
        st.hist_log = log
        return st


_HIGH16 = {4: (1, 2), 8: (3, 4)}  # index and stride of the high 16 bits of a float (little-endian)
if np.little_endian is False:  # pragma: no cover - big-endian hosts
    _HIGH16 = {4: (0, 2), 8: (0, 4)}

def _ordered_keys(vals: np.ndarray) -> np.ndarray:
    """int64 keys ordering the float32/float64 ``vals`` like their values (-0.0 and +0.0 tie)."""
    ity = np.int32 if vals.dtype.itemsize == 4 else np.int64
    raw = vals.view(ity).astype(np.int64)
    mag = raw & np.int64(np.iinfo(ity).max)
    return np.where(raw < 0, -mag, mag)


def _from_keys(keys: np.ndarray, dtype: np.dtype) -> np.ndarray:
    ity = np.int32 if dtype.itemsize == 4 else np.int64
    sign = np.int64(np.iinfo(ity).min)
    raw = np.where(keys < 0, (-keys) | sign, keys)
    return raw.astype(ity).view(dtype)


class _LinearMap:
    """A monotone non-decreasing map of values to ``nb`` bins, computed in the data's float type.

    ``bin(x) = trunc((x - lo) * scale)`` (scale a hair below ``nb / (hi - lo)`` so that
    ``bin(hi) = nb - 1`` without clipping) rounds at every step, but every step is
    monotone, so each bin is exactly an interval of floats; :meth:`edges` finds the interval limits
    (by bisection over the ordered float bit patterns, running the very same ufuncs), so the counts
    are exact for the edges reported — which lie within rounding of ``linspace(lo, hi, nb + 1)``.
    """

    def __init__(self, lo: float, hi: float, nb: int, dtype: np.dtype) -> None:
        hi_in = hi
        self.nb = nb
        self.dtype = np.dtype(dtype)
        self.pre = None
        span = hi - lo
        if not span * 4 < float(np.finfo(self.dtype).max):  # x - lo could overflow: scale first
            self.pre = self.dtype.type(0.25)
            lo, span = lo * 0.25, hi * 0.25 - lo * 0.25
        self.lo = self.dtype.type(lo)
        with np.errstate(over="ignore"):
            self.scale = self.dtype.type(nb / span)
        self.ok = bool(np.isfinite(self.scale)) and self.scale > 0
        # shrink the scale until (hi - lo) * scale < nb: then no value needs clipping (monotone map)
        y_hi = np.empty(1, dtype=self.dtype)
        hi_arr = np.array([hi_in], dtype=self.dtype)
        for _ in range(64):
            if not self.ok or self._scaled(hi_arr, y_hi)[0] < nb:
                break
            self.scale = np.nextafter(self.scale, self.dtype.type(0))  # y(hi) is ~nb: few ulps
            self.ok = bool(self.scale > 0)
        self.ok = self.ok and bool(nb - 1 <= self._scaled(hi_arr, y_hi)[0] < nb)

    def index(self, x: np.ndarray, fbuf: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Bins of the finite values ``x`` (data dtype) into ``out`` (uint8/int32), via ``fbuf``."""
        y = self._scaled(x, fbuf)
        np.copyto(out, y, casting="unsafe")  # truncation; 0 <= y < nb by construction
        return out

    def _scaled(self, x: np.ndarray, fbuf: np.ndarray) -> np.ndarray:
        y = fbuf[: x.size]
        with np.errstate(over="ignore", under="ignore"):
            if self.pre is not None:
                np.multiply(x, self.pre, out=y)
                np.subtract(y, self.lo, out=y)
            else:
                np.subtract(x, self.lo, out=y)
            np.multiply(y, self.scale, out=y)
        return y

    def edges(self, lo: float, hi: float) -> Optional[np.ndarray]:
        """Exact bin limits ``[lo, t_1 … t_{nb-1}, hi]`` (None when the map is unusable)."""
        nb = self.nb
        ends = np.array([lo, hi], dtype=self.dtype)
        probe = np.empty(max(nb - 1, 2), dtype=self.dtype)
        out = np.empty(probe.size, dtype=np.int32)
        y_ends = self._scaled(ends, probe).copy()
        if not (y_ends[0] == 0 and nb - 1 <= y_ends[1] < nb):
            return None
        if nb == 1:
            return ends.astype(np.float64)
        want = np.arange(1, nb)
        k_lo, k_hi = _ordered_keys(ends)
        a = np.full(nb - 1, k_lo, dtype=np.int64)  # bin(a) < want
        b = np.full(nb - 1, k_hi, dtype=np.int64)  # bin(b) >= want
        while True:
            open_ = b > a + 1
            if not open_.any():
                break
            mid = (a >> 1) + (b >> 1) + (a & b & 1)  # no int64 overflow for keys of opposite sign
            got = self.index(_from_keys(mid, self.dtype), probe, out[: nb - 1])
            ge = (got >= want) & open_
            b = np.where(ge, mid, b)
            a = np.where(open_ & ~ge, mid, a)
        inner = _from_keys(b, self.dtype).astype(np.float64)
        return np.concatenate(([float(ends[0])], inner, [float(ends[1])]))


class _BucketMap:
    """Bins of arbitrary sorted edges (the log histogram) through a 65536-entry table.

    The high 16 bits of a float select a bucket of relative width ≤ 2**-4; the table gives the bin
    of the bucket's smallest value, one comparison with the next edge fixes the values above it.
    Exact whenever no bucket holds two interior edges (log bins are ≥ 3x wide; checked).
    """

    def __init__(self, edges: np.ndarray, dtype: np.dtype) -> None:
        self.dtype = np.dtype(dtype)
        self.edges = edges
        self.ok = self.dtype.itemsize in _HIGH16
        if not self.ok:
            return
        nb = len(edges) - 1
        shift = 16 if self.dtype.itemsize == 4 else 48
        uty = np.uint32 if self.dtype.itemsize == 4 else np.uint64
        hi16 = np.arange(65536, dtype=np.uint64)
        with np.errstate(invalid="ignore"):  # signalling-NaN patterns warn when widened
            low = (hi16 << np.uint64(shift)).astype(uty).view(self.dtype).astype(np.float64)
            full = ((hi16 << np.uint64(shift)) | np.uint64((1 << shift) - 1)).astype(uty).view(self.dtype)
            full = full.astype(np.float64)
        with np.errstate(invalid="ignore"):
            bmin = np.fmin(low, full)
            bmax = np.fmax(low, full)
        a = np.clip(np.searchsorted(edges, bmin, side="right") - 1, 0, nb - 1)
        b = np.clip(np.searchsorted(edges, bmax, side="right") - 1, 0, nb - 1)
        finite = np.isfinite(bmin) & np.isfinite(bmax)
        self.ok = bool(np.all((b - a)[finite] <= 1))
        self.table = a.astype(np.intp)
        self.next_edge = np.append(edges[1:], np.inf).astype(np.float64)
        self.next_edge[nb - 1] = np.inf  # the last bin is closed: nothing moves past it
        self.next_edge_d = self.next_edge.astype(self.dtype) if self.dtype != np.float64 else self.next_edge
        # comparing in the data dtype is exact only if the edges are representable in it
        if self.dtype != np.float64 and not np.array_equal(self.next_edge_d.astype(np.float64), self.next_edge):
            self.next_edge_d = None

    def index(self, x: np.ndarray) -> np.ndarray:
        pos, stride = _HIGH16[self.dtype.itemsize]
        h = x.view(np.uint16)[pos::stride]
        idx = np.take(self.table, h)
        nxt = np.take(self.next_edge_d if self.next_edge_d is not None else self.next_edge, idx)
        idx += x >= nxt
        return idx
