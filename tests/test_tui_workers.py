"""The explorer reads an op's rows off the UI thread (issue 18, item 6): moving the cursor, a search
jump and the compare side-by-side view never run the detail's SQL on the event loop's thread."""

from __future__ import annotations

import threading

import pytest

from test_tui_support import screen_text, search_and_open, settle, wait_ready

from dumpscope.core.query import DumpQuery
from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.detail import OpDetail

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


#: every DumpQuery read the op panes make: none may run on the UI thread (issue 18 Build 6)
PANE_QUERIES = ("count_ops", "op_position", "ops", "ops_in_scope", "ops_of_kind", "scope_facts", "kind_counts",
                "snapshot_counts", "snapshots_of")


@pytest.fixture
def pane_calls(monkeypatch) -> list[tuple[str, bool]]:
    seen: list[tuple[str, bool]] = []
    for name in PANE_QUERIES:
        orig = getattr(DumpQuery, name, None)
        if orig is None:
            continue

        def spy(self, *args, _orig=orig, _name=name, **kwargs):
            seen.append((_name, threading.current_thread() is threading.main_thread()))
            return _orig(self, *args, **kwargs)

        monkeypatch.setattr(DumpQuery, name, spy)
    return seen


def on_ui(calls: list[tuple[str, bool]]) -> list[str]:
    return [n for n, ui in calls if ui]


async def test_tree_scopes_and_jumps_read_off_the_ui_thread(tmp_path, monkeypatch, pane_calls):
    from test_tui_support import make_ms_tree, set_env

    from dumpscope.tui.optree import OpTree, Scope

    set_env(monkeypatch, tmp_path)
    # 40 blocks of 30 ops: too many to open at once, so blocks open when asked
    ops = [("Add", f"Default/blk{i // 30}/Add-op{i}") for i in range(1200)]
    dump = make_ms_tree(tmp_path / "big", steps=(0, 1), inf_op=None, ops=ops)
    app = DumpscopeApp(str(dump), display_name="big")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        tree = app.screen.query_one(OpTree)
        assert {"scope_facts", "count_ops"} <= {n for n, _ in pane_calls}  # the load read them ...
        assert not on_ui(pane_calls), f"queries on the UI thread while loading: {on_ui(pane_calls)}"  # ... off it
        pane_calls.clear()
        def closed_scope(own: bool):
            return next(n.node for n in tree._tree_lines if isinstance(n.node.data, Scope)
                        and not n.node.is_expanded and bool(n.node.data.own) == own)

        tree.move_cursor(closed_scope(False))  # "Default": 40 blocks, too many to open at load
        await pilot.press("right")
        await settle(pilot)
        closed = closed_scope(True)
        tree.move_cursor(closed)
        await pilot.press("right")  # a block: its ops are read in the "tree scope" worker
        await settle(pilot)
        assert closed.is_expanded and any(getattr(c.data, "exec_index", None) is not None for c in closed.children)
        assert not [c for c in closed.children if c.data.__class__.__name__ == "Loading"]
        await search_and_open(pilot, "Add-op1111")  # a jump into a closed block, in tree mode
        assert app.main.current.short == "Add-op1111" and tree.current is not None \
            and tree.current.short == "Add-op1111"
        await pilot.press("ctrl+p", *"step 1")  # another step: counts and tree again
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.step == 1 and "1,200 ops" in screen_text(app)
        assert {"ops_in_scope", "scope_facts", "count_ops"} <= {n for n, _ in pane_calls}
        assert not on_ui(pane_calls), f"queries on the UI thread: {on_ui(pane_calls)}"


async def test_flat_list_pages_are_read_off_the_ui_thread(tmp_path, monkeypatch, pane_calls):
    from test_tui_support import make_ms_tree, set_env

    from dumpscope.tui.oplist import PAGE, OpList

    set_env(monkeypatch, tmp_path)
    ops = [("Mul", f"Default/net/Mul-op{i}") for i in range(3 * PAGE + 10)]
    dump = make_ms_tree(tmp_path / "flat", steps=(0,), inf_op=None, ops=ops)
    app = DumpscopeApp(str(dump), display_name="flat")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("t")
        await settle(pilot)
        flat = app.screen.query_one(OpList)
        pane_calls.clear()
        for key in ("pagedown",) * 12 + ("end",):  # every page, and a jump to the last row
            await pilot.press(key)
            await settle(pilot)
        assert flat.cursor == len(ops) - 1 and flat.current is not None and flat.current.short == ops[-1][1][12:]
        assert app.main.current.id == flat.current.id  # the detail followed once the page was read
        assert "ops" in {n for n, _ in pane_calls}  # pages were read ...
        assert not on_ui(pane_calls), f"queries on the UI thread: {on_ui(pane_calls)}"  # ... in a worker
        pane_calls.clear()
        await pilot.press("f", *"op300", "enter")  # a filter: count and first page through SQL, off the UI thread
        await settle(pilot)
        assert flat.row_count() == 1 and flat.current.short == "Mul-op300"
        assert {"count_ops", "ops"} <= {n for n, _ in pane_calls} and not on_ui(pane_calls), pane_calls
