"""The compare table written fast (issue 33): the same bytes and cells as the plain way, on real dumps
and on the rows that take the slow ways (formulas, control characters, NaN/Inf, odd types).

(``--json --output`` writes the table as the rows are made: tests/test_compare_table_as_made.py checks its
half-way, failing and closed-pipe cases.)
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
from pathlib import Path

import pytest

from conftest import unpack_data
from dumpscope.core.engines.compare import report as cr
from dumpscope.core.engines.compare import table_file as tf
from dumpscope.core.inert import csv_text, inert_lines
from dumpscope.tui.cli.entry import main


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_api_dumps")


# -- cells -----------------------------------------------------------------------------------------

#: one of each kind of character the inert rules treat apart, and plain ones
ALPHABET = ["a", "1", " ", "=", "+", "-", "@", "\t", "\r", "\n", "\x1b", "\x00", "\x7f", "\x9b", "\u202e", "\u200b",
            "\u034f", "\uff1d", "\uff0b", "é", "[", "'", '"', ","]


def test_cell_text_is_inert_lines_then_csv_text():
    """The fast path (printable ASCII with no formula start returned as it is) changes no answer."""
    texts = ["".join(p) for n in range(4) for p in itertools.product(ALPHABET, repeat=n) if n < 3 or p[0] in "=\t\u034f"]
    assert len(texts) > 2000
    for t in texts:
        assert cr._cell_text(t) == csv_text(inert_lines(t)), repr(t)
    assert cr._cell_text(3) == "3" and cr._cell_text("-1.5") == "-1.5" and cr._cell_text("-x") == "'-x"


def _row(name: str, **kw):
    row = {"name": name, "io": "input", "slot": 0, "step": 0, "rank": 0, "cosine": 0.5, "euc_dist": 1.0,
           "max_abs_err": 2.0, "max_rel_err": 3.0, "one_thousandth_ratio": 0.1, "five_thousandth_ratio": 0.2,
           "verdict": "error", "rule": "r", "kind": "tensor", "target_op_id": 1}
    row.update(kw)
    return row


ODD_DOC = {"rows": [
    # statistics of every sort: a formula, control characters, a list, None; NaN and Inf
    _row("Op\t1", target_name="=T", max_rel_err=math.inf, euc_dist=-math.inf, cosine=math.nan,
         target={"dtype": "=f16", "shape": [2], "max": "=1+1", "min": "\x1b[2J", "mean": None, "l2norm": [1, 2],
                 "file": "/t/=cmd|x"},
         golden={"dtype": "float16", "shape": "\x00", "max": 1, "min": True, "mean": 0.5, "l2norm": math.inf}),
    _row("\u202eevil", rule="@SUM(A1)", type="\uff1dHYPERLINK", precision=None, origin=[1, 2], euc_dist=None,
         golden="not a side"),
    _row("plain", golden={"file": "/g/a.npy"}, target={"requires_grad": True}, rel_err=math.nan, allowed=-math.inf),
], "first_divergence": {"name": "plain", "bogus": 1}}


def test_odd_values_become_inert_cells():
    rows = [cells for cells, _ in cr.table_rows(json.loads(json.dumps(ODD_DOC, allow_nan=True)))]
    ix = cr._IX
    a, b, c = rows
    assert (a[ix["NPU Name"]], a[ix["Bench Name"]]) == ("'=T.input.0", "Op\t1.input.0")
    assert (a[ix["NPU Dtype"]], a[ix["Bench Tensor Shape"]]) == ("'=f16", "␀")
    assert [a[ix[f"NPU {k}"]] for k in ("max", "min", "mean", "l2norm")] == ["'=1+1", "␛[2J", "N/A", "[1, 2]"]
    assert [a[ix[f"Bench {k}"]] for k in ("max", "min", "mean", "l2norm")] == [1, True, 0.5, math.inf]
    assert a[ix["Data_name"]] == "['=cmd|x', 'N/A']" and a[ix["MaxRelativeErr"]] == math.inf
    assert b[ix["Bench Name"]] == "\\u202eevil.input.0" and b[ix["Err_message"]] == "'@SUM(A1)"
    assert b[ix["type"]] == "'\uff1dHYPERLINK" and b[ix["precision"]] is None and b[ix["EucDist"]] == "N/A"
    assert b[ix["Bench Dtype"]] == "N/A" and b[ix["origin"]] == [1, 2]
    assert [r[ix["first_divergence"]] for r in rows] == ["", "", "yes"]
    assert c[ix["Requires_grad Consistent"]] == "N/A" and c[ix["Data_name"]] == "['N/A', 'a.npy']"


@pytest.mark.parametrize("name", ["=cmd|' /C calc'!A0", "+1", "-x", "@SUM(A1)"])
def test_an_op_named_like_a_formula_is_inert_text_in_both_name_cells(name):
    """The bench name (and the NPU name, the same text when the names are equal) is checked for a formula
    start in ``TableCells.of`` itself: a dump's op name never becomes a spreadsheet formula."""
    cells = [c for c, _ in cr.table_rows({"rows": [_row(name)]})][0]
    assert cells[cr._IX["Bench Name"]] == cells[cr._IX["NPU Name"]] == "'" + name + ".input.0"


def test_data_name_follows_each_rows_files():
    """An op's tensors in one file (CANN) share their Data_name; the next files get their own."""
    files = [("/t/op1", "/g/op1"), ("/t/op1", "/g/op1"), ("/t/op1", "/g/op2"), (None, "/g/op2"), (None, None),
             ("/t/op1", "/g/op1")]
    doc = {"rows": [_row(f"op{k}", target={"file": t} if t else {}, golden={"file": g} if g else {})
                    for k, (t, g) in enumerate(files)]}
    got = [cells[cr._IX["Data_name"]] for cells, _ in cr.table_rows(doc)]
    assert got == ["['op1', 'op1']", "['op1', 'op1']", "['op1', 'op2']", "['N/A', 'op2']", "N/A", "['op1', 'op1']"]


def test_csv_spells_inf_as_msprobe_and_nothing_else_changes(tmp_path):
    """The CSV is csv.writer's of the cells, None empty and ±Inf msprobe's " inf"/" -inf" (NaN "nan")."""
    doc = json.loads(json.dumps(ODD_DOC, allow_nan=True))
    expected = io.StringIO(newline="")
    w = csv.writer(expected)
    w.writerow(cr.COLUMNS)
    for cells, _ in cr.table_rows(doc):
        w.writerow(["" if v is None else (" inf" if v > 0 else " -inf") if isinstance(v, float) and math.isinf(v)
                    else v for v in cells])
    out = tmp_path / "odd.csv"
    assert tf.write_csv(doc, str(out)) == 3
    assert out.read_bytes() == expected.getvalue().encode("utf-8")
    text = out.read_text(encoding="utf-8")
    assert "\x1b" not in text and "\u202e" not in text
    assert ",nan, -inf,2.0, inf,0.1," in text and ",nan, -inf," in text.splitlines()[3]  # (rel_err, allowed)


# -- a table written by the print's pass ---------------------------------------------------------

def _doc(n: int = 1200) -> dict:
    """More rows than a chunk (512): the chunks' edges are crossed."""
    return {"rows": [_row(f"op{k // 2}", io=("input", "output")[k % 2], verdict=("pass", "warning", "error")[k % 3],
                          cosine=k / 7, target={"dtype": "float32", "shape": [k % 5], "max": k * 1.5})
                     for k in range(n)], "first_divergence": {"name": "op3", "io": "output", "slot": 0}}


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


# -- the command line: --json and --output read the rows once ------------------------------------

@pytest.mark.parametrize("ext", [".csv", ".xlsx"])
def test_json_and_output_together_write_what_each_writes_alone(dumps, tmp_path, capsys, ext):
    args = ["compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "--no-cache"]
    assert main([*args, "-o", str(tmp_path / f"alone{ext}")]) == 0
    capsys.readouterr()
    assert main([*args, "--json", "-o", str(tmp_path / f"both{ext}")]) == 0
    both_json, err = capsys.readouterr()
    assert f"rows to {tmp_path / f'both{ext}'}" in err
    assert main([*args, "--json", "-o", str(tmp_path / "doc.json")]) == 0
    capsys.readouterr()
    assert json.loads(both_json) == json.loads((tmp_path / "doc.json").read_text())
    if ext == ".csv":
        assert (tmp_path / "both.csv").read_bytes() == (tmp_path / "alone.csv").read_bytes()
    else:
        openpyxl = pytest.importorskip("openpyxl")
        a, b = openpyxl.load_workbook(tmp_path / "alone.xlsx"), openpyxl.load_workbook(tmp_path / "both.xlsx")
        assert a.sheetnames == b.sheetnames
        for name in a.sheetnames:
            assert [[(c.value, c.data_type, c.fill.fgColor.rgb) for c in r] for r in a[name].iter_rows()] == \
                   [[(c.value, c.data_type, c.fill.fgColor.rgb) for c in r] for r in b[name].iter_rows()]


def test_a_print_stopped_half_way_leaves_no_table(dumps, tmp_path, monkeypatch):
    import dumpscope.tui.cli.compare as cli

    held = []

    def print_json(doc):  # a reader that goes away (a closed pipe) after a few rows, its pass kept alive
        held.append(iter(doc["rows"]))  # (as a traceback holding the printer's frames would)
        for _ in range(3):
            next(held[0])
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "print_json", print_json)
    out = tmp_path / "t.xlsx"
    try:
        main(["compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "--no-cache", "--json", "-o", str(out)])
    except BrokenPipeError:
        pass
    assert not out.exists() and _leftovers(tmp_path) == []


def test_the_count_is_the_tables_rows(tmp_path):
    """A scalar list argument is one table row per item: the count is the table's, not the document's."""
    doc = {"rows": [_row("s", kind="scalar", cosine=None, golden={"value": [1, 2, 3]}, target={"value": [1, 2]})]}
    out = tmp_path / "s.csv"
    assert tf.write_csv(doc, str(out)) == 3 and len(out.read_text().splitlines()) == 4
    assert os.path.getsize(out) > 0


def test_csv_lines_made_by_lookups_are_csv_writers():
    """A row of texts, ints and None is made by lookups of its cells' fields (issue 33), any other row by
    csv.writer: every line is csv.writer's (±Inf as msprobe's), whichever way, in any order: a field
    remembered from one row (1) is never another type's (1.0, True) in the next."""
    import random

    import numpy as np

    values = [None, "", "x", "N/A", "a,b", 'q"q', '"', "r\rr", "n\nn", "\r\n", "\x00", " sp ", "\t", "é ≤ 2^-11",
              "[1, 16, 8, 8]", "=1", 0, 1, -5, 10 ** 20, True, False, 0.0, -0.0, 1.0, 1.5, math.inf, -math.inf,
              math.nan, np.int64(1), np.float32(2.5), [1, 2]]
    r = random.Random(11)
    rows = [[r.choice(values) for _ in range(8)] for _ in range(3000)]
    rows += [[1, "a", None], [1.0, "a", None], [True, "a", None], [1, "a", None]]
    expected = io.StringIO(newline="")
    w = csv.writer(expected)
    for cells in rows:
        w.writerow([(" inf" if v > 0 else " -inf") if isinstance(v, float) and math.isinf(v) else v for v in cells])
    lines: list[str] = []
    made = tf._CsvLines(lines, csv.writer(tf._Lines(lines.append)).writerow)
    assert made.add((cells, None) for cells in rows) == len(rows)
    assert "".join(lines) == expected.getvalue()
    assert tf._CSV_FAST  # (this Python's csv.writer spells fields as the lookups do)
