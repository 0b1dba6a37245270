"""Quick overflow lookup: which op first produced Inf/NaN or raised an overflow status.

Evidence comes three ways (issue "quick overflow op lookup"): Opdebug status files joined
to the op they name, statistics CSVs (NaN/Inf counts without tensor data), and scanning the
outputs of plain tensor dumps.  Rows come back in execution order; the first is the origin.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Optional

from dumpscope.core.formats.opdebug import status_words
from dumpscope.core.tensor_io import TensorLoadError

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery, OpRow, TensorRow


def _output_counts(q: "DumpQuery", tensors: list["TensorRow"]) -> tuple[int, int, int, bool]:
    nan = pos = neg = 0
    known = False
    for t in tensors:
        if t.io != "output":
            continue
        try:
            st = q.tensor_stats(t)
        except TensorLoadError:
            continue
        if st.get("nan") is None and st.get("posinf") is None and st.get("neginf") is None:
            continue
        known = True
        nan += int(st.get("nan") or 0)
        pos += int(st.get("posinf") or 0)
        neg += int(st.get("neginf") or 0)
    return nan, pos, neg, known


def scan_nonfinite(q: "DumpQuery", ops: list["OpRow"], progress: Optional[Callable[[int, int], None]] = None,
                   workers: int = 2) -> dict[int, tuple[int, int, int]]:
    """Non-finite counts of every op's outputs (stats cached in the index), op id → (nan, +inf, -inf)."""
    out: dict[int, tuple[int, int, int]] = {}

    def one(op: "OpRow") -> tuple[int, tuple[int, int, int, bool]]:
        return op.id, _output_counts(q, q.tensors(op.id))

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dumpscope-scan") as pool:
        for i, (op_id, (nan, pos, neg, known)) in enumerate(pool.map(one, ops)):
            if known:
                out[op_id] = (nan, pos, neg)
            if progress is not None:
                progress(i + 1, len(ops))
    q.record_nonfinite(out)
    return out


def find_overflow(q: "DumpQuery", rank: Optional[int] = None, step: Optional[int] = None, scan: str = "auto",
                  progress: Optional[Callable[[int, int], None]] = None) -> list[dict[str, Any]]:
    """Ops with overflow evidence at one rank/step, in execution order (CLI.md ``overflow``).

    ``scan``: "all" computes output statistics of every op; "none" never reads tensors;
    "auto" scans only when neither Opdebug nor statistics evidence exists.
    """
    rank, step = q.default_place(rank, step)
    ops = q.ops(rank, step)
    opdebug = [op for op in ops if op.status]
    stats_bad = [op for op in ops if (op.nan or op.posinf or op.neginf) and op.evidence != "tensor"]
    scanned: dict[int, tuple[int, int, int]] = {}
    if scan == "all" or (scan == "auto" and not opdebug and not stats_bad):
        scanned = scan_nonfinite(q, [op for op in ops if not op.status], progress)
    rows: list[dict[str, Any]] = []
    for op in ops:
        evidence = None
        nan = pos = neg = 0
        if op.status:
            evidence = "opdebug"
            nan, pos, neg, _known = _output_counts(q, q.tensors(op.id))
        elif op.id in scanned and any(scanned[op.id]):
            evidence = "tensor"
            nan, pos, neg = scanned[op.id]
        elif op.nan or op.posinf or op.neginf:
            evidence = op.evidence if op.evidence in ("tensor", "stats") else "stats"
            nan, pos, neg = op.nan or 0, op.posinf or 0, op.neginf or 0
        if evidence is None:
            continue
        rows.append({
            "name": op.name, "type": op.type, "rank": op.rank, "step": op.step, "exec_index": op.exec_index,
            "evidence": evidence, "status": op.status if op.status else None,
            "status_words": status_words(op.status, "AI Core") if op.status else [],
            "nan": nan, "posinf": pos, "neginf": neg, "op_id": op.id,
        })
    return rows
