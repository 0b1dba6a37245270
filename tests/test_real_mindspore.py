"""Integration: the real MindSpore 2.10 LeNet dump (issue #2 acceptance)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from dumpscope.core.names import sanitize_name
from dumpscope.core.query import open_query

CONV1 = "Default/network-WithLossCell/_backbone-LeNet/conv1-Conv2d/Conv2D-op0"


def read_exec_order_names(path) -> list[str]:
    lines = [ln.strip() for ln in open(path, encoding="utf-8") if ln.strip()]
    return lines[1:] if lines[0].startswith("NodeExecutionOrder") else lines


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpscope", *args], capture_output=True, text=True, timeout=120)


def test_every_csv_op_with_a_file_is_listed_in_csv_order(real_lenet_tree):
    q = open_query(str(real_lenet_tree))
    csv_names = read_exec_order_names(real_lenet_tree / "rank_0/execution_order/ms_execution_order_graph_0.csv")
    for step in (0, 2, 3):
        step_dir = real_lenet_tree / "rank_0/LeNet/0" / str(step)
        file_ops = {p.name.split(".")[1] for p in step_dir.iterdir()}
        expected = [n for n in csv_names if sanitize_name(n) in file_ops]
        assert len(expected) >= 40
        listed = [op.name for op in q.ops(0, step)]
        positions = [listed.index(n) for n in expected]
        assert positions == sorted(positions), "CSV order not kept"
        # every dumped op appears, each exactly once; MindSpore's Parameter.* files are apart
        everything = q.ops(0, step, kind="all")
        assert len({op.file_name for op in everything}) == len(file_ops)
        params = q.ops(0, step, kind="parameter")
        assert params and {p.file_name for p in params} == {p.name.split(".")[1] for p in step_dir.iterdir()
                                                            if p.name.startswith("Parameter.")}
        assert all(p.exec_index is None and p.kind == "parameter" for p in params)
        ops = q.ops(0, step)
        assert not any(op.type == "Parameter" for op in ops)
        assert [op.exec_index for op in ops] == list(range(len(ops)))
        assert q.count_ops(0, step) == len(ops)


def test_renumbered_backward_ops_are_still_listed_and_joined(real_lenet_tree):
    q = open_query(str(real_lenet_tree))
    ops = q.ops(0, 0)
    by_file = {op.file_name: op for op in ops}
    f = "Gradients_Default_network-WithLossCell__backbone-LeNet_conv1-Conv2d_Grad_Conv2D_Conv2DBackpropFilter-op0"
    assert f in by_file
    op = by_file[f]
    assert op.name.endswith("Conv2DBackpropFilter-op1")  # the graph/CSV spelling
    assert op.join_rule == "scope_type"


def test_tensors_carry_npy_shapes_and_dtypes(real_lenet_tree):
    q = open_query(str(real_lenet_tree))
    op = q.resolve_op(CONV1, 0, 0)
    for t in q.tensors(op.id):
        arr = np.load(t.path, allow_pickle=False)
        assert t.shape == arr.shape
        assert t.dtype == arr.dtype.name
    outs = [t for t in q.tensors(op.id) if t.io == "output"]
    assert outs[0].shape == (8, 6, 28, 28)


def test_show_conv1_lists_net_py_line_17(real_lenet_tree):
    res = _run("show", str(real_lenet_tree), CONV1, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)["op"]
    assert any(s["file"].endswith("net.py") and s["line"] == 17 for s in doc["source"])
    assert doc["type"] == "Conv2D"
    assert doc["consumers"] and any("ReLU-op0" in c for c in doc["consumers"])


def test_stats_equal_numpy(real_lenet_tree):
    res = _run("stats", str(real_lenet_tree), CONV1, "--io", "output", "--slot", "0", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    q = open_query(str(real_lenet_tree))
    t = [t for t in q.tensors(q.resolve_op(CONV1, 0, 0).id) if t.io == "output"][0]
    ref = np.load(t.path).astype(np.float64)
    assert doc["count"] == ref.size
    assert doc["min"] == pytest.approx(ref.min(), rel=1e-12)
    assert doc["max"] == pytest.approx(ref.max(), rel=1e-12)
    assert doc["mean"] == pytest.approx(ref.mean(), rel=1e-9)
    assert doc["std"] == pytest.approx(ref.std(), rel=1e-9)
    assert doc["l2norm"] == pytest.approx(np.sqrt((ref ** 2).sum()), rel=1e-9)
    assert doc["zeros"] == int((ref == 0).sum())
    assert doc["nan"] == doc["posinf"] == doc["neginf"] == 0


def test_summary_of_one_iteration_reports_that_step(real_lenet_copy):
    for step in ("0", "3"):
        shutil.rmtree(real_lenet_copy / "rank_0/LeNet/0" / step)
    res = _run("summary", str(real_lenet_copy), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["steps"] == [2]
    assert doc["ranks"] == [0]
    assert doc["problems"] == []
    step_dir = real_lenet_copy / "rank_0/LeNet/0/2"
    names = {p.name.split(".")[1] for p in step_dir.iterdir() if p.name.endswith(".npy")}
    n_params = len({n for n in names if any(p.name.startswith("Parameter." + n + ".") for p in step_dir.iterdir())})
    assert n_params == 21
    assert doc["ops"] == len(names) - n_params == 45
    assert doc["parameters"] == n_params


def test_unknown_op_is_one_line_with_close_matches(real_lenet_tree):
    res = _run("show", str(real_lenet_tree), "Default/network-WithLossCell/_backbone-LeNet/conv1-Conv2d/Conv2D-op9")
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "conv1-Conv2d/Conv2D-op0" in lines[0]


def test_second_open_reuses_the_index(real_lenet_tree):
    q1 = open_query(str(real_lenet_tree))
    n = q1.count_ops(0, 0)
    q2 = open_query(str(real_lenet_tree))
    prog = q2.index.update()
    assert prog.changed_dirs == 0
    assert q2.count_ops(0, 0) == n
