"""A keyboard-driven cursor list drawn with Textual's Line API.

Only the rows on screen are ever rendered, so a list of a million ops costs what a list of
twenty does.  Subclasses say how many rows there are and how one row looks; this class owns
the cursor, scrolling, an optional sticky header and the Highlighted/Selected messages.
"""

from __future__ import annotations

from typing import Iterable, Optional

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from dumpscope.core.inert import inert

#: one piece of a row: text and the component class (or None) that styles it
Part = tuple[str, Optional[str]]


class LineList(ScrollView, can_focus=True):
    """Base class: a virtual list with a cursor. Override ``row_count`` and ``row_parts``."""

    COMPONENT_CLASSES = {
        "linelist--cursor", "linelist--header", "linelist--dim", "linelist--bad", "linelist--ok",
        "linelist--warn", "linelist--mark", "linelist--origin", "linelist--muted",
    }
    DEFAULT_CSS = """
    LineList { overflow-x: hidden; overflow-y: auto; scrollbar-size-vertical: 1; }
    LineList > .linelist--cursor { background: $surface-lighten-2; text-style: bold; }
    LineList:focus > .linelist--cursor { background: $accent 60%; color: $text; }
    LineList > .linelist--header { text-style: bold underline; color: $text-muted; }
    LineList > .linelist--dim { color: $text-disabled; }
    LineList > .linelist--muted { color: $text-muted; }
    LineList > .linelist--bad { color: $error; text-style: bold; }
    LineList > .linelist--ok { color: $success; }
    LineList > .linelist--warn { color: $warning; }
    LineList > .linelist--mark { color: $secondary; text-style: bold; }
    LineList > .linelist--origin { background: $error 25%; }
    """
    BINDINGS = [
        Binding("up,k", "cursor_up", "Up", show=False, id="list.up"),
        Binding("down,j", "cursor_down", "Down", show=False, id="list.down"),
        Binding("pageup,ctrl+b", "page_up", "Page up", show=False, id="list.page_up"),
        Binding("pagedown,ctrl+f", "page_down", "Page down", show=False, id="list.page_down"),
        # not ``g``: the explorer's graph view, in the flat list as in the tree (one meaning per key)
        Binding("home", "first", "First", show=False, id="list.first"),
        Binding("end,G", "last", "Last", show=False, id="list.last"),
        Binding("enter", "select", "Open", id="list.select"),
    ]

    cursor: reactive[int] = reactive(0, always_update=True, repaint=False)
    header_lines: int = 0
    empty_text: str = "(nothing here)"

    class Highlighted(Message):
        def __init__(self, sender: "LineList", index: int) -> None:
            super().__init__()
            self.list = sender
            self.index = index

        @property
        def control(self) -> "LineList":
            return self.list

    class Selected(Highlighted):
        pass

    # -- to override ------------------------------------------------------------------

    def row_count(self) -> int:
        return 0

    def row_parts(self, index: int) -> Iterable[Part]:
        return ()

    def row_style(self, index: int) -> Optional[str]:
        """A component class for the whole row (e.g. the overflow origin), or None."""
        return None

    def header_parts(self) -> Iterable[Part]:
        return ()

    # -- sizing -------------------------------------------------------------------------

    def reset(self, cursor: int = 0) -> None:
        """Call after the rows changed: resize the virtual canvas, clamp the cursor, repaint."""
        n = self.row_count()
        self.virtual_size = Size(max(1, self.size.width), n + self.header_lines)
        self.cursor = max(0, min(cursor, n - 1)) if n else 0
        self.refresh()

    def on_resize(self) -> None:
        self.virtual_size = Size(max(1, self.size.width), self.row_count() + self.header_lines)
        self._follow()

    @property
    def page_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - self.header_lines)

    # -- cursor ---------------------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        top = round(self.scroll_y)
        self._follow()
        if round(self.scroll_y) == top:  # no scroll: repaint just the two rows that changed
            for index in {old, new}:
                y = index - top + self.header_lines
                if 0 <= y < self.size.height:
                    self.refresh(Region(0, y, self.size.width, 1))
        else:
            self.refresh()
        if self.row_count():
            self.post_message(self.Highlighted(self, new))

    def _follow(self) -> None:
        top = round(self.scroll_y)
        rows = self.page_rows
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + rows:
            self.scroll_to(y=self.cursor - rows + 1, animate=False, immediate=True)

    def move_to(self, index: int) -> None:
        n = self.row_count()
        if n:
            self.cursor = max(0, min(index, n - 1))

    def action_cursor_up(self) -> None:
        self.move_to(self.cursor - 1)

    def action_cursor_down(self) -> None:
        self.move_to(self.cursor + 1)

    def action_page_up(self) -> None:
        self.move_to(self.cursor - self.page_rows)

    def action_page_down(self) -> None:
        self.move_to(self.cursor + self.page_rows)

    def action_first(self) -> None:
        self.move_to(0)

    def action_last(self) -> None:
        self.move_to(self.row_count() - 1)

    def action_select(self) -> None:
        if self.row_count():
            self.post_message(self.Selected(self, self.cursor))

    def on_click(self, event) -> None:
        y = event.y - self.header_lines
        if y >= 0:
            index = round(self.scroll_y) + y
            if index < self.row_count():
                if index == self.cursor and getattr(event, "chain", 1) >= 2:
                    self.action_select()
                self.cursor = index

    # -- drawing --------------------------------------------------------------------------

    def _style(self, component: Optional[str]) -> Style:
        if not component:
            return Style()
        cache = getattr(self, "_style_cache", None)
        if cache is None:
            return self.get_component_rich_style(component)
        style = cache.get(component)
        if style is None:
            style = cache[component] = self.get_component_rich_style(component)
        return style

    def _strip(self, parts: Iterable[Part], width: int, base: Style) -> Strip:
        segments = []
        for text, component in parts:
            if text:
                style = base + self._style(component) if component else base
                segments.append(Segment(inert(text), style))
        return Strip(segments).crop_extend(0, width, base)

    def render_lines(self, crop: Region) -> list[Strip]:
        # computed once per paint, not once per line (rich_style walks the DOM)
        self._base_style = self.rich_style
        self._style_cache: dict[str, Style] = {}
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = getattr(self, "_base_style", None) or self.rich_style
        if y < self.header_lines:
            return self._strip(self.header_parts(), width, base + self._style("linelist--header"))
        index = round(self.scroll_y) + y - self.header_lines
        n = self.row_count()
        if n == 0:
            return self._strip([(f" {self.empty_text}", "linelist--muted")] if y == self.header_lines else [],
                               width, base)
        if index >= n:
            return Strip.blank(width, base)
        row_class = self.row_style(index)
        style = base + self._style(row_class) if row_class else base
        if index == self.cursor:
            style = style + self._style("linelist--cursor")
        return self._strip(self.row_parts(index), width, style)
