"""``core.support.row_spool``: rows come back as JSON would give them back, whatever they hold, and the
file is read with a loader that can build nothing but plain values."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

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


def test_a_row_of_plain_values_is_pickled_as_it_is_and_any_object_stops_the_pickler():
    """The fast path stores a plain row's own pickle (whatever bytes its strings and floats make); a numpy
    scalar anywhere in it sends the row through ``plain`` (else it would come back as a numpy object,
    or not at all: the loader refuses the global it needs)."""
    row = {"name": "Ó/conv2d", "file": "/dump/Ó.npy", "x": 1.25, "shape": [1, 3], "g": {"max": -7.5e-3}}
    enc = row_spool._Encoder()
    assert enc(row) == pickle.dumps(row, protocol=5)
    assert enc({"a": np.float32(1.5)}) == pickle.dumps({"a": 1.5}, protocol=5)
    assert enc(row) == pickle.dumps(row, protocol=5)  # (the pickler's memo does not carry over)
    spool = RowSpool()
    spool.append(row)
    spool.append({"name": "plain"})
    assert list(spool) == [row, {"name": "plain"}]


def test_groups_and_extra_fields(tmp_path):
    spool = RowSpool()
    for op in range(3):
        assert spool.start_group() == op
        for j in range(op + 1):
            spool.append({"op": op, "j": j})
    spool.extra.update(target_rank=1)
    assert [(r["op"], r["j"], r["target_rank"]) for r in spool] == [(0, 0, 1), (1, 0, 1), (1, 1, 1), (2, 0, 1),
                                                                     (2, 1, 1), (2, 2, 1)]
    assert spool[4] == {"op": 2, "j": 1, "target_rank": 1} and spool[-1]["j"] == 2


class _Evil:
    def __reduce__(self):
        import os

        return os.mkdir, (str(_Evil.target),)


def test_the_loader_builds_no_object_and_calls_nothing(tmp_path: Path):
    """Bytes that would call a function when unpickled (here: make a folder) are refused."""
    _Evil.target = tmp_path / "made"
    data = pickle.dumps({"row": _Evil()}, protocol=5)
    try:
        row_spool._decode(data)
    except pickle.UnpicklingError as exc:
        assert "refused" in str(exc)
    else:
        raise AssertionError("a global was loaded")
    assert not _Evil.target.exists()
    assert pickle.loads(data) is not None and _Evil.target.exists()  # (what the plain loader would have done)
