"""Triage: one answer from a job's dumps — what went wrong first, the evidence, and the next dump.

No rule of its own.  Without a golden dump the overflow engine (``overflow.overflow_report``) finds
each rank's first bad op and judges it (born / inherited / received through a collective,
``overflow_origin``); the origin is its ``first_rank`` over those.  With a golden dump the compare
engine (``compare.places.compare_places`` over every place asked for) gives the first divergence;
only its public document (``first_divergence``, ``rows``, ``places``) is read, so compare's
judgement can change without this module changing.  What triage adds is assembly: the origin's
tensors (golden beside target), its neighbourhood with each neighbour's verdict, how far the
trouble spread, what was covered, and the re-dump config for the origin and its producers.

The document carries every candidate the decision was made from (``candidates``: each rank's
first bad op, or each place's first divergence, with its details), so per-host documents merge
(``merge``) by the same rule into the answer one run over the whole job gives.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Union

from dumpscope.core.engines.overflow.origin import Judgement, RankFirst, first_rank

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery, OpRow

Axis = Union[int, str, None]  # a number, "all" or None (every one)

#: verdicts; ``incomplete``: nothing could be judged (no place covered: no file read, or none with evidence),
#: which is neither trouble nor clean
OVERFLOW, DIVERGENCE, CLEAN, INCOMPLETE = "overflow", "divergence", "clean", "incomplete"
#: exit statuses (CLI.md): trouble found is 3 so that a CI job can tell it from an error (1) and usage (2);
#: incomplete is 1 (an error for a gate: no answer was possible), its one line on stderr saying why
EXIT = {CLEAN: 0, OVERFLOW: 3, DIVERGENCE: 3, INCOMPLETE: 1}
FORMAT = "dumpscope-triage/1"
_MAX_FRAMES = 40
_VERDICT_RANK = {"pass": 0, "warning": 1, "error": 2}
_NOT_JUDGED = "no op's outputs could be judged: no Opdebug or statistics evidence and no readable output tensor"


def _axis(v: Axis) -> Optional[int]:
    return None if v in (None, "all") else int(v)


# -- the pieces every origin gets ---------------------------------------------------------------


def _source(q: "DumpQuery", op: "OpRow") -> list[dict[str, Any]]:
    """The user's frame first (the line to fix), then the stack outermost first (graph .ir or API stack)."""
    doc = q.show_json(op)
    frames = [f for f in (doc.get("source") or []) if isinstance(f, dict)]
    return _source_list(doc.get("user_frame"), frames)


def _source_list(user: Optional[dict], frames: list[dict]) -> list[dict[str, Any]]:
    """CLI.md's ``origin.source``: a list of frames, the user's own first (``"user": true``, the line to
    fix), then the stack outermost first (the innermost ``_MAX_FRAMES`` of it)."""
    head = [dict(_frame(user), user=True)] if user else []
    return head + [_frame(f) for f in frames[-_MAX_FRAMES:]]


def _frame(f: dict[str, Any]) -> dict[str, Any]:
    return {"file": f.get("file"), "line": f.get("line"), "code": (str(f.get("code") or "").strip() or None),
            "user": bool(f.get("user"))}


def _tensor_facts(q: "DumpQuery", op: "OpRow") -> tuple[list[dict], list[dict]]:
    """Each input's and output's statistics as the overflow engine sees them (read once, cached)."""
    from dumpscope.core.tensors.load import TensorLoadError

    ins: list[dict] = []
    outs: list[dict] = []
    for t in q.tensors(op.id):
        d: dict[str, Any] = {"io": t.io, "slot": t.slot, "dtype": t.dtype, "shape": list(t.shape)}
        if t.storage == "value":
            d["value"] = t.extra.get("value")
        else:
            try:
                st = q.tensor_stats(t)
            except (TensorLoadError, ValueError, OSError) as exc:
                d["error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                st = {}
            for k in ("min", "max", "mean", "nan", "posinf", "neginf"):
                d[k] = st.get(k)
            d["evidence"] = "stats" if t.storage == "none" else "tensor"
            if st.get("recorded_nonfinite"):
                d["recorded_nonfinite"] = st["recorded_nonfinite"]
            d["file"] = _rel(t.path, q.root)
        (ins if t.io == "input" else outs).append(d)
    return ins, outs


def _rel(path: Optional[str], root: str) -> Optional[str]:
    """A file relative to its tree (as ``overflow`` gives problems): per-host documents then say the same."""
    if not path:
        return path
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else rel


def _neighbourhood(q: "DumpQuery", op: "OpRow", verdict_of: Callable[[Optional[int]], str]) -> dict[str, Any]:
    """Producers and consumers two hops out with each one's verdict; without a graph, the ops just
    before and after in execution order (said so: they are neighbours in time, not known producers)."""
    from dumpscope.core.engines.neighbourhood import neighbourhood

    nb = neighbourhood(q, op)
    if nb is not None:
        def kind(op_id: Optional[int]) -> Optional[str]:
            o = q.op_by_id(op_id) if op_id is not None else None
            return o.kind if o is not None else None
        return {"graph": True, "levels": {str(lv): [
            {"name": n.name, "type": n.type, "kind": kind(n.op_id), "links": list(n.links),
             "verdict": verdict_of(n.op_id)} for n in nodes] for lv, nodes in sorted(nb.levels.items())},
            "cut": {str(k): v for k, v in nb.cut.items()}}
    if op.exec_index is not None:  # a window of execution order (exec_index numbers a place's ops 0..n-1)
        start = max(0, op.exec_index - 2)
        ops = q.ops(op.rank, op.step, limit=op.exec_index - start + 3, offset=start)
    else:
        ops = []
    at = next((i for i, o in enumerate(ops) if o.id == op.id), None)
    if at is None:
        return {"graph": False, "note": "no graph describes this op", "levels": {}, "cut": {}}

    def node(o: "OpRow") -> dict[str, Any]:
        return {"name": o.name, "type": o.type, "verdict": verdict_of(o.id)}
    return {"graph": False, "note": "no graph describes this op: the ops just before and after it in execution "
                                    "order (neighbours in time, not known producers)",
            "levels": {"before": [node(o) for o in ops[max(0, at - 2):at]],
                       "after": [node(o) for o in ops[at + 1:at + 3]]}, "cut": {}}


def _producers(nb: dict[str, Any]) -> list[str]:
    """Executed ops one and two hops up (parameters and constants are dumped with every op anyway)."""
    if not nb.get("graph"):
        return []
    return [n["name"] for lv in ("-1", "-2") for n in nb["levels"].get(lv, []) if n.get("kind") == "op"]


_TOOL = {"mindspore": "mindspore", "mindspore_bin": "mindspore", "msaccucmp_npy": "mindspore", "cann": "cann",
         "stats_csv": "cann", "msprobe": "msprobe"}


def _redump(op: "OpRow", nb: dict[str, Any]) -> dict[str, Any]:
    """The origin and its producers (graph neighbours one and two hops up) in every tool's op-list
    form (``redump_config``, the writer ``compare``/``ops --export-config`` share); ``tool`` names the
    part this run's tool reads."""
    from dumpscope.core.engines.redump_config import redump_config

    names = [op.name, *_producers(nb)]
    tool = _TOOL.get(op.producer)
    # a CANN place's graph is its model folder ({time}/{device}/{model_name}/…): acl.json's model_name
    models = {n: op.graph for n in names} if tool == "cann" and op.graph else {}
    config, left_out = redump_config(names, models)
    return {"tool": tool, "ops": list(dict.fromkeys(names)), "models": models, "config": config,
            "left_out_of_dump_layer": left_out,
            "note": None if tool else f"{op.producer} dumps take no op list: the config is for a rerun under "
                                      "MindSpore, CANN or msprobe"}


# -- without a golden: the overflow engine ------------------------------------------------------


def _overflow(q: "DumpQuery", rank: Optional[int], step: Optional[int],
              progress: Optional[Callable[[int, int], None]]) -> dict[str, Any]:
    from dumpscope.core.engines.overflow.lookup import overflow_report

    doc = overflow_report(q, rank=rank, step=step, scan="auto", progress=progress)
    rows = doc["ops"]
    bad_ids = {r["op_id"] for r in rows}

    def verdict_of(op_id: Optional[int]) -> str:
        if op_id is None:
            return "not dumped"
        if op_id in bad_ids:
            return "bad"
        o = q.op_by_id(op_id)
        return "finite" if o is not None and (o.nan is not None or o.evidence == "opdebug") else "unknown"

    first_row = {}
    for r in rows:  # each rank's first row: the op the engine judged
        first_row.setdefault(r["rank"], r)
    candidates = []
    for f in doc["first_bad"]:
        r = first_row.get(f["rank"])
        op = q.op_by_id(r["op_id"]) if r else None
        if op is None:
            continue
        ins, outs = _tensor_facts(q, op)
        fb = f.get("first_bad") or {}
        bad_out = next((o for o in outs if o.get("nan") or o.get("posinf") or o.get("neginf")
                        or o.get("recorded_nonfinite")), None)
        slot = fb.get("slot", bad_out["slot"] if bad_out else 0)
        nb = _neighbourhood(q, op, verdict_of)
        candidates.append({
            "origin": {"name": op.name, "type": op.type, "rank": op.rank, "step": op.step, "io": "output",
                       "slot": slot, "judgement": f["reason"], "kind": f["judgement"],
                       "exec_index": op.exec_index, "first_ts": op.first_ts, "evidence": f.get("evidence"),
                       "first_bad_index": fb.get("index"), "source": _source(q, op)},
            "inputs": ins, "outputs": outs, "neighbourhood": nb, "redump_config": _redump(op, nb)})
    places = {}
    for r in rows:
        k = (r["rank"], r["step"])
        places[k] = places.get(k, 0) + 1
    evidence: dict[str, int] = {}
    for p in doc["scanned"]:
        evidence[p["evidence"]] = evidence.get(p["evidence"], 0) + 1
    return {"candidates": candidates,
            "bad_places": [{"rank": r, "step": s, "bad_ops": n} for (r, s), n in sorted(places.items())],
            "covered": {"places": [{"rank": p["rank"], "step": p["step"], "ops": p["ops"], "evidence": p["evidence"],
                                    "unknown": p["unknown"]} for p in doc["scanned"]],
                        "not_covered": [dict(p, why=_NOT_JUDGED)
                                        for p in doc["not_scanned"]],
                        "evidence": evidence,
                        "unreadable": doc["problems"]}}


def _decide_overflow(candidates: list[dict]) -> Optional[dict]:
    """``first_rank`` (the overflow engine's whole-job rule) over each rank's first bad op."""
    firsts = []
    for c in candidates:
        o = c["origin"]
        firsts.append(RankFirst(o["rank"], o["step"], o["exec_index"], o["name"], o["type"], o.get("first_ts"),
                                Judgement(o["kind"], o["judgement"]) if o.get("kind") else None, {"c": c}))
    best, why = first_rank(firsts)
    if best is None:
        return None
    if all(f.judgement is not None and f.judgement.kind == "received" for f in firsts) and len(firsts) == 1:
        why += ("; it received the values through a collective and no other rank read here went bad: the rank "
                "that made them was not read (triage the other hosts' ranks and --merge the documents)")
    return dict(best.extra["c"], why=why)


def _spread_overflow(best: dict, candidates: list[dict], bad_places: list[dict]) -> dict[str, Any]:
    o = best["origin"]
    total = sum(p["bad_ops"] for p in bad_places)
    return {"bad_ops_after": max(0, total - 1),
            "bad_places": bad_places,
            "ranks_received": sorted(c["origin"]["rank"] for c in candidates
                                     if c["origin"]["kind"] == "received" and c["origin"]["rank"] != o["rank"]),
            "ranks_bad": sorted({p["rank"] for p in bad_places}),
            "later_steps": sorted({p["step"] for p in bad_places if p["step"] > o["step"]})}


# -- with a golden: the compare engine ----------------------------------------------------------


def _same(row: dict[str, Any], fd: dict[str, Any]) -> bool:
    return all(row.get(k) == fd.get(k) for k in ("name", "io", "slot", "step", "rank"))


def _compare(golden: "DumpQuery", target: "DumpQuery", rank: Axis, step: Axis,
             progress: Optional[Callable[[int, int], None]]) -> dict[str, Any]:
    from dumpscope.core.engines.compare.places import compare_places

    doc = compare_places(golden, target, rank=rank, step=step, progress=progress, spool_rows=True)
    fd = doc.get("first_divergence")
    worst: dict[int, int] = {}  # target op id → worst verdict
    errors: dict[tuple[int, int], set] = {}
    fd_rows: list[dict] = []
    unreadable: list[dict] = []
    n_rows = 0
    modes: dict[str, int] = {}
    for r in doc["rows"]:
        n_rows += 1
        modes[r.get("mode") or "tensor"] = modes.get(r.get("mode") or "tensor", 0) + 1
        tid = r.get("target_op_id")
        v = _VERDICT_RANK.get(r.get("verdict"), 0)
        if tid is not None and v >= worst.get(tid, 0):
            worst[tid] = v
        if str(r.get("rule") or "").startswith("unreadable"):  # compare's row for a tensor it could not read
            side = r.get("target") or {}
            unreadable.append({"path": _rel(side.get("file"), target.root) or r["name"], "error": r["rule"]})
        if r.get("verdict") == "error":
            errors.setdefault((r.get("target_rank", r["rank"]), r.get("target_step", r["step"])), set()).add(r["name"])
        if fd and r["name"] == fd["name"] and r.get("step") == fd.get("step") and r.get("rank") == fd.get("rank"):
            fd_rows.append(r)
    names = {v: k for k, v in _VERDICT_RANK.items()}

    def verdict_of(op_id: Optional[int]) -> str:
        if op_id is None:
            return "not dumped"
        return names[worst[op_id]] if op_id in worst else "not compared"

    candidates = []
    fd_row = next((r for r in fd_rows if _same(r, fd)), fd_rows[0] if fd_rows else None) if fd else None
    if fd and fd_row is not None:
        op = target.op_by_id(fd_row["target_op_id"])
        nb = _neighbourhood(target, op, verdict_of) if op is not None else {"graph": False, "levels": {}, "cut": {}}
        tr, ts = fd.get("target_rank", fd["rank"]), fd.get("target_step", fd["step"])
        candidates.append({
            "origin": {"name": fd_row.get("target_name") or fd["name"], "golden_name": fd["name"],
                       "type": fd.get("type"), "rank": tr, "step": ts, "golden_rank": fd["rank"],
                       "golden_step": fd["step"], "io": fd["io"], "slot": fd["slot"], "judgement": fd.get("rule"),
                       "kind": fd.get("origin"), "cause": fd.get("cause"), "exec_index": fd_row.get("exec_index"),
                       "source": _compare_source(target, op, fd_row.get("source"))},
            "inputs": [_pair(r, golden.root, target.root) for r in fd_rows if r["io"] == "input"],
            "outputs": [_pair(r, golden.root, target.root) for r in fd_rows if r["io"] == "output"],
            "neighbourhood": nb, "redump_config": _redump(op, nb) if op is not None else None,
            **({"compare_reason": fd["reason"]} if fd.get("reason") else {})})
    # compare's own document-level answer (everything but the rows and the lists of names), passed on as it
    # is: keys compare adds later (its precision, its evidence of no divergence) reach the report unchanged
    own = {k: v for k, v in doc.items() if k not in ("rows", "places", "unmatched_golden", "unmatched_target",
                                                      "unmatched_tensors", "problems", "unmatched_places")}
    places = doc.get("places") or [{"golden": doc["golden"], "target": doc["target"], "rows": n_rows,
                                    "first_divergence": fd}]
    return {"candidates": candidates, "compare": own,
            "bad_places": [{"rank": r, "step": s, "bad_ops": len(v)} for (r, s), v in sorted(errors.items())],
            "covered": {"places": [{"rank": p["target"].get("rank"), "step": p["target"].get("step"),
                                    "golden_rank": p["golden"].get("rank"), "golden_step": p["golden"].get("step"),
                                    "rows": p["rows"]} for p in places],
                        "not_covered": [dict(p, side=side, why=f"only in the {side} dump: nothing to compare with")
                                        for side in ("golden", "target")
                                        for p in (doc.get("unmatched_places") or {}).get(side, [])],
                        "evidence": modes,
                        "unmatched": {"golden_ops": len(doc["unmatched_golden"]),
                                      "target_ops": len(doc["unmatched_target"]),
                                      "tensors": len(doc.get("unmatched_tensors", []))},
                        "compared": doc.get("compared", {}),
                        "unreadable": unreadable}}  # the trees' problems: covered.problems (from each tree)


def _compare_source(target: "DumpQuery", op: Optional["OpRow"], row_source: Optional[dict]) -> list[dict[str, Any]]:
    """The target's own frames (the run that went wrong); compare's source line (found on the golden side)
    where the target has none."""
    src = _source(target, op) if op is not None else []
    if row_source and not any(f["user"] for f in src[:1]):
        src.insert(0, dict(_frame(row_source), user=True))
    return src


def _pair(r: dict[str, Any], golden_root: str, target_root: str) -> dict[str, Any]:
    """One tensor of the origin: target beside golden, with compare's verdict and metrics."""
    def side(s: Optional[dict], root: str) -> Optional[dict]:
        return None if s is None else dict(s, file=_rel(s.get("file"), root))
    out = {"io": r["io"], "slot": r["slot"], "verdict": r.get("verdict"), "rule": r.get("rule"),
           "cosine": r.get("cosine"), "max_abs_err": r.get("max_abs_err"), "max_rel_err": r.get("max_rel_err")}
    out.update({k: r[k] for k in _ROW_EXTRA if k in r})  # compare's own judgement of the tensor, as it gives it
    out.update(target=side(r.get("target"), target_root), golden=side(r.get("golden"), golden_root))
    return out


#: row keys passed on beside the metrics when compare gives them (its judgement at the run's precision)
_ROW_EXTRA = ("judgement", "rel_err", "allowed", "precision", "mode", "kind", "origin")


def compare_words(doc: dict[str, Any]) -> None:
    """With ``--golden`` and no divergence: compare's own words for why (its ``evidence.text``), after
    the places covered, so "clean" says what it rests on."""
    if doc["mode"] != "compare" or doc["verdict"] != CLEAN:
        return
    texts = list(dict.fromkeys(str((c.get("evidence") or {}).get("text")) for c in doc.get("compare", [])
                               if (c.get("evidence") or {}).get("text")))
    if texts:
        doc["why"] += ": " + "; ".join(t.removeprefix("no divergence: ") for t in texts)


def _decide_divergence(candidates: list[dict]) -> Optional[dict]:
    """The first divergence as compare orders places (``compare.places.job_first_divergence``: the overflow
    engine's ``first_rank``): earliest golden step; within it a rank whose first divergence is a collective
    received it, so one whose first divergence computes comes first; then execution index, then rank."""
    if not candidates:
        return None
    from dumpscope.core.engines.overflow.origin import collective_kind

    firsts = [RankFirst(o["golden_rank"], o["golden_step"], o.get("exec_index"), o["name"], o.get("type") or "", None,
                        Judgement("received" if collective_kind(o.get("type") or "", o["name"]) else "born", ""),
                        {"c": c}) for c in candidates for o in [c["origin"]]]
    chosen, why = first_rank(firsts)
    best = chosen.extra["c"] if chosen is not None else candidates[0]
    o = best["origin"]
    reason = why if len(candidates) > 1 else best.get("compare_reason")  # several places diverged in that step
    if reason:
        return dict(best, why=f"first divergence over the places compared: {reason}")
    return dict(best, why=f"first divergence over the places compared: rank {o['golden_rank']} step "
                          f"{o['golden_step']} (earliest step, then rank)")


def _spread_divergence(best: dict, bad_places: list[dict]) -> dict[str, Any]:
    o = best["origin"]
    return {"bad_ops_after": max(0, sum(p["bad_ops"] for p in bad_places) - 1), "bad_places": bad_places,
            "ranks_received": [], "ranks_bad": sorted({p["rank"] for p in bad_places}),
            "later_steps": sorted({p["step"] for p in bad_places if p["step"] > o["step"]})}


# -- the document ---------------------------------------------------------------------------------


def _files(q: "DumpQuery") -> dict[str, Any]:
    """What was read of one tree: its files' fates and the problems (every file is read, a named
    problem, or counted as not recognised)."""
    s = q.summary()
    acc = s.get("accounting") or {}
    return {"path": q.root, "layouts": [lay["name"] for lay in s["layouts"]], "ranks": s["ranks"],
            "steps": s["steps"], "files": s["files"], "not_recognised": s["skipped_files"],
            "accounting": acc, "problems": s["problems"], "other_dumps": s.get("other_dumps", [])}


class PlaceMissing(ValueError):
    """A --rank/--step not in the dump (the message lists the ones that are)."""


def _check_place(q: "DumpQuery", rank: Optional[int], step: Optional[int]) -> None:
    ranks = q.ranks()
    if rank is not None and rank not in ranks:
        raise PlaceMissing(f"rank {rank} is not in {q.root} (it has {', '.join(map(str, ranks)) or 'none'})")
    steps = q.steps(rank)
    if step is not None and step not in steps:
        where = f" at rank {rank}" if rank is not None else ""
        raise PlaceMissing(f"step {step} is not in {q.root}{where} (it has {', '.join(map(str, steps)) or 'none'})")


def triage(target: "DumpQuery", golden: Optional["DumpQuery"] = None, rank: Axis = "all", step: Axis = "all",
           progress: Optional[Callable[[int, int], None]] = None) -> dict[str, Any]:
    """The triage document (CLI.md ``triage``) of ``target``, against ``golden`` when given."""
    if golden is None:
        _check_place(target, _axis(rank), _axis(step))
        part = _overflow(target, _axis(rank), _axis(step), progress)
        mode = "overflow"
    else:
        part = _compare(golden, target, rank if rank is not None else "all", step if step is not None else "all",
                        progress)
        mode = "compare"
    inputs = [{"role": "target", **_files(target)}] + ([{"role": "golden", **_files(golden)}] if golden else [])
    doc = _assemble(mode, part["candidates"], part["bad_places"], [part["covered"]], inputs,
                    {"rank": rank if rank is not None else "all", "step": step if step is not None else "all"})
    if "compare" in part:
        doc["compare"] = [part["compare"]]
        compare_words(doc)
    return doc


def _assemble(mode: str, candidates: list[dict], bad_places: list[dict], covered: list[dict],
              trees: list[dict], asked: dict[str, Any], hosts: int = 1) -> dict[str, Any]:
    best = _decide_overflow(candidates) if mode == "overflow" else _decide_divergence(candidates)
    cov = _merge_covered(covered, trees)
    if best is not None:
        verdict = OVERFLOW if mode == "overflow" else DIVERGENCE
    else:
        verdict = CLEAN if cov["places"] else INCOMPLETE
    spread = None
    if best is not None:
        spread = _spread_overflow(best, candidates, bad_places) if mode == "overflow" else \
            _spread_divergence(best, bad_places)
    return {
        "format": FORMAT,
        "verdict": verdict,
        "mode": mode,
        "why": best["why"] if best else _why_clean(mode, cov),
        "origin": best["origin"] if best else None,
        "inputs": best["inputs"] if best else [],
        "outputs": best["outputs"] if best else [],
        "neighbourhood": best["neighbourhood"] if best else None,
        "spread": spread,
        "covered": cov,
        "redump_config": best["redump_config"] if best else None,
        "asked": asked,
        "hosts": hosts,
        "candidates": candidates,
        "bad_places": bad_places,
    }


def _why_clean(mode: str, cov: dict[str, Any]) -> str:
    if not cov["places"]:
        return "nothing could be judged: no place was covered"
    what = "no overflow, NaN or Inf" if mode == "overflow" else "no divergence"
    return f"{what} in the {len(cov['places'])} place(s) covered"


def _merge_covered(parts: list[dict], trees: list[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {"places": [], "not_covered": [], "evidence": {}, "unreadable": []}
    for c in parts:
        out["places"] += c["places"]
        out["not_covered"] += c["not_covered"]
        out["unreadable"] += c["unreadable"]
        for k, v in c["evidence"].items():
            out["evidence"][k] = out["evidence"].get(k, 0) + v
        for key in ("unmatched", "compared"):
            if key in c:
                acc = out.setdefault(key, {})
                for k, v in c[key].items():
                    acc[k] = acc.get(k, 0) + v
    out["places"].sort(key=lambda p: (p["step"], p["rank"]))
    out["trees"] = trees
    out["not_recognised"] = sum(t["not_recognised"] for t in trees)
    out["problems"] = [dict(p, tree=t["path"]) for t in trees for p in t["problems"]]
    return out


class MergeError(ValueError):
    """Documents that cannot be merged (the message names the file and why)."""


def merge(docs: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One answer from per-host triage documents (``triage --json`` of each host's ranks): the
    candidates of every host decided by the same rule one run over the whole job applies."""
    docs = list(docs)
    try:
        return _merge(docs)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        names = ", ".join(n for n, _ in docs)
        raise MergeError(f"{names}: a document lacks what triage --json writes ({type(exc).__name__}: {exc}); "
                         "make them again with this version") from None


def _merge(docs: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    mode = None
    candidates: list[dict] = []
    bad: dict[tuple[int, int], int] = {}
    covered: list[dict] = []
    trees: list[dict] = []
    asked = None
    n = 0
    seen: dict[tuple[int, int], str] = {}
    compare: list[dict] = []
    for name, d in docs:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise MergeError(f"{name}: not a dumpscope triage --json document")
        if mode is not None and d["mode"] != mode:
            raise MergeError(f"{name}: a {d['mode']} triage cannot be merged with {mode} triages "
                             "(use --golden on every host or on none)")
        mode = d["mode"]
        for p in d["covered"]["places"]:  # a place in two documents would be counted twice
            k = (p["rank"], p["step"])
            if k in seen:
                raise MergeError(f"{name}: rank {k[0]} step {k[1]} is also in {seen[k]}; merge each place once "
                                 "(one document per host, each on its own ranks)")
            seen[k] = name
        asked = asked or d.get("asked")
        candidates += d["candidates"]
        for p in d["bad_places"]:
            k = (p["rank"], p["step"])
            bad[k] = bad.get(k, 0) + p["bad_ops"]
        cov = d["covered"]
        covered.append({k: cov.get(k, [] if k != "evidence" else {}) for k in
                        ("places", "not_covered", "evidence", "unreadable")}
                       | {k: cov[k] for k in ("unmatched", "compared") if k in cov})
        trees += cov.get("trees", [])
        compare += d.get("compare", [])
        n += d.get("hosts", 1)
    if mode is None:
        raise MergeError("--merge: no documents given")
    bad_places = [{"rank": r, "step": s, "bad_ops": v} for (r, s), v in sorted(bad.items())]
    out = _assemble(mode, candidates, bad_places, covered, trees, asked or {}, hosts=n)
    if compare:
        out["compare"] = compare
        compare_words(out)
    return out


def exit_status(doc: dict[str, Any]) -> int:
    """0 clean, 3 trouble found, 1 nothing could be judged."""
    return EXIT.get(doc.get("verdict"), 1)
