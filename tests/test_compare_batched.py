"""Compare's fast paths give the answer of the slow ones, bit for bit (issue 21 Build 2).

* ``small_pairs.measure_small_many`` (many small pairs in one 2-D pass, kept as columns) vs
  ``measure_streams`` pair by pair;
* ``tensor_io``'s layout plans (a gather learnt from the canonical converter) vs ``load_tensor``;
* ``compare_dumps`` in a process pool with batched metrics vs in this process pair by pair, on
  generated trees with NaN/Inf, empty tensors, mixed dtypes, shape mismatches and an unreadable file.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from dumpscope.core.tensors import layout_plans
from dumpscope.core.tensors import load as tensor_io
from dumpscope.core.engines.compare import measure_many as mm
from dumpscope.core.engines.compare import small_pairs
from dumpscope.core.engines.compare.metrics import Tolerance, measure_streams
from dumpscope.core.engines.compare.small_pairs import measure_small_many
from dumpscope.core.model import STORAGE_CANN
from synth.cann_writer import SynthTensor, encode_dump, write_dump
from dumpscope.core.tensors.load import OnceReader, TensorRef, load_tensor


def _one(a: np.ndarray):
    return (lambda: iter([a.reshape(-1)]), tuple(a.shape), np.dtype(a.dtype.name))


def _same(a, b) -> bool:
    """Equal field by field, floats by their exact repr (-0.0, NaN and the last bit count)."""
    return repr(dataclasses.astuple(a)) == repr(dataclasses.astuple(b))


def _values(rng, n: int, dtype: str, kind: int) -> np.ndarray:
    if kind == 0:
        a = rng.standard_normal(n)
    elif kind == 1:
        a = np.zeros(n)
    elif kind == 2:  # far from 1: sums of squares lose bits, summation order shows
        a = rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20)
    elif kind == 3:
        a = rng.integers(-2, 3, n).astype(float)  # zeros in the golden: eps at B == 0
    elif kind == 4:
        a = rng.standard_normal(n)
        a[rng.integers(0, n)] = (np.nan, np.inf, -np.inf)[rng.integers(0, 3)]
    else:
        a = rng.standard_normal(n) * 1e300  # float64 overflow in the sums
    with np.errstate(all="ignore"):
        return a.astype(dtype)


@pytest.mark.parametrize("seed", range(4))
def test_small_many_is_the_single_pair_pass(seed):
    rng = np.random.default_rng(seed)
    checked = kinds = 0
    for _ in range(60):
        n = int(rng.choice([1, 2, 7, 8, 9, 100, 128, 129, 1024, 4097, small_pairs.SMALL_MAX]))
        gdt = str(rng.choice(["float16", "float32", "float64", "int32", "uint8", "bool", "int64"]))
        tdt = gdt if rng.random() < 0.7 else str(rng.choice(["float16", "float32", "float64"]))
        tol = Tolerance(rtol=float(rng.choice([1e-3, 5e-3, 0.0])),
                        allclose=None if rng.random() < 0.5 else (1e-5, 1e-3))
        pairs = []
        for _k in range(int(rng.integers(1, 7))):
            kind = int(rng.integers(0, 6))
            g = _values(rng, n, gdt, kind)
            with np.errstate(all="ignore"):
                t = (g.astype(np.float64) + rng.standard_normal(n) * rng.choice([0.0, 1e-4, 0.1])).astype(tdt) \
                    if rng.random() < 0.7 else _values(rng, n, tdt, int(rng.integers(0, 6)))
            pairs.append((g.reshape(1, n) if rng.random() < 0.3 else g, t))
            kinds |= 1 << kind
        for (g, t), r in zip(pairs, measure_small_many(pairs, tol)):
            assert _same(r, measure_streams(_one(g), _one(t), tol)), (n, gdt, tdt, tol)
            checked += 1
    assert checked > 150 and kinds == 0b111111


def _near_twins(rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A pair whose cosine's division rounds above 1 (the pass clamps it to 1.0)."""
    while True:
        g = rng.standard_normal(n)
        t = g * (1 + rng.standard_normal(n) * 1e-15)
        c = float(np.einsum("i,i->", g, t)) / np.sqrt(float(np.einsum("i,i->", g, g)) * float(np.einsum("i,i->", t, t)))
        if c > 1.0:
            return g, t


def test_small_many_edge_rows_are_the_single_pair_pass():
    """Rows where the arithmetic after the sums shows: a -0.0 golden (its sum -0.0, the pass's sum starts at
    0.0: mean 0.0), subnormal differences (histogram bin 0, never kept), 0/0 everywhere (max scaled error
    0.0), a cosine rounding above 1, one side all zero, moved elements in some rows only; with NaN rows
    between them (left to the single pass) and with --atol/--rtol."""
    rng = np.random.default_rng(5)
    g_twin, t_twin = _near_twins(rng, 7)
    rows = [
        (np.full(7, -0.0), np.full(7, -0.0)),
        (np.full(7, -0.0), rng.standard_normal(7)),
        (np.full(7, 1e-310), np.full(7, 3e-310)),
        (np.zeros(7), np.zeros(7)),
        (g_twin, t_twin),
        (rng.standard_normal(7), np.zeros(7)),
        (np.array([1.0, np.nan, 2, 3, 4, 5, 6]), np.arange(7.0)),
        (np.arange(7.0), np.arange(7.0) * (1 + 1e-2)),
        (np.arange(7.0) - 3, np.arange(7.0) - 3),
    ]
    for tol in (Tolerance(rtol=1e-3), Tolerance(rtol=0.0, allclose=(1e-5, 1e-3))):
        for order in (rows, rows[::-1]):
            got = measure_small_many(order, tol)
            for (g, t), r in zip(order, got):
                assert _same(r, measure_streams(_one(g), _one(t), tol)), (g, t)
    assert measure_small_many(rows[4:5], Tolerance())[0].cosine == 1.0
    assert measure_small_many(rows[:1], Tolerance())[0].golden_stats["mean"] == 0.0


def test_twin_rows_are_the_single_pair_pass(monkeypatch):
    """Rows whose two sides hold the same values (the ops before a divergence, a rerun) are measured from
    the golden alone: the same records as the single pass, alone in a block or between differing rows,
    whatever the values (zeros, -0.0, 1e153 whose product of norms overflows, integers, a float32 golden
    against a float64 target of the same values); with --atol/--rtol every row takes the full pass."""
    rng = np.random.default_rng(8)
    twins = [(a, a.copy()) for a in (np.zeros(9), np.full(9, -0.0), np.full(9, 3e153), rng.standard_normal(9),
                                      rng.integers(-3, 3, 9).astype(np.float64), (rng.standard_normal(9) > 0) * 1.0)]
    others = [(a, a + rng.standard_normal(9) * 1e-3) for a in (rng.standard_normal(9), np.zeros(9))]
    seen: list[int] = []
    real = small_pairs._twin_columns
    monkeypatch.setattr(small_pairs, "_twin_columns", lambda G, *a: seen.append(len(G)) or real(G, *a))
    for tol in (Tolerance(rtol=5e-3), Tolerance(rtol=0.0), Tolerance(rtol=1e-3, allclose=(1e-5, 1e-3))):
        for pairs in (twins, others[:1] + twins + others[1:], twins[::-1] + others):
            for (g, t), r in zip(pairs, measure_small_many(pairs, tol)):
                assert _same(r, measure_streams(_one(g), _one(t), tol)), (g, t, tol)
    f32 = rng.standard_normal(9).astype(np.float32)
    mixed = [(f32, f32.astype(np.float64))]
    assert _same(measure_small_many(mixed, Tolerance())[0], measure_streams(_one(f32), _one(mixed[0][1]), Tolerance()))
    assert seen[:6] == [6, 6, 6, 6, 6, 6] and sum(seen) == 6 * 6 + 1  # never with --atol/--rtol


def test_small_many_without_exact_row_sums_measures_pair_by_pair(monkeypatch):
    rng = np.random.default_rng(9)
    pairs = [(rng.standard_normal(300).astype(np.float32), rng.standard_normal(300).astype(np.float32))
             for _ in range(3)]
    calls = []
    real = small_pairs.measure_streams
    monkeypatch.setattr(small_pairs, "rows_exact", lambda: False)
    monkeypatch.setattr(small_pairs, "measure_streams", lambda *a: calls.append(1) or real(*a))
    got = measure_small_many(pairs, Tolerance())
    assert len(calls) == 3
    assert all(_same(r, real(_one(g), _one(t), Tolerance())) for (g, t), r in zip(pairs, got))


def test_row_counts_by_set_bits_are_the_byte_sums(monkeypatch):
    """``_count`` of rows of whole 8-byte words (set bits of the words) counts what adding the bytes counts,
    on rows of every density and on rows it must leave to the byte sum (a length not a multiple of 8,
    a strided mask); the set-bit path is taken where it can be (numpy >= 2.0)."""
    rng = np.random.default_rng(12)
    seen: list[int] = []
    if small_pairs._POPCOUNT:
        real = np.bitwise_count
        monkeypatch.setattr(np, "bitwise_count", lambda a: seen.append(a.shape[-1]) or real(a))
    for n in (8, 16, 1024, 2048, 4096, 1, 7, 9, 1023, 1025):
        for p in (0.0, 0.001, 0.5, 0.999, 1.0):
            mask = rng.random((5, n)) < p
            want = np.array([int(np.sum(r, dtype=np.int64)) for r in mask], np.int64)
            for m, w in ((mask, want), (mask[::2], want[::2])):  # (every other row: not contiguous)
                got = small_pairs._count(m)
                assert got.dtype == np.int64 and got.tolist() == w.tolist(), (n, p)
        strided = np.zeros((3, 2 * n), np.bool_)[:, ::2]
        assert small_pairs._count(strided).tolist() == [0, 0, 0]
    if small_pairs._POPCOUNT:
        assert set(seen) == {1, 2, 128, 256, 512}  # whole-word rows only, each a word per 8 elements


# --------------------------------------------------------------------------------------------
# layout plans


PLAN_CASES = [
    ((1, 20, 3, 3), "float16", "NC1HWC0", {}),
    ((2, 5, 4, 4), "int8", "NC1HWC0", {}),  # 1-byte elements: two probes for 2,048 element numbers
    ((2, 3, 2, 2, 2), "float32", "NDC1HWC0", {}),
    ((8, 20, 3, 3), "float16", "FRACTAL_Z", {}),
    ((33, 40), "float16", "FRACTAL_NZ", {}),
    ((2, 20, 3, 3), "float16", "C1HWNCoC0", {}),
    ((20, 3), "float16", "NC1HWC0", {}),  # a short original shape
    ((3, 4), "float32", "ND", {}),
    ((5,), "int64", "ND", {}),
    ((), "float32", "ND", {}),
    ((2, 3), "bfloat16", "ND", {}),  # not a plain number: always the canonical loader
]


@pytest.mark.parametrize("shape,dtype,fmt,extra", PLAN_CASES, ids=[f"{c[2]}-{c[1]}-{len(c[0])}d" for c in PLAN_CASES])
def test_plans_decode_what_the_canonical_loader_decodes(tmp_path, monkeypatch, shape, dtype, fmt, extra):
    from dumpscope.core.formats import cann_dump

    rng = np.random.default_rng(11)
    refs = []
    for k in range(3):
        arr = (rng.standard_normal(shape) * 50).astype(np.float32)
        p = tmp_path / f"Op.op.{k}.0.170000000000000{k}"
        p.write_bytes(encode_dump("net/op", [SynthTensor(arr, dtype, fmt, **extra)], [], 1700000000000000 + k))
        refs.append(TensorRef(str(p), STORAGE_CANN, "input", 0, "", "", ()))
    want = [load_tensor(r) for r in refs]
    canonical = []
    real = cann_dump.load_tensor
    monkeypatch.setattr(cann_dump, "load_tensor", lambda *a, **k: canonical.append(1) or real(*a, **k))
    monkeypatch.setattr(layout_plans, "PLANS", {})
    got = [OnceReader([r]).load(r) for r in refs]
    for w, g in zip(want, got):
        assert (g.dtype, g.shape) == (w.dtype, w.shape) and g.tobytes() == w.tobytes()
    planned = dtype != "bfloat16"
    assert len(canonical) == (1 if planned else 3)  # the first file teaches the plan, the others use it
    assert (list(layout_plans.PLANS.values())[0] is not None) == planned


def test_a_plan_is_refused_when_the_converter_makes_up_elements(tmp_path, monkeypatch):
    from dumpscope.core.formats import device_format

    arr = np.arange(1 * 20 * 3 * 3, dtype=np.float32).reshape(1, 20, 3, 3)
    p = tmp_path / "Op.op.1.0.1700000000000000"
    p.write_bytes(encode_dump("net/op", [SynthTensor(arr, "float16", "NC1HWC0")], [], 1700000000000000))
    ref = TensorRef(str(p), STORAGE_CANN, "input", 0, "", "", ())
    real = device_format.to_logical

    def filling(*a, **k):  # a converter that writes a constant somewhere instead of moving an element
        out = np.array(real(*a, **k))
        out.reshape(-1)[-1] = 0
        return out

    monkeypatch.setattr(device_format, "to_logical", filling)  # seen by the plan's probes only
    monkeypatch.setattr(layout_plans, "PLANS", {})
    np.testing.assert_array_equal(OnceReader([ref]).load(ref), load_tensor(ref))
    assert list(layout_plans.PLANS.values()) == [None]


def test_a_plan_never_reads_past_a_short_file(tmp_path, monkeypatch):
    monkeypatch.setattr(layout_plans, "PLANS", {})
    arr = np.ones((1, 16, 2, 2), np.float32)
    paths = []
    for k in range(2):
        p = tmp_path / f"Op.op.{k}.0.170000000000000{k}"
        p.write_bytes(encode_dump("net/op", [SynthTensor(arr, "float16", "NC1HWC0")], [], 1700000000000000 + k))
        paths.append(p)
    refs = [TensorRef(str(p), STORAGE_CANN, "input", 0, "", "", ()) for p in paths]
    OnceReader(refs[:1]).load(refs[0])  # learns the layout
    paths[1].write_bytes(paths[1].read_bytes()[:-6])
    with pytest.raises(tensor_io.TensorLoadError) as want:
        load_tensor(refs[1])
    with pytest.raises(tensor_io.TensorLoadError) as got:
        OnceReader(refs[1:]).load(refs[1])
    assert str(got.value) == str(want.value)


# --------------------------------------------------------------------------------------------
# whole compare: pool + batches vs inline pair by pair


def _tree(root, side: str):
    """60 ops: small NC1HWC0/ND pairs of several dtypes, NaN/Inf, empty tensors, a bigger (streamed)
    tensor, shape mismatches between the sides."""
    rng = np.random.default_rng(21)
    folder = root / "20240101120000" / "0" / "ge_default_20240101120000_1" / "1" / "0"
    for k in range(60):
        kind = k % 10
        base = rng.standard_normal((1, 16, 4, 4)).astype(np.float32)
        noise = rng.standard_normal(base.shape).astype(np.float32) * (1e-3 if k % 3 else 0.3)
        x = base + (noise if side == "target" else 0)
        ins = [SynthTensor(x, "float16", "NC1HWC0"), SynthTensor(x[0, 0] * 3, "float32")]
        outs = [SynthTensor(np.maximum(x, 0), "float16", "NC1HWC0")]
        if kind == 1:
            y = x.copy()
            y[0, 1, 2, 3] = np.nan if side == "target" else 1.0
            y[0, 2, 0, 0] = np.inf
            outs = [SynthTensor(y, "float32")]
        elif kind == 2:
            ins.append(SynthTensor(np.zeros((0, 3), np.float32), "float32"))
        elif kind == 3:
            ins.append(SynthTensor(rng.integers(-5, 5, (7,)).astype(np.int32) + (k if side == "target" else 0), "int32"))
        elif kind == 4:  # same elements, other shape
            outs.append(SynthTensor(base.reshape(16, 16) if side == "golden" else base.reshape(4, 64), "float32"))
        elif kind == 5:  # other element count
            outs.append(SynthTensor(base.reshape(-1)[: (256 if side == "golden" else 128)], "float32"))
        elif kind == 6:  # beyond the batched kernel: streamed pair by pair
            big = rng.standard_normal((3, 4000)).astype(np.float32)
            outs.append(SynthTensor(big * (1.0 if side == "golden" else 1.001), "float32"))
        elif kind == 7:
            outs.append(SynthTensor(rng.standard_normal((5,)).astype(np.float32), "bfloat16"))
        elif kind == 8:
            outs.append(SynthTensor(np.zeros((3, 3), np.float32) + (1.0 if side == "target" else 0.0), "float32"))
        write_dump(folder, "Conv2D", f"net/block{k}/Conv2D", k + 1, 0, 1700000000000000 + k, ins, outs)
    return root


def _pair_queries(tmp_path):
    """The queries of a golden and a target ``_tree`` (one index cache), as the compare tests open them."""
    from dumpscope.core.query import open_query

    return (open_query(str(_tree(tmp_path / "g", "golden")), cache_directory=tmp_path / "cache"),
            open_query(str(_tree(tmp_path / "t", "target")), cache_directory=tmp_path / "cache"))


class _Pool:
    """A real process pool (fork), counting what it was given."""

    def __init__(self) -> None:
        self.submitted = 0
        self._pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork"))

    def submit(self, *a, **k):
        self.submitted += 1
        return self._pool.submit(*a, **k)

    def shutdown(self, **k):
        self._pool.shutdown(**k)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_pool_and_batches_give_the_per_pair_answer(tmp_path, monkeypatch):
    from dumpscope.core.engines.compare import compare_dumps, engine

    g, t = _pair_queries(tmp_path)
    cut = next((tmp_path / "t").rglob("*block37*"))
    cut.write_bytes(cut.read_bytes()[:-40])  # shortened after indexing: its rows are "unreadable"
    pools: list[_Pool] = []
    monkeypatch.setattr(mm, "BATCH_PAIRS", 16)
    monkeypatch.setattr(mm, "POOL_MIN_OPS", 1)
    monkeypatch.setattr(engine, "_CHUNK_OPS", 8)  # ops handed in a chunk at a time, judged as batches finish
    monkeypatch.setattr(mm, "_pool", lambda workers: pools.append(_Pool()) or pools[-1])
    pooled = compare_dumps(g, t)
    assert pools and pools[0].submitted > 5  # batches went to worker processes

    batched: list[int] = []
    real_block = mm.small_block
    monkeypatch.setattr(mm, "small_block", lambda pairs, tol: batched.append(len(pairs)) or real_block(pairs, tol))
    inline = compare_dumps(g, t, workers=1)
    assert max(batched) > 1  # small pairs were measured together

    real_packed = mm.measure_packed
    monkeypatch.setattr(mm, "measure_packed", lambda jobs, allclose: real_packed(jobs, allclose, together=False))
    reference = compare_dumps(g, t, workers=1)

    text = json.dumps(reference, sort_keys=False)
    assert json.dumps(pooled, sort_keys=False) == text
    assert json.dumps(inline, sort_keys=False) == text
    rows = reference["rows"]
    verdicts = {r["verdict"] for r in rows}
    assert {"pass", "error"} <= verdicts
    assert any(r["rule"].startswith("unreadable") for r in rows)  # the short file
    assert any(r["golden"]["shape"] == [0, 3] for r in rows)  # empty tensors
    assert any(r["cosine"] is None and r["golden"]["shape"] != r["target"]["shape"] for r in rows)
    assert reference["first_divergence"] is not None


@pytest.mark.parametrize("sample", ["compare_golden", "msprobe", "troubleshooter", "stats_only", "mindspore_lenet_sync"])
def test_tensors_of_is_tensors_of_each_op(tmp_path, sample):
    from conftest import SAMPLES
    from dumpscope.core.query import open_query

    root = SAMPLES / sample
    q = open_query(str(root), cache_directory=tmp_path / "cache")
    ids = [o.id for o in q.ops(kind="all")]
    got = q.tensors_of(ids)
    assert list(got) == ids and sum(map(len, got.values())) > 0
    for op_id in ids:
        assert got[op_id] == q.tensors(op_id)


def test_gc_is_paused_while_comparing_and_restored(tmp_path, monkeypatch):
    import gc

    from dumpscope.core.engines.compare import compare_dumps, engine
    from dumpscope.core.support.gc_pause import gc_paused
    from dumpscope.core.query import open_query

    g = open_query(str(_tree(tmp_path / "g", "golden")), cache_directory=tmp_path / "cache")
    seen = []
    real = engine._classify
    monkeypatch.setattr(engine, "_classify", lambda *a: seen.append(gc.isenabled()) or real(*a))
    assert gc.isenabled()
    compare_dumps(g, g, workers=1)
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            with gc_paused():
                pass
        assert not gc.isenabled()  # off before: stays off
    finally:
        gc.enable()
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_every_place_of_step_all_shares_one_pool(tmp_path, monkeypatch):
    import shutil

    from dumpscope.core.engines.compare import engine
    from dumpscope.core.engines.compare.places import compare_places
    from dumpscope.core.query import open_query

    roots = {}
    for side in ("golden", "target"):
        root = _tree(tmp_path / side, side)
        model = root / "20240101120000" / "0" / "ge_default_20240101120000_1" / "1"
        for step in ("1", "2"):
            shutil.copytree(model / "0", model / step)
        roots[side] = open_query(str(root), cache_directory=tmp_path / "cache")
    pools: list[_Pool] = []
    monkeypatch.setattr(mm, "BATCH_PAIRS", 16)
    monkeypatch.setattr(mm, "POOL_MIN_OPS", 1)
    monkeypatch.setattr(engine, "_CHUNK_OPS", 8)
    monkeypatch.setattr(mm, "_pool", lambda workers: pools.append(_Pool()) or pools[-1])
    pooled = compare_places(roots["golden"], roots["target"], step="all")
    assert len(pools) == 1 and pools[0].submitted > 15 and mm._SHARED is None
    assert [p["golden"]["step"] for p in pooled["places"]] == [0, 1, 2]
    inline = compare_places(roots["golden"], roots["target"], step="all", workers=1)
    assert len(pools) == 1
    assert json.dumps(pooled) == json.dumps(inline)
    assert pooled["problems"] == inline["problems"]


class _LazyFuture:
    """A batch a worker has not finished until someone waits for it."""

    def __init__(self, fn, args) -> None:
        self._fn, self._args, self._value = fn, args, None
        self.ran = False

    def done(self) -> bool:
        return self.ran

    def result(self):
        if not self.ran:
            self._value, self.ran = self._fn(*self._args), True
        return self._value


class _LazyPool:
    def submit(self, fn, *args):
        return _LazyFuture(fn, args)

    def shutdown(self, **k):
        pass


def test_only_a_few_ops_wait_for_their_measurement(tmp_path, monkeypatch):
    """Preparing ops (their tensors and graph details) outruns measuring them: the engine waits for the
    oldest batch once ``_AHEAD_OPS`` ops are handed in and not made rows (a 100k-op place held every op's
    records at once), and the answer is the inline one."""
    from dumpscope.core.engines.compare import compare_dumps, engine

    g, t = _pair_queries(tmp_path)
    reference = compare_dumps(g, t, workers=1)
    monkeypatch.setattr(mm, "BATCH_PAIRS", 4)
    monkeypatch.setattr(mm, "POOL_MIN_OPS", 1)
    monkeypatch.setattr(engine, "_CHUNK_OPS", 4)
    monkeypatch.setattr(engine, "_AHEAD_OPS", 8)
    monkeypatch.setattr(mm, "_pool", lambda workers: _LazyPool())
    pending: list[int] = []
    real_submit = mm.Measurer.submit

    def submit(self, jobs):
        real_submit(self, jobs)
        pending.append(self.ops_pending)
    monkeypatch.setattr(mm.Measurer, "submit", submit)
    bounded = compare_dumps(g, t)
    assert len(pending) >= 5 and max(pending) <= 8 + 4  # the bound, plus the chunk just handed in
    assert json.dumps(bounded) == json.dumps(reference)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_pool_workers_run_without_the_cycle_collector():
    """A batch's arguments are unpickled in the worker before ``judge_batch`` can pause the collector: the
    workers run with it off (and the inherited objects frozen), the parent's left as it was."""
    import gc

    pool = mm._pool(2)
    if pool is None:
        pytest.skip("no process pool here")
    try:
        assert pool.submit(gc.isenabled).result() is False
        assert pool.submit(gc.get_freeze_count).result() > 0
    finally:
        pool.shutdown()
    assert gc.isenabled()


@pytest.mark.parametrize("whole", [True, False])
def test_stored_tensors_of_mixed_plans_are_the_single_pair_pass(tmp_path, monkeypatch, whole):
    """Undecoded CANN tensors (``OnceReader.stored``) of several plans with one element count, some
    padded (C not a multiple of C0), some gathered, some with NaN/Inf, interleaved op by op: the
    batched kernel (grouped by plan, gathered together) gives every pair's record bit for bit, whether
    a kept tensor holds its file's bytes (``whole``) or a copy of its own."""
    if not whole:
        monkeypatch.setattr(layout_plans, "STORED_WHOLE", 0)
    rng = np.random.default_rng(5)
    layouts = [((1, 20, 3, 3), "NC1HWC0"), ((180,), "ND"), ((1, 5, 6, 6), "NC1HWC0"), ((12, 15), "FRACTAL_NZ"),
               ((1, 45, 2, 2), "NC1HWC0"),  # 180 elements, padded; 256: three transposes, two as stored
               ((1, 16, 4, 4), "NC1HWC0"), ((1, 32, 2, 4), "NC1HWC0"), ((16, 16), "FRACTAL_NZ"), ((256,), "ND"),
               ((2, 16, 2, 4), "NC1HWC0")]
    monkeypatch.setattr(layout_plans, "PLANS", {})
    jobs = []
    for k in range(60):
        shape, fmt = layouts[k % len(layouts)]
        other_shape, other_fmt = layouts[(k * 7 + 1) % len(layouts)]
        sides = []
        for side in ("g", "t"):
            a = rng.standard_normal(shape).astype(np.float32) * 10.0 ** int(rng.integers(-3, 4))
            b = rng.standard_normal(other_shape).astype(np.float32)
            if side == "t":
                a = a + rng.standard_normal(shape).astype(np.float32) * (1e-3 if k % 2 else 0.2)
                if k % 7 == 3:
                    a.reshape(-1)[k % 11] = (np.nan, np.inf)[k % 2]
            p = tmp_path / side / f"Op.op{k}.{k}.0.17000000000000{k:02d}"
            p.parent.mkdir(exist_ok=True)
            p.write_bytes(encode_dump(f"net/op{k}", [SynthTensor(a, "float16", fmt)],
                                      [SynthTensor(b, "float16", other_fmt)], 1700000000000000 + k))
            sides.append(str(p))
        jobs.append([(TensorRef(sides[0], STORAGE_CANN, "input", 0, "", "", shape),
                      TensorRef(sides[1], STORAGE_CANN, "input", 0, "", "", shape)),
                     (TensorRef(sides[0], STORAGE_CANN, "output", 0, "", "", other_shape),
                      TensorRef(sides[1], STORAGE_CANN, "output", 0, "", "", other_shape))])
    kinds: list[tuple[int, int]] = []  # per _fill call: (stored tensors, arrays)
    real_fill = small_pairs._fill
    monkeypatch.setattr(small_pairs, "_fill", lambda out, items: kinds.append(
        (sum(type(x) is tuple for x in items), sum(type(x) is not tuple for x in items))) or real_fill(out, items))
    # first without plans: each layout's first file is decoded (an array, which teaches the plan), the
    # later ones stored, in the same groups; then with every plan known
    for allclose in (None, None, (1e-5, 1e-3)):
        together = mm.measure_batch(jobs, allclose)
        alone = mm.measure_batch(jobs, allclose, together=False)
        assert [[repr(dataclasses.astuple(r)) for r in op] for op in together] == \
            [[repr(dataclasses.astuple(r)) for r in op] for op in alone]
    assert sum(a for _s, a in kinds) > 0 and any(s and a for s, a in kinds)  # arrays and stored tensors in one block
    kinds.clear()
    mm.measure_batch(jobs, None)
    assert sum(s for s, _a in kinds) == 2 * 120 and sum(a for _s, a in kinds) == 0  # every tensor undecoded
    assert sum(p is not None and p.transpose is not None for p in layout_plans.PLANS.values()) == 3  # (16, 16) NZ: as stored
    assert sum(1 for op in together for r in op if r.target_nan or r.target_inf) > 0
