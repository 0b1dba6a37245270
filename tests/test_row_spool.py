"""``core.support.row_spool``: rows come back as JSON would give them back, whatever they hold, in
blocks read back whole."""

from __future__ import annotations

import json
import math

import numpy as np
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


def test_a_row_changed_after_it_is_appended_is_stored_as_it_was():
    row = {"verdict": "pass", "side": {"max": 1.0}}
    spool = RowSpool()
    spool.append(row)
    row["verdict"] = "error"
    row["side"]["max"] = 9.0
    assert spool[0] == {"verdict": "pass", "side": {"max": 1.0}}


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
