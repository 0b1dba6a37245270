"""``DumpQuery.scope_facts``: the scope tree's one query gives the counts, first execution index and bad ops
per scope that the place's op rows give, on a real NaN run and on a CANN job."""

from __future__ import annotations

from conftest import unpack_data

from dumpscope.core.engines.overflow.lookup import overflow_report
from dumpscope.core.query import DumpQuery, open_query
from synth.job_tree import write_cann_job


def _same_as_the_op_rows(q: DumpQuery) -> int:
    """Checks every place against its op rows; returns the bad ops seen (the test must see some)."""
    bad_seen = 0
    for rank in q.ranks():
        for step in q.steps(rank):
            counts: dict = {}
            order: dict = {}
            bad: dict = {}
            for op in q.ops(rank, step, graph_only=True):  # executed ops, graph-only ones too ...
                if op.graph_only == 2:  # ... but not Dump-Watch snapshots
                    continue
                key = (op.graph, op.scope)
                counts[key] = counts.get(key, 0) + 1
                if op.exec_index is not None:
                    order[key] = min(order.get(key, op.exec_index), op.exec_index)
                if op.graph_only == 0 and op.bad:
                    bad[key] = bad.get(key, 0) + 1
            assert q.scope_facts(rank, step) == (counts, order, bad)
            bad_seen += sum(bad.values())
    return bad_seen


def test_scope_facts_on_a_real_nan_run(tmp_path_factory):
    dump = unpack_data(tmp_path_factory, "real_ms210_nan") / "nan"
    q = open_query(str(dump))
    assert _same_as_the_op_rows(q) == 0  # nothing known bad before a scan
    overflow_report(q)  # the scan records each op's NaN/Inf counts
    assert _same_as_the_op_rows(q) > 0


def test_scope_facts_on_a_cann_job_with_opdebug(tmp_path):
    root = write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1), overflow=[(1, 1)], opdebug=True)
    q = open_query(str(root))
    assert _same_as_the_op_rows(q) > 0
