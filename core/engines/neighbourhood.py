"""An op's neighbourhood in its graph: producers and consumers up to two hops, drawn as text.

Levels run from ``-hops`` (producers of producers) through ``0`` (the op) to ``+hops``
(consumers of consumers).  Each node says which nodes of the level nearer the op it is linked
to, so the drawing states every edge in words (``→ conv1`` under a producer, ``← relu`` under a
consumer) instead of relying on lines crossing between boxes.  Used by the explorer's ``g``
view and ``dumpscope show --graph``; works for graphs joined to a dump and for graph-only trees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from dumpscope.core.graphs.order import producer_name

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery, OpRow

MAX_PER_LEVEL = 24


@dataclass(slots=True)
class NbNode:
    name: str  # graph-side full name
    type: str
    level: int
    op_id: Optional[int] = None  # the op row to move to (None: not in the ops table, e.g. a parameter)
    links: list[str] = field(default_factory=list)  # names in the level nearer the op it is linked to

    @property
    def short(self) -> str:
        return self.name.rsplit("/", 1)[-1]


@dataclass(slots=True)
class Neighbourhood:
    center: str
    levels: dict[int, list[NbNode]]  # level → nodes, each level in graph order
    cut: dict[int, int] = field(default_factory=dict)  # level → nodes left out beyond MAX_PER_LEVEL

    def nodes(self) -> list[NbNode]:
        return [n for lv in sorted(self.levels) for n in self.levels[lv]]


def _inputs(data: dict) -> list[str]:
    out: list[str] = []
    for edge in [*data.get("inputs", []), *data.get("control", [])]:
        if not edge:
            continue
        name = edge[len("param:"):] if edge.startswith("param:") else producer_name(edge)
        if name not in out:
            out.append(name)
    return out


def neighbourhood(q: "DumpQuery", op: "OpRow", hops: int = 2) -> Optional[Neighbourhood]:
    """The op's producers and consumers up to ``hops`` away, or None when no graph describes it."""
    if not op.joined:
        return None
    gkey = q.graph_key(op)
    if gkey is None:
        return None
    cache: dict[str, Optional[dict]] = {}

    def data_of(name: str) -> Optional[dict]:
        if name not in cache:
            cache[name] = q.graph_node(gkey, name)
        return cache[name]

    center = data_of(op.joined)
    if center is None:
        return None
    nb = Neighbourhood(op.joined, {0: [NbNode(op.joined, center["type"], 0, op.id)]})
    seen = {op.joined}
    for direction in (-1, 1):
        frontier = [op.joined]
        for step in range(1, hops + 1):
            level: dict[str, NbNode] = {}
            for near in frontier:
                data = data_of(near) or {}
                names = _inputs(data) if direction < 0 else list(data.get("consumers", []))
                for name in names:
                    if name in seen and name not in level:
                        continue
                    node = level.get(name)
                    if node is None:
                        if len(level) >= MAX_PER_LEVEL:
                            nb.cut[direction * step] = nb.cut.get(direction * step, 0) + 1
                            continue
                        info = data_of(name)
                        node = level[name] = NbNode(name, (info or {}).get("type", "?"), direction * step)
                    if near not in node.links:
                        node.links.append(near)
            seen.update(level)
            if not level:
                break
            nb.levels[direction * step] = list(level.values())
            frontier = list(level)
    for node in nb.nodes():
        if node.op_id is None:
            row = q.find_by_graph_name(node.name, op.rank, op.step, op.graph)
            node.op_id = row.id if row is not None else None
    return nb


# -- drawing ------------------------------------------------------------------------------------

_TITLES = {-2: "producers of producers", -1: "producers", 0: "this op", 1: "consumers", 2: "consumers of consumers"}


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


@dataclass(slots=True)
class Drawing:
    lines: list[str]
    boxes: dict[str, tuple[int, int]]  # node name → (first line, first column) of its box
    order: list[str]  # node names in reading order (for cursor moves)


def draw(nb: Neighbourhood, width: int = 80, selected: Optional[str] = None) -> Drawing:
    """Boxes per level, top (producers) to bottom (consumers), wrapped to ``width`` columns.

    A box holds the op type, its short name and (outside level 0) the names it links to;
    the selected box is drawn with heavy lines and ``▶``, unjoined nodes (no op row) with ``·``
    before the type, so nothing depends on colour."""
    inner = max(12, min(26, (width - 1) // 3 - 5))
    lines: list[str] = []
    boxes: dict[str, tuple[int, int]] = {}
    order: list[str] = []
    levels = sorted(nb.levels)
    for li, lv in enumerate(levels):
        title = _TITLES.get(lv, f"level {lv:+d}")
        cut = nb.cut.get(lv)
        lines.append(f" {title}" + (f"  (+{cut} more not shown)" if cut else ""))
        row: list[tuple[NbNode, list[str]]] = []
        col = 1
        for node in nb.levels[lv]:
            sel = node.name == selected
            h, v, tl, tr, bl, br = ("━", "┃", "┏", "┓", "┗", "┛") if sel else ("─", "│", "┌", "┐", "└", "┘")
            body = [("▶ " if sel else "") + ("" if node.op_id is not None else "· ") + node.type, node.short]
            if lv:
                arrow = "→ " if lv < 0 else "← "
                body += [arrow + _clip(", ".join(n.rsplit("/", 1)[-1] for n in node.links), inner - 2)]
            box = [tl + h * (inner + 2) + tr] + [f"{v} {_clip(t, inner).ljust(inner)} {v}" for t in body] + \
                  [bl + h * (inner + 2) + br]
            if col + len(box[0]) > width and row:
                _flush(lines, boxes, row)
                col = 1
                row = []
            row.append((node, box))
            col += len(box[0]) + 1
            order.append(node.name)
        _flush(lines, boxes, row)
        if li + 1 < len(levels):
            lines.append("   │")
            lines.append("   ▼")
    return Drawing(lines, boxes, order)


def _flush(lines: list[str], boxes: dict[str, tuple[int, int]], row: list[tuple[NbNode, list[str]]]) -> None:
    if not row:
        return
    height = max(len(b) for _, b in row)
    top = len(lines)
    col = 1
    out = [" " * 1 for _ in range(height)]
    for node, box in row:
        boxes[node.name] = (top, col)
        w = len(box[0])
        for i in range(height):
            out[i] += (box[i] if i < len(box) else " " * w) + " "
        col += w + 1
    lines.extend(s.rstrip() for s in out)
