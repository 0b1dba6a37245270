"""The fast paths of the 32/64-bit float engine in core/tensors/stats.py against numpy float64 ground truth.

Covers: sub-blocks with and without NaN/Inf (the min/max trigger for the masked path), the shifted
moments and their re-centring guard, the exact-threshold linear histogram (incl. the pre-scaled map
for ranges near the float limits and the integer-clip), the table-driven log histogram, ints,
complex, mixed chunk dtypes, empty / single / all-equal tensors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dumpscope.core.tensors import stats_float as F
from dumpscope.core.tensors.stats import compute_stats, compute_stats_chunks
from dumpscope.core.tensors.stats_record import TensorStats

SUB = F._FSUB


def truth(values: np.ndarray) -> dict:
    x = np.asarray(values).reshape(-1)
    if x.dtype.kind == "c":
        x = np.abs(x)
    x = x.astype(np.float64)
    fin = x[np.isfinite(x)]
    out = {"count": x.size, "nan": int(np.isnan(x).sum()), "posinf": int((x == np.inf).sum()),
           "neginf": int((x == -np.inf).sum()), "zeros": int((x == 0).sum()), "fin": fin}
    if fin.size:
        out.update(min=fin.min(), max=fin.max(), mean=fin.mean(), std=fin.std(),
                   l2norm=math.sqrt(np.sum(fin * fin)))
    return out


def check(st: TensorStats, values: np.ndarray, rtol: float = 1e-9) -> None:
    ref = truth(values)
    for k in ("count", "nan", "posinf", "neginf", "zeros"):
        assert getattr(st, k) == ref[k], k
    fin = ref["fin"]
    if not fin.size:
        assert st.min is None and st.mean is None and st.hist_counts == []
        return
    assert st.min == ref["min"] and st.max == ref["max"]
    scale = max(abs(ref["min"]), abs(ref["max"]))
    for k in ("mean", "std", "l2norm"):
        assert getattr(st, k) == pytest.approx(ref[k], rel=rtol, abs=1e-12 * scale), k
    edges = np.asarray(st.hist_edges)
    assert sum(st.hist_counts) == fin.size
    assert np.all(np.diff(edges) >= 0)
    assert edges[0] == ref["min"] and edges[-1] == ref["max"] or st.hist_log
    assert edges[0] <= ref["min"] and edges[-1] >= ref["max"]
    if len(edges) > 2 or edges[0] != edges[-1]:
        expect, _ = np.histogram(fin, bins=edges)
        assert st.hist_counts == expect.tolist()


def bad_ref(values: np.ndarray, n: int) -> list[tuple[int, ...]]:
    x = np.asarray(values)
    x = np.abs(x) if x.dtype.kind == "c" else x
    return [tuple(int(i) for i in ix) for ix in np.argwhere(~np.isfinite(x.astype(np.float64)))[:n]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("chunk", [SUB, SUB + 7, 3 * SUB // 2, 1 << 22])
def test_clean_and_dirty_sub_blocks(dtype: str, chunk: int) -> None:
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(5 * SUB + 123) * 3 + 0.5).astype(dtype)
    # non-finite values only in the 2nd and the last sub-block; zeros everywhere
    x[SUB + 5] = np.nan
    x[SUB + 9] = np.inf
    x[-1] = -np.inf
    x[rng.integers(0, x.size, 50)] = 0
    st = compute_stats(x, chunk_elems=chunk, first_bad_n=5)
    check(st, x)
    assert st.first_bad == bad_ref(x, 5)
    assert not st.hist_log and len(st.hist_counts) == 32


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_whole_sub_block_non_finite(dtype: str) -> None:
    x = np.ones(3 * SUB, dtype=dtype)
    x[:SUB] = np.nan
    x[SUB:2 * SUB:2] = -np.inf
    x[-3:] = [2, 0, -5]
    st = compute_stats(x, first_bad_n=3)
    check(st, x)
    assert st.first_bad == [(0,), (1,), (2,)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_large_offset_small_spread_and_drift(dtype: str) -> None:
    rng = np.random.default_rng(12)
    n = 4 * SUB
    x = (1e4 + rng.standard_normal(n)).astype(dtype)
    check(compute_stats(x), x, rtol=1e-9)
    # blocks with very different means: the running-mean shift would cancel, the guard re-centres
    y = np.concatenate((np.zeros(SUB + 3), 1e6 + rng.standard_normal(2 * SUB))).astype(dtype)
    st = compute_stats(y, chunk_elems=SUB // 2)
    check(st, y, rtol=1e-9)
    z = np.concatenate((1e6 + rng.standard_normal(SUB), rng.standard_normal(SUB))).astype(dtype)
    check(compute_stats(z), z, rtol=1e-9)


def test_magnitudes_near_the_float_limits() -> None:
    f32 = np.finfo(np.float32)
    x = np.array([-f32.max, f32.max, 0.0, 1.0, -1e30, 3e38, f32.tiny, -f32.smallest_subnormal],
                 dtype=np.float32)
    check(compute_stats(np.tile(x, 1000)), np.tile(x, 1000))
    f64 = np.finfo(np.float64)
    y = np.array([-f64.max, f64.max / 2, 0.0, 1.0, -1e300, 1e300], dtype=np.float64)
    st = compute_stats(np.tile(y, 10))
    ref = truth(np.tile(y, 10))
    assert st.min == ref["min"] and st.max == ref["max"] and st.zeros == ref["zeros"]
    edges = np.asarray(st.hist_edges)
    assert sum(st.hist_counts) == ref["fin"].size
    # np.histogram itself overflows on such edges: count with searchsorted (last bin closed)
    idx = np.clip(np.searchsorted(edges, ref["fin"], side="right") - 1, 0, len(edges) - 2)
    assert st.hist_counts == np.bincount(idx, minlength=len(edges) - 1).tolist()
    # subnormal-only data and a range of one ulp
    sub = (np.arange(1, 2000, dtype=np.float64) * float(f32.smallest_subnormal)).astype(np.float32)
    check(compute_stats(sub), sub)
    one = np.array([1.0, np.nextafter(np.float32(1), np.float32(2))] * 500, dtype=np.float32)
    st = compute_stats(one)
    check(st, one)
    assert st.hist_counts[0] == 500 and st.hist_counts[-1] == 500


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_edges_are_near_linspace_and_exact(dtype: str) -> None:
    rng = np.random.default_rng(13)
    x = rng.uniform(-7.3, 11.1, 300_001).astype(dtype)
    for bins in (1, 2, 7, 32, 255, 256, 300, 1000):
        st = compute_stats(x, bins=bins)
        check(st, x)
        assert len(st.hist_counts) == bins
        ideal = np.linspace(float(x.min()), float(x.max()), bins + 1)
        width = ideal[1] - ideal[0]
        assert np.allclose(st.hist_edges, ideal, rtol=0, atol=1e-5 * width + 8 * float(np.spacing(np.abs(ideal).astype(dtype)).max()))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_histogram_paths(dtype: str) -> None:
    rng = np.random.default_rng(14)
    mags = 10.0 ** rng.uniform(-7, 4, 200_000)
    both = (mags * rng.choice([-1, 1], mags.size)).astype(dtype)
    both[:17] = 0
    for arr in (both, np.abs(both), -np.abs(both)):
        st = compute_stats(arr, chunk_elems=70_001, bins=32)
        assert st.hist_log
        check(st, arr)


def test_integers_complex_and_mixed_chunks() -> None:
    rng = np.random.default_rng(15)
    for dt in ("int32", "int64", "uint32", "uint64"):
        info = np.iinfo(dt)
        x = rng.integers(max(info.min, -(2**40)), min(info.max, 2**40), size=SUB + 999, dtype=dt)
        check(compute_stats(x, chunk_elems=50_000), x)
    big = np.array([2**62, -(2**62), 3, 0], dtype=np.int64)
    check(compute_stats(big), big)
    z = (rng.standard_normal(SUB + 5) + 1j * rng.standard_normal(SUB + 5)).astype(np.complex128)
    z[SUB + 1] = complex(np.inf, np.nan)
    st = compute_stats(z, first_bad_n=2)
    check(st, z)
    assert st.first_bad == [(SUB + 1,)]
    a = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000)
    st = compute_stats_chunks(lambda: iter([a, b]), (2000,), "float32")
    check(st, np.concatenate((a.astype(np.float64), b)))


def test_byte_order_and_non_contiguous_chunks() -> None:
    rng = np.random.default_rng(16)
    x = rng.standard_normal(10_000).astype(">f4")
    x[17] = np.nan
    check(compute_stats(x), x.astype(np.float32))
    base = rng.standard_normal(20_000)
    st = compute_stats_chunks(lambda: iter([base[::2][:5000], base[::2][5000:]]), (10_000,), "float64")
    check(st, base[::2])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "complex64"])
def test_empty_single_and_constant(dtype: str) -> None:
    e = compute_stats(np.zeros((0, 4), dtype=dtype))
    assert e.count == 0 and e.min is None and e.hist_counts == []
    one = np.array([3], dtype=dtype)
    st = compute_stats(one)
    check(st, one)
    assert st.hist_counts == [1] and st.std == 0
    c = np.full(2 * SUB + 1, -7, dtype=dtype)
    st = compute_stats(c)
    check(st, c)
    assert st.std == 0 and st.hist_counts == [c.size] and st.hist_edges == [st.min, st.max]
    zeros = np.zeros(SUB + 1, dtype=dtype)
    st = compute_stats(zeros)
    assert st.zeros == zeros.size and st.l2norm == 0 and st.hist_counts == [zeros.size]


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as hst  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402


@settings(max_examples=80, deadline=None)
@given(
    arr=hnp.arrays(
        dtype=hst.sampled_from([np.float32, np.float64]),
        shape=hst.integers(1, 600),
        elements=hst.one_of(
            hst.floats(-2.0**100, 2.0**100, width=32),
            # spelled as float32 holds them, so any hypothesis version accepts them in a float32 array
            hst.sampled_from([float(np.float32(v)) for v in (0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-45, 1.0,
                                                             1.0000001)]),
        ),
    ),
    chunk=hst.integers(1, 700),
    bins=hst.sampled_from([1, 3, 32, 255, 256, 257]),
)
def test_fuzz_full_width_values(arr: np.ndarray, chunk: int, bins: int) -> None:
    st = compute_stats(arr, chunk_elems=chunk, first_bad_n=4, bins=bins)
    ref = truth(arr)
    for k in ("count", "nan", "posinf", "neginf", "zeros"):
        assert getattr(st, k) == ref[k], k
    assert st.first_bad == bad_ref(arr, 4)
    fin = ref["fin"]
    if not fin.size:
        assert st.min is None and st.hist_counts == []
        return
    assert st.min == ref["min"] and st.max == ref["max"]
    scale = max(abs(ref["min"]), abs(ref["max"]))
    assert st.mean == pytest.approx(ref["mean"], rel=1e-9, abs=1e-12 * scale)
    assert st.std == pytest.approx(ref["std"], rel=1e-9, abs=1e-12 * scale)
    assert st.l2norm == pytest.approx(ref["l2norm"], rel=1e-9)
    edges = np.asarray(st.hist_edges)
    assert np.all(np.diff(edges) >= 0) and edges[0] <= ref["min"] and edges[-1] >= ref["max"]
    if len(edges) > 2 or edges[0] != edges[-1]:
        idx = np.clip(np.searchsorted(edges, fin, side="right") - 1, 0, len(edges) - 2)
        assert st.hist_counts == np.bincount(idx, minlength=len(edges) - 1).tolist()
    else:
        assert st.hist_counts == [fin.size]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("lo_hi", [(-3.7, 11.3), (0.1, 0.1000003), (1e6, 1e6 + 513), (-1e-30, 7e-31)])
def test_values_on_and_next_to_the_edges(dtype: str, lo_hi: tuple) -> None:
    t = np.dtype(dtype).type
    lo, hi = t(lo_hi[0]), t(lo_hi[1])
    ideal = np.linspace(float(lo), float(hi), 33).astype(dtype)
    near = np.concatenate((ideal, np.nextafter(ideal, t(np.inf)), np.nextafter(ideal, t(-np.inf))))
    x = np.clip(near, lo, hi).astype(dtype)
    st = compute_stats(np.tile(x, 3), chunk_elems=17)
    check(st, np.tile(x, 3))
    # the reported edges themselves, and their neighbours, land in the right bins too
    e = np.asarray(st.hist_edges).astype(dtype)
    y = np.clip(np.concatenate((e, np.nextafter(e, t(np.inf)), np.nextafter(e, t(-np.inf)))), lo, hi)
    check(compute_stats(y.astype(dtype)), y.astype(dtype))
