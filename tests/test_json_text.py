"""``tui.json_text.dumps`` prints exactly what ``json_safe(json.dumps(_clean(doc), indent=1, ensure_ascii=False))``
prints: the escaping of DEL/C1/bidi controls done string by string equals one pass over the whole text."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dumpscope.core.inert import json_safe
from dumpscope.tui.json_text import dumps


class _Str(str):
    pass


class _Float(float):
    pass


class _Int(int):
    pass


def _clean(value):
    """The oracle: JSON has no NaN/Infinity, the document spells them as strings (the stdlib way, slow)."""
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return _clean(value.item())
        except Exception:
            return str(value)
    return value


def _stdlib(doc):
    """The oracle: the standard library's text, DEL/C1/bidi controls escaped over the whole of it."""
    return json_safe(json.dumps(_clean(doc), indent=1, ensure_ascii=False))


def _same(got: str, want: str) -> None:
    """``got == want``, told by the first difference (pytest's diff of two 60 kB texts takes minutes)."""
    if got != want:
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        pytest.fail(f"{len(got)} vs {len(want)} characters, first difference at {at}: "
                    f"{got[max(0, at - 60):at + 60]!r} != {want[max(0, at - 60):at + 60]!r}")


ODD = {
    "rows": [{"name": "net/Conv2D-op1", "cosine": 0.9999999999999999, "max": -0.0, "shape": [1, 16, 0], "none": None,
              "flags": [True, False], "nested": {"empty_d": {}, "empty_l": [], "tuple": (1, (2, 3))}}],
    "specials": [float("nan"), float("inf"), -float("inf"), np.float64("nan"), np.float64("-inf"), np.float32(1.5),
                 np.float16(2), np.int64(-3), np.uint8(7), np.bool_(True), np.array([1, 2]), np.array(3.0)],
    "text": ["é", "\x1b[31m", "\u2028", "\x7f\x85", '"quoted" \\ back', "日本"],
    "numbers": [0, -1, 10 ** 30, 1e300, 5e-324, 1.0, 123456789.125],
    "subclasses": [_Str("s"), _Float(2.5), _Float("nan"), _Int(7)],
    1.5: "float key", 2: "int key", None: "none key", True: "bool key", float("nan"): "nan key", _Str("k"): 1,
}


def test_odd_document_prints_the_same():
    _same(dumps(ODD), _stdlib(ODD))


def test_a_compare_document_prints_the_same(tmp_path):
    from dumpscope.core.engines.compare import compare_dumps
    from test_compare_batched import _pair_queries

    g, t = _pair_queries(tmp_path)
    doc = compare_dumps(g, t, workers=1)
    assert len(doc["rows"]) > 100
    _same(dumps(doc), _stdlib(doc))


class _SameAsA:
    """No JSON value, but equal to "a" (and hashed as it): a column of "a" must not take it for one."""

    def __eq__(self, other):
        return other == "a"

    def __hash__(self):
        return hash("a")


@pytest.mark.parametrize("bad", [{"x": object()}, {(1, 2): 3}, [b"bytes"], {"s": {1, 2}},
                                 [{"s": "a"}] * 5 + [{"s": _SameAsA()}] + [{"s": "a"}] * 5,
                                 # rows printed column by column: still the first refused value of the text
                                 [{"a": 1, "b": object()}] + [{"a": b"x", "b": 2}] * 9])
def test_what_json_refuses_is_refused_the_same_way(bad):
    with pytest.raises(TypeError) as want:
        _stdlib(bad)
    with pytest.raises(TypeError) as got:
        dumps(bad)
    assert str(got.value) == str(want.value)


def test_dump_in_parts_writes_the_same_text_and_never_holds_it_whole(tmp_path, monkeypatch):
    """``dump`` hands the text on in parts (a big compare document is never whole in memory)."""
    from dumpscope.tui import json_text
    from dumpscope.tui.json_text import dump

    monkeypatch.setattr(json_text, "_FLUSH_PIECES", 64)
    monkeypatch.setattr(json_text, "_CHUNK", 16)  # rows printed column by column: 16 at a time
    doc = {"rows": [dict(ODD["rows"][0], i=i, name=f"net/Op-{i}") for i in range(500)], "tail": ODD}
    parts: list[str] = []
    dump(doc, parts.append)
    _same("".join(parts), _stdlib(doc))
    assert len(parts) > 20 and max(map(len, parts)) < len("".join(parts)) // 10


# -- property tests: any document of the kinds the CLI prints ----------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())  # surrogates too
_TEXT = st.one_of(
    st.text(_ANY_CHAR, max_size=12),
    st.sampled_from(["", "é", "日本", "\x00", "\x1b[31m", "\u2028", "\x7f\x85", '"q" \\ /', "\ud800", "NaN", "Infinity",
                     "net/Conv2D-op1", "[1, 2]", "{}"]),
)
_FLOAT = st.one_of(st.floats(), st.sampled_from([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 5e-324, 1e300]))
_INT = st.one_of(st.integers(), st.integers(min_value=-10 ** 40, max_value=10 ** 40), st.sampled_from([0, -1, 2 ** 63, 10 ** 300]))


def _np(kind):
    def make(x):
        with np.errstate(over="ignore", invalid="ignore"):
            return kind(x)
    return make


_NUMPY = st.one_of(
    _FLOAT.map(_np(np.float64)), _FLOAT.map(_np(np.float32)), _FLOAT.map(_np(np.float16)),
    st.integers(-128, 127).map(np.int8), st.integers(0, 2 ** 64 - 1).map(np.uint64),
    st.integers(-2 ** 63, 2 ** 63 - 1).map(np.int64), st.integers(0, 65535).map(np.uint16), st.booleans().map(np.bool_),
)
_SUBCLASSED = st.one_of(_TEXT.map(_Str), _FLOAT.map(_Float), _INT.map(_Int))
_LEAF = st.one_of(_TEXT, _FLOAT, _INT, st.booleans(), st.none(), _NUMPY, _SUBCLASSED)
_KEY = st.one_of(_TEXT, _TEXT, st.integers(-3, 3), st.sampled_from([1.5, -0.0, float("nan"), float("inf")]), st.booleans(),
                 st.none(), _TEXT.map(_Str))


class _Dict(dict):
    pass


def _containers(children):
    lists = st.lists(children, max_size=12)
    dicts = st.dictionaries(_KEY, children, max_size=10)
    return st.one_of(lists, lists.map(tuple), dicts, dicts.map(_Dict),
                     st.lists(_LEAF, min_size=8, max_size=40))  # long enough for the C encoder


_DOC = st.recursive(_LEAF, _containers, max_leaves=60)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DOC)
def test_any_document_prints_as_the_standard_library_prints_it_cleaned(doc):
    want = _stdlib(doc)
    _same(dumps(doc), want)
    parts: list[str] = []
    from dumpscope.tui.json_text import dump

    dump(doc, parts.append)
    _same("".join(parts), want)


_ROW_LEAF = st.one_of(_TEXT, _FLOAT, _INT, st.booleans(), st.none())
_ROW = st.dictionaries(_TEXT, st.one_of(_ROW_LEAF, st.lists(_ROW_LEAF, max_size=10),
                                        st.dictionaries(_TEXT, _ROW_LEAF, max_size=5)), max_size=8)


@settings(max_examples=100, deadline=None)
@given(st.lists(_ROW, max_size=12))
def test_rows_read_back_from_a_spool_print_as_a_list(rows):
    from dumpscope.core.support.row_spool import RowSpool

    spool = RowSpool()
    spool.extend(rows)
    doc = {"rows": spool, "n": len(rows)}
    _same(dumps(doc), _stdlib({"rows": list(spool), "n": len(rows)}))
    _same(dumps(doc), _stdlib({"rows": rows, "n": len(rows)}))


def test_equal_keys_of_other_types_keep_their_own_text():
    """1, 1.0 and True are one dict key and one key tuple, but json spells them "1", "1.0", "true": the
    key prefixes are remembered per tuple of ``str`` keys only."""
    docs = [{"1": 0}, {1: 0}, {1.0: 0}, {True: 0}, {"1": 0}, {True: 0, "a": [0] * 9}, {1: 0, "a": [0] * 9}]
    for doc in docs * 2:
        _same(dumps([doc, doc]), _stdlib([doc, doc]))
    table = [{"a": 0, 1: 0}, {"a": 0, True: 0}, {"a": 0, 1.0: 0}] * 6  # equal key tuples, printed column-wise?
    _same(dumps(table), _stdlib(table))


_ROW = {"name": "net/Conv2D-op1", "io": "input", "slot": 0, "cosine": 0.9999999999999999, "verdict": "pass",
        "origin": None, "share_of_allowed": float("nan"), "flag": True,
        "golden": {"dtype": "float16", "shape": [1, 16, 8, 8], "max": 3.06640625, "file": "/d/a.1.0"},
        "target": {"dtype": "float16", "shape": [1, 16, 8, 8], "max": 3.06640625, "file": "/d/a.1.0"},
        "source": None}


def _rows(n):
    return [dict(_ROW, slot=i, golden=dict(_ROW["golden"]), target=dict(_ROW["target"]),
                 origin=None if i % 3 else "net/Relu-op2", share_of_allowed=float(i) if i % 5 else float("nan"),
                 cosine=-float("inf") if i == 7 else 1 / (i + 1))
            for i in range(n)]


def test_compare_rows_are_printed_column_by_column(monkeypatch):
    """The rows of a compare (one tuple of keys, leaves of one type or a few per key, golden/target dicts
    with a shape) take the fast path: one map per key over a chunk of rows, not a Python step per value."""
    from dumpscope.tui import json_text

    monkeypatch.setattr(json_text, "_CHUNK", 256)
    rows = _rows(600)
    before = json_text.column_chunks
    _same(dumps({"rows": rows}), _stdlib({"rows": rows}))
    assert json_text.column_chunks == before + 3  # 256 + 256 + 88 rows


def test_key_prefixes_are_built_once_per_key_tuple():
    """A dict printed one step per value (a document of one row) finds its key prefixes by its key
    tuple: built once for the row's keys and once for golden/target's, not once per row."""
    from dumpscope.tui import json_text

    built: list[tuple] = []
    real = json_text._prefixes

    def counting(keys, inner):
        built.append(tuple(keys))
        return real(keys, inner)

    json_text._PLANS.clear()
    try:
        json_text._prefixes = counting
        for row in _rows(200):
            _same(dumps(row), _stdlib(row))
    finally:
        json_text._prefixes = real
    assert sorted(built) == sorted([tuple(_ROW), tuple(_ROW["golden"])])


_COLUMN_KINDS = [_TEXT, _FLOAT, _INT, st.none(), st.booleans(), st.one_of(_TEXT, st.none()), st.one_of(_FLOAT, st.none()),
                 _ROW_LEAF, st.lists(_INT, max_size=5), st.lists(_ROW_LEAF, max_size=10), _LEAF, _SUBCLASSED,
                 st.dictionaries(_TEXT, _ROW_LEAF, max_size=3), st.lists(_ROW_LEAF, max_size=3).map(tuple),
                 st.lists(st.fixed_dictionaries({"io": _TEXT, "shape": st.lists(_INT, max_size=3), "slot": _ROW_LEAF}),
                          max_size=4),  # an op's tensors
                 st.lists(st.one_of(st.dictionaries(_TEXT, _ROW_LEAF, max_size=2), _ROW_LEAF), max_size=3)]


#: strings that repeat (each printed once a chunk: ``_str_texts``), escaped ones and ``%`` among them
_REPEATED = st.sampled_from(["float16", "a%sb", "%", "\x7f", "é\u2028", "/d/Op.1.0", "≤ 0.5"])
#: a column of dicts inside a column of dicts (a row's golden/target with a dict of their own), keys with ``%``
_NESTED_KINDS = [_REPEATED, st.one_of(_REPEATED, st.none()),
                 st.fixed_dictionaries({"%s": _ROW_LEAF, "d": st.fixed_dictionaries({"x%": _FLOAT, "y": _REPEATED})}),
                 st.fixed_dictionaries({"%(a)s": _REPEATED, "100%": st.one_of(_FLOAT, st.none())})]


@st.composite
def _table(draw):
    """A list of dicts sharing a tuple of keys (sometimes not), each key's values of one kind: rows."""
    key = st.one_of(_TEXT, _KEY) if draw(st.integers(0, 4)) == 0 else _TEXT  # keys: str, now and then others
    keys = draw(st.lists(key, min_size=0, max_size=6, unique_by=lambda k: (type(k), repr(k))))
    kinds = [draw(st.sampled_from(_COLUMN_KINDS)) for _ in keys]
    nested_keys = draw(st.lists(_TEXT, min_size=0, max_size=4, unique=True))
    nested_kinds = [draw(st.sampled_from(_COLUMN_KINDS[:8] + _NESTED_KINDS)) for _ in nested_keys]
    nested = draw(st.sampled_from(["always", "never", "sometimes"]))
    n = draw(st.integers(0, 40))
    rows = []
    for _ in range(n):
        row = {k: draw(kind) for k, kind in zip(keys, kinds)}
        if nested == "always" or nested == "sometimes" and draw(st.booleans()):
            row["nested"] = {k: draw(kind) for k, kind in zip(nested_keys, nested_kinds)}
        rows.append(row)
    if rows and draw(st.integers(0, 9)) == 0:
        rows[draw(st.integers(0, len(rows) - 1))] = draw(_DOC)  # now and then one that is not like the others
    return rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_table())
def test_any_table_of_rows_prints_as_the_standard_library_prints_it_cleaned(rows):
    want = _stdlib({"rows": rows})
    _same(dumps({"rows": rows}), want)
    from dumpscope.core.support.row_spool import RowSpool

    if all(type(r) is dict for r in rows):
        spool = RowSpool()
        spool.extend(rows)
        _same(dumps({"rows": spool}), _stdlib({"rows": list(spool)}))


def test_a_rows_dicts_of_dicts_are_printed_in_its_template(monkeypatch):
    """A compare row's golden and target (dicts sharing keys, one with a dict of its own) are printed in
    the row's one template: their keys (``%`` in them) and values where they belong, one ``%`` a row;
    a column whose first value is a float or a string and another is not (None) by the types of all."""
    from dumpscope.tui import json_text

    monkeypatch.setattr(json_text, "_CHUNK", 256)

    def side(i):
        return {"dtype": "float16" if i % 3 else "bf%16", "shape": [1, i % 4], "max%": 1 / (i + 1) if i % 7 else None,
                "file": f"/d/Op.{i // 2}.0", "inner": {"%s": i, "%(x)s": "≤" if i % 2 else None, "f": i * 0.5}}

    rows = [{"name%d": f"net/Op-{i // 2}", "cosine": 1 / (i + 3), "golden": side(i), "target": side(i + 1),
             "rule": None if i == 5 else "pass (rel err ≤ 0.5%)", "x": float("nan") if i == 9 else 0.25}
            for i in range(300)]
    before, chunks = json_text.spliced_columns, json_text.column_chunks
    _same(dumps({"rows": rows}), _stdlib({"rows": rows}))
    assert json_text.spliced_columns == before + 2 * 2 * 2  # golden, target and their inner: 2 chunks
    assert json_text.column_chunks == chunks + 2  # not one row at a time after a failed template


def test_columns_of_one_text_are_printed_in_the_template(monkeypatch):
    """A column whose rows all print the same text (a compare's mode, dtype, null source) becomes part of
    the rows' template: ``%`` in it, a dict whose columns all fold, a column equal at both ends but not
    between, an op's tensors (the template path of ``_dicts_text``) keep their texts."""
    from dumpscope.tui import json_text

    monkeypatch.setattr(json_text, "_CHUNK", 256)

    def tensor(i, j):
        return {"io": "%s", "dtype": "50%", "slot": j, "none": None, "shape": [1, 2]}

    rows = [{"mode": "tensor %s %%", "i": i, "same": 0, "ends": 1 if i in (0, 255, 256, 299) else 2, "none": None,
             "golden": {"dtype": "float16", "v": None, "x%": 1.5}, "target": {"dtype": "%(a)s", "v": i % 2 or None},
             "tensors": [tensor(i, j) for j in range(3)], "flag": True, "f": 0.25, "nan": float("nan")}
            for i in range(300)]
    before, chunks = json_text.folded_columns, json_text.column_chunks
    _same(dumps({"rows": rows}), _stdlib({"rows": rows}))
    _same(dumps({"ops": rows[:3], "x": rows[5:17]}), _stdlib({"ops": rows[:3], "x": rows[5:17]}))
    assert json_text.column_chunks == chunks + 2 + 1  # 256 + 44 rows, then rows 5-16 (rows 0-2: one by one)
    assert json_text.folded_columns > before + 2 * 10


def test_columns_of_repeated_floats_print_each_value_as_itself(monkeypatch):
    """Columns of few distinct floats print as the standard library prints them: 0.0 and -0.0, NaN and
    ±Inf, numpy and subclassed floats equal to plain ones keep their own texts (and ints or bools equal
    to a float in a column of floats are no floats)."""
    from dumpscope.tui import json_text

    monkeypatch.setattr(json_text, "_CHUNK", 256)
    nan = float("nan")
    columns = {"ones": [1.0, 1.0, 0.5], "zeros": [0.0, -0.0, 1.0, 0.0], "late_zero": [2.0] * 20 + [-0.0],
               "nan": [nan, 1.5, float("nan"), -float("inf")], "numpy": [np.float64(2.5), 2.5, np.float64(-0.0)],
               "sub": [_Float(0.1), 0.1, _Float("nan")], "pairs": [k // 2 / 3 for k in range(40)]}
    rows = [{k: v[i % len(v)] for k, v in columns.items()} for i in range(300)]
    mixed = [{"f": [1.0, 1, 2.0, True, 2][i % 5], "s": "a" if i % 3 else _Str("a")} for i in range(40)]
    _same(dumps({"rows": mixed}), _stdlib({"rows": mixed}))  # 1, 2 and True: not printed as 1.0 and 2.0
    _same(dumps({"rows": rows}), _stdlib({"rows": rows}))


def test_a_column_of_one_float_is_printed_once_and_only_when_every_row_prints_it(monkeypatch):
    """A chunk's column of one float (identical pairs' cosines and errors, a dtype's allowed error) is
    printed once into the template; one that merely compares equal throughout is not: a -0.0 among
    zeros, an int or a bool among floats, a float subclass, NaNs that are different objects."""
    from dumpscope.tui import json_text

    monkeypatch.setattr(json_text, "_CHUNK", 64)
    nan = float("nan")
    near = {"zeros": [0.0] * 63 + [-0.0], "ints": [1.0] * 63 + [1], "bools": [True] + [1.0] * 63,
            "sub": [_Float(0.5)] + [0.5] * 63, "nans": [float("nan") for _ in range(64)],
            "np": [np.float64(2.5)] * 64}
    one = {"one": [1.0] * 64, "zero": [0.0] * 64, "negzero": [-0.0] * 64, "nan": [nan] * 64, "inf": [-math.inf] * 64,
           "tiny": [5e-324] * 64}
    for columns in (near, one):
        rows = [{k: v[i] for k, v in columns.items()} for i in range(64)]
        before = json_text.folded_columns
        _same(dumps({"rows": rows}), _stdlib({"rows": rows}))
        assert json_text.folded_columns - before == (len(one) if columns is one else 3)  # (nans, np, sub: by text)
    assert [k for k, v in {**near, **one}.items() if json_text._one_float(tuple(v))] == \
        ["one", "zero", "nan", "inf", "tiny"]  # (-0.0 throughout: by its text)


def test_a_long_list_of_leaves_is_printed_by_the_c_encoder_and_nan_by_the_python_writer(monkeypatch):
    from dumpscope.tui import json_text
    from dumpscope.tui.json_text import dump

    values = [i / 7 for i in range(1000)] + [1, None, True, "x"]
    before = json_text.c_slices
    _same(dumps({"v": values}), _stdlib({"v": values}))
    assert json_text.c_slices == before + 1
    with_nan = values[:500] + [float("nan")] + values[500:]
    _same(dumps({"v": with_nan}), _stdlib({"v": with_nan}))
    assert json_text.c_slices == before + 1  # NaN: not the C encoder (it would print NaN)

    monkeypatch.setattr(json_text, "_C_LIST_SLICE", 64)  # a long list: in slices, handed on in parts
    parts: list[str] = []
    dump({"v": with_nan * 4}, parts.append)
    _same("".join(parts), _stdlib({"v": with_nan * 4}))
    assert len(parts) > 50 and max(map(len, parts)) < len("".join(parts)) // 20


def test_dump_hands_rows_printed_column_by_column_on_in_parts(monkeypatch):
    from dumpscope.tui import json_text
    from dumpscope.tui.json_text import dump

    monkeypatch.setattr(json_text, "_CHUNK", 50)
    rows = _rows(2000)
    before = json_text.column_chunks
    parts: list[str] = []
    dump({"rows": rows, "n": 2000}, parts.append)
    _same("".join(parts), _stdlib({"rows": rows, "n": 2000}))
    assert json_text.column_chunks == before + 40
    assert len(parts) >= 40 and max(map(len, parts)) < len("".join(parts)) // 20


def test_ops_and_their_tensors_are_printed_column_by_column(monkeypatch):
    """``ops --json``: each op a dict, its tensors a list of dicts; all the chunk's tensors are printed
    column by column together, then put back in their lists (an op without tensors: [])."""
    from dumpscope.tui import json_text

    def tensor(i, j):
        return {"dtype": "float32", "io": "input" if j else "output", "shape": [2, j + 1, 8][: j + 1], "slot": j,
                "file": f"/d/Op.{i}.{j}.npy", "value": None if j else 0.5}

    monkeypatch.setattr(json_text, "_CHUNK", 256)
    ops = [{"name": f"net/Op-op{i}", "exec_index": i, "tensors": [tensor(i, j) for j in range(i % 4)]} for i in range(300)]
    real = json_text._dicts_parts
    sizes: list[int] = []

    def spying(ds, nl):
        sizes.append(len(ds))
        return real(ds, nl)

    json_text._dicts_parts = spying
    try:
        _same(dumps({"ops": ops}), _stdlib({"ops": ops}))
    finally:
        json_text._dicts_parts = real
    assert sizes == [256, 384, 44, 66]  # ops 0-255 and their 384 tensors, then ops 256-299 and theirs


def test_rows_of_nothing_but_none_or_empty():
    for rows in ([{"a": None}] * 10, [{"a": None, "b": None}] * 300, [{}] * 10, [{"a": {}}] * 10, [{"a": []}] * 10):
        _same(dumps({"rows": rows}), _stdlib({"rows": rows}))
