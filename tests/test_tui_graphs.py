"""Explorer at 80x24 (issue 19): ``/@file:line`` search with n/N, source links, marking with
``space`` and exporting the marked ops with ``e``, and the ``g`` neighbourhood view, on a real
MindSpore 2.10 dump and on real GE graph dumps without tensors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import unpack_data
from test_tui_support import screen_text, search_and_open, set_env, settle, wait_ready

from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.detail import OpDetail
from dumpscope.tui.main_screen import MainScreen

SIZE = (80, 24)


@pytest.fixture(scope="module")
def own_dump_src(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_source") / "real_ms210_source" / "out"


@pytest.fixture(scope="module")
def ge_src(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ge_graphs") / "real_ge_graphs" / "complie_path"


def app_for(path: Path) -> DumpscopeApp:
    return DumpscopeApp(str(path), display_name="dump")


async def test_at_file_line_search_walks_the_ops_of_that_line(own_dump_src, tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    app = app_for(own_dump_src)
    expected = [o.name for o in
                __import__("dumpscope.core.query", fromlist=["x"]).open_query(str(own_dump_src)).ops_at_source(
                    __import__("dumpscope.core.graphs.source_match", fromlist=["x"]).SourceSpec.parse("net.py:40"), 0, 0)]
    assert len(expected) == 6
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("slash", *"@net.py:40")
        await settle(pilot)
        assert "6 hits" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        main = app.main
        assert isinstance(app.screen, MainScreen) and main.current.name == expected[0]
        seen = [main.current.name]
        for _ in range(len(expected) - 1):
            await pilot.press("n")
            await settle(pilot)
            seen.append(main.current.name)
        assert seen == expected
        await pilot.press("N")
        await settle(pilot)
        assert main.current.name == expected[-2]


async def test_a_source_link_lists_the_other_ops_of_that_line(own_dump_src, tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    app = app_for(own_dump_src)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Sin-op0")
        detail = app.main.query_one(OpDetail)
        src = [i for i, (k, n) in enumerate(detail._links) if k == "src" and n.endswith("net.py:40")]
        assert src, detail._links
        assert detail.focus_links()
        links = detail.query_one("#detail-links")
        links.highlighted = src[0]
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        assert type(app.screen).__name__ == "SearchScreen" and "6 hits" in text and "Cos-op0" in text


async def test_marking_and_exporting_the_marked_ops(own_dump_src, tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    app = app_for(own_dump_src)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        marked = []
        for name in ("Sin-op0", "Cos-op0"):
            await search_and_open(pilot, name)
            app.main.query_one("#tree").focus()
            await pilot.press("space")
            await settle(pilot)
            marked.append(app.main.current.name)
        assert "✓ 2 marked" in screen_text(app)
        # space again unmarks, space once more marks
        await pilot.press("space")
        await settle(pilot)
        assert "✓ 1 marked" in screen_text(app)
        await pilot.press("space")
        await settle(pilot)
        out = tmp_path / "marked.json"
        await pilot.press("e")
        await settle(pilot)
        assert type(app.screen).__name__ == "ExportScreen" and app.screen.redump_ok == "2 marked ops"
        app.screen.query_one("#export-path").value = str(out)
        await pilot.press("enter")
        await settle(pilot)
        cfg = json.loads(out.read_text())
        assert cfg["mindspore"]["common_dump_settings"]["kernels"] == marked  # Sin runs before Cos
        assert cfg["cann"]["dump_layer"] == " ".join(marked)
        # never inside the dump tree
        await pilot.press("e")
        await settle(pilot)
        app.screen.query_one("#export-path").value = str(own_dump_src / "x.json")
        await pilot.press("enter")
        await settle(pilot)
        assert "inside the dump tree" in str(app.screen.query_one("#export-error").render())
        assert not (own_dump_src / "x.json").exists()


async def test_graph_view_of_a_graph_only_tree_moves_and_opens(ge_src, tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    app = app_for(ge_src)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "conv1conv1_relu")
        assert app.main.current.name == "conv1conv1_relu"
        assert "graphs only, no tensors" in screen_text(app) and "no dump found" not in screen_text(app)
        await pilot.press("g")
        await settle(pilot)
        assert type(app.screen).__name__ == "GraphScreen"
        text = screen_text(app)
        assert "▶ Conv2D" in text and "┏" in text
        # down goes to the consumers: pool1 is selected, then Enter moves the explorer there
        await pilot.press("down")
        await settle(pilot)
        text = screen_text(app)
        assert "▶ Pooling" in text and "← conv1conv1_relu" in text
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen) and app.main.current.name == "pool1"
        # two hops up from pool1: the conv's producers (TransData first, then the weights), scrolled into view
        await pilot.press("g")
        await settle(pilot)
        for _ in range(3):  # up past the top stays on the top level
            await pilot.press("up")
            await settle(pilot)
        text = screen_text(app)
        assert "▶ TransData" in text and "→ conv1conv1_relu" in text
        await pilot.press("right")
        await settle(pilot)
        assert "▶ Const" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_graph_view_of_a_joined_dump(own_dump_src, tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    app = app_for(own_dump_src)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Sin-op0")
        await pilot.press("g")
        await settle(pilot)
        text = screen_text(app)
        assert "▶ Sin" in text and "consumers" in text and "Add-op0" in text
        await pilot.press("up")
        await settle(pilot)
        text = screen_text(app)
        assert "producers" in text and "▶ ReLU" in text and "→ Sin-op0" in text
        await pilot.press("enter")
        await settle(pilot)
        assert app.main.current.type == "ReLU"
