"""Dump-Watch reports: was a watched op's output overwritten, and after which op?

Snapshot files (``{L}_To_{W}``) are recognised while finalizing the index
(``ops.watch_of``/``watch_after``); here each watched op's own output is the reference and
every snapshot is diffed against it (``core.watch_diff``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Optional

from dumpscope.core.tensors.load import TensorLoadError, load_tensor
from dumpscope.core.engines.watch.diff import build_timeline

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery, OpRow


def watch_report(q: "DumpQuery", rank: Optional[int] = None, step: Optional[int] = None) -> dict[str, Any]:
    """CLI.md ``watch`` document for one rank/step (all steps' snapshots are per step)."""
    rank, step = q.default_place(rank, step)
    snaps = [op for op in q.ops(rank, step, graph_only=True) if op.graph_only == 2 and op.watch_of]
    if not snaps:
        return {"watched": [], "rank": rank, "step": step}
    visible = q.ops(rank, step)
    by_file = {op.file_name: op for op in visible}
    by_name = {op.name: op for op in visible}
    groups: dict[str, list["OpRow"]] = defaultdict(list)
    for s in snaps:
        groups[s.watch_of].append(s)
    # order every dumped op and snapshot by time: a snapshot's position is when it was taken
    timeline = sorted([*visible, *snaps], key=lambda o: (o.first_ts if o.first_ts is not None else 1 << 62,
                                                         o.exec_index or 0))
    position = {o.id: i for i, o in enumerate(timeline)}
    watched_out: list[dict[str, Any]] = []
    problems: list[dict[str, str]] = []
    for watched_file, group in sorted(groups.items(), key=lambda kv: by_file[kv[0]].exec_index
                                      if kv[0] in by_file else 1 << 30):
        w = by_file.get(watched_file)
        if w is None:
            problems.append({"path": group[0].folder, "error": f"watched op {watched_file} has no own dump"})
            continue
        w_outs = {t.slot: t for t in q.tensors(w.id) if t.io == "output"}
        for slot, ref_t in sorted(w_outs.items()):
            try:
                reference = load_tensor(ref_t.ref())
            except TensorLoadError as exc:
                problems.append({"path": ref_t.path, "error": str(exc)})
                continue
            entries = []
            for s in group:
                st = [t for t in q.tensors(s.id) if t.io == "output" and t.slot == slot]
                if not st:
                    continue
                try:
                    arr = load_tensor(st[0].ref())
                except TensorLoadError as exc:
                    problems.append({"path": st[0].path, "error": str(exc)})
                    continue
                # the trigger: a dumped op, else the name the snapshot's header gives it
                layer = by_file.get(s.watch_after) or by_name.get(s.watch_after) if s.watch_after else None
                after = layer.name if layer is not None else (s.watch_after or s.name)
                entries.append((after, position[s.id], arr))
            name = w.name if len(w_outs) == 1 else f"{w.name}:output.{slot}"
            tl = build_timeline(w.name, reference, entries, watched_exec_index=position[w.id])
            doc = tl.to_dict()
            doc["name"] = name
            doc["op_id"] = w.id
            for snap in doc["snapshots"]:
                snap["first_changed"] = [list(i) for i in snap.get("first_changed", [])]
            watched_out.append(doc)
    return {"watched": watched_out, "rank": rank, "step": step, "problems": problems}
