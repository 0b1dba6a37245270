"""The record of one tensor's statistics (``TensorStats``) and its reading from precomputed rows.

Kept apart from the engines (``stats_bins``: value tables, edges, the bucket engine;
``stats_float``: the float engine) so each module has one job; ``core.tensors.stats`` re-exports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np


@dataclass(slots=True)
class TensorStats:
    """Statistics of one tensor; fields are ``None`` when unknown (e.g. built from a stats CSV)."""

    count: Optional[int] = None
    min: Optional[float] = None
    max: Optional[float] = None
    mean: Optional[float] = None
    std: Optional[float] = None
    l2norm: Optional[float] = None
    zeros: Optional[int] = None
    nan: Optional[int] = None
    posinf: Optional[int] = None
    neginf: Optional[int] = None
    hist_edges: list[float] = field(default_factory=list)
    hist_counts: list[int] = field(default_factory=list)
    hist_log: bool = False
    first_bad: list[tuple[int, ...]] = field(default_factory=list)
    dtype: str = ""
    shape: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The CLI.md ``stats`` keys plus ``histogram``/``first_bad`` (and ``dtype``/``shape``).

        Non-finite floats (possible only in stats copied from a CSV) become ``null`` so the output
        stays strict JSON.
        """
        out: dict[str, Any] = {
            "dtype": self.dtype,
            "shape": list(self.shape),
        }
        for key in ("count", "min", "max", "mean", "std", "l2norm", "zeros", "nan", "posinf", "neginf"):
            out[key] = _json_num(getattr(self, key))
        out["histogram"] = {
            "edges": [float(e) for e in self.hist_edges],
            "counts": [int(c) for c in self.hist_counts],
            "log": bool(self.hist_log),
        }
        out["first_bad"] = [list(ix) for ix in self.first_bad]
        return out


def _json_num(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    f = float(v)
    return f if math.isfinite(f) else None

# --------------------------------------------------------------------------------------------
# stats read from files

_ROW_INT_KEYS = ("count", "zeros", "nan", "posinf", "neginf")
_ROW_FLOAT_KEYS = ("min", "max", "mean", "std", "l2norm")
_ROW_ALIASES = {"avg": "mean", "norm": "l2norm", "l2": "l2norm", "nan_count": "nan",
                "pos_inf": "posinf", "neg_inf": "neginf", "zero_count": "zeros"}


def stats_from_row(row: dict[str, Any]) -> TensorStats:
    """A partial TensorStats from precomputed statistics (normalized stats-CSV keys, dump.json).

    Accepts the keys of ``StatsRow.stats`` (``max, min, mean, count, nan, neginf, posinf, zeros,
    l2norm``) plus ``std``, ``avg``, ``dtype`` and ``shape``; missing or unparsable values → None.
    """
    st = TensorStats()
    for raw_key, value in row.items():
        key = _ROW_ALIASES.get(str(raw_key).lower(), str(raw_key).lower())
        if key in _ROW_INT_KEYS:
            num = _to_float(value)
            setattr(st, key, int(num) if num is not None and math.isfinite(num) else None)
        elif key in _ROW_FLOAT_KEYS:
            setattr(st, key, _to_float(value))
        elif key == "dtype" and value is not None:
            st.dtype = str(value)
        elif key == "shape" and value is not None:
            try:
                st.shape = tuple(int(d) for d in value)
            except (TypeError, ValueError):
                pass
    return st


def _to_float(value: Any) -> Optional[float]:
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
