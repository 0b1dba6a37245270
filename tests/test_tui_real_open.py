"""Open on the answer (issue 18), at 80x24 on real dumps: when the opening place has overflow evidence,
the cursor lands on its first bad op and the detail says why (born / received…).  Real data: the
MindSpore 2.10 and 2.7 data-parallel runs of tests/data/real_ms210_dp2.tar.gz (rank 1's Log-op0 makes
the NaN, rank 0 receives it through the gradient AllReduce) and msprobe 26.2's NaN statistics dump
(tests/data/real_msprobe26.tar.gz).  Expected ops come from numpy on the dumped files, never from dumpscope."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import cli_json, unpack_data
from test_real_ms210_dp2 import first_nonfinite_kernel
from test_tui_support import screen_text, set_env, wait_ready

from dumpscope.tui.app import DumpscopeApp

SIZE = (80, 24)


@pytest.fixture(scope="module")
def dp2_data(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_dp2")


@pytest.fixture(params=["dp2", "dp2_ms27"])
def dp2(request, dp2_data, tmp_path, monkeypatch) -> Path:
    set_env(monkeypatch, tmp_path)
    return dp2_data / request.param


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _detail(app) -> list[str]:
    return [r.split("▕", 1)[1] for r in screen_text(app).splitlines() if "▕" in r]


async def test_without_evidence_it_opens_on_the_lowest_place_and_its_first_op(dp2):
    """Nothing is read at open: a tensor dump not yet scanned has no evidence, so no place is preferred."""
    app = DumpscopeApp(str(dp2), display_name="dp2")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        assert (app.rank, app.step) == (0, 0)
        assert app.main.current.id == app.q.ops(0, 0, limit=1)[0].id


async def test_after_a_scan_it_opens_on_the_rank_that_made_the_nan_and_its_first_bad_op(dp2, capsys):
    cli_json(capsys, "overflow", str(dp2))  # the scan's counts are kept in the index the explorer opens
    born, _ = first_nonfinite_kernel(dp2, 1, 0)  # numpy: rank 1's first kernel with a NaN output
    received, _ = first_nonfinite_kernel(dp2, 0, 0)
    assert _short(born) == "Log-op0" and _short(received) == "AllReduce-op0"
    app = DumpscopeApp(str(dp2), display_name="dp2")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        # rank 0's AllReduce may come first by execution index, but it received the NaN: rank 1 is the origin
        assert (app.rank, app.step) == (1, 0)
        assert app.main.current.name == born
        rows = screen_text(app).splitlines()
        detail = _detail(app)
        head = next(i for i, r in enumerate(detail) if f"Log  {_short(born)}" in r)
        assert "make_dp2_run.py:" in detail[head + 1]  # the source line, then the evidence and why
        assert detail[head + 2].strip().startswith("! nan")
        assert detail[head + 3].strip() == "↳ born: inputs finite (max 0.88)"
        assert detail[head + 4].strip().startswith("→ output 0 nan: invalid operation")
        assert any(_short(born) in r.split("▕")[0] for r in rows)  # the list shows the op the cursor is on
        assert "rank 1 step 0" in rows[-2]


async def test_rank_and_step_asked_for_open_there_on_its_first_bad_op(dp2, capsys):
    cli_json(capsys, "overflow", str(dp2))
    received, _ = first_nonfinite_kernel(dp2, 0, 0)
    app = DumpscopeApp(str(dp2), display_name="dp2", rank=0, step=0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        assert (app.rank, app.step) == (0, 0)
        assert app.main.current.name == received
        text = " ".join(" ".join(_detail(app)).split())
        assert "↳ received: inputs finite" in text and "→ output 0 nan: received from" in text
        assert "rank 0 step 0" in screen_text(app).splitlines()[-2]


async def test_a_place_not_in_the_dump_is_said_and_the_default_kept(dp2, capsys):
    cli_json(capsys, "overflow", str(dp2))
    app = DumpscopeApp(str(dp2), display_name="dp2", rank=5)
    notes: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        real_notify = app.notify
        app.notify = lambda message, **kw: (notes.append(str(message)), real_notify(message, **kw))[1]
        await wait_ready(pilot)
        assert (app.rank, app.step) == (1, 0)  # where the trouble is, as without --rank
        assert any("no rank 5 in this dump" in n for n in notes)


async def test_statistics_evidence_needs_no_scan(tmp_path_factory, tmp_path, monkeypatch, capsys):
    """msprobe's statistics carry the NaN at open: the explorer lands on the first op whose output has one."""
    set_env(monkeypatch, tmp_path)
    dump = unpack_data(tmp_path_factory, "real_msprobe26") / "nan_stats"
    import json

    rows = json.loads(next(dump.rglob("dump.json")).read_text())["data"]
    # msprobe's own statistics, in its call order: the first API whose output max is nan
    first = next(name for name, entry in rows.items() if any(
        isinstance(o, dict) and str(o.get("Max")).lower() == "nan" for o in entry.get("output", [])))
    app = DumpscopeApp(str(dump), display_name="nan_stats")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        assert app.main.current.name == first
        assert any(r.strip().startswith("↳ born: inputs finite") for r in _detail(app))


async def test_overflow_view_names_its_empty_columns_and_h_shows_them(dp2, capsys):
    """No Opdebug here, so no status in any row: the column is hidden, the line under the table says so,
    and H brings it back (and hides it again)."""
    from test_tui_support import settle

    doc = cli_json(capsys, "overflow", str(dp2))
    assert doc["ops"] and not any(r["status"] or r["status_words"] for r in doc["ops"])
    app = DumpscopeApp(str(dp2), display_name="dp2")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("o")
        await settle(pilot)
        rows = screen_text(app).splitlines()
        header = next(r for r in rows if " exec " in r)
        assert " status " not in header
        assert rows[-2].strip() == "hidden, empty in every row: status   H: show them"
        await pilot.press("H")
        await settle(pilot)
        rows = screen_text(app).splitlines()
        header = next(r for r in rows if " exec " in r)
        assert " status " in header
        assert rows[-2].strip().startswith("showing every column, the empty ones too")
        await pilot.press("H")
        await settle(pilot)
        assert " status " not in next(r for r in screen_text(app).splitlines() if " exec " in r)


async def test_a_single_rank_nan_run_opens_on_its_earliest_step_and_first_bad_op(tmp_path_factory, tmp_path,
                                                                                   monkeypatch, capsys):
    """tests/data/real_ms210_nan: every dumped step holds NaN; the earliest step's first NaN kernel (numpy)."""
    from test_tui_real_dumps import first_nan_mindspore

    set_env(monkeypatch, tmp_path)
    dump = unpack_data(tmp_path_factory, "real_ms210_nan") / "nan"
    name, step = first_nan_mindspore(dump, 0)
    doc = cli_json(capsys, "overflow", str(dump))
    assert {r["step"] for r in doc["ops"]} != {step}  # later steps have trouble too: the earliest wins
    app = DumpscopeApp(str(dump), display_name="nan")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        assert (app.rank, app.step) == (0, step) and app.main.current.name == name
        assert any(r.strip().startswith("↳ born: inputs finite") for r in _detail(app))


def test_explorer_command_line_passes_rank_and_step(tmp_path, monkeypatch):
    from dumpscope.core.engines import child_jobs
    from dumpscope.tui.cli.entry import main

    seen = []
    monkeypatch.setattr(child_jobs, "prestart_build", lambda *a, **k: None)
    monkeypatch.setattr(DumpscopeApp, "run", lambda self, *a, **k: seen.append(self.want_place))
    assert main([str(tmp_path), "--rank", "1", "--step", "0"]) == 0
    assert main(["explore", str(tmp_path), "--step", "2"]) == 0
    assert main([str(tmp_path)]) == 0
    assert seen == [(1, 0), (None, 2), None]
