"""The session-5 fast paths of the float engine (core/tensors/stats.py) against independent references.

* ``_sums``: float64 ``Σg``/``Σg²`` from per-row BLAS dots — exact to float64 rounding for every size
  around the row length, and the same bits wherever the data sits in memory (threads' scratch);
* the zero shift: a running mean within rms/1000 of 0 skips the subtraction, the guard still
  re-centres a block whose mean is not near 0;
* the exponent sum and zero count from the ``|x|`` bits (subnormals count with the field minimum);
* a tensor whose sub-blocks are each a special case, on threads and not;
* log bins of float64 data whose typical magnitude squared under/overflows (crashed / NaN edges before).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dumpscope.core.tensors import stats as S
from dumpscope.core.tensors import stats_float as F
from dumpscope.core.tensors.stats import compute_stats
from test_stats_speed_paths import check, truth

ROW = F._DOT_ROW


@pytest.mark.parametrize("m", [1, 2, 5, ROW - 1, ROW, ROW + 1, 3 * ROW, 3 * ROW + 17, F._FSUB])
def test_sums_are_exact_to_rounding_for_every_split(m: int) -> None:
    g = np.random.default_rng(m).standard_normal(m) * 1e3 + 7
    s1, s2 = F._sums(g)
    assert s1 == pytest.approx(math.fsum(g), rel=1e-13, abs=1e-9)
    assert s2 == pytest.approx(math.fsum(g * g), rel=1e-13)


def test_sums_do_not_depend_on_where_the_data_sits() -> None:
    g = np.random.default_rng(3).standard_normal(3 * ROW + 5)
    ref = F._sums(g)
    for shift in range(1, 8):  # the same values at every 8-byte offset of a cache line
        raw = np.empty(g.size + shift, np.float64)
        moved = raw[shift:]
        moved[:] = g
        assert F._sums(moved) == ref


def _zero_shift_calls(monkeypatch) -> list[float]:
    shifts: list[float] = []
    real = F._shifted_sums

    def spy(x, c, g):
        shifts.append(c)
        return real(x, c, g)
    monkeypatch.setattr(F, "_shifted_sums", spy)
    return shifts


def test_zero_mean_data_takes_the_zero_shift_and_stays_exact(monkeypatch) -> None:
    shifts = _zero_shift_calls(monkeypatch)
    x = np.random.default_rng(5).standard_normal(6 * F._FSUB).astype(np.float32)
    st = compute_stats(x, chunk_elems=2 * F._FSUB)
    assert shifts and all(c == 0.0 for c in shifts)  # no sub-block paid for a subtraction
    f = x.astype(np.float64)
    mean = math.fsum(f) / f.size
    assert st.mean == pytest.approx(mean, rel=0, abs=1e-15)
    assert st.std == pytest.approx(math.sqrt(math.fsum((f - mean) ** 2) / f.size), rel=1e-14)
    assert st.l2norm == pytest.approx(math.sqrt(math.fsum(f * f)), rel=1e-14)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_offset_data_is_shifted_and_a_jump_in_the_mean_recentres(dtype: str, monkeypatch) -> None:
    shifts = _zero_shift_calls(monkeypatch)
    rng = np.random.default_rng(6)
    # zero-mean blocks first (the zero shift is chosen), then a mean of 1e6 with unit spread: without
    # the guard's re-centring the variance would lose ~12 digits
    x = np.concatenate((rng.standard_normal(3 * F._FSUB), 1e6 + rng.standard_normal(3 * F._FSUB))).astype(dtype)
    st = compute_stats(x, chunk_elems=F._FSUB)
    assert 0.0 in shifts and any(abs(c) > 1e5 for c in shifts)
    f = x.astype(np.float64)
    mean = math.fsum(f) / f.size
    assert st.mean == pytest.approx(mean, rel=1e-15)
    assert st.std == pytest.approx(math.sqrt(math.fsum((f - mean) ** 2) / f.size), rel=1e-13)
    tail = f[3 * F._FSUB:]
    t_mean = math.fsum(tail) / tail.size
    st_tail = compute_stats(x[3 * F._FSUB:])
    assert st_tail.std == pytest.approx(math.sqrt(math.fsum((tail - t_mean) ** 2) / tail.size), rel=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exponent_sum_and_zeros_from_the_bits(dtype: str) -> None:
    fi = np.finfo(dtype)
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(50_000) * 10.0 ** rng.integers(-30, 30, 50_000)).astype(dtype)
    x[::97] = 0.0
    x[1::89] = -0.0
    x[2::83] = fi.smallest_subnormal * rng.integers(1, 1000, x[2::83].size)
    x[3::79] = -fi.max
    acc = F._FloatAcc(0)
    acc.add(x, 0)
    nz = x[x != 0].astype(np.float64)
    field_min = -127 if dtype == "float32" else -1023
    ref = np.where(np.abs(nz) < fi.tiny, field_min, np.frexp(nz)[1] - 1)  # floor(log2|x|), subnormals: field 0
    assert acc.zeros == int((x == 0).sum()) and acc.nonzero == nz.size
    assert acc.exp_sum == float(ref.sum())


def _special_blocks(dtype: str, sub: int) -> np.ndarray:
    """One tensor, one special case per sub-block of ``sub`` elements, and a 1-element tail."""
    fi = np.finfo(dtype)
    rng = np.random.default_rng(9)
    base = rng.standard_normal(sub)
    parts = [
        np.where(np.arange(sub) % 5 == 0, np.nan, base),                       # NaN
        np.where(np.arange(sub) % 7 == 0, np.inf, np.where(np.arange(sub) % 11 == 0, -np.inf, base)),
        np.full(sub, 2.5),                                                      # all equal
        rng.integers(1, 50, sub) * float(fi.smallest_subnormal),                # subnormals
        np.where(np.arange(sub) % 2 == 0, -0.0, 0.0),                          # ±0.0 only
        np.linspace(-4, 4, sub),                                                # values on exact edges
        base * 3,
    ]
    return np.concatenate(parts + [np.array([-1.5])]).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_special_sub_blocks_on_threads_and_not(dtype: str, monkeypatch) -> None:
    monkeypatch.setattr(S, "_BLOCK", 1536)
    monkeypatch.setattr(F, "_FSUB", 512)
    monkeypatch.setattr(S, "PARALLEL_MIN_ELEMS", 1000)
    monkeypatch.setattr(S, "PROCESS_MIN_ELEMS", 1000)
    x = _special_blocks(dtype, 512)
    out = {}
    for workers, forkable in ((1, True), (3, False), (3, True)):  # one thread, threads, processes
        monkeypatch.setenv("DUMPSCOPE_WORKERS", str(workers))
        monkeypatch.setattr(S, "_forkable", lambda: forkable)
        st = compute_stats(x, chunk_elems=1000, first_bad_n=6)
        check(st, x, rtol=1e-12)
        out[workers, forkable] = dataclasses.asdict(st)
    assert out[1, True] == out[3, False] == out[3, True]
    out[1] = out[1, True]
    assert out[1]["zeros"] == 512 and out[1]["nan"] == truth(x)["nan"]


def test_float64_log_bins_when_typical_squared_underflows_or_overflows() -> None:
    fi = np.finfo(np.float64)
    rng = np.random.default_rng(10)
    tiny = rng.integers(1, 1 << 20, 3000) * float(fi.smallest_subnormal)  # typical ~1e-318: typical² is 0
    tiny[::3] = 1.0
    huge = np.tile(np.array([fi.max, -fi.max, 0.0, 1.0]), 100)  # typical ~2**682: typical² is inf
    for x in (tiny, -tiny, huge):
        st = compute_stats(x)
        assert st.hist_log
        edges = np.asarray(st.hist_edges)
        assert np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0)
        fin = truth(x)["fin"]
        assert edges[0] <= fin.min() and edges[-1] >= fin.max()
        idx = np.clip(np.searchsorted(edges, fin, side="right") - 1, 0, len(edges) - 2)
        assert st.hist_counts == np.bincount(idx, minlength=len(edges) - 1).tolist()
