"""Moving the cursor between ops whose detail keeps its size lays nothing out again (issue 18 Build 6):
the detail and tensor panes update in place, and a key pressed meanwhile does not wait for a layout
of the whole screen.  When the size does change, the layout still happens and nothing is cut."""

from __future__ import annotations

import pytest

from test_tui_support import make_ms_tree, set_env, settle, wait_ready

from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.detail import OpDetail
from dumpscope.tui.quiet import update_static

SIZE = (80, 24)


@pytest.fixture
def layouts(monkeypatch) -> list[int]:
    """One entry per layout of a screen."""
    seen: list[int] = []
    orig = Screen._refresh_layout

    def spy(self, *args, **kwargs):
        seen.append(1)
        return orig(self, *args, **kwargs)

    monkeypatch.setattr(Screen, "_refresh_layout", spy)
    return seen


class _One(App):
    def compose(self) -> ComposeResult:
        yield Static("a\nb", id="s")
        yield Static("below", id="below")


async def test_update_static_lays_out_only_when_the_height_changes(layouts):
    app = _One()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        s, below = app.query_one("#s", Static), app.query_one("#below", Static)
        layouts.clear()
        assert update_static(s, "c\nd") is False
        await pilot.pause()
        assert layouts == [] and s.size.height == 2
        assert update_static(s, "e\nf\ng") is True
        await pilot.pause()
        await pilot.pause()
        assert layouts and s.size.height == 3 and below.region.y == 3  # nothing below is overdrawn
        assert update_static(s, "x" * 100) is False  # one line wrapped to three at 40 columns: same height
        await pilot.pause()
        assert s.size.height == 3


async def test_moving_between_alike_ops_lays_nothing_out(tmp_path, monkeypatch, layouts):
    # five ops alike but for their number: details, stats and trends of the same size
    dump = make_ms_tree(tmp_path / "trees", ops=[("Add", f"Default/net/Add-op{i}") for i in range(1, 6)],
                        inf_op=None)
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(dump), display_name="alike")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("t")
        await settle(pilot)
        await pilot.press("down")
        await settle(pilot)
        assert app.screen.query_one("#detail-trend", Static).display  # two steps: a trend is shown
        layouts.clear()
        await pilot.press("down")
        await settle(pilot)
        assert app.main.current.short == "Add-op3" and app.screen.query_one(OpDetail).op.short == "Add-op3"
        assert layouts == [], "the detail or tensor pane laid the screen out for an op of the same size"


async def test_a_taller_detail_is_laid_out_in_full(tiny, layouts):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("t", "down", "down")
        await settle(pilot)
        layouts.clear()
        await pilot.press("down")  # MatMul-op4: its NaN/Inf statistics (and first bad index) are taller
        await settle(pilot)
        head = app.screen.query_one("#detail-head", Static)
        assert app.main.current.short == "MatMul-op4" and layouts
        assert head.size.height == len(head.content.plain.split("\n")) == 4  # type, source, in.0, out.0
        stats = app.screen.query_one("#tp-stats", Static)
        wrapped = stats.get_content_height(stats.container_size, app.size, stats.content_region.width)
        assert "first bad" in stats.content.plain and stats.content_region.height == wrapped >= 6
