"""The explorer over a dump whose names attack the terminal: what it paints holds no raw control
character and shows each name literally (made visible), in every view that shows dump text."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_tui_support import set_env, settle, wait_ready

from dumpscope.core.inert import inert
from synth.faults import HOSTILE_NAMES, HOSTILE_TYPE, write_hostile_tree
from dumpscope.tui.app import DumpscopeApp

RAW = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0), 0x202E)]


def painted(app) -> str:
    """Every text segment the compositor would send to the terminal for the current screen."""
    from rich.segment import Segment

    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens,
                                                  simplify=True)

    def segments(item):
        if isinstance(item, Segment):
            yield item
        else:  # a Strip, a list of strips or a {x: strip} mapping
            for sub in (item.values() if isinstance(item, dict) else item):
                yield from segments(sub)

    lines = ["".join(seg.text for seg in segments(line) if not seg.control) for line in update.strips]
    for line in lines:
        assert_inert(line)
    return "\n".join(lines)


def assert_inert(text: str) -> None:
    bad = sorted({repr(c) for c in text if c in RAW})
    assert not bad, f"raw control characters reached the screen: {bad}"


@pytest.fixture
def hostile(tmp_path, monkeypatch) -> Path:
    set_env(monkeypatch, tmp_path)
    write_hostile_tree(tmp_path / "dump")
    return tmp_path / "dump"


async def test_explorer_paints_hostile_names_inert(hostile):
    app = DumpscopeApp(str(hostile), display_name="dump")
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_ready(pilot)
        await pilot.press("t")  # the flat execution-order list: every op on one screen
        await settle(pilot)
        text = painted(app)
        for i, name in enumerate(HOSTILE_NAMES):
            # the visible form of the op's short name (its end may be cut by the column width)
            assert inert(app.q.resolve_op(name).short)[:12] in text, name
            app.main.jump_to(app.q.resolve_op(name))
            await settle(pilot)
            text = painted(app)
            assert inert(name)[:60] in text, f"detail of {name!r}"
        app.main.jump_to(app.q.resolve_op(HOSTILE_NAMES[0]))
        await settle(pilot)
        assert inert(HOSTILE_TYPE) in painted(app)
        for key in ("p", "o", "w"):  # problems, overflow, watch views
            await pilot.press(key)
            await settle(pilot)
            await pilot.pause(0.3)
            await settle(pilot)
            painted(app)
            await pilot.press("escape")
            await settle(pilot)


def test_report_and_csv_export_are_inert(hostile, tmp_path):
    """The markdown report and a table's CSV export hold names visibly, never raw escapes."""
    from dumpscope.core.query import open_query
    from dumpscope.tui.report import build_report, write_export
    from dumpscope.tui.vtable import Column, VTable

    q = open_query(str(hostile), use_cache=False)
    ops = [q.resolve_op(n) for n in HOSTILE_NAMES]
    text = build_report(q, ops, {})
    assert_inert(text.replace("\n", ""))
    for name in HOSTILE_NAMES:
        assert inert(name) in text

    class Screen:
        export_table = VTable([Column("name", "name")])

    Screen.export_table.rows = [{"name": n} for n in HOSTILE_NAMES]

    class App:
        screen = Screen()
        screen_stack = [screen]

    out = tmp_path / "t.csv"
    write_export(App(), str(out))
    data = out.read_text(encoding="utf-8")
    assert_inert(data.replace("\n", "").replace("\r", ""))
    assert inert(HOSTILE_NAMES[0]) in data
