"""Graph files beyond the joins: every graph file read, and a tree of graphs without tensors.

``finalize`` joins the graph file describing each dumped graph.  Two things are left to this
module:

* every other graph file under PATH is still read, so an unreadable one is a named problem and
  ``summary.graph_files`` lists it (``joined: false``) — a graph beside an unrelated dump is
  never invisible;
* a tree holding graph files and no tensors (``DUMP_GE_GRAPH`` output, ``atc --mode=5`` JSON,
  MindSpore ``graphs/*.ir``) is browsed as its graphs: each graph's nodes become the ops, in
  topological order, so ``ops``, ``show``, search, source lookup and the explorer work as on a dump.

Which file describes a graph when several do (DUMP_GRAPH_LEVEL writes one per build stage, GE
writes an ONNX view beside the proto text): the final ``…_Build`` proto text first, then other
proto text, atc JSON, ONNX; MindSpore ``.pb`` only where no ``.ir`` of that graph exists.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

from dumpscope.core.errors import reason
from dumpscope.core.graphs.order import topological_names
from dumpscope.core.model import Graph
from dumpscope.core.names import sanitize_name

#: producer name of the ops made from graph nodes
GRAPH_PRODUCER = "graph"
#: ``ops.join_rule`` of a node listed from a graph file of a tree without tensors
GRAPH_TREE_RULE = "graph"

_KIND_RANK = {"ge_text": 0, "ms_ir": 0, "ge_json": 1, "ge_onnx": 2, "ms_pb": 3}
_MS_GRAPH_ID = re.compile(r"ms_output_trace_code_graph_(\d+)\.(?:ir|pb)$")

FileRow = tuple  # (path, kind, rank, graph) as stored in the ``graph_files`` table


def file_priority(path: str, kind: str) -> tuple[int, int, str]:
    """Sort key: which of several files describing one graph to use (lowest first)."""
    base = os.path.basename(path)
    stage = 0 if base.endswith(("_Build.txt", "_Build.pbtxt", "_Build.json")) or kind.startswith("ms_") else \
        1 if "Build" in base else 2
    return (stage, _KIND_RANK.get(kind, 9), path)


def pb_with_ir(files: list[FileRow]) -> set[str]:
    """MindSpore ``.pb`` files that have an ``.ir`` of the same graph beside them (the ``.ir`` is read)."""
    irs = {(os.path.dirname(p), r, g) for p, k, r, g in files if k == "ms_ir"}
    return {p for p, k, r, g in files if k == "ms_pb" and (os.path.dirname(p), r, g) in irs}


def read_all(files: list[FileRow], parsed: dict[str, Optional[list[Graph]]],
             problems: list[tuple[str, str]]) -> None:
    """Read every graph file not read yet (by the joins) into ``parsed``; failures become problems."""
    from dumpscope.core.graphs import load_graph_file

    skip = pb_with_ir(files)
    for path, kind, _rank, _graph in files:
        if path in parsed or path in skip:
            continue
        warnings: list[str] = []
        try:
            parsed[path] = load_graph_file(path, kind, warnings=warnings)
        except Exception as exc:  # a broken graph file is a named problem, everything else goes on
            problems.append((path, reason(exc, path)))
            parsed[path] = None
            continue
        if warnings:
            first = warnings[0].splitlines()[0]
            if first.startswith(path):
                first = first[len(path):].lstrip(":")
            more = f" (and {len(warnings) - 1} more)" if len(warnings) > 1 else ""
            problems.append((path, f"graph read partially: line {first}{more}"))


@dataclass(slots=True)
class ListedGraph:
    """One graph of a tree without tensors, listed as ops under ``(rank, key)``."""

    rank: int
    key: str  # the ops' ``graph`` column: MindSpore graph id, else the graph's own name
    graph: Graph
    gkey: str  # graph_nodes key: "{path}#{graph name}"
    place: int = 0  # position of the graph in its file (root first)


def listed_graphs(files: list[FileRow], parsed: dict[str, Optional[list[Graph]]]) -> list[ListedGraph]:
    """The graphs a tree without tensors is browsed as: one per (rank, graph), best file first."""
    skip = pb_with_ir(files)
    chosen: dict[tuple[int, str], ListedGraph] = {}
    for path, kind, rank, graph_id in sorted(files, key=lambda f: file_priority(f[0], f[1])):
        graphs = parsed.get(path)
        if path in skip or not graphs:
            continue
        r = 0 if rank is None else int(rank)
        if kind in ("ms_ir", "ms_pb"):
            m = _MS_GRAPH_ID.search(os.path.basename(path))
            key = graph_id or (m.group(1) if m else "") or graphs[0].name
            items = [(key, graphs[0])]
        else:
            items = [(g.name, g) for g in graphs]
        for place, (key, g) in enumerate(items):
            if (r, key) not in chosen and g.nodes:
                chosen[(r, key)] = ListedGraph(r, key, g, f"{path}#{g.name}", place)
    return sorted(chosen.values(), key=lambda lg: (lg.rank, lg.graph.path, lg.place))


def node_rows(listed: list[ListedGraph], next_id, next_seq) -> list[tuple]:
    """``ops`` rows for the nodes of ``listed``: step 0, each graph's nodes in topological order,
    graphs one after the other (by file, root graph first), numbered on per rank like executed ops."""
    rows: list[tuple] = []
    positions: dict[int, int] = {}
    for lg in listed:
        for name in topological_names(lg.graph):
            node = lg.graph.nodes[name]
            # a MindSpore parameter is not an op (DESIGN.md): listed beside the ops, no position
            kind = "parameter" if node.type == "Parameter" and lg.graph.kind == "ms_ir" else "op"
            position = positions.get(lg.rank, 0) if kind == "op" else None
            if kind == "op":
                positions[lg.rank] = position + 1
            scope = name.rsplit("/", 1)[0] if "/" in name else ""
            stream = node.attrs.get("stream_id") if isinstance(node.attrs.get("stream_id"), int) else None
            rows.append((next_id(), lg.rank, 0, lg.key, name, sanitize_name(name), node.type, scope, position,
                         None, GRAPH_PRODUCER, name, GRAPH_TREE_RULE, 0, None, None, None, None, None,
                         os.path.dirname(lg.graph.path), None, stream, None, None, next_seq(), kind))
    return rows


def file_status(files: list[FileRow], parsed: dict[str, Optional[list[Graph]]], used: dict[str, str],
                problems: list[tuple[str, str]]) -> list[dict]:
    """``summary.graph_files`` entries for the files no graph was used from (``joined: false``).

    ``used``: graph name → the file it was joined or listed from (a file describing only graphs
    already taken from another file says so)."""
    errors = {p: e for p, e in problems}
    skip = pb_with_ir(files)
    out: list[dict] = []
    for path, kind, rank, _graph in files:
        if path in used.values():
            continue
        graphs = parsed.get(path)
        entry: dict = {"rank": rank, "graph": "", "name": graphs[0].name if graphs else "", "file": path,
                       "kind": kind, "joined": False, "listed": False}
        if graphs:
            entry["graphs"] = [g.name for g in graphs]
            entry["nodes"] = sum(len(g.nodes) for g in graphs)
            twins = sorted({used[g.name] for g in graphs if g.name in used})
            if twins:
                entry["note"] = f"same graph as {twins[0]}"
        elif path in skip:
            entry["note"] = "the .ir beside it is read instead"
        else:
            entry["error"] = errors.get(path, "not read")
        out.append(entry)
    return out
