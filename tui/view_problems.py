"""Problems view: files and folders the index could not use, with the reason."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from dumpscope.tui.detail import rel_to_root
from dumpscope.tui.table_view import TableView
from dumpscope.tui.vtable import Column
from dumpscope.tui.explorer import explorer


#: the error column's widest (a longer reason is cut; Enter shows it whole)
ERROR_MAX = 32


class ProblemsScreen(TableView):
    title_text = "Problems — files the index could not use"
    export_name = "problems"
    empty_text = "no problems"

    def columns(self) -> list[Column]:
        # cut in the middle, keeping the file name: at 80 columns the folders filled the cell
        return [Column("rel", "path", 0, keep_end=True), Column("error", "error", 0)]

    def load(self) -> None:
        q = explorer(self).q
        rows = [dict(p, rel=rel_to_root(p["path"], q.root)) for p in q.problems()]
        # the reasons are short: as wide as the longest (within bounds), the path has the rest
        self.table.columns[1].width = max(12, min(ERROR_MAX, max((len(str(r["error"])) for r in rows), default=0)))
        self.table.set_rows(rows)
        self.note(Text(f"{len(rows)} problems (paths relative to the dump root)", "dim"))

    def open_row(self, row: dict[str, Any]) -> None:
        self.notify(f"{row['rel']}: {row['error']}", timeout=6)
