"""One place's ops read in index order (``DumpQuery.ops`` with a rank and a step: ``_place_rows``) are the
rows, in the order, of the one sorted query it replaced; a place's dtypes read from its units (where the
folders' records cannot say: tests/test_place_dtypes.py) are kept in ``meta`` until the next finalize drops them."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from conftest import SAMPLES

from dumpscope.core.index.schema import PLACE_DTYPES
from dumpscope.core.query import open_query
from dumpscope.core.query.rows import KINDS, OP_COLS, op_rows


def _read_from_units(q) -> None:
    """Every folder's dtype record unknown, as after statistics were merged into payload twins."""
    q.index.query("UPDATE dir_dtypes SET names=NULL")


def _sorted_query(q, rank, step, grep, graph_only, kind):
    """The query ``ops`` ran for every place before: the whole place sorted in one ORDER BY."""
    where, params = q._where(rank, step, grep, graph_only, kind)
    return op_rows(q.index.query(f"SELECT {OP_COLS} FROM ops{where} ORDER BY rank, step < 0, step, "
                                 "exec_index IS NULL, exec_index, seq", params))


@pytest.mark.parametrize("sample", ["mindspore_lenet_sync", "compare_golden", "watch", "torchair_2rank"])
def test_a_place_read_in_index_order_is_the_sorted_query(tmp_path, sample):
    q = open_query(str(SAMPLES / sample), cache_directory=tmp_path / "cache")
    places = q.index.query("SELECT DISTINCT rank, step FROM ops") + [(0, 7)]  # and a step with nothing
    kinds_seen = set()
    for rank, step in places:
        for kind in KINDS:
            for graph_only in (False, True):
                for grep in (None, "conv", "a"):
                    got = q.ops(rank, step, grep=grep, graph_only=graph_only, kind=kind)
                    assert got == _sorted_query(q, rank, step, grep, graph_only, kind), (rank, step, kind, grep)
                    kinds_seen |= {(o.kind, o.step, o.exec_index is None, o.graph_only) for o in got}
    if sample in ("mindspore_lenet_sync", "compare_golden"):  # constants of no step listed with the step
        assert ("constant", -1, True, 0) in kinds_seen and ("parameter", 0, True, 0) in kinds_seen
    if sample == "watch":
        assert any(g for *_, g in kinds_seen)  # graph-only nodes and snapshots too


def test_place_dtypes_are_kept_until_the_next_finalize(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(SAMPLES / "compare_golden", tree)
    q = open_query(str(tree), cache_directory=tmp_path / "cache")
    key = f"{PLACE_DTYPES}0:0"
    _read_from_units(q)
    first = q.place_dtypes(0, 0)
    assert first and q.index.query("SELECT value FROM meta WHERE key=?", (key,))
    # what is kept is what is read: a value put there by hand comes back
    q.index.query("UPDATE meta SET value='[\"kept\"]' WHERE key=?", (key,))
    assert q.place_dtypes(0, 0) == {"kept"}
    q.index.close()
    victim = next(p for p in tree.rglob("*") if p.is_file() and p.suffix != ".json")
    victim.rename(victim.with_name(victim.name + ".moved"))  # the folder changed: read again, finalized
    again = open_query(str(tree), cache_directory=tmp_path / "cache")
    assert not again.index.query("SELECT value FROM meta WHERE key=?", (key,))
    _read_from_units(again)
    assert again.place_dtypes(0, 0) == first
    assert again.index.query("SELECT value FROM meta WHERE key=?", (key,))


def test_place_dtypes_while_another_connection_writes_are_read_not_kept(tmp_path):
    q = open_query(str(SAMPLES / "compare_golden"), cache_directory=tmp_path / "cache")
    _read_from_units(q)
    other = sqlite3.connect(q.index.db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # a build holding the write lock
    try:
        assert q.place_dtypes(0, 0)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert not q.index.query("SELECT value FROM meta WHERE key LIKE 'place_dtypes:%'")
    assert q.index.query("PRAGMA busy_timeout")[0][0] > 0  # the connection's wait is put back


@pytest.mark.parametrize("sample", ["compare_golden", "msprobe", "troubleshooter", "stats_only", "cann_overflow"])
def test_tensors_of_a_range_of_ids_or_of_scattered_ones_is_tensors_of_each(tmp_path, sample):
    """A run of consecutive ids is read as one id range (units grouped under another unit's op too: the
    npy files of an op), any other set of ids by lists of them; an id that is no op has no tensors."""
    q = open_query(str(SAMPLES / sample), cache_directory=tmp_path / "cache")
    ids = sorted(o.id for o in q.ops(kind="all"))
    span = list(range(ids[0], ids[2] + 1))  # every id between the first three ops' (units of them too)
    runs = [span, span[::-1], ids, ids[::2], [ids[-1], ids[0]]]
    queries: list[str] = []
    real = q.index.query
    q.index.query = lambda sql, params=(): queries.append(sql) or real(sql, params)  # type: ignore[method-assign]
    for run in runs:
        got = q.tensors_of(run)
        assert list(got) == run and all(got[i] == q.tensors(i) for i in run)
        assert sum(map(len, got.values())) > 0
    assert any("BETWEEN" in s for s in queries) and any(" IN (" in s for s in queries)
    if sample in ("compare_golden", "msprobe"):  # npy files grouped under an op, read through the range
        assert len(span) > 3 and sum(len(q.tensors(i)) > 1 for i in ids[:3])


def test_place_dtypes_of_a_cache_that_cannot_be_written_are_still_read(tmp_path):
    q = open_query(str(SAMPLES / "compare_golden"), cache_directory=tmp_path / "cache")
    want = {str(r[0]) for r in q.index.query(
        "SELECT DISTINCT json_extract(j.value, '$[2]') FROM units u JOIN ops o ON u.op_id = o.id, "
        "json_each(u.tensors) j WHERE o.rank=0 AND o.step=0")}
    _read_from_units(q)
    q.index.conn.execute("PRAGMA query_only=1")  # every write refused, as on a read-only cache file
    assert q.place_dtypes(0, 0) == want and want
    q.index.conn.execute("PRAGMA query_only=0")
    assert not q.index.query("SELECT value FROM meta WHERE key LIKE 'place_dtypes:%'")
    q.index.query("INSERT INTO meta VALUES('place_dtypes:0:0', 'not json')")  # not what it stores: read again
    assert q.place_dtypes(0, 0) == want
    assert q.index.query("SELECT value FROM meta WHERE key='place_dtypes:0:0'")[0][0] != "not json"


@pytest.mark.parametrize("sample", ["mindspore_lenet_sync", "compare_golden", "torchair_2rank"])
def test_place_ops_are_the_place_s_ops_in_compare_s_columns(tmp_path, sample):
    """``place_ops`` (what compare reads of a place) lists ``ops(kind="all")``'s ops in their order, each field
    it keeps equal to the OpRow's; a field it does not keep is an AttributeError, never a wrong value."""
    from dumpscope.core.query.rows import PLACE_OP_COLS

    q = open_query(str(SAMPLES / sample), cache_directory=tmp_path / "cache")
    fields = [c.strip() for c in PLACE_OP_COLS.split(",")]
    for rank, step in q.index.query("SELECT DISTINCT rank, step FROM ops WHERE step >= 0") + [(0, 7)]:
        full, lean = q.ops(rank, step, kind="all"), q.place_ops(rank, step)
        assert [[getattr(o, f) for f in fields] for o in lean] == [[getattr(o, f) for f in fields] for o in full]
        if lean:
            with pytest.raises(AttributeError):
                lean[0].folder  # noqa: B018
    assert any(q.place_ops(r, s) for r, s in q.index.query("SELECT DISTINCT rank, step FROM ops WHERE step >= 0"))
