"""``compare [--json] --output x.csv|.xlsx`` writes the table as the compare makes its rows
(``table_file.TableAsMade``, issue 33): with ``--json`` the rows are kept only as the document prints
them, without it they are not read back for the table; the first divergence's cells, known at the end,
are filled when the table is put in place.

The same bytes (CSV) and cells (xlsx) as the table written from the finished document, whatever the
first divergence matches (rows of several ranks, a list argument's items), wherever the chunks, copy
blocks and sheets end; a failing table leaves the print whole and names the file; a print that stops
half-way leaves no table.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import unpack_data
from dumpscope.core.engines.compare import report as cr
from dumpscope.core.engines.compare import table_file as tf
from dumpscope.core.support import row_spool
from dumpscope.core.support.row_spool import PrintedRows
from dumpscope.tui.cli.entry import main
from dumpscope.tui.json_text import row_block_text


def _row(name: str, k: int, **kw) -> dict:
    row = {"name": name, "io": ("input", "output")[k % 2], "slot": 0, "step": 0, "rank": k % 3,
           "cosine": k / 7, "euc_dist": 1.0, "max_abs_err": 2.0, "max_rel_err": 3.0, "one_thousandth_ratio": 0.1,
           "five_thousandth_ratio": 0.2, "verdict": ("pass", "warning", "error")[k % 3], "rule": "r", "kind": "tensor",
           "target_op_id": k // 2, "golden": {"dtype": "float32", "shape": [k % 5], "max": k * 1.5, "file": f"/g/{k}"},
           "target": {"dtype": "float16", "shape": [k % 5], "max": math.inf if k % 11 == 0 else k * 0.5}}
    row.update(kw)
    return row


def _doc(n: int = 1300) -> dict:
    """Rows across several chunks (512); ``op5 output.0`` in every rank (ranks are not part of the match,
    as in ``report.is_first``), a list argument of three items at the first divergence's key and one
    before it (each item a table row)."""
    rows = []
    for k in range(n):
        name = "op5" if k in (11, 611, 1211) else f"op{k // 2}"
        extra = {"rank": (11, 611, 1211).index(k)} if k in (11, 611, 1211) else {}
        if k in (3, 611):  # a scalar list argument: one table row per item
            extra.update(kind="scalar", golden={"value": [1, 2, 3]}, target={"value": [1, 2, 4]})
        rows.append(_row(name, k, **extra))
    return {"rows": rows, "first_divergence": {"name": "op5", "io": "output", "slot": 0, "step": 0, "rank": 2},
            "precision": {"golden_text": "x"}}


def _made(doc: dict, path: Path, stacks=None) -> int:
    """The rows handed over as the engine hands them (``row_sink``), kept printed, then finished."""
    made = tf.TableAsMade(str(path), lambda rows: None, stacks)
    rows = PrintedRows(row_block_text, made.add)
    for row in doc["rows"]:
        rows.append(row)
    return made.finish({**doc, "rows": rows})


def _cells(path: Path) -> dict:
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.load_workbook(path)
    return {name: [[(c.value, c.data_type, c.fill.fgColor.rgb) for c in r] for r in book[name].iter_rows()]
            for name in book.sheetnames}


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


@pytest.mark.parametrize("ext", [".csv", ".xlsx"])
def test_the_table_as_made_is_the_table_of_the_document(tmp_path, monkeypatch, ext):
    from dumpscope.core.support import zip_writer

    doc = _doc()
    monkeypatch.setattr(tf, "_COPY_BYTES", 4096)  # slots filled across many copy blocks (the CSV)
    monkeypatch.setattr(zip_writer, "SEGMENT_BYTES", 3000)  # in many segments of a sheet (the book)
    monkeypatch.setattr(tf, "MAX_SHEET_ROWS", 500)  # and sheets
    plain = tmp_path / f"plain{ext}"
    n = tf.write_table(json.loads(json.dumps(doc)), str(plain))
    assert n == 1300 + 2 * 2  # (two list arguments of three items)
    made = tmp_path / f"made{ext}"
    assert _made(doc, made) == n
    if ext == ".csv":
        assert made.read_bytes() == plain.read_bytes()
        lines = made.read_text(encoding="utf-8").splitlines()
        yes = [k for k, line in enumerate(lines) if ",yes," in line]
        assert len(yes) == 3 + 2  # op5 output.0 in three ranks, the last a list of three items
    else:
        got, want = _cells(made), _cells(plain)
        assert list(got) == ["Sheet1", "Sheet2", "Sheet3", "Summary"] and got == want
        assert sum(r[cr._IX["first_divergence"]][0] == "yes" for name, sheet in got.items() if name != "Summary"
                   for r in sheet) == 5
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("fd", [None, {"name": "nowhere", "io": "input", "slot": 0, "step": 0},
                                {"name": "op5", "io": "output"}, {"name": "op7", "io": "input", "slot": [0], "step": 0}])
def test_any_first_divergence_marks_the_rows_the_plain_table_marks(tmp_path, fd):
    """None; a key no row has; a key of fewer fields (every row looked at); one that cannot be hashed."""
    doc = dict(_doc(700), first_divergence=fd)
    doc["rows"][14]["slot"] = [0]  # (op7 input, k=14: a slot that has no hash either)
    tf.write_csv(json.loads(json.dumps(doc)), str(tmp_path / "plain.csv"))
    _made(doc, tmp_path / "made.csv")
    assert (tmp_path / "made.csv").read_bytes() == (tmp_path / "plain.csv").read_bytes()
    assert (b",yes," in (tmp_path / "made.csv").read_bytes()) == (fd is not None and fd["name"] != "nowhere")


@pytest.mark.parametrize("ext", [".csv", ".xlsx"])
def test_no_rows_is_the_plain_tables_header(tmp_path, ext):
    doc = {"rows": [], "first_divergence": None}
    tf.write_table(doc, str(tmp_path / f"plain{ext}"))
    assert _made(doc, tmp_path / f"made{ext}") == 0
    if ext == ".csv":
        assert (tmp_path / "made.csv").read_bytes() == (tmp_path / "plain.csv").read_bytes()
    else:
        assert _cells(tmp_path / "made.xlsx") == _cells(tmp_path / "plain.xlsx")


@pytest.mark.parametrize("late", [False, True])
def test_a_nul_in_a_cell_of_its_own_is_copied_as_it_is(tmp_path, monkeypatch, late):
    """A slot is a NUL byte; a cell that holds one itself (no compare row does: texts are inert, and the
    raw cells are the engine's words) sends the copy the slow way, with the same bytes.  ``late``: one
    far past the first divergence, in a block whose slots are counted by what filling them adds."""
    doc = _doc(700)
    doc["rows"][5]["verdict"] = "pa\x00ss"
    doc["rows"][11]["origin"] = "\x00"
    if late:
        monkeypatch.setattr(tf, "_COPY_BYTES", 4096)
        doc["rows"][650]["origin"] = "\x00\x00"
    tf.write_csv(json.loads(json.dumps(doc)), str(tmp_path / "plain.csv"))
    _made(doc, tmp_path / "made.csv")
    data = (tmp_path / "made.csv").read_bytes()
    assert data == (tmp_path / "plain.csv").read_bytes() and data.count(b"\x00") == 2 + 2 * late
    assert b",yes," in data


def test_the_rows_are_filled_before_they_are_printed_or_tabled(tmp_path):
    """``add`` fills a row's sides first: the print shows what the table shows."""
    def fill(row):
        row["golden"] = dict(row["golden"], dtype="bfloat16")
        return row

    made = tf.TableAsMade(str(tmp_path / "t.csv"), lambda rows: [fill(r) for r in rows], None)
    rows = PrintedRows(row_block_text, made.add)
    for k in range(200):
        rows.append(_row(f"op{k}", k))
    assert all(r["golden"]["dtype"] == "bfloat16" for r in rows)
    made.finish({"rows": rows})
    assert (tmp_path / "t.csv").read_text().count(",bfloat16,") == 200


def test_a_failing_table_does_not_stop_the_rows(tmp_path, monkeypatch):
    from dumpscope.core.engines.compare import xlsx_stream

    out = tmp_path / "t.xlsx"
    real = xlsx_stream.XlsxWriter.row
    calls = []

    def full(self, cells, fill=None):
        calls.append(1)
        if len(calls) == 600:  # (the second chunk)
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, cells, fill)

    monkeypatch.setattr(xlsx_stream.XlsxWriter, "row", full)
    made = tf.TableAsMade(str(out), lambda rows: None, None)
    rows = PrintedRows(row_block_text, made.add)
    for row in _doc()["rows"]:
        rows.append(row)
    assert len(list(rows)) == 1300 and len(calls) == 600  # every row kept (and printed); the table stopped
    with pytest.raises(cr.ExportError, match=f"{out}: No space left on device"):
        made.finish({"rows": rows})
    assert not out.exists() and _leftovers(tmp_path) == []


# -- the command line ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_api_dumps")


@pytest.fixture(scope="module")
def dp2(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_dp2") / "dp2"


def _fill_up_when_put_in_place(monkeypatch, ext: str) -> None:
    """The disk fills while the table is put in the file: the CSV's part copied, the book's sheets."""
    from dumpscope.core.support import zip_writer

    def full(self, *args):
        raise OSError(errno.ENOSPC, "No space left on device")

    if ext == ".csv":
        monkeypatch.setattr(tf._SlotFill, "__call__", full)
    else:
        monkeypatch.setattr(zip_writer.ZipWriter, "add_part", full)


def _no_json_spool(monkeypatch):
    """Rows JSON-encoded into a spool fail the test: ``--json --output`` keeps them printed."""
    def refuse(self, rows):
        raise AssertionError("a row was JSON-encoded into the spool")

    monkeypatch.setattr(row_spool.RowSpool, "_block_text", refuse)  # (``PrintedRows`` keeps its own)


@pytest.mark.parametrize("ext", [".csv", ".xlsx"])
@pytest.mark.parametrize("which", ["api", "ranks"])
def test_cli_json_and_output_print_and_write_what_each_writes_alone(dumps, dp2, tmp_path, capsys, monkeypatch,
                                                                    ext, which):
    """msprobe's first divergence (one row); MindSpore's two ranks (the first divergence on both
    ranks' rows): the document is ``--json``'s, the table ``--output``'s alone, byte for byte."""
    if which == "api":
        args = ["compare", str(dumps / "msp_a"), str(dumps / "msp_b")]
    else:
        args = ["compare", str(dp2), str(dp2.parent / "dp2_ms27"), "--rank", "all"]
    args += ["--cache-dir", str(tmp_path / "cache")]
    assert main([*args, "-o", str(tmp_path / f"alone{ext}")]) == 0
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    alone_json = capsys.readouterr().out
    _no_json_spool(monkeypatch)
    assert main([*args, "--json", "-o", str(tmp_path / f"both{ext}")]) == 0
    both_json, err = capsys.readouterr()
    assert both_json == alone_json and f"rows to {tmp_path / f'both{ext}'}" in err
    first = json.loads(both_json)["first_divergence"]
    assert first
    if ext == ".csv":
        data = (tmp_path / "both.csv").read_bytes()
        assert data == (tmp_path / "alone.csv").read_bytes()
        assert data.count(b",yes,") == (2 if which == "ranks" else 1)
    else:
        assert _cells(tmp_path / "both.xlsx") == _cells(tmp_path / "alone.xlsx")
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("ext", [".csv", ".xlsx"])
@pytest.mark.parametrize("which", ["api", "ranks"])
def test_cli_output_without_json_is_written_as_made_and_is_the_documents_table(dumps, dp2, tmp_path, capsys,
                                                                               monkeypatch, ext, which):
    """``compare -o x.csv|.xlsx`` (the terminal's print, or ``--csv``'s): the table is written as the rows
    are made, not from the rows read back after the compare (the 20k bench: ~0.35 s less), and it is the
    table written from them (``--export-config`` still does): the first divergence's rows marked, the
    target's stacks, the print the same as without ``-o``."""
    if which == "api":
        args = ["compare", str(dumps / "msp_a"), str(dumps / "msp_b")]
    else:
        args = ["compare", str(dp2), str(dp2.parent / "dp2_ms27"), "--rank", "all"]
    args += ["--cache-dir", str(tmp_path / "cache")]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["first_divergence"]
    # (with --export-config the table is written from the rows read back after the compare, as before)
    plain = tmp_path / f"plain{ext}"
    assert main([*args, "--export-config", str(tmp_path / "redump.yaml"), "-o", str(plain)]) == 0
    n = int(capsys.readouterr().err.split("wrote ")[1].split()[0])
    for extra in ([], ["--csv"]):
        assert main([*args, *extra]) == 0
        printed = capsys.readouterr().out
        made = []
        real_init = tf.TableAsMade.__init__

        def init(self, *a, **kw):
            made.append(self)
            real_init(self, *a, **kw)

        def refuse(*a, **kw):
            raise AssertionError("the table was written from the rows read back")

        with monkeypatch.context() as m:
            m.setattr(tf.TableAsMade, "__init__", init)
            m.setattr(tf, "write_table", refuse)
            out = tmp_path / f"made{ext}"
            assert main([*args, *extra, "-o", str(out)]) == 0
        got, err = capsys.readouterr()
        assert made and got == printed and f"wrote {n} rows to {out}" in err
        if ext == ".csv":
            data = out.read_bytes()
            assert data == plain.read_bytes()
            assert data.count(b",yes,") == (2 if which == "ranks" else 1)
        else:
            assert _cells(out) == _cells(plain)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("ext", [".csv", ".xlsx"])
def test_cli_output_without_json_that_cannot_be_written_is_an_error_naming_it(dumps, tmp_path, capsys,
                                                                             monkeypatch, ext):
    """The table as made fails when it is put in place: exit 1, the file named, nothing left behind."""
    _fill_up_when_put_in_place(monkeypatch, ext)
    out = tmp_path / f"t{ext}"
    assert main(["compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "--no-cache", "-o", str(out)]) == 1
    assert f"{out}: No space left on device" in capsys.readouterr().err
    assert not out.exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize("ext", [".csv", ".xlsx"])
def test_cli_a_table_that_cannot_be_written_leaves_the_print_whole(dumps, tmp_path, capsys, monkeypatch, ext):
    args = ["compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "--cache-dir", str(tmp_path / "cache"), "--json"]
    assert main(args) == 0
    whole = capsys.readouterr().out

    _fill_up_when_put_in_place(monkeypatch, ext)
    out = tmp_path / f"t{ext}"
    assert main([*args, "-o", str(out)]) == 1
    got, err = capsys.readouterr()
    assert got == whole and f"{out}: No space left on device" in err
    assert not out.exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize("ext", [".csv", ".xlsx"])
def test_cli_a_closed_pipe_leaves_no_table(dumps, tmp_path, monkeypatch, ext):
    import dumpscope.tui.cli.compare as cli

    made = []
    real_init = tf.TableAsMade.__init__

    def init(self, *a, **kw):
        made.append(self)
        real_init(self, *a, **kw)

    def print_json(doc):  # the reader goes away after a few rows
        it = iter(doc["rows"])
        for _ in range(3):
            next(it)
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(tf.TableAsMade, "__init__", init)
    monkeypatch.setattr(cli, "print_json", print_json)
    out = tmp_path / f"t{ext}"
    try:
        main(["compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "--no-cache", "--json", "-o", str(out)])
    except BrokenPipeError:
        pass
    assert made and not out.exists() and _leftovers(tmp_path) == []


# -- numbers written from their looked-up texts ---------------------------------------------------

_floats = st.lists(st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 5e-324, 0.1]),
                             st.floats(allow_nan=True, allow_infinity=True)), min_size=14, max_size=14)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(_floats, min_size=1, max_size=6))
def test_float_texts_are_what_csv_writer_spells(rows):
    """A CSV table's metrics and statistics looked up by value (``_CsvFloats``) come out as csv.writer
    spells the floats themselves: -0.0 apart from 0.0, NaN, ±Inf, the same value twice."""
    texts = tf._CsvFloats()
    for values in rows + rows:  # (each list again: from the looked-up texts)
        def spelled(cells):  # (``TableFile._csv_cells``: the floats left ±Inf spelled msprobe's way)
            return [(" inf" if v > 0 else " -inf") if isinstance(v, float) and math.isinf(v) else v for v in cells]

        got = io.StringIO(newline="")
        csv.writer(got).writerow(spelled(texts(list(values))))
        want = io.StringIO(newline="")
        csv.writer(want).writerow(spelled(values))
        assert got.getvalue() == want.getvalue()


_sides = st.one_of(st.none(), st.just([1]), st.fixed_dictionaries({}, optional={
    "dtype": st.sampled_from([None, "", "float32"]), "shape": st.sampled_from([None, [], [2, 3]])}))


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({}, optional={"golden": _sides, "target": _sides}), max_size=6))
def test_a_block_is_filled_as_each_of_its_rows_is(rows):
    """``block_filler`` skips ``fill`` only for a block whose every row ``fill`` would leave as it is (both
    sides dicts with a dtype and a shape: ``side_filler``'s own test, spelled here row by row), so the rows
    come out as filled one by one."""
    def described(row):
        g, t = row.get("golden"), row.get("target")
        return (type(g) is dict and type(t) is dict and bool(g.get("dtype")) and bool(t.get("dtype"))
                and g.get("shape") is not None and t.get("shape") is not None)

    def fill(row):  # (as ``side_filler``'s: a described row as it is, another's sides filled)
        if not described(row):
            for side in ("golden", "target"):
                row[side] = dict(row[side], dtype="f16") if type(row.get(side)) is dict else {"dtype": "f16"}
        return row

    assert cr.sides_described(rows) == all(map(described, rows))
    one_by_one = [fill(json.loads(json.dumps(r))) for r in rows]
    block = json.loads(json.dumps(rows))
    cr.block_filler(fill)(block)
    assert block == one_by_one
