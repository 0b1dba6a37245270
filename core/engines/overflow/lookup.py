"""Overflow lookup over the whole job: which op, on which rank and step, first produced Inf/NaN.

Evidence comes three ways: Opdebug status files joined to the op they name, statistics
(NaN/Inf counts without tensor data), and counting the outputs of plain tensor dumps
(``overflow_scan``, cached in the index).  Every rank and step is covered unless narrowed,
and the answer says what was covered (``scanned``): never "none found" about a place not
looked at.  Rows come back ordered by step, then execution order; per rank the first bad op
is judged (``overflow_origin``) and the rank that went bad first is named.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Callable, Optional

from dumpscope.core.formats.opdebug import status_words
from dumpscope.core.layouts.paths import CONSTANTS_STEP
from dumpscope.core.engines.overflow.origin import Judgement, RankFirst, TensorSummary, collective_kind, first_rank, judge_op
from dumpscope.core.engines.overflow.scan import OpCount, PlaceJob, count_ops, scan_places

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery, OpRow

def places(q: "DumpQuery", rank: Optional[int] = None, step: Optional[int] = None) -> list[dict[str, Any]]:
    """Every (rank, step) with ops, and what evidence its ops carry, ordered by step then rank."""
    return q.overflow.places(rank, step)


def _scan(q: "DumpQuery", todo: list[dict[str, Any]], scan: str,
          progress: Optional[Callable[[int, int], None]], workers: Optional[int]
          ) -> tuple[dict[int, OpCount], dict[tuple[int, int], tuple[int, int]]]:
    """Count the outputs of every op without evidence in the places ``todo``, a place at a time.

    Returns the counts of bad ops and of ops the index already calls bad (the report needs no
    others: clean counts are recorded on the ops), and per place (ops looked at, ops counted)."""
    ask = q.overflow
    looked: dict[tuple[int, int], int] = {}
    total = 0
    for p in todo:
        key = (p["rank"], p["step"])
        n_ops, n_units = ask.unscanned_count(p["rank"], p["step"], scan)
        if n_ops:
            looked[key] = n_ops
            total += n_units

    def loader(rank: int, step: int) -> Callable[[], list[tuple]]:
        def units() -> list[tuple]:
            ids = ask.unscanned_ids(rank, step, scan)
            rows = [u for u in ask.units_at(rank, step) if u[1] in ids]
            missing = ids - {u[1] for u in rows}  # ops whose units were stored under another place
            return rows + (ask.units_of_ops(sorted(missing)) if missing else [])
        return units

    def keep(rank: int, step: int) -> set[int]:
        return ask.unscanned_ids(rank, step, scan, bad_only=True)

    jobs = (PlaceJob((r, s), loader(r, s), keep(r, s)) for (r, s) in looked)
    counts, counted = scan_places(q, jobs, total, progress, workers)
    return counts, {key: (n, counted.get(key, 0)) for key, n in looked.items()}


def _summaries(q: "DumpQuery", op: "OpRow", counted: Optional[OpCount]) -> list[TensorSummary]:
    from dumpscope.core.tensors.load import TensorLoadError

    out = []
    tensors = q.tensors(op.id)
    for t in tensors:
        if t.storage == "value":
            continue
        s = TensorSummary(t.io, t.slot, t.dtype)
        try:
            st = q.tensor_stats(t)
        except (TensorLoadError, ValueError, OSError):
            st = {}
        s.min, s.max = st.get("min"), st.get("max")
        s.nan, s.posinf, s.neginf = st.get("nan"), st.get("posinf"), st.get("neginf")
        if t.storage == "none" and not s.known:
            _from_extremes(s, t.stats or {})
        out.append(s)
    dumped = {t.slot for t in tensors if t.io == "input"}  # non-tensor arguments (msprobe values) count as dumped
    out.extend(TensorSummary("input", slot, dtype, dumped=False) for slot, dtype in _undumped_inputs(q, op, dumped))
    return out


def _undumped_inputs(q: "DumpQuery", op: "OpRow", have: set[int]) -> list[tuple[int, str]]:
    """(slot, dtype) of the op's tensor inputs that have no file.  Where a MindSpore kernel graph describes
    the op, its tensor inputs (a tuple or scalar value such as ReduceMean's axis ``()`` and monads carry no
    data: not counted); elsewhere the slots below the highest dumped input slot that were skipped.
    MindSpore leaves out an input that comes from another kernel graph (a loop's result), and an
    ``input_output: 2`` dump every input: a judgement must not call them finite, their data was never seen."""
    descs: list = []
    if op.producer == "mindspore":  # a MindSpore kernel graph lists every input (checked on 2.10's .ir)
        try:
            descs = q.graph_details(op).get("input_descs") or []
        except Exception:  # the graph is a hint here: without it the dumped slots alone speak
            descs = []
    if descs:
        want = {k: str(d["dtype"]) for k, d in enumerate(descs)
                if isinstance(d, dict) and d.get("dtype") and not d.get("abstract")}
    else:
        want = {k: "" for k in range(max(have, default=-1))}
    return sorted((k, dt) for k, dt in want.items() if k not in have)


def _from_extremes(s: TensorSummary, raw: dict[str, Any]) -> None:
    """Statistics without NaN/Inf counts (msprobe's max/min/mean/l2norm): the same reading as the index's
    (``units.nonfinite_sums``): a NaN max or min says NaN (max and min propagate it), a +inf max +Inf, a
    -inf min -Inf.  The mean and norm say nothing of their own where max and min are known: +inf and
    -inf together make the mean NaN without any NaN element.  Without max and min, a NaN or infinite
    mean or norm still says the tensor held such values; all finite says it held none."""
    def num(k: str) -> Optional[float]:
        v = raw.get(k)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    hi, lo = num("max"), num("min")
    if hi is not None and lo is not None:
        s.nan = int(math.isnan(hi) or math.isnan(lo))
        s.posinf = int(hi == math.inf or lo == math.inf)
        s.neginf = int(lo == -math.inf or hi == -math.inf)
        return
    vals = [raw.get(k) for k in ("max", "min", "mean", "l2norm")]
    nums = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not nums:
        return
    if any(math.isnan(v) for v in nums):
        s.nan, s.posinf, s.neginf = 1, 0, 0
    elif any(math.isinf(v) for v in nums):
        s.nan = 0
        s.posinf = int(any(v == math.inf for v in nums))
        s.neginf = int(any(v == -math.inf for v in nums))
    elif len(nums) == len([v for v in vals if v is not None]):
        s.nan = s.posinf = s.neginf = 0


def _first_bad_index(q: "DumpQuery", op: "OpRow", counted: Optional[OpCount]) -> Optional[dict[str, Any]]:
    if counted is None or counted.first_bad is None:
        return None
    slot, flat = counted.first_bad
    for t in q.tensors(op.id):
        if t.io == "output" and t.slot == slot and t.shape:
            try:
                import numpy as np

                return {"io": "output", "slot": slot, "index": [int(i) for i in np.unravel_index(flat, t.shape)]}
            except ValueError:
                break
    return {"io": "output", "slot": slot, "index": [flat]}


def _cached_first_bad(q: "DumpQuery", op: "OpRow") -> Optional[OpCount]:
    """The counts of an op's outputs kept by an earlier scan (for the first bad index)."""
    q.overflow.ensure_counts_table()
    uids = [u[0] for u in q.overflow.units_of_ops([op.id])]
    found = q.overflow.cached_counts(uids)
    if not found:
        return None
    c = OpCount()
    for _uid, tensors, _err in found.values():
        c.add_unit(tensors)
    return c


def overflow_report(q: "DumpQuery", rank: Optional[int] = None, step: Optional[int] = None, scan: str = "auto",
                    progress: Optional[Callable[[int, int], None]] = None,
                    workers: Optional[int] = None) -> dict[str, Any]:
    """Overflow evidence of every rank and step (or those given), CLI.md ``overflow`` plus the judgement.

    ``scan``: "auto" counts the outputs of ops without Opdebug or statistics evidence, in places
    without Opdebug evidence (an Opdebug run flags every overflow of its place); "all" counts every
    op's outputs (except Opdebug-flagged ones, counted anyway); "none" never reads tensor data.
    """
    found = places(q, rank, step)
    if scan == "auto":
        todo = [p for p in found if not p["opdebug"] and p["unknown"]]
    elif scan == "all":
        todo = found
    else:
        todo = []
    counts, looked = _scan(q, todo, scan, progress, workers) if todo else ({}, {})
    if todo:  # evidence changed: count again (and overlay what the index may not have taken)
        found = places(q, rank, step)
        for p in found:
            seen = looked.get((p["rank"], p["step"]))
            if seen is not None:
                n_ops, n_counted = seen
                left = n_ops - n_counted
                p["unknown"] = min(p["unknown"], left)
                p["tensor"] = max(p["tensor"], n_ops - left)
    bad_ops = q.overflow.bad_ops(rank, step)
    for op_id, c in counts.items():  # scanned now, not yet visible in the index (a writer held it)
        if c.bad and op_id not in bad_ops:
            op = q.op_by_id(op_id)
            if op is not None:
                bad_ops[op_id] = op
    flagged = [op for op in bad_ops.values() if op.status]
    if flagged:  # Opdebug-flagged ops: count their outputs too (few)
        fresh = count_ops(q, {op.id for op in flagged}, q.overflow.units_of_ops([op.id for op in flagged]))
        counts.update(fresh)
    rows: list[dict[str, Any]] = []
    constant_rows: list[dict[str, Any]] = []
    ordered = sorted(bad_ops.values(), key=lambda o: (o.step, o.exec_index is None, o.exec_index or 0, o.rank, o.id))
    for op in ordered:
        c = counts.get(op.id)
        if op.status:
            evidence = "opdebug"
            nan, pos, neg = (c.nan, c.posinf, c.neginf) if c is not None else (0, 0, 0)
        elif c is not None and c.counted and (op.evidence in (None, "tensor") or scan == "all"):
            evidence = "tensor"
            nan, pos, neg = c.nan, c.posinf, c.neginf
        else:
            evidence = op.evidence if op.evidence in ("tensor", "stats") else "stats"
            nan, pos, neg = op.nan or 0, op.posinf or 0, op.neginf or 0
        if not (op.status or nan or pos or neg):
            continue
        if op.step == CONSTANTS_STEP:  # a value the graph holds (an -inf mask is normal): no step, never an origin
            constant_rows.append({"name": op.name, "type": op.type, "rank": op.rank, "evidence": evidence,
                                  "nan": nan, "posinf": pos, "neginf": neg, "op_id": op.id})
            continue
        rows.append({
            "name": op.name, "type": op.type, "rank": op.rank, "step": op.step, "exec_index": op.exec_index,
            "evidence": evidence, "status": op.status if op.status else None,
            "status_words": status_words(op.status, "AI Core") if op.status else [],
            "nan": nan, "posinf": pos, "neginf": neg, "op_id": op.id, "first_ts": op.first_ts,
        })
    firsts = _rank_firsts(q, rows, bad_ops, counts)
    best, why = first_rank(firsts)
    constants = [p for p in found if p["step"] == CONSTANTS_STEP]  # MindSpore's constants/: not a step
    found = [p for p in found if p["step"] != CONSTANTS_STEP]
    scanned = [p for p in found if p["unknown"] < p["ops"] or p["opdebug"]]
    not_scanned = [{"rank": p["rank"], "step": p["step"], "ops": p["ops"]} for p in found if p not in scanned]
    return {
        "path": q.root,
        "ops": rows,
        "scanned": [{"rank": p["rank"], "step": p["step"], "ops": p["ops"],
                     "evidence": "opdebug" if p["opdebug"] else _evidence(p),
                     "unknown": 0 if p["opdebug"] else p["unknown"]}
                    for p in scanned],
        "not_scanned": not_scanned,
        "first_bad": [_first_json(f) for f in firsts],
        "origin": None if best is None else dict(_first_json(best), reason=why,
                                                  op_reason=best.judgement.reason if best.judgement else ""),
        "problems": _problems(q, rank, step),
        # MindSpore's constants (no step: they did not run): per rank, how many were looked at, and those
        # holding NaN/Inf (a -inf attention mask is a value, not an overflow)
        "constants": [{"rank": p["rank"], "values": p["ops"], "unknown": p["unknown"],
                       "nonfinite": [r for r in constant_rows if r["rank"] == p["rank"]]} for p in constants],
    }


def _evidence(p: dict[str, Any]) -> str:
    kinds = [k for k in ("stats", "tensor") if p[k]]
    return "+".join(kinds) or "none"


def _rank_firsts(q: "DumpQuery", rows: list[dict[str, Any]], bad_ops: dict[int, "OpRow"],
                 counts: dict[int, OpCount]) -> list[RankFirst]:
    seen: set[int] = set()
    out: list[RankFirst] = []
    for r in rows:
        if r["rank"] in seen:
            continue
        seen.add(r["rank"])
        op = bad_ops[r["op_id"]]
        c = counts.get(op.id) or (_cached_first_bad(q, op) if r["evidence"] != "stats" else None)
        j = judge_op(op.type, _summaries(q, op, c), op.name)
        out.append(RankFirst(op.rank, op.step, op.exec_index, op.name, op.type, op.first_ts, j,
                             {"first_bad": _first_bad_index(q, op, c), "evidence": r["evidence"]}))
    return out


def _first_json(f: RankFirst) -> dict[str, Any]:
    return {"rank": f.rank, "step": f.step, "exec_index": f.exec_index, "name": f.name, "type": f.type,
            "first_ts": f.first_ts, "judgement": f.judgement.kind if f.judgement else None,
            "reason": f.judgement.reason if f.judgement else "", **f.extra}


def _problems(q: "DumpQuery", rank: Optional[int], step: Optional[int]) -> list[dict[str, str]]:
    """Output tensors an overflow scan could not read (kept in the index, so warm runs say so too)."""
    return [{"path": _rel(q, p), "error": e} for p, e in q.overflow.unreadable_outputs(rank, step)]


def _rel(q: "DumpQuery", path: str) -> str:
    """Paths relative to PATH: documents of several hosts' trees concatenate without clashes."""
    try:
        rel = os.path.relpath(path, q.root)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def find_overflow(q: "DumpQuery", rank: Optional[int] = None, step: Optional[int] = None, scan: str = "auto",
                  progress: Optional[Callable[[int, int], None]] = None) -> list[dict[str, Any]]:
    """The rows of ``overflow_report`` (every rank/step unless narrowed)."""
    return overflow_report(q, rank, step, scan, progress)["ops"]


def trouble_places(q: "DumpQuery") -> dict[tuple[int, int], tuple[int, int]]:
    """Ops with overflow evidence already in the index, per (rank, step): (count, first exec index).

    Evidence from Opdebug, statistics and earlier scans; nothing is read (explorer pickers, status)."""
    return {(r, s): (n, e if e is not None else 0) for r, s, n, e in q.overflow.trouble_places()}


def first_bad_op(q: "DumpQuery", rank: int, step: int) -> Optional["OpRow"]:
    """The first op of a place (execution order) with overflow evidence in the index, or None."""
    return q.overflow.first_bad_op(rank, step)


def judge(q: "DumpQuery", op: "OpRow") -> Judgement:
    """Why ``op`` holds non-finite values: born there, inherited, received… (reads its tensors' statistics)."""
    return judge_op(op.type, _summaries(q, op, None), op.name)


def start_place(q: "DumpQuery", trouble: dict[tuple[int, int], tuple[int, int]]) -> tuple[tuple[int, int], bool]:
    """Where a view opens: the first place with trouble by the whole-job rule (``first_rank`` on what the
    index knows: earliest step; a rank whose first bad op is a collective received the values, so it
    comes after one whose first bad op computes; then timestamps, else execution index; then rank),
    else the lowest rank and step; and whether it was trouble that chose it.  Nothing is read."""
    if not trouble:
        return q.default_place(), False
    step0 = min(s for _r, s in trouble)
    firsts = []
    for rank, step in sorted(p for p in trouble if p[1] == step0):
        op = first_bad_op(q, rank, step)
        if op is None:  # the index changed since ``trouble`` was read
            continue
        received = Judgement("received", "a collective (not read)") if collective_kind(op.type, op.name) else None
        firsts.append(RankFirst(rank, step, op.exec_index, op.name, op.type, op.first_ts, received))
    best, _why = first_rank(firsts)
    if best is None:
        (rank, step), _ = min(trouble.items(), key=lambda kv: (kv[0][1], kv[1][1], kv[0][0]))
        return (rank, step), True
    return (best.rank, best.step), True
