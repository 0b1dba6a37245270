"""A real MindSpore 2.10 CPU dump of a bfloat16 tensor (``tests/data/real_ms210_bf16``): MindSpore
writes it as ``….BFloat16.npy`` with ``'descr': '<E2'``, which numpy refuses, over the bit patterns.
It was a problem ("bad dtype '<E2'") and the tensor was lost; now it is read as bfloat16 (issue 33).

Truth: the float32 x MindSpore dumped itself (``Parameter.x`` and Cast-op0's input), whose values
bfloat16 holds exactly, and MindSpore's own printed result.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import cli_json, unpack_data
from dumpscope.core.formats.npy_header import read_npy_header
from dumpscope.core.query import open_query
from dumpscope.core.tensors.load import load_tensor


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    return unpack_data(tmp_path_factory, "real_ms210_bf16") / "bf16"


def _bf16_tensors(q):
    return [(op, t) for op in q.ops() for t in q.tensors(op.id) if t.dtype == "bfloat16"]


def test_the_tool_wrote_E2_headers(dump):
    files = sorted(dump.rglob("*.BFloat16.npy"))
    assert len(files) == 2
    assert all(b"'descr': '<E2'" in f.read_bytes()[:128] for f in files)
    assert read_npy_header(str(files[0])).dtype == "bfloat16"


def test_bf16_tensors_are_read_not_problems(dump, capsys):
    doc = cli_json(capsys, "summary", str(dump))
    assert doc["problems"] == [] and doc["accounting"]["problem"] == 0
    q = open_query(str(dump))
    truth = np.load(next(dump.rglob("Parameter.x.*.npy")))
    found = _bf16_tensors(q)
    assert [t.io for _, t in found] == ["output", "input"]  # Cast-op0's output, Cast-op1's input
    for _op, t in found:
        got = load_tensor(t.ref())
        assert got.dtype == np.float32 and np.array_equal(got, truth, equal_nan=True)


def test_bf16_statistics_equal_the_float32_input(dump, capsys):
    q = open_query(str(dump))
    (op, t), _ = _bf16_tensors(q)
    st = cli_json(capsys, "stats", str(dump), op.name, "--io", t.io)
    x = np.load(next(dump.rglob("Parameter.x.*.npy")))
    fin = x[np.isfinite(x)].astype(np.float64)
    assert st["dtype"] == "bfloat16" and st["count"] == x.size
    assert (st["nan"], st["posinf"], st["neginf"], st["zeros"]) == (1, 1, 0, 1)
    assert (st["min"], st["max"]) == (fin.min(), fin.max())
    assert st["mean"] == pytest.approx(fin.mean(), rel=1e-12)


def test_overflow_counts_the_bf16_nan(dump, capsys):
    doc = cli_json(capsys, "overflow", str(dump))
    q = open_query(str(dump))
    (op, _t), _ = _bf16_tensors(q)
    row = next(o for o in doc["ops"] if o["name"] == op.name)
    assert (row["nan"], row["posinf"]) == (1, 1)
