"""Places finalized in SQL alone: a rank/step of CANN files or per-op statistics CSVs with nothing to decide
in Python (no graph, no execution-order CSV, no repeated name, no snapshot) becomes ops in one
INSERT … SELECT, at C speed; places made while the pool still reads (``finalize_early``) are kept by the
last finalize when nothing changed (``kept_early``).  Part of ``finalize``.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from dumpscope.core.layouts.paths import CONSTANTS_STEP

if TYPE_CHECKING:
    from dumpscope.core.index.dump_index import DumpIndex
    from dumpscope.core.index.finalize import Seq


#: producers whose units are each one run of one op (a CANN dump file, a per-op statistics CSV; a
#: ``statistic.csv`` row is a unit of its own, so a place of those has repeated names: not plain)
PLAIN_PRODUCERS = ("cann", "stats_csv")

#: the SQL path below needs window functions (SQLite 3.25, 2018); older builds use the Python path
SQL_PLAIN_PLACES = sqlite3.sqlite_version_info >= (3, 25, 0)

_PLAIN_INSERT = """
INSERT INTO ops(id, rank, step, graph, name, file_name, type, scope, exec_index, first_ts, producer, joined,
    join_rule, graph_only, nan, posinf, neginf, status, evidence, folder, task, stream, watch_of, watch_after, seq)
SELECT u.id, u.rank, u.step, u.graph, u.op_name, u.file_name, u.op_type,
    COALESCE(u.scope, substr(u.op_name, 1, length(rtrim(u.op_name, replace(u.op_name, '/', ''))) - 1)),
    o.ex, u.ts, u.producer, NULL, NULL, 0, u.nan, u.posinf, u.neginf, NULL,
    CASE WHEN u.nan IS NOT NULL THEN 'stats' END, d.path, u.task, u.stream, NULL, NULL, o.ex + 1 + ?
FROM ({order}) o JOIN units u ON u.id = o.id JOIN dirs d ON d.id = u.dir_id
"""
#: execution order by sorting (the sort carries the keys only, not whole rows)
#: (graphs interleaved by timestamp, ties by ``graph_key``: what ``merge_graphs`` does when every op has one)
_ORDER_SORTED = """SELECT id, ROW_NUMBER() OVER (ORDER BY ts IS NULL, ts, _NUMERIC_GRAPH DESC,
    CASE WHEN _NUMERIC_GRAPH THEN CAST(graph AS INTEGER) END, graph, order_hint IS NULL, order_hint,
    op_name, id) - 1 AS ex FROM units WHERE rank = ? AND step = ?""".replace(
    "_NUMERIC_GRAPH", "(graph != '' AND graph NOT GLOB '*[^0-9]*')")
#: … or by id alone, when the place is one folder's consecutive units (stored in execution order)
ORDER_BY_ID = True
_ORDER_RANGE = "SELECT id, id - ? AS ex FROM units WHERE id BETWEEN ? AND ?"
_ORDER_BY_ID = "SELECT id, id - ? AS ex FROM units WHERE rank = ? AND step = ?"


def plain_place(index: "DumpIndex", cur: sqlite3.Cursor, rank: int, step: int, graphs: dict, csv_maps: dict,
                 seq: Seq) -> bool:
    """Finalize one rank/step in SQL alone when there is nothing to decide in Python.

    That is a place of CANN files or per-op statistics CSVs only (each file is one op; its folder
    is its unit's folder; no ``Parameter``, no ``constants/``: every op runs) with no graph file and
    no execution-order CSV to join, no op name dumped twice (no runs to split) and no Dump-Watch snapshot: ops are then the units, in timestamp order, exactly as
    the Python path below would order them, at C speed (a million-file CANN dump has no graph
    unless DUMP_GE_GRAPH was set).  Returns False when the Python path is needed.

    The place is remembered like an early one (``index.early``), so that the next finalize of
    this build (after the explorer's partial results) keeps its ops if nothing changed.
    """
    if not SQL_PLAIN_PLACES or step == CONSTANTS_STEP:
        return False
    where = (rank, step)
    graphs_here = frozenset(g for (g,) in cur.execute("SELECT DISTINCT graph FROM units WHERE rank=? AND step=?",
                                                      where).fetchall())
    if any((rank, g) in graphs or (rank, g) in csv_maps for g in graphs_here):
        return False
    if cur.execute(f"SELECT 1 FROM units WHERE rank=? AND step=? AND (producer NOT IN {PLAIN_PRODUCERS} OR "
                   "instr(file_name, '_To_') > 0 OR op_type = 'Parameter') LIMIT 1", where).fetchone():
        return False
    if len(graphs_here) > 1 and cur.execute("SELECT 1 FROM units WHERE rank=? AND step=? AND ts IS NULL LIMIT 1",
                                            where).fetchone():
        return False  # graphs to interleave, some ops without a time: the Python path places them
    if cur.execute("SELECT 1 FROM units WHERE rank=? AND step=? GROUP BY graph, op_name HAVING COUNT(*) > 1 "
                   "LIMIT 1", where).fetchone():
        return False
    n, lo, hi, ndirs = cur.execute("SELECT COUNT(*), MIN(id), MAX(id), COUNT(DISTINCT dir_id) FROM units "
                                   "WHERE rank=? AND step=?", where).fetchone()
    if ndirs == 1 and hi - lo + 1 == n and ORDER_BY_ID:  # see units.execution_key
        cur.execute(_PLAIN_INSERT.format(order=_ORDER_BY_ID), (seq.seq, lo, rank, step))
    else:
        cur.execute(_PLAIN_INSERT.format(order=_ORDER_SORTED), (seq.seq, rank, step))
    seq.seq += cur.rowcount
    index.early[(rank, step)] = (n, lo, hi, graphs_here)
    return True


def finalize_early(index: "DumpIndex", place: tuple[int, int], lo: int, hi: int, graphs_here: frozenset) -> None:
    """Make the ops of a plain place whose units are ``lo..hi`` of one folder (see ``index._EarlyOps``)."""
    with index._lock:
        cur = index.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        cur.execute(_PLAIN_INSERT.format(order=_ORDER_RANGE), (index.early_seq, lo, lo, hi))
        index.early_seq += cur.rowcount
        cur.execute("COMMIT")
    index.early[place] = (hi - lo + 1, lo, hi, graphs_here)


def kept_early(index: "DumpIndex", graphs: dict, csv_maps: dict) -> set[tuple[int, int]]:
    """Early places whose ops still stand: the same units, and still nothing to join them to."""
    kept = set()
    for (rank, step), (n, lo, hi, graphs_here) in index.early.items():
        if any((rank, g) in graphs or (rank, g) in csv_maps for g in graphs_here):
            continue
        now = index.query("SELECT COUNT(*), MIN(id), MAX(id) FROM units WHERE rank=? AND step=?", (rank, step))
        if now and tuple(now[0]) == (n, lo, hi):
            kept.add((rank, step))
    return kept
