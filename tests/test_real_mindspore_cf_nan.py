"""A real MindSpore 2.10 CPU run with a while loop and an if on tensors (tests/data/real_ms210_cf_nan.tar.gz, see
its README): the step runs kernel graphs 2, 6, 2, 6, 2, 10, 16, 0, 13, 9, 1, and a NaN is born in the loop body's
Sqrt (graph 6) before graph 0 runs.  Expectations come from the files themselves (their timestamps) and numpy."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, unpack_data

SQRT = "Default/network-WithLossCell/_backbone-Net/Sqrt-op0"


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_cf_nan") / "cf"


def _ts(path: str) -> int:
    return int(os.path.basename(path).split(".")[-6])


def _graph_runs(dump: Path, step: int) -> list[str]:
    """The kernel graphs in the order their files were written, one entry per uninterrupted run."""
    files = []
    for graph in os.listdir(dump / "rank_0" / "Net"):
        for f in os.listdir(dump / "rank_0" / "Net" / graph / str(step)):
            if not f.startswith("Parameter."):  # parameters are written after the step's last kernel
                files.append((_ts(f), graph))
    return [g for g, _ in itertools.groupby(g for _, g in sorted(files))]


def test_ops_of_a_step_follow_the_graphs_as_they_ran(capsys, dump, tmp_path):
    for step in (0, 1):
        ops = cli_json(capsys, "ops", str(dump), "--step", str(step), "--cache-dir", str(tmp_path))["ops"]
        assert [o["exec_index"] for o in ops] == list(range(len(ops)))
        ran = [g for g, _ in itertools.groupby(o["graph"] for o in ops)]
        assert ran == _graph_runs(dump, step)
        assert ran.index("6") < ran.index("0")  # the loop body ran before graph 0


def test_overflow_names_the_sqrt_in_the_loop_body_as_born(capsys, dump, tmp_path):
    doc = cli_json(capsys, "overflow", str(dump), "--cache-dir", str(tmp_path))
    origin = doc["origin"]
    assert (origin["name"], origin["step"], origin["judgement"]) == (SQRT, 0, "born")
    sqrt_files = sorted((dump / "rank_0" / "Net" / "6" / "0").glob("Sqrt.*.npy"), key=lambda p: _ts(str(p)))
    x, y = np.load(sqrt_files[0]), np.load(sqrt_files[1])  # the first run: its input, then its output
    assert ".input.0." in sqrt_files[0].name and ".output.0." in sqrt_files[1].name
    assert np.isfinite(x).all() and (x < 0).any()
    assert origin["first_bad"]["index"] == [int(i) for i in np.argwhere(np.isnan(y))[0]]
    first = doc["ops"][0]
    assert (first["name"], first["nan"]) == (SQRT, int(np.isnan(y).sum()))
    # numpy agrees: every float output that ran before the Sqrt in step 0 is finite
    ops = cli_json(capsys, "ops", str(dump), "--step", "0", "--cache-dir", str(tmp_path))["ops"]
    for op in ops:
        if op["exec_index"] >= origin["exec_index"]:
            break
        for t in op["tensors"]:
            arr = np.load(t["file"])
            if t["io"] == "output" and arr.dtype.kind == "f":
                assert np.isfinite(arr).all(), op["name"]


def _sqrt_files(dump: Path, step: int, io: str) -> list[Path]:
    """The loop body's Sqrt files of one step and io, one per run, in the order they were written."""
    return sorted((dump / "rank_0" / "Net" / "6" / str(step)).glob(f"Sqrt.*.{io}.0.*.npy"), key=lambda p: _ts(str(p)))


def test_every_run_of_a_loop_body_op_is_addressable(capsys, dump, tmp_path):
    from dumpscope.tui.cli.entry import main

    first = cli_json(capsys, "show", str(dump), SQRT, "--step", "0", "--cache-dir", str(tmp_path))["op"]
    second = cli_json(capsys, "show", str(dump), SQRT, "--step", "0", "--run", "1", "--cache-dir", str(tmp_path))["op"]
    outs = _sqrt_files(dump, 0, "output")
    assert len(outs) == 2  # the loop ran twice in the step
    assert (first["run"], second["run"]) == (0, 1)
    assert first["runs"] == second["runs"] == [{"run": 0, "exec_index": first["exec_index"], "graph": "6"},
                                               {"run": 1, "exec_index": second["exec_index"], "graph": "6"}]
    assert first["exec_index"] < second["exec_index"]
    assert [t["file"] for t in first["tensors"] if t["io"] == "output"] == [str(outs[0])]
    assert [t["file"] for t in second["tensors"] if t["io"] == "output"] == [str(outs[1])]
    stats = cli_json(capsys, "stats", str(dump), SQRT, "--step", "0", "--run", "1", "--cache-dir", str(tmp_path))
    y = np.load(outs[1])
    assert (stats["run"], stats["nan"], stats["max"]) == (1, int(np.isnan(y).sum()), pytest.approx(float(np.nanmax(y))))
    assert main(["show", str(dump), SQRT, "--run", "2", "--cache-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "ran 2 times" in err and f"1 (exec {second['exec_index']})" in err


def test_trend_keeps_every_run_of_a_loop_body_op(capsys, dump, tmp_path):
    doc = cli_json(capsys, "trend", str(dump), SQRT, "--cache-dir", str(tmp_path))
    assert [(p["step"], p["run"]) for p in doc["points"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for p in doc["points"]:
        y = np.load(_sqrt_files(dump, p["step"], "output")[p["run"]])
        assert (p["nan"], p["count"]) == (int(np.isnan(y).sum()), y.size)
        assert p["max"] == pytest.approx(float(np.nanmax(y)))
    only = cli_json(capsys, "trend", str(dump), SQRT, "--run", "1", "--cache-dir", str(tmp_path))
    assert only["points"] == [p for p in doc["points"] if p["run"] == 1]


async def test_the_explorer_says_which_run_an_op_is_and_trends_that_run(dump, tmp_path, monkeypatch):
    from test_tui_support import set_env, settle, wait_ready

    from dumpscope.tui.app import DumpscopeApp

    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(dump))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        first, second = app.q.runs(app.q.resolve_op(SQRT, 0, 0))
        app.main.show_op(second)
        await settle(pilot)
        rest = str(app.screen.query_one("#detail-rest").render())
        assert f"run 1 of 2 in this step (exec #{first.exec_index}, #{second.exec_index})" in rest
        trend = str(app.screen.query_one("#detail-trend").render())
        assert "out.0, 2 steps" in trend  # run 1 of steps 0 and 1, not all four executions


def test_inputs_that_have_no_file_are_not_dumped_not_finite(dump, tmp_path):
    """MindSpore leaves out an input that comes from another kernel graph: graph 0's loss Sub has input.1
    (the target) but no input.0 (the net's output, NaN), graph 10's MatMul no input.0 (the loop's result)."""
    from dumpscope.core.index.dump_index import DumpIndex
    from dumpscope.core.engines.overflow.lookup import judge
    from dumpscope.core.query import DumpQuery

    q = DumpQuery(DumpIndex.open(str(dump), cache_directory=tmp_path))
    for graph, name in (("0", "Default/network-WithLossCell/_loss_fn-MSELoss/Sub-op0"),
                        ("10", "Default/network-WithLossCell/_backbone-Net/fc-Dense/MatMul-op0")):
        files = [p.name for p in (dump / "rank_0" / "Net" / graph / "0").glob(f"*{name.replace('/', '_')}.*")]
        assert not [f for f in files if ".input.0." in f] and [f for f in files if ".input.1." in f]
        out = next(f for f in files if ".output.0." in f)
        assert np.isnan(np.load(dump / "rank_0" / "Net" / graph / "0" / out)).any()
        j = judge(q, q.resolve_op(name, 0, 0))
        assert j.kind == "unknown" and j.reason.startswith("input 0 not dumped"), (name, j)
    q.index.close()


def test_compare_finds_the_first_divergence_in_the_loop_body_that_ran_first(capsys, dump, tmp_path):
    """Against ``cf_golden`` (a zero shift) the first op whose data differ is the loop body's Sub (graph 6, its
    input 1 is the shift), which ran before graph 0; numpy agrees that everything before it is equal."""
    golden = dump.parent / "cf_golden"
    doc = cli_json(capsys, "compare", str(golden), str(dump), "--cache-dir", str(tmp_path))
    first = doc["first_divergence"]
    assert (first["name"], first["step"]) == ("Default/network-WithLossCell/_backbone-Net/Sub-op0", 0)
    sub = lambda d: sorted((d / "rank_0" / "Net" / "6" / "0").glob("Sub.*.input.1.*.npy"), key=lambda p: _ts(str(p)))
    assert not np.array_equal(np.load(sub(golden)[0]), np.load(sub(dump)[0]))
    ops = {side: cli_json(capsys, "ops", str(d), "--step", "0", "--cache-dir", str(tmp_path))["ops"]
           for side, d in (("g", golden), ("t", dump))}
    at = next(o["exec_index"] for o in ops["t"] if o["name"] == first["name"])
    assert [o["graph"] for o in ops["t"][:at]] == ["2", "6"]  # the loop condition, then the body's first ops
    for g, t in zip(ops["g"][:at], ops["t"][:at]):
        assert g["name"] == t["name"]
        for a, b in zip(g["tensors"], t["tensors"]):
            np.testing.assert_array_equal(np.load(a["file"]), np.load(b["file"]))


def test_compare_calls_parameter_only_what_the_dump_holds_as_one(capsys, dump, tmp_path):
    """A kernel graph's inputs are named like Parameters in the .ir (``%para5_▸фi``: the loop's counter, a
    value carried from one iteration to the next); only those MindSpore dumps as ``Parameter.*`` are
    network Parameters, and only they are named so in a cause."""
    import re

    golden = dump.parent / "cf_golden"
    doc = cli_json(capsys, "compare", str(golden), str(dump), "--cache-dir", str(tmp_path))
    params = {o["name"] for o in cli_json(capsys, "ops", str(golden), "--kind", "parameter", "--cache-dir",
                                          str(tmp_path))["ops"]}
    named = {m for r in doc["rows"] for m in re.findall(r"\(Parameter ([^),]+)", r.get("origin_via") or "")}
    named |= set(re.findall(r"\(Parameter ([^),]+)", doc["first_divergence"]["rule"]))
    assert named <= params, named - params


def test_convert_of_a_loop_body_op_writes_every_run(capsys, dump, tmp_path):
    from dumpscope.tui.cli.entry import main

    out = tmp_path / "out"
    assert main(["convert", str(dump), str(out), "--op", SQRT, "--step", "0", "--cache-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    written = sorted(out.rglob("*.npy"))
    files = sorted((dump / "rank_0" / "Net" / "6" / "0").glob("Sqrt.*.npy"))
    assert len(written) == len(files) == 4  # input and output of both runs
    got = sorted(np.load(p).tobytes() for p in written)
    assert got == sorted(np.load(p).tobytes() for p in files)


async def test_the_explorer_opens_on_the_op_whose_output_went_nan_first(dump, tmp_path, monkeypatch, capsys):
    """Once overflow has run, the explorer opens on its origin.  The oracle: of every output file MindSpore
    wrote in step 0, the earliest (by its timestamp) holding a NaN is the first run's Sqrt output."""
    from test_tui_support import set_env, wait_ready

    from dumpscope.tui.app import DumpscopeApp
    from dumpscope.tui.cli.entry import main

    outs = sorted(((_ts(str(p)), p) for p in (dump / "rank_0" / "Net").glob("*/0/*.output.*.npy")))
    first_bad = next(p for _t, p in outs if np.load(p).dtype.kind == "f" and not np.isfinite(np.load(p)).all())
    set_env(monkeypatch, tmp_path)
    assert main(["overflow", str(dump)]) == 0  # the index cache the explorer opens (set_env's)
    capsys.readouterr()
    app = DumpscopeApp(str(dump))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        op = app.main.current
        assert (op.name, op.step) == (SQRT, 0)
        assert str(first_bad) in [t.path for t in app.q.tensors(op.id)]


def test_a_value_input_the_graph_describes_without_a_dtype_is_not_a_missing_tensor(tmp_path_factory, tmp_path):
    """MindSpore 2.10 (tests/data/real_mindspore_210_block): ReduceMean-op0's input 1 is the axis ``()``, which
    MindSpore does not write (input.0 and input.2 are files); it holds no data, so it is not 'not dumped'."""
    from dumpscope.core.index.dump_index import DumpIndex
    from dumpscope.core.engines.overflow.lookup import judge
    from dumpscope.core.query import DumpQuery

    dump = unpack_data(tmp_path_factory, "real_mindspore_210_block") / "golden"
    q = DumpQuery(DumpIndex.open(str(dump), cache_directory=tmp_path))
    op = q.resolve_op("ReduceMean-op0", 0, 0)
    assert sorted(t.slot for t in q.tensors(op.id) if t.io == "input") == [0, 2]
    assert "()" in q.graph_details(op)["inputs_from"]
    assert "not dumped" not in judge(q, op).reason
    q.index.close()
