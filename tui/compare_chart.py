"""The compare view's chart: each op's error against what its precision allows, along the execution order.

Why a chart: in a bf16/fp16 target against a float32 golden every tensor differs a little; what a
user needs to see at a glance is whether any op stands above the line its inputs' error and one
rounding allow (``rel_err / allowed > 1``), and where.  One column per op (or per bucket of ops
when there are more ops than columns), the op's largest ``rel_err/allowed`` on a log scale in
decades, the line at 1.0 drawn across, and the decades the pair's noise occupies marked in the
gutter (``┃``).  Meaning is carried by glyphs, colour only repeats it (NO_COLOR loses nothing):
``✗`` born, ``◆`` changed, ``+`` inherited, ``·`` noise; ``▼`` above the first divergence,
``▲`` under the table's cursor.

Only a few lines are drawn, from per-op points made once per result (in the compare worker);
a cursor move redraws the axis line only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

from rich.text import Text
from textual.widget import Widget

#: worst first: an op shows the worst judgement among its tensors
RANK = {"changed": 4, "born": 3, "inherited": 2, "noise": 1}
GLYPH = {"changed": "◆", "born": "✗", "inherited": "+", "noise": "·"}
STYLE = {"changed": "bold magenta", "born": "bold red", "inherited": "yellow", "noise": "green"}
#: plot rows, top to bottom: (label, lowest ratio in the row, highest); None = the line at 1.0
LEVELS: list[Optional[tuple[str, float, float]]] = [
    ("≥10", 10.0, math.inf), (">1", 1.0, 10.0), None, ("≥.1", 0.1, 1.0), ("≥.01", 0.01, 0.1),
    ("<.01", 0.0, 0.01)]
SHORT_LEGEND = "✗born ◆changed +inherited ·noise"
GUTTER = 6  # label (5) + the band/axis character
LEGEND = "✗ born ◆ changed + inherited · noise ┃ noise band ▼ first div. ▲ cursor"


@dataclass
class OpPoint:
    """One op of the chart: its worst tensor against the line."""

    ratio: Optional[float]  # largest rel_err/allowed among its tensors; None: nothing judged (arguments)
    judgement: Optional[str]  # the worst judgement among its tensors
    first: bool  # holds the first divergence
    label: str  # the op's name (for the axis)


def ratio(row: dict[str, Any]) -> Optional[float]:
    """``rel_err / allowed`` (the row's ``share_of_allowed`` where it carries one): 1.0 is the line;
    None when the row was not judged (an argument)."""
    share = row.get("share_of_allowed")
    if isinstance(share, (int, float)):
        return float(share)
    err, allowed = row.get("rel_err"), row.get("allowed")
    if err is None or allowed is None or (isinstance(err, float) and math.isnan(err)):
        return None
    if allowed <= 0:
        return 0.0 if err == 0 else math.inf
    return float(err) / float(allowed)


def evidence_shares(doc: dict[str, Any]) -> dict[tuple[str, str], float]:
    """``(op, "output.0") -> share_of_allowed`` of the rows the evidence names: the judged share also
    weighs the largest element's error, which ``rel_err/allowed`` (a norm) can understate; the chart
    shows the larger so it never contradicts the evidence text."""
    ev = doc.get("evidence") or {}
    out: dict[tuple[str, str], float] = {}
    for n in [*(ev.get("nearest") or []), *([ev["largest"]] if ev.get("largest") else [])]:
        s = n.get("share_of_allowed")
        if isinstance(s, (int, float)):
            key = (str(n.get("name")), str(n.get("tensor")))
            out[key] = max(out.get(key, 0.0), float(s))
    return out


def op_points(rows: Iterable[dict[str, Any]], is_first,
              shares: Optional[dict[tuple[str, str], float]] = None) -> tuple[list[OpPoint], dict[int, int]]:
    """Points in execution order (consecutive rows of one op make one point) and ``id(row) -> point``.

    ``rows`` in the document's order (execution order, place by place); ``is_first(row)`` tells the
    first divergence's row; ``shares`` from ``evidence_shares``.
    """
    points: list[OpPoint] = []
    where: dict[int, int] = {}
    last: Any = object()
    for r in rows:
        key = (r.get("rank"), r.get("step"), r.get("exec_index"), r.get("name"))
        if key != last:
            last = key
            points.append(OpPoint(None, None, False, str(r.get("name"))))
        p = points[-1]
        where[id(r)] = len(points) - 1
        q = ratio(r)
        if shares:
            s = shares.get((str(r.get("name")), f"{r.get('io')}.{r.get('slot')}"))
            if s is not None and (q is None or s > q):
                q = s
        if q is not None and (p.ratio is None or q > p.ratio):
            p.ratio = q
        j = r.get("judgement")
        if RANK.get(j, 0) > RANK.get(p.judgement, 0):  # type: ignore[arg-type]
            p.judgement = j
        if not p.first and is_first(r):
            p.first = True
    return points, where


def buckets(points: Sequence[OpPoint], width: int) -> list[OpPoint]:
    """At most ``width`` columns: each the largest ratio, worst judgement and any first divergence of its ops."""
    n = len(points)
    if n <= width:
        return list(points)
    out = []
    for c in range(width):
        part = points[c * n // width:(c + 1) * n // width]
        ratios = [p.ratio for p in part if p.ratio is not None]
        worst = max(part, key=lambda p: RANK.get(p.judgement, 0))  # type: ignore[arg-type]
        out.append(OpPoint(max(ratios) if ratios else None, worst.judgement, any(p.first for p in part),
                           part[0].label))
    return out


def column_of(point: int, n: int, width: int) -> int:
    """The column showing point ``point`` of ``n`` (the inverse of ``buckets``' slicing)."""
    if n <= width:
        return point
    return min(width - 1, ((point + 1) * width - 1) // n)


def level(r: float) -> int:
    """The plot row of a ratio (decades: a log scale)."""
    if r > 1.0:  # beyond the line (exactly 1.0 is on it: within what is allowed)
        return 0 if r >= 10.0 else 1
    return 3 if r >= 0.1 else 4 if r >= 0.01 else 5


def noise_rows(points: Sequence[OpPoint]) -> set[int]:
    """The plot rows where the noise sits: between the smallest non-zero and the largest ratio of the ops
    judged noise within the line (one judged noise beyond it is drawn as a point, not as the band)."""
    rs = [p.ratio for p in points if p.judgement == "noise" and p.ratio is not None and 0 < p.ratio <= 1.0]
    if not rs:
        return set()
    lo, hi = level(max(rs)), level(min(rs))
    return set(range(lo, hi + 1))


def render(points: Sequence[OpPoint], width: int, cursor: Optional[int] = None) -> list[Text]:
    """The chart's lines for ``width`` columns (gutter included); ``cursor`` is a point index."""
    plot = max(1, width - GUTTER)
    cols = buckets(points, plot)
    band = noise_rows(points)
    top = Text(" " * GUTTER, no_wrap=True)
    if any(c.first for c in cols):
        for c in cols:
            top.append("▼" if c.first else " ", "bold red" if c.first else "")
    gap = "  " if len(top) > GUTTER else ""
    for legend in (LEGEND, SHORT_LEGEND):  # the legend where there is room (always when nothing diverged)
        if len(top) + len(gap) + len(legend) <= width:
            top.append(gap + legend, "dim")
            break
    lines = [top]
    for i, lv in enumerate(LEVELS):
        line = Text(no_wrap=True)
        if lv is None:
            line.append(f"{'1.0':>5}─", "bold")
            for c in cols:
                beyond = c.ratio is not None and c.ratio > 1.0
                line.append("┼" if beyond else "─", "bold")
            lines.append(line)
            continue
        line.append(f"{lv[0]:>5}", "dim")
        line.append("┃" if i in band else "│", "green" if i in band else "dim")
        for c in cols:
            if c.ratio is not None and level(c.ratio) == i:
                j = c.judgement or "noise"
                line.append(GLYPH.get(j, "·"), STYLE.get(j, ""))
            else:
                line.append(" ")
        lines.append(line)
    lines.append(axis(len(points), width, cursor))
    return lines


def axis(n: int, width: int, cursor: Optional[int]) -> Text:
    """The line under the chart: the execution order, ``▲`` under the cursor's op."""
    plot = max(1, width - GUTTER)
    shown = min(n, plot)
    chars = ["─"] * shown
    if cursor is not None and 0 <= cursor < n and shown:
        chars[column_of(cursor, n, plot)] = "▲"
    line = Text(" " * (GUTTER - 1) + "└", "dim", no_wrap=True)
    line.append("".join(chars), "bold")
    per = "" if n <= plot else f", {n / plot:.3g} ops a column"
    tail = f" {n} ops{per}"
    if shown + GUTTER + len(tail) <= width:
        line.append(tail, "dim")
    return line


class CompareChart(Widget):
    """A few lines: the chart of the current compare result (renders only itself; cheap to redraw)."""

    DEFAULT_CSS = "CompareChart { height: 8; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.points: list[OpPoint] = []
        self.cursor: Optional[int] = None

    def show(self, points: list[OpPoint], cursor: Optional[int]) -> None:
        self.points, self.cursor = points, cursor
        self.refresh()

    def move(self, cursor: Optional[int]) -> None:
        if cursor != self.cursor:
            self.cursor = cursor
            self.refresh()

    def render(self) -> Text:
        if not self.points:
            return Text("")
        width = self.size.width
        key = (id(self.points), width)
        if getattr(self, "_key", None) != key:  # the plot once per result and width; a cursor move: the axis
            self._key, self._plot = key, render(self.points, width, None)[:-1]
        return Text("\n", no_wrap=True).join([*self._plot, axis(len(self.points), width, self.cursor)])
