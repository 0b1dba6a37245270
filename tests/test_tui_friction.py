"""Issue 34: what a new user met in the first hour, at 80x24 (the slice at 100x30) on real dumps.

``real_ms210_nan`` is a MindSpore 2.10 CPU dump whose ``Log`` makes NaN/-Inf (tests/data/README.md);
``sample_dumps/mindspore_lenet_sync`` is the README's own sample.  One meaning per key (``g``), the
status bar under a notification, producers named in the detail's links and in view in the graph
view, the slice result in view, ``j``/``k`` in the pickers and links, the filter's count, file names
in the problems view, and the first screen saying the tensors were not scanned yet.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import SAMPLES, cli_json, unpack_data
from test_tui_support import (help_text, record_notes, screen_text, search_and_open, set_env, settle, wait_for,
                               wait_ready)

from textual.binding import Binding

from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.detail import OpDetail
from dumpscope.tui.keylist import KeyOptionList
from dumpscope.tui.main_screen import MainScreen
from dumpscope.tui.oplist import OpList
from dumpscope.tui.optree import OpTree
from dumpscope.tui.tensor_panel import TensorPanel
from dumpscope.tui.view_graph import GraphScreen

SIZE = (80, 24)


@pytest.fixture(scope="module")
def nan_data(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_nan")


@pytest.fixture
def nan_dump(nan_data, tmp_path, monkeypatch) -> Path:
    set_env(monkeypatch, tmp_path)
    return nan_data / "nan"


def status_line(app) -> str:
    return screen_text(app).splitlines()[-2]


def left_title(app) -> str:
    return screen_text(app).splitlines()[0].split("▕")[0]


# -- 1. one meaning per key --------------------------------------------------------------------------


def _keys(cls) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in reversed(cls.__mro__):
        for b in c.__dict__.get("BINDINGS", []):
            b = b if isinstance(b, Binding) else Binding(*b)
            for key in b.key.split(","):
                out[key.strip()] = b.action
    return out


def test_no_pane_of_the_explorer_gives_a_key_another_meaning():
    outer = {**_keys(DumpscopeApp), **_keys(MainScreen)}
    # the tree's space expands a scope and marks an op (the screen's meaning): one key, what the node allows
    same = {(OpTree, "space")}
    for widget in (OpList, OpTree, OpDetail, KeyOptionList, TensorPanel):
        inner = _keys(widget)
        clash = {k: (inner[k], outer[k]) for k in inner
                 if k in outer and inner[k] != outer[k] and (widget, k) not in same}
        assert not clash, f"{widget.__name__} shadows the explorer's keys: {clash}"


async def test_g_is_the_graph_view_in_the_tree_and_the_flat_list(tiny):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        for mode in ("tree", "flat"):
            assert " g Graph " in screen_text(app).splitlines()[-1], mode
            await pilot.press("down", "g")
            await settle(pilot)
            assert isinstance(app.screen, GraphScreen), f"g in the {mode} view"
            await pilot.press("escape")
            await settle(pilot)
            await pilot.press("t")
            await settle(pilot)
        seen = await help_text(pilot)
        keyed_g = {line.split()[1] for line in seen.splitlines() if re.match(r"^\s*g\s{2,}", line)}
        assert keyed_g == {"Graph"}, f"help lists g as {keyed_g}"
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("ctrl+p", *"graph view")
        await settle(pilot)
        assert re.search(r"Graph view of .*\n.*\bg\b", screen_text(app)), screen_text(app)


# -- 2. status bar, links, graph view -----------------------------------------------------------------


async def test_status_bar_keeps_rank_step_and_ops_under_a_notification(nan_dump, capsys):
    cli_json(capsys, "overflow", str(nan_dump))  # evidence in the index: the explorer says where it opened
    app = DumpscopeApp(str(nan_dump), display_name="~/triage/runs/2026-11-27/ms210tf/nan")
    notes = record_notes(app, keep=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_ready(pilot)
        assert any("opened on rank 0 step 0" in n.message for n in notes), "the opening notification"
        assert "opened on rank 0 step" in screen_text(app), "the toast is on screen"
        status = status_line(app)
        assert re.search(r"rank 0 step 0 ! \d+ │ 16 ops", status), status
        assert "…/nan" in status or "ms210tf/nan" in status


async def test_links_name_their_producer_first(nan_dump):
    app = DumpscopeApp(str(nan_dump), display_name="nan")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Log-op0")
        await pilot.press("tab", "enter")
        await settle(pilot)
        right = [line.split("▕", 1)[1] for line in screen_text(app).splitlines() if "▕" in line]
        assert any(re.match(r"\s*← in  BiasAdd-op0:0  Default/", r) for r in right), "\n".join(right)
        assert any(re.match(r"\s*→ to  Sub-op0  Default/", r) for r in right), "\n".join(right)


async def test_graph_view_opens_with_the_producers_in_view(nan_dump):
    app = DumpscopeApp(str(nan_dump), display_name="nan")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Log-op0")
        await pilot.press("g")
        await settle(pilot)
        lines = [line.rstrip() for line in screen_text(app).splitlines()]
        assert " producers" in lines and "▶ Log" in "\n".join(lines), "\n".join(lines)
        below = lines[lines.index(" producers"):]
        assert any("BiasAdd-op0" in line for line in below[:6]) and " this op" in below
        await pilot.press("j", "j")  # down to the consumers of consumers: scrolled just far enough
        await settle(pilot)
        assert "▶ Square" in screen_text(app)


# -- 3. slice, pickers, filter count, problems ------------------------------------------------------


async def test_slice_result_is_in_view_at_100x30(nan_dump):
    app = DumpscopeApp(str(nan_dump), display_name="nan")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Log-op0")
        await pilot.press("colon", "0", "enter")
        await settle(pilot)
        text = screen_text(app)
        assert "shape [3] float32" in text and re.search(r"\[-?\d.* nan ", text), text


async def test_slice_result_comes_into_view_when_laid_out_after_the_scroll(nan_dump):
    """The scroll that brings the result into view ran before the screen laid the result out (the output's
    request for a layout waits for its own queue): on a loaded machine it stopped at the old bottom, the
    result's values under the fold.  The batch forces that order: callbacks run, no layout, until it ends."""
    app = DumpscopeApp(str(nan_dump), display_name="nan")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Log-op0")
        out = app.screen.query_one("#tp-slice-out")
        with app.batch_update():
            await pilot.press("colon", "0", "enter")
            await wait_for(pilot, lambda: "shape [3]" in str(out.render()), "the slice result")
            await pilot.pause()  # the scroll's callback runs now, before any layout
        await settle(pilot)
        text = screen_text(app)
        assert "shape [3] float32" in text and re.search(r"\[-?\d.* nan ", text), text


async def test_the_step_picker_moves_with_j_and_k(tiny):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        assert app.step == 0
        await pilot.press("s", "j")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.step == 1
        await pilot.press("s", "k")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.step == 0


async def test_the_detail_links_move_with_j_and_k(nan_dump):
    app = DumpscopeApp(str(nan_dump), display_name="nan")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Log-op0")
        await pilot.press("tab", "enter")
        await settle(pilot)
        links = app.screen.query_one("#detail-links", KeyOptionList)
        assert links.has_focus and links.highlighted == 0 and links.option_count >= 2
        await pilot.press("j")
        assert links.highlighted == 1
        await pilot.press("k")
        assert links.highlighted == 0


async def test_filter_title_counts_the_rows_it_lists(tiny):
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        flat = app.screen.query_one(OpList)
        await pilot.press("t")  # the flat list, focused, as a user filters it
        await settle(pilot)
        for text, rows in (("fc", 2), ("Softmax", 1), ("", 6)):
            await pilot.press("f")
            await settle(pilot)
            app.screen.query_one("#filter-input").value = text
            await pilot.press("enter")
            await settle(pilot)
            assert flat.row_count() == rows
            title = left_title(app)
            assert (f"filter: {text} ({rows})" in title) if text else "execution order" in title, title


async def test_problems_view_shows_the_file_names(tiny):
    folder = tiny / "rank_0" / "Net" / "0" / "0"
    (folder / "Broken.Default_network_backbone_head-Dense_Broken-op7.0.0.1700000000000999.output.0"
               ".DefaultFormat.float32.npy").write_bytes(b"not an npy file")
    app = DumpscopeApp(str(tiny), display_name="tiny")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("p")
        await settle(pilot)
        row = next(line for line in screen_text(app).splitlines() if "bad magic" in line)
        assert "Broken.Default_" in row and "float32.npy" in row, row


# -- 4. the first screen on the README's sample ---------------------------------------------------------


async def test_first_screen_says_the_tensors_were_not_scanned_and_o_scans_them(tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(SAMPLES / "mindspore_lenet_sync"), display_name="sample_dumps/mindspore_lenet_sync")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        status = status_line(app)
        assert "rank 0 step 0 │ 14 ops │ tensors not scanned: o scans" in status, status
        await pilot.press("o")
        await settle(pilot)
        assert app.screen.table.rows, "the sample's overflow, found by o"
        await pilot.press("escape")
        await settle(pilot)
        status = status_line(app)
        assert "not scanned" not in status and "rank 0 step 0 │ 14 ops" in status, status


# -- pure rules behind the screens ----------------------------------------------------------------------


def test_the_status_bar_cuts_the_path_to_its_last_part_before_dropping_pieces():
    from dumpscope.tui.fit import fit_bits

    bits = [("sample_dumps/mindspore_lenet_sync", "bold", 6, True), ("mindspore", "", 2, False),
            ("rank 0 step 0", "", 10, False), ("14 ops", "", 10, False),
            ("tensors not scanned: o scans", "bold", 9, False), ("0 problems", "dim", 1, False)]
    assert [t for t, _ in fit_bits(bits, 200)] == [b[0] for b in bits]
    at_80 = [t for t, _ in fit_bits(bits, 80)]
    assert at_80 == ["…/mindspore_lenet_sync", "rank 0 step 0", "14 ops", "tensors not scanned: o scans"]
    for width in range(20, 120):
        texts = [t for t, _ in fit_bits(bits, width)]
        assert 1 + sum(map(len, texts)) + 3 * (len(texts) - 1) <= width
        if width >= 40:
            assert "rank 0 step 0" in texts and "14 ops" in texts, (width, texts)


def test_a_box_is_kept_in_view_moving_as_little_as_possible():
    from dumpscope.tui.view_graph import keep_in_view

    assert keep_in_view(0, 20, 10, 14) == 0  # in view: no move
    assert keep_in_view(0, 20, 30, 34) == 14  # below: its bottom on the last line
    assert keep_in_view(25, 20, 10, 14) == 9  # above: its title on the first line
    assert keep_in_view(5, 3, 10, 20) == 9  # taller than the view: its top wins
