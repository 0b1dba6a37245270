"""Pilot tests of the explorer: they drive keys like a user and check what the screen shows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from test_tui_support import (INF_DOWNSTREAM, INF_OP, make_ms_tree, screen_text, search_and_open, set_env, settle,
                               wait_for, wait_ready)

from textual.command import CommandList

from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.main_screen import MainScreen
from dumpscope.tui.oplist import OpList
from dumpscope.tui.optree import OpTree

SIZE = (80, 24)


@pytest.fixture
def lenet(real_lenet_tree, tmp_path, monkeypatch) -> Path:
    """The real MindSpore 2.10 LeNet dump (conftest: skipped without the shared data)."""
    set_env(monkeypatch, tmp_path)
    return real_lenet_tree


def app_for(path: Path, **kwargs) -> DumpscopeApp:
    return DumpscopeApp(str(path), display_name="dump", **kwargs)


# -- opening ---------------------------------------------------------------------------------------


async def test_opens_on_dump_and_shows_op_tree(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        text = screen_text(app)
        assert "rank 0" in text and "6 ops" in text and "mindspore" in text
        tree = app.screen.query_one(OpTree)
        assert tree.display and app.screen.query_one("#left-switch").current == "tree"
        # the single graph is opened, with its folded scope chain and counts
        assert "graph 0 (6)" in text
        assert "Default/network (6)" in text
        # detail shows the first op in execution order
        assert app.main.current.name == "Default/network/backbone/conv1/Conv2D-op1"
        assert "Conv2D-op1" in text


async def test_first_screen_before_index_is_built(tiny, monkeypatch):
    """The layout with an 'indexing…' placeholder paints before the index exists."""
    import threading

    from dumpscope.core.index import dump_index as index_mod

    gate = threading.Event()
    real_open = index_mod.DumpIndex.open.__func__

    def slow_open(cls, *args, **kwargs):
        gate.wait(120)  # (only so a failing test cannot hang: the test opens it)
        return real_open(cls, *args, **kwargs)

    monkeypatch.setattr(index_mod.DumpIndex, "open", classmethod(slow_open))
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "indexing" in screen_text(app), "the first paint")
        assert app.q is None
        gate.set()
        await wait_ready(pilot)
        assert "6 ops" in screen_text(app)


async def test_tree_expands_lazily(tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    # no partial results: a refresh re-selects the shown op, which would populate its scope (on a
    # loaded machine the 6,000-file build passes PARTIAL_AFTER_S and did so)
    monkeypatch.setattr("dumpscope.core.index.dump_index.PARTIAL_AFTER_S", 1e9)
    ops = [("Add", f"Default/blk{i // 100}/Add-op{i}") for i in range(3000)]
    dump = make_ms_tree(tmp_path / "big", steps=(0,), inf_op=None, ops=ops)
    app = app_for(dump)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        tree = app.screen.query_one(OpTree)

        def op_nodes() -> int:
            return sum(1 for line in tree._tree_lines if hasattr(line.node.data, "exec_index"))

        # the 30 scope nodes are listed with counts, but no op node exists yet
        assert "blk0 (100)" in screen_text(app)
        assert op_nodes() == 0
        missing = []
        tree.seek(app.q.resolve_op("Add-op2550"), lambda: missing.append(1))  # its scope is read in a worker
        await settle(pilot)
        assert not missing
        assert tree.current is not None and tree.current.name == "Default/blk25/Add-op2550"
        # only the scope that holds the op was populated
        assert op_nodes() == 100


# -- search, detail, links -------------------------------------------------------------------------


async def test_search_selects_op_and_detail_shows_it(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "BatchNorm")
        assert app.main.current.type == "BatchNorm"
        text = screen_text(app)
        assert "BatchNorm-op2" in text
        # the tree cursor moved to the op as well
        assert app.screen.query_one(OpTree).current.type == "BatchNorm"


async def test_search_lenet_conv_shows_source_file(lenet):
    app = app_for(lenet)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Conv2D-op0")
        op = app.main.current
        assert op.name.endswith("conv1-Conv2d/Conv2D-op0")
        detail = app.screen.query_one("#detail-rest")
        assert "net.py" in str(detail.render())


async def test_next_hit_walks_search_results(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "backbone")
        first = app.main.current
        await pilot.press("n")
        await settle(pilot)
        second = app.main.current
        assert second.id != first.id and "backbone" in second.name
        await pilot.press("N")
        await settle(pilot)
        assert app.main.current.id == first.id


async def test_input_link_jumps_and_esc_returns(lenet):
    app = app_for(lenet)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "relu-ReLU/ReLU-op0")
        relu = app.main.current
        assert relu.type == "ReLU"
        assert app.main.query_one("#detail").focus_links()
        await settle(pilot)
        await pilot.press("enter")  # first link: "← in Conv2D-op0:0"
        await settle(pilot)
        assert app.main.current.type == "Conv2D"
        assert app.main.current.name.endswith("conv1-Conv2d/Conv2D-op0")
        await pilot.press("escape")
        await settle(pilot)
        assert app.main.current.id == relu.id


# -- views and keys ---------------------------------------------------------------------------------


async def test_help_lists_keys(tiny):
    app = app_for(tiny)
    async with app.run_test(size=(120, 90)) as pilot:
        await wait_ready(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        text = screen_text(app)
        from textual.screen import Screen

        assert type(app.screen).__name__ == "HelpScreen"
        for needle in ("Search", "dumpscope.search", "Overflow", "dumpscope.overflow", "Tree/flat",
                       "Bookmark", "Export", "Refresh", "Quit", "Next search hit", "Back"):
            assert needle in text, needle
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen) and isinstance(app.screen, Screen)


async def test_t_toggles_flat_list(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("t")
        await settle(pilot)
        flat = app.screen.query_one(OpList)
        assert app.screen.query_one("#left-switch").current == "flat"
        assert flat.row_count() == 6
        text = screen_text(app)
        assert "execution order" in text
        # rows in execution order, with the exec index column
        left = [ln.split("▕")[0] for ln in text.splitlines()]  # the left pane, up to its border
        conv = next((i for i, ln in enumerate(left) if "Conv2D-op1" in ln), None)
        assert conv is not None, text
        assert left[conv].split()[0] == "0" and "BatchNorm-op2" in left[conv + 1]
        await pilot.press("down")
        await settle(pilot)
        assert app.main.current.type == "BatchNorm"
        await pilot.press("t")
        await settle(pilot)
        assert app.screen.query_one("#left-switch").current == "tree"


async def test_filter_flat_list_through_sql(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("f", *"relu", "enter")
        await settle(pilot)
        flat = app.screen.query_one(OpList)
        assert app.screen.query_one("#left-switch").current == "flat"
        assert flat.row_count() == 1 and flat.current.type == "ReLU"
        assert "filter: relu" in screen_text(app)
        await pilot.press("f", *"\b\b\b\b")
        app.screen.query_one("#filter-input").value = ""
        await pilot.press("enter")
        await settle(pilot)
        assert flat.row_count() == 6


async def test_command_palette_switches_step(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("ctrl+p", *"step 1")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.step == 1


async def test_command_palette_jumps_to_op(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("ctrl+p", *"SoftmaxCross")

        def first_hit() -> str:  # the palette searches in a worker as the text changes
            hits = app.screen.query(CommandList)
            return str(hits.first().get_option_at_index(0).prompt) if hits and hits.first().option_count else ""
        await wait_for(pilot, lambda: "SoftmaxCross" in first_hit(), "the palette's hit")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.main.current.type == "SoftmaxCrossEntropyWithLogits"


async def test_watch_flag_picks_up_new_steps(tiny, monkeypatch):
    import dumpscope.tui.app as app_mod

    monkeypatch.setattr(app_mod, "WATCH_INTERVAL", 0.2)
    app = app_for(tiny, watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        make_ms_tree(tiny.parent, steps=(5,))
        await wait_for(pilot, lambda: 5 in app.q.steps(0), "--watch to pick up step 5")


async def test_a_refresh_arriving_as_the_app_closes_is_dropped(tiny):
    """A refresh's result that arrives while the app takes its panes down (seen in CI: ``--watch`` picked up a
    step as the test ended) is dropped; with the panes there, a missing widget is still an error."""
    from textual.css.query import NoMatches

    from dumpscope.tui.app_messages import IndexReady

    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        late = IndexReady(app.q, refreshed=True)
        main = app.main
        keep = main._pane_current
        main._pane_current = lambda: main.query_one("#no-such-pane")
        with pytest.raises(NoMatches):
            app.on_index_ready(late)
        main._pane_current = keep
        await main.query_one(OpTree).remove()
        app.on_index_ready(late)  # (no traceback)


async def test_overflow_view_lists_origin_first(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("o")
        await settle(pilot)
        assert type(app.screen).__name__ == "OverflowScreen"
        rows = app.screen.table.rows  # every step (the tree has the Inf at steps 0 and 1), step first
        assert [(r["step"], r["name"]) for r in rows] == [(0, INF_OP), (0, INF_DOWNSTREAM), (1, INF_OP),
                                                          (1, INF_DOWNSTREAM)]
        text = screen_text(app)
        assert "origin" in text and "MatMul-op4" in text
        # the origin row is the first table row, marked with ▶
        table_lines = [ln for ln in text.splitlines() if ln[:1] in ("▶", "!")]
        assert len(table_lines) == 4
        assert table_lines[0].startswith("▶") and "MatMul-op4" in table_lines[0] and "Add-op5" in table_lines[1]
        # Enter opens the op in the explorer; its tree label now carries the ! badge
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert app.main.current.name == INF_OP
        assert app.main.current.id in app.badges.overflow
        assert "! MatMul-op4" in screen_text(app)


async def test_overflow_view_n_walks_rows(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("o")
        await settle(pilot)
        table = app.screen.table
        assert table.cursor == 0
        await pilot.press("n")
        assert table.cursor == 1
        await pilot.press("N")
        assert table.cursor == 0


async def test_stats_panel_shows_nonfinite_counts(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "MatMul-op4")
        panel = app.main.query_one("#tensor")
        assert panel.current.io == "output"
        stats = str(app.main.query_one("#tp-stats").render())
        assert "nan 1" in stats and "+inf 1" in stats and "first bad" in stats
        assert panel.last_stats["count"] == 24
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert panel.current.io == "input"
        assert "nan 0" in str(app.main.query_one("#tp-stats").render())


async def test_slice_view(tiny):
    app = app_for(tiny)
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_ready(pilot)
        await pilot.press("colon", *"0, 1, :", "enter")
        await settle(pilot)
        out = str(app.main.query_one("#tp-slice-out").render())
        assert "shape [4] float32" in out
        await pilot.press("escape")
        await pilot.press("colon")
        inp = app.main.query_one("#tp-slice")
        inp.value = ""
        await pilot.press(*"9, 9", "enter")
        await settle(pilot)
        assert "bad index" in str(app.main.query_one("#tp-slice-out").render())


async def test_step_picker_switches_step(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        assert app.step == 0
        await pilot.press("s")
        await settle(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)
        assert app.step == 1
        assert "step 1" in screen_text(app)
        assert app.main.current.step == 1


async def test_bookmark_and_export_report(tiny, tmp_path):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("b")
        await settle(pilot)
        assert app.main.current.id in app.bookmarks
        await pilot.press("o")
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        dialog_input = app.screen.query_one("#export-path")
        assert dialog_input.value == "./dumpscope-report.md"
        # inside the dump tree is refused
        dialog_input.value = str(tiny / "report.md")
        await pilot.press("enter")
        await settle(pilot)
        assert not (tiny / "report.md").exists()
        assert "refusing" in str(app.screen.query_one("#export-error").render())
        dialog_input.value = "./dumpscope-report.md"
        await pilot.press("enter")
        await settle(pilot)
    report = (tmp_path / "dumpscope-report.md").read_text()
    assert "Conv2D-op1" in report and "## Bookmarks" in report
    assert "**origin** `Default/network/backbone/fc/MatMul-op4`" in report


async def test_overflow_view_exports_csv(tiny, tmp_path):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("o")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        assert app.screen.query_one("#export-path").value == "./dumpscope-overflow.csv"
        await pilot.press("enter")
        await settle(pilot)
    lines = (tmp_path / "dumpscope-overflow.csv").read_text().splitlines()
    assert lines[0].startswith("mark,rank,step,exec_index,name") and INF_OP in lines[1]


async def test_problems_view(tiny):
    (tiny / "rank_0" / "Net" / "0" / "0" / "Broken.x.0.0.1700000000000999.output.0.DefaultFormat.float32.npy") \
        .write_bytes(b"not an npy file")
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("p")
        await settle(pilot)
        assert type(app.screen).__name__ == "ProblemsScreen"
        rows = app.screen.table.rows
        if app.q.problems():
            assert rows and not rows[0]["rel"].startswith("/")
        else:
            assert "no problems" in screen_text(app)


async def test_compare_key_hidden_without_target(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert "Compare" not in screen_text(app).splitlines()[-1]


async def test_compare_view(tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    golden = make_ms_tree(tmp_path / "golden", steps=(0,), inf_op=None)
    target = make_ms_tree(tmp_path / "target", steps=(0,), inf_op=None)
    # make one tensor of the target diverge
    f = next((target / "rank_0" / "Net" / "0" / "0").glob("ReLU.*output.0*.npy"))
    arr = np.load(f)
    np.save(f, arr * 3 + 1)
    app = DumpscopeApp(str(golden), compare_with=str(target), display_name="golden")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await wait_for(pilot, lambda: app.compare_result is not None or app.compare_error, "the compare")
        await settle(pilot)
        if app.compare_error and "not available" in app.compare_error:
            pytest.skip(app.compare_error)
        assert app.compare_result is not None, app.compare_error
        await pilot.press("c")
        await settle(pilot)
        assert type(app.screen).__name__ == "CompareScreen"
        table = app.screen.table
        cur = table.current
        assert cur is not None and "ReLU-op3" in cur["name"] and cur["verdict"] != "pass"
        assert "✗" in screen_text(app) or "~" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert type(app.screen).__name__ == "CompareDiffScreen"
        assert "ReLU-op3" in screen_text(app)
        await pilot.press("s")  # both ops' whole detail, side by side
        await settle(pilot)
        assert type(app.screen).__name__ == "CompareDetailScreen"
        assert "ReLU-op3" in screen_text(app)
        await pilot.press("escape", "escape")
        await settle(pilot)
        assert type(app.screen).__name__ == "CompareScreen"
        # export the diverging ops as a re-dump config (outside both dump trees)
        out = tmp_path / "redump.json"
        await pilot.press("e")
        await settle(pilot)
        app.screen.query_one("#export-path").value = str(out)
        await pilot.press("enter")
        await settle(pilot)
        cfg = json.loads(out.read_text())
        assert any("ReLU-op3" in k for k in cfg["mindspore"]["common_dump_settings"]["kernels"])
        assert "ReLU-op3" in cfg["cann"]["dump_layer"]
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_keymap_file_remaps_binding(tiny, tmp_path):
    cfg = tmp_path / "config" / "dumpscope"
    cfg.mkdir(parents=True)
    (cfg / "keys.json").write_text(json.dumps({"keys": {"dumpscope.toggle_view": "v"}}))
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("v")
        await settle(pilot)
        assert app.screen.query_one("#left-switch").current == "flat"


async def test_refresh_picks_up_new_step(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        assert app.q.steps(0) == [0, 1]
        make_ms_tree(tiny.parent, steps=(2,))
        await pilot.press("f5")
        await wait_for(pilot, lambda: not app._refreshing, "the refresh (f5)")
        await settle(pilot)
        assert app.q.steps(0) == [0, 1, 2]


async def test_narrow_terminal_stacks_panes(tiny):
    app = app_for(tiny)
    async with app.run_test(size=(60, 30)) as pilot:
        await wait_ready(pilot)
        assert app.screen.has_class("narrow")
        left = app.screen.query_one("#left").region
        right = app.screen.query_one("#right").region
        assert right.y >= left.bottom


async def test_q_exits(tiny):
    app = app_for(tiny)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert not app.is_running


async def test_flat_list_is_virtual(tmp_path, monkeypatch):
    """A few thousand ops: only visible rows are fetched, pagedown moves a page."""
    set_env(monkeypatch, tmp_path)
    ops = [("Add", f"Default/blk{i // 100}/Add-op{i}") for i in range(3000)]
    dump = make_ms_tree(tmp_path / "big", steps=(0,), inf_op=None, ops=ops)
    app = app_for(dump)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("t")
        await settle(pilot)
        flat = app.screen.query_one(OpList)
        assert flat.row_count() == 3000
        assert len(flat._pages) <= 1
        await pilot.press("end")
        await settle(pilot)
        assert app.main.current.exec_index == 2999
        assert len(flat._pages) <= 3
        await pilot.press("pageup")
        await settle(pilot)
        assert flat.cursor == 2999 - flat.page_rows


# -- pure helpers -----------------------------------------------------------------------------------


def test_slice_parsing():
    from dumpscope.tui.slicing import SliceError, parse_index, render_slice

    assert parse_index("0, :, 3") == (0, slice(None), 3)
    assert parse_index("..., -1") == (Ellipsis, -1)
    assert parse_index("1:10:2") == (slice(1, 10, 2),)
    assert parse_index("") == ()
    for bad in ("a", "0,,1", "1:2:3:4", "...,...", "::0"):
        with pytest.raises(SliceError):
            parse_index(bad)
    big = np.zeros((100, 100), np.float32)
    out = render_slice(big, ":, :", limit=50)
    assert "first 50 of 10000" in out


def test_histogram_bars_keep_rare_bins_visible():
    from dumpscope.tui.tensor_panel import histogram_bars

    bars = histogram_bars([1000, 0, 1])
    assert bars[0] == "█" and bars[1] == " " and bars[2] == "▁"


def test_keymap_loading(tmp_path, monkeypatch):
    from dumpscope.tui.keys import load_keymap

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert load_keymap() == ({}, None)
    (tmp_path / "dumpscope").mkdir()
    (tmp_path / "dumpscope" / "keys.toml").write_text('[keys]\n"dumpscope.search" = "slash,ctrl+f"\n'
                                                      '"list.down" = ["down", "j"]\n')
    keymap, err = load_keymap()
    assert err is None and keymap == {"dumpscope.search": "slash,ctrl+f", "list.down": "down,j"}
    (tmp_path / "dumpscope" / "keys.toml").write_text("not = [toml")
    keymap, err = load_keymap()
    assert keymap == {} and "keys.toml" in err


def test_every_binding_has_an_id():
    from textual.binding import Binding

    from dumpscope.tui import compare_sides, dialogs, help, linelist, optree, table_view, view_compare

    classes = [DumpscopeApp, MainScreen, linelist.LineList, optree.OpTree, table_view.TableView,
               view_compare.CompareScreen, compare_sides.CompareDetailScreen, dialogs.SearchScreen,
               dialogs.PickerScreen, dialogs.ExportScreen, help.HelpScreen]
    ids = []
    for cls in classes:
        for b in cls.BINDINGS:
            assert isinstance(b, Binding) and b.id, (cls, b)
            ids.append((cls.__name__, b.id))
    assert len(ids) == len(set(ids))


def test_core_does_not_import_textual():
    """The headless engine must stay importable without the UI stack."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import dumpscope.core as core\n"
        "for m in pkgutil.walk_packages(core.__path__, 'dumpscope.core.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n == 'textual' or n.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


async def test_scopes_holding_bad_ops_carry_a_badge(tmp_path, monkeypatch):
    """A scope with an op whose stats show NaN/Inf says so with a glyph and a count."""
    from dumpscope.core.query import open_query

    set_env(monkeypatch, tmp_path)
    tree = make_ms_tree(tmp_path / "trees", steps=(0,))
    q = open_query(str(tree))
    bad = [op for op in q.ops(0, 0) if op.name == INF_OP][0]
    q.record_nonfinite({bad.id: (0, 3, 0)})  # as an overflow scan would
    app = app_for(tree)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        text = screen_text(app)
        scope_label = bad.scope.rsplit("/", 1)[-1]
        lines = [ln for ln in text.splitlines() if scope_label in ln and "bad" in ln]
        assert lines and "!" in lines[0] and "1 bad" in lines[0]


async def test_reload_keeps_the_scopes_the_user_opened(tmp_path, monkeypatch):
    """Refresh (and partial results during a cold build) rebuild the tree without closing what was open."""
    from dumpscope.tui.optree import Scope

    set_env(monkeypatch, tmp_path)
    ops = [("Add", f"Default/block{b}/layer{i}/Add-op{b * 10 + i}") for b in range(30) for i in range(3)]
    tree_dir = make_ms_tree(tmp_path / "trees", steps=(0,), inf_op=None, ops=ops)
    app = app_for(tree_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        tree = app.screen.query_one(OpTree)

        def scope_nodes(node):
            for child in node.children:
                if isinstance(child.data, Scope):
                    yield child
                    yield from scope_nodes(child)

        closed = [n for n in scope_nodes(tree.root) if not n.is_expanded and n.data.path.endswith("block29")]
        assert closed, "expected the last block to start collapsed (too big to auto-open)"
        closed[0].expand()
        await settle(pilot)
        assert ("0", closed[0].data.path) in tree.expanded_scopes()
        await pilot.press("f5")
        await wait_for(pilot, lambda: not app._refreshing, "the refresh (f5)")
        await settle(pilot)
        tree.load(app.q, app.rank, app.step)  # a reload of the same place, as a refresh does
        await settle(pilot)
        assert ("0", closed[0].data.path) in tree.expanded_scopes()
        assert any(n.is_expanded and n.data.path.endswith("block29") for n in scope_nodes(tree.root))
