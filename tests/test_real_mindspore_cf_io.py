"""Real MindSpore 2.10 dumps of a control-flow net (six kernel graphs, a loop body run three times) and of
the conv-stem training step with input_output 1 and 2 (tests/data/real_mindspore_cf_io.tar.gz, see its
README).  Expectations are read off the files MindSpore wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import unpack_data
from dumpscope.core.query import open_query


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_mindspore_cf_io")


def csv_names(root: Path, graph: str) -> list[str]:
    lines = (root / f"rank_0/execution_order/ms_execution_order_graph_{graph}.csv").read_text().split()
    return [n for n in lines if not n.startswith("NodeExecutionOrder")]


def test_loop_body_runs_are_listed_run_by_run_with_their_graph_names(dumps):
    root = dumps / "ms210_loop"
    q = open_query(str(root))
    ops = q.ops(0, 0)
    by_graph: dict[str, list] = {}
    for op in ops:
        by_graph.setdefault(op.graph, []).append(op)
    files = {p.name.split(".")[1] for p in (root / "rank_0/loop").rglob("*.npy")}
    assert {op.file_name for op in ops} == files
    for graph, listed in by_graph.items():
        names = csv_names(root, graph)
        runs = len(listed) // len(names)
        assert len(listed) == runs * len(names)
        # each run of the graph in CSV order, the runs one after the other (not all MatMuls first)
        assert [op.name for op in listed] == names * runs
        starts = [listed[k * len(names)].first_ts for k in range(runs)]
        assert starts == sorted(starts)
    assert len(by_graph["1"]) == 12  # the loop body (MatMul, BiasAdd, Tanh, Add) ran three times
    tanh = [op for op in by_graph["1"] if op.type == "Tanh"]
    lines = (dumps / "net_cf.py").read_text().splitlines()
    for op in tanh:
        user = q.show_json(op)["user_frame"]
        assert user["file"].endswith("net_cf.py") and lines[user["line"] - 1].strip() == user["code"]


@pytest.mark.parametrize("tree, io, params", [("ms210_inputs", "input", 0), ("ms210_outputs", "output", 11)])
def test_input_output_1_and_2(dumps, tree, io, params):
    root = dumps / tree
    q = open_query(str(root))
    names = set(csv_names(root, "0"))
    ops = q.ops(0, 0)
    assert ops and all(op.name in names for op in ops)
    assert {t.io for op in q.ops(0, 0, kind="all") for t in q.tensors(op.id)} == {io}
    assert len(q.ops(0, 0, kind="parameter")) == params  # MindSpore dumps Parameters as outputs
    filters = [op for op in ops if op.type == "Conv2DBackpropFilter"]
    assert len(filters) == 3 and all(op.join_rule == "scope_type" for op in filters)
    acc = q.summary()["accounting"]
    assert acc["not_recognised"] == 0 and acc["problem"] == 0
    conv = [op for op in ops if op.name.endswith("stem-Conv2d/Conv2D-op0")][0]
    assert q.show_json(conv)["user_frame"]["code"] == "a = self.act(self.stem(x))"
