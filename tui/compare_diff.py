"""Compare diff: one screen per compared op, golden vs target, the change that matters first.

Enter on a compare row opens it.  Top to bottom: the verdict and rule, the origin (born /
inherited / constant, with ``i`` following the input that carries the error), the user's source
line, what changed (arguments, constants, attributes: golden → target), then one pair of lines
per slot (dtype, shape, min, max, mean, nan/inf) with the metrics.  ``n``/``N`` move to the
next/previous op where an error is born without leaving the screen; ``s`` shows both op details
side by side.  Everything slow (grouping the rows, both graphs' attributes, NaN/Inf counts) is
gathered in a thread worker; the screen appears at once from the row itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from dumpscope.core.inert import inert
from dumpscope.tui.badges import VERDICT_GLYPH
from dumpscope.tui.detail import first_user_frame, frame_text
from dumpscope.tui.compare_rows import is_born
from dumpscope.tui.compare_sides import CompareDetailScreen
from dumpscope.tui.keybar import KeyBar
from dumpscope.tui.explorer import explorer

STYLE = {"pass": "green", "warning": "yellow", "error": "bold red"}
#: attributes that name the node, not what it computes (they differ between any two runs)
_NAME_ATTRS = {"debug_name", "unique_name", "fullname_with_scope"}


def slot_label(row: dict[str, Any]) -> str:
    return f"{'in' if row.get('io') == 'input' else 'out'}.{row.get('slot')}"


def num(v: Any, digits: int = 5) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "+inf" if v > 0 else "-inf"
        return f"{v:.{digits}g}"
    return inert(str(v))


def value_text(side: Optional[dict[str, Any]]) -> str:
    """A scalar argument's value, else a tensor's ``min … max``."""
    if not side:
        return "-"
    if side.get("value") is not None:
        return num(side.get("value"), 6)
    return f"{num(side.get('min'))} … {num(side.get('max'))}"


def producer_of(origin_via: Optional[str]) -> Optional[str]:
    """``input.0 ← Default/relu-ReLU/ReLU-op0`` → the producer's name (None for ``input.6``)."""
    if not origin_via or "←" not in origin_via:
        return None
    return origin_via.split("←", 1)[1].strip() or None


def changed_attrs(golden: dict[str, Any], target: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Attributes whose values differ (missing on one side counts), node-name attributes left out."""
    out = []
    for key in list(golden) + [k for k in target if k not in golden]:
        if key in _NAME_ATTRS:
            continue
        g, t = golden.get(key), target.get(key)
        if str(g) != str(t):
            out.append((key, g, t))
    return out


@dataclass
class DiffData:
    """What the worker gathers for one op."""

    rows: list[dict[str, Any]] = field(default_factory=list)  # this op's compare rows
    attrs: list[tuple[str, Any, Any]] = field(default_factory=list)
    frame: Optional[dict[str, Any]] = None
    bad: dict[tuple[str, str, int], str] = field(default_factory=dict)  # (side, io, slot) -> "nan/+inf/-inf"
    note: str = ""


class CompareDiffScreen(Screen):
    """Golden vs target for one compared op; ``rows`` are all rows of the compare result."""

    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="Back: the previous diff (after i), else the compare table",
                id="diff.back"),
        Binding("n", "born(1)", "Next born", tooltip="Next op where an error is born (stays in the diff)",
                id="diff.next_born"),
        Binding("N", "born(-1)", "Prev born", show=False, tooltip="Previous op where an error is born",
                id="diff.prev_born"),
        Binding("i", "follow_input", "Bad input", tooltip="Follow the input that carries the error (origin)",
                id="diff.follow_input"),
        Binding("s", "side_by_side", "Side by side", show=False,
                tooltip="Both ops' full detail side by side", id="diff.side_by_side"),
        Binding("o", "open_op", "Open op", show=False, tooltip="Open the golden op in the explorer",
                id="diff.open_op"),
    ]
    AUTO_FOCUS = "#diff-body"

    def __init__(self, rows: list[dict[str, Any]], index: int, born: Optional[list[int]] = None) -> None:
        super().__init__()
        self.all_rows = rows
        self._born_rows = born  # indices of the rows where an error is born (the compare view found them)
        self.index = index
        self.history: list[int] = []
        self.data: Optional[DiffData] = None
        self._generation = 0

    @property
    def row(self) -> dict[str, Any]:
        return self.all_rows[self.index]

    def compose(self) -> ComposeResult:
        yield Static("", id="view-title")
        with VerticalScroll(id="diff-body"):
            yield Static("", id="diff-text")
        yield KeyBar()

    def on_mount(self) -> None:
        self._show()

    def reopen(self):
        rows, index, born = self.all_rows, self.index, self._born_rows
        return lambda: CompareDiffScreen(rows, index, born)

    # -- showing ------------------------------------------------------------------------------

    def _show(self) -> None:
        """The row's own facts at once; the rest when the worker is back."""
        self._generation += 1
        self.data = None
        self.query_one("#view-title", Static).update(self._title())
        self.query_one("#diff-text", Static).update(self._body())
        self.query_one("#diff-body", VerticalScroll).scroll_home(animate=False)
        self._gather(self.row, self._generation)

    def _title(self) -> Text:
        r = self.row
        v = str(r.get("verdict"))
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{VERDICT_GLYPH.get(v, '?')} {v} ", STYLE.get(v, ""))
        text.append(inert(str(r.get("type") or "")) + "  ", "bold")
        text.append(inert(str(r.get("name", "")).rsplit("/", 1)[-1]), "bold")
        text.append(f"  {slot_label(r)}")
        born = self.born_rows()
        if born:
            text.append(f"   n/N born {self._born_position(born)}/{len(self._born_ops(born))}", "dim")
        return text

    def born_rows(self) -> list[int]:
        """Rows where an error is born (one scan per screen, none when the compare view passed them)."""
        if self._born_rows is None:
            self._born_rows = [i for i, x in enumerate(self.all_rows) if is_born(x)]
        return self._born_rows

    def _born_ops(self, born: list[int]) -> list[int]:
        """One entry (its first error row) per op where an error is born."""
        seen: set[Any] = set()
        out = []
        for i in born:
            key = (self.all_rows[i].get("golden_op_id"), self.all_rows[i].get("name"))
            if key not in seen:
                seen.add(key)
                out.append(i)
        return out

    def _born_position(self, born: list[int]) -> str:
        ops = self._born_ops(born)
        key = (self.row.get("golden_op_id"), self.row.get("name"))
        for n, i in enumerate(ops, 1):
            if (self.all_rows[i].get("golden_op_id"), self.all_rows[i].get("name")) == key:
                return str(n)
        return "-"

    def _body(self) -> Text:
        r, d = self.row, self.data
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("rule   ", "dim")
        text.append(inert(str(r.get("rule") or "")) + "\n")
        origin = r.get("origin")
        if origin:
            text.append("origin ", "dim")
            text.append(str(origin), "bold red" if origin in ("born", "constant") else "yellow")
            if r.get("origin_via"):
                text.append(f" via {inert(str(r.get('origin_via')))}")
            if producer_of(r.get("origin_via")):
                text.append("   i: go there", "dim")
            text.append("\n")
        source = r.get("source") if isinstance(r.get("source"), dict) else (d.frame if d else None)
        if source:
            text.append_text(frame_text(source))
            text.append("\n")
        if r.get("target_name") and r.get("target_name") != r.get("name"):
            text.append("target ", "dim")
            text.append(inert(str(r.get("target_name"))) + "\n")
        if d is None:
            text.append("\nreading both ops…", "dim italic")
            return text
        changed = [x for x in d.rows if x.get("verdict") != "pass" and (x.get("kind") == "scalar"
                                                                        or x.get("golden", {}).get("value") is not None)]
        if changed or d.attrs:
            text.append("\nChanged (golden → target)\n", "bold")
            for x in changed:
                v = str(x.get("verdict"))
                text.append(f" {VERDICT_GLYPH.get(v, '?')} {slot_label(x):<6} ", STYLE.get(v, ""))
                text.append(value_text(x.get("golden")), "green")
                text.append(" → ")
                text.append(value_text(x.get("target")) + "\n", "bold yellow")
            for key, g, t in d.attrs:
                text.append(" ≠ attr ", "bold yellow")
                text.append(inert(str(key)) + "  ", "cyan")
                text.append(inert(str(g)), "green")
                text.append(" → ")
                text.append(inert(str(t)) + "\n", "bold yellow")
        text.append("\nslot    ", "bold dim")
        text.append(f"{'dtype':<8} {'shape':<12} {'min':>9} {'max':>9} {'mean':>9} {'nan/inf':<7}\n", "bold dim")
        for x in self._slot_order(d.rows):
            v = str(x.get("verdict"))
            mark = "▶" if x is r or all(x.get(k) == r.get(k) for k in ("io", "slot")) else " "
            for side in ("golden", "target"):
                s = x.get(side) or {}
                head = f"{mark}{VERDICT_GLYPH.get(v, '?')}{slot_label(x):<6}" if side == "golden" else " " * 8
                text.append(head[:8].ljust(8), STYLE.get(v, "") if side == "golden" else "")
                text.append("g " if side == "golden" else "t ", "green" if side == "golden" else "yellow")
                if s.get("value") is not None:
                    text.append(f"{inert(str(s.get('dtype') or '')):<8} value {num(s.get('value'), 6)}\n")
                    continue
                shape = "[" + ",".join(str(n) for n in (s.get("shape") or [])) + "]"
                bad = d.bad.get((side, str(x.get("io")), int(x.get("slot") or 0)), "")
                text.append(f"{inert(str(s.get('dtype') or '-')):<8} {shape:<12.12} {num(s.get('min')):>9.9} "
                            f"{num(s.get('max')):>9.9} {num(s.get('mean')):>9.9} ")
                text.append(f"{bad or '-':<7}\n", "bold red" if bad and bad != "0" else "")
            text.append(" " * 10 + f"cos {num(x.get('cosine'), 6)}  max abs {num(x.get('max_abs_err'), 4)}  "
                        f"max rel {num(x.get('max_rel_err'), 4)}\n", "dim")
        if d.note:
            text.append(d.note + "\n", "dim")
        text.rstrip()
        return text

    def _slot_order(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The row opened first, then rows that are not a pass, then the rest (each in slot order)."""
        key = (self.row.get("io"), self.row.get("slot"))
        return sorted(rows, key=lambda x: ((x.get("io"), x.get("slot")) != key, x.get("verdict") == "pass"))

    # -- gathering (thread) ------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="diff", name="compare diff")
    def _gather(self, row: dict[str, Any], generation: int) -> None:
        app = explorer(self)
        data = DiffData()
        op_key = (row.get("golden_op_id"), row.get("name"), row.get("step"), row.get("rank"))
        data.rows = [x for x in self.all_rows
                     if (x.get("golden_op_id"), x.get("name"), x.get("step"), x.get("rank")) == op_key]
        try:
            gq, tq = app.q, app.target_q
            gop = gq.op_by_id(row["golden_op_id"]) if gq is not None and row.get("golden_op_id") is not None else None
            top = tq.op_by_id(row["target_op_id"]) if tq is not None and row.get("target_op_id") is not None else None
            gdet = gq.graph_details(gop) if gop is not None else {}
            tdet = tq.graph_details(top) if top is not None else {}
            data.attrs = changed_attrs(gdet.get("attrs") or {}, tdet.get("attrs") or {})
            data.frame = first_user_frame(list(gdet.get("source") or [])) if gdet else None
            for side, q, op in (("golden", gq, gop), ("target", tq, top)):
                if op is None:
                    continue
                for t in q.tensors(op.id):
                    if get_current_worker().is_cancelled:
                        return
                    if getattr(t, "storage", "") == "value":
                        continue
                    wanted = any(str(x.get("io")) == t.io and int(x.get("slot") or 0) == t.slot for x in data.rows)
                    if not wanted:
                        continue
                    stats = q.tensor_stats(t)
                    counts = [stats.get(k) for k in ("nan", "posinf", "neginf")]
                    data.bad[(side, t.io, t.slot)] = "/".join("?" if c is None else str(c) for c in counts) \
                        if any(counts) else ("0" if all(c == 0 for c in counts) else "?")
        except Exception as exc:  # a broken file must not take the screen down
            data.note = f"! {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._gathered, generation, data)

    def _gathered(self, generation: int, data: DiffData) -> None:
        if generation != self._generation:
            return
        self.data = data
        self.query_one("#diff-text", Static).update(self._body())

    def palette_commands(self):
        """The diff's keys as palette entries (ctrl+p)."""
        yield ("Diff: next op where an error is born", lambda: self.action_born(1), "n")
        yield ("Diff: previous op where an error is born", lambda: self.action_born(-1), "N")
        yield ("Diff: follow the input that carries the error", self.action_follow_input, "i")
        yield ("Diff: both ops side by side", self.action_side_by_side, "s")
        yield ("Diff: open the golden op in the explorer", self.action_open_op, "o")

    # -- actions ---------------------------------------------------------------------------------

    def _go(self, index: int, remember: bool = True) -> None:
        if remember:
            self.history.append(self.index)
        self.index = index
        self._show()

    def action_back(self) -> None:
        if self.history:
            self._go(self.history.pop(), remember=False)
        else:
            self.app.pop_screen()

    def action_born(self, delta: int) -> None:
        ops = self._born_ops(self.born_rows())
        if not ops:
            self.notify("no op where an error is born", timeout=2)
            return
        key = (self.row.get("golden_op_id"), self.row.get("name"))
        here = next((n for n, i in enumerate(ops)
                     if (self.all_rows[i].get("golden_op_id"), self.all_rows[i].get("name")) == key), None)
        if here is None:  # not on a born op: the next one after this row in execution order
            after = [n for n, i in enumerate(ops) if i > self.index]
            here = (after[0] - 1) if (after and delta > 0) else (after[0] if after else len(ops))
        self._go(ops[(here + delta) % len(ops)], remember=False)

    def action_follow_input(self) -> None:
        producer = producer_of(self.row.get("origin_via"))
        if producer is None:
            self.notify("no input carries the error here (it is born in this op, or a changed argument)",
                        timeout=3)
            return
        rows = [i for i, x in enumerate(self.all_rows) if x.get("name") == producer and x.get("io") == "output"
                and x.get("step") == self.row.get("step") and x.get("rank") == self.row.get("rank")]
        if not rows:
            self.notify(f"{inert(producer)} has no compared output", timeout=3)
            return
        worst = next((i for i in rows if self.all_rows[i].get("verdict") == "error"), rows[0])
        self._go(worst)

    def action_side_by_side(self) -> None:
        self.app.push_screen(CompareDetailScreen(self.row))

    def action_open_op(self) -> None:
        q = explorer(self).q
        op_id = self.row.get("golden_op_id")
        op = q.op_by_id(op_id) if (q is not None and op_id is not None) else None
        if op is None:
            self.notify("the golden op is not in the index", timeout=2)
            return
        explorer(self).open_op(op)
