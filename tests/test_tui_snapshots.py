"""Snapshot tests of the main screens at 80x24 (pytest-textual-snapshot).

Regenerate after an intended UI change with ``pytest tests/test_tui_snapshots.py --snapshot-update``
and review the SVGs.  Apps get a fixed display name and dump paths are shown relative to the dump
root, so no temp path, timing or date reaches the screen.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_tui_support import SAMPLE_LENET, set_env, settle, wait_for, wait_ready

from dumpscope.tui.app import DumpscopeApp

SIZE = (80, 24)


@pytest.fixture
def sample(tmp_path, monkeypatch) -> Path:
    set_env(monkeypatch, tmp_path)
    return SAMPLE_LENET


def test_snapshot_main_screen(sample, snap_compare):
    async def run_before(pilot) -> None:
        await wait_ready(pilot)

    assert snap_compare(DumpscopeApp(str(sample), display_name="mindspore_lenet_sync"), terminal_size=SIZE,
                        run_before=run_before)


def test_snapshot_main_screen_flat(sample, snap_compare):
    async def run_before(pilot) -> None:
        await wait_ready(pilot)
        await pilot.press("t", "down", "down")
        await settle(pilot)

    assert snap_compare(DumpscopeApp(str(sample), display_name="mindspore_lenet_sync"), terminal_size=SIZE,
                        run_before=run_before)


def test_snapshot_help(tiny, snap_compare):
    async def run_before(pilot) -> None:
        await wait_ready(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(DumpscopeApp(str(tiny), display_name="tiny"), terminal_size=SIZE, run_before=run_before)


def test_snapshot_overflow_view(tiny, snap_compare):
    async def run_before(pilot) -> None:
        await wait_ready(pilot)
        await pilot.press("o")
        await settle(pilot)

    assert snap_compare(DumpscopeApp(str(tiny), display_name="tiny"), terminal_size=SIZE, run_before=run_before)


@pytest.fixture(scope="module")
def bn_data(tmp_path_factory) -> Path:
    from conftest import unpack_data

    return unpack_data(tmp_path_factory, "real_mindspore_210_bn")


def test_snapshot_source_line_first(bn_data, tmp_path, monkeypatch, snap_compare):
    """The real Exp overflow run: `/ Exp-op0 Enter` shows net.py:<line> right under the op's header."""
    set_env(monkeypatch, tmp_path)

    async def run_before(pilot) -> None:
        await wait_ready(pilot)
        await pilot.press("slash", *"Exp-op0")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(DumpscopeApp(str(bn_data / "overflow"), display_name="overflow"), terminal_size=SIZE,
                        run_before=run_before)


def test_snapshot_compare_diff(bn_data, tmp_path, monkeypatch, snap_compare):
    """The real BatchNorm-eps pair: c, Enter shows the changed epsilon (golden → target) on screen one."""
    set_env(monkeypatch, tmp_path)

    async def run_before(pilot) -> None:
        await wait_ready(pilot)
        await wait_for(pilot, lambda: pilot.app.compare_result is not None or pilot.app.compare_error is not None,
                       "the compare")
        await pilot.press("c")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)

    app = DumpscopeApp(str(bn_data / "golden"), compare_with=str(bn_data / "target"), display_name="golden")
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
