"""Pilot tests of the explorer's tables at 80x24 (issue 18, width): op names cut in the middle keeping
block and leaf, columns empty in every row take no room, ``←``/``→`` scroll the columns after the name."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_tui_support import help_text, make_ms_tree, screen_text, set_env, settle, wait_for, wait_ready

from textual.app import App, ComposeResult

from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.vtable import Column, VTable

SIZE = (80, 24)
CONV = "Default/network/backbone_stage_three/encoder_layer_11/self_attention_block/Conv2D-op1"
MATMUL = "Default/network/backbone_stage_three/encoder_layer_11/feed_forward_block/MatMul-op4"
LONG_OPS = [("Conv2D", CONV), ("MatMul", MATMUL), ("Add", "Default/network/head/Add-op5")]


@pytest.fixture
def long_pair(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """Two dumps of ops with deep scopes; the golden's MatMul output holds +Inf and NaN, the target's not."""
    set_env(monkeypatch, tmp_path)
    golden = make_ms_tree(tmp_path / "g", steps=(0,), inf_op=MATMUL, ops=LONG_OPS)
    target = make_ms_tree(tmp_path / "t", steps=(0,), inf_op=None, ops=LONG_OPS)
    return golden, target


def leaf_and_block(name: str) -> tuple[str, str]:
    parts = name.split("/")
    return parts[-1], parts[-2]


async def open_compare(pilot, app) -> None:
    await wait_ready(pilot)
    await wait_for(pilot, lambda: app.compare_result is not None or app.compare_error is not None, "the compare")
    await pilot.press("c")
    await settle(pilot)


async def test_compare_table_shows_block_and_leaf_with_verdict_and_metric(long_pair):
    golden, target = long_pair
    app = DumpscopeApp(str(golden), compare_with=str(target), display_name="g")
    async with app.run_test(size=SIZE) as pilot:
        await open_compare(pilot, app)
        rows = screen_text(app).splitlines()
        header = next(i for i, r in enumerate(rows) if " op " in r and "tensor" in r)
        assert "cosine" in rows[header]
        table = app.screen.table
        for k, row in enumerate(table.rows):
            line = rows[header + 1 + k]
            leaf, block = leaf_and_block(row["name"])
            assert f"{block}/{leaf}" in line, line  # the op and its block, whatever was cut between
            assert line.lstrip("▶")[0] in "✓~✗", line  # the verdict glyph
        bad = next(i for i, r in enumerate(table.rows) if r["name"] == MATMUL and r["io"] == "output")
        line = rows[header + 1 + bad]
        assert "✗" in line and any(ch.isdigit() for ch in line.split("out.0", 1)[1])  # verdict and a metric


async def test_arrows_scroll_the_columns_after_the_name(long_pair):
    golden, target = long_pair
    app = DumpscopeApp(str(golden), compare_with=str(target), display_name="g")
    async with app.run_test(size=SIZE) as pilot:
        await open_compare(pilot, app)

        def header() -> str:
            rows = screen_text(app).splitlines()
            return next(r for r in rows if " op " in r)

        first = header()
        assert "tensor" in first and "rule" not in first and first.rstrip().endswith("›")
        for _ in range(10):  # more presses than columns: stops at the last one
            await pilot.press("right")
        await settle(pilot)
        last = header()
        assert "rule" in last and "tensor" not in last and "‹" in last and " op " in last
        rows = screen_text(app).splitlines()
        assert any("feed_forward_block/MatMul-op4" in r for r in rows)  # the name stays put
        for _ in range(10):
            await pilot.press("left")
        await settle(pilot)
        assert header() == first


async def test_overflow_table_keeps_block_and_leaf(long_pair):
    golden, _ = long_pair
    app = DumpscopeApp(str(golden), display_name="g")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("o")
        await settle(pilot)
        rows = screen_text(app).splitlines()
        head = next(r for r in rows if " op " in r)
        assert "nan" in head and "+inf" in head
        line = next(r for r in rows if r.startswith("▶"))
        assert "feed_forward_block/MatMul-op4" in line, line
        assert "rank" not in head and "step" not in head  # one rank and step scanned: the note says which


class _TableApp(App):
    def __init__(self, rows) -> None:
        super().__init__()
        self._rows = rows

    def compose(self) -> ComposeResult:
        yield VTable([Column("mark", "", 2, blank=lambda r: False), Column("name", "op", keep_end=True),
                      Column("note", "note-col", 12), Column("value", "value", 8, ">")], id="t")

    def on_mount(self) -> None:
        self.query_one(VTable).set_rows(self._rows)


@pytest.mark.parametrize("note", [None, "a note"])
async def test_a_column_empty_in_every_row_takes_no_room(note):
    rows = [{"name": "Default/network/some_block/Leaf-op1", "note": None, "value": 1},
            {"name": "Default/network/other_block/Leaf-op2", "note": note, "value": 2}]
    app = _TableApp(rows)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert ("note-col" in text) == (note is not None)
        assert "Default/network/other_block/Leaf-op2" in text and "value" in text
        table = app.query_one(VTable)
        assert table.to_csv().splitlines()[0] == "mark,name,note,value"  # the export keeps every column


async def test_table_keys_in_help_and_palette(long_pair):
    golden, target = long_pair
    app = DumpscopeApp(str(golden), compare_with=str(target), display_name="g")
    async with app.run_test(size=(100, 60)) as pilot:
        await open_compare(pilot, app)
        await pilot.press("ctrl+p", *"scroll the col")
        await settle(pilot)
        assert "Table: scroll the columns right" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        seen = await help_text(pilot)
        assert "table.columns_right" in seen and "table.columns_left" in seen


# -- unjoined ops: a glyph in the list, the reason in the detail ------------------------------------


@pytest.fixture
def unjoined_dump(tmp_path, tmp_path_factory, monkeypatch) -> Path:
    """The real MindSpore 2.10 BatchNorm golden dump plus one file (a copy of ReLU's output) named for an
    ``Abs`` op the dumped graph does not have — as a dump of another run's file would be."""
    import shutil

    from conftest import unpack_data

    set_env(monkeypatch, tmp_path)
    root = tmp_path / "golden"
    shutil.copytree(unpack_data(tmp_path_factory, "real_mindspore_210_bn") / "golden", root)
    step = root / "rank_0" / "Net" / "0" / "0"
    src = next(step.glob("ReLU.Default_relu-ReLU_ReLU-op0.*.output.0.*.npy"))
    shutil.copy(src, step / src.name.replace("ReLU.Default_relu-ReLU_ReLU-op0", "Abs.Default_extra-Cell_Abs-op9"))
    return root


async def test_unjoined_op_has_a_glyph_and_the_detail_says_why(unjoined_dump):
    app = DumpscopeApp(str(unjoined_dump), display_name="golden")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("t")  # the flat list
        await settle(pilot)
        rows = screen_text(app).splitlines()
        left = [r.split("▕")[0] for r in rows]
        abs_row = next(r for r in left if "Abs-op9" in r)
        conv_row = next(r for r in left if "Conv2D-op0" in r)
        assert "? " in abs_row.split("Abs-op9")[0] and "?" not in conv_row  # the glyph, not a colour
        op = app.q.resolve_op("Default_extra-Cell_Abs-op9")
        assert op.joined is None and op.join_note
        await pilot.press("slash", *"Abs-op9", "enter")
        await settle(pilot)
        assert app.main.current.id == op.id
        text = screen_text(app)
        assert "? not joined:" in text  # on the first screen, under the header
        await pilot.press("tab")  # into the detail, and down to the Op section
        await settle(pilot)
        detail = app.screen.focused
        detail.scroll_end(animate=False)
        await settle(pilot)
        body = str(detail.query_one("#detail-rest").render())
        assert f"? not joined: {op.join_note}" in " ".join(body.split())
        from dumpscope.tui.help import HelpScreen

        assert "? no graph-side name" in str(HelpScreen()._footer_text())  # the legend lists the glyph
