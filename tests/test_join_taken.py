"""An op whose graph node was already joined to another dumped op: never left without a name *and*
without a reason (issue 18).  Synthetic CANN trees with a GE graph (``core.synth``): no tool on this
host (CPU only, no CANN) writes a GE graph beside CANN dump files, and the real MindSpore dumps here
name every kernel ``-opN`` (their runs are joined through the other path, see test_real_mindspore_cf_io)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json
from dumpscope.core.query import open_query
from synth import trees
from synth.cann_writer import SynthTensor, write_dump

RELU = "resnet/relu1/Relu"


def _step0(root: Path) -> Path:
    return root / trees.TF_TIME / "0" / trees.TF_MODEL / "1" / "0"


def _relu_file(step: Path) -> Path:
    (path,) = step.glob("Relu.resnet_relu1_Relu.*")
    return path


@pytest.fixture
def loop_tree(tmp_path) -> Path:
    """The TF-adapter tree whose Relu ran twice in step 0 (a loop body): a second file, later task and time."""
    root = tmp_path / "loop"
    trees.write_cann_tree(root, steps=(0,))
    src = _relu_file(_step0(root))
    kind, name, task, stream, ts = src.name.split(".")
    shutil.copy(src, src.with_name(f"{kind}.{name}.{int(task) + 40}.{stream}.{int(ts) + 90_000}"))
    return root


def test_every_run_of_a_repeated_op_is_joined_to_its_node(loop_tree, tmp_path):
    q = open_query(str(loop_tree), cache_directory=tmp_path / "cache")
    runs = [o for o in q.ops() if o.type == "Relu"]
    assert len(runs) == 2 and runs[0].exec_index < runs[1].exec_index
    # both are the graph's Relu node: same name, same links, no "?"
    assert [(o.name, o.joined, o.join_note) for o in runs] == [(RELU, RELU, None)] * 2
    assert [o.scope for o in runs] == ["resnet/relu1"] * 2


def test_a_second_op_on_a_taken_node_says_which_op_holds_it(tmp_path, capsys):
    """A dumped op whose name is not in the graph but whose file-side spelling is that of a node another
    dumped op already joined: it keeps its own name, and the note says who holds the node."""
    root = tmp_path / "taken"
    trees.write_cann_tree(root, steps=(0,))
    step = _step0(root)
    a = np.arange(288, dtype=np.float16).reshape(1, 4, 6, 12)
    write_dump(step, "Relu", "resnet_relu1_Relu", 90, 2, 1718260502900000,
               [SynthTensor(a, "float16", "ND")], [SynthTensor(a, "float16", "ND")])
    q = open_query(str(root), cache_directory=tmp_path / "cache")
    relus = {o.name: o for o in q.ops() if o.type == "Relu"}
    assert set(relus) == {RELU, "resnet_relu1_Relu"}
    assert relus[RELU].joined == RELU and relus[RELU].join_note is None
    other = relus["resnet_relu1_Relu"]
    assert other.joined is None
    assert other.join_note == (f"its graph node is already joined to another dumped op ({relus[RELU].file_name}, "
                               f"task {relus[RELU].task}): one node {RELU}, two dumped ops")
    doc = cli_json(capsys, "show", str(root), "resnet_relu1_Relu", "--cache-dir", str(tmp_path / "cache"))["op"]
    assert doc["join_note"] == other.join_note


async def test_the_detail_shows_who_holds_the_node(tmp_path, monkeypatch):
    from test_tui_support import screen_text, set_env, settle, wait_ready

    from dumpscope.tui.app import DumpscopeApp

    root = tmp_path / "taken"
    trees.write_cann_tree(root, steps=(0,))
    a = np.ones((2, 3), dtype=np.float16)
    write_dump(_step0(root), "Relu", "resnet_relu1_Relu", 90, 2, 1718260502900000,
               [SynthTensor(a, "float16", "ND")], [SynthTensor(a, "float16", "ND")])
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(root), display_name="taken")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        op = app.q.resolve_op("resnet_relu1_Relu")
        app.main.jump_to(op)
        await settle(pilot)
        flat = " ".join(screen_text(app).split())
        assert "? not joined: its graph node is already" in flat  # on the first screen, under the header
        await pilot.press("tab")  # into the detail, down to the Op section: the reason in full
        await settle(pilot)
        app.screen.focused.scroll_end(animate=False)
        await settle(pilot)
        body = " ".join(str(app.screen.focused.query_one("#detail-rest").render()).split())
        assert f"? not joined: {op.join_note}" in body and RELU in op.join_note
