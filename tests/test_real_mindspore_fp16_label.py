"""A real MindSpore 2.10 CPU dump of ``Dense(4, 3).to_float(float16)`` (tests/data/real_ms210_fp16_label.tar.gz, see
its README): four files are named Float16, with a ``'<f2'`` header, over float32 payloads.  They are named problems
and never decoded as labelled (``np.load`` reads them as float16 without a word)."""

from __future__ import annotations

import os
from math import prod
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, unpack_data
from dumpscope.core.formats.npy_header import NpyFormatError, load_npy, read_npy_header


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_fp16_label") / "fp16"


def _oversized(dump: Path) -> set[str]:
    """Files holding more bytes than their header's dtype and shape need (numpy's own header parse)."""
    out = set()
    for path in dump.rglob("*.npy"):
        with open(path, "rb") as fh:
            assert np.lib.format.read_magic(fh) == (1, 0)
            shape, _fortran, dt = np.lib.format.read_array_header_1_0(fh)
            if os.path.getsize(path) - fh.tell() > prod(shape) * dt.itemsize:
                out.add(str(path))
    return out


def test_mislabelled_files_are_named_problems_never_tensors(capsys, dump, tmp_path):
    bad = _oversized(dump)
    assert len(bad) == 4 and all(".Float16.npy" in p for p in bad)
    matmul = next(p for p in bad if "MatMul" in p)
    raw = Path(matmul).read_bytes()
    truth = np.frombuffer(raw[len(raw) - 24:], np.float32)  # what the payload holds
    assert not np.allclose(np.load(matmul).astype(np.float32).ravel(), truth)  # numpy reads other numbers
    doc = cli_json(capsys, "summary", str(dump), "--cache-dir", str(tmp_path))
    problems = {p["path"]: p["error"] for p in doc["problems"]}
    assert bad <= set(problems)
    for path in bad:
        assert "not decoded" in problems[path] and "float32" in problems[path]
    ops = cli_json(capsys, "ops", str(dump), "--cache-dir", str(tmp_path))["ops"]
    listed = {t["file"] for o in ops for t in o.get("tensors", [])}
    assert listed and not (listed & bad)
    for o in ops:  # every file that is listed decodes to what numpy reads
        for t in o["tensors"]:
            stats = cli_json(capsys, "stats", str(dump), o["name"], "--io", t["io"], "--slot", str(t["slot"]),
                             "--cache-dir", str(tmp_path))
            arr = np.load(t["file"])
            if arr.dtype.kind == "f":
                assert stats["max"] == pytest.approx(float(arr.max()))


def test_a_payload_larger_than_the_header_is_refused(tmp_path):
    a = tmp_path / "a.npy"
    np.save(a, np.arange(6, dtype=np.float16).reshape(2, 3))
    padded = tmp_path / "padded.npy"
    padded.write_bytes(a.read_bytes() + b"\0" * 12)
    head = read_npy_header(str(padded))
    assert head.oversized and not head.truncated and not read_npy_header(str(a)).oversized
    with pytest.raises(NpyFormatError, match="payload of 24 bytes.*float32"):
        load_npy(str(padded))
    np.testing.assert_array_equal(load_npy(str(a)), np.arange(6).reshape(2, 3))


def test_the_overflow_count_refuses_a_mislabelled_npy_too(dump, tmp_path):
    """Layouts that index a .npy without reading its size (msprobe, Troubleshooter) meet it at the scan."""
    from dumpscope.core.tensors.nonfinite import count_unit

    matmul = next(p for p in _oversized(dump) if "MatMul" in p)
    job = ("output", 0, "float16", [2, 3], "ND", [2, 3], "float16", 0, 0, None, None)
    uid, counts, error = count_unit((1, matmul, "npy", [job]))
    assert counts == [] and "not decoded" in error and "float16" in error
