"""The words of one compare row, shared by the compare view, its diff screen and the side-by-side screen
(pure functions of the row: no screen imports another for them)."""

from __future__ import annotations

import math
from typing import Any, Optional


def metric(key: str, digits: int = 4):
    def f(row: dict[str, Any]) -> str:
        v = row.get(key)
        if v is None:
            return "-"
        if isinstance(v, float) and math.isnan(v):
            return "nan"
        return f"{v:.{digits}g}" if isinstance(v, float) else str(v)
    return f



_ORIGIN_TEXT = {"born": "born", "constant": "const", "inherited": "inh"}


def origin_text(row: dict[str, Any]) -> str:
    """The origin column: born / const / inh, or the row kind for parameters and arguments."""
    if row.get("origin"):
        return _ORIGIN_TEXT.get(str(row["origin"]), str(row["origin"]))
    return {"parameter": "param", "scalar": "arg"}.get(str(row.get("kind")), "")


def both_names(row: dict[str, Any]) -> str:
    """The op column: the golden name, and the target's when a cross-framework rule paired two names
    (``Torch.cos.0.forward ↔ Mint.cos.0.forward``)."""
    name, other = str(row.get("name")), row.get("target_name")
    return name if other in (None, "", name) else f"{name} ↔ {other}"


def is_born(row: dict[str, Any]) -> bool:
    """An error row of an op where the error is born (what ``n``/``N`` walk)."""
    return row.get("verdict") == "error" and row.get("origin") in ("born", "constant")


def is_first_divergence(row: dict[str, Any], fd: Optional[dict[str, Any]]) -> bool:
    """The row of the first divergence ``fd`` (of a whole job too: its rank counts)."""
    return bool(fd) and all(row.get(k) == fd.get(k) for k in ("name", "io", "slot", "step", "rank") if k in fd)  # type: ignore
