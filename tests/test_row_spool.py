"""``core.support.row_spool``: rows come back as JSON would give them back, whatever they hold, in
blocks read back whole."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpscope.core.support import row_spool
from dumpscope.core.support.row_spool import RowSpool, plain


def _text(v) -> str:
    """JSON text with NaN spelled, so NaN == NaN compares (the spool keeps NaN and ±Inf as they are)."""
    return json.dumps(v, allow_nan=True)


_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
                  st.text(max_size=12))
_value = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                                                      st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                      max_leaves=20)
_row = st.dictionaries(st.text(max_size=8), _value, max_size=8)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(_row, max_size=6))
def test_rows_come_back_as_json_gives_them_back(rows):
    spool = RowSpool()
    for r in rows:
        spool.append(plain(r))
    assert len(spool) == len(rows)
    got = list(spool)
    assert [_text(g) for g in got] == [_text(json.loads(_text(r))) for r in rows]
    assert all(type(g) is dict for g in got)
    spool.close()


def test_numpy_scalars_subclasses_and_tuples_in_a_row_come_back_plain():
    class Name(str):
        pass

    row = {"cosine": np.float32(0.5), "count": np.int64(3), "ok": np.bool_(True), "name": Name("conv"),
           "shape": (1, 2), "nested": {"max": np.float16(2.0), "pair": (np.float64(1.5), None)},
           "nan": np.float32("nan"), 3: "int key"}
    spool = RowSpool()
    spool.append(row)
    back = spool[0]
    assert back == {"cosine": 0.5, "count": 3, "ok": True, "name": "conv", "shape": [1, 2],
                    "nested": {"max": 2.0, "pair": [1.5, None]}, "nan": back["nan"], "3": "int key"}
    assert math.isnan(back["nan"])
    assert [type(back[k]) for k in ("cosine", "count", "ok", "name")] == [float, int, bool, str]


def test_numpy_scalars_between_plain_rows_come_back_plain():
    rows = [{"name": f"op{i}", "x": 0.5 * i, "shape": [1, i]} for i in range(5)]
    odd = {"name": "np", "x": np.float32(1.5), "g": {"max": np.float64(2.0), "n": np.int32(3)}}
    spool = RowSpool()
    spool.extend(rows[:3])
    spool.append(odd)
    spool.extend(rows[3:])
    back = list(spool)
    assert back[:3] == rows[:3] and back[4:] == rows[3:]
    assert back[3] == {"name": "np", "x": 1.5, "g": {"max": 2.0, "n": 3}}
    assert [type(v) for v in (back[3]["x"], back[3]["g"]["max"], back[3]["g"]["n"])] == [float, float, int]
    assert [spool[k] for k in range(len(spool))] == back


def test_rows_across_blocks_read_back_by_number_and_with_extra_fields():
    n = row_spool.BLOCK_ROWS * 3 + 7
    spool = RowSpool()
    shared = {"file": "a.py", "line": 3}
    for i in range(n):
        spool.append({"i": i, "source": shared if i % 2 else None, "name": "Ó/conv" if i % 5 == 0 else "x"})
    spool.extra.update(target_rank=1)
    assert [r["i"] for r in spool] == list(range(n))
    for k in (0, 1, row_spool.BLOCK_ROWS - 1, row_spool.BLOCK_ROWS, n - 1, -1):
        assert spool[k]["i"] == (k % n) and spool[k]["target_rank"] == 1
    assert spool[3]["source"] == shared and spool[4]["source"] is None
    spool.append({"i": n})  # appended after a read: a new block
    assert len(spool) == n + 1 and spool[n] == {"i": n, "target_rank": 1} and list(spool)[-2]["i"] == n - 1


@pytest.mark.parametrize("printed", [False, True])
def test_the_sink_sees_each_block_before_it_is_stored_or_read(monkeypatch, printed):
    """``sink`` is handed the rows a block at a time, in order, each row once, before the block is stored: what
    it changes is stored; a read (or ``finish_block``) hands over the open block first; a row stored is
    stored as it was when its block was (changed later, nothing stored changes)."""
    from dumpscope.core.support import row_spool
    from dumpscope.tui.json_text import row_block_text

    monkeypatch.setattr(row_spool, "BLOCK_ROWS", 4)
    seen: list[list[int]] = []

    def sink(rows):
        seen.append([r["k"] for r in rows])
        for r in rows:
            r["sunk"] = True

    spool = row_spool.PrintedRows(row_block_text, sink) if printed else RowSpool(sink)
    made = [{"k": k} for k in range(10)]
    spool.extend(made[:6])
    spool.append(made[6])
    assert seen == [[0, 1, 2, 3]]
    assert spool[5] == {"k": 5, "sunk": True}  # (a read: the open block handed over first)
    assert seen == [[0, 1, 2, 3], [4, 5, 6]]
    for row in made[7:]:
        spool.append(row)
    spool.finish_block()
    assert seen == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    made[0]["k"] = -1
    assert [r["k"] for r in spool] == list(range(10)) and all(r["sunk"] for r in spool)


def test_printed_rows_are_copied_into_the_document_as_the_listed_rows_print():
    """``PrintedRows`` keeps blocks of text; the JSON printer copies them, byte for byte what it prints for
    the same rows in a list (NaN, ±Inf, escapes, an unpaired surrogate, a numpy scalar, nested values);
    read back as dicts they are what the document shows (NaN as "nan")."""
    from dumpscope.tui import json_text

    rows = [{"name": f"op\u0007{i}\ud800", "cosine": float("nan") if i == 3 else 1.0 - i / 7,
             "rank": i, "golden": {"shape": [1, i], "max": float("inf") if i == 5 else np.float32(0.5)},
             "source": None if i % 2 else {"file": "a.py", "line": i}, "ok": i % 3 == 0}
            for i in range(row_spool.BLOCK_ROWS + 9)]
    printed = row_spool.PrintedRows(json_text.row_block_text)
    printed.extend(rows)
    doc = {"rows": printed, "first_divergence": None}
    text = json_text.dumps(doc)
    assert text == json_text.dumps({"rows": rows, "first_divergence": None})
    assert row_spool.printed_parts(printed) is not None
    back = list(printed)
    assert back[3]["cosine"] == "nan" and back[5]["golden"]["max"] == "inf" and back[4]["rank"] == 4
    assert json.loads(text.replace('"nan"', "null"))["rows"][7] == json.loads(json.dumps(back[7]))
    printed.extra.update(target_rank=1)  # keys added as the rows are read: printed from the dicts instead
    assert row_spool.printed_parts(printed) is None
    assert json.loads(json_text.dumps({"rows": printed}))["rows"][0]["target_rank"] == 1


def _printed_doc() -> tuple[dict, list]:
    from dumpscope.tui import json_text

    rows = [{"name": f"op\u0007{i}\ud800\u202e", "rule": f"rel err {i} \u2264 0.01", "cosine": float("nan") if i == 3
             else 1.0 - i / 7, "rank": i} for i in range(2 * row_spool.BLOCK_ROWS + 5)]
    printed = row_spool.PrintedRows(json_text.row_block_text)
    printed.extend(rows)
    return {"rows": printed, "first_divergence": None, "note": "end \u2264"}, rows


def test_print_json_copies_printed_rows_to_a_utf8_byte_stream_as_the_text_path_prints_them(monkeypatch):
    """``print_json`` to a UTF-8 stream with a byte buffer copies the stored blocks as bytes (no decoding,
    no encoding again), after what was written as text before it: the same bytes as the text path (a
    stream with no buffer) writes, encoded, for rows with a lone surrogate, bidi controls and a "≤"."""
    import io
    import sys

    from dumpscope.tui import json_text
    from dumpscope.tui.cli import output

    doc, rows = _printed_doc()
    text_out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", text_out)
    output.print_json(doc)
    copied: list[bool] = []
    real = row_spool.PrintedRows.printed_blocks
    monkeypatch.setattr(row_spool.PrintedRows, "printed_blocks",
                        lambda self, as_bytes=False: (copied.append(as_bytes), real(self, as_bytes))[1])
    binary = io.BytesIO()
    stream = io.TextIOWrapper(binary, encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", stream)
    stream.write("before\n")  # pending in the text layer: must come out first
    output.print_json(doc)
    stream.flush()
    assert copied == [True]
    assert binary.getvalue() == ("before\n" + text_out.getvalue()).encode("utf-8")
    assert text_out.getvalue() == json_text.dumps({**doc, "rows": rows}) + "\n"
    back = json.loads(text_out.getvalue())
    assert back["rows"][1]["name"] == rows[1]["name"] and "\\ud800" in text_out.getvalue()


def test_a_lone_surrogate_is_written_as_its_json_escape_on_a_strict_utf8_stream(monkeypatch):
    """A name holding an unpaired surrogate (a "\\ud800" escape in an msprobe dump.json) made ``--json``
    fail writing it raw to a UTF-8 stream; it is written as the JSON escape that reads back the same."""
    import io
    import sys

    from dumpscope.tui.cli import output

    for doc in ({"name": "a\ud800b"}, _printed_doc()[0]):
        binary = io.BytesIO()
        monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(binary, encoding="utf-8", errors="strict"))
        output.print_json(doc)
        sys.stdout.flush()
        text = binary.getvalue().decode("utf-8")  # strict: valid UTF-8
        assert "\\ud800" in text and json.loads(text)["rows" if "rows" in doc else "name"]
    assert json.loads(binary.getvalue())["rows"][0]["name"] == "op\u00070\ud800\u202e"
