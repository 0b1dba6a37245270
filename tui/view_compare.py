"""Compare view: matched tensors with metrics, verdicts and origins; the first divergence selected.

The compare itself runs in the app's "compare" worker when the explorer starts with
``--compare``; this view only shows (and sorts) the rows it produced.  ``n``/``N`` walk the
rows where an error is born (origin "born" or "constant").  Above the table: what each side ran in
(the document's ``precision``), the evidence when nothing diverged, and the chart of each op's error
against its line along the execution order (tui/compare_chart.py; ``v`` shows/hides it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual import work
from textual.binding import Binding
from textual.widgets import Static
from textual.worker import get_current_worker

from dumpscope.core.inert import inert
from dumpscope.tui.badges import VERDICT_CLASS, VERDICT_GLYPH
from dumpscope.tui.compare_rows import both_names, is_born, is_first_divergence, metric, origin_text
from dumpscope.tui.compare_chart import CompareChart, OpPoint, evidence_shares, op_points
from dumpscope.tui.table_view import TableView
from dumpscope.tui.vtable import Column, VTable, blank_columns
from dumpscope.tui.keybar import KeyBar
from dumpscope.tui.explorer import explorer

_VERDICT_ORDER = {"error": 0, "warning": 1, "pass": 2}


def _num(v: Any, missing: float) -> float:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return missing
    return float(v)


#: sort keys over (row, its place in execution order)
SORTS: dict[str, tuple[str, Optional[Callable[[dict[str, Any], int], Any]]]] = {
    "0": ("execution order", None),
    "1": ("cosine (lowest first)", lambda r, i: _num(r.get("cosine"), -2.0)),
    "2": ("max abs err (largest first)", lambda r, i: -_num(r.get("max_abs_err"), math.inf)),
    "3": ("max rel err (largest first)", lambda r, i: -_num(r.get("max_rel_err"), math.inf)),
    "4": ("verdict (errors first)", lambda r, i: (_VERDICT_ORDER.get(str(r.get("verdict")), 3), i)),
    "5": ("name", lambda r, i: str(r.get("name"))),
}


def compare_columns(first: Callable[[], Optional[dict[str, Any]]]) -> list[Column]:
    """The compare table's columns; ``first()`` is the first divergence's row (marked ▶)."""

    def verdict(r: dict[str, Any]) -> tuple[str, Optional[str]]:
        v = str(r.get("verdict"))
        return (("▶" if r is first() else "") + VERDICT_GLYPH.get(v, "?"), VERDICT_CLASS.get(v))

    return [
        Column("verdict", "", 2, fmt=verdict, blank=lambda r: False),
        Column("name", "op", keep_end=True, fmt=both_names),
        Column("io", "tensor", 6, fmt=lambda r: f"{'in' if r.get('io') == 'input' else 'out'}.{r.get('slot')}"),
        Column("origin", "origin", 6, fmt=origin_text,
               blank=lambda r: not r.get("origin") and r.get("kind") not in ("parameter", "scalar")),
        Column("cosine", "cosine", 8, ">", fmt=metric("cosine", 6)),
        Column("max_abs_err", "max abs", 9, ">", fmt=metric("max_abs_err")),
        Column("max_rel_err", "max rel", 9, ">", fmt=metric("max_rel_err")),
        Column("one_thousandth_ratio", "‰1", 6, ">", fmt=metric("one_thousandth_ratio", 3)),
        Column("five_thousandth_ratio", "‰5", 6, ">", fmt=metric("five_thousandth_ratio", 3)),
        Column("rule", "rule", 10),
    ]


@dataclass
class Prepared:
    """The compare table of one result in one sort order (made in a worker, kept on the app)."""

    rows: list[dict[str, Any]]  # the result's own row dicts (not copied), sorted
    first: Optional[dict[str, Any]]  # the first divergence's row
    cursor: int
    counts: dict[str, int]
    hidden: list[str]  # column keys empty in every row
    born: list[int]  # indices (in ``rows``) of the rows where an error is born
    points: list[OpPoint]  # the chart's ops, in execution order
    where: dict[int, int]  # id(row) -> its op's point


def header_text(result: dict[str, Any]) -> Text:
    """What the target ran in, and (no divergence) the evidence: the document's own words."""
    prec = result.get("precision") or {}
    out = Text(no_wrap=False)
    if prec.get("target_text") or prec.get("golden_text"):
        out.append(f"target: {inert(prec.get('target_text') or '-')}   golden: {inert(prec.get('golden_text') or '-')}",
                   "")
    ev = result.get("evidence") or {}
    if not result.get("first_divergence") and ev.get("text"):
        out.append(("\n" if out.plain else "") + inert(str(ev["text"])), "green")
    return out


def prepare(result: dict[str, Any], sort_key: str, columns: list[Column]) -> Prepared:
    """Sort, count and find the first divergence in one pass or two: no per-row copies (100k rows)."""
    rows = result.get("rows", [])
    fd = result.get("first_divergence")
    first = next((r for r in rows if r.get("name") == fd.get("name") and is_first_divergence(r, fd)), None) \
        if fd else None
    key = SORTS[sort_key][1]
    if key is not None:
        order = sorted(range(len(rows)), key=lambda i: key(rows[i], i))
        rows = [rows[i] for i in order]
    counts = {"pass": 0, "warning": 0, "error": 0}
    born = []
    for i, r in enumerate(rows):
        v = r.get("verdict")
        if v in counts:
            counts[v] += 1
        if v == "error" and r.get("origin") in ("born", "constant"):
            born.append(i)
    cursor = next((i for i, r in enumerate(rows) if r is first), 0) if first is not None else 0
    points, where = op_points(result.get("rows", []), lambda r: r is first, evidence_shares(result))
    return Prepared(rows, first, cursor, counts, blank_columns(columns, rows), born, points, where)


def warm_view(app: Any, result: dict[str, Any]) -> None:
    """Prepare the table's default order for ``result`` (called in the compare worker, so ``c`` finds it)."""
    app.compare_view_cache = {"result": result, (id(result), "0"): prepare(result, "0", compare_columns(lambda: None))}


class CompareScreen(TableView):
    title_text = "Compare — golden vs target"
    export_name = "compare"
    empty_text = "no matched tensors"
    BINDINGS = [Binding("n", "next_problem(1)", "Next born error", id="compare.next_born"),
                Binding("N", "next_problem(-1)", "Prev born error", show=False, id="compare.prev_born")] + [
        Binding(k, f"sort('{k}')", f"Sort: {label}", show=False, id=f"compare.sort_{k}")
        for k, (label, _) in SORTS.items()] + [
        Binding("v", "toggle_chart", "Chart", id="compare.chart",
                tooltip="Show/hide the chart of each op's error against its line, in execution order")]

    sort_key = "0"
    _first: Optional[dict[str, Any]] = None
    _born: Optional[list[int]] = None
    _where: dict[int, int] = {}

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title_text, "bold"), id="view-title")
        yield Static("", id="view-note")
        yield Static("", id="compare-evidence")
        yield CompareChart(id="compare-chart")
        yield VTable(self.columns(), empty_text=self.empty_text, row_class=self.row_class, id="view-table")
        yield Static("", id="view-hidden")
        yield KeyBar()

    @property
    def chart(self) -> CompareChart:
        return self.query_one(CompareChart)

    def action_toggle_chart(self) -> None:
        self.chart.display = not self.chart.display

    def palette_commands(self):
        yield from super().palette_commands()
        yield ("Compare: show/hide the chart of errors against the line", self.action_toggle_chart, "v")

    def on_line_list_highlighted(self, event: Any) -> None:
        """The chart's ``▲`` follows the table's cursor (its op's column)."""
        row = self.table.current
        self.chart.move(self._where.get(id(row)) if row is not None else None)

    def columns(self) -> list[Column]:
        return compare_columns(lambda: self._first)

    def row_class(self, index: int, row: dict[str, Any]) -> Optional[str]:
        return "linelist--origin" if row is self._first else None

    def is_problem(self, row: dict[str, Any]) -> bool:
        return is_born(row)

    def load(self) -> None:
        app = explorer(self)
        result = app.compare_result
        if result is None:
            err = app.compare_error
            self.note(f"! {err}" if err else "comparing… (the table fills in when done)",
                      "bold red" if err else "italic")
            return
        cache = app.compare_view_cache
        prepared = cache.get((id(result), self.sort_key)) if cache and cache.get("result") is result else None
        if prepared is not None:
            self._show(result, prepared)
            return
        self.table.empty_text = "sorting…"
        self.table.refresh()
        self._prepare(result, self.sort_key)

    @work(thread=True, exclusive=True, group="compare-view", name="compare view")
    def _prepare(self, result: dict[str, Any], sort_key: str) -> None:
        """Sorting and counting 100k+ rows takes longer than a key may wait: off the UI thread."""
        prepared = prepare(result, sort_key, self.table.columns)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._prepared, result, sort_key, prepared)

    def _prepared(self, result: dict[str, Any], sort_key: str, prepared: Prepared) -> None:
        app = explorer(self)
        cache = app.compare_view_cache
        if not cache or cache.get("result") is not result:  # one result's tables at a time
            cache = app.compare_view_cache = {"result": result}
        cache[(id(result), sort_key)] = prepared
        if sort_key == self.sort_key and app.compare_result is result:
            self._show(result, prepared)

    def _show(self, result: dict[str, Any], prepared: Prepared) -> None:
        self._first, self._born, self._where = prepared.first, prepared.born, prepared.where
        self.table.empty_text = self.empty_text
        self.table.set_rows(prepared.rows, cursor=prepared.cursor, hidden=prepared.hidden)
        head = header_text(result)
        evidence = self.query_one("#compare-evidence", Static)
        evidence.update(head)
        evidence.display = bool(head.plain)
        row = self.table.current
        self.chart.show(prepared.points, prepared.where.get(id(row)) if row is not None else None)
        counts = prepared.counts
        fd = result.get("first_divergence")
        note = Text()
        note.append(f"✓ {counts['pass']}  ", "green")
        note.append(f"~ {counts['warning']}  ", "yellow")
        note.append(f"✗ {counts['error']}  ", "red")
        if fd:
            note.append("first divergence: ", "")
            note.append(f"{fd.get('name')} {fd.get('io')}.{fd.get('slot')}", "bold red")
            if fd.get("cause"):
                note.append(f" ({fd['cause']})", "red")
        else:
            note.append("no divergence", "green")
        ug, ut = len(result.get("unmatched_golden", [])), len(result.get("unmatched_target", []))
        if ug or ut:
            note.append(f"  unmatched {ug}/{ut}", "dim")
        note.append(f"   n/N: where errors are born   sort: {SORTS[self.sort_key][0]} (0-5)   v: chart", "dim")
        self.note(note)

    def action_sort(self, key: str) -> None:
        self.sort_key = key
        self.load()

    def open_row(self, row: dict[str, Any]) -> None:
        from dumpscope.tui.compare_diff import CompareDiffScreen

        self.app.push_screen(CompareDiffScreen(self.table.rows, self.table.cursor, born=self._born))
