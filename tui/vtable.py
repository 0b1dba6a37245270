"""A virtual table on the Line API: rows live in a plain list, only visible ones are drawn.

Stock ``DataTable`` builds every row up front (slow for compare results of 500k rows); this
one formats a row only when it scrolls into view.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Union

from dumpscope.tui.linelist import LineList, Part

Cell = Union[str, tuple[str, Optional[str]]]


@dataclass
class Column:
    key: str
    title: str
    width: int = 0  # 0: share the remaining width
    align: str = "<"
    fmt: Optional[Callable[[dict[str, Any]], Cell]] = None
    keep_end: bool = False  # op names: the end (the op itself) matters more than the scope


    def cell(self, row: dict[str, Any]) -> tuple[str, Optional[str]]:
        if self.fmt is not None:
            value = self.fmt(row)
        else:
            v = row.get(self.key)
            value = "" if v is None else str(v)
        return value if isinstance(value, tuple) else (value, None)


def fit(text: str, width: int, align: str = "<", keep_end: bool = False) -> str:
    if width <= 0:
        return ""
    if len(text) > width:
        return ("…" + text[-(width - 1):]) if keep_end else (text[: width - 1] + "…")
    return text.rjust(width) if align == ">" else text.ljust(width)


class VTable(LineList):
    """Table of dict rows; ``row_class`` may style whole rows (e.g. the first divergence)."""

    header_lines = 1

    def __init__(self, columns: list[Column], empty_text: str = "(no rows)",
                 row_class: Optional[Callable[[int, dict[str, Any]], Optional[str]]] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.columns = columns
        self.rows: list[dict[str, Any]] = []
        self.empty_text = empty_text
        self._row_class = row_class
        #: a row to put the cursor on at the next ``set_rows`` (a reopened view)
        self.pending_cursor: Optional[int] = None

    def set_rows(self, rows: list[dict[str, Any]], cursor: int = 0) -> None:
        self.rows = rows
        if self.pending_cursor is not None and rows:
            cursor, self.pending_cursor = self.pending_cursor, None
        self.reset(cursor)

    def row_count(self) -> int:
        return len(self.rows)

    @property
    def current(self) -> Optional[dict[str, Any]]:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def _widths(self) -> list[int]:
        total = max(10, self.scrollable_content_region.width)
        fixed = sum(c.width + 1 for c in self.columns if c.width)
        flex = [c for c in self.columns if not c.width]
        share = max(8, (total - fixed - len(flex)) // max(1, len(flex))) if flex else 0
        return [c.width or share for c in self.columns]

    def header_parts(self) -> Iterable[Part]:
        return [(fit(c.title, w, c.align) + " ", None) for c, w in zip(self.columns, self._widths())]

    def row_parts(self, index: int) -> Iterable[Part]:
        row = self.rows[index]
        parts: list[Part] = []
        for c, w in zip(self.columns, self._widths()):
            text, cls = c.cell(row)
            parts.append((fit(text, w, c.align, c.keep_end), cls))
            parts.append((" ", None))
        return parts

    def row_style(self, index: int) -> Optional[str]:
        return self._row_class(index, self.rows[index]) if self._row_class else None

    def to_csv(self, keys: Optional[list[str]] = None) -> str:
        """The table's rows as CSV (raw values of ``keys``, default every column key)."""
        keys = keys or [c.key for c in self.columns]
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(keys)
        for row in self.rows:
            w.writerow(["" if row.get(k) is None else row.get(k) for k in keys])
        return buf.getvalue()
