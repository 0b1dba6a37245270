"""A per-op statistics CSV is stored as one unit (like a CANN dump file) and its places are finalized in SQL;
the ops, tensors and merges with payload files are what the one-row-per-unit Python path gave."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from conftest import SAMPLES
from dumpscope.core.index import finalize as fin
from dumpscope.core.index import plain_places
from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.query import DumpQuery
from synth.job_tree import write_cann_job
from synth.stats_csv_writer import write_cann_stats_csv
from test_index_batches import _rows, _stats_job


def _build(root: Path, cache: Path, in_sql: dict | None = None) -> DumpIndex:
    """A cold build; ``in_sql`` receives the places whose ops SQL made (early, or by ``plain_places.plain_place``)."""
    idx = DumpIndex.open(str(root), cache_directory=cache, update=False)
    real = fin.finalize

    def finalize(index):
        real(index)
        if in_sql is not None:
            in_sql.update(index.early)
    fin.finalize = finalize
    try:
        idx.update(workers=1)
    finally:
        fin.finalize = real
    return idx


def test_a_per_op_csv_is_one_unit_holding_its_rows(tmp_path):
    _stats_job(tmp_path / "dump", ranks=1, steps=1, ops=3)
    idx = _build(tmp_path / "dump", tmp_path / "c")
    rows = idx.query("SELECT op_name, ntensors, slots, nan FROM units WHERE path LIKE '%layer_1%'")
    assert rows == [("model_layer_1_Mul", 2, "i0 o0", 0)]


def test_plain_stats_places_in_sql_give_the_ops_of_the_python_path(tmp_path, monkeypatch):
    root = tmp_path / "dump"
    _stats_job(root)
    places: dict = {}
    in_sql = _build(root, tmp_path / "sql", places)
    assert len(places) == 6  # every place's ops were made in SQL
    monkeypatch.setattr(plain_places, "SQL_PLAIN_PLACES", False)
    monkeypatch.setattr(fin, "PLAIN_PRODUCERS", ("cann",))  # the early path too (the index reads it here)
    monkeypatch.setattr(plain_places, "PLAIN_PRODUCERS", ("cann",))  # … and Python decides
    places.clear()
    in_python = _build(root, tmp_path / "python", places)
    assert places == {}
    assert _rows(in_sql) == _rows(in_python)
    bad = [o for o in DumpQuery(in_sql).ops(1, 1) if o.nan]
    assert [(o.name, o.nan, o.exec_index) for o in bad] == [("model_layer_2_Mul", 1, 2)]


def test_stats_of_a_payload_twin_are_merged_and_the_rest_of_the_csv_stays(tmp_path):
    """Payload files and per-op CSVs of the same ops in one folder: one record per tensor."""
    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0,))
    folder = next(root.rglob("Exp.*")).parent
    ones = np.ones((4, 8), np.float16)
    for f in sorted(os.listdir(folder)):
        op_type, file_name, task, stream, ts = f.split(".")
        extra = [(ones * 2, "float16", "ND")] if op_type == "Exp" else []  # an output no payload file has
        write_cann_stats_csv(folder, op_type, file_name, int(task), int(stream), int(ts),
                             inputs=[(ones, "float16", "ND")], outputs=[(ones, "float16", "ND")] + extra)
    q = DumpQuery(_build(root, tmp_path / "c"))
    ops = q.ops(0, 0)
    # the unmatched row keeps the CSV's file-side op name, so it is an op of its own (as when each row was a unit)
    assert [(o.type, o.name) for o in ops] == [
        ("MatMul", "model/mm/MatMul"), ("Exp", "model/act/Exp"), ("Exp", "model_act_Exp"), ("Mul", "model/scale/Mul"),
        ("HcomAllReduce", "model/grad/HcomAllReduce"), ("Add", "model/out/Add")]
    exp = ops[1]
    assert [(t.io, t.slot, t.storage, t.stats["max"]) for t in q.tensors(exp.id)] == [
        ("input", 0, "cann", 1.0), ("output", 0, "cann", 1.0)]
    assert [(t.io, t.slot, t.storage, t.stats["max"]) for t in q.tensors(ops[2].id)] == [("output", 1, "none", 2.0)]
    assert [(t.io, t.slot, t.storage) for t in q.tensors(ops[0].id)] == [
        ("input", 0, "cann"), ("input", 1, "cann"), ("output", 0, "cann")]
    # the CSV of Exp keeps only its unmatched row; every other CSV's unit is gone
    left = q.index.query("SELECT op_name, ntensors, slots FROM units WHERE storage='none'")
    assert left == [("model_act_Exp", 1, "o1")]


def test_the_per_op_unit_is_the_pack_of_the_csv_records(tmp_path):
    """``_per_op_unit`` builds the unit without tensor records: it must equal ``pack`` of them."""
    from dumpscope.core.formats.stats_csv import read_stats_csv
    from dumpscope.core.layouts.paths import place_of
    from dumpscope.core.layouts.stats_tree import _per_op_unit, _records
    from dumpscope.core.units import pack

    rng = np.random.default_rng(3)
    folder = tmp_path / "20240801000000" / "3" / "ge_default_20240801000000_1" / "1" / "2"
    cases = [("float16", "ND"), ("float32", "NC1HWC0"), ("int32", "ND"), ("bool", "FRACTAL_NZ")]
    for k, (dtype, fmt) in enumerate(cases):
        a = (rng.standard_normal((3, 5)) * 4).astype(dtype)
        b = a.astype(np.float32)
        if dtype.startswith("float"):
            b[0, 1], b[2, 2] = np.nan, -np.inf
        write_cann_stats_csv(folder, "Add", f"net/blk{k}/Add", k + 1, 2, 1700000000000000 + k,
                             inputs=[(a, dtype, fmt), (a * 0, dtype, fmt)], outputs=[(b.astype(dtype), dtype, fmt)])
    paths = sorted(folder.iterdir())
    sample = SAMPLES / "stats_only"
    paths += sorted(p for p in sample.rglob("*.csv") if p.name.count(".") >= 5)
    place = place_of(tuple(folder.parts[-5:]))
    made = 0
    for path in paths:
        parsed = read_stats_csv(str(path))
        unit = _per_op_unit(parsed, place)
        records = list(_records(parsed, place))
        if unit is None:
            assert len(records) < 2
            continue
        assert unit == pack(records), path
        made += 1
    assert made >= len(cases) + 3
