"""Pilot tests of issue 18's key handling: type-ahead (keys that arrive in one read, as over
SSH), quitting with keys still queued, help in words, screenshots where the user can find them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_tui_support import record_notes, screen_text, settle, wait_ended, wait_ready

from textual import events

from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.help import HelpScreen

SIZE = (80, 24)
CHARS = {"slash": "/", "question_mark": "?", "enter": "\r", "minus": "-", "escape": "\x1b"}


def burst(app, keys: list[str]) -> None:
    """Queue every key at once, the way a terminal delivers a fast typist's (or tmux's) keys."""
    for k in keys:
        app.post_message(events.Key(k, CHARS.get(k, k if len(k) == 1 else None)))


@pytest.mark.parametrize("after", [["slash", "question_mark", "e"], ["o"], ["p"], ["w"], ["question_mark"],
                                   ["e"], ["s"]])
async def test_keys_typed_after_quit_are_ignored(tiny, after):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        burst(app, ["q", *after])
        await wait_ended(app)
    assert app.return_code == 0  # a NoMatches traceback would exit with 1 (and raise here)


async def test_search_typed_ahead_in_one_burst_opens_the_op(tiny):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        burst(app, ["slash", *"MatMul", "minus", "o", "p", "4", "enter"])
        await settle(pilot)
        assert app.main.current.name.endswith("MatMul-op4")
        assert not app.screen.query("#search-input")  # the dialog closed on the queued Enter


async def test_help_says_what_keys_do_not_action_names(tiny):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=(120, 200)) as pilot:
        await wait_ready(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        assert "tree.down" in text  # the tree's own j/k are listed…
        for raw in ("cursor_down", "cursor_up", "toggle_node", "select_cursor"):
            assert raw not in text  # …in words


async def test_screenshot_goes_to_export_dir_and_says_where(tiny, tmp_path):
    out = tmp_path / "shots"
    out.mkdir()
    app = DumpscopeApp(str(tiny), display_name="tiny", export_dir=str(out))
    notes = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        shots = list(out.glob("*.svg"))
        assert len(shots) == 1 and shots[0].read_text().startswith("<svg")
        assert any(str(out) in str(n.message) for n in notes)
    assert not list(Path(tiny).rglob("*.svg"))


async def test_screenshot_refuses_the_dump_tree(tiny):
    os.chdir(tiny)  # working directory inside the dump: nothing may be written there
    app = DumpscopeApp(str(tiny), display_name="tiny")
    notes = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        app.deliver_screenshot()  # what the palette's "Screenshot" calls
        await settle(pilot)
        assert any("inside the dump tree" in str(n.message) for n in notes)
    assert not list(Path(tiny).rglob("*.svg"))
