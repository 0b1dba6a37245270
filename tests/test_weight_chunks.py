"""Weight device layouts (FRACTAL_Z, grouped FRACTAL_Z, FRACTAL_Z_3D, C1HWNCoC0) read in logical chunks a
bounded window of the file at a time (issue 30: they were loaded whole): the same values, in the same logical
order, as the whole-tensor conversion (``to_logical``), on random shapes with padding, at any chunk size, by
either way of reading a window; stats, convert and the explorer's slices never load them whole; and the
peak memory of ``stats`` on a weight of hundreds of MB stays far below its size."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumpscope.core.formats import weight_chunks as wc
from dumpscope.core.formats.cann_dump import load_tensor as load_cann
from dumpscope.core.formats.cann_dump import read_header
from dumpscope.core.formats.device_chunks import device_chunks, device_windows
from dumpscope.core.query import open_query
from dumpscope.core.tensors import load as tensor_io
from synth.cann_writer import SynthTensor, write_dump

STEP = ("dump", "20240101", "0", "m", "1", "0")


def _one(tmp_path, fmt: str, shape: tuple, dt: str, groups: int = 0, original=None, seed: int = 0,
         c0=None):
    root = tmp_path.joinpath(*STEP)
    for old in root.glob("Conv2D.*"):
        old.unlink()
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if a.size > 3:
        a.flat[a.size // 3] = np.nan
    t_in = SynthTensor(a if original is None else a.reshape(original), dt, fmt, sub_format=groups,
                       original_shape=original, c0=c0)
    write_dump(root, "Conv2D", "w", 1, 2, 1718260502000000, outputs=[t_in])
    path = next(root.glob("Conv2D.*"))
    return path, read_header(path).outputs[0]


def _stored(dt: str) -> np.dtype:
    return np.dtype(np.uint16) if dt == "bfloat16" else np.dtype(dt)


def _values(chunks: list[np.ndarray], dt: str) -> np.ndarray:
    got = np.concatenate([c.reshape(-1) for c in chunks]) if chunks else np.zeros(0)
    return (got.astype(np.uint32) << 16).view(np.float32) if dt == "bfloat16" else got


def _check(path, t, dt: str, chunk_bytes: int) -> None:
    want = load_cann(path, t)  # the whole-tensor conversion (to_logical)
    made = device_chunks(str(path), t.offset, t.format, t.shape, t.original_shape, _stored(dt),
                         chunk_bytes=chunk_bytes, sub_format=t.sub_format)
    assert made is not None, (t.format, t.shape, t.original_shape, t.sub_format)
    make, shape = made
    chunks = list(make())
    assert tuple(shape) == want.shape
    assert max(c.nbytes for c in chunks) <= max(chunk_bytes, _stored(dt).itemsize)
    np.testing.assert_array_equal(_values(chunks, dt), want.reshape(-1))


# N and C off the 16 boundary (padding rows and channels), C below C0, one-pixel and odd kernels
CASES = [("FRACTAL_Z", (20, 19, 3, 3)), ("FRACTAL_Z", (5, 3, 7, 7)), ("FRACTAL_Z", (33, 40, 1, 1)),
         ("FRACTAL_Z", (16, 16, 2, 5)), ("FRACTAL_Z_3D", (18, 20, 2, 3, 3)), ("FRACTAL_Z_3D", (3, 5, 3, 1, 2)),
         ("C1HWNCoC0", (4, 20, 3, 3)), ("C1HWNCoC0", (2, 35, 1, 4))]


@pytest.mark.parametrize("fmt,shape", CASES)
@pytest.mark.parametrize("dt", ["float16", "float32", "bfloat16"])
@pytest.mark.parametrize("chunk_bytes", [2, 100, 1000, 1 << 30])
def test_chunks_are_the_whole_conversion_in_order(tmp_path, fmt, shape, dt, chunk_bytes):
    path, t = _one(tmp_path, fmt, shape, dt)
    _check(path, t, dt, chunk_bytes)


@pytest.mark.parametrize("groups,n,cin", [(2, 4, 3), (4, 8, 2), (3, 6, 3), (8, 8, 1), (5, 20, 7), (2, 64, 20)])
@pytest.mark.parametrize("chunk_bytes", [2, 300, 1 << 30])
def test_grouped_fractal_z(tmp_path, groups, n, cin, chunk_bytes):
    """``cin`` channels per group; GE packs several groups into one cube (a block diagonal)."""
    path, t = _one(tmp_path, "FRACTAL_Z", (n, cin, 3, 2), "float16", groups=groups)
    assert t.sub_format == groups
    _check(path, t, "float16", chunk_bytes)


@pytest.mark.parametrize("original", [(24, 40), (40,), (3, 20, 5)])
def test_short_original_shapes(tmp_path, original):
    shape = {2: (24, 40, 1, 1), 1: (1, 40, 1, 1), 3: (1, 3, 20, 5)}[len(original)]
    path, t = _one(tmp_path, "FRACTAL_Z", shape, "float32", original=original)
    assert tuple(t.original_shape) == original
    _check(path, t, "float32", 64)


@pytest.mark.parametrize("mode", ["read", "map"])
def test_both_ways_of_reading_a_window_agree(tmp_path, monkeypatch, mode):
    """Windows are read (dense) or memory-mapped (sparse): either way, the same values."""
    monkeypatch.setattr(wc, "DENSE", 0.0 if mode == "read" else 2.0)
    monkeypatch.setattr(wc, "SMALL_WINDOW", 0)
    maps: list[int] = []
    real = wc.mmap.mmap

    def counting(*args, **kw):
        maps.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(wc.mmap, "mmap", counting)
    for fmt, shape in CASES:
        path, t = _one(tmp_path, fmt, shape, "float16")
        _check(path, t, "float16", 256)
    assert bool(maps) == (mode == "map")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(["FRACTAL_Z", "FRACTAL_Z_3D", "C1HWNCoC0"]), n=st.integers(1, 40),
       c=st.integers(1, 40), h=st.integers(1, 4), w=st.integers(1, 4), d=st.integers(1, 3),
       dt=st.sampled_from(["float16", "float32"]), chunk=st.sampled_from([2, 50, 333, 4096]),
       seed=st.integers(0, 1000), c0=st.sampled_from([None, 4, 8, 32]))
def test_random_shapes(tmp_path, fmt, n, c, h, w, d, dt, chunk, seed, c0):
    """C0 is taken from the device shape: 16 by default, 4 (the _C04 formats), 32 (8-bit types)…"""
    shape = (n, c, d, h, w) if fmt == "FRACTAL_Z_3D" else (n, c, h, w)
    path, t = _one(tmp_path, fmt, shape, dt, seed=seed, c0=c0)
    _check(path, t, dt, chunk)


@pytest.mark.parametrize("fmt,shape", CASES[:2] + CASES[4:5] + CASES[6:7])
def test_windows_are_the_logical_blocks(tmp_path, monkeypatch, fmt, shape):
    from dumpscope.core.formats import device_chunks as dc

    monkeypatch.setattr(dc, "CHUNK_BYTES", 64)  # windows far smaller than one row
    path, t = _one(tmp_path, fmt, shape, "float16")
    want = load_cann(path, t)
    read, got_shape, lead = device_windows(str(path), t.offset, t.format, t.shape, t.original_shape,
                                           np.dtype("float16"), t.sub_format)
    assert lead == 2 and got_shape == want.shape
    n, c = want.shape[:2]
    for a, lo, hi in ((0, 0, c), (n - 1, 1, c), (n // 2, c - 1, c), (1 % n, 0, 1)):
        np.testing.assert_array_equal(read(a, lo, hi), want[a, lo:hi])


def test_stats_convert_and_slices_never_load_a_weight_whole(tmp_path, monkeypatch):
    from dumpscope.core.engines import convert as convert_mod
    from dumpscope.core.tensors.slicing import tensor_slice

    root = tmp_path.joinpath(*STEP)
    rng = np.random.default_rng(1)
    for i, (fmt, shape) in enumerate(CASES):
        a = rng.standard_normal(shape).astype(np.float32)
        a.flat[i] = np.inf
        write_dump(root, "Conv2D", f"w{i}", i, 2, 1718260502000000 + i, outputs=[SynthTensor(a, "float16", fmt)])
    q = open_query(str(tmp_path / "dump"), use_cache=False)
    refs = [t.ref() for o in q.ops() for t in q.tensors(o.id)]
    assert {r.format for r in refs} == {"FRACTAL_Z", "FRACTAL_Z_3D", "C1HWNCoC0"}
    whole = {r.path: tensor_io.load_tensor(r) for r in refs}

    def no_whole_load(ref):
        raise AssertionError(f"{ref.path}: loaded whole")

    monkeypatch.setattr(tensor_io, "load_tensor", no_whole_load)
    monkeypatch.setattr(convert_mod, "load_tensor", no_whole_load)
    from dumpscope.core.tensors import slicing
    monkeypatch.setattr(slicing, "load_tensor", no_whole_load)
    for ref in refs:
        arr = whole[ref.path].astype(np.float64)
        s = tensor_io.compute_tensor_stats(ref)
        fin = arr[np.isfinite(arr)]
        assert (s.count, s.posinf) == (arr.size, 1)
        assert (s.min, s.max) == (fin.min(), fin.max())
        part = tensor_slice(ref, (0, slice(1, None)))
        assert part.how == "windows"
        np.testing.assert_array_equal(part.values, whole[ref.path][0, 1:])
    errors: list[str] = []
    result = convert_mod.convert_tree(q, str(tmp_path / "out"), errors=errors)
    assert errors == [] and result.written == len(refs)
    for ref in refs:
        out = next((tmp_path / "out").rglob(f"{os.path.basename(ref.path)}.output.0.npy"))
        np.testing.assert_array_equal(np.load(out), whole[ref.path])


def test_a_weight_cut_short_is_one_named_error(tmp_path):
    path, t = _one(tmp_path, "FRACTAL_Z", (20, 19, 3, 3), "float16")
    q = open_query(str(tmp_path / "dump"), use_cache=False)
    ref = [t.ref() for o in q.ops() for t in q.tensors(o.id)][0]
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(tensor_io.TensorLoadError, match="truncated"):
        tensor_io.compute_tensor_stats(ref)


def test_overflow_count_of_a_weight_streams_and_ignores_padding(tmp_path, monkeypatch):
    """The overflow scan counts a device buffer holding NaN again on the logical tensor (padding may hold
    garbage): chunk by chunk now, and a NaN in a padding channel is not counted."""
    from dumpscope.core.tensors import nonfinite

    path, t = _one(tmp_path, "FRACTAL_Z", (20, 19, 3, 3), "float16")
    n_pad = t.shape[1] * t.shape[2]  # N padded to N1*N0
    pad = ((1 * 3 + 0) * 3 + 0) * n_pad * 16 + 0 * 16 + 5  # c1 1, h 0, w 0, n 0, c0 5: channel 21 >= C=19
    data = bytearray(path.read_bytes())
    data[t.offset + 2 * pad:t.offset + 2 * pad + 2] = np.array([np.nan], np.float16).tobytes()
    path.write_bytes(bytes(data))
    assert np.isnan(np.frombuffer(bytes(data[t.offset:t.offset + t.size]), np.float16)).sum() == 2

    def no_whole_load(ref):
        raise AssertionError(f"{ref.path}: loaded whole")

    monkeypatch.setattr(tensor_io, "load_tensor", no_whole_load)
    job = ("output", 0, "float16", tuple(t.original_shape), t.format, tuple(t.shape), None, t.offset, t.size,
           t.sub_format, None)
    uid, rows, err = nonfinite.count_unit((1, str(path), "cann", [job]))
    assert err is None
    assert rows == [("output", 0, 1, 0, 0, 20 * 19 * 9 // 3)]  # the one logical NaN (_one puts it at size // 3)


def test_chunks_of_the_corpus_weights_are_what_msprobe_converted(tmp_path):
    """The independent answer: msprobe 26.2's own FRACTAL_Z conversion of the synthetic corpus
    (tests/data/cann_oracle.json, made by make_cann_oracle.py), checked on the streamed chunks."""
    import importlib.util

    from conftest import DATA
    from dumpscope.core.formats.dtypes import decode
    from synth.cann_corpus import CORPUS, write_corpus

    spec = importlib.util.spec_from_file_location("make_cann_oracle", DATA / "make_cann_oracle.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    oracle = json.loads((DATA / "cann_oracle.json").read_text())["files"]
    write_corpus(tmp_path)
    checked = 0
    for rel, want in sorted(oracle.items()):
        if not rel.startswith(CORPUS + "/") or "tensors" not in want:
            continue
        path = tmp_path / rel
        h = read_header(path)
        for t, w in zip(h.inputs + h.outputs, want["tensors"]):
            if t.format not in ("FRACTAL_Z", "FRACTAL_Z_3D", "C1HWNCoC0") or "logical" not in w:
                continue
            made = device_chunks(str(path), t.offset, t.format, t.shape, t.original_shape,
                                 tensor_io.payload_dtype(t.dtype), chunk_bytes=64, sub_format=t.sub_format)
            assert made is not None, rel
            raw = np.concatenate([c.reshape(-1) for c in made[0]()])
            bits = t.dtype in tensor_io.BITS_DTYPES  # bfloat16/float8 chunks hold their bit patterns
            values = decode(raw.view(np.uint8), t.dtype, raw.size) if bits else raw
            got = dict(maker.summary(values), shape=list(made[1]))
            assert got == w["logical"], (rel, t.io, t.slot)
            checked += 1
    assert checked >= 3, checked  # the corpus's FRACTAL_Z weights msprobe converts
