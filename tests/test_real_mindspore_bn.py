"""Real MindSpore 2.10 dumps of a BatchNorm net (tests/data/real_mindspore_210_bn.tar.gz, see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import cli_json, unpack_data
from test_tui_support import screen_text, search_and_open, set_env, settle, wait_ready

BN = "Default/bn-BatchNorm2d/BatchNorm-op0"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_mindspore_210_bn")


def test_changed_eps_names_the_batchnorm_output_as_first_divergence(capsys, dumps):
    doc = cli_json(capsys, "compare", str(dumps / "golden"), str(dumps / "target"))
    fd = doc["first_divergence"]
    assert (fd["name"], fd["io"], fd["slot"]) == (BN, "output", 0)
    rows = {(r["name"], r["io"], r["slot"]): r for r in doc["rows"]}
    conv = rows[("Default/conv1-Conv2d/Conv2D-op0", "output", 0)]
    assert conv["verdict"] == "pass" and conv["cosine"] > 0.9999
    bn = rows[(BN, "output", 0)]
    assert bn["verdict"] == "error" and bn["judgement"] == "born" and "born here" in bn["rule"]
    # the changed epsilon is BatchNorm's input 6, a constant with no producer in the graph
    eps = rows[(BN, "input", 6)]
    assert (eps["kind"], eps["verdict"], eps["rule"]) == ("scalar", "error", "argument changed: 1e-05 → 0.1")
    assert (fd["cause"], bn["origin"]) == ("constant", "constant")
    assert {r["name"] for r in doc["rows"] if r["origin"] in ("born", "constant")} == {BN}


def test_outputs_only_dump_names_the_undumped_parameter_whose_dump_differs(capsys, dumps):
    """``outs`` dumps outputs only (``input_output: 2``): BatchNorm's weights are never dumped as its inputs.
    The cause names the Parameters feeding it (the .ir's Loads) and marks the one whose dump after the step differs —
    numpy: moving_variance differs from the golden's, gamma, beta and moving_mean do not."""
    import numpy as np

    fd = cli_json(capsys, "compare", str(dumps / "golden"), str(dumps / "outs"))["first_divergence"]
    assert fd["name"] == BN and fd["origin"] == "born"
    assert fd["rule"].startswith("input.1 (Parameter bn.gamma), input.2 (Parameter bn.beta), input.3 (Parameter "
                                 "bn.moving_mean), input.4 (Parameter bn.moving_variance, whose dump after the step differs) were "
                                 "not dumped")

    def param(side: str, name: str):
        (f,) = sorted((dumps / side).rglob(f"Parameter.{name}.*.npy"))[:1]
        return np.load(f)

    for name, differs in (("bn_gamma", False), ("bn_beta", False), ("bn_moving_mean", False),
                          ("bn_moving_variance", True)):
        assert (not np.array_equal(param("golden", name), param("outs", name))) is differs, name


def test_dump_compared_with_itself_is_all_pass(capsys, dumps):
    doc = cli_json(capsys, "compare", str(dumps / "golden"), str(dumps / "golden"))
    assert {r["verdict"] for r in doc["rows"]} == {"pass"} and doc["first_divergence"] is None


def test_show_batchnorm_lists_its_conv_producer_and_consumer(capsys, dumps):
    op = cli_json(capsys, "show", str(dumps / "golden"), BN)["op"]
    assert "Default/conv1-Conv2d/Conv2D-op0:0" in op["inputs_from"]
    assert "Default/relu-ReLU/ReLU-op0" in op["consumers"]
    assert any(s["file"].endswith("net.py") for s in op["source"])


def test_overflowed_exp_comes_first(capsys, dumps):
    rows = cli_json(capsys, "overflow", str(dumps / "overflow"))["ops"]
    assert rows[0]["name"] == "Default/Exp-op0" and rows[0]["evidence"] == "tensor" and rows[0]["posinf"] > 0


async def test_explorer_flow_at_100x30(dumps, tmp_path, monkeypatch):
    """Issue 8 acceptance: search BatchNorm-op0 → its source file; ? lists keys; o shows Exp-op0 first; q quits."""
    from dumpscope.tui.app import DumpscopeApp

    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(dumps / "overflow"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        assert "BatchNorm-op0" in screen_text(app)  # the op tree is visible
        await search_and_open(pilot, "BatchNorm-op0")
        assert app.main.current.name == BN
        assert "net.py" in str(app.screen.query_one("#detail-rest").render())
        await pilot.press("question_mark")
        await settle(pilot)
        text = screen_text(app)
        assert "Search" in text and "Overflow" in text
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        for _ in range(50):  # the scan runs in a worker
            if getattr(app.screen, "table", None) is not None and app.screen.table.rows:
                break
            await pilot.pause(0.1)
        assert app.screen.table.rows[0]["name"] == "Default/Exp-op0"
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("q")
        await settle(pilot)
    assert app.return_code in (0, None)


def test_dump_mode_1_with_one_kernel_and_outputs_only(capsys, dumps):
    doc = cli_json(capsys, "summary", str(dumps / "one"))
    assert doc["steps"] == [0, 1] and doc["ops"] == 2 and doc["problems"] == []
    ops = cli_json(capsys, "ops", str(dumps / "one"))["ops"]
    assert [o["name"] for o in ops] == [BN]
    ops = cli_json(capsys, "ops", str(dumps / "outs"))["ops"]
    assert ops and all(t["io"] == "output" for o in ops for t in o["tensors"])
    assert [o["name"] for o in ops][:3] == ["Default/conv1-Conv2d/Conv2D-op0", BN, "Default/relu-ReLU/ReLU-op0"]


def test_mindspore_async_tree_joins_the_real_ir(dumps, tmp_path):
    """An Ascend async dump puts CANN binary files into the same rank_{r}/{net}/{graph}/{iter} tree."""
    import shutil

    import numpy as np

    from dumpscope.core.query import open_query
    from synth.cann_writer import SynthTensor, write_dump

    tree = tmp_path / "async"
    for sub in ("graphs", "execution_order"):
        shutil.copytree(dumps / "golden" / "rank_0" / sub, tree / "rank_0" / sub)
    d = tree / "rank_0" / "Net" / "0" / "3"
    x = np.ones((2, 4, 6, 6), np.float32)
    write_dump(d, "BNInfer", BN, 3, 2, 1700000000000020, inputs=[SynthTensor(x, "float16", "NC1HWC0")],
               outputs=[SynthTensor(x, "float16", "NC1HWC0")])
    write_dump(d, "Conv2D", "Default/conv1-Conv2d/Conv2D-op0", 2, 2, 1700000000000010,
               inputs=[SynthTensor(np.ones((2, 1, 8, 8), np.float32), "float16", "NC1HWC0")],
               outputs=[SynthTensor(x, "float16", "NC1HWC0")])
    q = open_query(str(tree))
    ops = q.ops()
    assert [o.name for o in ops] == ["Default/conv1-Conv2d/Conv2D-op0", BN]
    assert all(o.rank == 0 and o.step == 3 and o.graph == "0" and o.join_rule == "name" for o in ops)
    assert q.graph_details(ops[1])["inputs_from"][0] == "Default/conv1-Conv2d/Conv2D-op0:0"
