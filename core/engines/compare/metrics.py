"""Golden-vs-target tensor metrics (msprobe definitions); the verdicts live in ``verdict``.

``golden`` is the bench side B, ``target`` the side under test N (usually the NPU), as in
msprobe (FORMATS.md §9.3):

* ``cosine``    N·B / (‖N‖‖B‖)            — 1.0 when both are all-zero, 0.0 when exactly one is.
* ``euc_dist``  ‖N − B‖₂
* ``max_abs_err`` max |N − B|
* ``max_rel_err`` max RE, RE = |N − B| / |B|; where B == 0 the denominator is the machine
  epsilon of the golden dtype (msprobe adds eps at B == 0), so equal zeros give RE 0 and a
  non-zero target over a zero golden gives a large but finite RE.
* ``one_thousandth_ratio`` / ``five_thousandth_ratio``: fraction of compared elements with
  RE < 0.001 / RE < 0.005.

Everything streams over flat views in chunks (inputs may be multi-GB ``np.memmap``), each
chunk cast to float64 in small cache-sized blocks, with float64 accumulation, so memory
stays at a few blocks whatever the tensor size.  Elements where either side is NaN/±Inf are
left out of every metric and counted instead; positions where the two sides disagree on
non-finiteness (NaN vs finite, +Inf vs -Inf, …) make the verdict an error.  Complex
tensors are compared as interleaved (real, imag) real vectors, so cosine is
Re⟨N,B⟩/(‖N‖‖B‖) and RE is per component.  bool/int/ml_dtypes floats are cast to float64
(int64 beyond 2**53 loses precision).

Besides msprobe's metrics the pass records what the verdict rules need and msprobe rows show:
each side's min/max/mean/L2 norm over finite elements, and a histogram of the absolute
difference (binary exponent) of the elements whose relative error exceeds the element
tolerance ``rtol`` — so "how many elements moved by more than max(rtol·|golden|, atol)" can be
answered afterwards for any ``atol`` (the noise floor depends on the op's other tensors).

Everything here is module-level and the records are plain picklable dataclasses, so
``measure_arrays`` can run inside a ``ProcessPoolExecutor`` worker.
"""

from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional

import numpy as np

#: Keys of one CLI ``compare`` row that this module fills (CLI.md).
ROW_KEYS = (
    "cosine",
    "euc_dist",
    "max_abs_err",
    "max_rel_err",
    "one_thousandth_ratio",
    "five_thousandth_ratio",
    "verdict",
    "rule",
)

#: Elements per inner block: six 1 MB float64 buffers stay in L3 (best of 2**14..2**18 measured).
_BLOCK = 1 << 17


@dataclass(slots=True, frozen=True)
class Tolerance:
    """What the pass must know before it starts.

    ``rtol``: an element "moved" when its relative error exceeds it (the histogram of moved
    elements is kept by |difference|, so the absolute floor is chosen later).
    ``allclose``: ``(atol, rtol)`` from ``--atol/--rtol``: count the elements with
    |t−g| > atol + rtol·|g| exactly (numpy ``allclose``).
    """

    rtol: float = 1e-3
    allclose: Optional[tuple[float, float]] = None


#: Histogram of moved elements by |difference|: the bin is the float64's exponent and top two
#: mantissa bits (``bits >> 50``), i.e. 4 bins per binary octave; bin 0 holds the unmoved.
HIST_SHIFT = 50
HIST_BINS = 1 << (63 - HIST_SHIFT)


def hist_bin_low(i: int) -> float:
    """Lower edge of histogram bin ``i`` (an octave [2^e, 2^(e+1)) in 4 equal parts)."""
    return float(np.array([i << HIST_SHIFT], np.int64).view(np.float64)[0])


def moved_count(hist: Optional[dict[int, int]], atol: float) -> int:
    """Elements counted in ``hist`` whose |difference| is above ``atol`` (to within one bin, 1/4 octave)."""
    if not hist:
        return 0
    return sum(c for i, c in hist.items() if i and hist_bin_low(i) >= atol)


@dataclass(slots=True)
class CompareResult:
    """Metrics of one golden/target tensor pair plus the verdict and the rule that set it.

    Metric fields are ``None`` when unknown (shape mismatch, nothing finite to compare,
    statistics-only pair).  ``count`` is the number of (real) element pairs that entered
    the metrics; complex tensors count two per element.
    """

    verdict: str
    rule: str
    shape: tuple[int, ...]
    target_shape: tuple[int, ...]
    golden_dtype: str
    target_dtype: str
    cosine: Optional[float] = None
    euc_dist: Optional[float] = None
    max_abs_err: Optional[float] = None
    max_rel_err: Optional[float] = None
    one_thousandth_ratio: Optional[float] = None
    five_thousandth_ratio: Optional[float] = None
    count: int = 0
    golden_nan: int = 0
    golden_inf: int = 0
    target_nan: int = 0
    target_inf: int = 0
    nonfinite_mismatch: int = 0  # positions whose NaN/±Inf status differs between sides
    allclose_failed: Optional[int] = None  # elements failing |t-g| <= atol + rtol*|g|
    stat_diffs: Optional[dict[str, float]] = None  # compare_stats: target − golden per stat
    stat_rel_errs: Optional[dict[str, float]] = None  # compare_stats: |diff| / |golden|
    golden_stats: Optional[dict[str, Optional[float]]] = None  # max, min, mean, l2norm (finite elements)
    target_stats: Optional[dict[str, Optional[float]]] = None
    rtol: Optional[float] = None  # the element tolerance the moved histogram was counted with
    moved_hist: Optional[dict[int, int]] = None  # bin -> count, see moved_count(); None for statistics
    #: max |t−g| / (|g| + s), s the golden's RMS (over each block of up to 131,072 elements): the largest
    #: error of one element against its own size and the tensor's typical size (``precision``)
    max_scaled_err: Optional[float] = None
    #: the 90th percentile of |t−g|/|g| over the elements (|g| = 0: the golden dtype's eps): the relative
    #: error most elements carry, whatever a few huge values (a −1e9 mask) do to the norm (``precision``)
    rel_err_q90: Optional[float] = None
    size: int = 0  # elements of the golden tensor (complex: real components), finite or not; -1 unknown
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------
# dtype helpers


@lru_cache(maxsize=256)
def _dtype_class(dt: np.dtype) -> str:
    """"real", "complex" or "other" (values that cannot be compared numerically)."""
    if dt.kind == "c":
        return "complex"
    if dt.kind in "biuf":
        return "real"
    if dt.kind == "V" and dt.names is None:  # ml_dtypes (bfloat16, float8_*, int4 …)
        try:
            np.zeros(1, dt).astype(np.float64)
            return "real"
        except (TypeError, ValueError):
            return "other"
    return "other"


@lru_cache(maxsize=256)
def _eps(dt: np.dtype) -> float:
    """Machine epsilon of the golden dtype (float64 eps for ints/bool, like msprobe)."""
    if dt.kind == "c":
        dt = np.empty(0, dt).real.dtype
    if dt.kind == "f" and dt.name in ("float16", "float32", "float64", "longdouble"):
        return float(np.finfo(dt).eps)
    if dt.kind in "fV":  # ml_dtypes' kinds (bfloat16 "V"; float8_* report "f" but numpy's finfo refuses them)
        try:
            import ml_dtypes  # optional; only present when such arrays exist

            return float(ml_dtypes.finfo(dt).eps)
        except (ImportError, ValueError, TypeError):
            pass
    return float(np.finfo(np.float64).eps)


@lru_cache(maxsize=256)
def _dtype_name(dt: np.dtype) -> str:
    return str(dt)


@lru_cache(maxsize=256)
def _class_of_name(name: str) -> str:
    try:
        return _dtype_class(np.dtype(name))
    except TypeError:  # e.g. "bfloat16" while ml_dtypes is not imported in this process
        return "real" if name.startswith(("bfloat", "float", "int", "uint")) else "other"


#: Row length for dot products: below OpenBLAS's threading threshold for ddot (10000).
_DOT_ROW = 8192
_HAS_VECDOT = hasattr(np, "vecdot")  # numpy >= 2.0; older numpy uses einsum only


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """float64 dot product that never starts BLAS threads.

    A plain ``np.dot`` over a block lets OpenBLAS thread ddot (n > 10000); with several
    worker processes on few cores those threads wait on each other (measured 20-40x slower
    under load).  So the block is cut into rows of ``_DOT_ROW`` for ``np.vecdot`` (one
    single-threaded BLAS call per row) and the tail goes to einsum (no BLAS at all).
    """
    n = a.size
    k = n - n % _DOT_ROW if _HAS_VECDOT else 0
    s = 0.0
    if k:
        s = float(np.vecdot(a[:k].reshape(-1, _DOT_ROW), b[:k].reshape(-1, _DOT_ROW)).sum())
    if k < n:
        s += float(np.einsum("i,i->", a[k:], b[k:]))
    return s


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _shape_text(s: tuple[int, ...]) -> str:
    return "(" + ",".join(str(d) for d in s) + ")"


# --------------------------------------------------------------------------------------
# streaming


def _pair_chunks(
    golden: np.ndarray, target: np.ndarray, chunk_elems: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield matching 1-D chunks of both arrays in C order (views when contiguous)."""
    n = golden.size
    flat = []
    for a in (golden, target):
        flat.append(a.reshape(-1) if a.flags.c_contiguous else None)
    complex_ = golden.dtype.kind == "c"
    for start in range(0, n, chunk_elems):
        stop = min(n, start + chunk_elems)
        out = []
        for a, f in zip((golden, target), flat):
            c = f[start:stop] if f is not None else np.ascontiguousarray(a.flat[start:stop])
            if complex_:
                c = c.view(c.real.dtype)
            out.append(c)
        yield out[0], out[1]


class _Acc:
    """Running float64 sums/maxima/counts for the metric set (mutable, per call)."""

    __slots__ = (
        "sgg", "stt", "sgt", "sdd", "max_abs", "max_rel", "c1", "c5", "n",
        "g_nan", "g_inf", "t_nan", "t_inf", "mismatch", "g_only_nan", "t_only_nan",
        "g_only_inf", "t_only_inf", "close_fail", "gmin", "gmax", "tmin", "tmax", "gsum", "tsum", "hist",
        "max_scaled", "rel_hist", "rel_q90", "single",
    )

    def __init__(self) -> None:
        self.sgg = self.stt = self.sgt = self.sdd = 0.0
        self.max_abs = self.max_rel = self.max_scaled = -math.inf
        self.c1 = self.c5 = self.n = 0
        self.g_nan = self.g_inf = self.t_nan = self.t_inf = 0
        self.mismatch = self.g_only_nan = self.t_only_nan = self.g_only_inf = self.t_only_inf = 0
        self.close_fail = 0
        self.gmin = self.tmin = math.inf
        self.gmax = self.tmax = -math.inf
        self.gsum = self.tsum = 0.0
        self.hist: Optional[np.ndarray] = None  # made by the first block with a moved element
        self.rel_hist: Optional[np.ndarray] = None  # relative errors by quarter octave (tensors of several blocks)
        self.rel_q90: Optional[float] = None  # exact, when the tensor is one block
        self.single = False  # the whole tensor is one block: the quantile is taken exactly


class _Buffers:
    """Preallocated float64 / bool block buffers, reused for every block."""

    def __init__(self, size: int) -> None:
        self.g = np.empty(size, np.float64)
        self.t = np.empty(size, np.float64)
        self.d = np.empty(size, np.float64)
        self.w = np.empty(size, np.float64)
        self.x = np.empty(size, np.float64)
        self.b = np.empty(size, np.bool_)


def _finite_metrics(
    g: np.ndarray, t: np.ndarray, buf: _Buffers, acc: _Acc, eps: float, tol: Tolerance,
    sums: Optional[tuple[float, float, float]] = None,
) -> None:
    """Accumulate metrics of float64 blocks ``g``, ``t`` known to be all finite."""
    n = g.size
    if n == 0:
        return
    if sums is None:
        sums = (_dot(g, g), _dot(t, t), _dot(g, t))
    acc.sgg += sums[0]
    acc.stt += sums[1]
    acc.sgt += sums[2]
    acc.n += n
    acc.gmin = min(acc.gmin, float(g.min()))
    acc.gmax = max(acc.gmax, float(g.max()))
    acc.tmin = min(acc.tmin, float(t.min()))
    acc.tmax = max(acc.tmax, float(t.max()))
    acc.gsum += float(np.add.reduce(g))
    acc.tsum += float(np.add.reduce(t))
    d = buf.d[:n]
    w = buf.w[:n]
    b = buf.b[:n]
    np.subtract(t, g, out=d)
    acc.sdd += _dot(d, d)
    np.abs(d, out=d)
    acc.max_abs = max(acc.max_abs, float(d.max()))
    np.abs(g, out=w)
    # |Δ| / (|golden| + s), s the block's RMS: an element's error against its own size and the tensor's
    # typical size (near-zero elements of a large tensor are judged against the latter)
    scaled = buf.x[:n]
    np.add(w, math.sqrt(sums[0] / n), out=scaled)
    np.divide(d, scaled, out=scaled)
    ms = float(np.fmax.reduce(scaled))
    acc.max_scaled = max(acc.max_scaled, ms if ms == ms else 0.0)
    if tol.allclose is not None:
        lim = buf.x[:n]
        np.multiply(w, tol.allclose[1], out=lim)
        lim += tol.allclose[0]
        np.greater(d, lim, out=b)
        acc.close_fail += int(np.count_nonzero(b))
    np.divide(d, w, out=w)
    mr = float(w.max())
    if not math.isfinite(mr):
        # a zero golden (0/0 → NaN, x/0 → Inf) or an overflow: redo with eps at B == 0.
        # Cheaper than looking for zeros first, which costs a full pass on every block.
        np.abs(g, out=w)
        np.equal(g, 0.0, out=b)
        w[b] = eps
        np.divide(d, w, out=w)
        mr = float(w.max())
    acc.max_rel = max(acc.max_rel, mr)
    if acc.single:
        acc.rel_q90 = float(np.partition(w, q90_index(n))[q90_index(n)])
    else:
        counts = np.bincount(w.view(np.int64) >> HIST_SHIFT, minlength=HIST_BINS)
        acc.rel_hist = counts if acc.rel_hist is None else acc.rel_hist + counts
    np.less(w, 0.001, out=b)
    acc.c1 += int(np.count_nonzero(b))
    np.less(w, 0.005, out=b)
    acc.c5 += int(np.count_nonzero(b))
    np.greater(w, tol.rtol, out=b)
    k = int(np.count_nonzero(b))
    if k:
        # the bit pattern of |difference| >> 50 is its bin (no log); few moved: only those, else
        # |difference| where moved and 0 elsewhere (bin 0, never counted), without a copy
        if k * 8 < n:
            bits = d[b].view(np.int64)
        else:
            moved = buf.x[:n]
            np.multiply(d, b, out=moved)
            bits = moved.view(np.int64)
        counts = np.bincount(bits >> HIST_SHIFT, minlength=HIST_BINS)
        acc.hist = counts if acc.hist is None else acc.hist + counts


def q90_index(n: int) -> int:
    """0-based index of the 90th percentile of n sorted values (the smallest value with 90 % at or below)."""
    return max(0, math.ceil(0.9 * n) - 1)


def _nonfinite_block(
    g: np.ndarray, t: np.ndarray, buf: _Buffers, acc: _Acc, eps: float, tol: Tolerance
) -> None:
    """Slow path for a block holding NaN/Inf: count them, compare the finite pairs."""
    g_nan, t_nan = np.isnan(g), np.isnan(t)
    g_inf, t_inf = np.isinf(g), np.isinf(t)
    acc.g_nan += int(g_nan.sum())
    acc.t_nan += int(t_nan.sum())
    acc.g_inf += int(g_inf.sum())
    acc.t_inf += int(t_inf.sum())
    g_fin = ~(g_nan | g_inf)
    t_fin = ~(t_nan | t_inf)
    both = g_fin & t_fin
    same_special = (g_nan & t_nan) | (g_inf & t_inf & (g == t))
    bad = ~both & ~same_special
    acc.mismatch += int(bad.sum())
    acc.g_only_nan += int((g_nan & ~t_nan).sum())
    acc.t_only_nan += int((t_nan & ~g_nan).sum())
    acc.g_only_inf += int((g_inf & ~t_inf).sum())
    acc.t_only_inf += int((t_inf & ~g_inf).sum())
    gf, tf = g[both], t[both]
    # fancy indexing copied; recompute sums on the finite part (overflow-safe retry)
    _finite_metrics(gf, tf, _Buffers(gf.size) if gf.size > buf.d.size else buf, acc, eps, tol)


def _accumulate(
    golden: np.ndarray, target: np.ndarray, tol: Tolerance, chunk_elems: int, eps: float
) -> _Acc:
    acc = _Acc()
    reals = golden.size * (2 if golden.dtype.kind == "c" else 1)
    block = max(1, min(_BLOCK, chunk_elems, reals))
    acc.single = block >= reals
    buf = _Buffers(block)
    with np.errstate(all="ignore"):  # once per call: errstate costs µs per entry
        for gc, tc in _pair_chunks(golden, target, max(1, chunk_elems)):
            _accumulate_chunk(gc, tc, block, buf, acc, eps, tol)
    return acc


def _accumulate_chunk(
    gc: np.ndarray, tc: np.ndarray, block: int, buf: _Buffers, acc: _Acc, eps: float, tol: Tolerance
) -> None:
    """Feed one pair of 1-D chunks to the accumulator, block by block."""
    for s in range(0, gc.size, block):
        e = min(gc.size, s + block)
        n = e - s
        g = buf.g[:n]
        t = buf.t[:n]
        np.copyto(g, gc[s:e], casting="unsafe")
        np.copyto(t, tc[s:e], casting="unsafe")
        sgg, stt = _dot(g, g), _dot(t, t)
        if math.isfinite(sgg) and math.isfinite(stt):
            # NaN/Inf propagate into sums of squares, so finite sums ⇒ finite block
            _finite_metrics(g, t, buf, acc, eps, tol, (sgg, stt, _dot(g, t)))
        else:
            _nonfinite_block(g, t, buf, acc, eps, tol)


# --------------------------------------------------------------------------------------
# public entry points


def measure_arrays(
    golden: np.ndarray,
    target: np.ndarray,
    tol: Tolerance = Tolerance(),
    chunk_elems: int = 1 << 22,
) -> CompareResult:
    """Measure two tensors element-wise (see the module docstring); no verdict yet.

    No broadcasting: tensors of different shapes but the same element count are compared in
    C order (the verdict still names the shape difference); with different counts or an
    uncomparable dtype pair the metrics stay ``None``.
    Memory: O(block) float64 buffers plus, for non-C-contiguous inputs, one chunk copy.
    """
    golden = np.asarray(golden) if not isinstance(golden, np.ndarray) else golden
    target = np.asarray(target) if not isinstance(target, np.ndarray) else target
    r = CompareResult(
        verdict="",
        rule="",
        shape=tuple(int(d) for d in golden.shape),
        target_shape=tuple(int(d) for d in target.shape),
        golden_dtype=_dtype_name(golden.dtype),
        target_dtype=_dtype_name(target.dtype),
        rtol=tol.rtol,
        size=int(golden.size) * (2 if golden.dtype.kind == "c" else 1),
    )
    gcls, tcls = _dtype_class(golden.dtype), _dtype_class(target.dtype)
    if gcls != "other" and gcls == tcls and golden.size == target.size:
        if r.shape != r.target_shape:  # same elements in another shape: compared in C order
            golden, target = golden.reshape(-1), target.reshape(-1)
        acc = _accumulate(golden, target, tol, chunk_elems, _eps(golden.dtype))
        _fill(r, acc, tol)
    return r


#: one side of a streamed comparison: (make_chunks, logical shape, dtype of the chunks' values)
Stream = tuple[Any, tuple[int, ...], np.dtype]


def _paired(golden: Iterator[np.ndarray], target: Iterator[np.ndarray], limit: int
            ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pairs of equal-length 1-D pieces of two chunk streams of the same total length (their own
    chunk sizes may differ: a device layout yields slabs, a plain file fixed-size reads)."""
    g = t = np.zeros(0)
    while True:
        while g.size == 0:
            nxt = next(golden, None)
            if nxt is None:
                break
            g = nxt.reshape(-1)
        while t.size == 0:
            nxt = next(target, None)
            if nxt is None:
                break
            t = nxt.reshape(-1)
        if g.size == 0 or t.size == 0:
            if g.size or t.size:
                raise ValueError("the two tensors ended at different lengths")
            return
        m = min(g.size, t.size, limit)
        yield g[:m], t[:m]
        g, t = g[m:], t[m:]


def measure_streams(golden: Stream, target: Stream, tol: Tolerance = Tolerance(),
                    chunk_elems: int = 1 << 22) -> CompareResult:
    """:func:`measure_arrays` over two chunk streams in C order: neither tensor is ever whole in
    memory (a 2 GiB device-layout pair compares in a few chunks), the metrics are the same."""
    (make_g, gshape, gdt), (make_t, tshape, tdt) = golden, target
    gdt, tdt = np.dtype(gdt), np.dtype(tdt)
    n = math.prod(gshape)
    r = CompareResult(
        verdict="",
        rule="",
        shape=tuple(int(d) for d in gshape),
        target_shape=tuple(int(d) for d in tshape),
        golden_dtype=_dtype_name(gdt),
        target_dtype=_dtype_name(tdt),
        rtol=tol.rtol,
        size=int(n) * (2 if gdt.kind == "c" else 1),
    )
    gcls, tcls = _dtype_class(gdt), _dtype_class(tdt)
    if gcls != "other" and gcls == tcls and n == math.prod(tshape):  # another shape: C order, as measure_arrays
        acc = _Acc()
        block = max(1, min(_BLOCK, chunk_elems, r.size))
        acc.single = block >= r.size
        buf = _Buffers(block)
        complex_ = gdt.kind == "c"
        with np.errstate(all="ignore"):
            for gc, tc in _paired(iter(make_g()), iter(make_t()), max(1, chunk_elems)):
                if complex_:
                    gc, tc = gc.view(gc.real.dtype), tc.view(tc.real.dtype)
                _accumulate_chunk(gc, tc, block, buf, acc, _eps(gdt), tol)
        _fill(r, acc, tol)
    return r


def _side_stats(n: int, lo: float, hi: float, total: float, sq: float) -> dict[str, Optional[float]]:
    if n == 0:
        return {"max": None, "min": None, "mean": None, "l2norm": None}
    return {"max": hi, "min": lo, "mean": total / n, "l2norm": math.sqrt(sq)}


def _fill(r: CompareResult, acc: _Acc, tol: Tolerance) -> None:
    r.count = acc.n
    r.golden_nan, r.golden_inf, r.target_nan, r.target_inf = acc.g_nan, acc.g_inf, acc.t_nan, acc.t_inf
    r.nonfinite_mismatch = acc.mismatch
    r.extra.update(
        golden_only_nan=acc.g_only_nan, target_only_nan=acc.t_only_nan,
        golden_only_inf=acc.g_only_inf, target_only_inf=acc.t_only_inf,
    )
    if tol.allclose is not None:
        r.allclose_failed = acc.close_fail
    r.golden_stats = _side_stats(acc.n, acc.gmin, acc.gmax, acc.gsum, acc.sgg)
    r.target_stats = _side_stats(acc.n, acc.tmin, acc.tmax, acc.tsum, acc.stt)
    hist = acc.hist
    r.moved_hist = {} if hist is None else {int(i): int(hist[i]) for i in np.flatnonzero(hist[1:]) + 1}
    if acc.n == 0:
        return
    ng, nt = math.sqrt(acc.sgg), math.sqrt(acc.stt)
    if ng == 0.0 and nt == 0.0:
        cos: Optional[float] = 1.0
    elif ng == 0.0 or nt == 0.0:
        cos = 0.0
    else:
        prod = acc.sgg * acc.stt
        # sqrt(a*a) == a exactly in IEEE arithmetic, so x vs x gives cosine exactly 1.0
        c = acc.sgt / (math.sqrt(prod) if math.isfinite(prod) and prod > 0.0 else ng * nt)
        cos = min(1.0, max(-1.0, c)) if math.isfinite(c) else None  # None: float64 overflow
    r.cosine = cos
    r.euc_dist = math.sqrt(acc.sdd)
    r.max_abs_err = acc.max_abs
    r.max_rel_err = acc.max_rel
    r.max_scaled_err = acc.max_scaled
    if acc.rel_q90 is not None:
        r.rel_err_q90 = acc.rel_q90
    elif acc.rel_hist is not None and acc.n:
        cum, want = 0, q90_index(acc.n) + 1
        for i in np.flatnonzero(acc.rel_hist):
            cum += int(acc.rel_hist[i])
            if cum >= want:  # the bin's upper edge: at most a quarter octave above the exact value
                r.rel_err_q90 = hist_bin_low(int(i) + 1)
                break
    r.one_thousandth_ratio = acc.c1 / acc.n
    r.five_thousandth_ratio = acc.c5 / acc.n


_STAT_ALIASES: dict[str, tuple[str, ...]] = {
    "max": ("max", "max value"),
    "min": ("min", "min value"),
    "mean": ("mean", "avg", "avg value", "average"),
    "l2norm": ("l2norm", "norm", "l2norm value", "l2 value", "l2_norm"),
    "nan": ("nan", "nan count"),
    "posinf": ("posinf", "positive inf count", "pos_inf"),
    "neginf": ("neginf", "negative inf count", "neg_inf"),
}


def stat_value(d: Mapping[str, Any], name: str) -> Optional[float]:
    """Statistic ``name`` (max/min/mean/l2norm/nan/posinf/neginf) of a stats record, any spelling."""
    low = {str(k).strip().lower(): v for k, v in d.items()}
    for alias in _STAT_ALIASES[name]:
        v = low.get(alias)
        if v is None or v == "" or v == "null" or v == "NA":
            continue
        try:
            return float(v)
        except (TypeError, ValueError):
            return None
    return None


def measure_stats(golden: Mapping[str, Any], target: Mapping[str, Any]) -> CompareResult:
    """Measure statistics-only records (msprobe "statistics" mode); no verdict yet.

    Stats are looked up case-insensitively (``max``/``Max Value``, ``mean``/``Avg Value``,
    ``l2norm``/``Norm``/``L2Norm Value``, ``nan``/``Nan Count``, …); optional ``shape`` and
    ``dtype`` keys are read too.  ``stat_diffs`` = target − golden, ``stat_rel_errs`` =
    |diff| / |golden| as a fraction (msprobe prints ×100 %), golden eps at zero.  A stat that
    is non-finite on one side only is listed in ``extra["nonfinite_stats"]``.  Tensor metrics
    (cosine …) stay ``None``.
    """
    gdt, tdt = str(golden.get("dtype", "") or ""), str(target.get("dtype", "") or "")
    gsh = _shape_of(golden.get("shape"))
    tsh = _shape_of(target.get("shape"))
    r = CompareResult(
        verdict="", rule="",
        shape=gsh if gsh is not None else (), target_shape=tsh if tsh is not None else (),
        golden_dtype=gdt, target_dtype=tdt, stat_diffs={}, stat_rel_errs={},
    )
    r.extra["shapes_known"] = gsh is not None and tsh is not None
    r.size = math.prod(gsh) if gsh is not None else -1
    for side, d in (("golden", golden), ("target", target)):
        nan = stat_value(d, "nan")
        inf = sum(x for x in (stat_value(d, "posinf"), stat_value(d, "neginf")) if x is not None)
        setattr(r, f"{side}_nan", int(nan or 0))
        setattr(r, f"{side}_inf", int(inf))
        setattr(r, f"{side}_stats", {k: stat_value(d, k) for k in ("max", "min", "mean", "l2norm")})
    eps = _stat_eps(gdt)
    nonfinite_one_side: list[str] = []
    for name in ("max", "min", "mean", "l2norm"):
        g, t = stat_value(golden, name), stat_value(target, name)
        if g is None or t is None:
            continue
        if not (math.isfinite(g) and math.isfinite(t)):
            if not (g == t or (math.isnan(g) and math.isnan(t))):
                nonfinite_one_side.append(f"{name} {_fmt(g)} vs {_fmt(t)}")
            continue
        diff = t - g
        r.stat_diffs[name] = diff
        r.stat_rel_errs[name] = abs(diff) / (abs(g) if g != 0 else eps)
    r.extra["nonfinite_stats"] = nonfinite_one_side
    return r


def _shape_of(v: Any) -> Optional[tuple[int, ...]]:
    if v is None or v == "":
        return None
    if isinstance(v, str):
        txt = v.strip().strip("()[]\"'")
        sep = "x" if "x" in txt else ","
        return tuple(int(p) for p in txt.split(sep) if p.strip() not in ("", "-"))
    return tuple(int(x) for x in v)


def _stat_eps(dtype_name: str) -> float:
    try:
        return _eps(np.dtype(dtype_name))
    except TypeError:
        return float(np.finfo(np.float64).eps)


def dtype_eps(name: str) -> float:
    """Machine epsilon of a dtype given by name (float64 eps for ints, bool and unknown names)."""
    try:
        return _eps(np.dtype(name))
    except TypeError:
        if name.startswith("bfloat16"):
            return 2.0 ** -7
        if name.startswith("float8"):
            return 2.0 ** -2 if "e5m2" in name else 2.0 ** -3
        return float(np.finfo(np.float64).eps)


def dtype_class(name: str) -> str:
    """"real", "complex" or "other" for a dtype name (see ``_dtype_class``)."""
    return _class_of_name(name)


def to_row(result: CompareResult) -> dict[str, Any]:
    """The metric part of a CLI ``compare`` row: exactly :data:`ROW_KEYS`, ``None`` if unknown."""
    row: dict[str, Any] = {}
    for k in ROW_KEYS:
        v = getattr(result, k)
        if isinstance(v, float) and not math.isfinite(v):
            v = None  # keep the JSON strict; non-finite metrics only arise from overflow
        row[k] = v
    return row
