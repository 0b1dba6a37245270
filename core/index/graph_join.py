"""Graph files joined to dumped ops: which graph describes each (rank, graph), and each op's graph-side name.

``load_graphs`` finds and reads the graph file of every dumped graph (MindSpore ``.ir``/``.pb``, GE text,
ONNX or JSON); ``join_names`` gives each dumped op its node's name (or the execution-order CSV's), pairing
ops MindSpore numbered differently in files and graphs, never to a MindSpore node whose tensors are not the
dumped ones (``shape_guard``).  Part of ``finalize``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from dumpscope.core.errors import reason
from dumpscope.core.graphs import graph_only
from dumpscope.core.index.op_groups import OpAcc, scope_of
from dumpscope.core.index.shape_guard import CHECKED_KINDS, Dumped, disagreement
from dumpscope.core.model import Graph, GraphNode
from dumpscope.core.names import OP_COUNTER, sanitize_name

if TYPE_CHECKING:
    from dumpscope.core.index.dump_index import DumpIndex


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
        by_base[OP_COUNTER.sub("", s)].append(node)
    return LoadedGraph(gkey, graph, graph.nodes, by_sname, by_short, by_base)


def load_graphs(index: "DumpIndex", wanted: set[tuple[int, str]],
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


def join_names(ops: list[OpAcc], lg: Optional[LoadedGraph], csv_pos: dict[str, int],
               csv_names: Optional[dict[str, str]] = None,
               dumped: Optional[Callable[[OpAcc], tuple[Dumped, ...]]] = None) -> None:
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

    Names and order are both weak evidence, so with ``dumped`` (the op's dumped tensors) and a MindSpore
    graph every join is checked against the node's tensor descriptors (``shape_guard``): a join whose
    data types or element counts disagree is never made.  A group whose order pairing disagrees is
    paired by the tensors where they single out one node (``_fit_group``): MindSpore 2.10 named the
    while body's ``x + 0.1`` file ``Add-op0`` and the ``.ir`` node ``Add-op1`` (real_ms210_cf_nan), and
    ran the counter's ``i + 1`` first although the CSV lists it last, so neither names nor timestamps
    pair them; a 2.10 NaN run wrote ``Grad_Pow/Pow-op0`` after ``Pow-op1`` (real_mindspore_210_block
    nan), so the order pairing swapped two Pows whose shapes differ.
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
    checked = dumped is not None and lg is not None and lg.graph.kind in CHECKED_KINDS

    def misfit(op: OpAcc, name: str) -> Optional[str]:
        """Why ``op`` cannot be the node ``name`` by its dumped tensors (None: it can, or nothing says)."""
        node = lg.by_name.get(name) if checked and lg is not None else None
        return disagreement(dumped(op), node) if node is not None and dumped is not None else None
    by_base: dict[str, list[str]] = defaultdict(list)
    for n in names_in_order:
        by_base[OP_COUNTER.sub("", sanitize_name(n))].append(n)

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
        if op.type == "Parameter" or not OP_COUNTER.search(op.sfile):
            hit = exact(op)
            holder = used.get(hit[0]) if hit is not None else None
            why = misfit(op, hit[0]) if hit is not None else None
            if why is not None and hit is not None:
                op.note = _misfit_note(hit[0], why)
            elif hit is not None and (holder is None or holder.name == op.name):
                give(op, *hit)  # free, or taken by an earlier run of this very op (a loop body)
            elif hit is not None:
                op.note = _taken_note(hit[0], holder)
            elif op.type != "Parameter":
                op.note = "no node of this name in the graph"
            continue
        groups[OP_COUNTER.sub("", op.sfile)].setdefault(op.sfile, []).append(op)
    for base, by_file in groups.items():
        firsts = [runs[0] for runs in by_file.values()]
        cands = by_base.get(base, [])
        misfits: dict[int, str] = {}
        if cands and len(cands) == len(firsts):
            pairs = _pair_in_order(firsts, cands, csv_pos, ir_pos)
            if checked and any(misfit(op, name) is not None for op, name in pairs):
                pairs, misfits = _fit_group(firsts, cands, misfit, csv_pos, ir_pos)
        else:  # cannot pair one to one: names alone, where they match
            pairs = []
            for op in firsts:
                h = exact(op)
                if h is None or h[0] in used:
                    continue
                why = misfit(op, h[0])
                if why is None:
                    pairs.append((op, h[0]))
                else:
                    misfits[id(op)] = _misfit_note(h[0], why)
        named = {id(op) for op, _ in pairs}
        for op, name in pairs:
            rule = ("name" if name == op.name else "sanitized_name" if sanitize_name(name) == op.sfile else
                    "scope_type_tensors" if misfits.get(id(op)) == _BY_TENSORS else "scope_type")
            for run in by_file[op.sfile]:
                give(run, name, rule)
        for op in firsts:
            if id(op) in named:
                continue
            hit = exact(op)
            note = (misfits[id(op)] if id(op) in misfits else
                    _taken_note(hit[0], used[hit[0]]) if hit is not None and hit[0] in used else
                    f"no {op.type} node of this scope in the graph" if not cands else
                    f"{len(firsts)} dumped and {len(cands)} graph {op.type} ops share this scope: "
                    "they cannot be paired one to one")
            for run in by_file[op.sfile]:
                run.note = note
    _place_unnamed(ops, names_in_order)


#: ``_fit_group``'s mark for an op paired by its tensors (its join rule says so)
_BY_TENSORS = "by tensors"


def _misfit_note(name: str, why: str) -> str:
    """Why an op kept its file-side name although a node of that name (or its place in the order) matches:
    the node's tensors are not the dumped ones."""
    return f"not joined to the graph's {name}: its tensors differ ({why})"


def _fit_group(firsts: list[OpAcc], cands: list[str], misfit: Callable[[OpAcc, str], Optional[str]],
               csv_pos: dict[str, int], ir_pos: dict[str, int]) -> tuple[list[tuple[OpAcc, str]], dict[int, str]]:
    """Pair the files and nodes of one scope and type (as many of each) by their tensors, where the order
    pairing put a file on a node whose tensors differ.

    A file whose tensors fit exactly one node still free takes it, and a node that exactly one free
    file fits takes that file (each file is one node: as many of both), until nothing is forced;
    the rest pair in execution order among themselves (``_pair_in_order``) and a pair that still
    disagrees is not made.  Returns the pairs and, by op id, ``_BY_TENSORS`` for a pair the tensors
    decided or the note of an op left unpaired."""
    fits = {id(op): [c for c in cands if misfit(op, c) is None] for op in firsts}
    free_ops, free_names = list(firsts), list(cands)
    pairs: list[tuple[OpAcc, str]] = []
    marks: dict[int, str] = {}

    def take(op: OpAcc, name: str) -> None:
        pairs.append((op, name))
        marks[id(op)] = _BY_TENSORS
        free_ops[:] = [o for o in free_ops if o is not op]  # by identity: two runs' records may compare equal
        free_names.remove(name)

    forced = True
    while forced:
        forced = False
        for op in list(free_ops):
            opts = [c for c in fits[id(op)] if c in free_names]
            if len(opts) == 1:
                take(op, opts[0])
                forced = True
        for name in list(free_names):
            takers = [op for op in free_ops if name in fits[id(op)]]
            if len(takers) == 1:
                take(takers[0], name)
                forced = True
    for op, name in _pair_in_order(free_ops, free_names, csv_pos, ir_pos) if free_ops and free_names else []:
        why = misfit(op, name)
        if why is None:
            pairs.append((op, name))
        else:
            marks[id(op)] = _misfit_note(name, why)
    return pairs, marks


def _taken_note(name: str, holder: OpAcc) -> str:
    """Why an op kept its file-side name although a node matches it: another dumped op joined it first."""
    task = f", task {holder.task}" if holder.task is not None else ""
    return (f"its graph node is already joined to another dumped op ({holder.file_name}{task}): "
            f"one node {name}, two dumped ops")


def _op_number(op: OpAcc) -> int:
    m = OP_COUNTER.search(op.sfile)
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
        scope = scope_of(n)
        while scope and sanitize_name(scope) not in scopes:
            scopes[sanitize_name(scope)] = scope
            scope = scope_of(scope)
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


def node_data(node: GraphNode, consumers: list[str]) -> str:
    return json.dumps({
        "inputs": node.inputs, "control": node.control, "attrs": node.attrs,
        "input_descs": node.input_descs, "output_descs": node.output_descs,
        "source": [{"file": s.file, "line": s.line, "code": s.code} for s in node.source],
        "graph": node.graph, "no_task": node.no_task, "consumers": consumers, "id": node.node_id,
    }, default=str, separators=(",", ":"))
