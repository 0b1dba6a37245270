"""Device-layout tensors (NC1HWC0, FRACTAL_NZ) converted slab by slab: the same values, in the same
logical order, as the whole-tensor conversion, and stats never load the whole tensor."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dumpscope.core.tensors import load as tensor_io
from dumpscope.core.formats.device_chunks import device_chunks
from dumpscope.core.formats.cann_dump import load_tensor as load_cann
from dumpscope.core.formats.cann_dump import read_header
from dumpscope.core.query import open_query
from dumpscope.core.tensors.stats import compute_stats_chunks
from synth.cann_writer import SynthTensor, write_dump

CASES = [("NC1HWC0", (2, 20, 3, 5)), ("NC1HWC0", (1, 40, 4, 4)), ("NC1HWC0", (3, 16, 2, 2)), ("NC1HWC0", (20,)),
         ("NC1HWC0", (2, 20)), ("FRACTAL_NZ", (37, 50)), ("FRACTAL_NZ", (3, 20, 33)), ("FRACTAL_NZ", (64, 16)),
         ("FRACTAL_NZ", (5,)), ("NDC1HWC0", (2, 20, 3, 4, 5)), ("NDC1HWC0", (1, 16, 2, 3, 3))]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("dev") / "dump" / "20240101" / "0" / "m" / "1" / "0"
    rng = np.random.default_rng(7)
    for i, (fmt, shape) in enumerate(CASES):
        for dt in ("float16", "float32", "bfloat16"):
            a = rng.standard_normal(shape).astype(np.float32)
            a.flat[i % a.size] = np.inf if i % 2 else np.nan
            write_dump(root, "Op", f"op{i}_{dt}", i, 2, 1718260502000000 + i, outputs=[SynthTensor(a, dt, fmt)])
    return root.parents[4]


@pytest.mark.parametrize("chunk_bytes", [1, 96, 700, 5000, 1 << 30])
def test_chunks_are_the_logical_tensor_in_order(tree, chunk_bytes):
    files = sorted(p for p in tree.rglob("Op.*"))
    assert len(files) == 3 * len(CASES)
    for path in files:
        t = read_header(path).outputs[0]
        want = load_cann(path, t)
        sdt = np.dtype(np.uint16) if t.dtype == "bfloat16" else np.dtype(t.dtype)
        made = device_chunks(str(path), t.offset, t.format, t.shape, t.original_shape, sdt, chunk_bytes=chunk_bytes)
        assert made is not None, (t.format, t.original_shape)
        make, shape = made
        got = np.concatenate([c.reshape(-1) for c in make()])
        if t.dtype == "bfloat16":  # chunks hold the stored bits
            got = (got.astype(np.uint32) << 16).view(np.float32)
        assert tuple(shape) == want.shape
        np.testing.assert_array_equal(got, want.reshape(-1))


def test_stats_of_device_layouts_stream_and_match_the_whole_tensor(tree, monkeypatch):
    q = open_query(str(tree), use_cache=False)
    refs = [t.ref() for o in q.ops() for t in q.tensors(o.id)]
    assert {r.format for r in refs} == {"NC1HWC0", "FRACTAL_NZ", "NDC1HWC0"}
    whole = {}
    for ref in refs:
        arr = tensor_io.load_tensor(ref)
        whole[ref.path] = dataclasses.asdict(compute_stats_chunks(lambda: tensor_io._chunks(arr), arr.shape,
                                                                  arr.dtype.name))

    def no_whole_load(ref):
        raise AssertionError(f"{ref.path}: loaded whole for stats")

    monkeypatch.setattr(tensor_io, "load_tensor", no_whole_load)
    for ref in refs:
        got = dataclasses.asdict(tensor_io.compute_tensor_stats(ref))
        want = whole[ref.path]
        for key, value in want.items():
            if key in ("hist_edges", "hist_counts", "dtype") and ref.dtype == "bfloat16":
                # bfloat16 bits get bfloat16-spaced bins and keep their dtype name (as plain layouts do)
                assert key != "dtype" or got[key] == "bfloat16"
                continue
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1e-6, abs=1e-12), (ref.path, key)
            else:
                assert got[key] == value, (ref.path, key)


def test_a_device_tensor_cut_short_is_one_named_error(tree, tmp_path):
    src = sorted(tree.rglob("Op.op0_float32*"))[0]
    step = tmp_path / "dump" / "20240101" / "0" / "m" / "1" / "0"
    step.mkdir(parents=True)
    dst = step / src.name
    data = src.read_bytes()
    dst.write_bytes(data)
    q = open_query(str(tmp_path / "dump"), use_cache=False)
    ref = [t.ref() for o in q.ops() for t in q.tensors(o.id)][0]
    dst.write_bytes(data[:-40])  # cut short after indexing
    with pytest.raises(tensor_io.TensorLoadError, match="truncated"):
        tensor_io.compute_tensor_stats(ref)


def test_convert_writes_device_layouts_chunk_by_chunk(tree, tmp_path, monkeypatch):
    from dumpscope.core.engines import convert as convert_mod

    q = open_query(str(tree), use_cache=False)
    refs = {t.path: t.ref() for o in q.ops() for t in q.tensors(o.id)}
    want = {p: tensor_io.load_tensor(r) for p, r in refs.items()}

    def no_whole_load(ref):
        raise AssertionError(f"{ref.path}: loaded whole for convert")

    monkeypatch.setattr(convert_mod, "load_tensor", no_whole_load)
    errors: list[str] = []
    result = convert_mod.convert_tree(q, str(tmp_path / "out"), errors=errors)
    assert errors == [] and result.written == len(refs)
    for path, arr in want.items():
        out = next((tmp_path / "out").rglob(f"{path.rsplit('/', 1)[1]}.output.0.npy"))
        got = np.load(out)
        assert got.dtype == arr.dtype and got.shape == arr.shape
        np.testing.assert_array_equal(got, arr)


def test_compare_streams_both_tensors_with_the_same_metrics(tree, monkeypatch):
    """compare never holds a whole device-layout tensor, and its metrics equal the in-memory ones."""
    from dumpscope.core.engines.compare import compare_dumps
    from dumpscope.core.engines.compare.metrics import Tolerance, measure_arrays, measure_streams

    rng = np.random.default_rng(3)
    for shape in [(1000,), (7, 33), (2, 3, 4, 5), ()]:
        a = rng.standard_normal(shape).astype(np.float32)
        b = (a + rng.standard_normal(shape).astype(np.float32) * 1e-3).astype(np.float32)
        if a.size > 10:
            b.flat[5] = np.nan
        want = measure_arrays(a, b, Tolerance(rtol=1e-3))

        def stream(x, sizes):
            def make():
                flat, i = x.reshape(-1), 0
                for k in range(10 ** 6):
                    if i >= flat.size:
                        break
                    n = sizes[k % len(sizes)]
                    yield flat[i:i + n]
                    i += n
                if flat.size == 0:
                    yield flat
            return make, x.shape, x.dtype

        got = measure_streams(stream(a, [7, 100, 1]), stream(b, [64]), Tolerance(rtol=1e-3))
        for key in ("cosine", "max_abs_err", "max_rel_err", "one_thousandth_ratio", "euc_dist", "size"):
            w, g = getattr(want, key, None), getattr(got, key, None)
            assert (w is None and g is None) or g == pytest.approx(w, rel=1e-9, nan_ok=True), (shape, key)

    q = open_query(str(tree), use_cache=False)
    real_load = tensor_io.load_tensor

    def no_whole_device_load(ref):
        if ref.format in ("NC1HWC0", "FRACTAL_NZ"):
            raise AssertionError(f"{ref.path}: loaded whole for compare")
        return real_load(ref)

    monkeypatch.setattr(tensor_io, "load_tensor", no_whole_device_load)
    from dumpscope.core.engines.compare import engine
    monkeypatch.setattr(engine, "load_tensor", no_whole_device_load, raising=False)
    doc = compare_dumps(q, open_query(str(tree), use_cache=False))
    rows = doc["rows"]
    assert len(rows) == 3 * len(CASES)
    assert all(r["verdict"] == "pass" and r["max_abs_err"] == 0 for r in rows), rows[:2]


BIG_PLANES = [("NC1HWC0", (1, 16, 40, 40)), ("NC1HWC0", (2, 20, 24, 30)), ("FRACTAL_NZ", (16, 2000)),
              ("FRACTAL_NZ", (2, 40, 1500)), ("FRACTAL_NZ", (3000,)), ("NDC1HWC0", (1, 20, 3, 40, 30)),
              ("NDC1HWC0", (2, 16, 4, 8, 8))]


@pytest.mark.parametrize("fmt,shape", BIG_PLANES)
@pytest.mark.parametrize("dt", ["float16", "float32"])
def test_one_plane_bigger_than_a_chunk_is_read_in_chunks(tmp_path, monkeypatch, fmt, shape, dt):
    """Issue 30: a C1 plane (a FRACTAL_NZ row block) bigger than the chunk was read whole: stats of
    (1,16,8192,8192) float16 NC1HWC0 read a 2 GiB plane and peaked at 4.2 GB.  The same structure
    here at a chunk of 4 KiB (one plane is 12-100 KiB): no read and no chunk is over the limit, and
    the values are the whole conversion's, in order."""
    from dumpscope.core.formats import device_chunks as dc

    root = tmp_path / "dump" / "20240101" / "0" / "m" / "1" / "0"
    a = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    write_dump(root, "Op", "big", 1, 2, 1718260502000000, outputs=[SynthTensor(a, dt, fmt)])
    path = next(root.glob("Op.*"))
    t = read_header(path).outputs[0]
    sdt = np.dtype(dt)
    limit = 4096
    reads: list[int] = []
    real_reader = dc._reader

    def recording_reader(*args):
        fh, read = real_reader(*args)

        def read_logged(start, count, out=None):
            reads.append(count * sdt.itemsize)
            return read(start, count, out)

        return fh, read_logged

    monkeypatch.setattr(dc, "_reader", recording_reader)
    made = device_chunks(str(path), t.offset, t.format, t.shape, t.original_shape, sdt, chunk_bytes=limit)
    assert made is not None
    chunks = list(made[0]())
    assert reads and max(reads) <= limit, max(reads)
    assert max(c.nbytes for c in chunks) <= limit
    np.testing.assert_array_equal(np.concatenate(chunks), load_cann(path, t).reshape(-1))


def test_a_window_of_planes_bigger_than_a_chunk_is_the_same_block(tmp_path, monkeypatch):
    """The explorer's slice of an NC1HWC0 tensor whose planes exceed the chunk: filled by bands."""
    from dumpscope.core.formats import device_chunks as dc

    root = tmp_path / "dump" / "20240101" / "0" / "m" / "1" / "0"
    a = np.random.default_rng(5).standard_normal((2, 20, 24, 30)).astype(np.float32)
    write_dump(root, "Op", "big", 1, 2, 1718260502000000, outputs=[SynthTensor(a, "float16", "NC1HWC0")])
    path = next(root.glob("Op.*"))
    t = read_header(path).outputs[0]
    want = load_cann(path, t)
    monkeypatch.setattr(dc, "CHUNK_BYTES", 1000)
    read, shape, lead = dc.device_windows(str(path), t.offset, t.format, t.shape, t.original_shape,
                                          np.dtype("float16"))
    assert lead == 2 and shape == want.shape
    for a_, lo, hi in ((0, 0, 20), (1, 3, 19), (1, 16, 17), (0, 15, 16)):
        np.testing.assert_array_equal(read(a_, lo, hi), want[a_, lo:hi])
