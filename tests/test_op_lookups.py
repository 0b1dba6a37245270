"""Per-op lookups do not walk a place: ``show`` and compare's table ask them once per op, so a
lookup that grew with the place made ``compare --output`` quadratic in a place's ops (issue 33).

Work is counted in SQLite virtual-machine steps (a progress handler), not timed: the same on any
machine, and it says whether a lookup reads the place or only what it needs.
"""

from __future__ import annotations

import csv
import sqlite3

import numpy as np
import pytest

from conftest import unpack_data
from dumpscope.core.engines.compare import report as cr
from dumpscope.core.engines.compare import table_file
from dumpscope.core.index.schema import OP_INDEXES, SCHEMA_VERSION
from dumpscope.core.query import DumpQuery, open_query
from synth.cann_writer import SynthTensor, write_dump

W, A, B = "net/C/Add", "net/A/Mul", "net/B/Sub"


def _watch_tree(root, n_other: int):
    """One watched op W with two Dump-Watch snapshots, among ``n_other`` plain ops of the same place."""
    folder = root / "20240101000000" / "0" / "net" / "1" / "0"
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    ts = 1704067200000000
    names = [W, f"{A}_To_{W}", f"{B}_To_{W}"] + [f"net/D/Relu{i}" for i in range(n_other)]
    for k, name in enumerate(names):
        write_dump(folder, "Add", name, 10 + k, 1, ts + 100 * k, outputs=[SynthTensor(a, "float32", "ND")])


def _vm_steps(q: DumpQuery, fn) -> int:
    """SQLite VM steps (in hundreds) that ``fn()`` costs on ``q``'s connection."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    q.index.conn.set_progress_handler(count, 100)
    try:
        fn()
    finally:
        q.index.conn.set_progress_handler(None, 0)
    return steps[0]


def test_snapshots_of_one_op_do_not_grow_with_the_place(tmp_path):
    cost = {}
    for n in (20, 640):
        _watch_tree(tmp_path / str(n), n)
        q = open_query(str(tmp_path / str(n)))
        w = q.resolve_op(W)
        assert [s.watch_after for s in q.snapshots_of(w)] == [A, B]
        cost[n] = _vm_steps(q, lambda: (q.snapshots_of(w), q.show_json(w)))
    # 32x the ops, the same work (it was a walk of the place: ~30x)
    assert cost[640] <= cost[20] + 2, cost


def test_snapshot_lookup_plan_uses_the_watch_index(tmp_path):
    _watch_tree(tmp_path / "d", 4)
    q = open_query(str(tmp_path / "d"))
    plan = q.index.query("EXPLAIN QUERY PLAN SELECT id FROM ops WHERE rank=0 AND step=0 AND graph='g' "
                         "AND graph_only=2 AND watch_of='w' ORDER BY first_ts IS NULL, first_ts, seq")
    assert any("ops_watch" in str(row[-1]) for row in plan), plan


def test_an_index_of_the_previous_schema_is_rebuilt_with_the_new_index(tmp_path):
    """Caches written before ops_watch existed (schema 14) are rebuilt, not read without it."""
    _watch_tree(tmp_path / "d", 4)
    root = str(tmp_path / "d")
    q = open_query(root)
    before = [(o.name, o.watch_of) for o in q.ops(0, 0, graph_only=True)]
    path = q.index.db_path
    q.index.close()
    con = sqlite3.connect(path)
    con.execute("DROP INDEX ops_watch")
    version = con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0]
    con.execute("UPDATE meta SET value=? WHERE key='schema'", (f"{SCHEMA_VERSION - 1}:" + version.split(":", 1)[1],))
    con.commit()
    con.close()
    q = open_query(root)
    assert q.index.db_path == path
    names = {r[0] for r in q.index.query("SELECT name FROM sqlite_master WHERE type='index'")}
    assert set(OP_INDEXES) <= names
    assert [(o.name, o.watch_of) for o in q.ops(0, 0, graph_only=True)] == before
    assert [s.watch_after for s in q.snapshots_of(q.resolve_op(W))] == [A, B]


def _show_stacks(q: DumpQuery):
    """The table's stack lookup as it was before ``call_sites``: the whole ``show`` document per op."""
    def stacks(row):
        op = q.op_by_id(int(row["target_op_id"])) if row.get("target_op_id") is not None else None
        if op is None:
            return None
        show = q.show_json(op)
        return show.get("stack") or [f"File {s.get('file')}, line {s.get('line')}, {str(s.get('code', '')).strip()}"
                                     for s in show.get("source") or []] or None
    return stacks


@pytest.mark.parametrize("name, golden, target", [
    ("real_api_dumps", "msp_a", "msp_b"),  # msprobe 26.2 stacks (stack.json)
    ("real_ms210_source", "real_ms210_source/out", "real_ms210_source/out"),  # MindSpore 2.10 .ir source frames
])
def test_table_stacks_are_shows(tmp_path_factory, tmp_path, monkeypatch, name, golden, target):
    from dumpscope.core.engines.compare.places import compare_places

    data = unpack_data(tmp_path_factory, name)
    g, t = open_query(str(data / golden)), open_query(str(data / target))
    doc = compare_places(g, t)
    monkeypatch.setattr(cr, "CHUNK_ROWS", 3)  # several chunks, an op's rows split between two of them
    table_file.write_csv(doc, str(tmp_path / "new.csv"), cr.describe_sides(doc, g, t))
    table_file.write_csv(doc, str(tmp_path / "old.csv"), _show_stacks(t))
    new = (tmp_path / "new.csv").read_text(encoding="utf-8")
    assert new == (tmp_path / "old.csv").read_text(encoding="utf-8")
    with open(tmp_path / "new.csv", newline="", encoding="utf-8") as fh:
        cells = [r["NPU_Stack_Info"] for r in csv.DictReader(fh)]
    assert any(c != "N/A" for c in cells), "the dump has stacks: the check must see some"


def test_a_tree_without_call_sites_skips_the_lookups(tmp_path_factory, tmp_path, monkeypatch):
    """A CANN tree with no graph and no stack: ``has_call_sites`` says so, and the table asks no
    ``call_sites`` (its cells are those of the per-op ``show`` lookup all the same); the real dumps with
    stacks or source frames say they have some."""
    from test_compare_batched import _pair_queries

    from dumpscope.core.engines.compare.places import compare_places

    g, t = _pair_queries(tmp_path)
    assert not t.has_call_sites()
    doc = compare_places(g, t)
    table_file.write_csv(doc, str(tmp_path / "old.csv"), _show_stacks(t))

    def refused(*_a, **_k):
        raise AssertionError("call_sites asked of a tree that has none")

    monkeypatch.setattr(type(t), "call_sites", refused)
    monkeypatch.setattr(cr, "CHUNK_ROWS", 7)
    table_file.write_csv(doc, str(tmp_path / "new.csv"), cr.describe_sides(doc, g, t))
    assert (tmp_path / "new.csv").read_text(encoding="utf-8") == (tmp_path / "old.csv").read_text(encoding="utf-8")
    for name, side in (("real_api_dumps", "msp_b"), ("real_ms210_source", "real_ms210_source/out")):
        assert open_query(str(unpack_data(tmp_path_factory, name) / side)).has_call_sites(), name
