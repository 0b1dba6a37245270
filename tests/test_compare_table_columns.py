"""``table_columns.chunk_columns`` (the workbook's cells made column by column, issue 33) makes the cells
``TableCells.of`` makes row by row, each column's type where it says it knows it, and the same state
(first-divergence keys, stack lookups); a chunk it cannot make it leaves alone (None, nothing changed)."""

from __future__ import annotations

import math

import pytest

from dumpscope.core.engines.compare import report as cr
from dumpscope.core.engines.compare import table_columns as tc
from dumpscope.core.engines.compare.table_columns import chunk_columns
from dumpscope.core.engines.compare.xlsx_stream import SLOT

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: texts the inert rules, ``repr`` and the XML treat apart, and plain ones
TEXTS = ["a", "op/x", "=1", "+a", "-1.5", "@s", " sp", "\t", "\x1b[31m", "\x7f", "é", "q'q", 'q"q', "b\\s", "[1]",
         "N/A", "", "a/b/c.npy", "/abs/f.1.2", "dir/", "\ud800"]


def _key(v):
    """A cell as compared: its type and repr (NaN equals itself, -0.0 is not 0.0)."""
    return type(v), repr(v)


#: what a chunk's rows may hold that is unusual, each drawn apart (so most chunks with some still take the
#: column path)
ODD = ("dtypes", "shapes", "files", "no_files", "stats", "rg", "names", "target_names", "metrics", "scalar", "missing",
       "texts")


def _side(draw, odd: frozenset) -> dict:
    side = {"dtype": draw(st.sampled_from(["float16", "float32", "bfloat16"]
                                          + ([None, "", *TEXTS] if "dtypes" in odd else []))),
            "shape": draw(st.sampled_from([[1, 16, 8, 8], [2, 3], [], [2.0, 3]]
                                          + ([None, "2x3"] if "shapes" in odd else []))),
            "file": draw(st.sampled_from(["/d/0/Conv2D.a.1.0.17", "/d/Add.b.2.0.18", "rel/x.npy"]
                                         + ([t for t in TEXTS if t] if "files" in odd else [])
                                         + ([None, ""] if "no_files" in odd else [])))}
    stat = st.sampled_from([1.5, -0.0, 0.0, math.nan, math.inf, 3.25]) | st.floats()
    if "stats" in odd:
        stat = stat | st.sampled_from([None, 2, True, "x", "=1", "\x1b"])
    for k in ("max", "min", "mean", "l2norm"):
        side[k] = draw(stat)
    if "rg" in odd and draw(st.booleans()):
        side["requires_grad"] = draw(st.sampled_from([True, False, None, "N/A"]))
    return side


@st.composite
def rows(draw):
    """Chunks of compare rows: plain ones (every key, floats, texts a table keeps as they are) and, in
    some chunks, rows with some of ``ODD`` (None, texts to make inert, other names, missing keys, scalar
    arguments)."""
    odd = frozenset(draw(st.lists(st.sampled_from(ODD), max_size=3)))
    texts = TEXTS if "texts" in odd else []
    out = []
    for k in range(draw(st.integers(1, 12))):
        name = draw(st.sampled_from(["op/a", "op/b", "Conv2D"] + texts + ([None, 3] if "names" in odd else [])))
        metric = st.floats() | st.sampled_from([0.0, 1.0, -0.0])
        if "metrics" in odd:
            metric = metric | st.sampled_from([None, "x", 2])
        row = {"name": name, "io": draw(st.sampled_from(["input", "output"])), "slot": draw(st.integers(0, 2)),
               "step": draw(st.sampled_from([0, 1])), "rank": 0,
               "kind": draw(st.sampled_from(["tensor", "tensor", "scalar"] if "scalar" in odd else ["tensor"])),
               "target_name": draw(st.sampled_from([None, name] + (["other/op", "=t", 5] if "target_names" in odd
                                                                   else []))),
               "target_op_id": draw(st.sampled_from([1, 2, None])), "golden": _side(draw, odd),
               "target": _side(draw, odd), "verdict": draw(st.sampled_from(["pass", "warning", "error", None])),
               "rule": draw(st.sampled_from(["pass (rel err 0.0005 ≤ 0.0049)", "", None, *texts])),
               "type": draw(st.sampled_from(["Conv2D", None, *texts])),
               "precision": draw(st.sampled_from(["float16", None])),
               "origin": None, "match": "name", "mode": "tensor", "exec_index": k, "judgement": "noise",
               "rel_err": draw(metric), "allowed": draw(metric)}
        for m in cr._METRIC_KEYS:
            row[m] = draw(metric)
        if row["kind"] == "scalar":
            row["golden"]["value"] = draw(st.sampled_from([1, [1, 2], "x"]))
        if "missing" in odd and draw(st.integers(0, 5)) == 0:
            del row[draw(st.sampled_from(["name", "rule", "golden"]))]
        out.append(row)
    return out


class _Stacks:
    def __init__(self):
        self.asked: list = []

    def __call__(self, row):
        self.asked.append(row.get("target_op_id"))
        return None if row.get("target_op_id") == 2 else [f"File a.py, line {row.get('target_op_id')}"]


def _both_ways(chunks: list[list[dict]], first: str, stacks: bool) -> int:
    """The cells of ``chunks`` made by ``TableCells.of`` alone, then by ``chunk_columns`` where it takes a
    chunk: the same cells, fills, first-divergence keys and stack lookups; the chunks taken by columns."""
    fd = {"fd": {"name": "op/a", "io": "output", "slot": 0, "step": 0}, "fd_empty": {"x": 1}}.get(first)
    doc = {"first_divergence": fd} if fd else None
    made = []
    taken = 0
    for how in ("rows", "columns", "given"):
        s = _Stacks() if stacks else None
        cells = cr.TableCells(doc, s, first_slot=SLOT if first == "slot" else None)
        out = []
        for chunk in chunks:
            before = (list(cells.keys), s and list(s.asked), cells.last_op)
            # ("given": the columns of the chunk's blocks, as a spool hands them over, two blocks or one)
            half = len(chunk) // 2
            blocks = [chunk[:half], chunk[half:]] if half else [chunk]
            given = tc.joined_columns([tc.block_columns(b) for b in blocks]) if how == "given" else None
            got = chunk_columns(cells, chunk, given) if how != "rows" else None
            if got is None:  # (left alone: nothing changed)
                assert (list(cells.keys), s and list(s.asked), cells.last_op) == before
                out.append([_row_of(c, v) for c, v in cells.of(chunk)])
                continue
            taken += how == "columns"
            cols, fills, types = got
            assert len(cols) == len(cr.COLUMNS) == len(types)
            assert {len(c) for c in cols} == {len(chunk)} == {len(fills)}
            for col, t in zip(cols, types):
                assert t is None or {type(v) for v in col} == {t}
            out.append([_row_of(list(r), f) for r, f in zip(zip(*cols), fills)])
        made.append((out, list(cells.keys), cells.spread, s and s.asked))
    assert made[0] == made[1] == made[2]
    return taken


@settings(max_examples=400, deadline=None)
@given(chunks=st.lists(rows(), min_size=1, max_size=3),
       first=st.sampled_from(["slot", "none", "fd", "fd_empty"]), stacks=st.booleans())
def test_columns_are_the_cells_of_rows(chunks, first, stacks):
    _both_ways(chunks, first, stacks)


def _row_of(cells, fill):
    return [_key(v) for v in cells], fill


def _plain_row(**kw) -> dict:
    row = {"name": "op/a", "io": "input", "slot": 0, "step": 0, "rank": 0, "kind": "tensor", "target_name": "op/a",
           "target_op_id": 1, "verdict": "pass", "rule": "pass", "type": "Add", "precision": "float16",
           "origin": None, "match": "name", "mode": "tensor", "exec_index": 0, "judgement": "noise",
           "rel_err": 0.1, "allowed": 0.2, **{m: 0.5 for m in cr._METRIC_KEYS},
           "golden": {"dtype": "float16", "shape": [2], "max": 1.0, "min": 0.0, "mean": 0.5, "l2norm": 1.0,
                      "file": "/g/Add.op_a.1.0.1"},
           "target": {"dtype": "float16", "shape": [2], "max": 1.0, "min": 0.0, "mean": 0.5, "l2norm": 1.0,
                      "file": "/t/Add.op_a.1.0.1"}}
    row.update(kw)
    return row


@pytest.mark.parametrize("text", TEXTS)
def test_each_text_in_a_plain_chunk(text):
    """A text to make inert (or that ``repr`` quotes otherwise) in a name, a target name, a file, a dtype,
    a rule among plain rows: the chunk is still made by columns, each cell as ``of`` makes it."""
    plain = _plain_row()
    odd = [_plain_row(name=text, target_name=text), _plain_row(target_name=text),
           _plain_row(golden=dict(plain["golden"], file=text or None), target=dict(plain["target"], file=text + "/f")),
           _plain_row(rule=text, type=text, golden=dict(plain["golden"], dtype=text))]
    for row in odd:
        assert _both_ways([[plain, row, plain]], "slot", True) == 1


def test_the_common_chunk_is_made_by_columns():
    row = _plain_row()
    got = chunk_columns(cr.TableCells(None, None, first_slot=SLOT), [row, dict(row, io="output")])
    assert got is not None
    cols, fills, types = got
    assert cols[cr._IX["Data_name"]] == ["['Add.op_a.1.0.1', 'Add.op_a.1.0.1']"] * 2
    assert cols[cr._IX["first_divergence"]] == [SLOT, SLOT] and fills == ["pass", "pass"]
    assert types[cr._IX["Cosine"]] is float and types[cr._IX["NPU Name"]] is str


def _parts_of(path) -> dict:
    import zipfile

    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def test_a_workbook_of_mixed_chunks_is_the_workbook_of_rows(tmp_path, monkeypatch):
    """An API dump's chunks interleave tensors and non-tensor arguments (made one or more table rows by
    ``of``): long runs of tensors are made by columns, the rest by ``of``, and the workbook's parts are the
    bytes of the rows made by ``of`` alone, deferred (``--json --output``) or not."""
    from dumpscope.core.engines.compare import table_file as tf

    rows = []
    for k in range(400):
        gap = (1, 3, 20, 40, 17)[k // 80]
        if k % gap == gap - 1:
            row = _plain_row(name=f"api{k}", kind="scalar", verdict=("pass", "error")[k % 2])
            row["golden"] = dict(row["golden"], value=[1, 2] if k % 3 else 7, max=None)
        else:
            row = _plain_row(name=f"op{k // 2}", io=("input", "output")[k % 2], cosine=k / 7,
                             verdict=("pass", "warning", "error")[k // 30 % 3])
            row["target"] = dict(row["target"], file=f"/t/Add.op{k // 2}.1.0.1", max=k * 1.5)
        rows.append(row)
    doc = {"rows": rows, "first_divergence": {"name": "op30", "io": "output", "slot": 0, "step": 0}}
    taken = []
    real = tf.chunk_columns
    monkeypatch.setattr(tf, "chunk_columns", lambda cells, part, *a: taken.append(len(part)) or real(cells, part, *a))

    def both(name: str) -> tuple[dict, dict]:
        deferred = tf.TableFile(None, str(tmp_path / f"{name}-d.xlsx"), None, deferred=True)
        for row in rows:
            deferred.add(row)
        assert deferred.close(doc) == tf.write_xlsx(doc, str(tmp_path / f"{name}.xlsx"))
        return _parts_of(tmp_path / f"{name}-d.xlsx"), _parts_of(tmp_path / f"{name}.xlsx")

    by_columns = both("columns")
    assert taken and min(taken) >= tf._COLUMN_RUN and sum(taken) < 2 * len(rows)
    monkeypatch.setattr(tf, "chunk_columns", lambda cells, part, *a: None)
    assert both("rows") == by_columns


def _csv_both_ways(tmp, chunks: list[list[dict]], doc: dict, deferred: bool) -> tuple[bytes, bytes]:
    """The CSV of ``chunks`` (each written as one chunk) by columns where ``chunk_columns`` takes a chunk,
    then by ``TableCells.of`` alone: (columns' bytes, rows' bytes)."""
    import os
    from unittest import mock

    from dumpscope.core.engines.compare import table_file as tf

    out = []
    for how in ("columns", "rows"):
        path = os.path.join(tmp, f"{how}-{deferred}.csv")
        with mock.patch.object(tf, "chunk_columns", tf.chunk_columns if how == "columns" else lambda *a, **k: None):
            try:
                table = tf.TableFile(None if deferred else doc, path, None, deferred=deferred)
                for chunk in chunks:
                    for row in chunk:
                        table.add(row)
                    table._write_held()  # (the chunk as drawn)
                table.close(doc)
            except cr.ExportError as exc:  # (a lone surrogate: the same one line either way)
                out.append(str(exc).replace(path, "PATH").encode())
                continue
        with open(path, "rb") as fh:
            out.append(fh.read())
    return out[0], out[1]


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(rows(), min_size=1, max_size=3), first=st.sampled_from(["none", "fd"]),
       deferred=st.booleans())
def test_a_csv_by_columns_is_the_csv_of_rows(chunks, first, deferred):
    """The CSV's lines of a chunk made by columns (``_CsvLines.of_columns``: floats spelled by column, -0.0,
    NaN, ±Inf, bools, numbers among texts) are the bytes of its rows made by ``of``, deferred or not."""
    import tempfile

    fd = {"name": "op/a", "io": "output", "slot": 0, "step": 0} if first == "fd" else None
    doc = {"rows": [r for c in chunks for r in c], "first_divergence": fd}
    with tempfile.TemporaryDirectory() as tmp:
        by_columns, by_rows = _csv_both_ways(tmp, chunks, doc, deferred)
    assert by_columns == by_rows


def test_a_plain_csv_chunk_is_spelled_by_columns(tmp_path, monkeypatch):
    """The common chunk (a CANN compare's) takes the column path in the CSV too, and odd values in it (-0.0,
    NaN, ±Inf, a bool, an int among floats, a text to quote) are spelled as the rows would spell them."""
    from dumpscope.core.engines.compare import table_file as tf

    odd = [_plain_row(cosine=-0.0), _plain_row(max_abs_err=math.nan, rel_err=math.inf, allowed=-math.inf),
           _plain_row(golden=dict(_plain_row()["golden"], requires_grad=True, max=2),
                      target=dict(_plain_row()["target"], requires_grad=False)),
           _plain_row(name='a,"b"', rule="x\ny")]
    chunk = [_plain_row(io=("input", "output")[k % 2], cosine=k / 3) for k in range(30)] + odd
    spelled = []
    monkeypatch.setattr(tf._CsvLines, "of_columns", lambda self, *a, real=tf._CsvLines.of_columns:
                        spelled.append(1) or real(self, *a))
    doc = {"rows": chunk, "first_divergence": None}
    by_columns, by_rows = _csv_both_ways(str(tmp_path), [chunk], doc, True)
    assert spelled and by_columns == by_rows
    assert b",-0.0," in by_rows and b", inf," in by_rows and b",True," in by_rows
