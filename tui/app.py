"""The dumpscope explorer: a Textual app over the dump index.

The app owns the shared state (query objects, rank/step, badges, engine results) and the
slow work — indexing, refresh, the compare run — each a named exclusive thread worker
(``tui.app_index``, ``tui.app_compare``: parts of this class).  Screens read that state and ask
for changes through ``tui.explorer.Explorer``; they never open files themselves.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Optional

from rich.segment import Segment
from textual import events, work
from textual.filter import LineFilter
from textual.app import App
from textual.binding import Binding
from textual.screen import Screen

from dumpscope.core.inert import inert, inert_lines
from dumpscope.core.query import DumpQuery, OpRow
from dumpscope.tui.app_compare import CompareWorkers
from dumpscope.tui.app_index import IndexWorkers
from dumpscope.tui.badges import BadgeState
from dumpscope.tui.commands import DumpscopeCommands
from dumpscope.tui.keys import load_keymap

WATCH_INTERVAL = 5.0


class _InertFilter(LineFilter):
    def apply(self, segments: list[Segment], background: Any) -> list[Segment]:
        return [seg if seg.control else Segment(inert_lines(seg.text), seg.style) for seg in segments]


_INERT_FILTER = _InertFilter()


class DumpscopeApp(IndexWorkers, CompareWorkers, App[int]):
    """Explore one dump tree (and optionally compare it with a second one)."""

    TITLE = "dumpscope"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {DumpscopeCommands}
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("q", "quit", "Quit", id="dumpscope.quit"),
        Binding("question_mark,f1", "help", "Help", key_display="?", tooltip="Help: this list of keys",
                id="dumpscope.help"),
        Binding("o", "overflow", "Overflow", tooltip="Overflow view: Inf/NaN ops, origin first",
                id="dumpscope.overflow"),
        Binding("w", "watch_view", "Watch", show=False, tooltip="Watch view: snapshots of watched tensors",
                id="dumpscope.watch"),
        Binding("c", "compare", "Compare", tooltip="Compare view (with --compare TARGET)", id="dumpscope.compare"),
        Binding("p", "problems", "Problems", show=False, tooltip="Problems view: files that could not be used",
                id="dumpscope.problems"),
        Binding("s", "pick_step", "Step", show=False, tooltip="Pick step", id="dumpscope.step"),
        Binding("r", "pick_rank", "Rank", show=False, tooltip="Pick rank", id="dumpscope.rank"),
        Binding("e", "export", "Export", show=False,
                tooltip="Export: markdown triage report (.md), or this table (.csv)", id="dumpscope.export"),
        Binding("ctrl+p", "command_palette", "Palette", show=False, priority=True,
                tooltip="Command palette: jump to op, switch step/rank, open views, export",
                id="dumpscope.palette"),
        Binding("f5,ctrl+r", "refresh", "Refresh", show=False, tooltip="Refresh: re-index new/changed files",
                id="dumpscope.refresh"),
        Binding("ctrl+s", "screenshot", "Screenshot", show=False,
                tooltip="Screenshot: save this screen as SVG in the export directory", id="dumpscope.screenshot"),
    ]

    def __init__(self, path: str, compare_with: Optional[str] = None, use_cache: bool = True,
                 watch: bool = False, cache_dir: Optional[str] = None, display_name: Optional[str] = None,
                 keymap_path: Optional[str] = None, export_dir: Optional[str] = None,
                 early_build: Any = None, rank: Optional[int] = None, step: Optional[int] = None) -> None:
        super().__init__()
        #: ``--rank``/``--step``: the place to open on (a missing one: the lowest present), else chosen by trouble
        self.want_place: Optional[tuple[Optional[int], Optional[int]]] = \
            (rank, step) if rank is not None or step is not None else None
        #: where screenshots (and the export dialog's default) go: --export-dir, else the working directory
        self.export_dir = export_dir
        self.path = path
        self.compare_with = compare_with
        self.use_cache = use_cache
        self.watch_tree = watch
        self.cache_dir = cache_dir
        self.display_name = display_name or _display_path(path)
        self.keymap_path = keymap_path
        self.q: Optional[DumpQuery] = None
        self.target_q: Optional[DumpQuery] = None
        self.rank = 0
        self.step = 0
        self.badges = BadgeState()
        self.bookmarks: dict[int, OpRow] = {}
        self.marked: dict[int, OpRow] = {}  # ops chosen for the re-dump config (space, exported with e)
        self.overflow_results: dict[tuple[int, int], list[dict[str, Any]]] = {}
        self.overflow_doc: Optional[dict[str, Any]] = None  # the last whole-job overflow scan
        #: ops with overflow evidence per (rank, step): (count, first exec index) — picker/status marks
        self.trouble: dict[tuple[int, int], tuple[int, int]] = {}
        self._place_settled = False  # the opening place was chosen on a finished index, or by the user
        self.watch_results: dict[tuple[int, int], dict[str, Any]] = {}
        self.compare_result: Optional[dict[str, Any]] = None
        self.compare_error: Optional[str] = None
        self.compare_status = ""
        self.compare_view_cache: dict[Any, Any] = {}
        self._user_placed = False  # the user chose a place or an op: an opening answer arriving late keeps it
        self.progress = "indexing…"
        self.index_error: Optional[str] = None
        self._cancel = threading.Event()
        self._refreshing = False
        self._quitting = False
        self._recover_lock = threading.Lock()
        self._children: list[Any] = []  # core.child_jobs.ChildJob started by this app
        #: a cold build started before the app (``child_jobs.prestart_build``), used if the index is cold
        self._early_build = early_build
        if early_build is not None:
            self._children.append(early_build)
        self._compare_started = False
        self._partial_pending = False  # partial results posted, not yet shown
        self.index_final = False  # the shown index is a finished build (not a cold build's partial results)

    # -- text safety: every widget's lines and every notification pass here ---------------------

    def get_line_filters(self):
        """Textual's filters plus one that makes the text of every painted segment inert: a widget
        that forgets :func:`inert` still cannot send a dump's escape sequence to the terminal."""
        return [*super().get_line_filters(), _INERT_FILTER]

    def notify(self, message: str, *, title: str = "", severity="information", timeout=None,
               markup: bool = True) -> None:
        """Notifications are plain text here (they often quote op names): never markup, always inert."""
        super().notify(inert(message), title=inert(title), severity=severity, timeout=timeout, markup=False)

    # -- lifecycle --------------------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        from dumpscope.tui.main_screen import MainScreen

        return MainScreen()

    def on_mount(self) -> None:
        keymap, error = load_keymap(Path(self.keymap_path) if self.keymap_path else None)
        if keymap:
            self.set_keymap(keymap)
        if error:
            self.notify(error, title="keys", severity="warning")
        self._build_index()
        if self.watch_tree:
            self.set_interval(WATCH_INTERVAL, self._watch_tick)

    def on_unmount(self) -> None:
        self._cancel.set()
        for job in self._children:  # child processes (index build, overflow scan) end with the app
            job.kill()

    async def on_event(self, event: events.Event) -> None:
        # Keys typed ahead after ``q`` (over SSH they arrive in one read) would open screens in a
        # closing app; they are dropped, never a traceback.
        if isinstance(event, events.Key):
            if self._quitting:
                return
            if not event.is_forwarded:
                event._dumpscope_screen = self.screen  # type: ignore[attr-defined]
            elif getattr(event, "_dumpscope_screen", self.screen) is not self.screen:
                # typed before the key that opened this screen was handled (``/Exp-op0⏎`` in one
                # read): it belongs to the screen now shown, not to the one it was queued on
                take = getattr(self.screen, "type_ahead", None)
                if take is not None:
                    take(event)
                return
        await super().on_event(event)

    # -- state changes ------------------------------------------------------------------------

    def set_place(self, rank: Optional[int] = None, step: Optional[int] = None) -> None:
        """Switch rank and/or step everywhere."""
        if self.q is None:
            return
        self._place_settled = True  # the user's choice: a finishing build does not move it
        self._user_placed = True
        if rank is not None and rank != self.rank:
            self.rank = rank
            steps = self.q.steps(rank)
            if steps and self.step not in steps:
                self.step = steps[0]
        if step is not None:
            self.step = step
        self._main().place_changed()
        if self.compare_with:
            self.compare_result = None
            self.compare_status = "comparing…"
            self._run_compare(self.q, self.rank, self.step)

    def overflow_scanned(self, doc: dict[str, Any]) -> None:
        """A whole-job overflow scan finished: keep it, per place too, and refresh badges and marks."""
        self.overflow_doc = doc
        self.overflow_results.clear()
        for p in doc.get("scanned", []):
            self.overflow_results[(p["rank"], p["step"])] = []
        trouble: dict[tuple[int, int], tuple[int, int]] = {}
        for r in doc.get("ops", []):
            key = (r["rank"], r["step"])
            self.overflow_results.setdefault(key, []).append(r)
            n, first = trouble.get(key, (0, r["exec_index"] or 0))
            trouble[key] = (n + 1, min(first, r["exec_index"] or 0))
        self.trouble = trouble
        self.badges.overflow.update(r["op_id"] for r in doc.get("ops", []) if r.get("op_id") is not None)
        self._main().badges_changed()
        self._main().place_scanned(doc)
        self._main().update_status()

    def _main(self):
        from dumpscope.tui.main_screen import MainScreen

        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        raise RuntimeError("main screen missing")

    @property
    def main(self):
        return self._main()

    def open_op(self, op: OpRow) -> None:
        """Jump to ``op`` in the explorer (from any view), remembering where we were: ``esc`` in
        the explorer brings the views back (cursor kept)."""
        came_from = self._reopeners()
        self._user_placed = True
        self._back_to_main()
        if op.rank != self.rank or op.step != self.step:
            self.rank, self.step = op.rank, op.step
            self._main().place_changed(select=op)
        self._main().jump_to(op, came_from=came_from)

    def _reopeners(self):
        """A function rebuilding the views above the main screen, or None.  Each view's ``reopen()``
        is asked now (while it is mounted) for a factory that remembers its state."""
        makers = [m() for m in (getattr(s, "reopen", None) for s in self.screen_stack[1:]) if m is not None]
        if not makers:
            return None
        return lambda: [make() for make in makers]

    def _back_to_main(self) -> None:
        from dumpscope.tui.main_screen import MainScreen

        while len(self.screen_stack) > 1 and not isinstance(self.screen, MainScreen):
            self.pop_screen()

    def _open_view(self, view: type[Screen]) -> None:
        """Show a table view over the main screen, unless it is already the one shown."""
        if self._index_ok() and not isinstance(self.screen, view):
            self._back_to_main()
            self.push_screen(view())

    def toggle_bookmark(self, op: OpRow) -> bool:
        if op.id in self.bookmarks:
            del self.bookmarks[op.id]
            self.badges.bookmarks.discard(op.id)
            added = False
        else:
            self.bookmarks[op.id] = op
            self.badges.bookmarks.add(op.id)
            added = True
        self._main().badges_changed()
        return added

    def toggle_mark(self, op: OpRow) -> bool:
        if op.id in self.marked:
            del self.marked[op.id]
            self.badges.marked.discard(op.id)
            added = False
        else:
            self.marked[op.id] = op
            self.badges.marked.add(op.id)
            added = True
        self._main().badges_changed()
        return added

    # -- actions --------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> Optional[bool]:
        if action == "compare":
            return bool(self.compare_with)
        return True

    def _index_ok(self) -> bool:
        if self.q is None:
            self.notify("still indexing…", timeout=2)
            return False
        return True

    def action_help(self) -> None:
        from dumpscope.tui.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.BINDINGS, self._keymap))

    def action_overflow(self) -> None:
        from dumpscope.tui.view_overflow import OverflowScreen

        self._open_view(OverflowScreen)

    def action_watch_view(self) -> None:
        from dumpscope.tui.view_watch import WatchScreen

        self._open_view(WatchScreen)

    def action_compare(self) -> None:
        from dumpscope.tui.view_compare import CompareScreen

        if not self.compare_with:
            self.notify("no compare target: start with --compare TARGET", timeout=3)
            return
        self._open_view(CompareScreen)

    def action_problems(self) -> None:
        from dumpscope.tui.view_problems import ProblemsScreen

        self._open_view(ProblemsScreen)

    def action_pick_step(self) -> None:
        from dumpscope.tui.dialogs import PickerScreen

        if not self._index_ok() or isinstance(self.screen, PickerScreen):
            return
        assert self.q is not None
        steps = self.q.steps(self.rank) or [self.step]
        marks = {s: self.trouble[(self.rank, s)][0] for s in steps if (self.rank, s) in self.trouble}
        self.push_screen(PickerScreen("step", steps, self.step, marks),
                         lambda v: v is not None and self.set_place(step=v))

    def action_pick_rank(self) -> None:
        from dumpscope.tui.dialogs import PickerScreen

        if not self._index_ok() or isinstance(self.screen, PickerScreen):
            return
        assert self.q is not None
        marks: dict[int, int] = {}
        for (r, _s), (n, _e) in self.trouble.items():
            marks[r] = marks.get(r, 0) + n
        self.push_screen(PickerScreen("rank", self.q.ranks() or [self.rank], self.rank, marks),
                         lambda v: v is not None and self.set_place(rank=v))

    def action_export(self) -> None:
        from dumpscope.tui.dialogs import ExportScreen

        if not self._index_ok() or isinstance(self.screen, ExportScreen):
            return
        table = getattr(self.screen, "export_table", None)
        folder = self.export_dir or "."
        default = os.path.join(folder, "dumpscope-report.md")
        if table is not None:
            default = os.path.join(folder, f"dumpscope-{getattr(self.screen, 'export_name', 'table')}.csv")
        redump = ""
        if getattr(self.screen, "export_name", "") == "compare" and self.compare_result:
            redump = "diverging ops"
        elif table is None and self.marked:
            redump = f"{len(self.marked)} marked ops"
            default = os.path.join(folder, "dumpscope-redump.json")
        self.push_screen(ExportScreen(default, csv_ok=table is not None, redump_ok=redump))

    def action_refresh(self) -> None:
        if self._index_ok() and not self._refreshing:
            self._refreshing = True
            self.progress = "re-indexing…"
            self._main().update_status()
            self._refresh_index()

    def forbidden_roots(self) -> list[str]:
        """Reports must never be written inside a dump tree."""
        roots = [os.path.abspath(self.path)]
        if self.compare_with:
            roots.append(os.path.abspath(self.compare_with))
        return roots

    def export_directory(self) -> str:
        return os.path.abspath(os.path.expanduser(self.export_dir or "."))

    def deliver_screenshot(self, filename: Optional[str] = None, path: Optional[str] = None,
                           time_format: Optional[str] = None) -> Optional[str]:
        """ctrl+s and the palette's Screenshot: an SVG in the export directory, never in the dump tree."""
        from textual._files import generate_datetime_filename

        folder = os.path.abspath(os.path.expanduser(path or self.export_directory()))
        from dumpscope.core.support.tree_paths import inside_tree

        if any(inside_tree(folder, root) for root in self.forbidden_roots()):
            self.notify(f"not saving a screenshot inside the dump tree ({folder}): start with --export-dir DIR",
                        title="screenshot", severity="error", timeout=6)
            return None
        name = filename or generate_datetime_filename("dumpscope", ".svg", time_format)
        self._write_file(os.path.join(folder, name), self.export_screenshot(), "screenshot")
        return name

    @work(thread=True, group="write", name="write file")
    def _write_file(self, path: str, text: str, what: str) -> None:
        from dumpscope.core.support.atomic_write import replaced_file

        try:
            with replaced_file(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            self.call_from_thread(self.notify, f"cannot write {path}: {exc.strerror or exc}", title=what,
                                  severity="error", timeout=6)
            return
        self.call_from_thread(self.notify, f"saved {path}", title=what, timeout=6)

    def action_screenshot(self, filename: Optional[str] = None, path: Optional[str] = None) -> None:
        self.deliver_screenshot(filename, path)

    def action_quit(self) -> None:
        self._quitting = True
        self._cancel.set()
        self.exit(0)


def _display_path(path: str) -> str:
    """The dump path as typed, relative to the CWD when inside it (short on the status bar)."""
    absolute = os.path.abspath(path)
    try:
        rel = os.path.relpath(absolute)
    except ValueError:
        return absolute
    return rel if not rel.startswith("..") else absolute.replace(os.path.expanduser("~"), "~", 1)

