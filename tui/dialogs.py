"""Small modal dialogs: step/rank picker, op search, export path."""

from __future__ import annotations

import os
from typing import Optional

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from dumpscope.core.inert import inert
from dumpscope.core.query import DumpQuery, OpRow
from dumpscope.core.support.tree_paths import inside_tree
from dumpscope.tui.keylist import KeyOptionList
from dumpscope.tui.explorer import explorer

SEARCH_LIMIT = 200


class TypeAhead:
    """Keys typed right after the key that opened a dialog (``/Exp-op0⏎`` in one burst over SSH)
    reach the screen before its input has focus: they go into the input instead of being lost.

    A printable key that reaches the screen never went through the ``Input`` (it consumes those),
    and Enter is handled here for both routes so it submits exactly once.
    """

    def on_key(self, event: events.Key) -> None:
        if self.type_ahead(event):
            event.stop()
            event.prevent_default()

    def type_ahead(self, event: events.Key) -> bool:
        """Put a printable key into the dialog's input, or submit it on Enter; True when taken."""
        inputs = self.query(Input)  # type: ignore[attr-defined]
        if not inputs:
            return False
        field = inputs.first()
        if event.key == "enter":
            field.post_message(Input.Submitted(field, field.value))
            return True
        if event.is_printable and event.character:
            if self.focused is not field:  # type: ignore[attr-defined]
                field.focus()
            field.insert_text_at_cursor(event.character)
            return True
        return False


class PickerScreen(ModalScreen[Optional[int]]):
    """Pick one step or rank; Enter chooses, esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog.cancel")]

    def __init__(self, what: str, values: list[int], current: int, marks: Optional[dict[int, int]] = None) -> None:
        super().__init__()
        self.what, self.values, self.current = what, values, current
        self.marks = marks or {}  # value -> ops with overflow evidence there ("step 1 ! 3")

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text(f"Pick a {self.what}" + ("  (! n: ops with overflow / NaN / Inf)" if self.marks else ""),
                              "bold"))
            yield KeyOptionList(*[Option(f"{self.what} {v}" + (f" ! {self.marks[v]}" if self.marks.get(v) else "")
                                      + ("  (current)" if v == self.current else ""))
                               for v in self.values], id="picker")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = self.values.index(self.current) if self.current in self.values else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.values[event.option_index])

    def action_cancel(self) -> None:
        self.dismiss(None)


class SearchScreen(TypeAhead, ModalScreen[Optional[tuple[OpRow, list[OpRow]]]]):
    """Fuzzy search over full names and types (``q.search``), run in a worker as you type."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="dialog.cancel"),
        Binding("down", "move(1)", "Next", show=False, id="search.down"),
        Binding("up", "move(-1)", "Previous", show=False, id="search.up"),
    ]

    def __init__(self, q: DumpQuery, rank: int, step: int, initial: str = "") -> None:
        super().__init__()
        self.q, self.rank, self.step, self.initial = q, rank, step, initial
        self.hits: list[OpRow] = []
        self._pending_enter = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="search-dialog"):
            yield Input(self.initial, placeholder="search op names and types (fuzzy); @net.py:55: ops of a source line",
                        id="search-input")
            yield Static("", id="search-count")
            yield OptionList(id="search-results")

    AUTO_FOCUS = "#search-input"

    def on_mount(self) -> None:
        if self.initial:
            self._search(self.initial)

    @on(Input.Changed, "#search-input")
    def _changed(self, event: Input.Changed) -> None:
        self._search(event.value)

    @work(thread=True, exclusive=True, group="search", name="op search")
    def _search(self, text: str) -> None:
        text = text.strip()
        if text.startswith("@"):  # ops whose source stack holds FILE[:LINE]
            from dumpscope.core.graphs.source_match import SourceSpec, SourceSpecError

            try:
                hits = self.q.ops_at_source(SourceSpec.parse(text), self.rank, self.step)
            except SourceSpecError:
                hits = []
        else:
            hits = self.q.search(text, self.rank, self.step, limit=SEARCH_LIMIT) if text else []
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show, text, hits)

    def _show(self, text: str, hits: list[OpRow]) -> None:
        if text.strip() != self.query_one(Input).value.strip():
            return
        self.hits = hits
        results = self.query_one(OptionList)
        results.clear_options()
        results.add_options([Option(Text.assemble(inert(h.short), (f"  {inert(h.type)}  ", "dim"),
                                                  (inert(h.scope), "dim")))
                             for h in hits])
        more = "+" if len(hits) >= SEARCH_LIMIT else ""
        self.query_one("#search-count", Static).update(
            Text(f"{len(hits)}{more} hits (enter: open, n/N later: next/previous hit)", "dim") if text.strip()
            else "")
        if hits:
            results.highlighted = 0
        if self._pending_enter:
            self._pending_enter = False
            self._choose()

    def action_move(self, delta: int) -> None:
        results = self.query_one(OptionList)
        if results.option_count:
            cur = results.highlighted or 0
            results.highlighted = max(0, min(results.option_count - 1, cur + delta))

    @on(Input.Submitted, "#search-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.hits and self._results_current():
            self._choose()
        elif event.value.strip():
            self._pending_enter = True  # results still on their way

    def _results_current(self) -> bool:
        return bool(self.query_one(OptionList).option_count)

    def _choose(self) -> None:
        results = self.query_one(OptionList)
        idx = results.highlighted or 0
        if 0 <= idx < len(self.hits):
            self.dismiss((self.hits[idx], self.hits))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if 0 <= event.option_index < len(self.hits):
            self.dismiss((self.hits[event.option_index], self.hits))

    def action_cancel(self) -> None:
        self.dismiss(None)


class ExportScreen(TypeAhead, ModalScreen[Optional[str]]):
    """Ask where to write the report (``.md``) or the current table (``.csv``)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog.cancel")]

    def __init__(self, default: str, csv_ok: bool = False, redump_ok: str = "") -> None:
        super().__init__()
        self.default = default
        self.csv_ok = csv_ok
        self.redump_ok = redump_ok

    def compose(self) -> ComposeResult:
        kinds = ".md: triage report" + ("; .csv: this table" if self.csv_ok else "") + (
            " (msprobe's columns); .xlsx: the same, highlighted" if self._compare_view() else "") + (
            f"; .json: re-dump config of the {self.redump_ok}" if self.redump_ok else "")
        with Vertical(classes="dialog"):
            yield Static(Text.assemble(("Export", "bold"), (f"  ({kinds}; enter: write, esc: cancel)", "dim")))
            yield Input(self.default, id="export-path")
            yield Static("", id="export-error")

    AUTO_FOCUS = "#export-path"

    @on(Input.Submitted, "#export-path")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        from dumpscope.tui.report import write_export

        path = os.path.abspath(os.path.expanduser(event.value.strip() or self.default))
        for root in explorer(self).forbidden_roots():
            if inside_tree(path, root):
                self._error("refusing to write inside the dump tree: choose a path outside it")
                return
        if path.endswith(".csv") and not self.csv_ok:
            self._error("CSV export is for table views (overflow, compare, watch, problems)")
            return
        if path.endswith(".json") and not self.redump_ok:
            self._error("a .json re-dump config is exported from the compare view or of marked ops (space)")
            return
        if path.endswith((".csv", ".xlsx")) and self._compare_view():
            self._compare_table(path, event.value.strip() or self.default)
            return
        if path.endswith(".xlsx"):
            self._error(".xlsx export is for the compare view")
            return
        try:
            write_export(self.app, path)
        except OSError as exc:
            self._error(f"cannot write {path}: {exc.strerror or exc}")
            return
        self.app.notify(f"wrote {event.value.strip() or self.default}", timeout=3)
        self.dismiss(path)

    def _compare_view(self) -> bool:
        """Exporting from the compare view (with its result): tables go out in msprobe's shape."""
        app = explorer(self)
        under = app.screen_stack[-2] if len(app.screen_stack) >= 2 and app.screen is self else app.screen
        return getattr(under, "export_name", "") == "compare" and bool(explorer(self).compare_result)

    def _compare_table(self, path: str, shown: str) -> None:
        """msprobe-shaped compare table, written by a worker thread (it reads both indexes)."""
        from dumpscope.core.engines.compare import report as cr

        app = explorer(self)

        def work() -> None:
            from dumpscope.tui.report import write_compare_table

            try:
                n = write_compare_table(app, path)
            except (OSError, cr.ExportError) as exc:
                app.call_from_thread(app.notify, f"! {exc}", severity="error", timeout=6)
                return
            app.call_from_thread(app.notify, f"wrote {n} rows to {shown}", timeout=3)

        app.run_worker(work, name="compare-export", thread=True, exclusive=False)
        self.dismiss(path)

    def _error(self, text: str) -> None:
        self.query_one("#export-error", Static).update(Text(f"! {inert(text)}", "bold red"))

    def action_cancel(self) -> None:
        self.dismiss(None)


class FilterScreen(TypeAhead, ModalScreen[Optional[str]]):
    """Text filter for the flat list (SQL substring match on name, type and file name)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog.cancel")]

    def __init__(self, current: str = "") -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Text.assemble(("Filter the op list", "bold"),
                                       ("  (name/type substring; empty: no filter; esc: cancel)", "dim")))
            yield Input(self.current, placeholder="e.g. MatMul or fc1", id="filter-input")

    AUTO_FOCUS = "#filter-input"

    @on(Input.Submitted, "#filter-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
