"""``DumpQuery.ops`` shares its few-valued strings (graph, type, producer, folder, kind …) between rows:
the same values as one row read alone, one object per distinct value (compare holds both sides' ops)."""

from __future__ import annotations

import dataclasses

from conftest import unpack_data

from dumpscope.core.query import rows as Q
from dumpscope.core.query import open_query


def test_ops_share_few_valued_strings_and_keep_every_value(tmp_path_factory):
    q = open_query(str(unpack_data(tmp_path_factory, "real_ms210_nan") / "nan"))
    ops = q.ops(kind="all")
    assert len(ops) > 10
    for op in ops:  # the same values as each row read on its own
        assert dataclasses.astuple(op) == dataclasses.astuple(q.op_by_id(op.id))
    cols = [c.strip() for c in Q.OP_COLS.split(",")]
    for i in Q.FEW_VALUED:
        name = cols[i]
        values = [getattr(op, name) for op in ops if getattr(op, name) is not None]
        if values:
            assert len({id(v) for v in values}) == len(set(values)), name  # one object per distinct value
    assert {"graph", "type", "producer", "folder", "kind"} <= {cols[i] for i in Q.FEW_VALUED}


def test_tensors_share_equal_strings_and_shapes_and_keep_every_value(tmp_path_factory):
    """``tensors_of`` (compare's read) gives each op the tensors ``tensors`` gives, each equal dtype, format,
    io and shape one object (pickled to compare's pool as a reference to the first)."""
    q = open_query(str(unpack_data(tmp_path_factory, "real_ms210_nan") / "nan"))
    ops = q.ops(kind="all")
    every = q.tensors_of([op.id for op in ops])
    tensors = [t for op in ops for t in every[op.id]]
    assert len(tensors) > 10
    for op in ops:
        assert [dataclasses.astuple(t) for t in every[op.id]] == [dataclasses.astuple(t) for t in q.tensors(op.id)]
    for name in ("io", "dtype", "format", "stored_dtype", "storage", "producer", "shape", "device_shape"):
        values = [getattr(t, name) for t in tensors]
        assert len({id(v) for v in values}) == len(set(values)), name


def test_a_unit_text_without_statistics_is_decoded_once_and_each_tensor_keeps_its_own_extras(tmp_path_factory,
                                                                                               monkeypatch):
    """MindSpore's npy units repeat their packed text (one per tensor description): ``tensors_of`` decodes
    such a text once (``rows._PLAIN_TEXTS``); a text with statistics or extras is decoded for each unit; every
    op gets what ``tensors`` gives, and no two tensors share a dict."""
    q = open_query(str(unpack_data(tmp_path_factory, "real_ms210_nan") / "nan"))
    ops = q.ops(kind="all")
    units = q.index.query("SELECT tensors FROM units")
    assert len({t for (t,) in units}) < len(units) / 2  # the real dump repeats its texts
    decoded: list[int] = []
    real = Q.json.loads
    monkeypatch.setattr(Q.json, "loads", lambda text: decoded.append(len(got := real(text))) or got)
    Q._PLAIN_TEXTS.clear()
    first = q.tensors_of([op.id for op in ops])
    assert sum(decoded) == len(units)
    decoded.clear()
    again = q.tensors_of([op.id for op in ops])
    plain = sum(all(e[10] is None and not e[11] for e in real(t)) for (t,) in units)
    assert 0 < plain and sum(decoded) == len(units) - plain  # only the units with statistics or extras
    monkeypatch.undo()
    tensors = [t for op in ops for t in again[op.id]]
    for op in ops:
        want = [dataclasses.astuple(t) for t in q.tensors(op.id)]
        assert [dataclasses.astuple(t) for t in again[op.id]] == want == [dataclasses.astuple(t) for t in first[op.id]]
    assert len({id(t.extra) for t in tensors}) == len(tensors)
    stats = [t.stats for t in tensors if t.stats is not None]
    assert len({id(s) for s in stats}) == len(stats)
    monkeypatch.setattr(Q, "_PLAIN_TEXT_CHARS", 0)  # no text short enough: none kept (memory stays bounded)
    Q._PLAIN_TEXTS.clear()
    q.tensors_of([op.id for op in ops])
    assert Q._PLAIN_TEXTS == {}
