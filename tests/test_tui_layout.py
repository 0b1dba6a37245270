"""Pilot tests of issue 18's layout at 80x24 on the real MindSpore 2.10 dumps in
``tests/data/real_mindspore_210_bn.tar.gz`` (written by MindSpore itself, see its README):
the answer (the user's source line) on the first screen, panes that take focus and show it,
``esc`` back to the view a jump came from, the slice input giving focus back."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import unpack_data
from test_tui_support import screen_text, search_and_open, set_env, settle, wait_ready

pytest.importorskip("textual")

from textual.widgets import Input  # noqa: E402

from dumpscope.tui.app import DumpscopeApp  # noqa: E402
from dumpscope.tui.detail import OpDetail  # noqa: E402
from dumpscope.tui.tensor_panel import TensorPanel  # noqa: E402
from dumpscope.tui.view_overflow import OverflowScreen  # noqa: E402

SIZE = (80, 24)


@pytest.fixture(scope="module")
def bn_data(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_mindspore_210_bn")


@pytest.fixture
def overflow_dump(bn_data, tmp_path, monkeypatch) -> Path:
    set_env(monkeypatch, tmp_path)
    return bn_data / "overflow"


def net_py_line(bn_data: Path, needle: str) -> int:
    """The line of ``net.py`` (the script MindSpore ran) that holds ``needle``."""
    lines = (bn_data / "net.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


async def test_source_line_is_on_the_first_screen(overflow_dump, bn_data):
    app = DumpscopeApp(str(overflow_dump), display_name="overflow")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Exp-op0")
        assert app.main.current.short == "Exp-op0"
        text = screen_text(app)
        line = net_py_line(bn_data, "return ops.exp(")
        assert f"net.py:{line}  return ops.exp(x * self.scale)" in text
        rows = text.splitlines()
        # order: header, source line, then the tensors; and the status bar keeps the place
        head = next(i for i, r in enumerate(rows) if "Exp  Exp-op0" in r)
        assert f"net.py:{line}" in rows[head + 1]
        assert "out.0" in text and text.index(f"net.py:{line}") < text.index("out.0")
        assert "rank 0 step 0" in rows[-2] and f"{app.q.count_ops(0, 0):,} ops" in rows[-2]


async def test_framework_frames_are_not_the_source_line(overflow_dump, bn_data):
    app = DumpscopeApp(str(overflow_dump), display_name="overflow")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Exp-op0")
        head = str(app.screen.query_one("#detail-head").render())
        assert "gen_ops_def.py" not in head  # MindSpore's own frame is innermost, but not the user's


async def test_tab_cycles_panes_and_marks_the_focused_one(overflow_dump):
    app = DumpscopeApp(str(overflow_dump), display_name="overflow")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        main = app.main
        assert main.pane_of(main.focused) == "left" and "▶ ops" in screen_text(app)
        await pilot.press("tab")
        await settle(pilot)
        assert isinstance(main.focused, OpDetail)
        assert "▶ op detail" in screen_text(app) and "▶ ops" not in screen_text(app)
        assert main.query_one("#detail").has_class("pane-focused")  # the colour, by CSS class
        # the detail scrolls with the keyboard down to its full stack
        await pilot.press("end")
        await settle(pilot)
        assert main.query_one(OpDetail).scroll_y > 0
        await pilot.press("tab")
        await settle(pilot)
        assert isinstance(main.focused, TensorPanel) and "▶ tensor" in screen_text(app)
        await pilot.press("tab")
        await settle(pilot)
        assert main.pane_of(main.focused) == "left"


async def test_enter_in_slice_hands_focus_back(overflow_dump):
    app = DumpscopeApp(str(overflow_dump), display_name="overflow")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Exp-op0")
        tree = app.main.focused
        await pilot.press("colon")
        assert isinstance(app.main.focused, Input)
        await pilot.press("0", "enter")
        await settle(pilot)
        assert app.main.focused is tree
        panel = app.main.query_one(TensorPanel)
        before = panel.index
        await pilot.press("right_square_bracket")  # ] moves the tensor, not typed into the input
        assert panel.index != before
        assert app.main.query_one("#tp-slice", Input).value == "0"


async def test_esc_returns_to_the_view_the_jump_came_from(overflow_dump):
    app = DumpscopeApp(str(overflow_dump), display_name="overflow")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("o")
        await settle(pilot)
        assert isinstance(app.screen, OverflowScreen)
        rows = app.screen.table.rows
        assert rows, "the real overflow run has non-finite ops"
        await pilot.press("end")
        cursor = app.screen.table.cursor
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is app.main and app.main.current.id == rows[cursor]["op_id"]
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, OverflowScreen)
        assert app.screen.table.cursor == cursor  # back on the row we left
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is app.main


async def test_overflow_view_never_says_none_found_while_scanning(overflow_dump, monkeypatch):
    import threading

    from dumpscope.tui import engines

    gate = threading.Event()
    real = engines.overflow_report()

    def slow(q, **kwargs):
        gate.wait(10)
        return real(q, **kwargs)

    monkeypatch.setattr(engines, "overflow_report", lambda: slow)
    app = DumpscopeApp(str(overflow_dump), display_name="overflow")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("o")
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "scanning" in text and "no overflow" not in text and "nothing found" not in text
        gate.set()
        await settle(pilot)
        assert "scanning" not in screen_text(app)
