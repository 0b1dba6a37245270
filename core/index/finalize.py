"""Turn stored tensor records into ops: group, join graphs, order by execution, store.

Runs after any folder of the tree changed.  Everything here works on the index's tables,
so it is the same whether the records came from a cold build or an incremental update.
The steps live in their own modules: ``op_groups`` (units into op runs), ``graph_join`` (graph
files and graph-side names), ``exec_order`` (the order ops ran in), ``plain_places`` (places
finalized in SQL alone); this module drives them and writes the op, graph and node tables.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING, Callable, Optional

from dumpscope.core.graphs import graph_only
from dumpscope.core.index import dump_roots, plain_places
from dumpscope.core.index.exec_order import csv_maps_of, graph_key, merge_graphs, order_in_graph
from dumpscope.core.index.graph_join import LoadedGraph, join_names, load_graphs, node_data
from dumpscope.core.index.op_groups import (KIND_OP, OpAcc, group_ops, mark_watch_snapshots, merge_stats_only,
                                            op_kind, scope_of)
from dumpscope.core.index.overflow_join import attach_overflow
from dumpscope.core.index.plain_places import PLAIN_PRODUCERS, SQL_PLAIN_PLACES, finalize_early, kept_early
from dumpscope.core.index.schema import OP_INDEXES, PLACE_DTYPES, create_indexes, drop_indexes
from dumpscope.core.index.shape_guard import CHECKED_KINDS, Dumped, dumped_of
from dumpscope.core.model import Graph
from dumpscope.core.names import sanitize_name

if TYPE_CHECKING:  # the index calls finalize; finalize only reads and writes its tables
    from dumpscope.core.index.dump_index import DumpIndex

#: what the index uses from here besides ``finalize`` (``dump_index``: the early places)
__all__ = ["finalize", "finalize_early", "PLAIN_PRODUCERS", "SQL_PLAIN_PLACES", "Seq"]


def finalize(index: "DumpIndex") -> None:
    """Rebuild the op table, one rank/step at a time so memory follows the largest step."""
    others = dump_roots.separate(index)  # another dump of the same places is set aside, never merged
    merge_stats_only(index)
    places = index.query("SELECT DISTINCT rank, step FROM units ORDER BY rank, step")
    graph_files = index.query("SELECT path, kind, rank, graph FROM graph_files ORDER BY path")
    wanted = {(r, g) for r, g in index.query("SELECT DISTINCT rank, graph FROM units")} if graph_files else set()
    parsed: dict[str, Optional[list[Graph]]] = {}
    graphs, problems = load_graphs(index, wanted, parsed)
    problems.extend((o.root, o.message(index.root)) for o in others)
    graph_only.read_all(graph_files, parsed, problems)  # every graph file is read or a named problem
    listed = graph_only.listed_graphs(graph_files, parsed) if not places else []
    orders: dict[tuple[int, str], list[str]] = {}
    for rank, graph, names in index.query("SELECT rank, graph, names FROM exec_orders"):
        orders[(rank, graph)] = json.loads(names)
    csv_maps = {key: csv_maps_of(names) for key, names in orders.items()}
    seq = Seq()
    kept = kept_early(index, graphs, csv_maps) if index.early else set()
    with index._lock:
        cur = index.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        # every unit is its own op until grouped with others below (as stored, in a cold build)
        if not index.early_only:
            cur.execute("UPDATE units SET op_id=id WHERE op_id IS NOT id")
        if kept and index.early_only:  # ops holds nothing but early ops: drop the stale places' by id
            for place in set(index.early) - kept:
                _n, lo, hi, _g = index.early[place]
                cur.execute("DELETE FROM ops WHERE id BETWEEN ? AND ?", (lo, hi))
            seq.seq = index.early_seq
        elif kept:  # ops made early for places that have not changed since stay
            cur.execute("CREATE TEMP TABLE IF NOT EXISTS kept_places(rank INTEGER, step INTEGER)")
            cur.execute("DELETE FROM temp.kept_places")
            cur.executemany("INSERT INTO temp.kept_places VALUES(?, ?)", sorted(kept))
            # IN (SELECT …) is looked up through a transient index: one probe per op, not a scan
            cur.execute("DELETE FROM ops WHERE graph_only != 0 OR (rank, step) NOT IN "
                        "(SELECT rank, step FROM temp.kept_places)")
            seq.seq = cur.execute("SELECT COALESCE(MAX(seq), 0) FROM ops").fetchone()[0]
        else:
            cur.execute("DELETE FROM ops")
        # Op indexes are rebuilt in one sorted pass after the inserts, unless most ops are kept: a few
        # new ones are then cheaper to add to the indexes than all of them to sort again.
        kept_units = sum(index.early[p][0] for p in kept)
        new_units = cur.execute("SELECT COUNT(*) FROM units").fetchone()[0] - kept_units
        if new_units * 4 > kept_units:
            drop_indexes(cur, OP_INDEXES)
        cur.execute("DELETE FROM graph_nodes")
        cur.execute("DELETE FROM graphs")
        cur.execute("DELETE FROM problems WHERE dir_id=-1")
        for rank, step in places:
            if (rank, step) in kept:
                continue
            if plain_places.plain_place(index, cur, rank, step, graphs, csv_maps, seq):
                continue
            ops = group_ops(index, rank, step)
            graphs_here: dict[str, list[OpAcc]] = defaultdict(list)
            for acc in ops.values():
                graphs_here[acc.graph].append(acc)
            mark_watch_snapshots(ops)  # before joining: a snapshot is no op to name
            dumped = _dumped_reader(index, rank, step, graphs_here, graphs)
            for graph, group in graphs_here.items():
                maps = csv_maps.get((rank, graph)) or ({}, {}, {})
                join_names(group, graphs.get((rank, graph)), maps[0], maps[2], dumped)
            rows, unit_rows = _op_rows(rank, step, graphs_here, graphs, csv_maps, seq)
            cur.executemany("INSERT INTO ops(id, rank, step, graph, name, file_name, type, scope, exec_index, "
                            "first_ts, producer, joined, join_rule, graph_only, nan, posinf, neginf, status, "
                            "evidence, folder, task, stream, watch_of, watch_after, seq, kind, join_note) "
                            "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            cur.executemany("UPDATE units SET op_id=? WHERE id=?", unit_rows)
        # a tree without tensors: its graphs' nodes are the ops
        cur.executemany("INSERT INTO ops(id, rank, step, graph, name, file_name, type, scope, exec_index, "
                        "first_ts, producer, joined, join_rule, graph_only, nan, posinf, neginf, status, "
                        "evidence, folder, task, stream, watch_of, watch_after, seq, kind) "
                        "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        graph_only.node_rows(listed, seq.next_graph_only, seq.next))
        create_indexes(cur, OP_INDEXES)
        for item in listed:
            graphs[(item.rank, item.key)] = LoadedGraph(item.gkey, item.graph, {}, {}, {}, {})
        used = {lg.graph.name: lg.graph.path for lg in graphs.values()}
        cur.execute("INSERT OR REPLACE INTO meta VALUES('graph_file_status', ?)",
                    (json.dumps(graph_only.file_status(graph_files, parsed, used, problems)),))
        seen_gkeys: set[str] = set()
        for (rank, graph), lg in graphs.items():
            cur.execute("INSERT OR REPLACE INTO graphs VALUES(?,?,?,?,?,?)",
                        (f"{rank}:{graph}", rank, graph, lg.graph.name, lg.graph.path, lg.graph.kind))
            cur.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)", (f"gkey:{rank}:{graph}", lg.gkey))
            if lg.gkey in seen_gkeys:
                continue
            seen_gkeys.add(lg.gkey)
            consumers = lg.graph.consumers()
            cur.executemany("INSERT INTO graph_nodes VALUES(?,?,?,?,?)", [
                (lg.gkey, n.name, sanitize_name(n.name), n.type, node_data(n, consumers.get(n.name, [])))
                for n in lg.graph.nodes.values()])
        cur.executemany("INSERT INTO problems VALUES(-1,?,?)", problems)
        # recomputed when next asked (summary; compare)
        cur.execute("DELETE FROM meta WHERE key IN ('layouts', 'accounting') OR substr(key, 1, ?) = ?",
                    (len(PLACE_DTYPES), PLACE_DTYPES))
        cur.execute("COMMIT")
    index.early_only = False  # from now on ops also holds finalized places
    attach_overflow(index)


def _dumped_reader(index: "DumpIndex", rank: int, step: int, graphs_here: dict[str, list[OpAcc]],
                   graphs: dict) -> Optional[Callable[[OpAcc], tuple[Dumped, ...]]]:
    """Each op's dumped tensors, read from the units of this rank/step once and parsed when asked, for
    the joins' tensor check (``graph_join.join_names``); None when no graph here is one it checks."""
    kinds = {graphs[(rank, g)].graph.kind for g in graphs_here if (rank, g) in graphs}
    if not kinds & CHECKED_KINDS:
        return None
    stored = dict(index.query("SELECT id, tensors FROM units WHERE rank=? AND step=?", (rank, step)))
    cache: dict[int, tuple[Dumped, ...]] = {}

    def dumped(op: OpAcc) -> tuple[Dumped, ...]:
        key = op.unit_ids[0]
        if key not in cache:
            cache[key] = dumped_of(stored.get(uid) or "" for uid in op.unit_ids)
        return cache[key]

    return dumped


class Seq:
    """Numbers the ops of one finalize in table order (``ops.seq``, the tie-break after exec_index);
    graph-only nodes, which have no unit, get negative ids."""

    def __init__(self) -> None:
        self.seq = 0
        self.graph_only = 0

    def next(self) -> int:
        self.seq += 1
        return self.seq

    def next_graph_only(self) -> int:
        self.graph_only -= 1
        return self.graph_only


def _op_rows(rank: int, step: int, graphs_here: dict[str, list[OpAcc]], graphs: dict, csv_maps: dict,
             seq: Seq) -> tuple[list[tuple], list[tuple[int, int]]]:
    """The ops-table rows of one rank/step in execution order, plus unit → op links.

    An op's id is its first unit's id, so op ids stay the same across updates of the tree."""
    rows: list[tuple] = []
    unit_rows: list[tuple[int, int]] = []
    exec_index = 0
    # a Dump-Watch snapshot belongs to its watched op: it takes that op's scope, not one made up
    # from ``{L}_To_{W}``
    watched_scope: dict[tuple[str, str], Optional[str]] = {}
    ordered: dict[str, list[OpAcc]] = {}
    for graph, group in graphs_here.items():
        csv_pos, csv_spos, _csv_names = csv_maps.get((rank, graph)) or ({}, {}, {})
        watched_scope.update({(graph, a.sfile): a.scope if a.scope is not None
                              else scope_of(a.joined or a.csv_name or a.name)
                              for a in group if a.watch_of is None})
        ordered[graph] = order_in_graph(group, csv_pos, csv_spos)
    for acc in merge_graphs(ordered):
        op_id = acc.unit_ids[0]
        name = acc.joined or acc.csv_name or acc.name  # no graph file: the CSV spells the full name
        scope = acc.scope if acc.scope is not None else scope_of(name)
        snapshot = acc.watch_of is not None
        if snapshot:
            scope = watched_scope.get((acc.graph, acc.watch_of), scope)
        kind = op_kind(acc.type, step)
        # a watch snapshot shares the position of the op that ran just before it; parameters
        # and constants did not run: no position at all
        position = None if kind != KIND_OP else max(exec_index - 1, 0) if snapshot else exec_index
        rows.append((op_id, rank, step, acc.graph, name, acc.file_name, acc.type, scope, position,
                     acc.first_ts, acc.producer, acc.joined, acc.join_rule, 2 if snapshot else 0,
                     acc.nan if acc.has_stats else None, acc.posinf if acc.has_stats else None,
                     acc.neginf if acc.has_stats else None, None, "stats" if acc.has_stats else None,
                     acc.folder, acc.task, acc.stream, acc.watch_of, acc.watch_after, seq.next(), kind,
                     acc.note))
        unit_rows.extend((op_id, uid) for uid in acc.unit_ids[1:])
        if not snapshot and kind == KIND_OP:
            exec_index += 1
    for graph in sorted(graphs_here, key=graph_key):
        lg = graphs.get((rank, graph))
        if lg is not None and lg.graph.kind in ("ge_text", "ge_json", "ge_onnx"):
            # GE nodes that ran no device task (Data, Const, NetOutput, _no_task, control-only
            # ops) have no dump file: list them as graph-only nodes so the tree shows the
            # whole graph; they carry no exec index and no tensors.
            joined = {acc.joined for acc in graphs_here[graph] if acc.joined}
            for node in lg.graph.nodes.values():
                if node.name in joined:
                    continue
                rows.append((seq.next_graph_only(), rank, step, graph, node.name, sanitize_name(node.name),
                             node.type, scope_of(node.name), None, None, "graph", node.name, "graph_only", 1, None,
                             None, None, None, None, "", None, None, None, None, seq.next(), KIND_OP, None))
    return rows, unit_rows
