"""``tensor_io.OnceReader`` (compare's loader): each small dump file read once, values and errors
exactly those of ``load_tensor``."""

from __future__ import annotations

import builtins
import os

import numpy as np
import pytest

from dumpscope.core.tensors import load as tensor_io
from dumpscope.core.model import STORAGE_CANN, STORAGE_NPY
from synth.cann_writer import SynthTensor, encode_dump
from dumpscope.core.tensors.load import OnceReader, TensorLoadError, TensorRef, load_tensor


def _cann_file(tmp_path, name="Conv2D.op.1.0.1700000000000000"):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 16, 4, 4)).astype(np.float16)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    c = rng.standard_normal((1, 16, 4, 4)).astype(np.float32)
    p = tmp_path / name
    p.write_bytes(encode_dump("net/conv", [SynthTensor(a, "float16", "NC1HWC0"), SynthTensor(b, "bfloat16")],
                              [SynthTensor(c, "float32", "NC1HWC0")], 1700000000000000))
    refs = [TensorRef(str(p), STORAGE_CANN, io, slot, "", "", ()) for io, slot in
            (("input", 0), ("input", 1), ("output", 0))]
    return p, refs


def _npy_files(tmp_path):
    rng = np.random.default_rng(4)
    arrays = {"c.npy": rng.standard_normal((3, 4)).astype(np.float32),
              "f.npy": np.asfortranarray(rng.standard_normal((5, 2))),
              "be.npy": rng.integers(-9, 9, (7,)).astype(">i4"),
              "empty.npy": np.zeros((0, 3), np.float16)}
    refs = []
    for name, arr in arrays.items():
        np.save(tmp_path / name, arr)
        refs.append(TensorRef(str(tmp_path / name), STORAGE_NPY, "output", 0, "", "", ()))
    return refs


def _count_opens(monkeypatch):
    opened: list[str] = []
    real = os.open

    def counting(path, *a, **k):
        opened.append(os.fspath(path))
        return real(path, *a, **k)

    real_builtin = builtins.open

    def counting_builtin(path, *a, **k):
        if isinstance(path, (str, bytes, os.PathLike)):
            opened.append(os.fsdecode(path))
        return real_builtin(path, *a, **k)

    monkeypatch.setattr(os, "open", counting)
    monkeypatch.setattr(builtins, "open", counting_builtin)
    return opened


def test_cann_file_read_once_same_values(tmp_path, monkeypatch):
    p, refs = _cann_file(tmp_path)
    expected = [load_tensor(r) for r in refs]
    opened = _count_opens(monkeypatch)
    monkeypatch.setattr(tensor_io, "load_tensor", lambda ref: pytest.fail("fell back to load_tensor"))
    reader = OnceReader(refs)
    got = [reader.load(r) for r in refs]
    assert opened == [str(p)]  # one open for the header and all three payloads
    for e, g in zip(expected, got):
        assert e.dtype == g.dtype and e.shape == g.shape
        np.testing.assert_array_equal(e, g)
    assert reader._files == {} and reader._left == {}  # the buffer is dropped after its last tensor


def test_npy_files_same_values_and_dtype(tmp_path, monkeypatch):
    refs = _npy_files(tmp_path)
    expected = [load_tensor(r) for r in refs]
    monkeypatch.setattr(tensor_io, "load_tensor", lambda ref: pytest.fail("fell back to load_tensor"))
    opened = _count_opens(monkeypatch)
    reader = OnceReader(refs)
    got = [reader.load(r) for r in refs]
    assert opened == [r.path for r in refs]
    for e, g in zip(expected, got):
        assert e.dtype == g.dtype and e.shape == g.shape
        np.testing.assert_array_equal(e, g)


def test_big_files_keep_the_existing_path(tmp_path, monkeypatch):
    _p, refs = _cann_file(tmp_path)
    calls: list[TensorRef] = []
    real = tensor_io.load_tensor
    monkeypatch.setattr(tensor_io, "load_tensor", lambda ref: calls.append(ref) or real(ref))
    reader = OnceReader(refs, max_bytes=64)  # every file is "big"
    got = [reader.load(r) for r in refs]
    assert calls == refs
    for e, g in zip([real(r) for r in refs], got):
        np.testing.assert_array_equal(e, g)


def test_errors_are_load_tensors(tmp_path):
    p, refs = _cann_file(tmp_path)
    p.write_bytes(p.read_bytes()[:-10])  # the output's payload is cut short
    missing = TensorRef(str(p), STORAGE_CANN, "output", 3, "", "", ())
    gone = TensorRef(str(tmp_path / "nope.npy"), STORAGE_NPY, "output", 0, "", "", ())
    for ref in (refs[2], missing, gone):
        with pytest.raises(TensorLoadError) as want:
            load_tensor(ref)
        with pytest.raises(TensorLoadError) as got:
            OnceReader([ref]).load(ref)
        assert str(got.value) == str(want.value)
    np.testing.assert_array_equal(OnceReader(refs).load(refs[0]), load_tensor(refs[0]))


def _cann_tree(root, scale: float):
    from synth.cann_writer import file_name_of

    folder = root / "20240101120000" / "0" / "ge_default_20240101120000_1" / "1" / "0"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(5)
    for k, op_type in enumerate(("Conv2D", "Relu", "Add")):
        a = rng.standard_normal((1, 16, 2, 2)).astype(np.float16)
        b = rng.standard_normal((2, 3)).astype(np.float32)
        name = f"net/block/{op_type}"
        ts = 1700000000000000 + k
        (folder / f"{op_type}.{file_name_of(name)}.{k + 1}.0.{ts}").write_bytes(encode_dump(
            name, [SynthTensor(a, "float16", "NC1HWC0"), SynthTensor(b, "float32")],
            [SynthTensor(a * np.float16(scale), "float16", "NC1HWC0")], ts))
    return root


def test_compare_reads_each_dump_file_once(tmp_path, monkeypatch):
    from dumpscope.core.engines.compare import compare_dumps
    from dumpscope.core.query import open_query

    g = open_query(str(_cann_tree(tmp_path / "g", 1.0)))
    t = open_query(str(_cann_tree(tmp_path / "t", 2.0)))
    opened = _count_opens(monkeypatch)
    doc = compare_dumps(g, t)
    dump_files = [p for p in opened if "/20240101120000/" in p]
    assert len(doc["rows"]) == 9 and len(dump_files) == 6 and len(set(dump_files)) == 6
    rows = {(r["name"], r["io"], r["slot"]): r for r in doc["rows"]}
    assert rows[("net/block/Relu", "input", 1)]["max_abs_err"] == 0.0
    assert rows[("net/block/Relu", "output", 0)]["cosine"] == pytest.approx(1.0)
    assert rows[("net/block/Relu", "output", 0)]["max_rel_err"] == pytest.approx(1.0)


def test_value_chunks_same_as_the_streaming_path(tmp_path, monkeypatch):
    _p, refs = _cann_file(tmp_path)
    fmt = {(t.io, t.slot): t.format for t in tensor_io._cann_header(refs[0].path).tensors}
    refs = [tensor_io.TensorRef(r.path, r.storage, r.io, r.slot, "", "", tuple(load_tensor(r).shape),
                                format=fmt[(r.io, r.slot)]) for r in refs]  # as the index has them
    assert sorted(fmt.values()) == ["NC1HWC0", "NC1HWC0", "ND"]
    refs += [tensor_io.TensorRef(r.path, r.storage, r.io, r.slot, "", "", tuple(load_tensor(r).shape))
             for r in _npy_files(tmp_path)]
    expected = [tensor_io.value_chunks(r) for r in refs]
    monkeypatch.setattr(tensor_io, "value_chunks", lambda ref: pytest.fail("fell back to value_chunks"))
    reader = OnceReader(refs)
    for ref, (make_e, shape_e, dt_e) in zip(refs, expected):
        make, shape, dt = reader.value_chunks(ref)
        assert (shape, dt) == (shape_e, dt_e)
        want, got = np.concatenate(list(make_e())), np.concatenate(list(make()))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("first", [16, "size-1", "size", "size+1", None])
def test_a_file_longer_than_the_first_read_is_read_whole(tmp_path, monkeypatch, first):
    """``OnceReader`` reads a file in one ``read`` when it is shorter than its first read (no fstat), and
    asks the size of one that fills it: the values are ``load_tensor``'s either way, still one open, and
    a size limit below the file still leaves it to the canonical loader."""
    p, refs = _cann_file(tmp_path)
    size = p.stat().st_size
    if first is not None:
        monkeypatch.setattr(tensor_io, "ONCE_FIRST_READ", {"size-1": size - 1, "size": size,
                                                           "size+1": size + 1}.get(first, first))
    expected = [load_tensor(r) for r in refs]
    stats: list[int] = []
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: stats.append(fd) or real_fstat(fd))
    opened = _count_opens(monkeypatch)
    monkeypatch.setattr(tensor_io, "load_tensor", lambda ref: pytest.fail("fell back to load_tensor"))
    reader = OnceReader(refs)
    for e, r in zip(expected, refs):
        g = reader.load(r)
        assert e.dtype == g.dtype and e.shape == g.shape
        np.testing.assert_array_equal(e, g)
    assert opened == [str(p)]
    assert len(stats) == (1 if first in (16, "size-1", "size") else 0)
    monkeypatch.undo()
    calls: list[TensorRef] = []
    real = tensor_io.load_tensor
    monkeypatch.setattr(tensor_io, "load_tensor", lambda ref: calls.append(ref) or real(ref))
    small = OnceReader(refs, max_bytes=size - 1)
    for e, r in zip(expected, refs):
        np.testing.assert_array_equal(small.load(r), e)
    assert calls == refs


def test_flat_values_are_the_arrays_values(tmp_path, monkeypatch):
    """``OnceReader.flat`` (what compare's batches read) gives ``array``'s values 1-D in C order, same
    dtype, for tensors the canonical decoder reads (the first file of a layout, ``.npy`` in both orders)
    and for those a learnt plan gathers (the next files), and None wherever ``array`` gives None (a
    shape the index does not hold); ``detached`` of it holds nothing of the file's bytes."""
    from dumpscope.core.tensors import layout_plans

    monkeypatch.setattr(layout_plans, "PLANS", {})
    cann = []
    for k in range(3):
        _p, refs = _cann_file(tmp_path, f"Conv2D.op.{k}.0.170000000000000{k}")
        shapes = [load_tensor(r).shape for r in refs]
        cann += [TensorRef(r.path, r.storage, r.io, r.slot, "", "", s) for r, s in zip(refs, shapes)]
    npy = [TensorRef(r.path, r.storage, r.io, r.slot, "", "", load_tensor(r).shape) for r in _npy_files(tmp_path)]
    wrong = [TensorRef(r.path, r.storage, r.io, r.slot, "", "", (7,) + tuple(r.shape)) for r in cann[3:6] + npy[:1]]
    for refs in ([cann[i:i + 3] for i in (0, 3, 6)] + [npy, wrong]):
        by_array = [OnceReader(refs).array(r) for r in refs]
        reader = OnceReader(refs)
        for r, want in zip(refs, by_array):
            got = reader.flat(r)
            if want is None:
                assert got is None and r in wrong
                continue
            assert got.ndim == 1 and got.dtype == want.dtype and got.tobytes() == np.ascontiguousarray(want).tobytes()
            kept = tensor_io.detached(got)
            root = kept
            while isinstance(root.base, np.ndarray):
                root = root.base
            assert root.base is None
    assert [p is not None for p in layout_plans.PLANS.values()] == [True, False, True]  # f16/f32 NC1HWC0 planned
