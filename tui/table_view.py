"""Base screen for the table views (overflow, compare, watch, problems).

A title, a one-line note (progress, errors, engine missing), a virtual table and the footer.
``n``/``N`` walk the rows that are problems, Enter opens a row, ``e`` exports the table as CSV
(app binding), ``esc`` goes back to the explorer.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from dumpscope.tui.linelist import LineList
from dumpscope.tui.vtable import Column, VTable
from dumpscope.tui.keybar import KeyBar
from dumpscope.tui.explorer import explorer


class TableView(Screen):
    BINDINGS = [
        Binding("escape", "close", "Back", id="view.close"),
        Binding("n", "next_problem(1)", "Next problem", id="view.next_problem"),
        Binding("N", "next_problem(-1)", "Prev problem", show=False, id="view.prev_problem"),
    ]
    title_text = ""
    export_name = "table"
    empty_text = "(no rows)"

    def columns(self) -> list[Column]:
        raise NotImplementedError

    def row_class(self, index: int, row: dict[str, Any]) -> Optional[str]:
        return None

    def is_problem(self, row: dict[str, Any]) -> bool:
        return True

    def open_row(self, row: dict[str, Any]) -> None:
        pass

    def load(self) -> None:
        """Fill the table (start workers here)."""

    def __init__(self, cursor: Optional[int] = None) -> None:
        super().__init__()
        self._restore_cursor = cursor

    def reopen(self) -> Callable[[], "TableView"]:
        """A factory of this view again, on the same row (``esc`` after a jump comes back here)."""
        cursor = self.table.cursor
        return lambda: type(self)(cursor=cursor)

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title_text, "bold"), id="view-title")
        yield Static("", id="view-note")
        yield VTable(self.columns(), empty_text=self.empty_text, row_class=self.row_class, id="view-table")
        yield Static("", id="view-hidden")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#view-hidden").display = False
        self.table.focus()
        self.table.pending_cursor = self._restore_cursor
        self.load()

    @property
    def table(self) -> VTable:
        return self.query_one(VTable)

    @property
    def export_table(self) -> VTable:
        return self.table

    def note(self, text: str | Text, style: str = "") -> None:
        self.query_one("#view-note", Static).update(Text(text, style) if isinstance(text, str) else text)

    def on_vtable_hidden_changed(self, event: VTable.HiddenChanged) -> None:
        """The line under the table: which columns are hidden (empty in every row) and ``H`` to show them."""
        text = event.table.hidden_text()
        line = self.query_one("#view-hidden", Static)
        line.update(Text(text, "dim", no_wrap=True, overflow="ellipsis"))
        line.display = bool(text)

    def action_close(self) -> None:
        self.app.pop_screen()

    def palette_commands(self):
        """The table's keys as palette entries (ctrl+p)."""
        yield ("Table: scroll the columns right", lambda: self.table.action_scroll_columns(1), "→")
        yield ("Table: scroll the columns left", lambda: self.table.action_scroll_columns(-1), "←")
        yield ("Table: next problem row", lambda: self.action_next_problem(1), "n")
        yield ("Table: show/hide the empty columns", self.table.action_toggle_hidden, "H")

    def action_next_problem(self, delta: int) -> None:
        rows = self.table.rows
        if not rows:
            return
        n = len(rows)
        i = self.table.cursor
        for _ in range(n):
            i = (i + delta) % n
            if self.is_problem(rows[i]):
                self.table.move_to(i)
                return
        self.notify("no more problem rows", timeout=2)

    def on_line_list_selected(self, event: LineList.Selected) -> None:
        row = self.table.current
        if row is not None:
            self.open_row(row)

    def open_op_id(self, op_id: Optional[int]) -> None:
        q = explorer(self).q
        op = q.op_by_id(op_id) if (q is not None and op_id is not None) else None
        if op is None:
            self.notify("this row has no op in the index", timeout=2)
            return
        explorer(self).open_op(op)
