"""Golden-vs-target compare of two indexed dumps, with the first-divergence walk.

Ops are matched by name, then normalised name, then type and execution order
(``core.compare_match``); tensors by io and slot; each pair is compared in its logical
layout in a common dtype (``core.compare_metrics``), or by statistics when one side holds
no tensor data.  Pairs run on a small thread pool: numpy releases the GIL in the heavy
loops, so two cores are used without copying tensors between processes.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Optional

from dumpscope.core.compare_match import OpRef, first_divergence, match_ops
from dumpscope.core.compare_metrics import Thresholds, compare_arrays, compare_stats, to_row
from dumpscope.core.tensor_io import TensorLoadError, load_tensor

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery, OpRow, TensorRow


def _stats_doc(q: "DumpQuery", t: "TensorRow") -> dict[str, Any]:
    doc = dict(t.stats or {})
    doc.setdefault("dtype", t.dtype)
    doc.setdefault("shape", list(t.shape))
    return doc


def _compare_pair(gq: "DumpQuery", tq: "DumpQuery", g: "TensorRow", t: "TensorRow",
                  th: Thresholds) -> dict[str, Any]:
    if g.storage == "none" or t.storage == "none":
        res = compare_stats(_stats_doc(gq, g), _stats_doc(tq, t), th)
        row = to_row(res)
        row["mode"] = "stats"
        return row
    try:
        ga = load_tensor(g.ref())
        ta = load_tensor(t.ref())
    except TensorLoadError as exc:
        return {"cosine": None, "euc_dist": None, "max_abs_err": None, "max_rel_err": None,
                "one_thousandth_ratio": None, "five_thousandth_ratio": None, "verdict": "error",
                "rule": f"unreadable: {exc}", "mode": "tensor"}
    res = compare_arrays(ga, ta, th)
    row = to_row(res)
    row["mode"] = "tensor"
    return row


def compare_dumps(golden: "DumpQuery", target: "DumpQuery", rank: Optional[int] = None,
                  step: Optional[int] = None, rtol: Optional[float] = None, atol: Optional[float] = None,
                  progress: Optional[Callable[[int, int], None]] = None, workers: int = 2,
                  thresholds: Optional[Thresholds] = None) -> dict[str, Any]:
    """CLI.md ``compare`` document for one rank/step of both dumps."""
    g_rank, g_step = golden.default_place(rank, step)
    t_ranks, t_steps = target.ranks(), target.steps()
    t_rank = g_rank if g_rank in t_ranks or not t_ranks else t_ranks[0]
    t_step = g_step if g_step in t_steps or not t_steps else t_steps[0]
    th = thresholds or Thresholds()
    if rtol is not None or atol is not None:
        th = Thresholds(cos_warn=th.cos_warn, abs_warn=th.abs_warn, cos_error=th.cos_error,
                        abs_error=th.abs_error, rtol=rtol if rtol is not None else 0.0,
                        atol=atol if atol is not None else 0.0)
    g_ops = golden.ops(g_rank, g_step)
    t_ops = target.ops(t_rank, t_step)
    g_by_id = {o.id: o for o in g_ops}
    t_by_id = {o.id: o for o in t_ops}
    match = match_ops([OpRef(o.name, o.type, o.exec_index or 0, o.id) for o in g_ops],
                      [OpRef(o.name, o.type, o.exec_index or 0, o.id) for o in t_ops])
    jobs: list[tuple["OpRow", "OpRow", str, "TensorRow", "TensorRow"]] = []
    unmatched_tensors: list[str] = []
    for gref, tref, rule in sorted(match.pairs, key=lambda p: p[0].exec_index):
        gop, top = g_by_id[gref.key], t_by_id[tref.key]
        gts = {(x.io, x.slot): x for x in golden.tensors(gop.id)}
        tts = {(x.io, x.slot): x for x in target.tensors(top.id)}
        for key in sorted(gts, key=lambda k: (0 if k[0] == "input" else 1, k[1])):
            if key in tts:
                jobs.append((gop, top, rule, gts[key], tts[key]))
            else:
                unmatched_tensors.append(f"{gop.name} {key[0]}.{key[1]}")
    rows: list[dict[str, Any]] = []
    done = 0

    def run(job):
        gop, top, rule, gt, tt = job
        return job, _compare_pair(golden, target, gt, tt, th)

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="dumpscope-compare") as pool:
        for (gop, top, rule, gt, tt), metrics in pool.map(run, jobs):
            row = {"name": gop.name, "io": gt.io, "slot": gt.slot, "step": gop.step, "rank": gop.rank}
            row.update(metrics)
            row.update({"match": rule, "target_name": top.name, "golden_op_id": gop.id, "target_op_id": top.id,
                        "exec_index": gop.exec_index, "type": gop.type})
            rows.append(row)
            done += 1
            if progress is not None:
                progress(done, len(jobs))
    inputs_of: dict[str, list[str]] = {}
    for gop in g_ops:
        det = golden.graph_details(gop)
        if det["inputs_from"]:
            inputs_of[gop.name] = det["inputs_from"]
    fd = first_divergence(rows, inputs_of or None)
    return {
        "rows": rows,
        "first_divergence": ({"name": fd["name"], "io": fd["io"], "slot": fd["slot"], "step": fd["step"],
                              "rank": fd["rank"], "rule": fd.get("rule")} if fd else None),
        "unmatched_golden": [r.name for r in match.unmatched_golden],
        "unmatched_target": [r.name for r in match.unmatched_target],
        "unmatched_tensors": unmatched_tensors,
        "golden": {"path": golden.root, "rank": g_rank, "step": g_step},
        "target": {"path": target.root, "rank": t_rank, "step": t_step},
    }


def export_redump_config(doc: dict[str, Any], path: str) -> str:
    """Write the ops worth re-dumping (error rows, first divergence first) as dump configs.

    One JSON file holding the MindSpore ``kernels`` list, the CANN/torchair ``dump_layer``
    string and the msprobe ``list``, so the user copies the part their tool reads.
    """
    names: list[str] = []
    fd = doc.get("first_divergence")
    if fd:
        names.append(fd["name"])
    for r in doc.get("rows", []):
        if r.get("verdict") == "error" and r["name"] not in names:
            names.append(r["name"])
    config = {
        "mindspore": {"common_dump_settings": {"dump_mode": 1, "kernels": names}},
        "cann": {"dump_layer": " ".join(n.replace("/", "_") for n in names)},
        "msprobe": {"list": names},
    }
    with open(os.path.expanduser(path), "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=1)
    return path
