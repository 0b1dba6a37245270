"""Overflow view: ops with overflow status / NaN / Inf, in execution order, origin first.

``find_overflow`` may scan tensor data, so it runs in a thread worker; results are kept on
the app per rank/step (instant on reopening) and feed the ``!`` badges of the explorer.
"""

from __future__ import annotations

import time

from typing import Any, Optional

from rich.text import Text
from textual import work
from textual.worker import get_current_worker

from dumpscope.tui.table_view import TableView
from dumpscope.tui.vtable import Column


def _n(key: str):
    def f(row: dict[str, Any]) -> tuple[str, Optional[str]]:
        v = row.get(key)
        return ("-" if v is None else f"{v:,}", "linelist--bad" if v else None)
    return f


class OverflowScreen(TableView):
    title_text = "Overflow / NaN / Inf — execution order, first row = origin"
    export_name = "overflow"
    empty_text = "no overflow, NaN or Inf found"

    def columns(self) -> list[Column]:
        return [
            Column("mark", "", 2, fmt=lambda r: ("▶" if r.get("_first") else "!", "linelist--bad")),
            Column("exec_index", "exec", 5, ">"),
            Column("name", "op", keep_end=True),
            Column("type", "type", 12),
            Column("evidence", "from", 7),
            Column("status_words", "status", 10,
                   fmt=lambda r: ",".join(r.get("status_words") or []) or
                   (f"{r['status']:#x}" if r.get("status") else "")),
            Column("nan", "nan", 6, ">", fmt=_n("nan")),
            Column("posinf", "+inf", 6, ">", fmt=_n("posinf")),
            Column("neginf", "-inf", 6, ">", fmt=_n("neginf")),
        ]

    def row_class(self, index: int, row: dict[str, Any]) -> Optional[str]:
        return "linelist--origin" if index == 0 else None

    def load(self) -> None:
        app = self.app
        key = (app.rank, app.step)  # type: ignore[attr-defined]
        cached = app.overflow_results.get(key)  # type: ignore[attr-defined]
        if cached is not None:
            self._show(cached)
            return
        self.note(f"scanning rank {key[0]} step {key[1]} for overflow / NaN / Inf…", "italic")
        self._scan(app.q, *key)  # type: ignore[attr-defined]

    @work(thread=True, exclusive=True, group="overflow", name="overflow scan")
    def _scan(self, q, rank: int, step: int) -> None:
        from dumpscope.tui.engines import EngineMissing, find_overflow

        last = [0.0]

        def progress(done: int, total: int) -> None:
            # at most a few redraws a second: the scan runs over every op's outputs
            now = time.monotonic()
            if now - last[0] > 0.25 and not get_current_worker().is_cancelled:
                last[0] = now
                self.app.call_from_thread(
                    self.note, f"scanning rank {rank} step {step} for overflow / NaN / Inf… {done:,}/{total:,} ops",
                    "italic")

        try:
            rows = find_overflow()(q, rank=rank, step=step, progress=progress)
            error = None
        except EngineMissing as exc:
            rows, error = None, str(exc)
        except Exception as exc:
            rows, error = None, f"overflow scan failed: {type(exc).__name__}: {exc}".splitlines()[0]
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._done, rank, step, rows, error)

    def _done(self, rank: int, step: int, rows: Optional[list[dict[str, Any]]], error: Optional[str]) -> None:
        if error is not None or rows is None:
            self.note(f"! {error}", "bold red")
            return
        app = self.app
        app.overflow_results[(rank, step)] = rows  # type: ignore[attr-defined]
        app.badges.overflow.update(r["op_id"] for r in rows if r.get("op_id") is not None)  # type: ignore
        app.main.badges_changed()  # type: ignore[attr-defined]
        self._show(rows)

    def _show(self, rows: list[dict[str, Any]]) -> None:
        shown = [dict(r, _first=(i == 0)) for i, r in enumerate(rows)]
        self.table.set_rows(shown)
        app = self.app
        where = f"rank {app.rank} step {app.step}"  # type: ignore[attr-defined]
        if rows:
            first = rows[0]
            text = Text.assemble((f"{len(rows)} ops at {where}; origin: ", ""), (str(first.get("name")), "bold red"),
                                 ("   enter: open op  n/N: next/prev  e: csv", "dim"))
        else:
            text = Text(f"nothing found at {where}", "green")
        self.note(text)

    def open_row(self, row: dict[str, Any]) -> None:
        self.open_op_id(row.get("op_id"))
