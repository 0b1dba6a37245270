"""Pilot tests of issue 18's layout at 80x24 on the real MindSpore 2.10 dumps in
``tests/data/real_mindspore_210_bn.tar.gz`` (written by MindSpore itself, see its README):
the answer (the user's source line) on the first screen, panes that take focus and show it,
``esc`` back to the view a jump came from, the slice input giving focus back."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import unpack_data
from test_tui_support import help_text, screen_text, search_and_open, set_env, settle, wait_for, wait_ready

from textual.widgets import Input

from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.detail import OpDetail
from dumpscope.tui.tensor_panel import TensorPanel
from dumpscope.tui.view_overflow import OverflowScreen

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
        assert f"net.py:{line}  return ops.exp(x * self.sca" in text  # the line, cut with … at 80 columns
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

    gate = threading.Event()
    real = DumpscopeApp.overflow_report  # the scan, wherever it runs (a child process or this one)

    def slow(self, q, progress):
        gate.wait(120)  # (only so a failing test cannot hang: the test opens it)
        return real(self, q, progress)

    monkeypatch.setattr(DumpscopeApp, "overflow_report", slow)
    app = DumpscopeApp(str(overflow_dump), display_name="overflow")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("o")
        await wait_for(pilot, lambda: "scanning" in screen_text(app), "the scan's first paint")
        text = screen_text(app)
        assert "scanning" in text and "no overflow" not in text and "nothing found" not in text
        gate.set()
        await settle(pilot)
        assert "scanning" not in screen_text(app)


# -- compare diff (Enter on a compare row) ---------------------------------------------------------


@pytest.fixture
def bn_pair(bn_data, tmp_path, monkeypatch) -> tuple[Path, Path]:
    set_env(monkeypatch, tmp_path)
    return bn_data / "golden", bn_data / "target"


def npy_value(root: Path, op_file_part: str, io_slot: str) -> float:
    """The one value MindSpore wrote for a scalar argument (read with numpy, not dumpscope)."""
    import numpy as np

    path = next(p for p in root.rglob("*.npy") if op_file_part in p.name and f".{io_slot}." in p.name
                and "/0/0/" in p.as_posix())
    return float(np.load(path).reshape(-1)[0])


async def open_compare_diff(pilot, app) -> None:
    await wait_for(pilot, lambda: app.compare_result is not None or app.compare_error is not None, "the compare")
    await pilot.press("c")
    await settle(pilot)
    await pilot.press("enter")  # the cursor starts on the first divergence
    await settle(pilot)


async def test_compare_diff_shows_the_changed_epsilon_first(bn_pair):
    from dumpscope.tui.compare_diff import CompareDiffScreen

    golden, target = bn_pair
    app = DumpscopeApp(str(golden), compare_with=str(target), display_name="golden")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await open_compare_diff(pilot, app)
        assert isinstance(app.screen, CompareDiffScreen)
        text = screen_text(app)
        g = npy_value(golden, "BatchNorm-op0", "input.6")
        t = npy_value(target, "BatchNorm-op0", "input.6")
        assert f"{g:.6g} → {t:.6g}" in text  # the changed epsilon, golden then target, on screen one
        rows = text.splitlines()
        changed = next(i for i, r in enumerate(rows) if "Changed (golden → target)" in r)
        assert "in.6" in rows[changed + 1] and "✗" in rows[changed + 1]
        # per slot: golden and target statistics of the opened output, with the metrics
        assert any(r.lstrip().startswith("▶✗out.0 g float32") for r in rows)
        assert "origin constant via input.6" in text
        assert "net.py:" in text


async def test_compare_diff_follows_the_bad_input_and_walks_born_ops(bn_pair):
    from dumpscope.tui.compare_diff import CompareDiffScreen
    from dumpscope.tui.view_compare import CompareScreen

    golden, target = bn_pair
    app = DumpscopeApp(str(golden), compare_with=str(target), display_name="golden")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await wait_for(pilot, lambda: app.compare_result is not None or app.compare_error is not None, "the compare")
        assert app.compare_result is not None, app.compare_error
        await pilot.press("c")
        await settle(pilot)
        table = app.screen.table
        relu = next(i for i, r in enumerate(table.rows) if r["name"].endswith("ReLU-op0") and r["io"] == "output")
        table.move_to(relu)
        await pilot.press("enter")
        await settle(pilot)
        diff = app.screen
        assert isinstance(diff, CompareDiffScreen) and "inherited" in screen_text(app)
        await pilot.press("i")  # to the input that carries the error: BatchNorm's output
        await settle(pilot)
        assert diff.row["name"].endswith("BatchNorm-op0") and diff.row["io"] == "output"
        await pilot.press("escape")  # back to the ReLU diff, not out of the screen
        await settle(pilot)
        assert app.screen is diff and diff.row["name"].endswith("ReLU-op0")
        await pilot.press("n")  # the one op where the error is born (a changed argument)
        await settle(pilot)
        assert app.screen is diff and diff.row["name"].endswith("BatchNorm-op0")
        assert diff.row["origin"] in ("born", "constant") and diff.row["verdict"] == "error"
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)


# -- width at 80 columns ---------------------------------------------------------------------------


def test_middle_keeps_the_op_and_its_block():
    from dumpscope.tui.fit import middle

    name = "Default/network-WithLossCell/_backbone-LeNet5/fc1-Dense/MatMul-op0"
    assert middle(name, 80) == name
    assert middle(name, 40) == "Default/…/fc1-Dense/MatMul-op0"
    assert middle(name, 24) == "…/fc1-Dense/MatMul-op0"
    assert middle(name, 12) == "…/MatMul-op0"
    assert all(len(middle(name, w)) <= w for w in range(0, 70))


def test_status_bits_keep_rank_step_and_count_last():
    from dumpscope.tui.fit import fit_bits

    bits = [("x" * 70, "bold", 6, True), ("mindspore,msprobe", "", 2, False), ("rank 3 step 1200", "", 10, False),
            ("123,456 ops", "", 10, False), ("0 problems", "dim", 1, False), ("indexing 1,234 files…", "", 7, True)]
    for width in (40, 60, 80):
        texts = [t for t, _ in fit_bits(bits, width)]
        assert "rank 3 step 1200" in texts and "123,456 ops" in texts
        assert 1 + sum(map(len, texts)) + 3 * (len(texts) - 1) <= width


async def test_status_bar_keeps_rank_step_and_ops_with_a_long_name(overflow_dump):
    app = DumpscopeApp(str(overflow_dump), display_name="/very/long/path/" + "deep/" * 20 + "overflow")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        status = screen_text(app).splitlines()[-2]
        assert "rank 0 step 0" in status and f"{app.q.count_ops(0, 0):,} ops" in status


async def test_flat_list_tells_ops_of_the_same_name_apart(tmp_path, monkeypatch):
    from test_tui_support import make_ms_tree

    set_env(monkeypatch, tmp_path)
    ops = [("AddN", "Default/network-WithLossCell/_backbone-Net/block1-Cell/AddN-op1"),
           ("AddN", "Default/network-WithLossCell/_backbone-Net/block2-Cell/AddN-op1")]
    dump = make_ms_tree(tmp_path / "t", steps=(0,), inf_op=None, ops=ops)
    app = DumpscopeApp(str(dump), display_name="t")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("t")
        await settle(pilot)
        text = screen_text(app)
        assert "block1-Cell/AddN-op1" in text and "block2-Cell/AddN-op1" in text


async def test_diff_keys_are_in_help_and_palette(bn_pair):
    golden, target = bn_pair
    app = DumpscopeApp(str(golden), compare_with=str(target), display_name="golden")
    async with app.run_test(size=(100, 60)) as pilot:
        await wait_ready(pilot)
        await open_compare_diff(pilot, app)
        await pilot.press("ctrl+p", *"born")
        await settle(pilot)
        assert "Diff: next op where an error is born" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        seen = await help_text(pilot)
        assert "diff.next_born" in seen and "diff.follow_input" in seen and "detail.links" in seen


# -- a real pair that changes a graph attribute (tests/data/real_mindspore_210_pad.tar.gz) ---------


@pytest.fixture(scope="module")
def pad_data(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_mindspore_210_pad")


def ir_attrs(root: Path, node_type: str) -> dict[str, str]:
    """``primitive_attrs`` of the first ``node_type`` node in MindSpore's own ``.ir`` text (split here with a
    small bracket-aware scan, not with dumpscope's parser)."""
    ir = next(root.rglob("*.ir")).read_text()
    line = next(x for x in ir.splitlines() if f"= {node_type}(" in x and "primitive_attrs: {" in x)
    body = line.split("primitive_attrs: {", 1)[1]
    out, depth, key, cur = {}, 0, None, ""
    for ch in body:
        if depth == 0 and ch == "}":
            break
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if depth == 0 and ch == ":" and key is None:
            key, cur = cur.strip(), ""
        elif depth == 0 and ch == ",":
            out[key], key, cur = cur.strip(), None, ""
        else:
            cur += ch
    if key is not None:
        out[key] = cur.strip()
    return out


async def test_compare_diff_shows_a_changed_graph_attribute(pad_data, tmp_path, monkeypatch):
    """MindSpore 2.10 Conv2d pad_mode "same" vs padding (0, 2, 0, 2): ``c`` then Enter shows the changed
    Conv2D attributes, golden → target, as the .ir says them, on the first screen at 80x24."""
    from dumpscope.tui.compare_diff import CompareDiffScreen

    set_env(monkeypatch, tmp_path)
    golden, target = pad_data / "golden", pad_data / "target"
    g_attrs, t_attrs = ir_attrs(golden, "Conv2D"), ir_attrs(target, "Conv2D")
    changed = sorted(k for k in g_attrs if g_attrs[k] != t_attrs.get(k))
    assert "pad_mode" in changed  # the pair is what its README says
    app = DumpscopeApp(str(golden), compare_with=str(target), display_name="golden")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await open_compare_diff(pilot, app)
        assert isinstance(app.screen, CompareDiffScreen)
        assert app.screen.row["name"].endswith("Conv2D-op0") and app.screen.row["io"] == "output"
        text = screen_text(app)
        rows = text.splitlines()
        head = next((i for i, r in enumerate(rows) if "Changed (golden → target)" in r), None)
        assert head is not None, text
        for key in changed:
            line = next((r for r in rows[head:] if f" {key} " in r or f" {key}:" in r), None)
            assert line is not None, f"{key} not on the first screen:\n{text}"
            g, t = g_attrs[key].strip('"'), t_attrs[key].strip('"')
            assert g in line and t in line and line.index(g) < line.index("→") < line.rindex(t), line
