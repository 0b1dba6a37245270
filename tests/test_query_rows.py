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
