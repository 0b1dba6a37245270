"""Compare several places (rank/step) of two dumps: ``--rank all``, ``--step all``, and one place of
a dump against another (``--golden-step 0 --target-step 2``, ``--golden-rank 0 --target-rank 1``; the
two dumps may be the same one).

Each pair of places is compared by ``engine.compare_dumps`` (its rules untouched); this module only
chooses the pairs and merges the documents: rows in place order (earliest step first, then rank),
``first_divergence`` the earliest over everything compared, and what could not be paired said.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from dumpscope.core.engines.compare.engine import compare_dumps
from dumpscope.core.engines.compare.measure_many import shared_pool
from dumpscope.core.support.gc_pause import gc_paused
from dumpscope.core.support.row_spool import ChainedRows, RowSpool

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery

Axis = Union[int, str, None]  # a number, "all", or None (the lowest present)


class PlaceError(ValueError):
    """A rank/step asked for is not in a dump (the message names it)."""


def _pick(values_g: list[int], values_t: list[int], both: Axis, g: Optional[int], t: Optional[int],
          what: str) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Pairs of (golden, target) values on one axis, and the values of each side left unpaired."""
    if g is not None or t is not None:
        g = g if g is not None else t
        t = t if t is not None else g
        for side, v, have in (("golden", g, values_g), ("target", t, values_t)):
            if have and v not in have:
                raise PlaceError(f"{what} {v} is not in the {side} dump (it has {', '.join(map(str, have))})")
        return [(g, t)], [], []
    if both == "all":
        common = [v for v in values_g if v in values_t]
        return [(v, v) for v in common], [v for v in values_g if v not in values_t], \
            [v for v in values_t if v not in values_g]
    if both is not None:
        v = int(both)
        if values_g and v not in values_g:
            raise PlaceError(f"{what} {v} is not in the golden dump (it has {', '.join(map(str, values_g))})")
        return [(v, v if v in values_t or not values_t else values_t[0])], [], []
    gv = values_g[0] if values_g else 0
    return [(gv, gv if gv in values_t or not values_t else (values_t[0] if values_t else gv))], [], []


def place_pairs(golden: "DumpQuery", target: "DumpQuery", rank: Axis = None, step: Axis = None,
                golden_rank: Optional[int] = None, target_rank: Optional[int] = None,
                golden_step: Optional[int] = None, target_step: Optional[int] = None
                ) -> tuple[list[tuple[tuple[int, int], tuple[int, int]]], dict[str, list[dict[str, int]]]]:
    """``[((g_rank, g_step), (t_rank, t_step)), ...]`` ordered by golden step, then rank; and the
    places of each side that had no partner."""
    ranks, g_only_r, t_only_r = _pick(golden.ranks(), target.ranks(), rank, golden_rank, target_rank, "rank")
    pairs: list[tuple[tuple[int, int], tuple[int, int]]] = []
    unpaired: dict[str, list[dict[str, int]]] = {"golden": [], "target": []}
    for r in g_only_r:
        unpaired["golden"] += [{"rank": r, "step": s} for s in golden.steps(r)]
    for r in t_only_r:
        unpaired["target"] += [{"rank": r, "step": s} for s in target.steps(r)]
    for gr, tr in ranks:
        g_steps = golden.steps(gr) or ([-1] if golden.count_ops(gr, -1) else [])
        t_steps = target.steps(tr) or ([-1] if target.count_ops(tr, -1) else [])
        steps, g_only_s, t_only_s = _pick(g_steps, t_steps, step, golden_step, target_step, "step")
        pairs += [((gr, gs), (tr, ts)) for gs, ts in steps]
        unpaired["golden"] += [{"rank": gr, "step": s} for s in g_only_s]
        unpaired["target"] += [{"rank": tr, "step": s} for s in t_only_s]
    pairs.sort(key=lambda p: (p[0][1], p[0][0]))
    return pairs, unpaired


def compare_places(golden: "DumpQuery", target: "DumpQuery", rank: Axis = None, step: Axis = None,
                   golden_rank: Optional[int] = None, target_rank: Optional[int] = None,
                   golden_step: Optional[int] = None, target_step: Optional[int] = None,
                   progress: Optional[Callable[[int, int], None]] = None, **kwargs: Any) -> dict[str, Any]:
    """The ``compare`` document over every pair of places asked for (CLI.md keys kept).

    One pair of places: ``compare_dumps``'s own document.  Several: rows of every place (each row says
    its place; ``target_rank``/``target_step`` where the target's differs), ``first_divergence`` the
    first place's in step-then-rank order that has one, and ``places`` with each pair's summary."""
    docs, unpaired = place_docs(golden, target, rank, step, golden_rank, target_rank, golden_step, target_step,
                                progress, **kwargs)
    if len(docs) == 1 and not unpaired["golden"] and not unpaired["target"]:
        return docs[0]
    first = job_first_divergence(target, [d["first_divergence"] for d in docs if d.get("first_divergence")])
    return {
        "rows": _joined([d["rows"] for d in docs]),
        "first_divergence": first,
        "unmatched_golden": [n for d in docs for n in d["unmatched_golden"]],
        "unmatched_target": [n for d in docs for n in d["unmatched_target"]],
        "unmatched_tensors": [n for d in docs for n in d.get("unmatched_tensors", [])],
        "golden": {"path": golden.root},
        "target": {"path": target.root},
        "places": [{"golden": d["golden"], "target": d["target"], "rows": len(d["rows"]),
                    "first_divergence": d.get("first_divergence"),
                    "unmatched_golden": d["unmatched_golden"], "unmatched_target": d["unmatched_target"]}
                   for d in docs],
        "unmatched_places": unpaired,
        "rules": docs[0]["rules"] if docs else "",
        "compared": {k: sum(d.get("compared", {}).get(k, 0) for d in docs)
                     for k in ("ops", "tensors", "golden_ops", "target_ops")},
        "problems": docs[0].get("problems", []) if docs else [],  # of the two trees: the same for every place
    }


def place_docs(golden: "DumpQuery", target: "DumpQuery", rank: Axis = None, step: Axis = None,
               golden_rank: Optional[int] = None, target_rank: Optional[int] = None,
               golden_step: Optional[int] = None, target_step: Optional[int] = None,
               progress: Optional[Callable[[int, int], None]] = None, **kwargs: Any
               ) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, int]]]]:
    """``compare_dumps``'s document of each pair of places asked for, in step-then-rank order (only the
    first lists the trees' problems), and the places left unpaired: what ``compare_places`` joins, and
    what the explorer keeps one place of (the whole job's first divergence's, compared once)."""
    pairs, unpaired = place_pairs(golden, target, rank, step, golden_rank, target_rank, golden_step, target_step)
    with shared_pool(), gc_paused():  # one pool for every place; no collector walks over the rows
        return _compare_each(golden, target, pairs, progress, kwargs), unpaired


def job_first_divergence(target: "DumpQuery", firsts: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The whole job's first divergence among each place's own (in step-then-rank order), by the overflow
    engine's rule (``overflow_origin.first_rank``): the earliest step; within it a place whose first
    divergence is a collective (an all_reduce, a recv) received what differs from another rank, so a place
    whose first divergence computes comes first; then timestamps, else execution index, then rank.
    ``reason`` says why when several places diverged in that step."""
    from dumpscope.core.engines.overflow.origin import Judgement, RankFirst, collective_kind, first_rank

    if len(firsts) <= 1:
        return firsts[0] if firsts else None
    candidates = []
    for fd in firsts:
        rank, step = fd.get("target_rank", fd["rank"]), fd.get("target_step", fd["step"])
        exec_index = first_ts = None
        try:  # where the op ran in the target: the clock the rule compares ranks by
            op = target.resolve_op(fd["name"], rank, step)
            exec_index, first_ts = op.exec_index, op.first_ts
        except Exception:  # a name the target spells otherwise (a cross-framework pair): rank order
            pass
        kind = "received" if collective_kind(fd.get("type") or "", fd["name"]) else "born"
        candidates.append(RankFirst(fd["rank"], fd["step"], exec_index, fd["name"], fd.get("type") or "", first_ts,
                                    Judgement(kind, ""), {"doc": fd}))
    best, why = first_rank(candidates)
    if best is None:
        return firsts[0]
    same_step = [c for c in candidates if c.step == best.step]
    return dict(best.extra["doc"], reason=why) if len(same_step) > 1 else best.extra["doc"]


def _joined(parts: list[Any]) -> Any:
    """The rows of every place in order: a list, or (spooled rows) read from each place's spool in turn."""
    if any(isinstance(p, RowSpool) for p in parts):
        return ChainedRows(parts)
    return [r for p in parts for r in p]


def _compare_each(golden: "DumpQuery", target: "DumpQuery", pairs: list, progress: Any,
                  kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """``compare_dumps`` of each pair of places, in order."""
    docs = []
    for k, ((gr, gs), (tr, ts)) in enumerate(pairs):
        def tick(done: int, total: int, k: int = k) -> None:
            if progress is not None:
                progress(k * 1000 + (1000 * done) // max(total, 1), 1000 * len(pairs))
        # rows of another target place get its rank and step as they are read: not kept printed
        kw = kwargs if (tr, ts) == (gr, gs) else dict(kwargs, row_printer=None)
        doc = compare_dumps(golden, target, rank=gr, step=gs, target_rank=tr, target_step=ts, progress=tick,
                            with_problems=k == 0, **kw)  # the trees' problems: listed once
        if (tr, ts) != (gr, gs):
            if isinstance(doc["rows"], RowSpool):  # added as its rows are read
                doc["rows"].extra.update(target_rank=tr, target_step=ts)
            for row in doc["rows"] if isinstance(doc["rows"], list) else ():
                row["target_rank"], row["target_step"] = tr, ts
            if doc.get("first_divergence"):
                doc["first_divergence"].update(target_rank=tr, target_step=ts)
        docs.append(doc)
    return docs
