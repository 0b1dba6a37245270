"""A virtual table on the Line API: rows live in a plain list, only visible ones are drawn.

Stock ``DataTable`` builds every row up front (slow for compare results of 500k rows); this
one formats a row only when it scrolls into view.

Narrow terminals: the columns up to the first flexible one (the op name) stay put and the name
keeps a fair share of the width; the columns after it scroll sideways with ``←``/``→`` when they
do not all fit (``‹``/``›`` in the header say more are there).  A column empty in every row takes
no room at all (CSV export keeps it); ``hidden_text`` names the hidden ones for a line under the
table, and ``H`` shows them.  Names are cut in the middle (block and leaf kept).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Union

from textual.binding import Binding
from textual.message import Message

from dumpscope.core.inert import csv_text
from dumpscope.tui.fit import middle
from dumpscope.tui.linelist import LineList, Part

Cell = Union[str, tuple[str, Optional[str]]]


def _blank_value(v: Any) -> bool:
    return v is None or v == "" or v == [] or v == ()


@dataclass
class Column:
    key: str
    title: str
    width: int = 0  # 0: share the remaining width
    align: str = "<"
    fmt: Optional[Callable[[dict[str, Any]], Cell]] = None
    keep_end: bool = False  # op names: cut in the middle, keeping the block and the op itself
    #: is this row's cell empty?  (default: the raw value is missing); a column empty in every row is hidden
    blank: Optional[Callable[[dict[str, Any]], bool]] = None

    def cell(self, row: dict[str, Any]) -> tuple[str, Optional[str]]:
        if self.fmt is not None:
            value = self.fmt(row)
        else:
            v = row.get(self.key)
            value = "" if v is None else str(v)
        return value if isinstance(value, tuple) else (value, None)

    def is_blank(self, row: dict[str, Any]) -> bool:
        return self.blank(row) if self.blank is not None else _blank_value(row.get(self.key))


def blank_columns(columns: list[Column], rows: list[dict[str, Any]]) -> list[str]:
    """Keys of the columns empty in every row (each scan stops at the first row with a value)."""
    if not rows:
        return []
    out = []
    for c in columns:
        if c.blank is None:
            k = c.key
            empty = not any(not _blank_value(r.get(k)) for r in rows)
        else:
            empty = all(map(c.blank, rows))
        if empty:
            out.append(c.key)
    return out


def fit(text: str, width: int, align: str = "<", keep_end: bool = False) -> str:
    if width <= 0:
        return ""
    if len(text) > width:
        return middle(text, width).ljust(width) if keep_end else (text[: width - 1] + "…")
    return text.rjust(width) if align == ">" else text.ljust(width)


#: the flexible (name) column gets at least this share of the row, within these bounds
NAME_SHARE, NAME_MIN, NAME_MAX = 0.45, 12, 48
NATURAL_ROWS = 50_000


class VTable(LineList):
    """Table of dict rows; ``row_class`` may style whole rows (e.g. the first divergence)."""

    header_lines = 1
    BINDINGS = [
        Binding("left", "scroll_columns(-1)", "Columns left", show=False, id="table.columns_left",
                tooltip="Scroll the columns after the op name left (wide tables)"),
        Binding("right", "scroll_columns(1)", "Columns right", show=False, id="table.columns_right",
                tooltip="Scroll the columns after the op name right (wide tables)"),
        Binding("H", "toggle_hidden", "Hidden columns", show=False, id="table.toggle_hidden",
                tooltip="Show/hide the columns hidden as empty in every row (named under the table)"),
    ]

    class HiddenChanged(Message):
        """Which columns are hidden changed (new rows, or ``H``): the view updates its line under the table."""

        def __init__(self, table: "VTable") -> None:
            super().__init__()
            self.table = table

    def __init__(self, columns: list[Column], empty_text: str = "(no rows)",
                 row_class: Optional[Callable[[int, dict[str, Any]], Optional[str]]] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.columns = columns
        self.rows: list[dict[str, Any]] = []
        self.empty_text = empty_text
        self._row_class = row_class
        #: a row to put the cursor on at the next ``set_rows`` (a reopened view)
        self.pending_cursor: Optional[int] = None
        #: how many of the columns after the name are scrolled out on the left
        self.col_offset = 0
        self._hidden: frozenset[int] = frozenset()  # columns empty in every row (or saying nothing here)
        self._blank: tuple[str, ...] = ()  # keys of the columns empty in every row
        self._same: tuple[str, ...] = ()  # keys of the columns the view hid as saying nothing (``hide``)
        self.show_hidden = False  # ``H``: draw them anyway
        self._layout_key: Any = None
        self._layout: list[tuple[int, int]] = []
        self._more = (False, False)
        self._name_natural = NAME_MAX

    def set_rows(self, rows: list[dict[str, Any]], cursor: int = 0, hide: Iterable[str] = (),
                 hidden: Optional[Iterable[str]] = None) -> None:
        """``hide``: keys of columns that say nothing here (e.g. the rank when one rank was scanned);
        ``hidden``: the keys of the columns empty in every row when the caller found them already
        (``blank_columns`` in a worker: a big table's scan is no work for the UI thread)."""
        self.rows = rows
        blank = set(blank_columns(self.columns, rows) if hidden is None else hidden)
        same = set(hide) - blank
        self._blank = tuple(c.key for c in self.columns if c.key in blank)
        self._same = tuple(c.key for c in self.columns if c.key in same)
        self._apply_hidden()
        self._name_natural = self._natural_name_width(rows)
        if self.pending_cursor is not None and rows:
            cursor, self.pending_cursor = self.pending_cursor, None
        self.reset(cursor)
        self.post_message(self.HiddenChanged(self))

    def _apply_hidden(self) -> None:
        keys = () if self.show_hidden else self._blank + self._same
        self._hidden = frozenset(i for i, c in enumerate(self.columns) if c.key in keys)
        self._layout_key = None

    def hidden_text(self) -> str:
        """The line under the table naming the hidden columns ("" when none are), so that an empty
        column is never mistaken for a missing feature."""
        titles = {c.key: (c.title.strip() or c.key) for c in self.columns}
        if not (self._blank or self._same):
            return ""
        if self.show_hidden:
            return "showing every column, the empty ones too   H: hide them again"
        parts = []
        if self._blank:
            parts.append("empty in every row: " + ", ".join(titles[k] for k in self._blank))
        if self._same:
            parts.append("one value: " + ", ".join(titles[k] for k in self._same))
        return "hidden, " + "; ".join(parts) + "   H: show them"

    def action_toggle_hidden(self) -> None:
        if not (self._blank or self._same):
            self.notify("no hidden columns in this table", timeout=2)
            return
        self.show_hidden = not self.show_hidden
        self._apply_hidden()
        self._name_natural = self._natural_name_width(self.rows)
        self.refresh()
        self.post_message(self.HiddenChanged(self))

    def row_count(self) -> int:
        return len(self.rows)

    @property
    def current(self) -> Optional[dict[str, Any]]:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    # -- layout -------------------------------------------------------------------------

    def _name_index(self) -> int:
        """The first flexible column (the op name): it and the columns before it never scroll."""
        return next((i for i, c in enumerate(self.columns) if not c.width and i not in self._hidden), -1)

    def _natural_name_width(self, rows: list[dict[str, Any]]) -> int:
        """The longest name cell, so short names leave their room to the metrics (counted on tables of
        up to ``NATURAL_ROWS`` rows; a longer table gives the name its full share)."""
        name = self._name_index()
        if name < 0 or not rows or len(rows) > NATURAL_ROWS:
            return NAME_MAX
        c = self.columns[name]
        return max(len(c.title), max(len(c.cell(r)[0]) for r in rows))

    def layout(self) -> list[tuple[int, int]]:
        """(column index, width) of the columns drawn now, left to right."""
        total = max(10, self.scrollable_content_region.width)
        key = (total, self.col_offset, self._hidden)
        if key == self._layout_key:
            return self._layout
        cols = self.columns
        name = self._name_index()
        shown = [i for i in range(len(cols)) if i not in self._hidden]
        pinned = [i for i in shown if i <= name]
        movable = [i for i in shown if i > name]
        fixed_pinned = sum(cols[i].width + 1 for i in pinned if cols[i].width)
        flex_pinned = [i for i in pinned if not cols[i].width]
        room = total - fixed_pinned - len(flex_pinned)
        name_min = min(self._name_natural, max(NAME_MIN, min(NAME_MAX, int(room * NAME_SHARE)))) if flex_pinned else 0

        def need(i: int) -> int:
            return (cols[i].width or NAME_MIN) + 1

        self.col_offset = max(0, min(self.col_offset, len(movable) - 1)) if movable else 0
        if sum(need(i) for i in movable) <= room - name_min * len(flex_pinned):
            self.col_offset = 0  # everything fits: nothing to scroll
        start = self.col_offset
        budget = room - name_min * len(flex_pinned) - (1 if start else 0)  # "‹" after the name
        visible: list[int] = []
        for i in movable[start:]:
            right = 1 if i != movable[-1] else 0  # room for the "›" marker when more follow
            if need(i) + right > budget - sum(need(j) for j in visible):
                break
            visible.append(i)
        more_right = len(visible) < len(movable) - start
        used = sum(need(i) for i in visible if cols[i].width) + (1 if start else 0) + (1 if more_right else 0)
        flex = flex_pinned + [i for i in visible if not cols[i].width]
        share = max(NAME_MIN, (room - used - len([i for i in visible if not cols[i].width])) // max(1, len(flex)))
        widths = {i: (cols[i].width or share) for i in pinned + visible}
        self._layout = [(i, widths[i]) for i in pinned + visible]
        self._more = (start > 0, more_right)
        self._layout_key = key
        return self._layout

    def _widths(self) -> list[int]:
        """Width of every column (0: not drawn now)."""
        drawn = dict(self.layout())
        return [drawn.get(i, 0) for i in range(len(self.columns))]

    def action_scroll_columns(self, delta: int) -> None:
        self.layout()
        left, right = self._more
        if (delta > 0 and not right) or (delta < 0 and not left):
            return
        self.col_offset = max(0, self.col_offset + delta)
        self._layout_key = None
        self.refresh()

    def _parts(self, cells: list[tuple[int, int, str, Optional[str]]]) -> list[Part]:
        left, right = self._more
        name = self._name_index()
        parts: list[Part] = []
        for i, w, text, cls in cells:
            parts.append((text, cls))
            parts.append((" ", None))
            if left and i == name:  # columns scrolled out between the name and the next one shown
                parts.append(("‹", "linelist--muted"))
        if right:
            parts.append(("›", "linelist--muted"))
        return parts

    def header_parts(self) -> Iterable[Part]:
        return self._parts([(i, w, fit(self.columns[i].title, w, self.columns[i].align), None)
                            for i, w in self.layout()])

    def row_parts(self, index: int) -> Iterable[Part]:
        row = self.rows[index]
        cells = []
        for i, w in self.layout():
            c = self.columns[i]
            text, cls = c.cell(row)
            cells.append((i, w, fit(text, w, c.align, c.keep_end), cls))
        return self._parts(cells)

    def row_style(self, index: int) -> Optional[str]:
        return self._row_class(index, self.rows[index]) if self._row_class else None

    def to_csv(self, keys: Optional[list[str]] = None) -> str:
        """The table's rows as CSV (raw values of ``keys``, default every column key)."""
        keys = keys or [c.key for c in self.columns]
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(keys)
        for row in self.rows:  # no cell a spreadsheet would run as a formula
            w.writerow(["" if row.get(k) is None else csv_text(row[k]) if isinstance(row[k], str) else row[k]
                        for k in keys])
        return buf.getvalue()
