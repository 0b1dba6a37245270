"""The key bar (``tui/keybar.py``) stands in for Textual's ``Footer`` on every screen: the same keys,
the palette key at the right edge at any width, a click presses a key; and no screen mounts the
widget-per-key footer again (it was half of the UI thread's work for ``c``, issue 18 Build 6)."""

from __future__ import annotations

import pytest

from test_tui_support import screen_text, settle, wait_ready

from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.help import HelpScreen
from dumpscope.tui.keybar import KeyBar


def bottom(app) -> str:
    return screen_text(app).splitlines()[-1]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_key_bar_lists_the_shown_keys_and_the_palette_at_the_right(tiny, size):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=size) as pilot:
        await wait_ready(pilot)
        line = bottom(app)
        shown = [b for _n, b, _e, _t in app.screen.active_bindings.values() if b.show]
        assert {"Search", "Tree/flat", "Quit", "Help"} <= {b.description for b in shown}
        for words in (" / Search ", " t Tree/flat ", " q Quit ", " ? Help "):
            assert words in line, line
        assert line.rstrip().endswith("▏^p Palette") and len(line.rstrip()) == size[0] - 1
        for view in ("question_mark", "o"):  # other screens: their own keys
            await pilot.press(view)
            await settle(pilot)
            assert not app.screen.query("Footer"), f"{type(app.screen).__name__} mounts Textual's Footer"
            assert len(app.screen.query(KeyBar)) == 1
            assert " esc " in bottom(app) and bottom(app).rstrip().endswith("▏^p Palette")
            await pilot.press("escape")
            await settle(pilot)


async def test_a_click_on_a_key_presses_it(tiny):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        line = bottom(app)
        x = line.index(" ? Help ") + 2
        await pilot.click(KeyBar, offset=(x, 0))
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert not app.main.query("Footer")
