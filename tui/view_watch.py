"""Watch view: for each watched tensor, its snapshots after each trigger op, and where it changed.

One table: a row per watched tensor, then its snapshot timeline indented below it.
``≠`` marks a snapshot that differs from the previous one (``=`` unchanged).
"""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual import work
from textual.worker import get_current_worker

from dumpscope.tui.table_view import TableView
from dumpscope.tui.vtable import Column
from dumpscope.tui.explorer import explorer


def _num(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v)


def flatten(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for w in report.get("watched", []):
        rows.append({"kind": "watched", "name": w.get("name"), "op_id": w.get("op_id"),
                     "first_change_after": w.get("first_change_after"),
                     "snapshots": len(w.get("snapshots", []))})
        for s in w.get("snapshots", []):
            rows.append(dict(s, kind="snapshot", name=w.get("name"), op_id=w.get("op_id"),
                             is_first=(s.get("after") == w.get("first_change_after") and s.get("changed"))))
    return rows


class WatchScreen(TableView):
    title_text = "Watch — snapshots of watched tensors after each trigger op"
    export_name = "watch"
    empty_text = "no watched tensors in this dump"

    def columns(self) -> list[Column]:
        def label(r: dict[str, Any]) -> tuple[str, Optional[str]]:
            if r["kind"] == "watched":
                return (f"W {r.get('name')}", "linelist--warn")
            return (f"  ↳ {r.get('after')}", None)

        def changed(r: dict[str, Any]) -> tuple[str, Optional[str]]:
            if r["kind"] == "watched":
                first = r.get("first_change_after")
                return (f"first change after {first}" if first else "never changed",
                        "linelist--bad" if first else "linelist--ok")
            return ("≠ changed" if r.get("changed") else "= same", "linelist--bad" if r.get("changed") else None)

        return [
            Column("label", "watched tensor / ↳ snapshot after op", 0, fmt=label, keep_end=True,
                   blank=lambda r: False),
            Column("changed", "change", 22, fmt=changed, keep_end=True, blank=lambda r: False),
            Column("changed_elements", "elements", 9, ">",
                   fmt=lambda r: "" if r["kind"] == "watched" else _num(r.get("changed_elements"))),
            Column("max_abs_diff", "max|diff|", 10, ">",
                   fmt=lambda r: "" if r["kind"] == "watched" else _num(r.get("max_abs_diff"))),
            Column("first_changed", "first idx", 10,
                   fmt=lambda r: "" if r["kind"] == "watched" else _num(r.get("first_changed"))),
        ]

    def row_class(self, index: int, row: dict[str, Any]) -> Optional[str]:
        return "linelist--origin" if row.get("is_first") else None

    def is_problem(self, row: dict[str, Any]) -> bool:
        return row["kind"] == "snapshot" and bool(row.get("changed"))

    def load(self) -> None:
        app = explorer(self)
        key = (app.rank, app.step)
        cached = app.watch_results.get(key)
        if cached is not None:
            self._show(cached)
            return
        self.note("reading watch snapshots…", "italic")
        self._run(app.q, *key)

    @work(thread=True, exclusive=True, group="watch", name="watch report")
    def _run(self, q, rank: int, step: int) -> None:
        from dumpscope.core.engines.watch.report import watch_report

        try:
            doc, error = watch_report(q, rank=rank, step=step), None
        except Exception as exc:
            doc, error = None, f"watch report failed: {type(exc).__name__}: {exc}".splitlines()[0]
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._done, rank, step, doc, error)

    def _done(self, rank: int, step: int, doc: Optional[dict[str, Any]], error: Optional[str]) -> None:
        if doc is None:
            self.note(f"! {error}", "bold red")
            return
        app = explorer(self)
        app.watch_results[(rank, step)] = doc
        changed = {w.get("op_id") for w in doc.get("watched", []) if w.get("first_change_after")}
        app.badges.watched.update(i for i in changed if i is not None)
        app.main.badges_changed()
        self._show(doc)

    def _show(self, doc: dict[str, Any]) -> None:
        rows = flatten(doc)
        first = next((i for i, r in enumerate(rows) if r.get("is_first")), 0)
        self.table.set_rows(rows, cursor=first)
        n = len(doc.get("watched", []))
        self.note(Text.assemble((f"{n} watched tensors", ""),
                                ("   enter: open op  n/N: next/prev change  e: csv", "dim")))

    def open_row(self, row: dict[str, Any]) -> None:
        q = explorer(self).q
        if row["kind"] == "snapshot" and row.get("after") and q is not None:
            app = explorer(self)
            op = q.find_by_graph_name(str(row["after"]), app.rank, app.step)
            if op is not None:
                explorer(self).open_op(op)
                return
        self.open_op_id(row.get("op_id"))
