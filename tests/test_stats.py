"""compute_stats / compute_stats_chunks against an independent float64 numpy reference."""

from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dumpscope.core.tensors.stats import TensorStats, compute_stats, compute_stats_chunks
from dumpscope.core.tensors.stats_record import stats_from_row

CLI_KEYS = {"count", "min", "max", "mean", "std", "l2norm", "zeros", "nan", "posinf", "neginf"}


def reference(values: np.ndarray) -> dict:
    """Ground truth: float64 values of the logical tensor, reduced directly."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    fin = x[np.isfinite(x)]
    ref = {"count": x.size, "nan": int(np.isnan(x).sum()), "posinf": int((x == np.inf).sum()),
           "neginf": int((x == -np.inf).sum()), "zeros": int((x == 0).sum())}
    if fin.size:
        ref.update(min=fin.min(), max=fin.max(), mean=fin.mean(), std=fin.std(), l2norm=math.sqrt(np.sum(fin * fin)))
    else:
        ref.update(min=None, max=None, mean=None, std=None, l2norm=None)
    return ref


def check(st: TensorStats, values: np.ndarray, rtol: float = 1e-9) -> None:
    ref = reference(values)
    for k in ("count", "nan", "posinf", "neginf", "zeros"):
        assert getattr(st, k) == ref[k], k
    for k in ("min", "max"):
        assert getattr(st, k) == ref[k], k
    for k in ("mean", "std", "l2norm"):
        if ref[k] is None:
            assert getattr(st, k) is None
        else:
            assert getattr(st, k) == pytest.approx(ref[k], rel=rtol, abs=1e-12 * (1 + abs(ref["max"] or 0))), k
    nfin = ref["count"] - ref["nan"] - ref["posinf"] - ref["neginf"]
    if nfin:
        assert sum(st.hist_counts) == nfin
        edges = np.asarray(st.hist_edges)
        assert np.all(np.diff(edges) >= 0)
        assert edges[0] <= ref["min"] and edges[-1] >= ref["max"]
        x = np.asarray(values, dtype=np.float64).reshape(-1)
        fin = x[np.isfinite(x)]
        if len(edges) > 2 or edges[0] != edges[-1]:
            expect, _ = np.histogram(fin, bins=edges)
            assert st.hist_counts == expect.tolist()


def first_bad_ref(values: np.ndarray, n: int) -> list[tuple[int, ...]]:
    x = np.asarray(values, dtype=np.float64)
    return [tuple(int(i) for i in ix) for ix in np.argwhere(~np.isfinite(x))[:n]]


def with_specials(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    flat = x.reshape(-1)
    for val in (np.nan, np.inf, -np.inf, 0.0):
        flat[rng.integers(0, flat.size, 3)] = val
    return x


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("chunk", [5, 64, 1 << 22])
def test_float_with_specials(dtype: str, chunk: int) -> None:
    rng = np.random.default_rng(1)
    x = with_specials((rng.standard_normal((6, 7, 9)) * 3).astype(dtype), rng)
    st = compute_stats(x, chunk_elems=chunk, first_bad_n=4)
    check(st, x, rtol=1e-9)
    assert st.first_bad == first_bad_ref(x, 4)
    assert st.dtype == dtype and st.shape == (6, 7, 9)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "int64", "uint32", "bool"])
def test_integers_and_bool(dtype: str) -> None:
    rng = np.random.default_rng(2)
    info = np.iinfo(dtype) if dtype != "bool" else None
    if info is None:
        x = rng.integers(0, 2, size=(40, 13)).astype(bool)
    else:
        x = rng.integers(max(info.min, -10**6), min(info.max, 10**6), size=(40, 13), endpoint=True).astype(dtype)
    st = compute_stats(x, chunk_elems=37)
    check(st, x)
    assert st.first_bad == []


def test_complex_is_magnitude() -> None:
    rng = np.random.default_rng(3)
    z = (rng.standard_normal(500) + 1j * rng.standard_normal(500)).astype(np.complex64)
    z[7] = complex(np.nan, 0)
    st = compute_stats(z, chunk_elems=64)
    check(st, np.abs(z))
    assert st.first_bad == [(7,)]


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_ml_dtypes_arrays_exact(name: str) -> None:
    rng = np.random.default_rng(4)
    dt = getattr(ml_dtypes, name)
    vals = rng.standard_normal((33, 17)).astype(np.float32) * 4
    vals[0, 3] = np.nan
    if name != "float8_e4m3fn":
        vals[2, 2] = np.inf
    x = vals.astype(dt)
    st = compute_stats(x, chunk_elems=50)
    check(st, x.astype(np.float64))
    assert st.first_bad == first_bad_ref(x.astype(np.float64), 10)


def test_raw_bits_with_logical_dtype() -> None:
    rng = np.random.default_rng(5)
    vals = rng.standard_normal(10_000).astype(np.float32)
    vals[123] = -np.inf
    bits = vals.astype(ml_dtypes.bfloat16).view(np.uint16)
    st = compute_stats(bits, dtype="bfloat16", chunk_elems=999)
    truth = bits.view(ml_dtypes.bfloat16).astype(np.float64)
    check(st, truth)
    assert st.dtype == "bfloat16" and st.first_bad == [(123,)]
    # fp8 bits as uint8
    b8 = vals.astype(ml_dtypes.float8_e5m2).view(np.uint8)
    check(compute_stats(b8, dtype="float8_e5m2"), b8.view(ml_dtypes.float8_e5m2).astype(np.float64))


def test_non_contiguous_views() -> None:
    rng = np.random.default_rng(6)
    base = with_specials(rng.standard_normal((20, 30, 4)).astype(np.float32), rng)
    for view in (base.T, base[::3, 1::2], np.asfortranarray(base), base[:, :, 1]):
        st = compute_stats(view, chunk_elems=11, first_bad_n=50)
        check(st, view)
        assert st.first_bad == first_bad_ref(view, 50)
    half = base.astype(np.float16)
    check(compute_stats(half.transpose(2, 0, 1), chunk_elems=7), half.transpose(2, 0, 1))


def test_memmap(tmp_path) -> None:
    rng = np.random.default_rng(7)
    x = with_specials(rng.standard_normal(300_000).astype(np.float16), rng)
    p = tmp_path / "t.bin"
    x.tofile(p)
    mm = np.memmap(p, dtype=np.float16, mode="r", shape=(300, 1000))
    st = compute_stats(mm, chunk_elems=1 << 16)
    check(st, x.reshape(300, 1000))
    assert st.first_bad == first_bad_ref(x.reshape(300, 1000), 10)


def test_large_mean_small_std_is_stable() -> None:
    rng = np.random.default_rng(8)
    x = 1e8 + rng.standard_normal(200_000)
    st = compute_stats(x, chunk_elems=1000)
    assert st.std == pytest.approx(np.std(x - 1e8), rel=1e-6)
    assert st.mean == pytest.approx(1e8 + np.mean(x - 1e8), rel=1e-14)


def test_all_nonfinite_empty_and_scalar() -> None:
    x = np.array([np.nan, np.inf, -np.inf, np.nan], dtype=np.float32)
    st = compute_stats(x)
    assert (st.count, st.nan, st.posinf, st.neginf, st.zeros) == (4, 2, 1, 1, 0)
    assert st.min is None and st.mean is None and st.hist_counts == []
    assert st.first_bad == [(0,), (1,), (2,), (3,)]
    e = compute_stats(np.zeros((0, 3), dtype=np.float16))
    assert e.count == 0 and e.min is None
    s = compute_stats(np.array(np.nan, dtype=np.float32))
    assert s.count == 1 and s.first_bad == [()]
    c = compute_stats(np.full(10, 2.5, dtype=np.float32))
    assert c.min == c.max == 2.5 and c.std == 0 and c.hist_counts == [10]


def test_log_histogram_when_range_is_wide() -> None:
    rng = np.random.default_rng(9)
    mags = 10.0 ** rng.uniform(-6, 3, 5000)
    x = (mags * rng.choice([-1, 1], 5000)).astype(np.float32)
    x[:10] = 0
    for arr in (x, x.astype(np.float16), np.abs(x)):
        st = compute_stats(arr, chunk_elems=333, bins=31)
        assert st.hist_log
        check(st, arr)
        edges = np.asarray(st.hist_edges)
        pos = edges[edges > 0]
        ratios = pos[1:] / pos[:-1]
        assert np.allclose(ratios, ratios[0])
    # a big normal sample has values near zero, but its typical magnitude is close to max|x|
    normal = rng.standard_normal(1 << 20)
    for arr in (normal.astype(np.float32), normal.astype(np.float16), np.abs(normal)):
        assert not compute_stats(arr).hist_log


def test_to_json_contract() -> None:
    x = np.array([[1.0, np.nan], [np.inf, 0.0]], dtype=np.float32)
    doc = compute_stats(x).to_json()
    assert CLI_KEYS <= set(doc) and {"histogram", "first_bad"} <= set(doc)
    assert doc["first_bad"] == [[0, 1], [1, 0]]
    assert doc["count"] == 4 and doc["nan"] == 1 and doc["posinf"] == 1 and doc["zeros"] == 1
    text = json.dumps(doc, allow_nan=False)
    assert json.loads(text)["histogram"]["counts"] and isinstance(doc["min"], float)


def _bf16_chunks(bits: np.ndarray, n: int):
    for i in range(0, bits.size, n):
        yield bits[i : i + n]


def test_compute_stats_chunks_bits_and_decoded() -> None:
    rng = np.random.default_rng(10)
    vals = with_specials(rng.standard_normal(5000).astype(np.float32), rng)
    bits = vals.astype(ml_dtypes.bfloat16).view(np.uint16)
    truth = bits.view(ml_dtypes.bfloat16).astype(np.float64).reshape(50, 100)
    a = compute_stats_chunks(_bf16_chunks(bits, 333), (50, 100), "bfloat16", first_bad_n=5)
    check(a, truth)
    assert a.first_bad == first_bad_ref(truth, 5) and a.dtype == "bfloat16"
    decoded = (bits.astype(np.uint32) << 16).view(np.float32)
    b = compute_stats_chunks(lambda: (decoded[i : i + 700] for i in range(0, 5000, 700)), (50, 100), "bfloat16",
                             first_bad_n=5)
    check(b, truth)
    assert b.first_bad == a.first_bad
    one_shot = compute_stats_chunks((decoded[i : i + 700] for i in range(0, 5000, 700)), (50, 100), "bfloat16")
    assert one_shot.hist_counts == [] and one_shot.mean == pytest.approx(b.mean)
    as_list = compute_stats_chunks([decoded[:2500], decoded[2500:]], (50, 100), "bfloat16")
    assert as_list.hist_counts == b.hist_counts


def test_stats_from_row() -> None:
    st = stats_from_row({"max": 2.0, "min": "1", "mean": None, "count": "160000", "nan": 0, "md5": "ab",
                         "l2norm": "nan", "dtype": "float32", "shape": (4, 5)})
    assert st.max == 2.0 and st.min == 1.0 and st.mean is None and st.count == 160000 and st.nan == 0
    assert st.std is None and st.zeros is None and st.shape == (4, 5) and st.dtype == "float32"
    assert math.isnan(st.l2norm)
    doc = st.to_json()
    assert doc["l2norm"] is None and doc["count"] == 160000
    assert stats_from_row({"Avg": "1.5"}).mean == 1.5


def test_rejects_non_numeric() -> None:
    with pytest.raises(ValueError):
        compute_stats(np.array(["a", "b"]))


@settings(max_examples=60, deadline=None)
@given(
    arr=hnp.arrays(
        dtype=st.sampled_from([np.float16, np.float32, np.float64]),
        shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=12),
        elements=st.floats(allow_nan=True, allow_infinity=True, width=16),
    ),
    chunk=st.integers(1, 50),
)
def test_fuzz_against_reference(arr: np.ndarray, chunk: int) -> None:
    st_ = compute_stats(arr, chunk_elems=chunk, first_bad_n=3)
    check(st_, arr, rtol=1e-9)
    assert st_.first_bad == first_bad_ref(arr, 3)
