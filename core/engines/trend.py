"""One tensor across the steps (and ranks) of a job: ``dumpscope trend`` and the detail sparkline.

The op is found by name at every place; each point is that tensor's statistics there (computed
from the data and cached in the index, or the dump's own statistics for stats-only dumps).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional, Union

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery, OpRow

POINT_KEYS = ("count", "min", "max", "mean", "std", "l2norm", "nan", "posinf", "neginf")
_BARS = "▁▂▃▄▅▆▇█"


def _same_name(q: "DumpQuery", op: "OpRow", rank: Optional[int],
               run: Optional[int] = None) -> list[tuple[int, "OpRow"]]:
    """(run, op) of that name at every step (and rank): every execution where a place has several (a loop
    body runs once per iteration), or only the ``run``-th; by step, rank, then run."""
    out: dict[tuple[int, int], list["OpRow"]] = {}
    for o in q.runs_named(op.name, rank):
        out.setdefault((o.rank, o.step), []).append(o)
    picked = []
    for key in sorted(out, key=lambda k: (k[1], k[0])):
        runs = list(enumerate(out[key]))
        picked.extend(runs if run is None else runs[run:run + 1])
    return picked


def find_op(q: "DumpQuery", text: str, rank: Optional[int]) -> "OpRow":
    """The op named ``text`` (graph or file spelling) at the first step (of ``rank``) that has it;
    else the lookup rules of ``resolve_op`` at the lowest place (suffixes, close matches in the error)."""
    op = q.first_named(text, rank)
    return op if op is not None else q.resolve_op(text, rank, None)


def trend(q: "DumpQuery", text: str, io: str = "output", slot: int = 0,
          rank: Union[int, str, None] = None, run: Optional[int] = None) -> dict[str, Any]:
    """``{"op", "io", "slot", "points": [...], "problems": [...]}`` (CLI.md ``trend``).

    ``rank``: a rank, "all", or None (the lowest rank); ``run``: only that execution in each step of
    an op that runs several times a step (None: every execution, each a point with its ``run``)."""
    from dumpscope.core.tensors.load import TensorLoadError

    want = None if rank == "all" else (int(rank) if rank is not None else (q.ranks() or [0])[0])
    op = find_op(q, text, want)
    doc = trend_of(q, op, io, slot, want, TensorLoadError, run=run)
    if not doc["points"] and doc["problems"] and all(p["error"] == f"no {io} {slot} dumped" for p in doc["problems"]):
        have = ", ".join(dict.fromkeys(t.label for t in q.tensors(op.id))) or "none"
        raise TrendSelectorError(f"{op.name} has no {io} {slot} at any step (its tensors: {have})")
    if run is not None and not doc["points"] and not doc["problems"]:
        most = max((len(q.runs(o)) for _k, o in _same_name(q, op, want)), default=1)
        raise TrendSelectorError(f"{op.name} runs at most {most} time{'s' if most != 1 else ''} a step: run {run} "
                                 f"does not exist (runs 0..{most - 1})")
    return doc


class TrendSelectorError(ValueError):
    """A --io/--slot/--run that the op has at no step (the message lists what it has)."""


def trend_of(q: "DumpQuery", op: "OpRow", io: str, slot: int, rank: Optional[int],
             load_error: type = Exception, run: Optional[int] = None) -> dict[str, Any]:
    from dumpscope.core.query import shown_step

    points: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    for k, o in _same_name(q, op, rank, run):
        where = {"rank": o.rank, "step": shown_step(o.step), "run": k}  # a constant: in no step (null)
        tensors = [t for t in q.tensors(o.id) if t.io == io and t.slot == slot]
        if not tensors:
            problems.append({**where, "error": f"no {io} {slot} dumped"})
            continue
        t = tensors[0]
        if t.storage == "value":
            problems.append({**where, "error": f"{io} {slot} is not a tensor"})
            continue
        try:
            st = q.tensor_stats(t)
        except (load_error, ValueError, OSError) as exc:
            problems.append({**where, "error": str(exc).splitlines()[0]})
            continue
        point = {**where, "exec_index": o.exec_index}
        point.update({k: st.get(k) for k in POINT_KEYS})
        point["source"] = st.get("source", "tensor")
        if st.get("recorded_nonfinite"):  # a statistics dump's own NaN/Inf max, min…: not "no data"
            point["recorded_nonfinite"] = dict(st["recorded_nonfinite"])
        point["nonfinite"] = nonfinite(point)
        points.append(point)
    return {"path": q.root, "op": op.name, "io": io, "slot": slot, "points": points, "problems": problems}


def nonfinite(p: dict[str, Any]) -> Optional[bool]:
    """Whether the tensor held NaN/Inf at that point: True on a count or a recorded non-finite statistic
    (msprobe writes ``"Max": NaN`` and no counts), False when the counts or the recorded extremes say
    none, None when nothing says (a statistics dump without them)."""
    counts = [p.get(k) for k in ("nan", "posinf", "neginf")]
    if any(counts) or p.get("recorded_nonfinite"):
        return True
    if all(c is not None for c in counts):
        return False
    if p.get("source") == "stats" and all(isinstance(p.get(k), (int, float)) for k in ("max", "min")):
        return False  # finite extremes: no NaN (it would make them NaN) and no Inf (it would be one)
    return None


def series(points: list[dict[str, Any]], key: str) -> list[Optional[float]]:
    """``key`` of each point for ``sparkline``: NaN where the value is missing because the tensor held
    non-finite values (drawn ``×``), None where there is no data (drawn ``·``)."""
    return [p.get(key) if p.get(key) is not None else (math.nan if point_bad(p) else None) for p in points]


def sparkline(values: list[Optional[float]]) -> str:
    """One character per value (low ▁ … █ high); "×" where not finite (NaN/Inf), "·" where unknown."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    out = []
    for v in values:
        if v is None:
            out.append("·")
        elif not math.isfinite(v):
            out.append("×")
        elif hi == lo:
            out.append(_BARS[3])
        else:
            out.append(_BARS[min(len(_BARS) - 1, int((v - lo) / (hi - lo) * len(_BARS)))])
    return "".join(out)


def marks(points: list[dict[str, Any]]) -> str:
    """"!" under each step whose tensor holds NaN/Inf, " " elsewhere (aligned with ``sparkline``)."""
    return "".join("!" if point_bad(p) else " " for p in points)


def point_bad(p: dict[str, Any]) -> bool:
    return bool(p.get("nan") or p.get("posinf") or p.get("neginf") or p.get("recorded_nonfinite"))
