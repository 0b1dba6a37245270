"""The ``g`` view: the selected op's producers and consumers two hops out, as boxes and arrows.

The drawing comes from ``core.neighbourhood`` (the same text ``dumpscope show --graph``
prints).  Arrow keys move a cursor from box to box (the selected box is drawn heavy and
marked ``▶``), the view scrolls to keep it visible, Enter moves the explorer there (or
redraws the view around a node that has no op row), esc goes back.
"""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widgets import Static

from dumpscope.core.engines.neighbourhood import Neighbourhood, draw, neighbourhood
from dumpscope.core.query import OpRow
from dumpscope.tui.keybar import KeyBar
from dumpscope.tui.explorer import explorer


def box_height(lines: list[str], top: int) -> int:
    """Lines of the box starting at ``top`` (down to its bottom corner)."""
    for i in range(top, len(lines)):
        if "┘" in lines[i] or "┛" in lines[i]:
            return i - top + 1
    return 1


def keep_in_view(y: float, height: int, top: int, bottom: int) -> int:
    """The scroll offset that shows lines ``top..bottom`` moving as little as possible from ``y``.

    The view opens on the producers (``y`` their title); a box below the fold scrolls just far
    enough, so what is above it stays as close as the height allows."""
    y = int(y)
    if height <= 0:
        return max(top - 1, 0)
    if bottom > y + height:
        y = bottom - height
    if top - 1 < y:  # the level's title line too
        y = top - 1
    return max(y, 0)


class GraphScreen(Screen):
    BINDINGS = [
        Binding("escape", "close", "Back", id="graph.close"),
        Binding("enter", "open", "Go there", tooltip="Graph view: move the explorer to the selected node",
                id="graph.open"),
        Binding("down,j", "move_level(1)", "Next level", show=False,
                tooltip="Graph view: next level (towards consumers)", id="graph.down"),
        Binding("up,k", "move_level(-1)", "Prev level", show=False,
                tooltip="Graph view: previous level (towards producers)", id="graph.up"),
        Binding("right,l", "move(1)", "Next node", show=False, tooltip="Graph view: next node in the level",
                id="graph.right"),
        Binding("left,h", "move(-1)", "Prev node", show=False, tooltip="Graph view: previous node in the level",
                id="graph.left"),
    ]

    def __init__(self, op: OpRow) -> None:
        super().__init__()
        self.op = op
        self.nb: Optional[Neighbourhood] = None
        self.selected: Optional[str] = None

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("graph · ", "bold"), (self.op.short, "bold"),
                                   ("  arrows: move  enter: go there  esc: back", "dim")), id="view-title")
        with ScrollableContainer(id="graph-body", can_focus=False):  # keys move the cursor, it scrolls along
            yield Static("", id="graph-drawing")
        yield KeyBar()

    def on_mount(self) -> None:
        q = explorer(self).q
        self.nb = neighbourhood(q, self.op) if q is not None else None
        self.selected = self.nb.center if self.nb else None
        self._moved = False  # the cursor left the op the view opened on
        self._redraw()

    def on_resize(self) -> None:
        self._redraw()

    def _redraw(self) -> None:
        drawing = self.query_one("#graph-drawing", Static)
        if self.nb is None:
            drawing.update(Text("no graph describes this op (no graph file joined, or not a graph node)",
                                "italic"))
            return
        width = max(self.size.width - 2, 40)
        d = draw(self.nb, width, self.selected)
        drawing.update(Text("\n".join(d.lines)))
        if self.selected in d.boxes:
            line, _ = d.boxes[self.selected]
            body = self.query_one("#graph-body", ScrollableContainer)
            height = body.scrollable_content_region.height or self.size.height - 2
            bottom = line + box_height(d.lines, line)
            y = body.scroll_y
            if self.selected == self.nb.center and not self._moved:
                # opening: from the producers' title down (the producers of producers above it)
                producers = [d.boxes[n.name][0] for n in self.nb.levels.get(-1, []) if n.name in d.boxes]
                y = min(producers) - 1 if producers else 0
            body.scroll_to(y=keep_in_view(y, height, line, bottom), animate=False)

    def _levels(self) -> list[list[Any]]:
        assert self.nb is not None
        return [self.nb.levels[lv] for lv in sorted(self.nb.levels)]

    def _where(self) -> tuple[int, int]:
        for li, nodes in enumerate(self._levels()):
            for ni, node in enumerate(nodes):
                if node.name == self.selected:
                    return li, ni
        return 0, 0

    def action_move(self, delta: int) -> None:
        if self.nb is None:
            return
        li, ni = self._where()
        nodes = self._levels()[li]
        self.selected = nodes[(ni + delta) % len(nodes)].name
        self._moved = True
        self._redraw()

    def action_move_level(self, delta: int) -> None:
        if self.nb is None:
            return
        levels = self._levels()
        li, ni = self._where()
        li2 = max(0, min(len(levels) - 1, li + delta))
        if li2 != li:
            self.selected = levels[li2][min(ni, len(levels[li2]) - 1)].name
            self._moved = True
            self._redraw()

    def action_open(self) -> None:
        if self.nb is None or self.selected is None:
            return
        node = next(n for n in self.nb.nodes() if n.name == self.selected)
        q = explorer(self).q
        op = q.op_by_id(node.op_id) if node.op_id is not None else None
        if op is None:
            self.notify(f"{node.short} is not in the op list (parameter or constant)", timeout=3)
            return
        self.app.pop_screen()
        explorer(self).open_op(op)

    def action_close(self) -> None:
        self.app.pop_screen()
