"""compare.verdict: each rule on its own (the table in verdict.py's docstring), in its order.

A pair judged alone is judged as if what it was computed from were exact: beyond 10 × one rounding at
the coarser stored dtype it is an error (inside a compare the walk adds the inputs' error: see
test_compare_precision.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from dumpscope.core.engines.compare import Thresholds, compare_arrays, compare_stats
from dumpscope.core.engines.compare.verdict import element_rtol, judge_value


def test_rule1_a_float_dtype_difference_is_judged_at_the_coarser_not_an_error():
    g = np.array([1.0, 2.0, 3.0], np.float32)
    r = compare_arrays(g, g.astype(np.float16))
    assert r.verdict == "pass" and r.cosine == 1.0
    bf = compare_arrays(g * 1.001, g.astype(ml_dtypes.bfloat16))  # 0.1 % is a quarter of one bf16 rounding
    assert bf.verdict == "pass" and "bfloat16 rounding 2^-8" in bf.rule
    assert compare_arrays(g * 1.001, g).verdict == "error"  # the same 0.1 % in float32 is not rounding


def test_rule1_kinds_and_integer_widths_differ():
    g = np.array([1, 2, 3], np.int64)
    assert compare_arrays(g, g.astype(np.int32)).rule == "dtype int64 vs int32"
    assert compare_arrays(g.astype(np.float32), g).verdict == "error"


def test_rule2_shape_mismatch():
    r = compare_arrays(np.zeros((2, 3)), np.zeros(5))
    assert (r.verdict, r.rule) == ("error", "shape (2,3) vs (5)") and r.cosine is None
    x = np.arange(6.0).reshape(2, 3)
    other = compare_arrays(x, x.reshape(3, 2) * 2)
    assert other.verdict == "error" and other.rule.startswith("shape (2,3) vs (3,2); rel err 1 > ")


def test_rule2_same_values_in_another_shape_is_a_warning():
    """MindSpore 2.10 dumps a Flatten output in its input's shape, 2.7 flat: a view, not a divergence."""
    x = np.arange(32.0).reshape(2, 2, 2, 4)
    r = compare_arrays(x, x.reshape(2, 16))
    assert (r.verdict, r.rule) == ("warning", "shape (2,2,2,4) vs (2,16): the same values in another shape")


def test_rule3_nan_only_in_target():
    g = np.ones(8, np.float32)
    t = g.copy()
    t[3] = np.nan
    r = compare_arrays(g, t)
    assert (r.verdict, r.rule) == ("error", "nan only in target (1 elements)")


def test_rule4_argument_and_constant_values_are_compared_exactly_not_by_cosine():
    g, t = np.array(1e-5, np.float32), np.array(0.5, np.float32)
    r = compare_arrays(g, t, kind="scalar")
    assert r.cosine == 1.0  # the cosine of two positive scalars says nothing
    assert (r.verdict, r.rule) == ("error", "argument changed: 1e-05 → 0.5")
    assert compare_arrays(g, g.copy(), kind="scalar").verdict == "pass"
    assert compare_arrays(np.array([2.0]), np.array([2.0 + 1e-12]), kind="scalar").verdict == "error"


def test_a_computed_one_element_tensor_is_judged_at_its_precision():
    loss = compare_arrays(np.array(2.248174, np.float32), np.array(2.2659245, np.float32))
    assert loss.verdict == "error" and loss.rule.startswith("rel err 0.00789")
    assert compare_arrays(np.array([1.0]), np.array([-1.0])).verdict == "error"
    close = compare_arrays(np.array(2.248174, np.float32), np.array(2.2481742, np.float32))
    assert close.verdict == "pass"
    bf = compare_arrays(np.array(2.248174, np.float32), np.array(2.25, ml_dtypes.bfloat16))
    assert bf.verdict == "pass"


def test_judge_value_for_non_tensor_arguments():
    assert judge_value(1e-5, 0.5) == ("error", "argument changed: 1e-05 → 0.5")
    assert judge_value(False, False)[0] == "pass"
    assert judge_value(None, None)[0] == "pass"
    assert judge_value([1, None, 3], [1, None, 3])[0] == "pass"
    assert judge_value([1, 2], [1, 3]) == ("error", "argument changed: [1, 2] → [1, 3]")
    assert judge_value("mean", "sum") == ("error", "argument changed: 'mean' → 'sum'")
    assert judge_value(1, True)[0] == "error"  # a bool is not the number 1
    assert judge_value(2, 2.0)[0] == "pass"


def test_rule5_allclose_replaces_the_precision_rule():
    g = np.ones(100)
    t = g * 1.5  # every element moved: an error by default
    loose = compare_arrays(g, t, Thresholds(rtol=0.6))
    assert loose.verdict == "pass" and loose.rule.startswith("pass (allclose")
    tight = compare_arrays(g, g + 1e-9, Thresholds(atol=1e-12))
    assert tight.verdict == "error" and tight.rule.startswith("allclose: 100 of 100 elements")


def test_rule6_near_zero_gradient_is_noise_against_the_size_of_its_inputs():
    rng = np.random.default_rng(0)
    g = (rng.standard_normal(64) * 1e-10).astype(np.float32)
    t = (rng.standard_normal(64) * 1e-10).astype(np.float32)
    # judged against the size of what it was computed from (~1): 1e-10 is far below float32 rounding there
    r = compare_arrays(g, t, magnitude=1.0)
    assert r.cosine < 0.9 and r.verdict == "pass" and "within float32 rounding of its inputs' size 1" in r.rule
    # on its own scale the same difference is everything: the context is what makes it noise
    assert compare_arrays(g, t).verdict == "error"


def test_rule6_a_change_of_scale_is_an_error_although_cosine_is_one():
    rng = np.random.default_rng(1)
    g = rng.standard_normal(512).astype(np.float32)
    scaled = compare_arrays(g, g * np.float32(2.0))
    assert scaled.cosine == pytest.approx(1.0, abs=1e-7) and scaled.verdict == "error"
    assert scaled.rule.startswith("rel err 1 > 10 × float32 rounding")
    shifted = compare_arrays(g, g + np.float32(0.05))  # an offset: cosine 0.9988
    assert shifted.cosine > 0.99 and shifted.verdict == "error"


def test_rule6_one_element_far_off_is_an_error_whatever_the_cosine():
    g = np.linspace(1, 2, 100_000).astype(np.float32)
    t = g.copy()
    t[7] = 3.0  # one element in 100k: norm-wise 0.1 %, far beyond float32 rounding for that element
    r = compare_arrays(g, t)
    assert r.verdict == "error" and r.cosine > 0.999
    bf = compare_arrays(g, t.astype(ml_dtypes.bfloat16))
    assert bf.verdict == "error" and bf.rule.startswith("max element rel err")


@pytest.mark.parametrize("dtype,u", [(np.float32, 2.0 ** -24), (np.float16, 2.0 ** -11), ("bfloat16", 2.0 ** -8)])
def test_rounding_noise_passes_and_ten_roundings_do_not(dtype, u):
    rng = np.random.default_rng(2)
    g = rng.standard_normal(4096)
    dt = getattr(ml_dtypes, dtype) if isinstance(dtype, str) else dtype
    assert compare_arrays(g, g.astype(dt)).verdict == "pass"
    assert compare_arrays(g, (g * (1 + 30 * u)).astype(dt)).verdict == "error"


def test_element_tolerances_by_dtype():
    assert element_rtol("float32", "float32") == 1e-3
    assert element_rtol("float16", "float32") == 5e-3
    assert element_rtol("bfloat16", "bfloat16") == pytest.approx(4 * 2 ** -7)
    assert element_rtol("int64", "int64") == 0.0


# ---- statistics-only pairs -----------------------------------------------------------------


def test_stats_rules():
    g = {"Max": 2.0, "Min": -1.0, "Mean": 0.001, "Norm": 10.0, "dtype": "float32", "shape": [4, 8]}
    same = compare_stats(g, dict(g))
    assert (same.verdict, same.rule) == ("pass", "pass (identical statistics)")
    err = compare_stats(g, dict(g, Norm=8.2))  # a LayerNorm epsilon 1e-5 -> 0.5 shrinks the norm ~18 %
    assert err.verdict == "error" and err.rule.startswith("rel err 0.18 > 10 × float32 rounding")
    bf16 = dict(g, dtype="bfloat16")
    assert compare_stats(g, dict(bf16, Norm=10.02)).verdict == "pass"  # 0.2 %: half a bf16 rounding
    assert compare_stats(g, dict(bf16, Norm=11.0)).verdict == "error"  # the 10 % norm change
    nan = compare_stats(dict(g, nan=0), dict(g, nan=3))
    assert (nan.verdict, nan.rule) == ("error", "nan only in target")
    inf = compare_stats(g, dict(g, Max=float("inf")))
    assert inf.verdict == "error" and "max" in inf.rule
    dt = compare_stats(g, dict(g, dtype="int32"))
    assert (dt.verdict, dt.rule) == ("error", "dtype float32 vs int32")
    shp = compare_stats({"shape": "2x3", "max": 1}, {"shape": [3, 2], "max": 1})
    assert shp.rule == "shape (2,3) vs (3,2): the same values in another shape"
    shp = compare_stats({"shape": "2x3", "max": 1}, {"shape": [3, 2], "max": 2})
    assert shp.verdict == "error" and shp.rule.startswith("shape (2,3) vs (3,2); rel err")
    assert compare_stats({"shape": "2x3", "max": 1}, {"shape": [7], "max": 1}).verdict == "error"


def test_stats_near_zero_is_judged_against_its_inputs_size():
    g = {"Max": 1e-10, "Min": -1e-10, "Norm": 3e-10, "dtype": "float32", "shape": [8]}
    t = {"Max": 2e-10, "Min": -3e-10, "Norm": 5e-10, "dtype": "float32", "shape": [8]}
    assert compare_stats(g, t, magnitude=1.0).verdict == "pass"
    assert compare_stats(g, t).verdict == "error"


def test_stats_scalar_value():
    g = {"Max": 1e-5, "Min": 1e-5, "Mean": 1e-5, "Norm": 1e-5, "dtype": "float32", "shape": []}
    t = {"Max": 0.5, "Min": 0.5, "Mean": 0.5, "Norm": 0.5, "dtype": "float32", "shape": []}
    r = compare_stats(g, t, kind="scalar")
    assert (r.verdict, r.rule) == ("error", "argument changed: 1e-05 → 0.5")


def test_fixed_verdict_says_what_the_fixed_rules_say_one_by_one():
    """``fixed_verdict`` answers the common case at once (a measured tensor pair no fixed rule decides): on
    records of every kind of dtype pair, shape, NaN/Inf count, row kind and --rtol/--atol, it says what
    the rules say tried one by one in their order."""
    import random

    from dumpscope.core.engines.compare.metrics import CompareResult
    from dumpscope.core.engines.compare.verdict import FIXED_RULES, Context, fixed_verdict, rule_stats_empty

    rng = random.Random(7)
    dtypes = ["float32", "float16", "bfloat16", "int32", "int64", "bool", "complex64", "", "void", "float8_e4m3fn"]
    shapes = [(2, 3), (3, 2), (6,), [2, 3], ()]
    seen = set()
    for _ in range(3000):
        g, t = rng.choice(dtypes), rng.choice(dtypes)
        stats = rng.random() < 0.2
        r = CompareResult("", "", rng.choice(shapes), rng.choice(shapes), g, t, count=rng.choice([0, 6]),
                          nonfinite_mismatch=rng.choice([0, 0, 2]), allclose_failed=rng.choice([None, 0, 3]),
                          stat_diffs=({"max": rng.choice([0.0, 1.0])} if rng.random() < 0.5 else {}) if stats else None,
                          golden_stats={"max": 1.0}, target_stats={"max": rng.choice([1.0, 2.0])},
                          extra=rng.choice([{}, {"shapes_known": False}]))
        th = Thresholds(*rng.choice([(None, None), (1e-3, None), (None, 1e-4)]))
        ctx = Context(th, kind=rng.choice(["tensor", "scalar", "parameter"]))
        rules = FIXED_RULES + ((rule_stats_empty,) if stats else ())
        want = next((v for v in (rule(r, ctx) for rule in rules) if v is not None), None)
        assert fixed_verdict(r, ctx) == want
        seen.add(want is None)
    assert seen == {True, False}
