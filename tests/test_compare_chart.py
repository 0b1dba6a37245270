"""The compare view's chart of each op's error against its line, the precision/evidence header, and the
same facts headless (human table, --csv, the CSV/xlsx report), on the real precision pairs (issue 28 item 6).

tests/data/real_precision_pairs.tar.gz: msprobe 26.2 + torch CPU, a float32 golden against bf16 autocast
targets (see tests/test_real_precision_pairs.py); tiny_gpt/bf16 has no bug, tiny_cnn/bf16_kernel one
conv weight element set to 3.0.  Expected answers are read from the compare document, never typed in.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from conftest import unpack_data
from test_tui_support import screen_text, set_env, settle, wait_ready
from dumpscope.tui import compare_chart as cc
from dumpscope.tui.cli.entry import main

SIZE = (80, 24)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_precision_pairs")


def pair(pairs: Path, net: str, target: str) -> tuple[str, str]:
    return str(pairs / net / "tensor" / "fp32"), str(pairs / net / "tensor" / target)


def doc_of(capsys, golden: str, target: str) -> dict:
    assert main(["compare", golden, target, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# -- the chart itself (pure) ---------------------------------------------------------------------------------

def test_born_and_changed_ops_are_marked_by_glyph_not_colour():
    """NO_COLOR: the plain text alone tells born, changed, inherited and noise apart, and the first divergence."""
    pts = [cc.OpPoint(0.02, "noise", False, "a"), cc.OpPoint(30.0, "born", True, "b"),
           cc.OpPoint(3.0, "changed", False, "c"), cc.OpPoint(0.5, "inherited", False, "d")]
    lines = [t.plain for t in cc.render(pts, 80, cursor=3)]
    col = cc.GUTTER
    plot = {lv[0]: lines[1 + i] for i, lv in enumerate(cc.LEVELS) if lv is not None}
    assert plot["≥.01"][col] == "·"
    assert plot["≥10"][col + 1] == "✗" and lines[0][col + 1] == "▼"
    assert plot[">1"][col + 2] == "◆"
    assert plot["≥.1"][col + 3] == "+"
    assert lines[-1][col + 3] == "▲"  # the cursor's op
    line = lines[1 + cc.LEVELS.index(None)]
    assert line[col + 1] == line[col + 2] == "┼" and line[col] == line[col + 3] == "─"  # above the line


def test_more_ops_than_columns_bucketed_without_losing_the_born_op():
    pts = [cc.OpPoint(0.01 * (1 + i % 7), "noise", False, str(i)) for i in range(5000)]
    pts[3210] = cc.OpPoint(50.0, "born", True, "bug")
    lines = cc.render(pts, 80, cursor=3210)
    assert all(len(t.plain) <= 80 for t in lines)
    col = cc.GUTTER + cc.column_of(3210, len(pts), 80 - cc.GUTTER)
    assert lines[1].plain[col] == "✗" and lines[0].plain[col] == "▼" and lines[-1].plain[col] == "▲"
    assert lines[1].plain.count("✗") == 1


# -- the explorer at 80x24 ------------------------------------------------------------------------------------

async def open_compare(pilot, app) -> None:
    await wait_ready(pilot)
    while app.compare_result is None and app.compare_error is None:
        await pilot.pause(0.05)
    await pilot.press("c")
    await settle(pilot)


def chart_lines(text: str) -> list[str]:
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if line.lstrip().startswith("≥10"))
    return lines[i - 1:i + len(cc.LEVELS) + 1]


@pytest.mark.asyncio
async def test_no_divergence_pair_chart_and_evidence_at_80x24(pairs, tmp_path, monkeypatch):
    from dumpscope.tui.app import DumpscopeApp

    set_env(monkeypatch, tmp_path)
    golden, target = pair(pairs, "tiny_gpt", "bf16")
    app = DumpscopeApp(golden, compare_with=target, display_name="g")
    async with app.run_test(size=SIZE) as pilot:
        await open_compare(pilot, app)
        doc = app.compare_result
        assert doc["first_divergence"] is None
        text = screen_text(app)
        assert f"target: {doc['precision']['target_text']}" in text
        assert "bfloat16" in doc["precision"]["target_text"]
        flat = " ".join(text.split())
        assert " ".join(doc["evidence"]["text"].split()) in flat
        chart = chart_lines(text)
        assert all(len(line.rstrip()) <= 80 for line in chart)
        assert chart[0].strip() == cc.LEGEND  # no ▼ marker: the legend alone
        assert "┼" not in "".join(chart)  # nothing above the line
        above = chart[1:1 + cc.LEVELS.index(None)]
        assert not any(g in line for line in above for g in cc.GLYPH.values())
        assert "┃" in "".join(chart)  # where the noise sits
        # every judged tensor of the document is within the line, as the chart says
        assert all(cc.ratio(r) <= 1.0 for r in doc["rows"] if cc.ratio(r) is not None)
        await pilot.press("v")  # the chart hides and comes back
        await settle(pilot)
        assert "≥10" not in screen_text(app)
        await pilot.press("v")
        await settle(pilot)
        assert "≥10" in screen_text(app)


@pytest.mark.asyncio
async def test_bug_pair_chart_marks_first_divergence_and_follows_cursor_no_color(pairs, tmp_path, monkeypatch):
    from dumpscope.tui.app import DumpscopeApp
    from dumpscope.tui.view_compare import CompareScreen

    set_env(monkeypatch, tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    golden, target = pair(pairs, "tiny_cnn", "bf16_kernel")
    app = DumpscopeApp(golden, compare_with=target, display_name="g")
    async with app.run_test(size=SIZE) as pilot:
        await open_compare(pilot, app)
        doc = app.compare_result
        fd = doc["first_divergence"]
        assert fd is not None
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        points = screen.chart.points
        fd_point = next(i for i, p in enumerate(points) if p.first)
        assert points[fd_point].label == fd["name"]
        chart = chart_lines(screen_text(app))
        plot = 80 - cc.GUTTER
        col = cc.GUTTER + cc.column_of(fd_point, len(points), plot)
        assert chart[0][col] == "▼" and chart[0].count("▼") == 1
        # the op is beyond the line, marked by a glyph (born or changed), and the cursor starts on it
        above = [line[col] for line in chart[1:1 + cc.LEVELS.index(None)]]
        assert {"✗", "◆"} & set(above)
        assert chart[-1][col] == "▲"
        # the table's cursor moves to another op: the ▲ follows
        while screen.chart.cursor == fd_point:
            await pilot.press("down")
        await settle(pilot)
        row = screen.table.current
        moved = screen._where[id(row)]
        chart = chart_lines(screen_text(app))
        assert chart[-1][cc.GUTTER + cc.column_of(moved, len(points), plot)] == "▲"
        assert chart[-1].count("▲") == 1


# -- headless -------------------------------------------------------------------------------------------------

def test_human_table_says_precision_and_evidence(pairs, capsys):
    golden, target = pair(pairs, "tiny_gpt", "bf16")
    doc = doc_of(capsys, golden, target)
    assert main(["compare", golden, target]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert doc["precision"]["target_text"] in out and doc["precision"]["golden_text"] in out
    assert " ".join(doc["evidence"]["text"].split()) in out
    for n in doc["evidence"]["nearest"]:
        assert f"{n['name']} {n['tensor']}" in out


def test_human_table_with_a_divergence_has_no_evidence_text(pairs, capsys):
    golden, target = pair(pairs, "tiny_cnn", "bf16_kernel")
    doc = doc_of(capsys, golden, target)
    assert main(["compare", golden, target]) == 0
    out = capsys.readouterr().out
    assert doc["precision"]["target_text"] in out
    assert "no divergence" not in out


def test_csv_columns_carry_the_judgement(pairs, capsys, tmp_path):
    golden, target = pair(pairs, "tiny_cnn", "bf16_kernel")
    doc = doc_of(capsys, golden, target)
    want = [(r.get("judgement"), r.get("rel_err"), r.get("allowed"), r.get("precision")) for r in doc["rows"]]
    assert {"born", "changed", "inherited"} & {w[0] for w in want}

    def cell(v):
        return None if v == "" else v

    assert main(["compare", golden, target, "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    got = [(cell(r["judgement"]), cell(r["rel_err"]), cell(r["allowed"]), cell(r["precision"])) for r in rows]
    assert [(j, None if e is None else float(e), None if a is None else float(a), p) for j, e, a, p in got] == want
    out = tmp_path / "r.csv"
    assert main(["compare", golden, target, "-o", str(out), "--json"]) == 0
    capsys.readouterr()
    with open(out, newline="") as fh:
        report = list(csv.DictReader(fh))
    assert "Result" in report[0] and "judgement" in report[0]  # the old columns kept
    tensors = [r for r in doc["rows"] if r.get("kind") != "scalar"]
    rep = [r for r in report if r["kind"] != "scalar"]
    assert [(r["judgement"], float(r["rel_err"]), r["precision"]) for r in rep] == \
        [(r["judgement"], r["rel_err"], r["precision"]) for r in tensors]


def test_xlsx_summary_sheet_says_precision_and_evidence(pairs, capsys, tmp_path):
    import openpyxl

    golden, target = pair(pairs, "tiny_gpt", "bf16")
    doc = doc_of(capsys, golden, target)
    out = tmp_path / "r.xlsx"
    assert main(["compare", golden, target, "-o", str(out), "--json"]) == 0
    capsys.readouterr()
    wb = openpyxl.load_workbook(out)
    assert wb.sheetnames == ["Sheet1", "Summary"]
    cells = {r[0]: r[1] for r in wb["Summary"].iter_rows(values_only=True) if r and r[0]}
    assert cells["target precision"] == doc["precision"]["target_text"]
    assert cells["evidence"] == doc["evidence"]["text"]
    assert doc["evidence"]["nearest"][0]["name"] in cells
