"""The float engine reduces a big tensor block by block, on several threads: the blocks' statistics are
merged in block order, so the answer is numpy's (within float64 rounding), the histogram is exact for
its edges, and nothing depends on the number of threads."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from dumpscope.core.tensors import stats as S
from dumpscope.core.tensors import stats_float as F
from dumpscope.core.tensors.stats import compute_stats, compute_stats_chunks
from test_stats_speed_paths import check


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 3,000 elements, sub-blocks of 512, threads from 20,000 elements on."""
    monkeypatch.setattr(S, "_BLOCK", 3000)
    monkeypatch.setattr(F, "_FSUB", 512)
    monkeypatch.setattr(S, "PARALLEL_MIN_ELEMS", 20_000)
    return monkeypatch


def _tensor(dtype: str, n: int = 50_000) -> np.ndarray:
    rng = np.random.default_rng(7)
    if dtype in ("int32", "int64"):
        return rng.integers(-10**6, 10**6, n).astype(dtype)
    if dtype == "complex64":
        z = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
        z[[10, 20_000]] = complex(np.nan, 0)
        return z
    x = (rng.standard_normal(n) * 3 + 2.5).astype(dtype)  # a mean the first value is far from
    x[[5, 4_000, 4_001, 31_337]] = [np.nan, np.inf, -np.inf, np.nan]  # specials in several blocks
    x[[7, 8, 45_000]] = 0.0
    return x


def _stats(x: np.ndarray, workers: int, monkeypatch, **kw) -> dict:
    monkeypatch.setenv("DUMPSCOPE_WORKERS", str(workers))
    return dataclasses.asdict(compute_stats(x, chunk_elems=7_000, first_bad_n=3, **kw))


def threads_reducing(monkeypatch) -> set[str]:
    """The names of the threads that reduce blocks from now on (``_FloatAcc.add`` spied on)."""
    names: set[str] = set()
    real_add = S._FloatAcc.add

    def add(self, block, offset):
        names.add(threading.current_thread().name)
        return real_add(self, block, offset)
    monkeypatch.setattr(S._FloatAcc, "add", add)
    return names


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "complex64"])
def test_many_blocks_on_threads_equal_numpy_and_one_thread(dtype, small_blocks):
    x = _tensor(dtype)
    names = threads_reducing(small_blocks)
    threaded = _stats(x, 3, small_blocks)
    assert any(n.startswith("dumpscope-stats") for n in names)  # the blocks really ran on threads
    st = S.TensorStats(**threaded)
    check(st, np.abs(x) if dtype == "complex64" else x)
    bad = np.argwhere(~np.isfinite(np.abs(x) if dtype == "complex64" else x.astype(np.float64)))[:3]
    assert st.first_bad == [tuple(int(i) for i in ix) for ix in bad]
    assert _stats(x, 1, small_blocks) == threaded  # same bits whatever the number of threads


def test_log_histogram_and_chunk_sources_on_threads(small_blocks):
    rng = np.random.default_rng(8)
    x = rng.standard_normal(60_000).astype(np.float32)
    x[::997] *= 1e7  # heavy tails: log bins
    one = _stats(x, 1, small_blocks)
    assert one["hist_log"]
    assert _stats(x, 2, small_blocks) == one
    check(S.TensorStats(**one), x)
    pieces = lambda: (x[i:i + 9_000] for i in range(0, x.size, 9_000))  # noqa: E731  (a file read in chunks)
    small_blocks.setenv("DUMPSCOPE_WORKERS", "2")
    chunked = dataclasses.asdict(compute_stats_chunks(pieces, x.shape, "float32", first_bad_n=3))
    for key in ("mean", "std", "l2norm"):  # other chunk ends, other blocks: the last bits may differ
        assert chunked.pop(key) == pytest.approx(one.pop(key), rel=1e-12)
    assert chunked == one


def test_blocks_in_flight_stay_bounded():
    made = []
    consumed = []

    def blocks():
        for k in range(40):
            made.append(k)
            assert len(made) - len(consumed) <= 4  # workers + 1 handed out, one being made
            yield np.full(10, float(k)), 10 * k

    for out in S._ordered_map(lambda b, o: (float(b[0]), o), blocks(), workers=3):
        consumed.append(out)
    assert consumed == [(float(k), 10 * k) for k in range(40)]  # in block order
