"""``XlsxWriter.rows`` and ``columns`` (a chunk of rows written column by column, issue 33) write the very bytes that
``XlsxWriter.row`` writes row by row: the sheets' XML and the shared strings, in the same order."""

from __future__ import annotations

import io
import math
import struct
import zipfile

import numpy as np
import pytest

from dumpscope.core.engines.compare import xlsx_stream
from dumpscope.core.engines.compare.xlsx_stream import SLOT, XlsxWriter

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FILLS = {"error": "FFFF0000", "warning": "FFFF00"}
TEXTS = ["", "N/A", "x", "a<b>&c", " sp", "sp ", "\t", "\x1b[31m", "\x00", "\ud800", "=1", "é ≤ 2^-11", "1",
         "[1, 16, 8, 8]", "\x7f", "\u3000", "'a', 'b'"]
FLOATS = [0.0, -0.0, 1.0, 1.5, 0.1, 0.1 + 0.2, 1e-300, 1e308, -2.5, math.nan, math.inf, -math.inf]


def _book(sheets: list[list[tuple[list, object]]], blocks: list[int] | None, columns: bool = False,
          own: tuple[int, ...] = ()) -> dict[str, object]:
    """The book's parts (uncompressed) and its slots counted, each sheet's rows in blocks of these sizes in
    turn (``rows``; ``columns``: each block's runs of one width given as columns, ``_columns``), or row by
    row (``blocks`` None); ``own``: the columns of rows' own texts (written inline)."""
    fh = io.BytesIO()
    book = XlsxWriter(fh, FILLS, scratch=io.BytesIO(), own_texts=own)
    for k, lines in enumerate(sheets):
        book.sheet(f"S{k}")
        if blocks is None:
            for cells, fill in lines:
                book.row(cells, fill)
            continue
        i = j = 0
        while i < len(lines):
            size = blocks[j % len(blocks)]
            if columns:
                _columns(book, lines[i:i + size], j)
            else:
                book.rows(lines[i:i + size])
            i, j = i + size, j + 1
    book.close()
    z = zipfile.ZipFile(io.BytesIO(fh.getvalue()))
    return {"slots counted": book.slots, **{n: z.read(n) for n in z.namelist()}}


def _columns(book: XlsxWriter, block: list[tuple[list, object]], j: int) -> None:
    """``block``'s runs of rows of one width given to ``columns``, with the type of each column whose cells
    are all of one type (every other such column: the writer is told only some)."""
    k = 0
    while k < len(block):
        end = k + 1
        while end < len(block) and len(block[end][0]) == len(block[k][0]):
            end += 1
        cells = [c for c, _ in block[k:end]]
        cols = [list(col) for col in zip(*cells)] if cells[0] else []
        types = [next(iter(ts)) if len(ts := {type(v) for v in col}) == 1 and (m + j) % 2 and
                 next(iter(ts)) in (str, float, int, bool, type(None), type(SLOT)) else None
                 for m, col in enumerate(cols)]
        if cols:
            book.columns(cols, [f for _, f in block[k:end]], types)
        else:
            for cells_, fill in block[k:end]:
                book.row(cells_, fill)
        k = end


def _value(kind: str, clean: bool = False):
    """Values of one kind of column (``mixed``: of any); ``clean``: texts of ASCII letters and spaces only."""
    texts = st.text("ab ", max_size=3) if clean else (st.sampled_from(TEXTS) | st.text(max_size=5)
                                                       | st.text("ab <&", max_size=4))
    floats = st.sampled_from(FLOATS) | st.floats()
    # (ints to 2**53 are spelled by ``str`` in a column: those at the edge, and past it)
    ints = (st.sampled_from([0, 1, -1, 2 ** 53 + 1, 10 ** 20, 2 ** 53, -2 ** 53, 2 ** 53 - 1, -2 ** 53 - 1,
                             10 ** 16 - 1, 10 ** 15])
            | st.integers(-10 ** 30, 10 ** 30) | st.integers(-2 ** 54, 2 ** 54))
    numpy = st.sampled_from([np.float64(0.5), np.float32(1.5), np.int64(7), np.bool_(True), np.float64(-0.0),
                             np.float64(math.nan)])
    kinds = {"text": texts, "float": floats, "int": ints, "number": ints | floats, "bool": st.booleans(),
             "none": st.none(), "slot": st.just(SLOT), "numpy": numpy}
    if kind == "mixed":
        return st.one_of(*kinds.values())
    return kinds[kind]


@st.composite
def tables(draw):
    """Sheets of rows: columns of one kind each (texts, floats, ints, ints and floats, bools, empty, slots;
    now and then numpy numbers or anything), in some tables a cell of another kind now and then, runs of
    one fill, now and then a row of another width."""
    plain = ["text", "text", "text", "float", "float", "int", "number", "bool", "none", "slot"]
    kinds = draw(st.lists(st.sampled_from(plain * 3 + ["numpy", "mixed"]), min_size=1, max_size=7))
    odd = draw(st.sampled_from([0, 0, 0, 15, 60]))  # one cell in this many of another kind (0: none)
    clean = draw(st.booleans())
    sheets = []
    for _ in range(draw(st.integers(1, 2))):
        lines = []
        for _ in range(draw(st.integers(0, 4))):  # runs of one fill
            fill = draw(st.sampled_from([None, None, "error", "warning", "other"]))
            for _ in range(draw(st.integers(1, 30))):
                if odd and draw(st.integers(0, 2 * odd)) == 0:  # a row of another width
                    cells = draw(st.lists(_value("mixed"), max_size=3))
                else:
                    cells = [draw(_value("mixed") if odd and draw(st.integers(0, odd)) == 0 else _value(kind, clean))
                             for kind in kinds]
                lines.append((cells, fill))
        sheets.append(lines)
    return sheets


@settings(max_examples=300, deadline=None)
@given(tables(), st.lists(st.integers(1, 40), min_size=1, max_size=4), st.sampled_from([1, 3, 8, 1 << 16]),
       st.sampled_from([(), (), (0,), (0, 1), (1, 3)]))
def test_rows_in_blocks_are_the_bytes_of_rows_one_by_one(sheets, blocks, shared_max, own):
    saved = xlsx_stream.SHARED_MAX
    xlsx_stream.SHARED_MAX = shared_max  # (a full shared table: later texts inline, in both ways alike)
    try:
        one_by_one = _book(sheets, None, own=own)
        assert one_by_one["slots counted"] == sum(cells.count(SLOT) for lines in sheets for cells, _ in lines)
        assert _book(sheets, blocks, own=own) == one_by_one
        assert _book(sheets, blocks, columns=True, own=own) == one_by_one
    finally:
        xlsx_stream.SHARED_MAX = saved


def test_plain_runs_are_written_column_by_column(monkeypatch):
    """The property above is not about a path never taken: runs of plain cells never reach ``row`` (a -0.0
    among them included: its own text in its column); a run holding a NaN, ±Inf or a numpy number does, and
    its bytes are still ``row``'s."""
    names = [f"op{k}.input.0" for k in range(200)]
    # (a 0.0 then a double whose lowest byte is 0x80: -0.0's bytes across the two, not a -0.0)
    low_80 = struct.unpack("<d", b"\x80\x00\x00\x00\x00\x00\xf0\x3f")[0]
    plain = [([names[k], names[k], "float16", 0.5 * k, k, k % 2 == 0, None, SLOT, "N/A", 1.0, low_80 if k % 2 else 0.0],
              "error" if 50 <= k < 60 else None) for k in range(200)]
    one_by_one = _book([plain], None)
    calls = []
    real_row = XlsxWriter.row
    monkeypatch.setattr(XlsxWriter, "row",
                        lambda self, cells, fill=None: calls.append(1) or real_row(self, cells, fill))
    assert _book([plain], [128]) == one_by_one
    assert calls == []
    for odd in (math.nan, -0.0, np.float64(2.0), math.inf):
        lines = [(list(cells), fill) for cells, fill in plain]
        lines[70][0][3] = odd
        want = _book([lines], None)
        calls.clear()
        assert _book([lines], [128]) == want
        # (rows 60..127: the run of one fill holding the odd cell, row by row; a -0.0 is a number of its own)
        assert len(calls) == (0 if odd == 0 else 68)
        assert (b"<v>-0.0</v>" in want["xl/worksheets/sheet1.xml"]) == (odd == 0)
    text = one_by_one["xl/sharedStrings.xml"]
    assert text.index(b"<t>op0.input.0</t>") < text.index(b"<t>float16</t>") < text.index(b"<t>op1.input.0</t>")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("ab \t<&é\x00\x7f", min_size=1, max_size=4) | st.sampled_from(TEXTS[1:]), max_size=6))
def test_texts_made_in_bulk_are_each_texts_own(texts):
    """New shared texts are made together (``_elements``: by concatenation when a few scans of them all
    find nothing to escape and no edge space); each is what ``_t`` makes of it alone."""
    assert xlsx_stream._elements(texts) == list(map(xlsx_stream._t, texts))


def test_own_texts_are_inline_and_read_back_as_given():
    """A column of rows' own texts (``own_texts``: the compare table's names) is written inline, never
    shared; the other columns' texts are still shared, each once; every cell reads back as given, plain
    or not (a text to escape, an edge space, an empty text, a number in the column)."""
    names = [f"op{k}.input.0" for k in range(40)]
    odd = ["a<b>&c", " sp", "", "é ≤ 2", "=1"]
    rows = [([names[k], names[k], "float16", k], None) for k in range(40)]
    rows += [([t, t, "float16", 1.5], "error") for t in odd] + [([7, None, "float16", 0], None)]
    cols = [list(col) for col in zip(*[c for c, _ in rows[:40]])]
    for how in ("row", "columns"):
        fh = io.BytesIO()
        book = XlsxWriter(fh, FILLS, scratch=io.BytesIO(), own_texts=(0, 1))
        book.sheet("S")
        if how == "row":
            for cells, fill in rows:
                book.row(cells, fill)
        else:
            book.columns(cols, [None] * 40)
            book.rows(rows[40:])
        book.close()
        z = zipfile.ZipFile(io.BytesIO(fh.getvalue()))
        shared = z.read("xl/sharedStrings.xml").decode()
        sheet = z.read("xl/worksheets/sheet1.xml").decode()
        assert "op1.input.0" not in shared and shared.count("<t>float16</t>") == 1
        assert sheet.count('<c t="inlineStr"><is><t>op1.input.0</t></is></c>') == 2
        assert _cells(z) == [[c for c in cells] for cells, _ in rows], how


def _cells(z: zipfile.ZipFile) -> list[list[object]]:
    """The first sheet's cells read back (texts shared or inline, numbers as floats or ints, empty: None)."""
    import xml.etree.ElementTree as ET

    ns = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}
    shared = ["".join(t.text or "" for t in si.iter(f"{{{ns['m']}}}t"))
              for si in ET.fromstring(z.read("xl/sharedStrings.xml")).findall("m:si", ns)]
    out = []
    for row in ET.fromstring(z.read("xl/worksheets/sheet1.xml")).iter(f"{{{ns['m']}}}row"):
        cells: list[object] = []
        for c in row.findall("m:c", ns):
            t, v = c.get("t"), c.find("m:v", ns)
            if t == "s":
                cells.append(shared[int(v.text)])
            elif t == "inlineStr":
                cells.append("".join(x.text or "" for x in c.iter(f"{{{ns['m']}}}t")))
            elif v is None:
                cells.append(None)
            else:
                f = float(v.text)
                cells.append(int(f) if f.is_integer() and "." not in v.text else f)
        out.append(cells)
    return out


def test_a_column_of_floats_is_spelled_once_for_the_print_and_the_book(monkeypatch):
    """Within one block stored (``one_transpose_each``) a column of floats is spelled once
    (``row_columns.float_texts``): a book of rows printed too (``FloatSpellings(look_up=False)``) takes the
    texts made of that very column (no lookup), the floats' ``repr``; outside, each spells its own."""
    from dumpscope.core.support import row_columns

    col = tuple(1.0 + k / 7 for k in range(300))
    spelled = []
    real = row_columns.float_texts
    monkeypatch.setattr(row_columns, "float_texts", lambda c: spelled.append(c) or real(c))
    with row_columns.one_transpose_each():
        printed = row_columns.float_texts(col)
        assert row_columns.float_texts(col) is printed and printed == [repr(v) for v in col]
        assert real(list(col)) is not printed  # (another column of equal values)
        fh = io.BytesIO()
        book = XlsxWriter(fh, FILLS, scratch=io.BytesIO(), floats=row_columns.FloatSpellings(look_up=False))
        book.sheet("S")
        book.columns([col, ["x"] * 300], [None] * 300)
        book.close()
        assert len(spelled) == 3 and spelled[-1] is col  # (the book asked for this very column's texts)
    assert real(col) is not printed
    sheet = zipfile.ZipFile(io.BytesIO(fh.getvalue())).read("xl/worksheets/sheet1.xml").decode()
    assert all(f"<c><v>{t}</v></c>" in sheet for t in printed)
    with pytest.raises(TypeError):  # (a column not all floats: the caller's to know)
        real((1.5, 2))


def test_float_spellings_remember_values_and_spell_a_new_column_at_once(monkeypatch):
    """``FloatSpellings.of``: a column all remembered is looked up (no spelling); one with a new value is
    spelled whole by one ``float_texts`` and remembered; one of one value is its text once; -0.0 (equal to
    0.0 as a key) is spelled, never remembered; past ``kept`` values everything is forgotten first."""
    from dumpscope.core.support import row_columns

    spelled = []
    real = row_columns.float_texts
    monkeypatch.setattr(row_columns, "float_texts", lambda c: spelled.append(len(c)) or real(c))
    sp = row_columns.FloatSpellings(kept=10)
    assert sp.of((0.5, 1.5, 0.5)) == ["0.5", "1.5", "0.5"] and spelled == [3]
    assert sp.of((1.5, 0.5)) == ["1.5", "0.5"] and spelled == [3]  # (looked up)
    assert sp.of((0.0, -0.0, 0.5)) == ["0.0", "-0.0", "0.5"] and 0.0 not in sp.known
    assert sp.of((0.0, 0.25)) == ["0.0", "0.25"] and sp.known[0.0] == "0.0"
    assert sp.of((7.5,) * 4) == ["7.5"] * 4 and 7.5 not in sp.known  # (one value: its text once)
    sp.of(tuple(k / 3 for k in range(1, 9)))  # (4 kept + 8 new > 10: forgotten, then these 8)
    assert 1.5 not in sp.known and len(sp.known) == 8
    with row_columns.one_transpose_each():  # (rows printed too: no lookup, the print's texts)
        col = (2.25, 3.25)
        printed = real(col)
        sp = row_columns.FloatSpellings(look_up=False)
        assert sp.of((0.5,)) == ["0.5"] and sp.of(col) is printed and not sp.known
