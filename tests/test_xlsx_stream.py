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


def test_row_templates_write_what_cell_by_cell_writes(tmp_path, monkeypatch):
    """A row is written by a template made per shape of row (issue 33); cell by cell (``_row_each``, the
    way for the types no template takes) writes the very same XML, shared strings included."""
    import io
    import random
    import zipfile

    from dumpscope.core.engines.compare import xlsx_stream

    # (1, 1.0 and True, 0, 0.0 and False are equal as keys of the one lookup of a row's values' texts)
    values = [None, "", "x", "N/A", "a<b", " sp", "\x1b", "\ud800", "=1", 0, -5, 10 ** 20, True, False, 0.0, -0.0,
              1.5, 1e-300, 1e308, math.inf, -math.inf, math.nan, 0.1 + 0.2, 1, 1.0, 2 ** 53 + 1, "1"]
    r = random.Random(7)
    sheets = [(f"S{k}", [([r.choice(values) for _ in range(6)], r.choice([None, "error", "warning", "other"]))
                         for _ in range(300)]) for k in range(2)]
    sheets[0][1].append(([1e308, 1e308, "x"], None))  # a sum past the largest float: checked one by one

    def parts() -> dict[str, bytes]:
        fh = io.BytesIO()
        book = XlsxWriter(fh, {"error": "FFFF0000", "warning": "FFFF00"})
        for name, lines in sheets:
            book.sheet(name)
            for cells, fill in lines:
                book.row(cells, fill)
        book.close()
        z = zipfile.ZipFile(io.BytesIO(fh.getvalue()))
        return {n: z.read(n) for n in z.namelist()}

    templated = parts()
    monkeypatch.setattr(xlsx_stream.XlsxWriter, "_plan", lambda self, key, fill: xlsx_stream._ODD)
    assert parts() == templated
    assert b't="s"' in templated["xl/worksheets/sheet1.xml"] and b"<v>1e+308</v>" in templated["xl/worksheets/sheet1.xml"]


def test_float_texts_looked_up_are_what_each_float_spells(tmp_path, monkeypatch):
    """A row's floats are spelled by a lookup of the texts already made (issue 33): -0.0 after 0.0 (equal
    as keys) stays ``-0``, 0.0 after -0.0 stays ``0``, and past the lookup's bound (4096 texts) every
    float is still its own ``%.16g``: the same XML as the cell-by-cell way."""
    import io
    import zipfile

    from dumpscope.core.engines.compare import xlsx_stream

    lines = [([0.0, 1.5, "a"], None), ([-0.0, 1.5, "a"], None), ([0.0, -0.0, "b"], "error"), ([1.5, 0.0, "a"], None)]
    lines += [([k / 7, -k / 3, "c"], None) for k in range(5000)] + [([1 / 7, -0.0, "c"], None)]

    def sheet() -> bytes:
        fh = io.BytesIO()
        book = XlsxWriter(fh, {"error": "FFFF0000"})
        book.sheet("S")
        for cells, fill in lines:
            book.row(cells, fill)
        book.close()
        return zipfile.ZipFile(io.BytesIO(fh.getvalue())).read("xl/worksheets/sheet1.xml")

    templated = sheet()
    assert templated.count(b"<v>-0</v>") == 3 and b"<v>0.1428571428571428</v>" in templated
    monkeypatch.setattr(xlsx_stream.XlsxWriter, "_plan", lambda self, key, fill: xlsx_stream._ODD)
    assert sheet() == templated
