"""The SQL-only finalize of plain CANN places must build exactly the ops the Python path builds.

``plain_places.plain_place`` turns units into ops in one INSERT … SELECT when a rank/step has
nothing to decide in Python; these tests build the same trees both ways and compare the whole
ops table and every unit → op link, and check the SQL path really ran (or was refused).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dumpscope.core.index import exec_order, op_groups, plain_places
from dumpscope.core.index import finalize as fin
from dumpscope.core.index.dump_index import OP_INDEXES, DumpIndex
from dumpscope.core.query import DumpQuery
from synth import trees
from synth.cann_writer import SynthTensor, write_dump

pytestmark = pytest.mark.skipif(not plain_places.SQL_PLAIN_PLACES, reason="SQLite < 3.25 has no window functions")


def _tables(root: Path, tmp: Path, sql: bool, monkeypatch) -> tuple[list, list, int]:
    calls = {"sql": 0}
    real = plain_places.plain_place
    real_early = fin.finalize_early

    def plain(*args):
        done = real(*args) if sql else False
        calls["sql"] += done
        return done

    def early(*args):
        if sql:
            calls["sql"] += 1
            real_early(*args)

    monkeypatch.setattr(plain_places, "plain_place", plain)
    monkeypatch.setattr(fin, "finalize_early", early)
    idx = DumpIndex.open(str(root), cache_directory=tmp / ("sql" if sql else "py"))
    # unit (and so op) ids follow the walk's folder order, which threads may change between
    # builds: name units and ops by their file instead
    where = dict(idx.query("SELECT id, path FROM units"))
    # seq only orders ops within a place: compare that order, not its numbers
    cols = [c[1] for c in idx.query("PRAGMA table_info(ops)")]
    keep = [i for i, c in enumerate(cols) if c not in ("id", "seq")]
    ops = sorted((str(where.get(r[0], r[0])),) + tuple(r[i] for i in keep) for r in idx.query("SELECT * FROM ops"))
    order = [str(where.get(i, i)) for (i,) in idx.query("SELECT id FROM ops ORDER BY rank, step, exec_index, seq")]
    links = sorted((where[u], where[o]) for u, o in idx.query("SELECT id, op_id FROM units"))
    idx.close()
    monkeypatch.setattr(plain_places, "plain_place", real)
    monkeypatch.setattr(fin, "finalize_early", real_early)
    ops.append(tuple(order))
    return ops, links, calls["sql"]


def _tie_tree(root: Path) -> Path:
    """Ops with equal timestamps (ordered by name), one without a timestamp, and a NaN output."""
    folder = root / "20240101000000" / "0" / "net" / "1" / "0"
    a = np.ones((2, 3), np.float32)
    bad = np.array([[np.nan, 1, 2], [3, np.inf, 5]], np.float32)
    # equal timestamps: op names sort opposite to the file names (types first), so neither the
    # folder listing order nor the file-name order can pass for the name order
    tied = [(t, f"net/{chr(ord('z') - k)}/{t}", 1700000000000005)
            for k, t in enumerate(["Abs", "Add", "Cos", "Exp", "Neg", "Relu"])]
    for k, (op_type, name, ts) in enumerate(tied + [("Mul", "net/Mul", 1700000000000001),
                                                    ("Cast", "Cast_top", 1700000000000009)]):
        outs = [SynthTensor(bad if op_type == "Mul" else a, "float32", "ND")]
        write_dump(folder, op_type, name, k + 1, 0, ts, [SynthTensor(a, "float32", "ND")], outs)
    return root


def _graphs_tree(root: Path) -> Path:
    """One step of two graphs (models ``b`` and ``a``, and ``10`` and ``9``) whose ops ran interleaved."""
    a = np.ones((2, 3), np.float32)
    for k, (model, name, ts) in enumerate([("b", "b/Add", 1700000000000001), ("a", "a/Mul", 1700000000000002),
                                           ("b", "b/Neg", 1700000000000003), ("10", "t/Abs", 1700000000000004),
                                           ("9", "n/Exp", 1700000000000005), ("a", "a/Cos", 1700000000000006)]):
        folder = root / "20240101000000" / "0" / model / "1" / "0"
        write_dump(folder, name.split("/")[1], name, k + 1, 0, ts, [SynthTensor(a, "float32", "ND")],
                   [SynthTensor(a, "float32", "ND")])
    return root


def test_ops_of_several_graphs_are_in_the_order_they_ran(tmp_path):
    root = _graphs_tree(tmp_path / "dump")
    q = DumpQuery(DumpIndex.open(str(root), cache_directory=tmp_path / "cache"))
    assert [o.name for o in q.ops()] == ["b/Add", "a/Mul", "b/Neg", "t/Abs", "n/Exp", "a/Cos"]


def test_graphs_without_timestamps_go_by_number_then_name():
    def acc(graph: str, name: str) -> op_groups.OpAcc:
        return op_groups.OpAcc(0, 0, graph, name, name, "Add", "cann", "")

    ordered = {g: [acc(g, f"{g}/x"), acc(g, f"{g}/y")] for g in ("b", "10", "a", "9")}
    assert [o.name for o in exec_order.merge_graphs(ordered)] == ["9/x", "9/y", "10/x", "10/y", "a/x", "a/y", "b/x",
                                                            "b/y"]


@pytest.mark.parametrize("make", ["big", "ties", "overflow", "torchair", "graphs"])
def test_sql_and_python_finalize_build_the_same_ops(tmp_path, monkeypatch, make):
    root = tmp_path / "dump"
    if make == "big":
        trees.write_big_cann_tree(root, 700, ops_per_step=300)
    elif make == "ties":
        _tie_tree(root)
    elif make == "overflow":
        trees.write_cann_overflow_tree(root)
    elif make == "graphs":
        _graphs_tree(root)
    else:
        trees.write_torchair_tree(root)
    ops_py, links_py, used_py = _tables(root, tmp_path, False, monkeypatch)
    ops_sql, links_sql, used_sql = _tables(root, tmp_path, True, monkeypatch)
    monkeypatch.setattr(plain_places, "ORDER_BY_ID", False)  # the same, numbering by a sort in SQL
    ops_sorted, links_sorted, _ = _tables(root, tmp_path / "sorted", True, monkeypatch)
    assert used_py == 0
    assert ops_sql == ops_py == ops_sorted
    assert links_sql == links_py == links_sorted
    if make in ("big", "ties", "graphs"):  # plain CANN places: the SQL path must have run
        assert used_sql > 0
    assert len(ops_py) > 0


def test_sql_path_orders_ties_by_name_and_keeps_scope_and_stats(tmp_path):
    root = _tie_tree(tmp_path / "dump")
    q = DumpQuery(DumpIndex.open(str(root), cache_directory=tmp_path / "cache"))
    ops = q.ops()
    assert [o.name for o in ops] == ["net/Mul", "net/u/Relu", "net/v/Neg", "net/w/Exp", "net/x/Cos",
                                     "net/y/Add", "net/z/Abs", "Cast_top"]
    assert [o.exec_index for o in ops] == list(range(8))
    assert [o.scope for o in ops] == ["net", "net/u", "net/v", "net/w", "net/x", "net/y", "net/z", ""]
    assert ops[0].folder == str(root / "20240101000000" / "0" / "net" / "1" / "0")
    assert [(t.io, t.slot, t.shape) for t in q.tensors(ops[0].id)] == [("input", 0, (2, 3)), ("output", 0, (2, 3))]


def test_a_graph_or_a_repeated_op_name_sends_a_place_to_python(tmp_path, monkeypatch):
    root = tmp_path / "dump"
    trees.write_cann_tree(root)  # has a GE graph: names are joined in Python
    _ops, _links, used = _tables(root, tmp_path, True, monkeypatch)
    assert used == 0
    loop = tmp_path / "loop"
    folder = loop / "20240101000000" / "0" / "net" / "1" / "0"
    a = np.ones(4, np.float32)
    for k in range(2):  # the same op ran twice in one step: two runs, split in Python
        write_dump(folder, "Add", "net/Add", k + 1, 0, 1700000000000001 + k, [SynthTensor(a, "float32", "ND")],
                   [SynthTensor(a, "float32", "ND")])
    ops, _links, used = _tables(loop, tmp_path / "l", True, monkeypatch)
    assert used == 0 and len(ops) == 2 + 1  # two runs, and their order


# -- the indexer's caches (header layouts, npy headers, packed tensors) ----------------------------


def test_files_sharing_a_header_layout_keep_their_own_offsets_and_values(tmp_path):
    """Same shapes, op names of different lengths (so different header lengths) and values:
    every tensor read back through the index must be its own file's data."""
    from dumpscope.core.formats.cann_dump import read_header
    from dumpscope.core.tensors.load import load_tensor

    folder = tmp_path / "dump" / "20240101000000" / "0" / "net" / "1" / "0"
    want = {}
    for k, name in enumerate(["n/A", "net/longer_scope/A", "n/B", "net/even/longer/scope/name/C"]):
        x = np.arange(12, dtype=np.float32).reshape(3, 4) + 100 * k
        y = -x
        write_dump(folder, "Add", name, k + 1, 0, 1700000000000001 + k, [SynthTensor(x, "float32", "ND")],
                   [SynthTensor(y, "float32", "ND")])
        want[name] = (x, y)
    q = DumpQuery(DumpIndex.open(str(tmp_path / "dump"), cache_directory=tmp_path / "cache"))
    ops = q.ops()
    assert sorted(o.name for o in ops) == sorted(want)
    for op in ops:
        ins, outs = [t for t in q.tensors(op.id)]
        header = read_header(ins.path)
        assert (ins.offset, outs.offset) == (header.inputs[0].offset, header.outputs[0].offset)
        np.testing.assert_array_equal(load_tensor(ins.ref()), want[op.name][0])
        np.testing.assert_array_equal(load_tensor(outs.ref()), want[op.name][1])


def test_npy_headers_read_once_still_see_each_files_size_and_long_headers(tmp_path):
    from dumpscope.core.formats.npy_header import NpyFormatError, load_npy, read_npy_header

    a = tmp_path / "a.npy"
    np.save(a, np.arange(1000, dtype=np.float32))
    cut = tmp_path / "cut.npy"
    cut.write_bytes(a.read_bytes()[:300])  # the same header bytes, most of the payload missing
    assert not read_npy_header(str(a)).truncated
    assert read_npy_header(str(cut)).truncated
    with pytest.raises(NpyFormatError):
        load_npy(str(cut))
    # a version-2 header longer than the first read (legal: padding with spaces)
    text = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
    body = (text + " " * (9000 - len(text) - 1) + "\n").encode("latin1")
    long = tmp_path / "long.npy"
    long.write_bytes(b"\x93NUMPY\x02\x00" + len(body).to_bytes(4, "little") + body
                     + np.array([1, 2, 3], np.float32).tobytes())
    hdr = read_npy_header(str(long))
    assert hdr.shape == (3,) and hdr.data_offset == 12 + len(body) and not hdr.truncated
    np.testing.assert_array_equal(load_npy(str(long), mmap=False), [1, 2, 3])


# -- ops made early, while the pool still reads other folders ---------------------------------------


def _pooled_build(root: Path, cache: Path, monkeypatch, before_finalize=None,
                  partial=None) -> tuple[DumpIndex, dict]:
    """A cold build through the process pool (small chunks), recording the early places."""
    import dumpscope.core.index.dump_index as index_mod
    import dumpscope.core.index.pool as pool_mod

    monkeypatch.setattr(index_mod, "PARALLEL_MIN_FILES", 40)
    monkeypatch.setattr(pool_mod, "CHUNK_FILES", 30)
    seen: dict = {}
    real = fin.finalize

    def final(index):
        seen.update(index.early)
        if before_finalize is not None:
            before_finalize(index)
        real(index)

    monkeypatch.setattr(fin, "finalize", final)
    idx = DumpIndex.open(str(root), cache_directory=cache, update=False)
    idx.update(workers=2, partial=partial)
    monkeypatch.setattr(fin, "finalize", real)
    return idx, seen


def _ops_by_file(idx: DumpIndex) -> list[tuple]:
    where = dict(idx.query("SELECT id, path FROM units"))
    cols = [c[1] for c in idx.query("PRAGMA table_info(ops)")]
    keep = [i for i, c in enumerate(cols) if c not in ("id", "seq")]  # seq aside
    return sorted((where[r[0]],) + tuple(r[i] for i in keep) for r in idx.query("SELECT * FROM ops"))


def test_early_ops_equal_the_ops_of_a_build_without_them(tmp_path, monkeypatch):
    root = tmp_path / "dump"
    trees.write_big_cann_tree(root, 500, ops_per_step=100)
    early_idx, early = _pooled_build(root, tmp_path / "early", monkeypatch)
    assert len(early) == 5  # every step folder was finalized early …
    plain = DumpIndex.open(str(root), cache_directory=tmp_path / "plain", update=False)
    plain.update(workers=1)  # … and none here (no pool)
    assert _ops_by_file(early_idx) == _ops_by_file(plain)
    assert early_idx.query("SELECT COUNT(*) FROM ops")[0][0] == 500
    assert {n for (n,) in early_idx.query("SELECT name FROM sqlite_master WHERE type='index' AND name LIKE 'ops_%'")} \
        == set(OP_INDEXES)


def test_an_early_place_that_changed_before_the_last_finalize_is_made_again(tmp_path, monkeypatch):
    root = tmp_path / "dump"
    trees.write_big_cann_tree(root, 300, ops_per_step=100)
    gone: list = []

    def drop_one_unit(index):  # as if a later folder's stats merge had removed a unit of step 1
        uid, path = index.query("SELECT id, path FROM units WHERE step=1 ORDER BY id LIMIT 1")[0]
        index.conn.execute("DELETE FROM units WHERE id=?", (uid,))
        gone.append(path)

    idx, early = _pooled_build(root, tmp_path / "c", monkeypatch, drop_one_unit)
    assert (0, 1) in early
    q = DumpQuery(idx)
    assert q.count_ops(0, 1) == 99 and q.count_ops(0, 0) == 100
    assert [o.exec_index for o in q.ops(0, 1)] == list(range(99))
    assert all(o.folder and not o.name.endswith(Path(gone[0]).name) for o in q.ops(0, 1))


def test_units_sort_in_execution_order_with_or_without_timestamps():
    from dumpscope.core.units import UNIT_COLUMNS, execution_key, in_execution_order

    def unit(name, ts, hint, step=0, graph="g"):
        u = dict.fromkeys(UNIT_COLUMNS)
        u.update(op_name=name, ts=ts, order_hint=hint, rank=0, step=step, graph=graph)
        return tuple(u[c] for c in UNIT_COLUMNS)

    timed = [unit("b", 5, 5.0), unit("a", 5, 5.0), unit("c", 1, 9.0), unit("z", 3, 1.0, step=1),
             unit("b", 5, 5.0, graph="f")]
    assert [(u[6], u[7], u[3]) for u in in_execution_order(timed)] == \
        [(0, "f", "b"), (0, "g", "c"), (0, "g", "a"), (0, "g", "b"), (1, "g", "z")]
    untimed = timed + [unit("n", None, None), unit("m", None, 2.0)]
    assert in_execution_order(untimed) == sorted(untimed, key=execution_key)
    assert [u[3] for u in in_execution_order(untimed) if u[6] == 0 and u[7] == "g"] == ["c", "a", "b", "m", "n"]
    twins = [unit("x", 1, 1.0)[:1] + ("first",) + unit("x", 1, 1.0)[2:], unit("x", 1, 1.0)[:1] + ("second",)
             + unit("x", 1, 1.0)[2:]]
    assert [u[1] for u in in_execution_order(twins)] == ["first", "second"]  # ties keep their order


def test_a_folder_of_distinct_integer_timestamps_sorts_as_by_the_full_key():
    """One place and distinct int timestamps (sorted on the timestamp alone), and each way out of that
    case (a tie, a float or bool timestamp, a missing one, a second graph): the order ``execution_key`` gives."""
    import random

    from dumpscope.core.units import UNIT_COLUMNS, execution_key, in_execution_order

    def unit(k, ts, graph="g"):
        u = dict.fromkeys(UNIT_COLUMNS)
        u.update(path=f"p{k}", op_name=f"op{k % 7}", ts=ts, order_hint=float(k % 3), rank=0, step=0, graph=graph)
        return tuple(u[c] for c in UNIT_COLUMNS)

    rng = random.Random(7)
    stamps = rng.sample(range(10**15, 10**15 + 10**6), 300)
    cases = {"distinct": [unit(k, t) for k, t in enumerate(stamps)]}
    cases["tie"] = cases["distinct"] + [unit(300, stamps[5]), unit(301, stamps[5])]
    cases["float"] = cases["distinct"] + [unit(302, float(stamps[0]) + 0.5)]
    cases["bool"] = [unit(0, True), unit(1, 0), unit(2, 2)]
    cases["missing"] = cases["distinct"] + [unit(303, None)]
    cases["graphs"] = cases["distinct"] + [unit(304, 1, graph="f"), unit(305, 2**62, graph="f")]
    for name, units in cases.items():
        rng.shuffle(units)
        assert in_execution_order(units) == sorted(units, key=execution_key), name


def test_a_partial_finalize_during_the_build_and_early_ops_agree(tmp_path, monkeypatch):
    """The explorer's partial results (a finalize while folders are still being read) and early
    ops must not both write a place: here a partial finalize runs just before the walk ends."""
    import dumpscope.core.index.dump_index as index_mod
    from dumpscope.core.index.early_ops import _EarlyOps  # imported by the build that makes early ops

    root = tmp_path / "dump"
    trees.write_big_cann_tree(root, 500, ops_per_step=100)
    calls = []
    real_walk_done = _EarlyOps.walk_done

    def walk_done(self, pending_parts):
        self.index._partial_finalize(index_mod.Progress(), lambda prog: calls.append(prog.phase))
        real_walk_done(self, pending_parts)

    made_early = []
    real_early = fin.finalize_early
    monkeypatch.setattr(_EarlyOps, "walk_done", walk_done)
    monkeypatch.setattr(fin, "finalize_early", lambda *args: made_early.append(args) or real_early(*args))
    idx, _kept = _pooled_build(root, tmp_path / "p", monkeypatch)
    plain = DumpIndex.open(str(root), cache_directory=tmp_path / "plain", update=False)
    plain.update(workers=1)
    assert calls and not made_early  # the partial finalize ran, so no place was made early after it
    assert _ops_by_file(idx) == _ops_by_file(plain)


def test_a_later_finalize_keeps_unchanged_plain_places_and_redoes_changed_ones(tmp_path):
    """The explorer finalizes partial results while indexing; the next finalize keeps the plain
    places that did not change since and makes the others again."""
    root = tmp_path / "dump"
    trees.write_big_cann_tree(root, 500, ops_per_step=100)
    idx = DumpIndex.open(str(root), cache_directory=tmp_path / "c")
    fin.finalize(idx)  # as a partial finalize would: every place is plain and is remembered
    assert set(idx.early) == {(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)}
    kept_before = idx.query("SELECT id, seq FROM ops WHERE step=0 ORDER BY id")
    uid = idx.query("SELECT id FROM units WHERE step=1 ORDER BY id LIMIT 1")[0][0]
    idx.conn.execute("DELETE FROM units WHERE id=?", (uid,))
    fin.finalize(idx)
    q = DumpQuery(idx)
    assert q.count_ops(0, 1) == 99 and [o.exec_index for o in q.ops(0, 1)] == list(range(99))
    assert q.op_by_id(uid) is None
    assert idx.query("SELECT id, seq FROM ops WHERE step=0 ORDER BY id") == kept_before  # kept as it was
    # 400 ops kept, 99 made again: the op indexes were kept and extended, not rebuilt
    assert {n for (n,) in idx.query("SELECT name FROM sqlite_master WHERE type='index' AND name LIKE 'ops_%'")} \
        == set(OP_INDEXES)
    assert q.resolve_op(q.ops(0, 1)[5].name, 0, 1).exec_index == 5


def test_a_full_dump_keeps_one_record_per_tensor_with_the_csv_statistics(tmp_path):
    """MindSpore ``saved_data: full`` writes each tensor twice: an .npy and a statistic.csv row.
    The index keeps the payload record and gives it the CSV statistics (NaN/Inf counts without
    decoding); the statistics-only duplicates are dropped."""
    from synth import ms_writer
    from synth.network import simulate_ms_net

    root = tmp_path / "dump"
    ms_writer.write_ms_tree(root, {0: simulate_ms_net(0, overflow=True)}, saved_data="full",
                            statistic_categories=("max", "min", "nan count", "negative inf count",
                                                  "positive inf count"), constants=False)
    idx = DumpIndex.open(str(root), cache_directory=tmp_path / "c")
    q = DumpQuery(idx)
    npy_files = sum(1 for p in root.rglob("*.npy") if "Parameter" not in p.name)
    tensors = [t for op in q.ops(0, 0) if op.type != "Parameter" for t in q.tensors(op.id)]
    assert len(tensors) == npy_files > 0
    assert {t.storage for t in tensors} == {"npy"}
    assert all(t.stats is not None for t in tensors)
    bad = [op for op in q.ops(0, 0) if op.bad]
    assert bad and all(op.evidence == "stats" for op in bad)
    assert sum(op.nan + op.posinf + op.neginf for op in bad) > 0
