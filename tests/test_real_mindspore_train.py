"""Real MindSpore 2.10 and 2.7 training dumps (tests/data/real_mindspore_train.tar.gz, see its README):
a shared conv stem whose backward holds several Conv2DBackpropFilter ops in one scope, and a tiny
transformer block.  Every expectation is read off the files MindSpore wrote, not typed in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cli_json, unpack_data
from dumpscope.core.names import sanitize_name
from dumpscope.core.query import OpRow, open_query
from dumpscope.tui.cli.entry import main

TREES = ("ms210_stem", "ms210_transformer", "ms27_stem", "ms27_transformer")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_mindspore_train")


def step_dir(root: Path) -> Path:
    (net,) = [p for p in (root / "rank_0").iterdir() if p.is_dir() and p.name not in ("graphs", "execution_order")
              and not p.name.startswith(".")]
    return net / "0" / "0"


def file_ops(root: Path) -> dict[str, str]:
    """file-side op name -> op type, from the npy names MindSpore wrote"""
    out = {}
    for p in step_dir(root).iterdir():
        parts = p.name.split(".")
        out[parts[1]] = parts[0]
    return out


def csv_names(root: Path) -> list[str]:
    lines = (root / "rank_0/execution_order/ms_execution_order_graph_0.csv").read_text().split()
    return [n for n in lines if not n.startswith("NodeExecutionOrder")]


@pytest.mark.parametrize("tree", TREES)
def test_parameters_are_apart_from_ops(capsys, dumps, tree):
    root = dumps / tree
    files = file_ops(root)
    params = {n for n, t in files.items() if t == "Parameter"}
    assert len(params) >= 9
    doc = cli_json(capsys, "summary", str(root))
    assert doc["parameters"] == len(params)
    assert doc["ops"] == len(files) - len(params)
    ops = cli_json(capsys, "ops", str(root))["ops"]
    assert len(ops) == len(files) - len(params)
    assert all(o["kind"] == "op" and o["type"] != "Parameter" for o in ops)
    assert [o["exec_index"] for o in ops] == list(range(len(ops)))
    listed = cli_json(capsys, "ops", str(root), "--kind", "parameter")["ops"]
    assert {o["file_name"] for o in listed} == params
    assert all(o["kind"] == "parameter" and o["exec_index"] is None for o in listed)
    everything = cli_json(capsys, "ops", str(root), "--kind", "all")["ops"]
    assert len(everything) == len(files)
    assert [o["kind"] for o in everything] == ["op"] * len(ops) + ["parameter"] * len(params)


@pytest.mark.parametrize("tree", TREES)
def test_parameters_stay_stat_able_and_searchable(capsys, dumps, tree):
    import numpy as np

    root = dumps / tree
    q = open_query(str(root))
    (param,) = [p for p in q.ops(0, 0, kind="parameter") if p.file_name.endswith("weight")][:1]
    assert any(hit.id == param.id for hit in q.search(param.name, 0, 0))
    doc = cli_json(capsys, "stats", str(root), param.name)
    (path,) = [p for p in step_dir(root).iterdir() if p.name.startswith(f"Parameter.{param.file_name}.")]
    arr = np.load(path).astype(np.float64)
    assert doc["count"] == arr.size
    assert doc["max"] == pytest.approx(arr.max()) and doc["min"] == pytest.approx(arr.min())


@pytest.mark.parametrize("tree", ("ms210_stem", "ms27_stem"))
def test_show_reaches_the_users_net_py_line(capsys, dumps, tree):
    root = dumps / tree
    conv = [n for n in csv_names(root) if n.endswith("stem-Conv2d/Conv2D-op0")][0]
    doc = cli_json(capsys, "show", str(root), conv)["op"]
    user = doc["user_frame"]
    assert user is not None and user["file"].endswith("net.py") and user["user"] is True
    assert user["code"] == "a = self.act(self.stem(x))"
    lines = (dumps / "net.py").read_text().splitlines()
    assert lines[user["line"] - 1].strip() == user["code"]
    # the frames inside MindSpore are there too, marked as not the user's
    assert any(not s["user"] and "/mindspore/" in s["file"] for s in doc["source"])
    assert sanitize_name(conv) == doc["file_name"]


def test_explorer_tree_has_one_collapsed_parameters_node(dumps, tmp_path, monkeypatch):
    import asyncio

    from test_tui_support import set_env, wait_ready
    from dumpscope.tui.app import DumpscopeApp
    from dumpscope.tui.optree import KindGroup, OpTree

    set_env(monkeypatch, tmp_path)
    root = dumps / "ms210_stem"
    n_params = sum(1 for t in file_ops(root).values() if t == "Parameter")

    async def run() -> None:
        app = DumpscopeApp(str(root), display_name="dump")
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_ready(pilot)
            tree = app.screen.query_one(OpTree)
            groups = [line.node for line in tree._tree_lines if isinstance(line.node.data, KindGroup)]
            assert len(groups) == 1 and not groups[0].is_expanded
            assert groups[0].data.count == n_params
            assert groups[0].label.plain == f"parameters ({n_params})"
            assert groups[0].parent.data.path == ""  # beside the graph's scopes
            # no parameter is listed among the scopes' ops
            assert not any(isinstance(line.node.data, OpRow) and line.node.data.kind == "parameter"
                           for line in tree._tree_lines)
            tree._populate(groups[0])
            groups[0].expand()
            await pilot.pause()
            shown = [line.node.data for line in tree._tree_lines
                     if isinstance(line.node.data, OpRow) and line.node.data.kind == "parameter"]
            assert len(shown) == n_params

    asyncio.run(run())


# -- renumbered ops: every dumped op gets its graph-side name, and the right one ---------------------


def _graph_edges_hold(q) -> tuple[int, list]:
    """Each dumped input equals the dumped output the graph says feeds it: a wrong pairing of
    renumbered ops breaks these equalities (the values are the tool's own)."""
    import numpy as np

    from dumpscope.core.tensors.load import load_tensor

    ops = q.ops(0, 0, kind="all")
    by_joined = {o.joined: o for o in ops if o.joined}
    (gkey,) = q.index.query("SELECT value FROM meta WHERE key='gkey:0:0'")[0]
    checked, wrong = 0, []
    for op in ops:
        if not op.joined:
            continue
        (data,) = q.index.query("SELECT data FROM graph_nodes WHERE gkey=? AND name=?", (gkey, op.joined))[0]
        ins = {t.slot: t for t in q.tensors(op.id) if t.io == "input"}
        for slot, src in enumerate(json.loads(data)["inputs"]):
            name, _, idx = (src or "").rpartition(":")
            prod = by_joined.get(name)
            if slot not in ins or prod is None or not idx.isdigit():
                continue
            outs = {t.slot: t for t in q.tensors(prod.id) if t.io == "output"}
            if int(idx) in outs:
                a, b = load_tensor(ins[slot].ref()), load_tensor(outs[int(idx)].ref())
                checked += 1
                if a.shape != b.shape or not np.array_equal(a, b, equal_nan=True):
                    wrong.append((op.name, slot, src))
    return checked, wrong


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("drop", ["", "execution_order", "graphs"])
def test_every_dumped_op_carries_its_graph_side_name(dumps, tmp_path, tree, drop):
    import shutil

    root = dumps / tree
    if drop:  # the same dump with only the .ir, or only the execution-order CSV
        root = tmp_path / tree
        shutil.copytree(dumps / tree, root)
        shutil.rmtree(root / "rank_0" / drop)
    q = open_query(str(root))
    csv = set(csv_names(dumps / tree))
    ops = q.ops(0, 0)
    assert ops and all(op.name in csv for op in ops), [op.name for op in ops if op.name not in csv][:3]
    assert len({op.name for op in ops}) == len(ops)
    assert not any(op.join_note for op in ops)
    if drop != "graphs":
        checked, wrong = _graph_edges_hold(q)
        assert checked >= 40 and wrong == []


@pytest.mark.parametrize("tree", ("ms210_stem", "ms27_stem"))
def test_three_conv_backprop_filters_of_one_scope_pair_in_execution_order(dumps, tree):
    import numpy as np

    root = dumps / tree
    q = open_query(str(root))
    filters = [op for op in q.ops(0, 0) if op.type == "Conv2DBackpropFilter"]
    files = sorted(op.file_name.rsplit("-op", 1)[1] for op in filters)
    graph = sorted(op.name.rsplit("-op", 1)[1] for op in filters)
    assert len(filters) == 3 and files != graph  # the files' numbers are not the graph's
    assert {op.join_rule for op in filters} == {"scope_type"}
    assert len({op.scope for op in filters}) == 1 and op_scope_ok(filters[0].scope)
    # the last to run computes the gradient through the first forward conv: its input is the net's input
    (x_param,) = [p for p in q.ops(0, 0, kind="parameter") if p.file_name == "inputs0"]
    x = np.load(q.tensors(x_param.id)[0].path)
    last = max(filters, key=lambda o: o.exec_index)
    (inp,) = [t for t in q.tensors(last.id) if t.io == "input" and t.slot == 1]
    assert np.array_equal(np.load(inp.path), x)
    assert last.name == [n for n in csv_names(root) if "Conv2DBackpropFilter" in n][-1]


def op_scope_ok(scope: str) -> bool:
    return scope.endswith("stem-Conv2d/Grad_Conv2D") and scope.startswith("Gradients/Default/network-WithLossCell")


def test_an_op_left_file_side_is_placed_under_its_scope_with_the_reason(capsys, dumps, tmp_path):
    import shutil

    root = tmp_path / "ms210_stem"
    shutil.copytree(dumps / "ms210_stem", root)
    # one of the three renumbered Conv2DBackpropFilter ops lost its files: two files, three graph nodes
    for p in step_dir(root).glob("Conv2DBackpropFilter.*Filter-op1.*"):
        p.unlink()
    ops = cli_json(capsys, "ops", str(root))["ops"]
    left = [o for o in ops if o["type"] == "Conv2DBackpropFilter"]
    assert len(left) == 2 and all("/" not in o["name"] for o in left)  # file-side names kept
    doc = cli_json(capsys, "show", str(root), left[0]["name"])["op"]
    assert op_scope_ok(doc["scope"])
    assert "2 dumped and 3 graph Conv2DBackpropFilter ops" in doc["join_note"]
    q = open_query(str(root))
    op = q.resolve_op(left[0]["name"])
    assert op.short == op.file_name.rsplit("_", 1)[1]  # the tree shows what follows the scope
    from dumpscope.tui.badges import BadgeState

    assert "?" in BadgeState().text(op)
    code = main(["show", str(root), left[0]["name"]])
    out = capsys.readouterr().out
    assert code == 0 and "? graph name unknown: 2 dumped and 3 graph" in out


# -- summary: where the tree starts, and every file accounted for --------------------------------------


def test_summary_root_is_the_dump_path_and_every_file_adds_up(capsys, dumps):
    import os

    for tree in TREES:
        root = dumps / tree
        doc = cli_json(capsys, "summary", str(root))
        assert [lay["root"] for lay in doc["layouts"]] == [str(root)]  # the folder holding rank_0
        acc = doc["accounting"]
        on_disk = sum(len(files) for _d, _s, files in os.walk(root))
        assert acc["files"] == doc["files"] == on_disk
        assert sum(v for k, v in acc.items() if k != "files") == on_disk
        assert acc["tensor"] == len(list(step_dir(root).iterdir()))
        assert (acc["graph"], acc["order"], acc["not_recognised"], acc["problem"]) == (2, 1, 0, 0)  # .ir + .pb
        assert acc["metadata"] == 3  # .dump_metadata/{config,data_dump}.json, the global execution order
        assert [g["joined"] for g in doc["graph_files"]] == [True, False]  # the .ir joins, the .pb is listed
    # the folder above: two stray files are "not recognised", the rest still adds up
    doc = cli_json(capsys, "summary", str(dumps))
    assert doc["accounting"]["not_recognised"] == 2  # README.md, net.py
    assert doc["accounting"]["files"] == sum(len(f) for _d, _s, f in os.walk(dumps))


@pytest.mark.parametrize("dirs, root", [
    (["/d/out/rank_0/Net/0/0", "/d/out/rank_0/Net/0/3"], "/d/out"),  # MindSpore: above rank_0
    (["/d/out/rank_0/Net/0/0", "/d/out/rank_1/Net/0/0"], "/d/out"),
    (["/d/job/20240613143502/0/ge_default_1/1/0"], "/d/job"),  # CANN: above the {time} folder
    (["/d/job/worldsize2_global_rank0/20240613143502/0/m/1/0"], "/d/job"),
    (["/d/out/step0/rank0/dump_tensor_data"], "/d/out"),  # msprobe
    (["/d/plain/a", "/d/plain/b"], "/d/plain"),  # no structure known: the common folder
    (["/d/x/rank_0/Net/0/0"], "/d/x"),
])
def test_tree_root_is_above_the_first_structural_level(dirs, root):
    from dumpscope.core.index.accounting import tree_root

    assert tree_root(dirs, "/d") == root


@pytest.mark.parametrize("tree", TREES)
def test_every_user_frame_is_a_real_line_of_net_py(dumps, tree):
    """Where MindSpore wrote a stack, show's first user frame is the line of net.py it names."""
    lines = (dumps / "net.py").read_text().splitlines()
    q = open_query(str(dumps / tree))
    found = 0
    for op in q.ops(0, 0):
        doc = q.show_json(op)
        user = doc["user_frame"]
        mine = [s for s in doc["source"] if s["file"].endswith("/net.py")]
        if not mine:  # no stack (some Expand/ ops), or MindSpore's own cells only (nn.MSELoss, the optimizer)
            assert user is None, (op.name, user)
            continue
        assert user == dict(mine[-1], user=True)  # the net.py line nearest the op
        assert lines[user["line"] - 1].strip().startswith(user["code"].split("/")[0].strip()), (op.name, user)
        assert all(not s["user"] for s in doc["source"] if s not in mine)
        found += 1
    assert found >= 20


def test_across_versions_generated_expand_ops_pair_with_the_op_that_computes_the_same(capsys, dumps, tmp_path):
    """MindSpore 2.10 and 2.7 number their kernel expansions (``Expand/_Muls/Mul-opN``) differently:
    the pairs compare makes must be the ones whose outputs numpy finds equal, and the same name
    across versions must not be trusted where numpy says it is another op."""
    import numpy as np

    g_root, t_root = dumps / "ms210_transformer", dumps / "ms27_transformer"
    cache = ["--cache-dir", str(tmp_path)]
    doc = cli_json(capsys, "compare", str(g_root), str(t_root), *cache)
    generated = {(r["name"], r["target_name"]): (r["golden"]["file"], r["target"]["file"]) for r in doc["rows"]
                 if r["name"].startswith("Expand/") and r["io"] == "output"}
    assert len(generated) >= 8
    for (g_name, t_name), (g_file, t_file) in generated.items():
        g, t = np.load(g_file), np.load(t_file)
        assert g.shape == t.shape and np.allclose(g, t, rtol=1e-4, atol=1e-6), (g_name, t_name)
    assert sum(g != t for g, t in generated) >= 4  # the counters really differ between the versions
    # a name both versions have, that numpy says is a different computation, is not paired by name
    same = "Expand/_Muls/Mul-op1"

    def out_file(root: Path) -> str:
        (op,) = [o for o in cli_json(capsys, "ops", str(root), *cache)["ops"] if o["name"] == same]
        (t,) = [t for t in op["tensors"] if t["io"] == "output"]
        return t["file"]

    g, t = np.load(out_file(g_root)), np.load(out_file(t_root))
    assert g.shape != t.shape or not np.allclose(g, t, rtol=1e-3)
    assert (same, same) not in generated
    assert doc["first_divergence"]["cause"] != "constant"
