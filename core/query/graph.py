"""What the joined graphs say about the ops: a node's edges, attributes and source, its neighbours,
and the ops at a source line (``DumpQuery`` inherits these questions)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Optional

from dumpscope.core.graphs.source_frames import mark_frames
from dumpscope.core.names import sanitize_name
from dumpscope.core.query.graph_lookup import AnyOp, GraphLookup, details_doc, empty_details, loaded_from
from dumpscope.core.query.rows import OP_COLS, U_COLS, OpRow, chunks, op_row, tensors_of_unit

if TYPE_CHECKING:
    from dumpscope.core.graphs.source_match import SourceSpec
    from dumpscope.core.index.dump_index import DumpIndex


class GraphQueries:
    """The graph questions of ``DumpQuery`` (a mixin: ``index`` and ``_where`` are the query's)."""

    index: "DumpIndex"

    def graph_details(self, op: AnyOp) -> dict[str, Any]:
        """What the joined graph says about ``op`` (CLI.md ``show`` fields): three queries; many ops of a
        place at once through ``graph_lookup``."""
        if not op.joined:
            return empty_details(op)
        gkey = self.graph_key(op)
        data = self.graph_node(gkey, op.joined) if gkey is not None else None
        if data is None:
            return empty_details(op)
        gname = self.index.query("SELECT name, path FROM graphs WHERE gkey=?", (f"{op.rank}:{op.graph}",))
        return details_doc(op, data, mark_frames(data.get("source", [])), gname[0] if gname else None)

    def graph_lookup(self) -> GraphLookup:
        """``graph_details`` and ``loaded_parameter`` of many ops, a chunk at a time, for one pass over
        this index (compare's place): a few queries a chunk instead of three an op."""
        return GraphLookup(self)

    def loaded_parameter(self, op: AnyOp, node: str) -> Optional[str]:
        """The Parameter a MindSpore ``Load`` node of ``op``'s graph reads (``param:conv2.weight`` → the
        name), or None: a weight reaches its kernel through a Load, which is no dumped op."""
        gkey = self.graph_key(op)
        return loaded_from(self.graph_node(gkey, node) if gkey is not None else None)

    def graph_key(self, op: AnyOp) -> Optional[str]:
        """The key of the graph joined to ``op``'s rank and graph (one parsed graph can serve several ranks),
        or None when no graph was joined."""
        rows = self.index.query("SELECT value FROM meta WHERE key=?", (f"gkey:{op.rank}:{op.graph}",))
        return rows[0][0] if rows else None

    def graph_node(self, gkey: str, name: str) -> Optional[dict[str, Any]]:
        """A node of graph ``gkey`` by its graph-side name: its stored fields (inputs, control, consumers,
        attrs, source, descs) and its ``type``; None when the graph has no such node."""
        rows = self.index.query("SELECT type, data FROM graph_nodes WHERE gkey=? AND name=?", (gkey, name))
        if not rows:
            return None
        data = json.loads(rows[0][1])
        data["type"] = rows[0][0]
        return data

    def ops_at_source(self, spec: "SourceSpec", rank: Optional[int] = None, step: Optional[int] = None,
                      grep: Optional[str] = None, kind: str = "op") -> list[OpRow]:
        """The ops whose source stack holds a frame matching ``spec`` (``FILE[:LINE]``), forward and
        backward alike, in execution order: stacks from the joined graph (``.ir`` ``# In file``
        lines, which backward ops carry for their forward code) and from msprobe/Troubleshooter
        stack files."""
        names_by_gkey: dict[str, set[str]] = {}
        for gkey, name, data in self.index.query(
                "SELECT gkey, name, data FROM graph_nodes WHERE instr(data, ?) > 0", (spec.needle,)):
            if spec.in_stack(json.loads(data).get("source") or []):
                names_by_gkey.setdefault(gkey, set()).add(name)
        ids: set[int] = set()
        if names_by_gkey:
            for key, gkey in self.index.query("SELECT key, value FROM meta WHERE key LIKE 'gkey:%'"):
                names = names_by_gkey.get(gkey)
                if not names:
                    continue
                g_rank, _, graph = key[len("gkey:"):].partition(":")
                if rank is not None and int(g_rank) != rank:
                    continue
                for chunk in chunks(sorted(names), 500):
                    marks = ",".join("?" * len(chunk))
                    ids.update(i for (i,) in self.index.query(
                        f"SELECT id FROM ops WHERE rank=? AND graph=? AND joined IN ({marks})",
                        [int(g_rank), graph, *chunk]))
        from dumpscope.core.layouts.py_stack import frames_from_stack

        for (uid, op_id, path, storage, producer, ts, packed) in self.index.query(
                f"SELECT {U_COLS} FROM units WHERE instr(tensors, ?) > 0", (spec.needle,)):
            if any(spec.in_stack(frames_from_stack(t.extra.get("stack") or []))
                   for t in tensors_of_unit((uid, op_id, path, storage, producer, ts, packed))):
                ids.add(op_id if op_id is not None else uid)
        if not ids:
            return []
        where, params = self._where(rank, step, grep, kind=kind)
        rows: list[tuple] = []
        for chunk in chunks(sorted(ids), 500):
            marks = ",".join("?" * len(chunk))
            rows.extend(self.index.query(f"SELECT {OP_COLS}, seq FROM ops{where} AND id IN ({marks})",
                                         params + list(chunk)))
        rows.sort(key=lambda r: (r[1], r[2], r[8] if r[8] is not None else 1 << 62, r[-1]))
        return [op_row(r[:-1]) for r in rows]

    def find_by_graph_name(self, name: str, rank: int, step: int, graph: Optional[str] = None) -> Optional[OpRow]:
        """The dumped op joined to graph node ``name`` (for following input/consumer links)."""
        producer = name.rsplit(":", 1)[0] if re.search(r":-?\d+$", name) else name
        params: list[Any] = [producer, rank, step]
        sql = f"SELECT {OP_COLS} FROM ops WHERE (joined=? ) AND rank=? AND step=?"
        if graph is not None:
            sql += " AND graph=?"
            params.append(graph)
        rows = self.index.query(sql, params)
        if rows:
            return op_row(rows[0])
        rows = self.index.query(f"SELECT {OP_COLS} FROM ops WHERE (name=? OR file_name=?) AND rank=? AND step=?",
                                (producer, sanitize_name(producer), rank, step))
        return op_row(rows[0]) if rows else None
