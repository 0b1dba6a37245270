"""The JSON documents of ``CLI.md`` for ops and tensors (``show``, ``ops --json``), and where an op was
called from (``DumpQuery`` inherits them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional

from dumpscope.core.graphs.source_frames import first_user_frame
from dumpscope.core.query.rows import OP_COLS, OpRow, TensorRow, op_row, shown_step

if TYPE_CHECKING:
    from dumpscope.core.index.dump_index import DumpIndex


class Documents:
    """The documents of ``DumpQuery`` (a mixin: its ``tensors``, ``graph_details``, ``run_of`` … build them)."""

    index: "DumpIndex"

    def tensor_json(self, t: TensorRow) -> dict[str, Any]:
        doc = {"io": t.io, "slot": t.slot, "dtype": t.dtype, "shape": list(t.shape), "format": t.format,
               "device_shape": list(t.device_shape), "file": t.path, "storage": t.storage}
        for key in ("arg", "pos"):  # argument names (msprobe/Troubleshooter), INTERFACES.md §3
            if key in t.extra:
                doc[key] = t.extra[key]
        if t.extra.get("kind") == "parameters_grad":
            doc["parameters_grad"] = True
        if t.storage == "value":
            doc["value"] = t.extra.get("value")
        if t.stored_dtype and t.stored_dtype != t.dtype and t.storage not in ("none", "value"):
            doc["stored_dtype"] = t.stored_dtype  # what the payload header says (the values are read as it)
        return doc

    def op_json(self, op: OpRow, tensors: Optional[list[TensorRow]] = None) -> dict[str, Any]:
        tensors = self.tensors(op.id) if tensors is None else tensors
        return {"name": op.name, "file_name": op.file_name, "type": op.type, "kind": op.kind, "rank": op.rank,
                "step": shown_step(op.step), "graph": op.graph, "exec_index": op.exec_index,
                "tensors": [self.tensor_json(t) for t in tensors]}

    def show_json(self, op: OpRow) -> dict[str, Any]:
        tensors = self.tensors(op.id)
        doc = self.op_json(op, tensors)
        details = self.graph_details(op)
        doc.update({k: details[k] for k in ("inputs_from", "control_from", "consumers", "attrs", "source")})
        doc["user_frame"] = first_user_frame(doc["source"])  # the user's line nearest the op, or None
        notes = []
        if any(t.storage == "npy" and t.stored_dtype and t.stored_dtype != t.dtype for t in tensors):
            from dumpscope.core.formats.dtypes import stored_dtype_note  # (numpy: imported only when needed)

            notes = [f"{t.io}.{t.slot}: {n}" for t in tensors if t.storage == "npy"
                     for n in [stored_dtype_note(t.dtype, t.stored_dtype)] if n]
        if notes:
            doc["dtype_notes"] = notes
        doc["graph_file"] = details["graph"]
        original = details["attrs"].get("_datadump_original_op_names")
        if isinstance(original, list):  # GE: the framework ops fused into this node
            doc["original_op_names"] = [str(n) for n in original]
        if not tensors:  # a node of a graph without tensors: what the graph says its tensors are
            doc["input_descs"] = details["input_descs"]
            doc["output_descs"] = details["output_descs"]
        doc["join_rule"] = op.join_rule
        run, runs = self.run_of(op)
        doc["run"] = run  # which execution of this op in the step (a loop body runs once per iteration)
        doc["runs"] = [{"run": i, "exec_index": r.exec_index, "graph": r.graph} for i, r in enumerate(runs)]
        if op.join_note:
            doc["join_note"] = op.join_note  # why no graph-side name: the op keeps its file-side one
        doc["scope"] = op.scope
        doc["overflow_status"] = op.status
        if op.watch_of is not None:  # a Dump-Watch snapshot: whose, and after which op
            doc["snapshot_of"] = op.watch_of
            doc["snapshot_after"] = op.watch_after
        else:
            snaps = self.snapshots_of(op) if op.graph_only == 0 else []
            if snaps:
                doc["snapshots"] = [{"after": s.watch_after, "name": s.name, "file_name": s.file_name,
                                     "files": sorted({t.path for t in self.tensors(s.id)})} for s in snaps]
        source, stack = _call_site(doc["source"], tensors)
        if stack is not None:
            doc["stack"] = stack
            doc["source"] = source
            doc["user_frame"] = first_user_frame(source)
        return doc

    def has_call_sites(self) -> bool:
        """Whether any op of the index can have a call site for ``call_sites``: a graph joined to it, or
        a tensor record holding a ``"stack"``.  Two queries that stop at the first hit: a table of a tree
        with neither (a CANN dump without graphs) skips the lookups of every chunk of its rows."""
        if self.index.query("SELECT 1 FROM ops WHERE joined IS NOT NULL LIMIT 1"):
            return True
        return bool(self.index.query("""SELECT 1 FROM units WHERE instr(tensors, '"stack"') > 0 LIMIT 1"""))

    def call_sites(self, op_ids: Iterable[int]) -> dict[int, tuple[list[dict[str, Any]], Optional[list]]]:
        """``show``'s ``(source, stack)`` of each op, by id, without the rest of ``show``, in a few
        queries: compare's table writes an op's stack on its first row, once per op of a place.

        Most ops have neither (no graph joined, no stack in their records): their units' packed
        tensors are looked at as text (``pack`` writes keys as plain JSON strings) and decoded only
        when one holds a ``"stack"``."""
        ids = sorted(set(op_ids))
        out: dict[int, tuple[list[dict[str, Any]], Optional[list]]] = {}
        graph = self.graph_lookup()
        for k in range(0, len(ids), 450):  # two parameters per id, under SQLite's 999 limit
            part = ids[k:k + 450]
            marks = ",".join("?" * len(part))
            joined: dict[int, OpRow] = {}
            for row in self.index.query(f"SELECT {OP_COLS} FROM ops WHERE id IN ({marks})", part):
                out[row[0]] = ([], None)  # no graph source, no stack: unless found below
                if row[10] is not None:  # (``joined``)
                    joined[row[0]] = op_row(row)
            stacked = {op_id for op_id, text in self.index.query(
                f"SELECT op_id, tensors FROM units WHERE id IN ({marks}) AND op_id=id UNION ALL "
                f"SELECT op_id, tensors FROM units WHERE op_id IN ({marks}) AND op_id != id", part + part)
                if text and '"stack"' in text}
            # the whole lookup, as show makes it: the graph's source frames, else the first stack
            todo = sorted(joined.keys() | (stacked & out.keys()))
            details = graph.details_of(joined.values())
            tensors = self.tensors_of(todo)
            for op_id in todo:
                source = details[op_id]["source"] if op_id in details else []
                out[op_id] = _call_site(source, tensors[op_id])
        return out


def _call_site(source: list[dict[str, Any]], tensors: list[TensorRow]) -> tuple[list[dict[str, Any]], Optional[list]]:
    """The graph node's source frames; without them, the frames of the first stack a tensor record
    carries, and that stack (``None`` when the graph said where, or nothing did)."""
    if source:
        return source, None
    for t in tensors:
        stack = t.extra.get("stack")
        if stack:
            from dumpscope.core.layouts.py_stack import source_from_stack

            return source_from_stack(stack), stack
    return source, None
