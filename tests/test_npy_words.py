"""bfloat16 (and float8) ``.npy`` files that hold integer words: numpy has no bfloat16, so a writer
saves the bit patterns (``<u2``) and only the file's name says what they are.  ``ops`` calls such a
tensor bfloat16; every reader must then decode the words as bfloat16 (stats, values, slices,
non-finite counts, compare), or name the file when the words cannot be its bits (issue 33).

Truth: float32 values that bfloat16 holds exactly, their bits taken with numpy (the high 16 bits).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import cli_json
from dumpscope.core.formats import dtypes
from dumpscope.core.query import open_query
from dumpscope.core.tensors.load import TensorLoadError, load_tensor
from dumpscope.core.tensors.slicing import tensor_slice
from dumpscope.tui.cli.entry import main

VALUES = np.array([[1.5, -2.25, 3.0], [0.0, np.nan, np.inf], [-0.5, 2.0 ** -130, 65280.0]], dtype=np.float32)
NAME = "Add.Add-op1.0.0.1700000000.{io}.0.DefaultFormat.{dtype}.npy"


def _bits(a: np.ndarray) -> np.ndarray:
    return (a.view(np.uint32) >> 16).astype(np.uint16)


def _tree(root, out: np.ndarray, dtype: str = "bfloat16", inp: np.ndarray | None = None):
    d = root / "rank_0" / "Net" / "0" / "0"
    d.mkdir(parents=True)
    np.save(d / NAME.format(io="output", dtype=dtype), out)
    if inp is not None:
        np.save(d / NAME.format(io="input", dtype=dtype), inp)
    return root


def test_truth_is_exact_in_bfloat16():
    back = (_bits(VALUES).astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(back, VALUES, equal_nan=True)


def test_u2_words_named_bfloat16_get_bfloat16_statistics(tmp_path, capsys):
    words = _tree(tmp_path / "words", _bits(VALUES))
    floats = _tree(tmp_path / "floats", VALUES, dtype="float32")
    got = cli_json(capsys, "stats", str(words), "Add-op1")
    want = cli_json(capsys, "stats", str(floats), "Add-op1")
    assert got["dtype"] == "bfloat16"
    fin = VALUES[np.isfinite(VALUES)]
    assert (got["min"], got["max"], got["nan"], got["posinf"], got["count"]) == \
        (float(fin.min()), float(fin.max()), 1, 1, 9)
    for k in ("min", "max", "mean", "l2norm", "zeros", "nan", "posinf", "neginf", "count"):
        assert got[k] == pytest.approx(want[k], rel=1e-12), k


def test_every_reader_decodes_the_words(tmp_path, capsys):
    root = _tree(tmp_path / "words", _bits(VALUES))
    q = open_query(str(root))
    (t,) = q.tensors(q.resolve_op("Add-op1").id)
    assert (t.dtype, t.stored_dtype) == ("bfloat16", "bfloat16")  # what the bytes are: no stored-dtype note
    arr = load_tensor(t.ref())
    assert arr.dtype == np.float32 and np.array_equal(arr, VALUES, equal_nan=True)
    part = tensor_slice(t.ref(), (slice(1, 3), slice(None, None, 2)))
    assert part.how == "mapped" and np.array_equal(part.values, VALUES[1:3, ::2], equal_nan=True)
    doc = cli_json(capsys, "overflow", str(root))
    (op,) = doc["ops"]
    assert (op["nan"], op["posinf"], op["neginf"]) == (1, 1, 0)


def test_compare_reads_the_words_as_bfloat16(tmp_path, capsys):
    words = _tree(tmp_path / "words", _bits(VALUES))
    floats = _tree(tmp_path / "floats", VALUES, dtype="float32")
    doc = cli_json(capsys, "compare", str(floats), str(words))
    (row,) = doc["rows"]
    assert row["max_abs_err"] == 0.0 and row["target"]["dtype"] == "bfloat16"


def test_words_of_another_width_are_a_named_problem(tmp_path, capsys):
    root = _tree(tmp_path / "w", _bits(VALUES), inp=_bits(VALUES).astype(np.uint8))
    code = main(["stats", str(root), "Add-op1", "--io", "input", "--json"])
    err = capsys.readouterr().err
    assert code != 0 and "input.0.DefaultFormat.bfloat16.npy" in err and "not bfloat16 bit patterns" in err
    show = cli_json(capsys, "show", str(root), "Add-op1")["op"]
    assert any("not bfloat16 bit patterns" in n for n in show["dtype_notes"])
    q = open_query(str(root))
    t = next(t for t in q.tensors(q.resolve_op("Add-op1").id) if t.io == "input")
    with pytest.raises(TensorLoadError, match="not decoded"):
        load_tensor(t.ref())


def test_float_headers_keep_their_values():
    """A float header holds values (MindSpore writes bfloat16 as float32): not words."""
    assert dtypes.npy_words("bfloat16", np.dtype("<f4")) is None
    assert dtypes.npy_words("bfloat16", np.dtype("<f2")) is None
    assert dtypes.npy_words("float32", np.dtype("<u4")) is None
    assert dtypes.npy_words("bfloat16", np.dtype("<u2")) is True
    assert dtypes.npy_words("bfloat16", np.dtype("<i2")) is True
    assert dtypes.npy_words("bfloat16", np.dtype(">u2")) is False
    assert dtypes.npy_words("float8_e4m3fn", np.dtype("u1")) is True
    assert json.dumps(dtypes.npy_words("bfloat16", np.dtype("<u4"))) == "false"
