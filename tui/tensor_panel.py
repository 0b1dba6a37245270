"""The tensor panel: statistics, histogram, first bad indices and a slice of one tensor.

Statistics and slices read tensor data, so both run in exclusive thread workers; a
generation counter drops results that arrive after the user moved on.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from dumpscope.core.inert import inert
from dumpscope.core.query import DumpQuery, TensorRow
from dumpscope.tui.detail import shape_text
from dumpscope.tui.quiet import update_static
from dumpscope.tui.slicing import DEFAULT_LIMIT, SliceError, parse_index, render_result

BARS = " ▁▂▃▄▅▆▇█"


def fmt_num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "+inf" if v > 0 else "-inf"
        return f"{v:.6g}"
    return str(v)


def histogram_bars(counts: list[int]) -> str:
    """One glyph per bin; any non-empty bin shows at least ``▁`` so rare values stay visible."""
    top = max(counts) if counts else 0
    if top <= 0:
        return ""
    out = []
    for c in counts:
        if c <= 0:
            out.append(BARS[0])
        else:
            out.append(BARS[max(1, round(c / top * (len(BARS) - 1)))])
    return "".join(out)


def histogram_of(doc: dict[str, Any]) -> tuple[list[int], list[float], bool]:
    """Histogram counts/edges/log from a stats document (``histogram`` or flat ``hist_*`` keys)."""
    h = doc.get("histogram") or {}
    counts = h.get("counts", doc.get("hist_counts")) or []
    edges = h.get("edges", doc.get("hist_edges")) or []
    return list(counts), list(edges), bool(h.get("log", doc.get("hist_log", False)))


def stats_text(doc: dict[str, Any]) -> Text:
    text = Text()
    bad = any(doc.get(k) for k in ("nan", "posinf", "neginf"))
    text.append(f"count {fmt_num(doc.get('count'))}  zeros {fmt_num(doc.get('zeros'))}\n")
    text.append(("! " if bad else "") + f"nan {fmt_num(doc.get('nan'))}  +inf {fmt_num(doc.get('posinf'))}  "
                f"-inf {fmt_num(doc.get('neginf'))}", "bold red" if bad else "")
    text.append(f"\nmin {fmt_num(doc.get('min'))}  max {fmt_num(doc.get('max'))}\n"
                f"mean {fmt_num(doc.get('mean'))}  std {fmt_num(doc.get('std'))}  "
                f"l2norm {fmt_num(doc.get('l2norm'))}")
    if doc.get("source") == "stats":
        text.append("  (from dumped statistics)", "dim")
    counts, edges, log = histogram_of(doc)
    bars = histogram_bars(counts)
    if bars:
        text.append("\nhist ", "dim")
        text.append(bars, "cyan")
        lo, hi = (fmt_num(edges[0]), fmt_num(edges[-1])) if edges else ("", "")
        text.append(f"  [{lo} … {hi}]" + (" log bins" if log else ""), "dim")
    first_bad = doc.get("first_bad") or []
    if first_bad:
        shown = " ".join("(" + ",".join(str(i) for i in ix) + ")" for ix in first_bad[:6])
        text.append("\n! first bad ", "bold red")
        text.append(shown + (" …" if len(first_bad) > 6 else ""))
    return text


class TensorPanel(VerticalScroll, can_focus=True):
    """Stats and slice of the selected tensor of the current op."""

    DEFAULT_CSS = """
    TensorPanel { padding: 0 1; }
    TensorPanel > #tp-title { text-style: bold; }
    TensorPanel > #tp-slice { height: 1; border: none; padding: 0; margin: 0; }
    TensorPanel > #tp-slice:focus { background: $boost; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.q: Optional[DumpQuery] = None
        self.tensors: list[TensorRow] = []
        self.index = 0
        self._generation = 0
        #: the generation whose slice result was shown (kept in view while the panel's content grows)
        self._slice_shown = -1
        self.last_stats: Optional[dict[str, Any]] = None
        #: where focus goes back after Enter in the slice input (``:`` remembers it)
        self.return_focus: Optional[Widget] = None

    def compose(self) -> ComposeResult:
        yield Static("no tensor", id="tp-title")
        yield Static("", id="tp-stats")
        yield Input(placeholder="slice, e.g. 0, :, 3  (enter)", id="tp-slice")
        yield Static("", id="tp-slice-out")

    @property
    def current(self) -> Optional[TensorRow]:
        return self.tensors[self.index] if 0 <= self.index < len(self.tensors) else None

    def show(self, q: DumpQuery, tensors: list[TensorRow]) -> None:
        self.q, self.tensors = q, tensors
        outputs = [i for i, t in enumerate(tensors) if t.io == "output"]
        self.index = outputs[0] if outputs else 0
        self._refresh_tensor()

    def clear(self, message: str = "no tensor") -> None:
        self.tensors = []
        self._generation += 1
        self.query_one("#tp-title", Static).update(Text(inert(message)))
        self.query_one("#tp-stats", Static).update("")
        self.query_one("#tp-slice-out", Static).update("")

    def step_slot(self, delta: int) -> None:
        if self.tensors:
            self.index = (self.index + delta) % len(self.tensors)
            self._refresh_tensor()

    def _refresh_tensor(self) -> None:
        self._generation += 1
        t = self.current
        update_static(self.query_one("#tp-slice-out", Static), "")
        if t is None or self.q is None:
            self.clear("no tensors dumped for this op")
            return
        title = Text()
        title.append("[ ", "dim")
        title.append(f"{t.io}.{t.slot}", "bold")
        title.append(" ]", "dim")
        title.append(f"  {inert(t.dtype)} {shape_text(t.shape)}  {self.index + 1}/{len(self.tensors)}", "")
        update_static(self.query_one("#tp-title", Static), title)
        stats = self.query_one("#tp-stats", Static)
        # as tall as the statistics it replaces, so they arrive without a layout of the screen
        update_static(stats, Text("computing statistics…" + "\n" * max(0, stats.content_region.height - 1),
                                  "dim italic"))
        self.last_stats = None
        self._compute_stats(self.q, t, self._generation)

    @work(thread=True, exclusive=True, group="stats", name="tensor stats")
    def _compute_stats(self, q: DumpQuery, t: TensorRow, generation: int) -> None:
        try:
            doc: Optional[dict[str, Any]] = q.tensor_stats(t)
            error = None
        except Exception as exc:  # a bad file must show as a message, not crash the app
            doc, error = None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show_stats, generation, doc, error)

    def _show_stats(self, generation: int, doc: Optional[dict[str, Any]], error: Optional[str]) -> None:
        if generation != self._generation:
            return
        self.last_stats = doc
        widget = self.query_one("#tp-stats", Static)
        update_static(widget, Text(f"! {inert(error)}", "bold red") if error else stats_text(doc or {}))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "tp-slice":
            return
        event.stop()
        t = self.current
        if t is None:
            return
        self.query_one("#tp-slice-out", Static).update(Text("loading…", "dim italic"))
        self._compute_slice(t, event.value, self._generation)
        # hand focus back so ] [ and the list keys work again (the slice result shows below)
        back = self.return_focus
        self.return_focus = None
        if back is not None and back.is_attached:
            back.focus()
        else:
            self.focus()

    @work(thread=True, exclusive=True, group="slice", name="tensor slice")
    def _compute_slice(self, t: TensorRow, text: str, generation: int) -> None:
        from dumpscope.core.tensors.slicing import tensor_slice

        try:  # reads only the part of the file the slice covers (device layouts: their slabs)
            try:
                res = tensor_slice(t.ref(), parse_index(text), DEFAULT_LIMIT)
            except IndexError as exc:
                raise SliceError(str(exc)) from None
            out = Text(render_result(res, DEFAULT_LIMIT))
        except SliceError as exc:
            out = Text(f"! bad index: {inert(exc)}", "bold red")
        except Exception as exc:
            out = Text(f"! {inert(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}", "bold red")
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show_slice, generation, out)

    def _show_slice(self, generation: int, out: Text) -> None:
        if generation == self._generation:
            self.query_one("#tp-slice-out", Static).update(out)
            # the result sits below the statistics, past the panel's fold (10 rows): bring the input
            # and as much of the result as fits into view once it is laid out
            self._slice_shown = generation
            self.call_after_refresh(self._slice_in_view)

    def watch_virtual_size(self) -> None:
        """The result's layout can come after the scroll above (the screen runs it once the output
        widget's own queue asks for it): the scroll then stopped at the old bottom, so scroll again."""
        if self._slice_shown == self._generation:
            self.call_after_refresh(self._slice_in_view)

    def _slice_in_view(self) -> None:
        self.scroll_to_widget(self.query_one("#tp-slice", Input), top=True, animate=False, immediate=True)
