"""Tensor statistics in bounded memory: the numbers behind ``dumpscope stats`` and the stats pane.

Semantics follow CLI.md: ``min``/``max``/``mean``/``std`` (population, ddof=0)/``l2norm`` are taken
over the *finite* elements (``None`` when there is none); ``count``/``zeros``/``nan``/``posinf``/
``neginf`` count all elements.  Complex tensors are reduced to their magnitude ``|z|`` first (so a
complex NaN/Inf counts as NaN/+Inf of the magnitude); bool and integers are used as numbers.

Two engines, chosen by the element width:

* **Bucket engine** (every type of at most 16 bits: float16, bfloat16, float8, int8/16, uint8/16,
  bool): one ``np.bincount`` of the raw bit patterns per block gives the exact multiset of values;
  every statistic and the histogram are then computed from the 256/65536-entry value table in
  float64.  Exact, cheap, and needs no second pass.
* **Float engine** (32/64-bit floats; ints and complex magnitudes are converted to float64 per
  block): per 128K-element sub-block, ``min``/``max`` of the raw data (a non-finite min or max is
  the only trigger for the masked slow path — clean blocks are never masked or copied), the zero
  count and exponent-field sum from the ``|x|`` bits (one ``min`` of them says whether there is a
  zero to count at all), and float64 shifted sums Σ(x-c), Σ(x-c)² around the running mean — or
  around 0 when that mean is within ~rms/300 of 0, which skips the subtraction — merged with Chan's
  update (a block whose mean is far from the shift is re-centred on its own mean, so no catastrophic
  cancellation when ``|mean| >> std``); ``l2norm² = M2 + n·mean²``.  The histogram needs the finite
  range first, so it is a second pass over the data (re-iterating the chunks).  Blocks (1M
  elements) are reduced independently and merged in block order (Chan's parallel update;
  histogram counts add), so the answer does not depend on who reduced them.  Tensors of
  ``PARALLEL_MIN_ELEMS`` or more use ``stats_workers()`` workers: **forked processes**
  (:mod:`dumpscope.core.tensors.stats_procs`) when the source can be split by element range (a
  C-contiguous array or memmap, a plain file: :class:`~dumpscope.core.tensors.load.FileChunks`) and
  the process is single-threaded (the ``dumpscope`` CLI), else threads (the explorer).  Threads
  scale badly here: two threads making many short numpy calls each burn ~2x the CPU of one (GIL
  hand-offs on this kind of VM), so on 2 cores they were slower than one thread; processes share
  nothing but the page cache.  Each child sends each block's accumulator back as JSON (exact
  floats) and the parent merges them in block order: bit-identical to one thread.

Cost (1 GiB float32 memmap, warm page cache, one core, CPU time against one
``np.add.reduce(x, dtype=float64)`` = 1.0): pass 1 ~1.8 — min/max 0.5 (the first read of the
data), exponent sum and zeros 0.6 (four integer ufuncs), moments 0.8 (widening copy, row sums, row
``vecdot``: BLAS ``ddot`` on 4096-element rows, which stays on the calling thread; the mixed-type
``subtract(x32, c, dtype=float64)`` and ``einsum`` used before were ~2x slower each) — and pass 2
~1.6 (map to bins 0.5, pair keys + ``bincount`` 1.05).  That is ~3x one pass in CPU (session 6,
idle box: 0.26 + 0.25 s against 0.17-0.18 s): the 2x target holds only when two cores divide both
passes — two forked processes do (1.7-1.85x wall, ~2.0x when another job takes a core now and then);
two threads do not (~3x).  float64 data is far worse off (~8.5x in CPU, 4.8x wall with two
processes): its one numpy pass is a plain sum at memory speed (~27 GB/s warm), so even two bare
reads of the data would be 2x and every step here is 8 bytes wide.  The trade-off is kept on
purpose: exact histogram counts for exact edges and float64-accurate moments, bit-identical
whatever the number of workers, rather than a one-pass approximation.
Why there is no one-pass float histogram: exact equal-width edges over ``[min, max]`` cannot be
known before the pass that finds min and max; binning the float bits into coarse buckets during
pass 1 (the fp16 way) would cost more than pass 2 itself — a 65,536-bucket ``bincount`` of the high
16 bits is ~3x one numpy pass, and the buckets that straddle an edge still need another look at the
data.  A min/max pre-pass followed by one fused pass does the same work plus a read.  Three bin
indices per ``bincount`` key (32,768 keys) instead of two measured no faster (building the keys
costs what the shorter ``bincount`` saves).  So the histogram stays exact and costs its pass.

Histogram: ``bins`` equal-width bins over ``[min, max]`` of the finite values.  When the values
span more than :data:`LOG_SPAN` (4 orders of magnitude) — measured as ``max|x|`` over the *typical*
magnitude ``t = 2**(mean floor(log2|x|) + 0.5)`` of the non-zero values (32/64-bit data: read from
the exponent field, so a subnormal counts with the field's minimum, -127/-1023), so that a few tiny values
near zero (every large normal sample has some) do not trigger it — symmetric log bins: a geometric
grid ``g_0 = t²/max|x| … g_k = max|x|`` mirrored around zero, ``[-g_k … -g_0, g_0 … g_k]``; the
centre bin ``[-g_0, g_0)`` holds the zeros and the magnitudes below ``g_0``.  One-sided data gets a
one-sided grid (with a first bin ``[0, g_0)`` when needed).  Bins are half-open ``[e_i, e_{i+1})``
except the last, which includes its right edge; counts are exact for the edges reported.  For
32/64-bit data the equal-width bins are computed in the data's own float type by a monotone map and
the reported inner edges are that map's exact bin limits, i.e. ``linspace(min, max, bins + 1)`` up to
a few ulps (see :class:`_LinearMap`).
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional, Union

import numpy as np

#: Finite non-zero magnitudes spanning more than this ratio switch the histogram to log bins.
LOG_SPAN = 1e4
#: Elements per internal block: big enough to amortise numpy call overhead, small enough to stay
#: in cache (the float64 work buffers are 8 bytes per element).
_BLOCK = 1 << 20
#: Sub-block of the bucket engine: its intp index copy (2 MB) stays in L2/L3.
_SUB = 1 << 18

ChunkSource = Union[Iterable[np.ndarray], Callable[[], Iterable[np.ndarray]]]


@dataclass(slots=True)
class TensorStats:
    """Statistics of one tensor; fields are ``None`` when unknown (e.g. built from a stats CSV)."""

    count: Optional[int] = None
    min: Optional[float] = None
    max: Optional[float] = None
    mean: Optional[float] = None
    std: Optional[float] = None
    l2norm: Optional[float] = None
    zeros: Optional[int] = None
    nan: Optional[int] = None
    posinf: Optional[int] = None
    neginf: Optional[int] = None
    hist_edges: list[float] = field(default_factory=list)
    hist_counts: list[int] = field(default_factory=list)
    hist_log: bool = False
    first_bad: list[tuple[int, ...]] = field(default_factory=list)
    dtype: str = ""
    shape: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The CLI.md ``stats`` keys plus ``histogram``/``first_bad`` (and ``dtype``/``shape``).

        Non-finite floats (possible only in stats copied from a CSV) become ``null`` so the output
        stays strict JSON.
        """
        out: dict[str, Any] = {
            "dtype": self.dtype,
            "shape": list(self.shape),
        }
        for key in ("count", "min", "max", "mean", "std", "l2norm", "zeros", "nan", "posinf", "neginf"):
            out[key] = _json_num(getattr(self, key))
        out["histogram"] = {
            "edges": [float(e) for e in self.hist_edges],
            "counts": [int(c) for c in self.hist_counts],
            "log": bool(self.hist_log),
        }
        out["first_bad"] = [list(ix) for ix in self.first_bad]
        return out


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """Inner product without BLAS: OpenBLAS threads make ``np.dot`` 10x slower on a busy machine."""
    return float(np.einsum("i,i->", a, b))


def _json_num(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    f = float(v)
    return f if math.isfinite(f) else None


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
_HIGH16 = {4: (1, 2), 8: (3, 4)}  # index and stride of the high 16 bits of a float (little-endian)
if np.little_endian is False:  # pragma: no cover - big-endian hosts
    _HIGH16 = {4: (0, 2), 8: (0, 4)}

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


#: tensors of at least this many elements are reduced by several workers at once (forked processes,
#: else threads); smaller ones are not worth a fork or a thread hand-off
PARALLEL_MIN_ELEMS = 1 << 23


def stats_workers() -> int:
    """Workers (processes, else threads) reducing one big tensor: ``DUMPSCOPE_WORKERS`` if set, else
    the cores (at most 4); 1 reduces it on the calling thread alone."""
    try:
        n = int(os.environ.get("DUMPSCOPE_WORKERS", "0") or 0)
    except ValueError:
        n = 0
    return max(1, n or min(4, os.cpu_count() or 1))


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


# --------------------------------------------------------------------------------------------
# chunking


def _flat_chunks(array: np.ndarray, chunk_elems: int) -> Iterator[np.ndarray]:
    """C-order 1-D pieces of ``array`` of at most ~chunk_elems elements, copying only one piece."""
    if array.ndim == 0:
        yield array.reshape(1)
        return
    if array.flags.c_contiguous:
        flat = array.reshape(-1)
        for i in range(0, flat.size, chunk_elems):
            yield flat[i : i + chunk_elems]
        return
    row = int(np.prod(array.shape[1:], dtype=np.int64))
    if row > chunk_elems and array.ndim > 1:
        for i in range(array.shape[0]):
            yield from _flat_chunks(array[i], chunk_elems)
        return
    step = max(1, chunk_elems // max(row, 1))
    for i in range(0, array.shape[0], step):
        yield np.ascontiguousarray(array[i : i + step]).reshape(-1)


def _blocks(chunks: Iterable[np.ndarray], block: int) -> Iterator[tuple[np.ndarray, int]]:
    """Split arbitrary chunks into ≤ ``block`` element 1-D pieces with their flat offset."""
    offset = 0
    for chunk in chunks:
        flat = np.asarray(chunk).reshape(-1)
        for i in range(0, flat.size, block):
            piece = flat[i : i + block]
            yield piece, offset + i
        offset += flat.size


def _logical_name(dtype: Any) -> str:
    if dtype is None:
        return ""
    if isinstance(dtype, str):
        return dtype
    return np.dtype(dtype).name


def _bucket_kind(chunk_dtype: np.dtype, logical: str) -> Optional[str]:
    """The value table to use for chunks of ``chunk_dtype`` holding ``logical`` values, if any."""
    width = 2 if logical in ("float16", "bfloat16") else 1
    if logical in _RAW_FLOATS and chunk_dtype.itemsize == width and chunk_dtype.kind in "uiVf":
        return logical  # raw bit patterns (uint16 bf16 bits, uint8 fp8 bits, ml_dtypes arrays)
    name = chunk_dtype.name
    if name in _BUCKET_KINDS:
        return name
    return None


def _run(source: ChunkSource, shape: tuple[int, ...], logical: str, block: int,
         first_bad_n: int, bins: int, read_range: Optional[ReadRange] = None) -> TensorStats:
    first = _iterate(source)
    it = iter(first)
    pieces = _blocks(it, block)
    try:
        head, off0 = next(pieces)
    except StopIteration:
        return TensorStats(count=0, zeros=0, nan=0, posinf=0, neginf=0, dtype=logical, shape=shape)
    kind = _bucket_kind(head.dtype, logical or head.dtype.name)
    if kind is not None:
        acc = _BucketAcc(kind, first_bad_n)
        acc.add(head, off0)
        for piece, off in pieces:
            acc.add(piece, off)
        return acc.finish(bins, shape, logical or kind)
    if head.dtype.kind not in "biufc":
        raise ValueError(f"cannot compute statistics of dtype {head.dtype} (logical {logical!r})")
    workers = stats_workers() if _count(shape) >= PARALLEL_MIN_ELEMS else 1
    gen = _FloatAcc(first_bad_n)
    gen.add(head, off0)
    shift = gen.mean if gen.nfin else None
    shift_rms2 = gen.sumsq / gen.nfin if gen.nfin else 0.0

    def reduce_block(piece: np.ndarray, off: int) -> _FloatAcc:
        acc = _FloatAcc(first_bad_n, shift, shift_rms2)
        acc.add(piece, off)
        return acc

    if (workers > 1 and read_range is not None and off0 == 0 and head.size == block
            and head.dtype.kind == "f" and head.dtype.itemsize in (4, 8) and _forkable()):
        if _count(shape) < PROCESS_MIN_ELEMS:  # a fork costs more than it saves; threads would cost more
            workers = 1
            forked = None
        else:
            forked = _run_forked(read_range, shape, block, gen, reduce_block, bins, workers)
        if forked is not None:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()  # the chunk generator (an open file) is not needed any more
            st, hist = forked
            st.dtype = logical or head.dtype.name
            if hist is not None:
                st.hist_edges = [float(e) for e in hist[0]]
                st.hist_counts = [int(c) for c in hist[1]]
                st.hist_log = hist[2]
            return st

    for acc in _ordered_map(reduce_block, pieces, workers):
        gen.merge(acc)
    st = gen.stats(shape, logical or head.dtype.name)
    if gen.nfin:
        again = _iterate_again(source, first)
        if again is not None:
            edges, counts, log = gen.histogram(_blocks(again, block), bins, workers)
            st.hist_edges = [float(e) for e in edges]
            st.hist_counts = [int(c) for c in counts]
            st.hist_log = log
    return st


#: float32/float64 tensors of at least this many elements are reduced in forked processes where that is
#: possible (smaller ones on the calling thread there): a fork, the children's first touches and their
#: reaping cost ~10-20 ms, which two cores win back from ~24M elements on (1 GiB float32: 268M)
PROCESS_MIN_ELEMS = 1 << 25


def _forkable() -> bool:
    from dumpscope.core.tensors.stats_procs import can_fork

    return can_fork()


#: ``read_range(start, stop)``: elements ``[start, stop)`` of the flat tensor as one 1-D array (a
#: memmap slice, or a read of that part of the file): a source that can be split by element range
ReadRange = Callable[[int, int], np.ndarray]


def _run_forked(read_range: ReadRange, shape: tuple[int, ...], block: int, gen: "_FloatAcc",
                reduce_block: Callable[[np.ndarray, int], "_FloatAcc"], bins: int,
                workers: int) -> Optional[tuple[TensorStats, Optional[tuple[np.ndarray, np.ndarray, bool]]]]:
    """Both passes of the float engine over blocks 1… in forked processes (``gen`` holds block 0);
    None when no process could be forked.  Every block is reduced exactly as on one thread and
    merged here in block order, so the answer is bit-identical to the one-thread answer."""
    from dumpscope.core.tensors.stats_procs import BlockProcs, split_ranges

    n = _count(shape)
    nblocks = -(-n // block)
    plans: dict[int, Any] = {}

    def handler(msg: dict[str, Any], b: int) -> Any:
        start = b * block
        piece = read_range(start, min(n, start + block))
        if msg["pass"] == 1:
            return reduce_block(piece, start).to_plain()
        key = id(msg)
        if key not in plans:  # one plan per phase message (the same object for all its blocks)
            plans.clear()
            plans[key] = (msg, _FloatAcc.from_plain(msg["acc"], gen.bad.limit).hist_plan(int(msg["bins"]))[2])
        return plans[key][1](piece, start).tolist()

    ranges = split_ranges(0, nblocks, workers)
    ranges[0] = (1, ranges[0][1])  # block 0 is done (pass 1) and counted here (pass 2): a block less
    procs = BlockProcs.start(handler, ranges)
    if procs is None:
        return None
    msg1 = {"pass": 1}
    with procs:
        for b, plain in procs.run(msg1):
            try:
                acc = _FloatAcc.from_plain(plain, gen.bad.limit)
            except (TypeError, ValueError, KeyError):  # a garbled result: reduce that block here
                acc = _FloatAcc.from_plain(handler(msg1, b), gen.bad.limit)
            gen.merge(acc)
        st = gen.stats(shape, "")
        if not gen.nfin:
            return st, None
        edges, log, count = gen.hist_plan(bins)
        counts = np.zeros(len(edges) - 1, dtype=np.int64)
        if count is None:
            counts[0] = gen.nfin
            return st, (edges, counts, log)
        counts += count(read_range(0, min(n, block)), 0)
        msg2 = {"pass": 2, "bins": bins, "acc": gen.to_plain()}
        plans[id(msg2)] = (msg2, count)  # this process has the plan already (the children build theirs)
        for b, part in procs.run(msg2):
            try:
                got = np.asarray(part, dtype=np.int64)
                ok = got.shape == counts.shape
            except (TypeError, ValueError, OverflowError):
                ok = False
            counts += got if ok else np.asarray(handler(msg2, b), dtype=np.int64)
        return st, (edges, counts, log)


def _count(shape: tuple[int, ...]) -> int:
    return math.prod(shape) if shape else 1


def _iterate(source: ChunkSource) -> Iterable[np.ndarray]:
    return source() if callable(source) else source


def _iterate_again(source: ChunkSource, first: Iterable[np.ndarray]) -> Optional[Iterable[np.ndarray]]:
    """A fresh pass over the chunks, or None when they were a one-shot iterator."""
    if callable(source):
        return source()
    if iter(first) is first:
        return None
    return first


# --------------------------------------------------------------------------------------------
# public API


def compute_stats(array: np.ndarray, chunk_elems: int = 1 << 22, first_bad_n: int = 10, bins: int = 32,
                  *, dtype: Optional[str] = None) -> TensorStats:
    """Statistics of ``array`` (may be a multi-GB ``np.memmap``) in bounded memory.

    ``dtype`` names the logical dtype when ``array`` holds raw bit patterns, e.g. a uint16 array of
    bfloat16 bits with ``dtype="bfloat16"`` or uint8 float8 bits with ``dtype="float8_e5m2"``;
    ml_dtypes arrays (bfloat16, float8_*) are recognised by their dtype name.  At most about
    ``chunk_elems`` elements are copied at a time (only non-contiguous arrays copy at all).
    Raises ValueError for dtypes that are not numbers (strings, objects, structured).
    """
    arr = np.asanyarray(array)
    shape = tuple(int(d) for d in arr.shape)
    logical = _logical_name(dtype) or arr.dtype.name
    chunk_elems = max(1, int(chunk_elems))
    block = min(chunk_elems, _BLOCK)
    read_range = None
    if arr.flags.c_contiguous and arr.ndim and chunk_elems % block == 0:  # blocks at multiples of block
        flat = arr.reshape(-1)
        read_range = lambda a, b: flat[a:b]  # noqa: E731  (a view: children share the mapping)
    return _run(lambda: _flat_chunks(arr, chunk_elems), shape, logical, block, first_bad_n, bins, read_range)


def compute_stats_chunks(chunks: ChunkSource, shape: tuple[int, ...], dtype: Any,
                         first_bad_n: int = 10, bins: int = 32, chunk_elems: int = 1 << 22) -> TensorStats:
    """Statistics of a tensor delivered as C-order chunks (e.g. decoded piece by piece).

    ``dtype`` is the logical dtype (numpy spelling).  Chunks may be decoded values (float32 from
    bf16, …) or raw bit patterns (uint16 chunks with ``dtype="bfloat16"``).  The generic engine
    (32/64-bit values) builds its histogram in a second pass: pass a callable returning a fresh
    iterable, or a re-iterable (list…); with a one-shot iterator the histogram is left empty.
    A callable that also has ``read_range(start, stop)`` (elements ``[start, stop)`` as one array)
    and ``chunk`` (every chunk but the last has that many elements) can be reduced in forked
    processes (see :mod:`dumpscope.core.tensors.stats_procs`).
    """
    shape = tuple(int(d) for d in shape)
    block = min(max(1, int(chunk_elems)), _BLOCK)
    read_range = getattr(chunks, "read_range", None)  # a source split by element range (a file)
    if read_range is not None and (not getattr(chunks, "chunk", 0) or getattr(chunks, "chunk") % block):
        read_range = None  # its chunks would cut blocks elsewhere than at multiples of block
    return _run(chunks, shape, _logical_name(dtype), block, first_bad_n, bins, read_range)


# --------------------------------------------------------------------------------------------
# stats read from files

_ROW_INT_KEYS = ("count", "zeros", "nan", "posinf", "neginf")
_ROW_FLOAT_KEYS = ("min", "max", "mean", "std", "l2norm")
_ROW_ALIASES = {"avg": "mean", "norm": "l2norm", "l2": "l2norm", "nan_count": "nan",
                "pos_inf": "posinf", "neg_inf": "neginf", "zero_count": "zeros"}


def stats_from_row(row: dict[str, Any]) -> TensorStats:
    """A partial TensorStats from precomputed statistics (normalized stats-CSV keys, dump.json).

    Accepts the keys of ``StatsRow.stats`` (``max, min, mean, count, nan, neginf, posinf, zeros,
    l2norm``) plus ``std``, ``avg``, ``dtype`` and ``shape``; missing or unparsable values → None.
    """
    st = TensorStats()
    for raw_key, value in row.items():
        key = _ROW_ALIASES.get(str(raw_key).lower(), str(raw_key).lower())
        if key in _ROW_INT_KEYS:
            num = _to_float(value)
            setattr(st, key, int(num) if num is not None and math.isfinite(num) else None)
        elif key in _ROW_FLOAT_KEYS:
            setattr(st, key, _to_float(value))
        elif key == "dtype" and value is not None:
            st.dtype = str(value)
        elif key == "shape" and value is not None:
            try:
                st.shape = tuple(int(d) for d in value)
            except (TypeError, ValueError):
                pass
    return st


def _to_float(value: Any) -> Optional[float]:
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
