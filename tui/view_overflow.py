"""Overflow view: ops with overflow status / NaN / Inf over every rank and step, origin first.

``overflow_report`` may count tensor data, so it runs in a child process with the CLI's process pool
(``DumpscopeApp.overflow_report``), watched by a thread worker with progress; until it
ends the view says it is scanning (never "none found" about places not yet looked at).  The
result is kept on the app (instant on reopening) and feeds the ``!`` badges and the step/rank
trouble marks of the explorer.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from rich.text import Text
from textual import work
from textual.worker import get_current_worker

from dumpscope.tui.table_view import TableView
from dumpscope.tui.vtable import Column
from dumpscope.tui.explorer import explorer


def _n(key: str):
    def f(row: dict[str, Any]) -> tuple[str, Optional[str]]:
        v = row.get(key)
        return ("-" if v is None else f"{v:,}", "linelist--bad" if v else None)
    return f


def places_text(places: list[dict[str, Any]]) -> str:
    ranks = sorted({p["rank"] for p in places})
    steps = sorted({p["step"] for p in places})

    def span(v: list[int]) -> str:
        return f"{v[0]}..{v[-1]}" if len(v) > 1 and v == list(range(v[0], v[-1] + 1)) else ",".join(map(str, v))
    return f"rank {span(ranks)} × step {span(steps)}" if len(ranks) * len(steps) == len(places) else \
        f"{len(places)} rank/step places"


class OverflowScreen(TableView):
    title_text = "Overflow / NaN / Inf — every rank and step, by step then execution order, first = origin"
    export_name = "overflow"
    empty_text = "scanning…"

    def columns(self) -> list[Column]:
        return [
            Column("mark", "", 2, fmt=lambda r: ("▶" if r.get("_first") else "!", "linelist--bad"),
                   blank=lambda r: False),
            Column("rank", "rank", 4, ">"),
            Column("step", "step", 4, ">"),
            Column("exec_index", "exec", 5, ">"),
            Column("name", "op", keep_end=True),
            Column("type", "type", 10),
            Column("evidence", "from", 7),
            Column("status_words", "status", 8, blank=lambda r: not (r.get("status_words") or r.get("status")),
                   fmt=lambda r: ",".join(r.get("status_words") or []) or
                   (f"{r['status']:#x}" if r.get("status") else "")),
            Column("nan", "nan", 5, ">", fmt=_n("nan")),
            Column("posinf", "+inf", 5, ">", fmt=_n("posinf")),
            Column("neginf", "-inf", 5, ">", fmt=_n("neginf")),
        ]

    def row_class(self, index: int, row: dict[str, Any]) -> Optional[str]:
        return "linelist--origin" if index == 0 else None

    def load(self) -> None:
        app = explorer(self)
        cached = app.overflow_doc
        if cached is not None:
            self._show(cached)
            return
        self.table.empty_text = "scanning…"
        self.note("scanning every rank and step for overflow / NaN / Inf…", "italic")
        self._scan(app.q)

    @work(thread=True, exclusive=True, group="overflow", name="overflow scan")
    def _scan(self, q) -> None:
        from dumpscope.core.index.dump_index import IndexCancelled

        last = [0.0]

        def progress(done: int, total: int) -> None:
            # at most a few redraws a second: the scan reads every output tensor without evidence
            now = time.monotonic()
            if now - last[0] > 0.25 and not get_current_worker().is_cancelled:
                last[0] = now
                self.app.call_from_thread(
                    self.note, f"scanning every rank and step for overflow / NaN / Inf… {done:,}/{total:,} files",
                    "italic")

        try:
            doc = explorer(self).overflow_report(q, progress)
            error = None
        except IndexCancelled:
            return
        except Exception as exc:
            doc, error = None, f"overflow scan failed: {type(exc).__name__}: {exc}".splitlines()[0]
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._done, doc, error)

    def _done(self, doc: Optional[dict[str, Any]], error: Optional[str]) -> None:
        if error is not None or doc is None:
            self.table.empty_text = "scan failed"
            self.table.refresh()
            self.note(f"! {error}", "bold red")
            return
        explorer(self).overflow_scanned(doc)
        self._show(doc)

    def _show(self, doc: dict[str, Any]) -> None:
        rows = doc["ops"]
        scanned = doc.get("scanned", [])
        where = places_text(scanned) if scanned else "nothing"
        self.table.empty_text = (f"no overflow, NaN or Inf found in {where} scanned" if scanned
                                 else "nothing was scanned")
        # rank and step columns once several were scanned (the note names the one place otherwise)
        hide = [k for k in ("rank", "step") if len({p[k] for p in scanned} | {r.get(k) for r in rows}) <= 1]
        self.table.set_rows([dict(r, _first=(i == 0)) for i, r in enumerate(rows)], hide=hide)
        self.table.refresh()
        missing = doc.get("not_scanned") or []
        tail = f"  not looked at: {places_text(missing)}" if missing else ""
        if rows:
            origin = doc.get("origin") or {}
            first = origin if origin.get("name") else rows[0]
            text = Text.assemble((f"{len(rows)} ops in {where}; origin: ", ""), (str(first.get("name")), "bold red"),
                                 (f" (rank {first['rank']} step {first['step']})", ""),
                                 (f" — {origin.get('op_reason', '')}" if origin.get("op_reason") else "", ""),
                                 (tail, "yellow"), ("   enter: open op  n/N: next/prev  e: csv", "dim"))
        else:
            text = Text.assemble((f"nothing found in {where} scanned", "green"), (tail, "yellow"))
        self.note(text)

    def open_row(self, row: dict[str, Any]) -> None:
        self.open_op_id(row.get("op_id"))
