"""Dump-Watch: trigger names from the snapshot headers, snapshots owned by the watched op, all converted."""

from __future__ import annotations

import json

import numpy as np

from dumpscope.core.query import open_query
from synth.cann_writer import SynthTensor, write_dump
from dumpscope.tui.cli.entry import main

W, A, B = "net/C/Add", "net/A/Mul", "net/B/Sub"


def _tree(root):
    """W runs, then layer ops A and B, which the watch list covers but which were not dumped
    themselves; B overwrites two elements of W's output (a memory-reuse bug)."""
    folder = root / "20240101000000" / "0" / "net" / "1" / "0"
    rng = np.random.default_rng(5)
    w_out = rng.standard_normal((3, 4)).astype(np.float32)
    after_b = w_out.copy()
    after_b[1, 2] = 7.0
    after_b[2, 0] = -7.5
    truth = {W: w_out, f"{A}_To_{W}": w_out, f"{B}_To_{W}": after_b}
    ts = 1704067200000000
    for k, (name, arr) in enumerate(truth.items()):
        write_dump(folder, "Add", name, 10 + k, 1, ts + 100 * k, outputs=[SynthTensor(arr, "float32", "ND")])
    return folder, truth


def _cli(capsys, *args):
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_trigger_names_come_from_the_header(tmp_path, capsys):
    folder, _truth = _tree(tmp_path / "dump")
    doc = _cli(capsys, "watch", str(tmp_path / "dump"))
    (w,) = doc["watched"]
    assert w["name"] == W
    assert [s["after"] for s in w["snapshots"]] == [W, A, B]  # not net_A_Mul / net_B_Sub
    assert w["first_change_after"] == B
    changed = [s for s in w["snapshots"] if s["changed"]]
    assert len(changed) == 1 and changed[0]["changed_elements"] == 2


def test_snapshots_belong_to_the_watched_op(tmp_path, capsys):
    _tree(tmp_path / "dump")
    root = str(tmp_path / "dump")
    ops = _cli(capsys, "ops", root)["ops"]
    assert [o["name"] for o in ops] == [W]  # snapshots are no ops
    q = open_query(root)
    # no scope made up from "{L}_To_{W}" (it used to be net/A/Mul_To_net/C)
    assert set(q.scope_facts(0, 0)[0]) == {("net", "net/C")}
    w = q.resolve_op(W)
    snaps = q.snapshots_of(w)
    assert [s.watch_after for s in snaps] == [A, B] and all(s.scope == "net/C" for s in snaps)
    show = _cli(capsys, "show", root, W)["op"]
    assert [s["after"] for s in show["snapshots"]] == [A, B]


def test_convert_writes_every_snapshot_equal_to_its_truth(tmp_path, capsys):
    folder, truth = _tree(tmp_path / "dump")
    out = tmp_path / "out"
    assert main(["convert", str(tmp_path / "dump"), str(out)]) == 0
    capsys.readouterr()
    written = {p.name: np.load(p) for p in out.rglob("*.npy")}
    assert len(written) == 3
    for name, arr in truth.items():
        (hit,) = [v for k, v in written.items() if k.startswith("Add." + name.replace("/", "_") + ".")]
        assert np.array_equal(hit, arr)
    # --op on the watched op writes its snapshots too
    out2 = tmp_path / "out2"
    assert main(["convert", str(tmp_path / "dump"), str(out2), "--op", W]) == 0
    assert len(list(out2.rglob("*.npy"))) == 3


def test_explorer_hangs_snapshots_under_the_watched_op(tmp_path, monkeypatch):
    import asyncio

    from test_tui_support import set_env, wait_ready

    from dumpscope.core.query import OpRow
    from dumpscope.tui.app import DumpscopeApp
    from dumpscope.tui.optree import OpTree

    set_env(monkeypatch, tmp_path)
    _tree(tmp_path / "dump")

    async def run() -> None:
        app = DumpscopeApp(str(tmp_path / "dump"), display_name="dump")
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_ready(pilot)
            tree = app.screen.query_one(OpTree)
            ops = [line.node for line in tree._tree_lines if isinstance(line.node.data, OpRow)]
            assert [n.data.name for n in ops] == [W]  # no snapshot among the scope's ops
            node = ops[0]
            assert node.allow_expand and "(2 snapshots)" in node.label.plain
            tree._populate(node)
            node.expand()
            await pilot.pause()
            kids = [c.data for c in node.children]
            assert [k.watch_after for k in kids] == [A, B] and all(k.graph_only == 2 for k in kids)
            assert [c.label.plain for c in node.children] == [f"↳ after {A}", f"↳ after {B}"]

    asyncio.run(run())
