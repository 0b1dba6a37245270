"""``GraphLookup``: the joined graph's details and Load parameters of many ops in a few queries (compare
asks them for every op of a place).  Each answer is held against the one-op questions it replaces
(``graph_details``, ``loaded_parameter``) on real MindSpore 2.10 graph-mode dumps (several ranks, a
control-flow dump of many kernel graphs) and GE graphs; the queries are counted, not timed."""

from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import shared, unpack_data
from dumpscope.core.engines.compare.engine import _strip_port, compare_dumps
from dumpscope.core.query import DumpQuery, open_query
from dumpscope.core.query.graph_lookup import GraphLookup

#: (tests/data archive, the dump trees in it)
REAL = [
    ("real_ms210_dp2", ["dp2"]),  # two ranks, one kernel graph each
    ("real_ms210_cf_nan", ["cf"]),  # control flow: many kernel graphs in one rank
    ("real_ms210_causes", ["golden"]),  # weights read through Load nodes
    ("real_ge_graphs", ["real_ge_graphs"]),  # GE graphs: graph-only ops
]


def _all_ops(q: DumpQuery):
    """Every op row of the tree, all places and kinds (constants of no step included)."""
    return [op for r in q.ranks() for s in sorted(set(q.steps(r)) | {-1}) for op in q.ops(r, s, kind="all")]


def _queries(q: DumpQuery, monkeypatch) -> list[str]:
    """The SQL that ``q``'s index is asked from now on."""
    seen: list[str] = []
    real = type(q.index).query

    def counted(index, sql, params=()):
        seen.append(sql)
        return real(index, sql, params)

    monkeypatch.setattr(type(q.index), "query", counted)
    return seen


def _load_inputs(details) -> set[str]:
    return {src for d in details.values() for src in d["inputs_from"] if "Load-op" in src}


@pytest.mark.parametrize("name, trees", REAL)
def test_details_of_are_graph_details(tmp_path_factory, name, trees):
    data = unpack_data(tmp_path_factory, name)
    for tree in trees:
        q = open_query(str(data / tree))
        ops = _all_ops(q)
        assert any(op.joined for op in ops), "a dump with graphs: some op is joined"
        want = {op.id: q.graph_details(op) for op in ops}
        assert any(d["source"] for d in want.values()) or name == "real_ge_graphs"
        for size in (1, 7, 256, len(ops)):  # chunks that cut places, ranks and graphs anywhere
            lookup = q.graph_lookup()
            got = {}
            for k in range(0, len(ops), size):
                got.update(lookup.details_of(ops[k:k + size]))
            assert got == want


@pytest.mark.parametrize("name, trees", REAL[:3])
def test_loaded_parameter_is_the_queries(tmp_path_factory, name, trees):
    data = unpack_data(tmp_path_factory, name)
    for tree in trees:
        q = open_query(str(data / tree))
        ops = _all_ops(q)
        details = {op.id: q.graph_details(op) for op in ops}
        asked = [(op, node) for op in ops for src in details[op.id]["inputs_from"] if "Load-op" in src
                 for node in (src, _strip_port(src), src + "x")]
        asked += [(op, "no such node") for op in ops[:3]]
        want = [q.loaded_parameter(op, node) for op, node in asked]
        if name == "real_ms210_causes":
            assert "conv2.weight" in want, "the net's weights are read through Load nodes"
        prefetched = q.graph_lookup()
        prefetched.details_of(ops)
        assert [prefetched.loaded_parameter(op, node) for op, node in asked] == want
        cold = q.graph_lookup()  # nothing read before: each asked
        assert [cold.loaded_parameter(op, node) for op, node in asked] == want


def test_a_chunk_costs_a_few_queries(tmp_path_factory, monkeypatch):
    """Three queries an op before; now the (rank, graph)'s key and name once and a chunk's nodes (and the
    Loads they read) in one query each: Load parameters asked after ``details_of`` ask nothing."""
    data = unpack_data(tmp_path_factory, "real_ms210_causes")
    q = open_query(str(data / "golden"))
    ops = q.ops(0, 0, kind="all")
    assert len(ops) > 30 and all(op.graph == ops[0].graph for op in ops)
    seen = _queries(q, monkeypatch)
    lookup = q.graph_lookup()
    details = lookup.details_of(ops)
    assert len(seen) <= 4, seen
    loads = _load_inputs(details)
    assert loads
    del seen[:]
    for op in ops:
        for src in details[op.id]["inputs_from"]:
            if "Load-op" in src:
                lookup.loaded_parameter(op, _strip_port(src))
    assert seen == []
    lookup.details_of(ops[:10])  # the next chunk: the graph's key and name are known
    assert len(seen) <= 2, seen


def test_a_node_stored_twice_answers_its_first_row(tmp_path_factory):
    """Two rows of one (graph, name): ``graph_node`` takes the first the (gkey, name) index gives, the
    lowest rowid; the batched read must pick the same one."""
    data = unpack_data(tmp_path_factory, "real_ms210_causes")
    q = open_query(str(data / "golden"))
    op = next(op for op in q.ops(0, 0) if op.joined and q.graph_details(op)["inputs_from"])
    gkey = q.graph_key(op)
    con = sqlite3.connect(q.index.db_path)
    first = con.execute("SELECT rowid, data FROM graph_nodes WHERE gkey=? AND name=?", (gkey, op.joined)).fetchall()
    assert len(first) == 1
    changed = dict(json.loads(first[0][1]), inputs=["param:not.the.first"])
    con.execute("INSERT INTO graph_nodes(gkey, name, sname, type, data) VALUES(?, ?, '', 'X', ?)",
                (gkey, op.joined, json.dumps(changed)))
    # and one inserted below the first row's rowid, so that neither insertion order nor rowid alone decides
    con.execute("INSERT INTO graph_nodes(rowid, gkey, name, sname, type, data) VALUES(?, ?, ?, '', 'Y', ?)",
                (-5, gkey, op.joined, json.dumps(dict(changed, inputs=["param:lowest.rowid"]))))
    con.commit()
    con.close()
    q = open_query(str(data / "golden"))
    want = q.graph_details(op)
    assert want["inputs_from"] == ["param:lowest.rowid"]
    assert q.graph_lookup().details_of([op]) == {op.id: want}


def test_compare_asks_details_a_chunk_at_a_time(tmp_path_factory, monkeypatch):
    """compare's place reads its graph details through one lookup, never an op at a time (the target's
    first divergence may ask one op)."""
    data = unpack_data(tmp_path_factory, "real_ms210_causes")
    g, t = open_query(str(data / "golden")), open_query(str(data / "lr"))
    want = compare_dumps(g, t)
    calls = {"one": 0, "chunks": 0}
    one, chunk = DumpQuery.graph_details, GraphLookup.details_of

    def one_op(self, op):
        calls["one"] += 1
        return one(self, op)

    def many(self, ops):
        calls["chunks"] += 1
        return chunk(self, ops)

    monkeypatch.setattr(DumpQuery, "graph_details", one_op)
    monkeypatch.setattr(GraphLookup, "details_of", many)
    got = compare_dumps(g, t)
    assert got["rows"] == want["rows"] and got["first_divergence"] == want["first_divergence"]
    assert calls["one"] <= 1 and calls["chunks"] >= 1, calls
    assert "learning_rate" in json.dumps(got["first_divergence"]), "the honest answer: the learning rate"


def test_lenet_details_of(tmp_path_factory):
    """The shared LeNet dump (MindSpore 2.10, four steps of one kernel graph)."""
    import tarfile

    archive = shared("real_dumps", "mindspore-2.10-cpu-lenet.tar.gz")
    dest = tmp_path_factory.mktemp("lenet")
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    q = open_query(str(dest / "out"))
    ops = _all_ops(q)
    lookup = q.graph_lookup()
    got = {}
    for k in range(0, len(ops), 50):
        got.update(lookup.details_of(ops[k:k + 50]))
    assert got == {op.id: q.graph_details(op) for op in ops}
    assert _load_inputs(got)


def test_call_sites_of_a_place_ask_a_few_queries(tmp_path_factory, monkeypatch):
    """compare's table asks ``call_sites`` a chunk of rows at a time: the ops, their units, their graph
    nodes and tensors in a few queries per 450 ops, not five an op (the answers: test_op_lookups)."""
    data = unpack_data(tmp_path_factory, "real_ms210_source")
    q = open_query(str(data / "real_ms210_source" / "out"))
    ids = [op.id for op in _all_ops(q)]
    want = q.call_sites(ids)
    assert sum(1 for source, _ in want.values() if source) > 10, "the graph gives source frames"
    seen = _queries(q, monkeypatch)
    assert q.call_sites(ids) == want
    assert len(ids) > 30 and len(seen) <= 8, (len(ids), seen)
