"""Compare and stats read .pt, .h5 and packed int4 tensors a chunk at a time where the format allows
(issue 20): the same values as the whole-tensor loaders, without calling them."""

from __future__ import annotations

import sys
import zipfile

import numpy as np
import pytest

from conftest import unpack_data
from dumpscope.core.tensors import load as tensor_io
from dumpscope.core.formats.dtypes import decode
from dumpscope.core.formats import pt_reader
from dumpscope.core.layouts import torch_h5
from synth.api_dump_writer import write_pt
from dumpscope.core.tensors.load import TensorRef, value_chunks


def _ref(path, storage, dtype, shape, **kw) -> TensorRef:
    return TensorRef(path=str(path), storage=storage, io="output", slot=0, dtype=dtype, stored_dtype="",
                     shape=tuple(shape), **kw)


def _values(ref) -> np.ndarray:
    make, shape, _dt = value_chunks(ref)
    chunks = list(make())
    return np.concatenate([c.reshape(-1) for c in chunks]).reshape(shape), len(chunks)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64"])
def test_pt_is_read_straight_off_the_zip_in_chunks(tmp_path, monkeypatch, dtype):
    a = (np.arange(3 * 5 * 7, dtype=np.float64).reshape(3, 5, 7) - 50) / 4
    path = write_pt(str(tmp_path / "x.pt"), a.astype(np.float32) if dtype == "bfloat16" else a.astype(dtype),
                    dtype=dtype)
    want = pt_reader.load_pt(path)
    monkeypatch.setattr(pt_reader, "load_pt", lambda *a, **k: pytest.fail("loaded whole"))
    monkeypatch.setattr(tensor_io._read_chunks, "__defaults__", (8,))  # 8 elements a chunk
    got, n = _values(_ref(path, "pt", dtype, a.shape))
    np.testing.assert_array_equal(got, want)
    assert n == -(-a.size // 8)


def test_pt_that_cannot_stream_is_loaded_whole_and_right(tmp_path):
    storage = np.arange(40, dtype=np.float32)
    strided = write_pt(str(tmp_path / "t.pt"), storage[3:23:2].reshape(2, 5), storage=storage, offset=3,
                       stride=(10, 2))
    assert pt_reader.stored_payload(strided) is None  # a view with gaps
    np.testing.assert_array_equal(_values(_ref(strided, "pt", "float32", (2, 5)))[0], storage[3:23:2].reshape(2, 5))
    squeezed = tmp_path / "z.pt"  # the same tensor, its storage deflated
    with zipfile.ZipFile(write_pt(str(tmp_path / "c.pt"), storage)) as src, \
            zipfile.ZipFile(squeezed, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            dst.writestr(item.filename, src.read(item.filename), zipfile.ZIP_DEFLATED)
    assert pt_reader.stored_payload(str(squeezed)) is None
    np.testing.assert_array_equal(_values(_ref(squeezed, "pt", "float32", (40,)))[0], storage)


def test_real_msprobe_pt_files_stream_like_load_pt(tmp_path_factory, monkeypatch):
    """torch.save pads each storage with a zip extra field: the offset must come from the local header."""
    root = unpack_data(tmp_path_factory, "real_msprobe26")
    files = sorted(root.rglob("*.pt"))
    assert files
    for path in files:
        want = pt_reader.load_pt(str(path))
        assert pt_reader.stored_payload(str(path)) is not None, path
        got, _n = _values(_ref(path, "pt", want.dtype.name, want.shape))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("count", [0, 1, 7, 8, 33])
def test_packed_int4_decodes_a_chunk_at_a_time(tmp_path, monkeypatch, count):
    rng = np.random.default_rng(count)
    raw = rng.integers(0, 256, (count + 1) // 2, dtype=np.uint8).tobytes()
    path = tmp_path / "w.bin"
    path.write_bytes(b"HEAD" + raw)
    ref = _ref(path, "raw", "int4", (count,), offset=4)
    monkeypatch.setattr(tensor_io, "load_tensor", lambda r: pytest.fail("loaded whole"))
    monkeypatch.setattr(tensor_io, "PACKED_CHUNK_BYTES", 3)  # 6 values a chunk
    got, n = _values(ref)
    np.testing.assert_array_equal(got, decode(np.frombuffer(raw, np.uint8), "int4", count))
    assert got.dtype == np.int8 and (count < 7 or n > 1)


class _FakeH5:
    """h5py's File/Dataset surface over numpy arrays, counting the rows each read returns."""

    def __init__(self, data):
        self.data, self.reads = data, []

    def File(self, path, mode):  # noqa: N802 (h5py's name)
        fake = self

        class _File:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def __getitem__(self, key):
                arr = fake.data[key]

                class _Ds:
                    shape, dtype = arr.shape, arr.dtype

                    def __getitem__(self, index):
                        out = arr[index]
                        fake.reads.append(np.asarray(out).size)
                        return out

                return _Ds()

        return _File()


def test_h5_datasets_are_read_a_block_of_rows_at_a_time(tmp_path, monkeypatch):
    a = np.arange(50 * 6, dtype=np.float32).reshape(50, 6)
    fake = _FakeH5({"op/0/output/0": a})
    monkeypatch.setitem(sys.modules, "h5py", fake)  # what ``import h5py`` gives the layout
    monkeypatch.setattr(torch_h5, "load_dataset", lambda *x: pytest.fail("loaded whole"))
    monkeypatch.setattr(torch_h5, "CHUNK_ELEMENTS", 60)  # ten rows a read
    ref = _ref("x.h5", "h5", "float32", (50, 6), extra={"dataset": "op/0/output/0"})
    got, n = _values(ref)
    np.testing.assert_array_equal(got, a)
    assert n == 5 and max(fake.reads) == 60
