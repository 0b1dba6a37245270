"""What the joined graph says about many ops of one pass (compare's place, a compare table), in a few
queries: ``graph_details`` of a chunk of ops, and the Parameters their ``Load`` inputs read.

``GraphQueries.graph_details`` asks three queries an op (the graph's key, the node, the graph's name):
a MindSpore graph-mode place of thousands of ops paid them one op at a time, and ``loaded_parameter``
two more for each weight input.  Here the keys and names of a (rank, graph) are asked once a pass and a
chunk's nodes in one ``IN`` query a graph.  The documents are the ones ``graph_details`` makes
(``details_doc``, shared): the tests hold the two side by side.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Iterable, Optional, Union

from dumpscope.core.graphs.source_frames import is_user_file, mark_frames
from dumpscope.core.query.rows import OpRow, PlaceOp

if TYPE_CHECKING:
    from dumpscope.core.query.graph import GraphQueries

#: node names an ``IN (…)`` asks at once, with the graph key under SQLite's 999 parameters
_NAMES_AT_ONCE = 900
_PORT = re.compile(r":\d+$")
#: an op as ``show`` reads it or as compare reads a whole place of them: what is read here both hold
AnyOp = Union[OpRow, PlaceOp]


def empty_details(op: AnyOp) -> dict[str, Any]:
    """``graph_details`` of an op no graph node describes."""
    return {"inputs_from": [], "control_from": [], "consumers": [], "attrs": {}, "source": [],
            "graph": None, "input_descs": [], "output_descs": [], "join_rule": op.join_rule}


def details_doc(op: AnyOp, data: dict[str, Any], source: list[dict[str, Any]],
                graph: Optional[tuple[str, str]]) -> dict[str, Any]:
    """``graph_details`` of ``op`` from its node's stored fields ``data``, its marked ``source`` frames and
    its graph's (name, file)."""
    return {
        "inputs_from": [i for i in data.get("inputs", []) if i],
        "control_from": data.get("control", []),
        "consumers": data.get("consumers", []),
        "attrs": data.get("attrs", {}),
        "source": source,
        "graph": ({"name": graph[0], "file": graph[1]} if graph else None),
        "input_descs": data.get("input_descs", []),
        "output_descs": data.get("output_descs", []),
        "join_rule": op.join_rule,
    }


def loaded_from(data: Optional[dict[str, Any]]) -> Optional[str]:
    """The Parameter a ``Load`` node's stored fields say it reads (its first input ``param:NAME``), or None."""
    if data is None:
        return None
    first = next((i for i in data.get("inputs", []) if i), "")
    return first[len("param:"):] if first.startswith("param:") else None


class GraphLookup:
    """``graph_details`` and ``loaded_parameter`` for one pass over a finished index, a chunk of ops at a
    time.  It remembers each (rank, graph)'s key and name and the Load nodes it has read, so it is made
    for one pass (``GraphQueries.graph_lookup``) and dropped: an index updated later may join anew."""

    def __init__(self, query: "GraphQueries") -> None:
        self._q = query
        self._gkeys: dict[tuple[int, str], Optional[str]] = {}
        self._graphs: dict[tuple[int, str], Optional[tuple[str, str]]] = {}
        self._loads: dict[tuple[str, str], Optional[str]] = {}  # (gkey, Load node) -> Parameter or None
        self._user: dict[str, bool] = {}  # is_user_file of a frame's file (the same few files in every op)

    def details_of(self, ops: Iterable[AnyOp]) -> dict[int, dict[str, Any]]:
        """``graph_details(op)`` of each op, by id: one query a graph for the nodes (per 900 names), the
        graph's key and name once a pass; the Load nodes their inputs name read alongside."""
        out: dict[int, dict[str, Any]] = {}
        wanted: dict[str, dict[str, list[AnyOp]]] = {}  # gkey -> node name -> its ops
        for op in ops:
            gkey = self._gkey(op) if op.joined else None
            if gkey is None:
                out[op.id] = empty_details(op)
            else:
                wanted.setdefault(gkey, {}).setdefault(op.joined, []).append(op)  # type: ignore[arg-type]
        for gkey, by_name in wanted.items():
            nodes = self._nodes(gkey, list(by_name))
            loads: set[str] = set()
            for name, its_ops in by_name.items():
                text = nodes.get(name)
                for op in its_ops:
                    if text is None:
                        out[op.id] = empty_details(op)
                        continue
                    data = json.loads(text)  # each op its own document, as graph_details gives
                    out[op.id] = details_doc(op, data, self._marked(data.get("source", [])), self._graph(op))
                    loads.update(_load_names(out[op.id]["inputs_from"]))
            self._read_loads(gkey, loads)
        return out

    def loaded_parameter(self, op: AnyOp, node: str) -> Optional[str]:
        """``GraphQueries.loaded_parameter``: from the Load nodes ``details_of`` read, else asked."""
        gkey = self._gkey(op)
        if gkey is None:
            return None
        if (gkey, node) not in self._loads:
            self._read_loads(gkey, {node})
        return self._loads[(gkey, node)]

    # -- the reads ---------------------------------------------------------------------

    def _gkey(self, op: AnyOp) -> Optional[str]:
        place = (op.rank, op.graph)
        if place not in self._gkeys:
            self._gkeys[place] = self._q.graph_key(op)
        return self._gkeys[place]

    def _graph(self, op: AnyOp) -> Optional[tuple[str, str]]:
        place = (op.rank, op.graph)
        if place not in self._graphs:
            rows = self._q.index.query("SELECT name, path FROM graphs WHERE gkey=?", (f"{op.rank}:{op.graph}",))
            self._graphs[place] = (rows[0][0], rows[0][1]) if rows else None
        return self._graphs[place]

    def _nodes(self, gkey: str, names: list[str]) -> dict[str, str]:
        """The stored fields (JSON text) of graph ``gkey``'s nodes by name; of a name stored twice, the
        first row (what ``graph_node``'s lookup by the (gkey, name) index returns first)."""
        found: dict[str, tuple[int, str]] = {}
        for k in range(0, len(names), _NAMES_AT_ONCE):
            part = names[k:k + _NAMES_AT_ONCE]
            marks = ",".join("?" * len(part))
            for rowid, name, data in self._q.index.query(
                    f"SELECT rowid, name, data FROM graph_nodes WHERE gkey=? AND name IN ({marks})", [gkey, *part]):
                if name not in found or rowid < found[name][0]:
                    found[name] = (rowid, data)
        return {name: data for name, (_, data) in found.items()}

    def _read_loads(self, gkey: str, names: set[str]) -> None:
        todo = sorted(n for n in names if (gkey, n) not in self._loads)
        if not todo:
            return
        nodes = self._nodes(gkey, todo)
        for name in todo:
            text = nodes.get(name)
            self._loads[(gkey, name)] = loaded_from(json.loads(text)) if text is not None else None

    def _marked(self, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``mark_frames``, each file's answer remembered (a place's ops share a handful of files)."""
        if not frames:
            return mark_frames(frames)
        out = []
        user = self._user
        for f in frames:
            g = dict(f)
            if "user" not in g:
                path = str(g.get("file", ""))
                mark = user.get(path)
                if mark is None:
                    mark = user[path] = is_user_file(path)
                g["user"] = mark
            out.append(g)
        return out


def _load_names(inputs_from: list[str]) -> Iterable[str]:
    """The names a ``Load`` input may be asked by (``loaded_parameter``'s callers strip the port)."""
    for src in inputs_from:
        if "Load-op" in src:
            yield src
            bare = _PORT.sub("", src)
            if bare != src:
                yield bare
