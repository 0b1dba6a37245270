"""The explorer over a whole job: it opens on the lowest step, or on the first with overflow evidence,
whatever its partial results held first, and never moves afterwards; `o` covers every step."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from test_tui_support import child_hooks, screen_text, set_env, settle, wait_for, wait_ready

from dumpscope.core.index import dump_index as index_mod
from synth.job_tree import write_cann_job
from dumpscope.tui import app as app_mod
from dumpscope.tui.app import DumpscopeApp

SIZE = (80, 24)


class RecordingApp(DumpscopeApp):
    """Notes the place after every index message (partial ones included)."""

    CSS_PATH = str(Path(app_mod.__file__).parent / "app.tcss")  # relative paths resolve beside the subclass

    def __init__(self, *a, gate: Path | None = None, **kw) -> None:
        super().__init__(*a, **kw)
        self.seen: list[tuple[bool, int, int]] = []
        self.gate = gate

    def on_index_ready(self, message) -> None:
        super().on_index_ready(message)
        if self.q is message.q:
            self.seen.append((message.final, self.rank, self.step))
            if self.gate is not None and not message.final:
                self.gate.touch()  # partial results shown: the builder may store the gated folder now


@pytest.fixture
def slow_partial_build(monkeypatch, tmp_path):
    """A cold build that shows partial results after its first folder, walking the highest step first,
    and storing each folder slowly (the explorer sees the partial results before the build ends).
    The explorer builds in a child process: the same hooks are applied there."""
    set_env(monkeypatch, tmp_path)
    gate = tmp_path / "partial-shown"
    # step 0's folder (…/1/0) is stored only once the explorer has shown partial results: they lack step 0
    # on any machine, however late the explorer reads them
    child_hooks(monkeypatch, "highest_step_first", "slow_store=0.15", f"gate_store={os.sep}1{os.sep}0@{gate}")
    monkeypatch.setattr(index_mod, "PARTIAL_AFTER_S", 0.0)
    real_scan, real_store = index_mod.scan_tree, index_mod.DumpIndex._store_result

    def highest_step_first(root, *a, **kw):
        folders = list(real_scan(root, *a, **kw))
        yield from sorted(folders, key=lambda s: s.dirpath, reverse=True)

    def slow_store(self, *a, **kw):
        time.sleep(0.15)
        return real_store(self, *a, **kw)
    monkeypatch.setattr(index_mod, "scan_tree", highest_step_first)
    monkeypatch.setattr(index_mod.DumpIndex, "_store_result", slow_store)
    return gate


async def _open(root: Path, gate: Path | None = None) -> RecordingApp:
    app = RecordingApp(str(root), display_name="job", gate=gate)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await wait_for(pilot, lambda: any(final for final, _r, _s in app.seen), "the cold build to finish", 120)
        await settle(pilot)
        app.status_text = screen_text(app)
    return app


@pytest.mark.parametrize("trouble", [None, (0, 1)])
async def test_opens_on_lowest_or_first_trouble_step_after_a_slow_partial_build(tmp_path, slow_partial_build,
                                                                                trouble):
    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0, 1, 2), overflow=[trouble] if trouble else [],
                          opdebug=True)
    app = await _open(root, slow_partial_build)
    partial = [s for s in app.seen if not s[0]]
    # the first partial results lacked step 0 (step 2 is stored first, step 0 only once they were shown):
    # the final pass chooses, and nothing moves after it
    assert partial and partial[0][2] in (1, 2), app.seen
    final_at = next(i for i, s in enumerate(app.seen) if s[0])
    want = (0, 1) if trouble else (0, 0)
    assert all((r, s) == want for _f, r, s in app.seen[final_at:]), app.seen  # chosen once, never moved
    assert (app.rank, app.step) == want
    if trouble:
        assert "rank 0 step 1 ! 1" in app.status_text


async def test_first_partial_result_is_the_lowest_step_when_its_folder_lists_last(tmp_path, monkeypatch):
    """The walk yields folders in a fixed order (lowest rank and step first), not as their listings finish:
    the cold build reads step 0 first, so the explorer's first ops are step 0's and it never moves."""
    set_env(monkeypatch, tmp_path)
    child_hooks(monkeypatch, "slow_listing=0", "slow_store=0.15")
    monkeypatch.setattr(index_mod, "PARTIAL_AFTER_S", 0.0)
    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0, 1, 2, 3), overflow=[])
    app = await _open(root)
    partial = [s for s in app.seen if not s[0]]
    assert partial, app.seen  # the build showed partial results before it ended
    assert all((r, s) == (0, 0) for _f, r, s in app.seen), app.seen  # step 0 from the first, never moved
    assert (app.rank, app.step) == (0, 0)


async def test_o_scans_every_step_and_pickers_mark_trouble(tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    root = write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1, 2), overflow={(1, 1)})
    app = DumpscopeApp(str(root), display_name="job")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        assert (app.rank, app.step) == (0, 0)  # tensors only: no evidence before a scan
        await pilot.press("o")
        await settle(pilot)
        rows = app.screen.table.rows
        assert (rows[0]["rank"], rows[0]["step"], rows[0]["name"]) == (1, 1, "model/act/Exp")
        text = screen_text(app)
        assert "rank 0..1 × step 0..2" in text and "scanning" not in text
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        text = screen_text(app)
        assert "step 1 ! 2" in text and "step 0 !" not in text  # rank 0: all-reduce and Add went bad
        await pilot.press("escape")
        await pilot.press("r")
        await settle(pilot)
        assert "rank 1 ! " in screen_text(app)


async def test_detail_shows_the_tensor_over_the_steps(tmp_path, monkeypatch):
    from test_tui_support import search_and_open

    set_env(monkeypatch, tmp_path)
    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0, 1, 2), overflow={(0, 1)})
    app = DumpscopeApp(str(root), display_name="job")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "act/Exp")
        await settle(pilot)
        assert app.main.current.name == "model/act/Exp"
        text = str(app.main.query_one("#detail-trend").render())
        lines = text.splitlines()
        assert lines[0].startswith("Steps 0..2")
        assert lines[3] == "  nan   !   ! NaN/Inf"  # only step 1's Exp output holds +Inf
        assert lines[-1].startswith("       ^ ") and lines[-1].endswith("step 0")  # the step shown
        assert "Steps 0..2" in screen_text(app)
