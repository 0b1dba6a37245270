"""compare.metrics: metrics against independent float64 formulas, edge cases (verdicts: test_compare_verdict)."""

from __future__ import annotations

import math
import pickle
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dumpscope.core.engines.compare.metrics as cm
from dumpscope.core.engines.compare import (
    ROW_KEYS,
    CompareResult,
    Thresholds,
    compare_arrays,
    compare_stats,
    to_row,
)


def truth(golden, target) -> dict:
    """The msprobe formulas, element by element in Python floats (finite pairs only)."""
    gd = np.asarray(golden)
    eps = float(np.finfo(gd.dtype).eps) if gd.dtype.kind == "f" else float(np.finfo(np.float64).eps)
    gs = [float(x) for x in gd.ravel()]
    ts = [float(x) for x in np.asarray(target).ravel()]
    pairs = [(g, t) for g, t in zip(gs, ts) if math.isfinite(g) and math.isfinite(t)]
    sgt = math.fsum(g * t for g, t in pairs)
    ng = math.sqrt(math.fsum(g * g for g, _ in pairs))
    nt = math.sqrt(math.fsum(t * t for _, t in pairs))
    if ng == 0 and nt == 0:
        cos = 1.0
    elif ng == 0 or nt == 0:
        cos = 0.0
    else:
        cos = sgt / (ng * nt)
    res = [abs(t - g) / (abs(g) if g != 0 else eps) for g, t in pairs]
    return {
        "cosine": cos,
        "euc_dist": math.sqrt(math.fsum((t - g) ** 2 for g, t in pairs)),
        "max_abs_err": max(abs(t - g) for g, t in pairs),
        "max_rel_err": max(res),
        "one_thousandth_ratio": sum(r < 0.001 for r in res) / len(res),
        "five_thousandth_ratio": sum(r < 0.005 for r in res) / len(res),
    }


def assert_metrics(r: CompareResult, want: dict, rel: float = 1e-9) -> None:
    for k, v in want.items():
        got = getattr(r, k)
        assert got == pytest.approx(v, rel=rel, abs=1e-12), k


@pytest.fixture
def small_block(monkeypatch):
    """Force many tiny blocks so block and chunk boundaries are exercised."""
    monkeypatch.setattr(cm, "_BLOCK", 5)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "uint8"])
@pytest.mark.parametrize("chunk", [1 << 22, 7])
def test_metrics_match_formulas(dtype, chunk, small_block):
    rng = np.random.default_rng(1)
    if np.dtype(dtype).kind == "f":
        g = rng.standard_normal((6, 11)).astype(dtype)
        t = (g.astype(np.float64) + rng.standard_normal((6, 11)) * 0.003).astype(dtype)
    else:
        g = rng.integers(0, 50, (6, 11)).astype(dtype)
        t = g.copy()
        t[0, :3] += 1
    r = compare_arrays(g, t, chunk_elems=chunk)
    assert r.count == g.size and r.shape == (6, 11) and r.golden_dtype == dtype
    assert_metrics(r, truth(g, t))


def test_mixed_dtypes_and_bool():
    g = np.array([True, False, True, True])
    t = np.array([1.0, 0.0, 0.0, 1.0], np.float32)
    r = compare_arrays(g, t)
    assert_metrics(r, truth(g, t))
    assert r.max_abs_err == 1.0 and r.verdict == "error"  # cosine 0.816 < 0.9


def test_zero_handling():
    eps32 = float(np.finfo(np.float32).eps)
    z = np.zeros(5, np.float32)
    both = compare_arrays(z, z)
    assert both.cosine == 1.0 and both.max_rel_err == 0.0 and both.one_thousandth_ratio == 1.0
    assert both.verdict == "pass"
    one = compare_arrays(z, np.array([0, 0, 1e-4, 0, 0], np.float32))
    assert one.cosine == 0.0
    assert one.max_rel_err == pytest.approx(float(np.float32(1e-4)) / eps32)
    assert one.one_thousandth_ratio == pytest.approx(4 / 5)
    other = compare_arrays(np.array([1, 0, 0], np.float32), z[:3])
    assert other.cosine == 0.0 and other.verdict == "error"


def test_cosine_of_x_with_itself_is_exactly_one():
    rng = np.random.default_rng(3)
    for scale in (1e-30, 1.0, 1e30):
        x = (rng.standard_normal(1000) * scale).astype(np.float32)
        r = compare_arrays(x, x.copy())
        assert r.cosine == 1.0 and r.euc_dist == 0.0 and r.rule == "pass (identical)"


def test_nan_inf_same_positions_pass_and_are_counted(small_block):
    g = np.array([1.0, np.nan, np.inf, -np.inf, 2.0, 3.0], np.float32)
    t = np.array([1.0, np.nan, np.inf, -np.inf, 2.0, np.nextafter(np.float32(3.0), np.float32(4.0))], np.float32)
    r = compare_arrays(g, t)
    assert (r.golden_nan, r.golden_inf, r.target_nan, r.target_inf) == (1, 2, 1, 2)
    assert r.nonfinite_mismatch == 0 and r.count == 3 and r.verdict == "pass"
    assert_metrics(r, truth(g, t))


@pytest.mark.parametrize(
    "tval,rule",
    [(np.nan, "nan only in target"), (np.inf, "inf only in target")],
)
def test_nonfinite_on_one_side_is_error(tval, rule, small_block):
    g = np.arange(1, 13, dtype=np.float32)
    t = g.copy()
    t[7] = tval
    r = compare_arrays(g, t)
    assert r.verdict == "error" and r.rule.startswith(rule) and r.nonfinite_mismatch == 1
    assert r.count == 11 and r.cosine == pytest.approx(1.0)
    back = compare_arrays(t, g)
    assert back.rule.startswith(rule.replace("target", "golden"))


def test_inf_sign_flip_is_error():
    g = np.array([np.inf, 1.0])
    r = compare_arrays(g, np.array([-np.inf, 1.0]))
    assert r.verdict == "error" and "inf" in r.rule and r.nonfinite_mismatch == 1


def test_all_nan_both_sides():
    x = np.full(4, np.nan)
    r = compare_arrays(x, x)
    assert r.verdict == "pass" and r.rule == "pass (no finite elements)" and r.cosine is None


def test_shape_mismatch():
    r = compare_arrays(np.zeros((2, 3)), np.zeros(7))
    assert (r.verdict, r.rule) == ("error", "shape (2,3) vs (7)")
    assert r.cosine is None and r.max_abs_err is None
    # the same number of elements: measured in C order
    x = np.arange(1.0, 7.0)
    same = compare_arrays(x.reshape(2, 3), x[::-1].reshape(3, 2))
    assert_metrics(same, truth(x, x[::-1]))


def test_dtype_class_mismatch():
    r = compare_arrays(np.zeros(3, np.complex64), np.zeros(3, np.float32))
    assert r.verdict == "error" and r.rule.startswith("dtype complex64 vs float32")
    s = compare_arrays(np.array(["a", "b"]), np.array(["a", "b"]))
    assert s.verdict == "error" and "not comparable" in s.rule


def test_complex_as_interleaved_real_imag():
    g = np.array([1 + 2j, 3 - 1j, 0 + 0j], np.complex64)
    t = np.array([1 + 2.01j, 3 - 1j, 0.5 + 0j], np.complex64)
    r = compare_arrays(g, t)
    assert r.count == 6
    assert_metrics(r, truth(g.view(np.float32), t.view(np.float32)))


def test_non_contiguous_and_memmap(tmp_path):
    rng = np.random.default_rng(5)
    base_g = rng.standard_normal((40, 30)).astype(np.float32)
    base_t = base_g + np.float32(0.01) * rng.standard_normal((40, 30)).astype(np.float32)
    want = compare_arrays(np.ascontiguousarray(base_g.T), np.ascontiguousarray(base_t.T))
    got = compare_arrays(base_g.T, base_t.T, chunk_elems=97)
    for k in ROW_KEYS:
        assert getattr(got, k) == pytest.approx(getattr(want, k), rel=1e-12), k
    np.save(tmp_path / "g.npy", base_g)
    np.save(tmp_path / "t.npy", base_t)
    mg = np.load(tmp_path / "g.npy", mmap_mode="r")
    mt = np.load(tmp_path / "t.npy", mmap_mode="r")
    assert_metrics(compare_arrays(mg, mt, chunk_elems=256), truth(base_g, base_t))


def test_bfloat16_uses_its_eps():
    import ml_dtypes

    g = np.array([0.0, 1.0, 2.0], ml_dtypes.bfloat16)
    t = np.array([0.5, 1.0, 2.0], ml_dtypes.bfloat16)
    r = compare_arrays(g, t)
    assert r.max_rel_err == pytest.approx(0.5 / 2**-7)
    assert r.golden_dtype == "bfloat16"


# ---- allclose counting ------------------------------------------------------------------


def test_allclose_rule_counts_failures():
    rng = np.random.default_rng(9)
    g = rng.standard_normal(500)
    t = g + rng.standard_normal(500) * 1e-4
    th = Thresholds(rtol=1e-4, atol=1e-5)
    want = int(np.sum(np.abs(t - g) > 1e-5 + 1e-4 * np.abs(g)))
    r = compare_arrays(g, t, th)
    assert 0 < want and r.allclose_failed == want
    assert r.verdict == "error" and r.rule.startswith(f"allclose: {want} of 500 elements")
    ok = compare_arrays(g, t, Thresholds(atol=1e-2))
    assert ok.allclose_failed == 0 and ok.verdict == "pass"
    assert compare_arrays(g, t).allclose_failed is None


# ---- rows, pickling, processes ---------------------------------------------------------


def test_to_row_keys_exact():
    row = to_row(compare_arrays(np.ones(3), np.ones(3)))
    assert tuple(row) == ROW_KEYS
    assert set(row) == {
        "cosine", "euc_dist", "max_abs_err", "max_rel_err", "one_thousandth_ratio",
        "five_thousandth_ratio", "verdict", "rule",
    }
    assert to_row(compare_arrays(np.ones(2), np.ones(3)))["cosine"] is None


def test_picklable_and_runs_in_process_pool():
    th = Thresholds(rtol=0.1)
    r = compare_arrays(np.ones(4), np.ones(4), th)
    assert pickle.loads(pickle.dumps(r)) == r
    assert pickle.loads(pickle.dumps(th)) == th
    with ProcessPoolExecutor(1, mp_context=get_context("fork")) as ex:
        got = ex.submit(compare_arrays, np.arange(5.0), np.arange(5.0), th).result()
    assert got.verdict == "pass" and got.cosine == 1.0


# ---- properties --------------------------------------------------------------------------

finite32 = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=1, max_dims=3, max_side=9),
    elements=st.floats(-1e6, 1e6, width=32),
)


@settings(max_examples=60, deadline=None)
@given(finite32)
def test_self_compare_is_pass(x):
    r = compare_arrays(x, x.copy())
    assert r.verdict == "pass" and r.cosine == 1.0
    assert r.max_abs_err == 0.0 and r.max_rel_err == 0.0 and r.euc_dist == 0.0
    assert r.one_thousandth_ratio == 1.0 and r.five_thousandth_ratio == 1.0


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_symmetric_metrics(data):
    g = data.draw(finite32)
    t = data.draw(hnp.arrays(np.float32, g.shape, elements=st.floats(-1e6, 1e6, width=32)))
    a, b = compare_arrays(g, t), compare_arrays(t, g)
    for k in ("cosine", "euc_dist", "max_abs_err"):
        assert getattr(a, k) == pytest.approx(getattr(b, k), rel=1e-12, abs=1e-300), k
    assert_metrics(a, truth(g, t), rel=1e-9)
