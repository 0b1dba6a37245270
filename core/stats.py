"""Tensor statistics in bounded memory: the numbers behind ``dumpscope stats`` and the stats pane.

Semantics follow CLI.md: ``min``/``max``/``mean``/``std`` (population, ddof=0)/``l2norm`` are taken
over the *finite* elements (``None`` when there is none); ``count``/``zeros``/``nan``/``posinf``/
``neginf`` count all elements.  Complex tensors are reduced to their magnitude ``|z|`` first (so a
complex NaN/Inf counts as NaN/+Inf of the magnitude); bool and integers are used as numbers.

Two engines, chosen by the element width, both single-pass over the data:

* **Bucket engine** (every type of at most 16 bits: float16, bfloat16, float8, int8/16, uint8/16,
  bool): one ``np.bincount`` of the raw bit patterns per block gives the exact multiset of values;
  every statistic and the histogram are then computed from the 256/65536-entry value table in
  float64.  Exact, cheap, and needs no second pass.
* **Generic engine** (32/64-bit ints and floats, complex magnitudes): per block, finite values are
  converted to float64 once; block sums, sums of squares and centred second moments are merged with
  Chan's parallel update (no catastrophic cancellation when ``|mean| >> std``).  The histogram needs
  the finite range first, so it is a second pass over the data (re-iterating the chunks).

Histogram: ``bins`` equal-width bins over ``[min, max]`` of the finite values.  When the values
span more than :data:`LOG_SPAN` (4 orders of magnitude) — measured as ``max|x|`` over the *typical*
magnitude ``t = 2**(mean floor(log2|x|) + 0.5)`` of the non-zero values, so that a few tiny values
near zero (every large normal sample has some) do not trigger it — symmetric log bins: a geometric
grid ``g_0 = t²/max|x| … g_k = max|x|`` mirrored around zero, ``[-g_k … -g_0, g_0 … g_k]``; the
centre bin ``[-g_0, g_0)`` holds the zeros and the magnitudes below ``g_0``.  One-sided data gets a
one-sided grid (with a first bin ``[0, g_0)`` when needed).  Bins are half-open ``[e_i, e_{i+1})``
except the last, which includes its right edge; counts are exact for the edges reported.
"""

from __future__ import annotations

import math
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


def _choose_edges(lo: float, hi: float, typical: float, bins: int) -> tuple[np.ndarray, bool]:
    """Edges covering ``[lo, hi]``: equal width, or symmetric-log when max|x| > LOG_SPAN × typical|x|."""
    bins = max(1, int(bins))
    if lo == hi:
        return np.array([lo, hi], dtype=np.float64), False
    amax = max(abs(lo), abs(hi))
    if not (typical > 0 and amax / typical > LOG_SPAN and bins >= 3):
        return np.linspace(lo, hi, bins + 1), False
    g0 = typical * typical / amax  # as far below the typical magnitude as max|x| is above it
    if lo < 0 < hi:
        k = max(1, (bins - 1) // 2)
        grid = np.geomspace(g0, amax, k + 1)
        return np.concatenate((-grid[::-1], grid)), True
    m_lo = lo if lo >= 0 else -hi  # one-sided: work on magnitudes, mirror for negatives
    if m_lo >= g0 and m_lo > 0:
        edges = np.geomspace(m_lo, amax, bins + 1)
    else:
        edges = np.concatenate(([0.0], np.geomspace(g0, amax, bins)))
    return (edges if lo >= 0 else -edges[::-1]), True


def _bin_index_exact(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin of each value (all inside ``[edges[0], edges[-1]]``), last bin closed."""
    idx = np.searchsorted(edges, values, side="right") - 1
    np.clip(idx, 0, len(edges) - 2, out=idx)
    return idx


def _bin_index_linear(values: np.ndarray, edges: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Fast equal-width binning with numpy.histogram's off-by-one-ulp correction."""
    nb = len(edges) - 1
    lo, hi = edges[0], edges[-1]
    np.subtract(values, lo, out=scratch)
    np.multiply(scratch, nb / (hi - lo), out=scratch)
    idx = scratch.astype(np.intp)
    np.clip(idx, 0, nb - 1, out=idx)
    dec = values < np.take(edges, idx, mode="clip")
    idx[dec] -= 1
    inc = values >= np.take(edges, idx + 1, mode="clip")
    inc &= idx != nb - 1
    idx[inc] += 1
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


class _GenericAcc:
    """Streaming statistics for 32/64-bit numbers (float64 accumulation, Chan merge)."""

    def __init__(self, first_bad_n: int) -> None:
        self.n = 0
        self.nan = self.posinf = self.neginf = self.zeros = 0
        self.nfin = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.sumsq = 0.0
        self.lo = math.inf
        self.hi = -math.inf
        self.exp_sum = 0.0  # sum of floor(log2|x|) over non-zero finite values
        self.nonzero = 0
        self.bad = _BadIndex(first_bad_n)
        self._buf = np.empty(0, dtype=np.float64)
        self._buf2 = np.empty(0, dtype=np.float64)

    def _bufs(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        if self._buf.size < m:
            self._buf = np.empty(m, dtype=np.float64)
            self._buf2 = np.empty(m, dtype=np.float64)
        return self._buf[:m], self._buf2[:m]

    def finite_values(self, x: np.ndarray, offset: int, count: bool) -> np.ndarray:
        """The finite values of one block as a float64 work buffer (counting non-finite ones)."""
        if x.dtype.kind in "fc":
            fin = np.isfinite(x)
            nf = int(np.count_nonzero(fin))
            if nf < x.size:
                if count:
                    bad = ~fin
                    nan = int(np.count_nonzero(np.isnan(x)))
                    pos = int(np.count_nonzero(x == np.inf))
                    self.nan += nan
                    self.posinf += pos
                    self.neginf += x.size - nf - nan - pos
                    if not self.bad.full:
                        self.bad.add(bad, offset)
                x = x[fin]
        buf, _ = self._bufs(x.size)
        np.copyto(buf, x, casting="unsafe")
        return buf

    def add(self, block: np.ndarray, offset: int) -> None:
        x = _as_real(block)
        self.n += x.size
        g = self.finite_values(x, offset, count=True)
        m = g.size
        if m == 0:
            return
        self.lo = min(self.lo, float(g.min()))
        self.hi = max(self.hi, float(g.max()))
        nonzero = int(np.count_nonzero(g))
        self.zeros += m - nonzero
        u = self._bufs(m)[1].view(np.uint64)
        np.right_shift(g.view(np.uint64), np.uint64(52), out=u)
        np.bitwise_and(u, np.uint64(0x7FF), out=u)  # biased exponent field; 0 for zeros
        self.exp_sum += float(u.sum()) - 1023.0 * nonzero
        self.nonzero += nonzero
        s = float(g.sum())
        self.sumsq += float(_dot(g, g))
        mean_b = s / m
        np.subtract(g, mean_b, out=g)
        m2_b = float(_dot(g, g))
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

    def histogram(self, blocks: Iterable[np.ndarray], bins: int) -> tuple[np.ndarray, np.ndarray, bool]:
        typical = _typical_from_exponents(self.exp_sum, self.nonzero)
        edges, log = _choose_edges(self.lo, self.hi, typical, bins)
        nb = len(edges) - 1
        counts = np.zeros(nb, dtype=np.int64)
        if self.lo == self.hi:
            counts[0] = self.nfin
            return edges, counts, log
        for block in blocks:
            g = self.finite_values(_as_real(block), 0, count=False)
            if g.size == 0:
                continue
            if log:
                idx = _bin_index_exact(g, edges)
            else:
                _, scratch = self._bufs(g.size)
                idx = _bin_index_linear(g, edges, scratch)
            counts += np.bincount(idx, minlength=nb)
        return edges, counts, log


def _as_real(block: np.ndarray) -> np.ndarray:
    if block.dtype.kind == "c":
        return np.abs(block)
    return block


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
         first_bad_n: int, bins: int) -> TensorStats:
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
    gen = _GenericAcc(first_bad_n)
    gen.add(head, off0)
    for piece, off in pieces:
        gen.add(piece, off)
    st = gen.stats(shape, logical or head.dtype.name)
    if gen.nfin:
        again = _iterate_again(source, first)
        if again is not None:
            edges, counts, log = gen.histogram((p for p, _ in _blocks(again, block)), bins)
            st.hist_edges = [float(e) for e in edges]
            st.hist_counts = [int(c) for c in counts]
            st.hist_log = log
    return st


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
    return _run(lambda: _flat_chunks(arr, chunk_elems), shape, logical, block, first_bad_n, bins)


def compute_stats_chunks(chunks: ChunkSource, shape: tuple[int, ...], dtype: Any,
                         first_bad_n: int = 10, bins: int = 32, chunk_elems: int = 1 << 22) -> TensorStats:
    """Statistics of a tensor delivered as C-order chunks (e.g. decoded piece by piece).

    ``dtype`` is the logical dtype (numpy spelling).  Chunks may be decoded values (float32 from
    bf16, …) or raw bit patterns (uint16 chunks with ``dtype="bfloat16"``).  The generic engine
    (32/64-bit values) builds its histogram in a second pass: pass a callable returning a fresh
    iterable, or a re-iterable (list…); with a one-shot iterator the histogram is left empty.
    """
    shape = tuple(int(d) for d in shape)
    block = min(max(1, int(chunk_elems)), _BLOCK)
    return _run(chunks, shape, _logical_name(dtype), block, first_bad_n, bins)


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
