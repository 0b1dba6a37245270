"""Restricted torch ``.pt`` reader, ``.npy`` header reader, and the optional ``.h5`` layout."""

from __future__ import annotations

import io
import os
import pickle
import struct
import sys
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpscope.core.formats import pt_reader
from dumpscope.core.formats.npy_header import (
    NpyFormatError,
    load_npy,
    parse_npy_header,
    read_npy_header,
)
from dumpscope.core.formats.pt_reader import (
    PtFormatError,
    interpret_pickle,
    load_pt,
    read_pt_header,
)
from dumpscope.core.layouts import torch_h5
from dumpscope.core.layouts.base import DirListing
from dumpscope.core.model import Problem, TensorRecord
from synth.api_dump_writer import rebuild_tensor_pickle, to_bfloat16_bits, write_pt

# ----------------------------------------------------------------------------- .pt


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int64", "int32", "int16",
                                   "int8", "uint8", "bool", "complex64"])
def test_pt_roundtrip(tmp_path, dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 5 - 2).astype(dtype)
    path = write_pt(str(tmp_path / "t.pt"), a)
    info = read_pt_header(path)
    assert info.shape == (2, 3, 4) and info.dtype == dtype and info.stride == (12, 4, 1)
    out = load_pt(path)
    assert out.dtype == a.dtype and out.flags.writeable
    np.testing.assert_array_equal(out, a)


def test_pt_bfloat16_is_exact_float32(tmp_path):
    a = np.array([1.0, -2.5, 3.14159, 1e30, np.inf, -0.0], dtype=np.float32)
    path = write_pt(str(tmp_path / "b.pt"), a, dtype="bfloat16")
    assert read_pt_header(path).dtype == "bfloat16"
    out = load_pt(path)
    expected = (to_bfloat16_bits(a).astype(np.uint32) << 16).view(np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, expected)
    assert out[0] == 1.0 and out[1] == -2.5 and abs(out[2] - 3.14159) < 0.02


def test_pt_strided_view_with_offset(tmp_path):
    storage = np.arange(30, dtype=np.float32)
    expected = storage[2:].reshape(4, 7)[:, :3].T  # [i, j] = storage[2 + i + 7 j]
    view = np.lib.stride_tricks.as_strided(storage[2:], (3, 4), (4, 28))
    path = write_pt(str(tmp_path / "v.pt"), view, storage=storage, offset=2, stride=(1, 7))
    np.testing.assert_array_equal(load_pt(path), expected)
    assert load_pt(path).shape == (3, 4)


def test_pt_zero_size_and_scalar(tmp_path):
    np.testing.assert_array_equal(load_pt(write_pt(str(tmp_path / "z.pt"), np.zeros((0, 3), np.float32))),
                                  np.zeros((0, 3), np.float32))
    assert load_pt(write_pt(str(tmp_path / "s.pt"), np.float32(7.5).reshape(()))) == 7.5


def test_pt_parameter_and_untyped_storage(tmp_path):
    a = np.arange(6, dtype=np.float32)
    inner = rebuild_tensor_pickle("FloatStorage", "0", 6, 0, (6,), (1,))[2:-1]  # drop PROTO/STOP
    param = (b"\x80\x02ctorch._utils\n_rebuild_parameter\n(" + inner + b"\x89ccollections\n"
             b"OrderedDict\n)Rt" + b"R.")
    path = write_pt(str(tmp_path / "p.pt"), a, pickle_bytes=param)
    np.testing.assert_array_equal(load_pt(path), a)
    raw = rebuild_tensor_pickle("UntypedStorage", "0", 24, 0, (24,), (1,), storage_module="torch.storage")
    path = write_pt(str(tmp_path / "u.pt"), a, pickle_bytes=raw)
    assert read_pt_header(path).dtype == "uint8" and load_pt(path).size == 24


def test_malicious_pickle_is_refused_without_executing(tmp_path):
    canary = tmp_path / "canary"
    evil = b"cos\nsystem\n(X" + struct.pack("<I", len(f"touch {canary}")) + \
        f"touch {canary}".encode() + b"tR."
    path = write_pt(str(tmp_path / "evil.pt"), np.zeros(1, np.float32), pickle_bytes=evil)
    with pytest.raises(PtFormatError, match="refusing to execute"):
        load_pt(path)
    # pickle built by the real pickler, calling a builtin via REDUCE
    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {canary}",))
    with pytest.raises(PtFormatError, match="refusing to execute"):
        interpret_pickle(pickle.dumps(Evil(), protocol=2), "evil")
    with pytest.raises(PtFormatError, match="refusing to execute"):
        interpret_pickle(pickle.dumps(Evil(), protocol=4), "evil")
    assert not canary.exists()


@pytest.mark.parametrize("payload,reason", [
    (pickle.dumps([1, 2, 3], protocol=2), "expected one tensor"),
    (pickle.dumps({"a": 1}, protocol=2), "expected one tensor"),
    (b"\x80\x02cbuiltins\neval\n.", "builtins.eval"),
    (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nEvilStorage\n", "torch.EvilStorage"),
    (b"\x80\x02ccollections\nOrderedDict\n(K\x01K\x02tR.", "non-empty OrderedDict"),
])
def test_refusals(tmp_path, payload, reason):
    path = write_pt(str(tmp_path / "r.pt"), np.zeros(1, np.float32), pickle_bytes=payload)
    with pytest.raises(PtFormatError) as err:
        read_pt_header(path)
    assert reason in str(err.value) and "r.pt" in str(err.value)


def test_broken_files(tmp_path):
    legacy = tmp_path / "legacy.pt"
    legacy.write_bytes(pickle.dumps({"x": 1}))
    with pytest.raises(PtFormatError, match="legacy.pt: not a torch zip"):
        read_pt_header(str(legacy))
    # storage shorter than numel
    a = np.arange(4, dtype=np.float32)
    path = write_pt(str(tmp_path / "short.pt"), a, pickle_bytes=rebuild_tensor_pickle(
        "FloatStorage", "0", 100, 0, (100,), (1,)))
    with pytest.raises(PtFormatError, match="truncated"):
        load_pt(path)
    # view beyond storage
    path = write_pt(str(tmp_path / "beyond.pt"), a, pickle_bytes=rebuild_tensor_pickle(
        "FloatStorage", "0", 4, 2, (4,), (1,)))
    with pytest.raises(PtFormatError, match="exceeds"):
        load_pt(path)
    # missing storage member
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", rebuild_tensor_pickle("FloatStorage", "7", 4, 0, (4,), (1,)))
    (tmp_path / "nostore.pt").write_bytes(buf.getvalue())
    with pytest.raises(PtFormatError, match="missing"):
        read_pt_header(str(tmp_path / "nostore.pt"))


_VALID = rebuild_tensor_pickle("FloatStorage", "0", 12, 0, (3, 4), (4, 1))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_interpreter_fuzz_random_bytes(data):
    try:
        interpret_pickle(data, "fuzz")
    except PtFormatError:
        pass


@settings(max_examples=400, deadline=None)
@given(st.integers(0, len(_VALID) - 1), st.binary(min_size=1, max_size=4), st.booleans())
def test_interpreter_fuzz_mutated_valid(pos, patch, insert):
    data = _VALID[:pos] + patch + _VALID[pos + (0 if insert else len(patch)):]
    try:
        result = interpret_pickle(data, "fuzz")
    except PtFormatError:
        return
    assert result is None or isinstance(result, (int, float, str, bytes, tuple, list, dict, bool,
                                                 pt_reader.PtTensorInfo, pt_reader._Storage,
                                                 pt_reader._Global))


# ----------------------------------------------------------------------------- .npy


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_header_versions(tmp_path, version):
    a = np.arange(12, dtype=">f4").reshape(3, 4)
    path = tmp_path / "a.npy"
    with open(path, "wb") as fh:
        np.lib.format.write_array(fh, a, version=version)
    h = read_npy_header(str(path))
    assert (h.shape, h.dtype, h.fortran_order) == ((3, 4), "float32", False)
    assert h.nbytes == 48 and h.data_offset + 48 == h.file_size and not h.truncated
    np.testing.assert_array_equal(load_npy(str(path)), a)


def test_npy_fortran_zero_size_and_truncated(tmp_path):
    f = np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3))
    np.save(tmp_path / "f.npy", f)
    assert read_npy_header(str(tmp_path / "f.npy")).fortran_order
    np.testing.assert_array_equal(load_npy(str(tmp_path / "f.npy")), f)
    np.save(tmp_path / "z.npy", np.zeros((0, 5), np.float16))
    assert load_npy(str(tmp_path / "z.npy")).shape == (0, 5)
    np.save(tmp_path / "t.npy", np.zeros(100, np.float64))
    raw = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(raw[:-10])
    h = read_npy_header(str(tmp_path / "t.npy"))
    assert h.truncated and h.file_size == len(raw) - 10
    with pytest.raises(NpyFormatError, match="t.npy: truncated"):
        load_npy(str(tmp_path / "t.npy"))


def test_npy_refuses_objects_and_garbage(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(NpyFormatError, match="object arrays are not supported"):
        read_npy_header(str(tmp_path / "o.npy"))
    with pytest.raises(NpyFormatError, match="object arrays"):
        load_npy(str(tmp_path / "o.npy"))
    header = b"{'descr': __import__('os').system('x'), 'fortran_order': False, 'shape': (1,)}"
    evil = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header
    with pytest.raises(NpyFormatError, match="unreadable .npy header"):
        parse_npy_header(evil, len(evil), "evil.npy")
    (tmp_path / "x.npy").write_bytes(b"hello")
    with pytest.raises(NpyFormatError, match="x.npy: not a .npy"):
        read_npy_header(str(tmp_path / "x.npy"))
    with pytest.raises(NpyFormatError, match="cannot read"):
        read_npy_header(str(tmp_path / "missing.npy"))


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_npy_header_fuzz(data):
    try:
        parse_npy_header(b"\x93NUMPY" + data, 10_000, "fuzz.npy")
    except NpyFormatError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_npy_header_dict_fuzz(text):
    raw = text.encode("latin1", "replace")
    head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(raw)) + raw
    try:
        parse_npy_header(head, 10_000, "fuzz.npy")
    except NpyFormatError:
        pass


# ----------------------------------------------------------------------------- .h5


def _listing(path):
    return DirListing(str(path), str(path), ("rank3",), sorted(os.listdir(path)), [])


def test_h5_without_h5py_is_one_problem_per_file(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "h5py", None)  # h5py not installed: ``import h5py`` raises ImportError
    for name in ("a.h5", "b.h5", "c.txt"):
        (tmp_path / name).write_bytes(b"\x89HDF\r\n\x1a\n")
    listing = _listing(tmp_path)
    items = list(torch_h5.TorchH5Layout().scan_dir(listing))
    assert [type(i) for i in items] == [Problem, Problem]
    assert items[0].error == "a.h5: reading .h5 dumps needs h5py (pip install 'dumpscope[h5]')"
    assert listing.claimed == {"a.h5", "b.h5"}


def test_h5_with_h5py(tmp_path):
    h5py = pytest.importorskip("h5py")
    a = np.arange(6, dtype=np.float16).reshape(2, 3)
    with h5py.File(tmp_path / "dump.h5", "w") as fh:
        fh["/add/3/input/0"] = a
        fh["/add/3/input/1"] = a + 1
        fh["/add/3/output/0"] = a * 2
        fh["/mul/1/output/0"] = np.ones(4, np.int32)
    (tmp_path / "bad.h5").write_bytes(b"not hdf5")
    items = list(torch_h5.TorchH5Layout().scan_dir(_listing(tmp_path)))
    problems = [i for i in items if isinstance(i, Problem)]
    assert len(problems) == 1 and problems[0].path.endswith("bad.h5")
    recs = {(r.op_name, r.io, r.slot): r for r in items if isinstance(r, TensorRecord)}
    assert set(recs) == {("add.3", "input", 0), ("add.3", "input", 1), ("add.3", "output", 0),
                         ("mul.1", "output", 0)}
    r = recs[("add.3", "output", 0)]
    assert (r.producer, r.storage, r.op_type, r.dtype, r.shape, r.rank, r.order_hint) == (
        "torch_h5", "h5", "add", "float16", (2, 3), 3, 3.0)
    np.testing.assert_array_equal(torch_h5.load_tensor(r), a * 2)
