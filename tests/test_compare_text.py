"""The human compare table of a big compare, streamed as fixed-width text (``tui.cli.compare_text``): every
row printed, every line within the terminal, long texts folded and nothing lost, dump text inert, the
first divergence marked; the CLI switches to it past ``RICH_ROWS`` rows."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from dumpscope.tui.cli import compare_text
from dumpscope.tui.cli.entry import main

NAMES = ["Default/net-Net/conv1-Conv2d/Conv2D-op12", "短い名前/MatMul-op3", "evil\x1b[31mred\u202eop", "x" * 200]


def _rows():
    for i, name in enumerate(NAMES * 3):
        yield {"name": name, "io": "output", "slot": i % 2, "rule": "pass (rel err 0.0005 ≤ 0.0049: float16 rounding "
               "2^-11, inputs carried 0.00085)" if i % 2 else "", "first": i == 5}


def _cells(r):
    return ["▶" if r["first"] else "", r["name"], f"{r['io']}.{r['slot']}", "0.999999", "1.23457e-05", "0.5",
            "✓ pass", "born" if r["first"] else "", r["rule"]]


@pytest.mark.parametrize("width", [80, 100, 140, 200])
def test_every_row_is_printed_within_the_width_and_folds_lose_nothing(width):
    out = io.StringIO()
    n = compare_text.print_rows(_rows(), _cells, False, width, out.write)
    lines = out.getvalue().splitlines()
    assert n == len(NAMES) * 3
    assert all(cell_len(line) <= width for line in lines), max(map(cell_len, lines))
    assert "\x1b" not in out.getvalue() and "\u202e" not in out.getvalue()  # shown inert
    firsts = [line for line in lines[2:] if " output." in line]  # a row's first line holds its io.slot
    assert len(firsts) == n
    for name in NAMES:  # a folded name: its pieces in order in the name column, nothing lost
        shown = compare_text.inert(name)
        w = compare_text.column_widths(width, False)[1]
        pieces = [p.rstrip() for p in compare_text._fold(shown, w)]
        assert "".join(pieces) == shown.rstrip() and all(cell_len(p) <= w for p in pieces)
        assert all(p in out.getvalue() for p in pieces)
    marked = [line for line in lines if line.startswith("▶")]
    assert len(marked) == 1 and "born" in marked[0]
    rule = "pass (rel err 0.0005 ≤ 0.0049: float16 rounding 2^-11, inputs carried 0.00085)"
    assert rule.replace(" ", "") in "".join(out.getvalue().split())  # every rule whole, folded or not


def test_the_cli_streams_a_big_compare_and_keeps_the_rich_table_for_a_small_one(tmp_path, capsys, monkeypatch):
    from test_compare_batched import _tree

    g, t = _tree(tmp_path / "g", "golden"), _tree(tmp_path / "t", "target")
    args = ["compare", str(g), str(t), "--no-cache"]
    monkeypatch.setenv("COLUMNS", "100")
    main(args)
    small = capsys.readouterr().out
    assert "┃" in small  # rich's table: its rows are few enough to measure
    monkeypatch.setattr(compare_text, "RICH_ROWS", 10)
    main(args)
    big = capsys.readouterr().out
    assert "┃" not in big and "first divergence:" in big
    rows = main(["compare", str(g), str(t), "--no-cache", "--json"]) or capsys.readouterr().out
    import json

    doc = json.loads(rows)
    assert len(doc["rows"]) > 10
    for r in doc["rows"]:  # every row printed: its io.slot beside the start of its name
        assert f"{r['io']}.{r['slot']}" in big
    fd = doc["first_divergence"]
    marked = [line for line in big.splitlines() if line.startswith("▶")]
    assert marked and all(fd["name"][:20] in line for line in marked)
    assert all(cell_len(line) <= 100 for line in big.splitlines()[1:] if not line.startswith(("first", "precision")))


def _fold_by_rich(text: str, width: int) -> list[str]:
    """rich's fold of ``text`` into lines of ``width`` cells, each padded (what ``_fold`` must give)."""
    from rich.cells import chop_cells

    lines = chop_cells(text, width) or [""]
    return [line + " " * (width - cell_len(line)) for line in lines]


def _printed_cell_by_cell(rows, cells_of, places: bool, width: int) -> str:
    """What ``print_rows`` prints, every cell made inert and folded by rich on its own (nothing remembered,
    no row laid out by column)."""
    widths = compare_text.column_widths(width, places)
    below = len(widths) == (1 if places else 0) + 2 + len(compare_text._FIXED)
    out = []
    for row in rows:
        texts = cells_of(row)
        folded = [_fold_by_rich(compare_text.inert(t), w) for t, w in zip(texts, widths)]
        for k in range(max(map(len, folded))):
            out.append(compare_text._line([c[k] if k < len(c) else " " * w for c, w in zip(folded, widths)]))
        if below and texts[-1]:
            out += [compare_text._line(["", "  " + p])
                    for p in _fold_by_rich(compare_text.inert(texts[-1]), max(16, width - 5))]
    return "\n".join(out) + "\n"


_texts = st.sampled_from(["", "pass", "✓ pass", "✗ error", "born", "0.5", "1.23457e-05", "output.0", "x" * 30,
                          "bad\x1b[2Jtext", "全角の名前です", "e\u0301\u202e", "pass (identical)",
                          "Default/network-Net/" * 4 + "Conv2D-op12", "a\x7fb" * 9,
                          "pass (rel err 0.0005 ≤ 0.0049: float16 rounding 2^-11, inputs carried 0.00085) " * 2,
                          "tab\there ≤ " * 5, "界" * 17])
_short = st.sampled_from(["", "pass", "✓ pass", "born", "0.5", "output.0", "-", "r0 s1"])
#: a row's texts: marker, place, name, io, three numbers, verdict, origin, rule (mostly short, as compare's are)
_row = st.tuples(st.sampled_from(["", "▶"]) | _texts, _short | _texts, st.text("ab/_.-0", max_size=130) | _texts,
                 *[_short | _texts] * 6, _texts).map(list)


@settings(max_examples=80, deadline=None)
@given(cells=st.lists(_row, min_size=1, max_size=40),
       places=st.booleans(), width=st.sampled_from([60, 80, 109, 110, 160]), room=st.integers(1, 6),
       chunk=st.sampled_from([1, 3, 256]))
def test_rows_laid_out_by_column_print_what_each_cell_folded_on_its_own_prints(cells, places, width, room, chunk):
    """``print_rows`` lays a chunk out column by column (names padded or folded by slices, the other cells
    looked up by text and width, a row's folded cells under its first line) and remembers folds (the same
    text in columns of other widths, the rule under its row, more texts than it keeps: ``_KNOWN_FOLDS``):
    the same bytes as every cell made inert and folded by rich afresh, whatever the chunks."""
    def cells_of(row):
        return row if places else row[:1] + row[2:]

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(compare_text, "_KNOWN_FOLDS", room)
        m.setattr(compare_text, "_CHUNK_ROWS", chunk)
        assert compare_text.print_rows(cells, cells_of, places, width, out.write) == len(cells)
    body = out.getvalue().split("\n", 2)[2]  # (after the header and its rule)
    assert body == _printed_cell_by_cell(cells, cells_of, places, width)


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.characters(codec="utf-8"), max_size=60) | _texts, width=st.integers(1, 40))
def test_a_fold_is_riches(text, width):
    """``_fold`` (of an inert text: no control character left) cuts by slices where every character is one
    cell wide, rich's fold elsewhere: always rich's lines."""
    shown = compare_text.inert(text)
    assert compare_text._fold(shown, width) == _fold_by_rich(shown, width)


@pytest.mark.parametrize("places", [False, True])
@pytest.mark.parametrize("width", [60, 80, 110, 160, 240])
def test_names_of_every_length_fold_as_rich_folds_them(places, width):
    """A row whose only long cell is its name (a compare's usual row) is laid out by slices of the name: every
    length up to three lines and a bit, beside other rows, each as rich folds it."""
    name_w = compare_text.column_widths(width, places)[2 if places else 1]
    rows = [["▶" if n == 5 else "", "r0 s1", ("op/" * 80)[:n] + "x" * (n > 0), "output.0", "0.999", "1e-05", "0.5",
             "✓ pass", "born", "pass (identical)" if n % 3 else ""] for n in range(3 * name_w + 3)]

    def cells_of(row):
        return row if places else row[:1] + row[2:]

    out = io.StringIO()
    compare_text.print_rows(rows, cells_of, places, width, out.write)
    assert out.getvalue().split("\n", 2)[2] == _printed_cell_by_cell(rows, cells_of, places, width)


# -- the terminal table's cells made as the rows are made (``TerminalCells``) ---------------------------

def _terminal_and_rows_print(args, capsys, monkeypatch) -> tuple[str, str, list]:
    """The terminal's print of ``args`` from ``TerminalCells`` and from the rows read back (its
    ``first_rows`` answering None, as for a key of no hash), and the stores made."""
    made = []
    real_init = compare_text.TerminalCells.__init__

    def init(self):
        made.append(self)
        real_init(self)

    monkeypatch.setattr(compare_text.TerminalCells, "__init__", init)
    main(args)
    stored = capsys.readouterr().out
    monkeypatch.setattr(compare_text.TerminalCells, "first_rows", lambda self, fd, rows: None)
    main(args)
    return stored, capsys.readouterr().out, made


def test_the_terminal_table_from_cells_made_as_the_rows_are_is_the_table_from_the_rows(tmp_path, capsys,
                                                                                     monkeypatch):
    from test_compare_batched import _tree

    g, t = _tree(tmp_path / "g", "golden"), _tree(tmp_path / "t", "target")
    monkeypatch.setattr(compare_text, "RICH_ROWS", 10)
    monkeypatch.setattr("dumpscope.core.support.row_spool.BLOCK_ROWS", 7)  # (rows across many blocks)
    for width in ("80", "200"):
        monkeypatch.setenv("COLUMNS", width)
        stored, read, made = _terminal_and_rows_print(["compare", str(g), str(t), "--no-cache"], capsys, monkeypatch)
        monkeypatch.undo()
        monkeypatch.setattr(compare_text, "RICH_ROWS", 10)
        monkeypatch.setattr("dumpscope.core.support.row_spool.BLOCK_ROWS", 7)
        assert made and not made[0].failed and len(made[0]) > 10
        assert stored == read and stored.count("\n▶") >= 1


def test_a_multi_place_compare_and_a_row_it_cannot_make_print_from_the_rows(tmp_path_factory, capsys, monkeypatch):
    """Places (several ranks): the print reads the rows (their place column); a row ``TerminalCells`` cannot
    make cells of stops it, not the compare: the same print."""
    from conftest import unpack_data

    dp2 = unpack_data(tmp_path_factory, "real_ms210_dp2") / "dp2"
    monkeypatch.setattr(compare_text, "RICH_ROWS", 3)
    args = ["compare", str(dp2), str(dp2.parent / "dp2_ms27"), "--rank", "all", "--no-cache"]
    stored, read, _ = _terminal_and_rows_print(args, capsys, monkeypatch)
    assert stored == read and "r1 s" in stored
    monkeypatch.undo()
    monkeypatch.setattr(compare_text, "RICH_ROWS", 3)
    args = ["compare", str(dp2), str(dp2.parent / "dp2_ms27"), "--rank", "0", "--no-cache"]
    main(args)
    whole = capsys.readouterr().out

    def broken(self, rows):
        raise ValueError("a row of no cells")

    made = []
    real_add = compare_text.TerminalCells.add
    monkeypatch.setattr(compare_text.TerminalCells, "_block_text", broken)
    monkeypatch.setattr(compare_text.TerminalCells, "add", lambda self, row: made.append(self) or real_add(self, row))
    monkeypatch.setattr("dumpscope.core.support.row_spool.BLOCK_ROWS", 2)
    assert main(args) == 0
    assert made and made[0].failed and capsys.readouterr().out == whole


_values = st.one_of(st.none(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from(["pass", "op\x1b[2J", "名前", "a\u202eb", "x\x1fy\x1ez", "", "input", "output"]))


@settings(max_examples=120, deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({
    "name": st.sampled_from(["conv", "op\x1b[31m", "名前/op", "a\u202eb", "x\x1fy"]),
    "target_name": st.sampled_from([None, "conv", "other"]), "io": st.sampled_from(["input", "output", "x\x1e"]),
    "slot": st.one_of(st.integers(0, 2), st.just((0, 1)), st.just([1])), "cosine": _values, "max_abs_err": _values,
    "max_rel_err": _values, "verdict": st.sampled_from(["pass", "warning", "error", "odd"]),
    "origin": st.sampled_from([None, "", "born", 0]), "rule": _values.map(str), "step": st.sampled_from([0, 1, None]),
    "rank": st.sampled_from([0, 1])}), min_size=1, max_size=30), numpy_at=st.integers(0, 40), block=st.integers(1, 9))
def test_terminal_cells_are_the_cells_of_the_stored_rows(rows, numpy_at, block):
    """Each row's cells as ``row_cells`` makes them of the row the spool gives back (numpy scalars as numbers,
    tuples as lists, control and bidi characters inert, the store's separators among them), and the first
    divergence's rows found by their key, a list slot (no hash) included."""
    import numpy as np

    from dumpscope.core.support import row_spool

    if numpy_at < len(rows):  # (the engine's values may be numpy scalars)
        rows[numpy_at] = dict(rows[numpy_at], cosine=np.float32(0.1), max_abs_err=np.int64(3), rank=np.int64(1))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(row_spool, "BLOCK_ROWS", block)
        store = compare_text.TerminalCells()
        spool = row_spool.RowSpool(store.add)
        for row in rows:
            spool.append(row)
        spool.finish_block()  # (as the engine does once the rows are made: the sink has seen every row)
        assert not store.failed and len(store) == len(spool)
        back = list(spool)
        for fd in back[:3] + [{"name": "nowhere", "io": "input", "slot": 0, "step": 0, "rank": 0}, {}]:
            assert store.first_rows(fd, spool) == {k for k, r in enumerate(back) if compare_text.is_first_row(r, fd)}
        want = [[compare_text.inert(t) for t in compare_text.row_cells(r, False, False)[1:]] for r in back]
        assert list(store.cells()) == want
