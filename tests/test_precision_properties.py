"""Properties of judging at the run's precision (issue 28), on real tensors.

Real float32 tensors (activations, weights, gradients) from the golden run of
tests/data/real_precision_pairs.tar.gz; hypothesis picks the tensor, the format and the scale:
* rounding to bfloat16/float16/float8 never makes a divergence, alone or through a chain of ops;
* one element moved well beyond the precision always does, and the walk names that op;
* scaling both sides by a power of two changes no verdict.
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import unpack_data
from dumpscope.core.engines.compare import compare_arrays
from dumpscope.core.engines.compare.metrics import measure_arrays
from dumpscope.core.engines.compare.origin import OpFacts, RowFacts, Walk, first_divergence
from dumpscope.core.engines.compare.precision import error_of, judged_dtype, unit_roundoff
from dumpscope.core.formats.pt_reader import load_pt

#: format -> (numpy dtype, the magnitudes its normal numbers hold comfortably: rms kept inside)
FORMATS = {
    "bfloat16": (ml_dtypes.bfloat16, (2.0 ** -60, 2.0 ** 60)),
    "float16": (np.float16, (2.0 ** -8, 2.0 ** 8)),
    "float8_e4m3fn": (ml_dtypes.float8_e4m3fn, (2.0 ** -2, 2.0 ** 2)),
    "float8_e5m2": (ml_dtypes.float8_e5m2, (2.0 ** -4, 2.0 ** 4)),
}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def tensors(tmp_path_factory) -> list[np.ndarray]:
    root = unpack_data(tmp_path_factory, "real_precision_pairs") / "tiny_cnn" / "tensor" / "fp32"
    out = []
    for p in sorted(Path(root).glob("step0/*/dump_tensor_data/*.pt")):
        a = np.asarray(load_pt(str(p)), dtype=np.float64).reshape(-1)
        if a.size >= 16 and a.dtype.kind == "f" and np.isfinite(a).all() and np.sqrt(np.mean(a * a)) > 0:
            out.append(a.astype(np.float32))
    assert len(out) >= 20
    return out


def _scaled_into(x: np.ndarray, fmt: str, k: int) -> np.ndarray:
    """x times a power of two that puts its RMS inside the format's comfortable range (k picks where)."""
    lo, hi = FORMATS[fmt][1]
    rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))
    span = int(np.log2(hi / lo))
    target = lo * 2.0 ** (k % max(span, 1))
    return (x.astype(np.float64) * 2.0 ** round(np.log2(target / rms))).astype(np.float32)


@SETTINGS
@given(i=st.integers(0, 10_000), fmt=st.sampled_from(list(FORMATS)), k=st.integers(0, 200))
def test_rounding_to_a_coarser_format_is_never_a_divergence(tensors, i, fmt, k):
    x = _scaled_into(tensors[i % len(tensors)], fmt, k)
    dt = FORMATS[fmt][0]
    r = compare_arrays(x, x.astype(dt))
    assert r.verdict == "pass", (fmt, r.rule)
    if fmt != "bfloat16":  # both sides rounded: a bfloat16 golden (it holds every format's range)
        both = compare_arrays(x.astype(ml_dtypes.bfloat16), x.astype(dt))
        assert both.verdict == "pass", (fmt, both.rule)


@SETTINGS
@given(i=st.integers(0, 10_000), fmt=st.sampled_from(["float32"] + list(FORMATS)), j=st.integers(0, 1 << 30),
       k=st.integers(0, 200), sign=st.sampled_from([-1.0, 1.0]))
def test_one_element_well_beyond_the_precision_is_always_a_divergence(tensors, i, fmt, j, k, sign):
    x = tensors[i % len(tensors)] if fmt == "float32" else _scaled_into(tensors[i % len(tensors)], fmt, k)
    dt = np.float32 if fmt == "float32" else FORMATS[fmt][0]
    u = unit_roundoff(fmt)
    y = x.astype(dt).astype(np.float64)
    rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))
    at = j % x.size
    y[at] += sign * 100 * u * (abs(float(x[at])) + rms)  # ten times the line (10 roundings)
    r = compare_arrays(x, y.astype(np.float32) if fmt == "float32" else y)
    if fmt != "float32":  # the target ran in the coarse format: it is judged there
        r = compare_arrays(x, y.astype(dt)) if np.isfinite(y.astype(dt).astype(np.float64)).all() else r
    assert r.verdict == "error", (fmt, r.rule)


@SETTINGS
@given(i=st.integers(0, 10_000), fmt=st.sampled_from(list(FORMATS)), noise=st.floats(0.0, 40.0),
       p=st.integers(-6, 6))
def test_scaling_both_sides_by_a_power_of_two_changes_no_verdict(tensors, i, fmt, noise, p):
    x = _scaled_into(tensors[i % len(tensors)], fmt, 3).astype(np.float64)
    u = unit_roundoff(fmt)
    rng = np.random.default_rng(i)
    y = x * (1 + noise * u * rng.standard_normal(x.size))
    a = compare_arrays(x, y, magnitude=0.0)
    b = compare_arrays(x * 2.0 ** p, y * 2.0 ** p)
    assert (a.verdict, a.rule.split(" (")[0]) == (b.verdict, b.rule.split(" (")[0])


def _chain(tensors: list[np.ndarray], fmt: str, n: int, bad: int | None) -> list[OpFacts]:
    """n ops in a chain, each output the next op's input; the target ran in ``fmt``; op ``bad`` (if any)
    computes one element wrong by a hundred roundings."""
    dt = FORMATS[fmt][0]
    u = unit_roundoff(fmt)
    ops, prev = [], None
    for k in range(n):
        g = _scaled_into(tensors[k % len(tensors)], fmt, k)
        t = g.astype(dt).astype(np.float64)
        if k == bad:
            t[k % t.size] += 100 * u * (abs(float(g[k % g.size])) + float(np.sqrt(np.mean(g.astype(np.float64) ** 2))))
        rows = []
        if prev is not None:
            rows.append(_facts("input", 0, *prev))
        res = (g, t, fmt)
        rows.append(_facts("output", 0, *res))
        ops.append(OpFacts(f"op{k}", rows, type="Mul"))
        prev = res
    return ops


def _facts(io: str, slot: int, g: np.ndarray, t: np.ndarray, fmt: str) -> RowFacts:
    r = measure_arrays(g, t)
    r.golden_dtype, r.target_dtype = "float32", fmt
    dt = judged_dtype("float32", fmt)
    f = RowFacts(io, slot, "pass", err=error_of(r), u=unit_roundoff(dt), dtype=dt)
    f.key = (r.count, r.golden_stats["max"], r.golden_stats["min"], r.target_stats["max"], r.target_stats["min"])
    f.sig = tuple(s[k] for s in (r.golden_stats, r.target_stats) for k in ("mean", "l2norm"))
    return f


@SETTINGS
@given(fmt=st.sampled_from(list(FORMATS)), n=st.integers(2, 12), bad=st.integers(0, 11), clean=st.booleans())
def test_the_walk_finds_the_one_bad_op_in_a_chain_of_rounded_ops(tensors, fmt, n, bad, clean):
    ops = _chain(tensors, fmt, n, None if clean else bad % n)
    walk = Walk()
    origins = [walk.judge(op) for op in ops]
    fd = first_divergence(ops, origins)
    erred = [k for k, x in enumerate(ops) if any(r.verdict != "pass" for r in x.rows)]
    assert first_divergence(ops, origins, erred) == fd  # (compare's way: only where a row did not pass)
    if clean:
        assert fd is None, [(o.name, r.rule) for o in ops for r in o.rows if r.verdict != "pass"]
    else:
        assert fd is not None and ops[fd.op].name == f"op{bad % n}" and origins[fd.op].kind == "born"
