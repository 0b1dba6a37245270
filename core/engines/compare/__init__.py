"""Golden-vs-target compare: match (pairs), metrics (numbers), verdict (rules), origin (where born).

``engine.compare_dumps`` puts them together for two indexed dumps; the verdict rules and the
msprobe rule each mirrors are listed in one place, ``verdict``'s docstring.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from dumpscope.core.engines.compare.engine import compare_dumps
from dumpscope.core.engines.compare.metrics import ROW_KEYS, CompareResult, Tolerance, measure_arrays, measure_stats, to_row
from dumpscope.core.engines.compare.redump import export_redump_config
from dumpscope.core.engines.compare.verdict import ERROR, PASS, WARNING, Context, Thresholds, element_rtol, judge

__all__ = [
    "compare_dumps", "export_redump_config", "compare_arrays", "compare_stats", "Thresholds", "CompareResult",
    "ROW_KEYS", "to_row", "PASS", "WARNING", "ERROR",
]


def compare_arrays(golden: np.ndarray, target: np.ndarray, thresholds: Thresholds = Thresholds(),
                   chunk_elems: int = 1 << 22, magnitude: float = 0.0, kind: str = "tensor") -> CompareResult:
    """Measure and judge one tensor pair (``metrics.measure_arrays`` + ``verdict.judge``)."""
    g, t = np.asarray(golden), np.asarray(target)
    allclose = (thresholds.atol or 0.0, thresholds.rtol or 0.0) if thresholds.allclose else None
    r = measure_arrays(g, t, Tolerance(element_rtol(str(g.dtype), str(t.dtype)), allclose), chunk_elems)
    r.verdict, r.rule = judge(r, Context(thresholds, magnitude, kind))
    return r


def compare_stats(golden: Mapping[str, Any], target: Mapping[str, Any],
                  thresholds: Thresholds = Thresholds(), magnitude: float = 0.0, kind: str = "tensor") -> CompareResult:
    """Measure and judge one statistics-only pair."""
    r = measure_stats(golden, target)
    r.verdict, r.rule = judge(r, Context(thresholds, magnitude, kind))
    return r
