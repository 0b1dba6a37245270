"""A --rank/--step/--io/--slot/--run that the dump does not have is an error (rc 1) naming what it has, never an
empty answer; MindSpore's constants (the ``constants/`` folder, no step) are never shown as a step -1.  Real dumps:
tests/data/real_ms210_cf_nan (steps 0 and 1, rank 0) and real_ms20_block (a ``constants/`` folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import cli_json, unpack_data
from dumpscope.tui.cli.entry import main

SQRT = "Default/network-WithLossCell/_backbone-Net/Sqrt-op0"


@pytest.fixture(scope="module")
def cf(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_cf_nan") / "cf"


@pytest.fixture(scope="module")
def ms20(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms20_block") / "dump"


def _fails(capsys, *args: str) -> str:
    assert main(list(args)) == 1, args
    out, err = capsys.readouterr()
    assert out == ""
    return err


@pytest.mark.parametrize("argv, says", [
    (["ops", "--step", "5"], "--step 5: not in this dump (steps: 0, 1)"),
    (["ops", "--step", "-1"], "--step -1: not in this dump (steps: 0, 1)"),
    (["ops", "--rank", "3"], "--rank 3: not in this dump (ranks: 0)"),
    (["overflow", "--step", "7"], "--step 7: not in this dump (steps: 0, 1)"),
    (["overflow", "--rank", "2"], "--rank 2: not in this dump (ranks: 0)"),
    (["trend", SQRT, "--rank", "4"], "--rank 4: not in this dump (ranks: 0)"),
    (["trend", SQRT, "--slot", "3"], "has no output 3 at any step (its tensors: input.0, output.0)"),
    (["trend", SQRT, "--io", "input", "--slot", "1"], "has no input 1 at any step (its tensors: input.0, output.0)"),
    (["trend", SQRT, "--run", "2"], "run 2 does not exist (runs 0..1)"),
    (["stats", SQRT, "--step", "9"], "--step 9: not in this dump (steps: 0, 1)"),
])
def test_selectors_that_do_not_exist_are_errors_listing_what_does(capsys, cf, tmp_path, argv, says):
    command, *rest = argv
    err = _fails(capsys, command, str(cf), *rest, "--cache-dir", str(tmp_path))
    assert says in err


def test_the_constants_folder_is_not_a_step(capsys, ms20, tmp_path):
    consts = sorted((ms20 / "rank_0" / "Net" / "0" / "constants").glob("*.npy"))
    assert consts  # MindSpore wrote a constants/ folder beside step 0
    doc = cli_json(capsys, "overflow", str(ms20), "--cache-dir", str(tmp_path))
    places = doc["scanned"] + doc["not_scanned"]
    assert [(p["rank"], p["step"]) for p in places] == [(0, 0)]
    assert all(r["step"] >= 0 for r in doc["ops"] + doc["first_bad"])
    assert [(c["rank"], c["values"], c["nonfinite"]) for c in doc["constants"]] == [(0, len(consts), [])]
    assert main(["overflow", str(ms20), "--cache-dir", str(tmp_path)]) == 0
    assert "step -1" not in capsys.readouterr().out


def test_constants_are_listed_without_a_step(capsys, ms20, tmp_path):
    consts = cli_json(capsys, "ops", str(ms20), "--kind", "constant", "--cache-dir", str(tmp_path))["ops"]
    files = sorted(str(p) for p in (ms20 / "rank_0" / "Net" / "0" / "constants").glob("*.npy"))
    assert sorted(t["file"] for o in consts for t in o["tensors"]) == files
    assert {(o["kind"], o["step"]) for o in consts} == {("constant", None)}
    assert cli_json(capsys, "show", str(ms20), consts[0]["name"], "--cache-dir", str(tmp_path))["op"]["step"] is None
    assert main(["show", str(ms20), consts[0]["name"], "--cache-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "no step (constants)" in text and "step -1" not in text
    assert main(["ops", str(ms20), "--kind", "constant", "--csv", "--cache-dir", str(tmp_path)]) == 0
    assert ",-1," not in capsys.readouterr().out


async def test_the_explorer_shows_a_constant_without_a_step(ms20, tmp_path, monkeypatch):
    from test_tui_support import screen_text, set_env, settle, wait_ready

    from dumpscope.tui.app import DumpscopeApp

    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(ms20))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        assert app.step == 0
        const = app.q.ops(0, 0, kind="constant")[0]
        app.main.show_op(const)
        await settle(pilot)
        rest = str(app.screen.query_one("#detail-rest").render())
        assert "no step (constants)" in rest and "step -1" not in rest + screen_text(app)


def test_trend_of_a_constant_has_no_step(capsys, ms20, tmp_path):
    consts = cli_json(capsys, "ops", str(ms20), "--kind", "constant", "--cache-dir", str(tmp_path))["ops"]
    doc = cli_json(capsys, "trend", str(ms20), consts[0]["name"], "--cache-dir", str(tmp_path))
    assert [(p["rank"], p["step"]) for p in doc["points"]] == [(0, None)]
    assert main(["trend", str(ms20), consts[0]["name"], "--cache-dir", str(tmp_path)]) == 0
    assert "-1" not in capsys.readouterr().out
