"""Turn stored tensor records into ops: group, join graphs, order by execution.

Runs after any folder of the tree changed.  Everything here works on the index's tables,
so it is the same whether the records came from a cold build or an incremental update.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import sqlite3
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from dumpscope.core.errors import reason
from dumpscope.core.layouts.paths import CONSTANTS_STEP
from dumpscope.core.names import sanitize_name
from dumpscope.core.model import Graph, GraphNode
from dumpscope.core.units import dumps_entries, nonfinite_sums, slot_label
from dumpscope.core.index.schema import OP_INDEXES, create_indexes, drop_indexes
from dumpscope.core.index.overflow_join import attach_overflow

from dumpscope.core.index import dump_roots
from dumpscope.core.graphs import graph_only

if TYPE_CHECKING:  # the index calls finalize; finalize only reads and writes its tables
    from dumpscope.core.index.dump_index import DumpIndex

_OP_SUFFIX = re.compile(r"-op\d+$")
_OP_NUMBER = re.compile(r"-op(\d+)$")


@dataclass(slots=True)
class OpAcc:
    rank: int
    step: int
    graph: str
    name: str
    file_name: str
    type: str
    producer: str
    folder: str
    first_ts: Optional[int] = None
    order_hint: float = float("inf")
    scope: Optional[str] = None
    task: Optional[int] = None
    stream: Optional[int] = None
    unit_ids: list[int] = field(default_factory=list)  # the first one is the op's id
    joined: Optional[str] = None
    join_rule: Optional[str] = None
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    has_stats: bool = False
    watch_of: Optional[str] = None  # Dump-Watch snapshot of this watched op (file-side name)
    watch_after: Optional[str] = None  # … taken after this layer op (file-side name)
    run: int = 0  # which run of the op this is, when it ran several times in the step (a loop body)
    csv_name: Optional[str] = None  # the execution-order CSV's name, when no graph file joins
    note: Optional[str] = None  # why no graph-side name was found (shown with a ``?``)
    _sfile: Optional[str] = None

    @property
    def sfile(self) -> str:
        """``sanitize_name(file_name)``, computed once (joins and orders ask for it repeatedly)."""
        if self._sfile is None:
            self._sfile = sanitize_name(self.file_name)
        return self._sfile


#: what an op-table row is: an executed op, or a value the graph holds (DESIGN.md: not ops)
KIND_OP = "op"
KIND_PARAMETER = "parameter"
KIND_CONSTANT = "constant"


def op_kind(op_type: str, step: int) -> str:
    """MindSpore writes graph constants in ``constants/`` (no step) and every ``Parameter.*``
    after the step's last kernel: neither ran, so neither is an op (no execution index)."""
    if step == CONSTANTS_STEP:
        return KIND_CONSTANT
    if op_type == "Parameter":
        return KIND_PARAMETER
    return KIND_OP


def _scope_of(name: str) -> str:
    return name.rsplit("/", 1)[0] if "/" in name else ""


def _merge_stats_only(index: "DumpIndex") -> None:
    """Where a tensor has both a payload file and a stats-CSV row, keep one record.

    The payload record keeps the CSV statistics (so a first look needs no decoding).
    A stats-only unit holds one tensor, or the rows of one per-op CSV; payload units (a CANN
    file) may hold several.  A stats-only tensor with a payload twin leaves its unit; a unit
    left empty is dropped.
    """
    if not index.query("SELECT 1 FROM meta WHERE key='stats_only'") or \
            not index.query("SELECT 1 FROM units WHERE storage='none' LIMIT 1") or \
            not index.query("SELECT 1 FROM units WHERE storage!='none' LIMIT 1"):
        return
    rows = index.query(
        "SELECT id, rank, step, graph, file_name, storage, tensors FROM units "
        "WHERE (rank, step, graph, file_name) IN (SELECT rank, step, graph, file_name "
        "FROM units WHERE storage='none') ORDER BY id")
    by_key: dict[tuple, list[tuple]] = defaultdict(list)
    for row in rows:
        by_key[row[1:5]].append(row)
    drop: list[tuple[int]] = []
    rewrite: dict[int, list[list]] = {}
    shrink: list[tuple] = []
    for group in by_key.values():
        payload = {r[0]: json.loads(r[6]) for r in group if r[5] != "none"}
        where = {(e[0], e[1]): (uid, e) for uid, entries in payload.items() for e in entries}
        for r in group:
            if r[5] != "none":
                continue
            stats_only = json.loads(r[6])
            left = []
            for entry in stats_only:
                hit = where.get((entry[0], entry[1]))
                if hit is None:
                    left.append(entry)
                    continue
                uid, target = hit
                if target[10] is None and entry[10] is not None:
                    target[10] = entry[10]
                    rewrite[uid] = payload[uid]
            if not left:
                drop.append((r[0],))
            elif len(left) < len(stats_only):
                shrink.append((dumps_entries(left), len(left), " ".join(slot_label(e[0], e[1]) for e in left),
                               *nonfinite_sums(left), r[0]))
    if drop or shrink:
        with index._lock:
            cur = index.conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            cur.executemany("UPDATE units SET tensors=?, nan=?, posinf=?, neginf=? WHERE id=?",
                            [(dumps_entries(entries), *nonfinite_sums(entries), uid)
                             for uid, entries in rewrite.items()])
            cur.executemany("UPDATE units SET tensors=?, ntensors=?, slots=?, nan=?, posinf=?, neginf=? WHERE id=?",
                            shrink)
            cur.executemany("DELETE FROM units WHERE id=?", drop)
            cur.execute("COMMIT")


_UNIT_COLS = ("id, graph, op_name, file_name, op_type, ts, producer, order_hint, task, stream, path, storage, "
              "scope, nan, posinf, neginf, slots")


def _group_ops(index: "DumpIndex", rank: int, step: int) -> dict[tuple, OpAcc]:
    """Group units (a CANN file, or one tensor) into op executions.

    Units of one op name at one rank/step/graph form one op, unless the same input or
    output slot occurs more than once: then the op ran several times in that step (a loop,
    a subgraph called twice), and each run becomes its own op, in timestamp order.  A CANN
    file is always one run, so its tensors stay together.
    """
    units_by_key: dict[tuple, list[tuple]] = defaultdict(list)
    for row in index.query(f"SELECT {_UNIT_COLS} FROM units WHERE rank=? AND step=? ORDER BY id", (rank, step)):
        units_by_key[(row[1], row[2])].append(row)
    ops: dict[tuple, OpAcc] = {}
    for (graph, op_name), units in units_by_key.items():
        if len(units) == 1:
            runs = [units]
        else:
            slots = [s for u in units for s in u[16].split()]
            runs = [units] if len(set(slots)) == len(slots) else _split_runs(units)
        for occurrence, run in enumerate(runs):
            (uid, _g, _n, file_name, op_type, ts, producer, order_hint, task, stream, path, _storage, scope,
             nan, posinf, neginf, _slots) = run[0]
            acc = ops[(rank, step, graph, op_name, occurrence)] = OpAcc(
                rank, step, graph, op_name, file_name, op_type, producer, _folder(path),
                first_ts=ts, order_hint=order_hint if order_hint is not None else float("inf"), scope=scope,
                task=task, stream=stream, unit_ids=[uid], run=occurrence)
            if nan is not None:
                acc.has_stats = True
                acc.nan, acc.posinf, acc.neginf = nan, posinf, neginf
            for u in run[1:]:
                acc.unit_ids.append(u[0])
                if u[5] is not None and (acc.first_ts is None or u[5] < acc.first_ts):
                    acc.first_ts = u[5]
                if u[7] is not None and u[7] < acc.order_hint:
                    acc.order_hint = u[7]
                if acc.scope is None and u[12]:
                    acc.scope = u[12]
                if u[13] is not None:
                    acc.has_stats = True
                    acc.nan += u[13]
                    acc.posinf += u[14]
                    acc.neginf += u[15]
    return ops


def _folder(path: str) -> str:
    head, sep, _ = path.rpartition(os.sep)
    return head if head else os.path.dirname(path)


def _split_runs(units: list[tuple]) -> list[list[tuple]]:
    """Split one op name's units into runs: units by time, each joining the first run whose
    slots it does not repeat.

    Linear for many files of one op in a step folder (a loop, dynamic shapes: every file repeats
    the slots, so each starts a run of its own): the first run a unit can join is found from, per
    slot, the first run not holding that slot (``free``), instead of trying every run in turn (65k
    files took 7.5 min).  Every run before ``free[s]`` holds ``s``, so the first run free of all the
    unit's slots is at or after the largest of them; the runs' slot sets only grow, so each
    ``free[s]`` only moves forward."""
    ordered = sorted(units, key=lambda u: (u[5] or 0, u[0]))
    runs: list[list[tuple]] = []
    seen: list[set[str]] = []
    free: dict[str, int] = {}  # slot -> the first run not holding it
    for unit in ordered:
        slots = set(unit[16].split())
        i = max((free.get(s, 0) for s in slots), default=0)
        while i < len(runs) and not seen[i].isdisjoint(slots):
            i += 1
        if i == len(runs):
            runs.append([])
            seen.append(set())
        runs[i].append(unit)
        used = seen[i]
        used |= slots
        for s in slots:
            f = free.get(s, 0)
            while f < len(seen) and s in seen[f]:
                f += 1
            free[s] = f
    return runs


# -- graphs -------------------------------------------------------------------------------


@dataclass(slots=True)
class LoadedGraph:
    gkey: str
    graph: Graph
    by_name: dict[str, GraphNode]
    by_sname: dict[str, GraphNode]
    by_short: dict[str, list[GraphNode]]
    by_base: dict[str, list[GraphNode]]


def _prepare(gkey: str, graph: Graph) -> LoadedGraph:
    by_sname: dict[str, GraphNode] = {}
    by_short: dict[str, list[GraphNode]] = defaultdict(list)
    by_base: dict[str, list[GraphNode]] = defaultdict(list)
    for node in graph.nodes.values():
        s = sanitize_name(node.name)
        by_sname.setdefault(s, node)
        by_short[node.name.rsplit("/", 1)[-1]].append(node)
        by_base[_OP_SUFFIX.sub("", s)].append(node)
    return LoadedGraph(gkey, graph, graph.nodes, by_sname, by_short, by_base)


def _load_graphs(index: "DumpIndex", wanted: set[tuple[int, str]],
                 parsed: Optional[dict[str, Optional[list[Graph]]]] = None,
                 ) -> tuple[dict[tuple[int, str], LoadedGraph], list]:
    """Find, for each (rank, graph) of the dump, the graph file describing it.

    ``parsed`` receives every file read here (path → graphs, None when unreadable)."""
    from dumpscope.core.graphs import load_graph_file

    problems: list[tuple[str, str]] = []
    files = index.query("SELECT path, kind, rank, graph FROM graph_files ORDER BY path")
    found: dict[tuple[int, str], LoadedGraph] = {}
    partial: set[tuple[int, str]] = set()  # keys whose graph was read with skipped lines
    parsed = {} if parsed is None else parsed
    # MindSpore: graphs/ms_output_trace_code_graph_{id}.ir beside rank_{r}
    pb_beside_ir = graph_only.pb_with_ir(files)  # a .pb is read only where no .ir describes the graph
    for path, kind, rank, graph in files:
        if kind not in ("ms_ir", "ms_pb") or path in pb_beside_ir:
            continue
        targets = [k for k in wanted if (rank is None or k[0] == rank) and (not graph or k[1] == graph)]
        if not targets:
            continue
        warnings: list[str] = []
        try:
            graphs = load_graph_file(path, kind, warnings=warnings)
        except Exception as exc:  # a broken graph file is a named problem, the dump still opens
            problems.append((path, reason(exc, path)))
            parsed[path] = None
            continue
        parsed[path] = graphs
        _partial_problem(problems, path, warnings)
        if not graphs:
            continue
        merged = graphs[0] if len(graphs) == 1 else _merge(graphs, path, kind)
        for t in targets:  # a complete graph wins over one read partially
            if t not in found or (t in partial and not warnings):
                found[t] = _prepare(f"{path}#{merged.name}", merged)
                if warnings:
                    partial.add(t)
                else:
                    partial.discard(t)
    # GE graph text: graph name == {model_name} folder after sanitising; prefer _Build
    ge_files = [f for f in files if f[1] in ("ge_text", "ge_onnx", "ge_json")]
    ge_files.sort(key=lambda f: (0 if f[0].endswith("_Build.txt") else 1 if "Build" in f[0] else 2, f[0]))
    missing = {k for k in wanted if (k not in found or k in partial) and k[1]}
    fallback: dict[tuple[int, str], LoadedGraph] = {}  # partially read graphs, used if nothing better

    def graphs_of(path: str, kind: str) -> Optional[list[Graph]]:
        if path not in parsed:
            warnings: list[str] = []
            try:
                parsed[path] = load_graph_file(path, kind, warnings=warnings)
            except Exception as exc:
                problems.append((path, reason(exc, path)))
                parsed[path] = None
            if warnings:
                _partial_problem(problems, path, warnings)
                partial_files.add(path)
        return parsed[path]

    partial_files: set[str] = set()

    # a rank's own graph files first (torchair writes one per worldsize…_global_rankN), then any
    for same_rank_only in (True, False):
        for path, kind, frank, _graph in ge_files:
            if not missing:
                break
            keys = [k for k in missing if not same_rank_only or frank is None or frank == k[0]]
            if same_rank_only and frank is not None:
                keys = [k for k in keys if frank == k[0]]
            if not keys:
                continue
            graphs = graphs_of(path, kind)
            if not graphs:
                continue
            names = {sanitize_name(g.name): g for g in graphs}
            for key in keys:
                g = names.get(key[1]) or names.get(sanitize_name(key[1]))
                if g is not None:
                    # subgraphs of the same model file join through the root graph's name
                    sub = [x for x in graphs if x is not g and x.name in g.subgraphs]
                    merged = _merge([g, *sub], path, kind) if sub else g
                    if path in partial_files:
                        fallback.setdefault(key, _prepare(f"{path}#{g.name}", merged))
                        continue
                    found[key] = _prepare(f"{path}#{g.name}", merged)
                    missing.discard(key)
    for key in missing:
        if key in fallback and key not in found:
            found[key] = fallback[key]
    return found, problems


def _partial_problem(problems: list[tuple[str, str]], path: str, warnings: list[str]) -> None:
    """One problem line for a graph file read with skipped parts."""
    if not warnings:
        return
    first = warnings[0].splitlines()[0] if warnings[0] else "unreadable part"
    if first.startswith(path):
        first = first[len(path):].lstrip(":")
    more = f" (and {len(warnings) - 1} more)" if len(warnings) > 1 else ""
    problems.append((path, f"graph read partially: line {first}{more}"))


def _merge(graphs: list[Graph], path: str, kind: str) -> Graph:
    out = Graph(name=graphs[0].name, path=path, kind=kind)
    for g in graphs:
        for name, node in g.nodes.items():
            out.nodes.setdefault(name, node)
        out.subgraphs.extend(g.subgraphs)
    return out


def _join(ops: list[OpAcc], lg: Optional[LoadedGraph], csv_pos: dict[str, int],
          csv_names: Optional[dict[str, str]] = None) -> None:
    """Give dumped ops their graph-side names: the graph's nodes, else the execution-order CSV's names.

    First by name (full name, file-side spelling, unique short name).  Then renumbered ops:
    MindSpore numbers some ops (backward ops above all) differently in the dump files than in
    the ``.ir`` and the execution-order CSV (files ``Grad_Conv2D/Conv2DBackpropFilter-op0,1,2``,
    graph ``-op3,4,5``), and a file-side name may even be another op's graph name (MindSpore 2.10
    files ``Expand/_PowTensorScalar/Pow-op1`` ran first, the CSV's ``Pow-op0`` did).  The ops of one
    scope and type (the sanitised name without ``-opN``) therefore pair as a group whenever both
    sides hold as many: in execution order (files by timestamp, nodes by CSV position), or without
    a CSV, files by their number and nodes in ``.ir`` order (the order MindSpore numbered the
    files in).  Only a group that cannot pair one to one falls back to equal names.  An op left
    without a graph-side name is placed under its scope and says why (``note``).
    """
    if lg is None and not csv_pos:
        return
    if lg is not None:
        names_in_order: list[str] = list(lg.by_name)
        by_sname: dict[str, str] = {s: n.name for s, n in lg.by_sname.items()}
    else:  # file-side spellings of the CSV names (doc-style short names too, when unique)
        names_in_order = sorted(csv_pos, key=csv_pos.__getitem__)
        by_sname = dict(csv_names or {})
    ir_pos = {n: i for i, n in enumerate(names_in_order)}
    by_base: dict[str, list[str]] = defaultdict(list)
    for n in names_in_order:
        by_base[_OP_SUFFIX.sub("", sanitize_name(n))].append(n)

    def exact(op: OpAcc) -> Optional[tuple[str, str]]:
        if op.name in ir_pos:
            return op.name, "name"
        hit = by_sname.get(op.sfile)
        if hit is not None:
            return hit, "sanitized_name"
        if lg is not None and "/" not in op.name and "_" not in op.file_name:
            cands = lg.by_short.get(op.file_name) or []
            if len(cands) == 1:
                return cands[0].name, "short_name"
        return None

    used: dict[str, OpAcc] = {}  # graph-side name → the dumped op it was given to first

    def give(op: OpAcc, name: str, rule: str) -> None:
        used.setdefault(name, op)
        if lg is not None:
            op.joined, op.join_rule = name, rule
        else:  # no graph: the CSV names the op (``_op_rows`` takes it)
            op.csv_name, op.join_rule = name, "exec_order" if rule != "scope_type" else "exec_order_scope_type"

    # MindSpore ``-opN`` names: grouped by scope and type, each file name once (a loop dumps it per run)
    groups: dict[str, dict[str, list[OpAcc]]] = defaultdict(dict)
    for op in ops:
        if op.watch_of is not None:
            continue
        if op.type == "Parameter" or not _OP_SUFFIX.search(op.sfile):
            hit = exact(op)
            holder = used.get(hit[0]) if hit is not None else None
            if hit is not None and (holder is None or holder.name == op.name):
                give(op, *hit)  # free, or taken by an earlier run of this very op (a loop body)
            elif hit is not None:
                op.note = _taken_note(hit[0], holder)
            elif op.type != "Parameter":
                op.note = "no node of this name in the graph"
            continue
        groups[_OP_SUFFIX.sub("", op.sfile)].setdefault(op.sfile, []).append(op)
    for base, by_file in groups.items():
        firsts = [runs[0] for runs in by_file.values()]
        cands = by_base.get(base, [])
        if cands and len(cands) == len(firsts):
            pairs = _pair_in_order(firsts, cands, csv_pos, ir_pos)
        else:  # cannot pair one to one: names alone, where they match
            pairs = [(op, h[0]) for op in firsts for h in [exact(op)] if h is not None and h[0] not in used]
        named = {id(op) for op, _ in pairs}
        for op, name in pairs:
            rule = "name" if name == op.name else "sanitized_name" if sanitize_name(name) == op.sfile else "scope_type"
            for run in by_file[op.sfile]:
                give(run, name, rule)
        for op in firsts:
            if id(op) in named:
                continue
            hit = exact(op)
            note = (_taken_note(hit[0], used[hit[0]]) if hit is not None and hit[0] in used else
                    f"no {op.type} node of this scope in the graph" if not cands else
                    f"{len(firsts)} dumped and {len(cands)} graph {op.type} ops share this scope: "
                    "they cannot be paired one to one")
            for run in by_file[op.sfile]:
                run.note = note
    _place_unnamed(ops, names_in_order)


def _taken_note(name: str, holder: OpAcc) -> str:
    """Why an op kept its file-side name although a node matches it: another dumped op joined it first."""
    task = f", task {holder.task}" if holder.task is not None else ""
    return (f"its graph node is already joined to another dumped op ({holder.file_name}{task}): "
            f"one node {name}, two dumped ops")


def _op_number(op: OpAcc) -> int:
    m = _OP_NUMBER.search(op.sfile)
    return int(m.group(1)) if m else 1 << 30


def _pair_in_order(group: list[OpAcc], cands: list[str], csv_pos: dict[str, int],
                   ir_pos: dict[str, int]) -> list[tuple[OpAcc, str]]:
    """Files and graph names of one scope and type, both in execution order, paired one to one."""
    if csv_pos and all(c in csv_pos for c in cands):
        files = sorted(group, key=lambda o: (o.first_ts if o.first_ts is not None else 1 << 62, _op_number(o)))
        names = sorted(cands, key=csv_pos.__getitem__)
    else:
        files = sorted(group, key=_op_number)
        names = sorted(cands, key=ir_pos.__getitem__)
    return list(zip(files, names))


def _place_unnamed(ops: list[OpAcc], names: list[str]) -> None:
    """An op that kept its file-side name goes under the graph scope its sanitised name starts with."""
    if not any(op.note for op in ops):
        return
    scopes: dict[str, str] = {}
    for n in names:
        scope = _scope_of(n)
        while scope and sanitize_name(scope) not in scopes:
            scopes[sanitize_name(scope)] = scope
            scope = _scope_of(scope)
    for op in ops:
        if not op.note or op.scope is not None:
            continue
        cut = len(op.sfile)
        while cut > 0:
            cut = op.sfile.rfind("_", 0, cut)
            if cut <= 0:
                break
            scope = scopes.get(op.sfile[:cut])
            if scope is not None:
                op.scope = scope
                break


def _node_data(node: GraphNode, consumers: list[str]) -> str:
    return json.dumps({
        "inputs": node.inputs, "control": node.control, "attrs": node.attrs,
        "input_descs": node.input_descs, "output_descs": node.output_descs,
        "source": [{"file": s.file, "line": s.line, "code": s.code} for s in node.source],
        "graph": node.graph, "no_task": node.no_task, "consumers": consumers, "id": node.node_id,
    }, default=str, separators=(",", ":"))


# -- execution order ------------------------------------------------------------------------


def _order(ops: list[OpAcc], csv_pos: dict[str, int], csv_spos: dict[str, int]) -> list[OpAcc]:
    """Execution order: the CSV where names match, timestamps for the rest.

    An op missing from the CSV (renamed, or never listed, like parameters) is placed right
    after the CSV-listed op that ran just before it according to the file timestamps.
    """
    if not csv_pos:
        return sorted(ops, key=lambda o: (o.first_ts if o.first_ts is not None else float("inf"),
                                          o.order_hint, o.name))
    placed: list[tuple[int, OpAcc]] = []
    loose: list[OpAcc] = []
    stride = len(csv_pos) + 1  # the CSV lists one run: a loop body's k-th run comes after the whole (k-1)-th
    for op in ops:
        pos = csv_pos.get(op.joined or op.csv_name or op.name)
        if pos is None:
            pos = csv_spos.get(op.sfile)
        if pos is None:
            loose.append(op)
        else:
            placed.append((op.run * stride + pos, op))
    timeline = sorted((op.first_ts, pos) for pos, op in placed if op.first_ts is not None)
    ts_keys = [t for t, _ in timeline]
    keyed: list[tuple] = [((pos, 0, op.first_ts or 0), op) for pos, op in placed]
    for op in loose:
        if op.first_ts is None:
            keyed.append(((float("inf"), 2, op.order_hint), op))
            continue
        i = bisect_right(ts_keys, op.first_ts)
        before = max((p for _, p in timeline[:i]), default=-1) if i else -1
        keyed.append(((before, 1, op.first_ts), op))
    keyed.sort(key=lambda kv: (kv[0], kv[1].name))
    return [op for _, op in keyed]


def _mark_watch_snapshots(ops: dict[tuple, OpAcc]) -> None:
    """Recognise Dump-Watch snapshot files (op name ``{L}_To_{W}``, FORMATS.md §8.2).

    Scoped names may contain ``_To_`` themselves, so the split is checked against the
    names of the ops dumped in the same rank/step.
    """
    from dumpscope.core.names import WATCH_SEP, split_watch_name

    by_place: dict[tuple[int, int], list[OpAcc]] = defaultdict(list)
    for acc in ops.values():
        by_place[(acc.rank, acc.step)].append(acc)
    for group in by_place.values():
        if not any("_To_" in a.file_name for a in group):
            continue
        known = frozenset(a.sfile for a in group if "_To_" not in a.file_name)
        by_sfile = {a.sfile: a for a in group if "_To_" not in a.file_name}
        for acc in group:
            if "_To_" not in acc.file_name:
                continue
            split = split_watch_name(acc.sfile, known)
            if split is not None:
                acc.watch_after, acc.watch_of = split
                # the header spells both names (``net/B/Sub_To_net/C/Add``): cut it at the watched
                # op's own header name, so the trigger keeps its real name even when it was not dumped
                watched = by_sfile.get(acc.watch_of)
                tail = WATCH_SEP + watched.name if watched is not None else None
                if tail and acc.name.endswith(tail) and len(acc.name) > len(tail):
                    acc.watch_after = acc.name[:-len(tail)]


# -- main -----------------------------------------------------------------------------------


def finalize(index: "DumpIndex") -> None:
    """Rebuild the op table, one rank/step at a time so memory follows the largest step."""
    others = dump_roots.separate(index)  # another dump of the same places is set aside, never merged
    _merge_stats_only(index)
    places = index.query("SELECT DISTINCT rank, step FROM units ORDER BY rank, step")
    graph_files = index.query("SELECT path, kind, rank, graph FROM graph_files ORDER BY path")
    wanted = {(r, g) for r, g in index.query("SELECT DISTINCT rank, graph FROM units")} if graph_files else set()
    parsed: dict[str, Optional[list[Graph]]] = {}
    graphs, problems = _load_graphs(index, wanted, parsed)
    problems.extend((o.root, o.message(index.root)) for o in others)
    graph_only.read_all(graph_files, parsed, problems)  # every graph file is read or a named problem
    listed = graph_only.listed_graphs(graph_files, parsed) if not places else []
    orders: dict[tuple[int, str], list[str]] = {}
    for rank, graph, names in index.query("SELECT rank, graph, names FROM exec_orders"):
        orders[(rank, graph)] = json.loads(names)
    csv_maps = {key: _csv_maps(names) for key, names in orders.items()}
    seq = _Seq()
    kept = _kept_early(index, graphs, csv_maps) if index.early else set()
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
            if _plain_place(index, cur, rank, step, graphs, csv_maps, seq):
                continue
            ops = _group_ops(index, rank, step)
            graphs_here: dict[str, list[OpAcc]] = defaultdict(list)
            for acc in ops.values():
                graphs_here[acc.graph].append(acc)
            _mark_watch_snapshots(ops)  # before joining: a snapshot is no op to name
            for graph, group in graphs_here.items():
                maps = csv_maps.get((rank, graph)) or ({}, {}, {})
                _join(group, graphs.get((rank, graph)), maps[0], maps[2])
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
                (lg.gkey, n.name, sanitize_name(n.name), n.type, _node_data(n, consumers.get(n.name, [])))
                for n in lg.graph.nodes.values()])
        cur.executemany("INSERT INTO problems VALUES(-1,?,?)", problems)
        cur.execute("DELETE FROM meta WHERE key IN ('layouts', 'accounting')")  # recomputed on the next summary
        cur.execute("COMMIT")
    index.early_only = False  # from now on ops also holds finalized places
    attach_overflow(index)


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
#: (graphs interleaved by timestamp, ties by ``graph_key``: what ``_merge_graphs`` does when every op has one)
_ORDER_SORTED = """SELECT id, ROW_NUMBER() OVER (ORDER BY ts IS NULL, ts, _NUMERIC_GRAPH DESC,
    CASE WHEN _NUMERIC_GRAPH THEN CAST(graph AS INTEGER) END, graph, order_hint IS NULL, order_hint,
    op_name, id) - 1 AS ex FROM units WHERE rank = ? AND step = ?""".replace(
    "_NUMERIC_GRAPH", "(graph != '' AND graph NOT GLOB '*[^0-9]*')")
#: … or by id alone, when the place is one folder's consecutive units (stored in execution order)
ORDER_BY_ID = True
_ORDER_RANGE = "SELECT id, id - ? AS ex FROM units WHERE id BETWEEN ? AND ?"
_ORDER_BY_ID = "SELECT id, id - ? AS ex FROM units WHERE rank = ? AND step = ?"


def _plain_place(index: "DumpIndex", cur: sqlite3.Cursor, rank: int, step: int, graphs: dict, csv_maps: dict,
                 seq: _Seq) -> bool:
    """Finalize one rank/step in SQL alone when there is nothing to decide in Python.

    That is a place of CANN files or per-op statistics CSVs only (each file is one op; its folder
    is its unit's folder; no ``Parameter``, no ``constants/``: every op runs) with no graph file and no execution-order CSV to join, no op name dumped twice (no runs to
    split) and no Dump-Watch snapshot: ops are then the units, in timestamp order, exactly as
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


def _kept_early(index: "DumpIndex", graphs: dict, csv_maps: dict) -> set[tuple[int, int]]:
    """Early places whose ops still stand: the same units, and still nothing to join them to."""
    kept = set()
    for (rank, step), (n, lo, hi, graphs_here) in index.early.items():
        if any((rank, g) in graphs or (rank, g) in csv_maps for g in graphs_here):
            continue
        now = index.query("SELECT COUNT(*), MIN(id), MAX(id) FROM units WHERE rank=? AND step=?", (rank, step))
        if now and tuple(now[0]) == (n, lo, hi):
            kept.add((rank, step))
    return kept


def _csv_maps(names: list[str]) -> tuple[dict[str, int], dict[str, int], dict[str, str]]:
    """Positions by full name and by file-side spelling, and full names by file-side spelling."""
    csv_pos = {n: i for i, n in enumerate(names)}
    snames = [sanitize_name(n) for n in names]
    csv_spos = {s: i for i, s in enumerate(snames)}
    csv_names = dict(zip(snames, names))
    # doc-style npy names carry only the last scope segment (``Conv2D-op12``)
    shorts: dict[str, list[str]] = defaultdict(list)
    for n in names:
        shorts[sanitize_name(n.rsplit("/", 1)[-1])].append(n)
    for short, full in shorts.items():
        if len(full) == 1 and short not in csv_spos:
            csv_spos[short] = csv_pos[full[0]]
            csv_names[short] = full[0]
    return csv_pos, csv_spos, csv_names


class _Seq:
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


def graph_key(graph: str) -> tuple:
    """Graphs by number where they are numbers (MindSpore's kernel graph ids: 2 before 10), else by name:
    the order of last resort, for ops that no timestamp places (see ``_merge_graphs``)."""
    return (0, int(graph), "") if graph.isascii() and graph.isdigit() else (1, 0, graph)


def _merge_graphs(ordered: dict[str, list[OpAcc]]) -> list[OpAcc]:
    """One execution order for a step whose ops sit in several graphs: each graph's own order kept, the
    graphs interleaved by the file timestamps (as they ran).

    MindSpore runs several kernel graphs per step with control flow (a while loop's condition and
    body are graphs of their own, run once per iteration), not in graph-id order: graph 6 may run
    before graph 0, twice, between runs of graph 2.  The dump's only cross-graph fact is the time
    each file was written, so the next op is the graph head that was written first; an op without
    a timestamp takes its predecessor's (it stays right after it), and ties go by ``graph_key``."""
    if len(ordered) == 1:
        return next(iter(ordered.values()))
    runs = [ordered[g] for g in sorted(ordered, key=graph_key)]
    if not any(acc.first_ts is not None for run in runs for acc in run):  # nothing to interleave by
        return [acc for run in runs for acc in run]
    keys = [_filled_ts(run) for run in runs]
    out: list[OpAcc] = []
    heap = [(keys[g][0], g, 0) for g, run in enumerate(runs) if run]  # ties: graph_key order
    heapq.heapify(heap)
    while heap:
        _k, g, i = heapq.heappop(heap)
        out.append(runs[g][i])
        if i + 1 < len(runs[g]):
            heapq.heappush(heap, (keys[g][i + 1], g, i + 1))
    return out


def _filled_ts(run: list[OpAcc]) -> list[float]:
    """Each op's timestamp, else its predecessor's, else its successor's, else +inf (last)."""
    keys: list[Optional[float]] = [None if a.first_ts is None else float(a.first_ts) for a in run]
    last: Optional[float] = None
    for i, k in enumerate(keys):
        keys[i] = last = k if k is not None else last
    nxt: Optional[float] = None
    for i in range(len(keys) - 1, -1, -1):
        keys[i] = nxt = keys[i] if keys[i] is not None else nxt
    return [float("inf") if k is None else k for k in keys]


def _op_rows(rank: int, step: int, graphs_here: dict[str, list[OpAcc]], graphs: dict, csv_maps: dict,
             seq: _Seq) -> tuple[list[tuple], list[tuple[int, int]]]:
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
                              else _scope_of(a.joined or a.csv_name or a.name)
                              for a in group if a.watch_of is None})
        ordered[graph] = _order(group, csv_pos, csv_spos)
    for acc in _merge_graphs(ordered):
        op_id = acc.unit_ids[0]
        name = acc.joined or acc.csv_name or acc.name  # no graph file: the CSV spells the full name
        scope = acc.scope if acc.scope is not None else _scope_of(name)
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
                             node.type, _scope_of(node.name), None, None, "graph", node.name, "graph_only", 1, None,
                             None, None, None, None, "", None, None, None, None, seq.next(), KIND_OP, None))
    return rows, unit_rows
