"""The op detail pane: what the index and the joined graph know about one op.

Producer and consumer names are an ``OptionList`` of links so they can be reached with the
keyboard: Enter on a link posts ``OpDetail.LinkChosen`` and the screen jumps there.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Optional

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from dumpscope.core.inert import inert
from dumpscope.core.query import DumpQuery, OpRow, TensorRow, shown_step
from dumpscope.tui.badges import VERDICT_GLYPH
from dumpscope.tui.keylist import KeyOptionList
from dumpscope.tui.quiet import update_static
from dumpscope.tui.explorer import explorer

VERDICT_STYLE = {"pass": "green", "warning": "yellow", "error": "bold red"}

MAX_ATTRS = 40
MAX_SOURCE = 60


def link_text(glyph: str, kind: str, name: str) -> Text:
    """One line per link, the op it names first: ``← in  BiasAdd-op0:0  Default/…/fc-Dense``.

    A graph-side name is a long scope and a short op: wrapped or cut at its end (a pane is ~40
    columns at 80x24), the producer itself was the part lost.  The scope follows, dim, and is
    what the line's end cuts."""
    text = Text(glyph, "bold", no_wrap=True, overflow="ellipsis", end="")
    if kind == "src":
        text.append(inert(short_path(name, 1)))
        return text
    scope, _, leaf = name.rpartition("/")
    text.append(inert(leaf or name))
    if scope:
        text.append("  " + inert(scope), "dim")
    return text


def short_path(path: str, keep: int = 2) -> str:
    """The last ``keep`` components of a path, prefixed with ``…/`` when shortened."""
    parts = path.replace("\\", "/").split("/")
    return path if len(parts) <= keep + 1 else "…/" + "/".join(parts[-keep:])


def rel_to_root(path: str, root: str) -> str:
    """Paths inside the dump tree are shown relative to it (short, and stable in snapshots)."""
    try:
        rel = os.path.relpath(path, root)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def tensor_line(t: TensorRow) -> Text:
    """One tensor of the detail: ``in.1 alpha = 2 (int)`` for an argument value (msprobe keeps them),
    ``out.2 weight float32 [6] ND  param grad`` for a module's parameter gradient."""
    text = Text()
    text.append(f"{'in' if t.io == 'input' else 'out'}.{t.slot}".ljust(6), "bold")
    arg = t.extra.get("arg") if t.extra else None
    if arg is not None:
        text.append(f"{inert(str(arg))} ", "cyan")
    if t.storage == "value":
        import json

        value = json.dumps(t.extra.get("value"), default=str)
        text.append(f"= {inert(value if len(value) <= 60 else value[:57] + '...')}  ({inert(t.dtype)})")
        return text
    text.append(f"{inert(t.dtype)} {shape_text(t.shape)} {inert(t.format)}")
    if t.extra and t.extra.get("kind") == "parameters_grad":
        text.append("  param grad", "dim italic")
    if t.device_shape and tuple(t.device_shape) != tuple(t.shape):
        text.append(f"  device {shape_text(t.device_shape)}", "dim")
    if t.storage == "none":
        text.append("  stats only", "dim italic")
    return text


_FRAMEWORK_PARTS = {"mindspore", "torch", "msprobe", "site-packages", "dist-packages", "torch_npu",
                    "troubleshooter", "mindtorch", "tensorflow", "npu_bridge"}
_PY_FRAME = re.compile(r"^\s*File\s+\"?(?P<file>[^,\"]+)\"?,\s*line\s+(?P<line>\d+)(?:,\s*in\s+[^,\n]*)?,?\s*(?P<code>.*)$",
                       re.S)


def _is_user_file(path: str) -> bool:
    norm = path.replace("\\", "/")
    if norm.startswith("<") or re.search(r"(?:^|/)lib(?:64)?/python\d+(?:\.\d+)*/", norm.lower()):
        return False
    return not any(p in _FRAMEWORK_PARTS for p in norm.split("/")[:-1])


def stack_frames(stack: Any) -> list[dict[str, Any]]:
    """msprobe/Troubleshooter stack lines (``File x.py, line 5, in f, \\n code``, innermost first)
    as frames outermost first, like a graph's ``source``."""
    lines = stack if isinstance(stack, list) else str(stack).splitlines()
    frames = []
    for line in lines:
        m = _PY_FRAME.match(str(line))
        if m:
            frames.append({"file": m.group("file").strip(), "line": int(m.group("line")),
                           "code": " ".join(m.group("code").split())})
    return frames[::-1]


def first_user_frame(frames: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The user's frame nearest the op (core/source_frames when present, else the same rule here)."""
    try:
        from dumpscope.core.graphs.source_frames import first_user_frame as core_rule
    except ImportError:
        core_rule = None
    if core_rule is not None:
        return core_rule(frames)
    for f in reversed(frames):
        user = f.get("user")
        if user if user is not None else _is_user_file(str(f.get("file", ""))):
            return f
    return None


def frame_text(frame: dict[str, Any]) -> Text:
    """``net.py:55  h = ops.sqrt(h - 100.0)`` — the file's name only, the full path is in the stack."""
    name = str(frame.get("file", "")).replace("\\", "/").rsplit("/", 1)[-1]
    return Text.assemble((inert(f"{name}:{frame.get('line', '')}"), "bold green"), "  ",
                         (inert(str(frame.get("code", "")).strip()), ""))


def trend_text(doc: dict[str, Any], current: int, width: int = 48) -> Text:
    """A few lines: sparklines of max and mean over the steps, "!" under steps with NaN/Inf, "^" under
    the step shown (the last ``width`` steps when there are more)."""
    from dumpscope.core.engines.trend import marks, point_bad, series, sparkline

    pts = doc["points"][-width:]
    steps = [p["step"] for p in pts]
    text = Text()
    text.append(f"Steps {steps[0]}..{steps[-1]}", "bold dim")
    text.append(f"  out.0, {len(doc['points'])} steps\n", "dim")
    text.append("  max  ", "dim")
    text.append(sparkline(series(pts, "max")) + "\n")
    text.append("  mean ", "dim")
    text.append(sparkline(series(pts, "mean")) + "\n")
    if any(point_bad(p) for p in pts):
        text.append("  nan  ", "dim")
        text.append(marks(pts) + "  ! NaN/Inf\n", "bold red")
    text.append("       " + "".join("^" if s == current else " " for s in steps).rstrip() + f" step {current}", "dim")
    return text


class OpDetail(VerticalScroll, can_focus=True):
    """Detail of one op; call ``show(q, op)``.  Focusable: arrows and page keys scroll it."""

    DEFAULT_CSS = """
    OpDetail { padding: 0 1; }
    OpDetail > #detail-head { width: 1fr; }
    OpDetail > #detail-links { height: auto; max-height: 10; border: none; padding: 0; margin: 0;
                               text-wrap: nowrap; text-overflow: ellipsis; }
    OpDetail > .detail-title { text-style: bold; color: $text-muted; margin-top: 1; }
    OpDetail > #detail-links-title, OpDetail > #detail-links { display: none; }
    """

    BINDINGS = [Binding("enter", "links", "Links", show=False,
                        tooltip="Op detail: Enter goes to its links (inputs / consumers)", id="detail.links")]

    class LinkChosen(Message):
        """Enter on a producer/consumer link: ``name`` is the graph-side node name."""

        def __init__(self, detail: "OpDetail", name: str, kind: str) -> None:
            super().__init__()
            self.detail = detail
            self.name = name
            self.kind = kind

    def __init__(self, placeholder: str = "no op selected", **kwargs) -> None:
        super().__init__(**kwargs)
        self._placeholder = placeholder
        self.op: Optional[OpRow] = None
        self.q: Optional[DumpQuery] = None
        self.doc: dict[str, Any] = {}
        self._links: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        yield Static(self._placeholder, id="detail-head")
        yield Static("", id="detail-trend")
        yield Static("Links  (enter: go to op, esc: back)", classes="detail-title", id="detail-links-title")
        yield KeyOptionList(id="detail-links")
        yield Static("", id="detail-rest")

    def show_message(self, text: str) -> None:
        self.op = None
        self.query_one("#detail-head", Static).update(Text(inert(text)))
        self.query_one("#detail-links-title").display = False
        self.query_one("#detail-links").display = False
        self.query_one("#detail-rest", Static).update("")
        self.query_one("#detail-trend", Static).display = False

    def load(self, q: DumpQuery, op: OpRow, badges: Any = "app",
             done: Optional[Callable[[list[TensorRow]], None]] = None) -> None:
        """Show ``op`` once its tensors and graph node are read in the "op detail" worker (two small
        queries, but never on the UI thread); ``done(tensors)`` runs after the render.  A newer
        ``load`` cancels an older one, and a result for an op no longer wanted is dropped."""
        self._wanted = op.id
        self._load(q, op, badges, done)

    @work(thread=True, exclusive=True, group="op-detail", name="op detail", exit_on_error=False)
    def _load(self, q: DumpQuery, op: OpRow, badges: Any,
              done: Optional[Callable[[list[TensorRow]], None]]) -> None:
        try:
            tensors = q.tensors(op.id)
            details = q.graph_details(op)
        except Exception as exc:  # a damaged index names the problem in the pane, the app keeps running
            if not get_current_worker().is_cancelled:
                self.app.call_from_thread(self._load_failed, op.id, f"! cannot read {op.short}: "
                                          f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            return
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._loaded, q, op, tensors, details, badges, done)

    def _loaded(self, q: DumpQuery, op: OpRow, tensors: list[TensorRow], details: dict[str, Any], badges: Any,
                done: Optional[Callable[[list[TensorRow]], None]]) -> None:
        if getattr(self, "_wanted", None) != op.id:
            return  # the cursor moved on meanwhile
        self.show(q, op, tensors, details, badges)
        if done is not None:
            done(tensors)

    def _load_failed(self, op_id: int, message: str) -> None:
        if getattr(self, "_wanted", None) == op_id:
            self.show_message(message)

    def show(self, q: DumpQuery, op: OpRow, tensors: Optional[list[TensorRow]] = None,
             details: Optional[dict[str, Any]] = None, badges: Any = "app") -> None:
        """Show ``op``: header, the user's source line, findings, tensors, links, attributes, stack.

        ``badges`` is the app's badge state by default; ``None`` for an op of another dump
        (the compare target), whose ids the badges do not describe.
        """
        self.q, self.op = q, op
        tensors = q.tensors(op.id) if tensors is None else tensors
        details = q.graph_details(op) if details is None else details
        if badges == "app":
            badges = explorer(self).badges
        frames = list(details.get("source") or [])
        if not frames:
            stack = next((t.extra.get("stack") for t in tensors if t.extra.get("stack")), None)
            frames = stack_frames(stack) if stack else []
        update_static(self.query_one("#detail-head", Static), self._head(op, tensors, frames, badges))
        self._head_of = (op, tensors, frames, badges)
        if op.bad or (badges is not None and op.id in badges.overflow):
            self._why(q, op)
        self._links = ([("in", n) for n in details["inputs_from"]] + [("ctl", n) for n in details["control_from"]]
                       + [("out", n) for n in details["consumers"]] + self._source_links(details, tensors))
        links = self.query_one("#detail-links", OptionList)
        links.clear_options()
        glyph = {"in": "← in  ", "ctl": "⇠ ctl ", "out": "→ to  ", "src": "@ src "}
        links.add_options([Option(link_text(glyph[k], k, n)) for k, n in self._links])
        has = bool(self._links)
        self.query_one("#detail-links-title").display = has
        links.display = has
        update_static(self.query_one("#detail-rest", Static), self._rest(q, op, tensors, details, frames))
        self.scroll_home(animate=False)
        trend = self.query_one("#detail-trend", Static)
        if any(t.io == "output" and t.slot == 0 and t.storage != "value" for t in tensors):
            if trend.display:  # the next trend usually has as many lines: keep its room, no layout
                update_static(trend, Text("Steps …" + "\n" * max(0, trend.content_region.height - 1), "dim"))
            self._trend(q, op)
        elif trend.display:
            trend.update("")
            trend.display = False

    @work(thread=True, exclusive=True, group="detail-why", name="detail why", exit_on_error=False)
    def _why(self, q: DumpQuery, op: OpRow) -> None:
        """Why this op holds NaN/Inf (born here, inherited, received): its tensors' statistics, read here."""
        from dumpscope.core.engines.overflow.lookup import judge

        try:
            j = judge(q, op)
        except Exception:  # the reason is a hint: a failure leaves it out, the op stays shown
            return
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show_why, op.id, f"{j.kind}: {j.reason}")

    def _show_why(self, op_id: int, why: str) -> None:
        head = getattr(self, "_head_of", None)
        if head is None or self.op is None or self.op.id != op_id or head[0].id != op_id:
            return  # the cursor moved on meanwhile
        update_static(self.query_one("#detail-head", Static), self._head(*head, why=why))

    @work(thread=True, exclusive=True, group="detail-trend", name="detail trend")
    def _trend(self, q: DumpQuery, op: OpRow) -> None:
        """output.0 of this op at every step of its rank (statistics cached in the index)."""
        from dumpscope.core.engines.trend import trend_of

        text: Optional[Text] = None
        try:
            if len(q.steps(op.rank)) >= 2 and not get_current_worker().is_cancelled:
                doc = trend_of(q, op, "output", 0, op.rank, run=q.run_of(op)[0])  # this execution, each step
                text = trend_text(doc, op.step) if len(doc["points"]) >= 2 else None
        except Exception:  # the trend is a hint: a failure leaves the line out, the op stays shown
            text = None
        if not get_current_worker().is_cancelled:  # None: no trend, the room kept for it goes
            self.app.call_from_thread(self._show_trend, op.id, text)

    def _show_trend(self, op_id: int, text: Optional[Text]) -> None:
        if self.op is None or self.op.id != op_id:
            return  # the cursor moved on meanwhile
        trend = self.query_one("#detail-trend", Static)
        if text is None:
            if trend.display:
                trend.update("")
                trend.display = False
            return
        update_static(trend, text)
        trend.display = True

    @staticmethod
    def _source_links(details: dict[str, Any], tensors: list[TensorRow]) -> list[tuple[str, str]]:
        """Source frames as links (``file:line``; Enter lists the ops made by that line), innermost last,
        each frame once."""
        frames = details.get("source") or []
        if not frames:
            from dumpscope.core.layouts.py_stack import source_from_stack

            stack = next((t.extra.get("stack") for t in tensors if t.extra.get("stack")), None)
            frames = source_from_stack(stack if isinstance(stack, list) else str(stack or "").splitlines())
        out: list[tuple[str, str]] = []
        for f in frames[-MAX_SOURCE:]:
            link = ("src", f"{f.get('file', '')}:{f.get('line', '')}")
            if link not in out:
                out.append(link)
        return out

    def _head(self, op: OpRow, tensors: list[TensorRow], frames: list[dict[str, Any]], badges: Any,
              why: str = "") -> Text:
        # one line per fact, cut with … rather than wrapped: the first screen keeps its order
        text = Text(no_wrap=True, overflow="ellipsis")
        bad = op.bad or (badges is not None and op.id in badges.overflow)
        verdict = badges.verdicts.get(op.id) if badges is not None else None
        if bad:
            text.append("! ", "bold red")
        if verdict:
            text.append(VERDICT_GLYPH.get(verdict, "?") + " ", VERDICT_STYLE.get(verdict, ""))
        if badges is not None and op.id in badges.bookmarks:
            text.append("★ ", "bold magenta")
        text.append(inert(op.type or "?"), "bold")
        text.append(f"  {inert(op.short)}")
        if op.graph_only:
            text.append("  · graph-only: no dump data", "dim")
        if getattr(op, "kind", "op") != "op":
            text.append(f"  · {inert(op.kind)}, not an executed op", "dim")
        text.append("\n")
        frame = first_user_frame(frames) if frames else None
        if frame is not None:
            text.append_text(frame_text(frame))
            text.append("\n")
        elif frames:
            text.append("· no user frame in the stack (framework only)\n", "dim")
        else:
            text.append("· no source line in this dump\n", "dim")
        if op.bad:
            bits = [f"{k} {v}" for k, v in (("nan", op.nan), ("+inf", op.posinf), ("-inf", op.neginf)) if v]
            if op.status:
                bits.insert(0, f"status {op.status:#x}")
            text.append("! " + ", ".join(bits) + (f" ({op.evidence})" if op.evidence else "") + "\n", "bold red")
        elif bad:
            text.append("! non-finite output (overflow scan)\n", "bold red")
        if why:  # born here / inherited / received, and from what (the overflow view's judgement), two lines
            cause, arrow, effect = why.partition(" → ")
            text.append(f"  ↳ {inert(cause)}\n", "red")
            if arrow:
                text.append(f"    → {inert(effect)}\n", "red")
        if verdict:
            text.append(f"{VERDICT_GLYPH.get(verdict, '?')} compare: {verdict}  (c: compare view)\n",
                        VERDICT_STYLE.get(verdict, ""))
        if op.watch_of:
            text.append(f"W watch snapshot of {inert(op.watch_of)}" + (f" after {inert(op.watch_after)}" if op.watch_after else "")
                        + "\n", "yellow")
        elif badges is not None and op.id in badges.watched:
            text.append("W a watched tensor changed here\n", "yellow")
        if op.join_note:  # the glyph the list shows; the reason in full under "Op"
            text.append(f"? not joined: {inert(op.join_note)}\n", "yellow")
        for t in tensors:
            text.append_text(tensor_line(t))
            text.append("\n")
        text.rstrip()
        return text

    def _rest(self, q: DumpQuery, op: OpRow, tensors: list[TensorRow], details: dict[str, Any],
              frames: list[dict[str, Any]]) -> Text:
        text = Text()
        attrs = details.get("attrs") or {}
        if attrs:
            text.append("\nAttributes\n", "bold dim")
            for k, v in list(attrs.items())[:MAX_ATTRS]:
                text.append(f"  {inert(k)}", "cyan")
                text.append(f" = {inert(v)}\n")
            if len(attrs) > MAX_ATTRS:
                text.append(f"  … {len(attrs) - MAX_ATTRS} more\n", "dim")
        if frames:
            text.append("\nStack (innermost last; > your code)\n", "bold dim")
            if len(frames) > MAX_SOURCE:
                text.append(f"  … {len(frames) - MAX_SOURCE} outer frames\n", "dim")
            for f in frames[-MAX_SOURCE:]:
                user = f.get("user")
                user = _is_user_file(str(f.get("file", ""))) if user is None else user
                text.append(f"{'>' if user else ' '} {inert(short_path(str(f.get('file', ''))))}:"
                            f"{inert(str(f.get('line', '')))}",
                            "bold green" if user else "dim green")
                text.append(f"  {inert(str(f.get('code', '')))}\n", "" if user else "dim")
        text.append("\nOp\n", "bold dim")
        text.append("  name  ", "dim")
        text.append(inert(op.name) + "\n")
        if op.scope:
            text.append("  scope ", "dim")
            text.append(inert(op.scope) + "\n")
        exec_txt = "-" if op.exec_index is None else str(op.exec_index)
        step = "no step (constants)" if shown_step(op.step) is None else f"step {op.step}"
        text.append(f"  rank {op.rank}  {step}  graph {inert(op.graph)}  exec #{exec_txt}\n")
        run, runs = q.run_of(op)
        if len(runs) > 1:  # a loop body: every execution in the list, each its own row
            text.append(f"  run {run} of {len(runs)} in this step (exec "
                        + ", ".join("#-" if r.exec_index is None else f"#{r.exec_index}" for r in runs) + ")\n")
        text.append(f"  layout {inert(op.producer)}  join {inert(op.join_rule or 'none')}\n")
        if op.join_note:
            text.append(f"  ? not joined: {inert(op.join_note)} — the op keeps its file-side name; no links, "
                        "attributes or source line from the graph\n", "yellow")
        elif op.graph_only:
            text.append("  · graph-only: a node of the graph with no dump data\n", "dim")
        if op.task is not None:
            text.append(f"  task {op.task}  stream {op.stream}\n", "dim")
        graph = details.get("graph")
        if graph:
            text.append("  graph ", "dim")
            text.append(f"{inert(graph.get('name', ''))}  {inert(rel_to_root(str(graph.get('file', '')), q.root))}\n")
        if tensors:
            text.append("\nFiles\n", "bold dim")
            seen: set[str] = set()
            for t in tensors:
                if t.path in seen:
                    continue
                seen.add(t.path)
                text.append(f"  {inert(rel_to_root(t.path, q.root))}\n", "dim")
        text.rstrip()
        return text

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self._links):
            kind, name = self._links[event.option_index]
            self.post_message(self.LinkChosen(self, name, kind))

    def action_links(self) -> None:
        if not self.focus_links():
            self.notify("this op has no links (no graph joined)", timeout=2)

    def focus_links(self) -> bool:
        links = self.query_one("#detail-links", OptionList)
        if links.display and links.option_count:
            links.focus()
            if links.highlighted is None:
                links.highlighted = 0
            return True
        return False

