"""The standard-library xlsx writer (core.engines.compare.xlsx_stream), read back with openpyxl."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dumpscope.core.engines.compare.xlsx_stream import XlsxWriter, _column_letters

openpyxl = pytest.importorskip("openpyxl")


def _book(path, rows, fills=None):
    with open(path, "wb") as fh:
        book = XlsxWriter(fh, fills)
        for sheet, lines in rows:
            book.sheet(sheet)
            for cells, fill in lines:
                book.row(cells, fill)
        book.close()
    return openpyxl.load_workbook(path)


def test_values_read_back_as_written(tmp_path):
    cells = ["text", "=SUM(A1)", " padded ", "a<b>&c", "", None, 3, -2.5, 0.1, True, False, np.float32(1.5),
             np.int64(7), math.nan, math.inf, -math.inf, "\x1b[31m\x00\ud800"]
    wb = _book(tmp_path / "v.xlsx", [("S", [(cells, None)])])
    got = [c.value for c in wb["S"][1]]
    assert got[:13] == ["text", "=SUM(A1)", " padded ", "a<b>&c", None, None, 3, -2.5, 0.1, True, False, 1.5, 7]
    assert wb["S"]["B1"].data_type != "f"  # a text that looks like a formula stays text
    assert got[13:16] == ["nan", "inf", "-inf"]
    assert got[16] == "\\x1b[31m\\x00\\ud800"  # what XML cannot carry is shown escaped, never a broken file


def test_fills_cover_the_whole_row_and_sheets_keep_their_order(tmp_path):
    wb = _book(tmp_path / "f.xlsx", [("Sheet1", [(["h1", "h2"], None), ([1, None], "error"), ([2, None], "warning")]),
                                    ("Summary", [(["x"], None), ([], None), (["y"], None)])],
               {"error": "FFFF0000", "warning": "FFFF00"})
    assert wb.sheetnames == ["Sheet1", "Summary"]
    ws = wb["Sheet1"]
    assert [{(c.fill.fill_type, c.fill.fgColor.rgb) for c in r} for r in ws.iter_rows(min_row=2)] == [
        {("solid", "FFFF0000")}, {("solid", "00FFFF00")}]
    assert [r[0].value for r in wb["Summary"].iter_rows()] == ["x", None, "y"]


def test_column_letters():
    assert [_column_letters(k) for k in (0, 25, 26, 51, 52, 701, 702)] == ["A", "Z", "AA", "AZ", "BA", "ZZ", "AAA"]


def test_an_empty_book_has_one_sheet(tmp_path):
    assert _book(tmp_path / "e.xlsx", []).sheetnames == ["Sheet1"]


def test_numbers_read_back_as_the_very_values(tmp_path):
    """A float is written as its ``repr`` (the shortest text of the same double: what ``--json`` prints), so
    it reads back as the very value, 17 digits where it takes them (msprobe's openpyxl wrote 16: 0.1 + 0.2
    read back as 0.3); -0.0 stays -0.0; an int is its digits to 2**53 and its double's 16 digits beyond;
    numpy numbers as the Python numbers they equal.  Row by row and a run written by column alike."""
    import io
    import zipfile

    floats = [0.1 + 0.2, 1 / 3, -0.0, 0.0, 5e-324, 1e-300, 1.7976931348623157e308, 2.0, -2.5, 123456789.0,
              0.9999998661614878, 1e16, 1e-5]
    ints = [0, -5, 2 ** 53, -2 ** 53, 2 ** 53 + 1, 10 ** 20]
    numpy = [np.float32(1.1), np.float64(0.1 + 0.2), np.int64(7)]
    for how in ("row", "columns"):
        path = tmp_path / f"{how}.xlsx"
        with open(path, "wb") as fh:
            book = XlsxWriter(fh)
            book.sheet("S")
            if how == "row":
                for v in floats + ints:
                    book.row([v, "x"])
            else:
                book.columns([floats, ["x"] * len(floats)], [None] * len(floats))
                book.columns([ints, ["x"] * len(ints)], [None] * len(ints))
            book.row(numpy)
            book.close()
        sheet = zipfile.ZipFile(io.BytesIO(path.read_bytes())).read("xl/worksheets/sheet1.xml").decode()
        assert "<v>0.30000000000000004</v>" in sheet and "<v>-0.0</v>" in sheet and "<v>2.0</v>" in sheet
        assert sheet.count("<v>9007199254740992</v>") == 2  # (2**53, and 2**53 + 1 as its double)
        got = [r[0].value for r in openpyxl.load_workbook(path)["S"].iter_rows()]
        want = floats + [0, -5, 2 ** 53, -2 ** 53, 2 ** 53, 1e20, float(np.float32(1.1))]
        assert [repr(v) for v in got[:len(floats)]] == [repr(v) for v in floats], how
        assert got[len(floats):] == want[len(floats):], how
        assert got[-1] == float(np.float32(1.1))
