"""``tui.json_text.dumps`` prints exactly what ``json.dumps(_clean(doc), indent=1, ensure_ascii=False)`` prints."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

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
    return json.dumps(_clean(doc), indent=1, ensure_ascii=False)


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
    assert dumps(ODD) == _stdlib(ODD)


def test_a_compare_document_prints_the_same(tmp_path):
    from dumpscope.core.engines.compare import compare_dumps
    from dumpscope.core.query import open_query
    from test_compare_batched import _tree

    g = open_query(str(_tree(tmp_path / "g", "golden")), cache_directory=tmp_path / "cache")
    t = open_query(str(_tree(tmp_path / "t", "target")), cache_directory=tmp_path / "cache")
    doc = compare_dumps(g, t, workers=1)
    assert len(doc["rows"]) > 100
    assert dumps(doc) == _stdlib(doc)


@pytest.mark.parametrize("bad", [{"x": object()}, {(1, 2): 3}, [b"bytes"], {"s": {1, 2}}])
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
    doc = {"rows": [dict(ODD["rows"][0], i=i, name=f"net/Op-{i}") for i in range(500)], "tail": ODD}
    parts: list[str] = []
    dump(doc, parts.append)
    assert "".join(parts) == _stdlib(doc)
    assert len(parts) > 20 and max(map(len, parts)) < len("".join(parts)) // 10
