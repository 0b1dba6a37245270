"""The explorer reads an op's rows off the UI thread (issue 18, item 6): moving the cursor, a search
jump and the compare side-by-side view never run the detail's SQL on the event loop's thread."""

from __future__ import annotations

import threading

import pytest

from test_tui_support import screen_text, search_and_open, settle, wait_ready

pytest.importorskip("textual")

from dumpscope.core.query import DumpQuery  # noqa: E402
from dumpscope.tui.app import DumpscopeApp  # noqa: E402
from dumpscope.tui.detail import OpDetail  # noqa: E402

SIZE = (80, 24)


@pytest.fixture
def calls(monkeypatch) -> list[tuple[str, bool]]:
    """(query, ran on the UI thread?) for every detail query the explorer makes."""
    seen: list[tuple[str, bool]] = []
    for name in ("tensors", "graph_details"):
        orig = getattr(DumpQuery, name)

        def spy(self, *args, _orig=orig, _name=name, **kwargs):
            seen.append((_name, threading.current_thread() is threading.main_thread()))
            return _orig(self, *args, **kwargs)

        monkeypatch.setattr(DumpQuery, name, spy)
    return seen


async def test_cursor_and_search_read_the_op_off_the_ui_thread(tiny, calls):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("t")  # the flat list: one op per row
        await settle(pilot)
        calls.clear()
        await pilot.press("down", "down")
        await settle(pilot)
        shown = app.main.current
        assert shown is not None and app.screen.query_one(OpDetail).op.id == shown.id
        await search_and_open(pilot, "Add-op5")
        assert app.main.current.short == "Add-op5" and "Add  Add-op5" in screen_text(app)
        assert {n for n, _ in calls} == {"tensors", "graph_details"}
        assert not [c for c in calls if c[1]], f"detail queries on the UI thread: {calls}"


async def test_enter_on_a_flat_row_focuses_the_links_of_that_op(tiny):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("t")
        await settle(pilot)
        await pilot.press("down", "enter")  # Enter before the detail followed the cursor
        await settle(pilot)
        detail = app.screen.query_one(OpDetail)
        assert detail.op is not None and detail.op.id == app.main.current.id
