"""The dumpscope explorer: a Textual app over the dump index.

The app owns the shared state (query objects, rank/step, badges, engine results) and the
slow work — indexing, refresh, the compare run — each a named exclusive thread worker.
Screens read that state; they never open files themselves.
"""

from __future__ import annotations

import os
import sqlite3
import time
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

from rich.segment import Segment
from textual import events, work
from textual.css.query import NoMatches
from textual.filter import LineFilter
from textual.app import App
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.worker import get_current_worker

from dumpscope.core.inert import inert, inert_lines
from dumpscope.core.query import DumpQuery, OpRow
from dumpscope.tui.badges import BadgeState
from dumpscope.tui.commands import DumpscopeCommands
from dumpscope.tui.keys import load_keymap

WATCH_INTERVAL = 5.0
#: processes for work done in the explorer's own threads: one, no pool (forking a running Textual app is
#: not safe); the builds and scans run in child processes (``core.engines.child_jobs``) use their pools
IN_APP_WORKERS = 1


class IndexProgress(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class IndexReady(Message):
    def __init__(self, q: DumpQuery, refreshed: bool = False, final: bool = True, just_built: bool = False,
                 facts: Optional[DumpQuery] = None) -> None:
        super().__init__()
        self.q = q
        self.refreshed = refreshed
        self.final = final  # False for the partial results of a cold build still running
        # summary facts are computed here, in the worker: some are full-table queries.  ``facts``: the
        # same index on the worker's own connection, so that the views' queries never wait for these
        q = facts or q
        from dumpscope.core.engines.overflow.lookup import start_place, trouble_places

        self.trouble = trouble_places(q)
        self.start, self.start_by_trouble = start_place(q, self.trouble)
        # partial results: only the names the status bar shows, from the folders stored (the full
        # list counts the files of every unit stored so far: a scan repeated for each partial result)
        self.layouts = q.layouts() if final else [{"name": n} for n in q.stored_layout_names()]
        # partial results, or a cold build that read every file moments ago: the problems stored (the
        # full list stats every indexed file again for ones truncated since: ~1 s per 100k files)
        self.problems = len(q.problems()) if final and not just_built else q.problem_count()


#: modules the first partial result's facts (``overflow``: its trouble places, with the CANN and protobuf
#: modules behind them), the first op's panes (statistics, trend, source frames) and the first scrolled
#: frame need: imported while a cold build's first results are awaited, not while they are painted
WARM_UP = ("dumpscope.core.engines.overflow.lookup", "dumpscope.core.tensors.load", "dumpscope.core.tensors.stats", "dumpscope.core.engines.trend",
           "dumpscope.core.graphs.source_frames", "dumpscope.core.layouts.py_stack", "textual.scrollbar")


def _warm_up() -> None:
    import importlib

    for name in WARM_UP:
        try:
            importlib.import_module(name)
        except ImportError:  # a module renamed since: only a little slower
            pass


def _drop_partial(shown: list[DumpQuery]) -> None:
    """The cache file failed during a cold build: its partial results are not followed up (the
    views keep theirs until the in-memory index replaces it); the facts' own connection is closed."""
    for facts in shown[1:]:
        facts.index.close()
    shown.clear()


class CompareProgress(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class IndexFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class CompareReady(Message):
    def __init__(self, result: Optional[dict[str, Any]], error: Optional[str]) -> None:
        super().__init__()
        self.result = result
        self.error = error


class _InertFilter(LineFilter):
    def apply(self, segments: list[Segment], background: Any) -> list[Segment]:
        return [seg if seg.control else Segment(inert_lines(seg.text), seg.style) for seg in segments]


_INERT_FILTER = _InertFilter()


def progress_text(prog: Any, what: str = "indexing") -> str:
    if getattr(prog, "phase", "") == "joining":
        return f"{what}: joining graphs… ({prog.files:,} files)"
    return f"{what} {prog.files:,} files…"


class DumpscopeApp(App[int]):
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

    def _cache_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"use_cache": self.use_cache, "workers": IN_APP_WORKERS}
        if self.cache_dir:
            kwargs["cache_directory"] = Path(self.cache_dir)
        return kwargs

    @work(thread=True, exclusive=True, group="index", name="build index")
    def _build_index(self) -> None:
        from dumpscope.core.index.dump_index import DumpIndex, IndexCancelled

        def progress(prog: Any) -> None:
            self.post_message(IndexProgress(progress_text(prog)))

        try:
            early, self._early_build = self._early_build, None
            if early is not None:
                from dumpscope.core.engines.child_jobs import wait_opened

                wait_opened(early, self._cancel)
            index = DumpIndex.open(self.path, progress=progress, cancel=self._cancel, update=False,
                                   **self._cache_kwargs())
            if early is not None and (index.db_path == ":memory:" or index.has_snapshot()):
                early.kill()  # not a cold build on the cache file after all: the checks below decide
                early = None
            if index.has_snapshot() and index.db_path != ":memory:":
                # Warm start: show the stored index at once, then check the tree for changes on a
                # second connection; WAL readers keep seeing the old snapshot, so the views never
                # wait for the update's transactions.
                self.post_message(IndexReady(DumpQuery(index)))
                fresh = DumpIndex(self.path, index.db_path)
                prog = fresh.update(progress=None, cancel=self._cancel, workers=IN_APP_WORKERS)
                if prog.changed_dirs and not get_current_worker().is_cancelled:
                    self.post_message(IndexReady(DumpQuery(fresh), refreshed=True))
                else:
                    fresh.close()
                return
            shown: list[DumpQuery] = []

            def show_partial() -> None:
                # a long cold build: show the ops found so far, through a reader connection (skipped
                # while the views still load the last ones: the next partial or the final shows more)
                if index.db_path == ":memory:" or get_current_worker().is_cancelled or self._partial_pending:
                    return
                self._partial_pending = True
                if not shown:  # the views' connection, and this worker's own for the facts
                    shown.extend(DumpQuery(DumpIndex(self.path, index.db_path)) for _ in range(2))
                    self.post_message(IndexReady(shown[0], final=False, facts=shown[1]))
                else:
                    self.post_message(IndexReady(shown[0], refreshed=True, final=False, facts=shown[1]))

            def partial(prog: Any) -> None:
                show_partial()
                self.post_message(IndexProgress(progress_text(prog)))

            built = False
            if index.db_path != ":memory:":
                index, built = self._build_in_child(index, show_partial, progress, early)
                if index.db_path == ":memory:":
                    _drop_partial(shown)
            if not built:
                try:
                    index.update(progress=progress, cancel=self._cancel, partial=partial, workers=IN_APP_WORKERS)
                except (sqlite3.DatabaseError, OSError) as exc:  # a full or broken cache: build in memory
                    if index.db_path == ":memory:":
                        raise
                    from dumpscope.core.index.faults import rebuild_in_memory

                    index = rebuild_in_memory(DumpIndex, index, exc, progress, self._cancel, IN_APP_WORKERS)
                    _drop_partial(shown)
            for w in index.warnings:
                self.notify(w, title="index", severity="warning", timeout=8)
            if shown:
                if not get_current_worker().is_cancelled:
                    self.post_message(IndexReady(shown[0], refreshed=True, just_built=True, facts=shown[1]))
                shown[1].index.close()
                index.close()
                return
        except IndexCancelled:
            return
        except Exception as exc:
            self.post_message(IndexFailed(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(IndexReady(DumpQuery(index), just_built=True))

    def _build_in_child(self, index: Any, show_partial: Any, progress: Any, early: Any = None) -> tuple[Any, bool]:
        """A cold build by the CLI's builder and its process pool, in a child process writing the
        index file (``core.child_jobs``); returns the index to go on with and whether it is built.

        The cache file failing there means an in-memory index built here (one warning); the child
        failing otherwise is said in one line and the build done in this process instead."""
        from dumpscope.core.engines import child_jobs
        from dumpscope.core.index import dump_index as index_mod
        from dumpscope.core.index.dump_index import DumpIndex

        if not child_jobs.usable():
            return index, False

        def child_progress(event: dict[str, Any]) -> None:
            self.post_message(IndexProgress(progress_text(SimpleNamespace(
                phase=event.get("phase", ""), files=int(event.get("files", 0))))))

        # while the child reads the first folder; in a thread of its own, so that its events are read
        # (and a partial result's facts taken) as soon as they come
        threading.Thread(target=_warm_up, name="warm up").start()
        try:
            warnings = child_jobs.build_index(self.path, index.db_path, self._cancel, self._children.append,
                                              child_progress, show_partial, index_mod.PARTIAL_AFTER_S, early)
        except child_jobs.ChildCacheError as exc:
            from dumpscope.core.index.faults import rebuild_in_memory

            return rebuild_in_memory(DumpIndex, index, exc.error, progress, self._cancel, IN_APP_WORKERS), True
        except child_jobs.ChildFailed as exc:
            self.notify(f"index builder process failed ({exc}): indexing here instead", title="index",
                        severity="warning", timeout=8)
            return index, False
        index.warnings.extend(warnings)
        return index, True

    def overflow_report(self, q: DumpQuery, progress: Any) -> dict[str, Any]:
        """``o``: the whole-job overflow scan, by the CLI's code and process pool in a child writing its
        counts into the index (``core.child_jobs``); an in-memory index is scanned in this thread."""
        from dumpscope.core.engines import child_jobs
        from dumpscope.core.engines.overflow.lookup import overflow_report

        if q.index.db_path == ":memory:" or not child_jobs.usable():
            return overflow_report(q, progress=progress, workers=IN_APP_WORKERS)
        return child_jobs.overflow_report(q.root, q.index.db_path, self._cancel, self._children.append, progress)

    @work(thread=True, exclusive=True, group="index", name="refresh index")
    def _refresh_index(self, quiet: bool = False) -> None:
        """Incremental re-walk; ``quiet`` (the --watch timer) reloads views only when something changed."""
        from dumpscope.core.index.dump_index import IndexCancelled

        q = self.q
        if q is None:
            return
        try:
            before = q.count_ops()
            prog = q.index.update(
                progress=None if quiet else (lambda p: self.post_message(IndexProgress(progress_text(p, "re-indexing")))),
                cancel=self._cancel, workers=IN_APP_WORKERS)
            changed = prog.changed_dirs > 0 or q.count_ops() != before
        except IndexCancelled:
            return
        except Exception as exc:
            self.post_message(IndexFailed(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            return
        finally:
            self._refreshing = False
        if changed or not quiet:
            self.post_message(IndexReady(q, refreshed=True))
        else:
            self.post_message(IndexProgress(""))

    def on_index_progress(self, message: IndexProgress) -> None:
        self.progress = message.text
        try:
            self._main().update_status()
        except (NoMatches, RuntimeError):  # the app is closing: a worker's last word arrives late
            pass

    def on_index_failed(self, message: IndexFailed) -> None:
        self.index_error = message.error
        self.progress = ""
        self._main().show_error(message.error)

    def on_index_ready(self, message: IndexReady) -> None:
        if not self._main().is_mounted:  # a warm cache can beat the first screen's mount
            self.call_after_refresh(self.on_index_ready, message)
            return
        q = message.q
        self.q = q
        q.index.on_damage = self._recover_index  # damage met by a later query: rebuilt, not fatal
        self.progress = ""
        if self._partial_pending:  # the next partial results once these are painted, not while they are
            self.call_after_refresh(self._partial_painted)
        self.index_final = self.index_final or message.final
        self.trouble = message.trouble
        moved = False
        if not message.refreshed or (message.final and not self._place_settled):
            # open on the first place with trouble, else the lowest; chosen again once a cold build
            # ends (its partial results may lack the lowest step), then never moved by the index
            moved = (self.rank, self.step) != message.start or not message.refreshed
            self.rank, self.step = message.start
            if message.final:
                self._place_settled = True
                self._open_on_answer(q, (self.rank, self.step), message.trouble)
                if message.start_by_trouble and self.want_place is None:
                    n = message.trouble.get(message.start, (0, 0))[0]
                    self.notify(f"opened on rank {self.rank} step {self.step}: the first with overflow evidence "
                                f"({n} ops; o lists them all)", title="overflow", timeout=6)
        if message.refreshed:
            # results of engines describe the old tree
            self.overflow_results.clear()
            self.overflow_doc = None
            self.watch_results.clear()
        self._main().index_ready(q, message.layouts, message.problems, refreshed=message.refreshed and not moved)
        if self.compare_with and message.final and not self._compare_started:
            # on the finished index only: partial results of a cold build would compare part of the tree
            self._compare_started = True
            self.compare_status = "comparing…"
            self._run_compare(q, self.rank, self.step)

    def _partial_painted(self) -> None:
        self._partial_pending = False

    @work(thread=True, exclusive=True, group="opening", name="open on the answer", exit_on_error=False)
    def _open_on_answer(self, q: DumpQuery, shown: tuple[int, int],
                        trouble: dict[tuple[int, int], tuple[int, int]]) -> None:
        """Once the opening place is settled: the place ``--rank``/``--step`` asked for (checked against the
        index), and the cursor on its first op with overflow evidence, when it has trouble."""
        from dumpscope.core.engines.overflow.lookup import first_bad_op

        place, note = shown, ""
        if self.want_place is not None:
            rank, step = self.want_place
            if rank is not None and rank not in q.ranks():
                note = f"no rank {rank} in this dump"
            elif step is not None and step not in q.steps(rank if rank is not None else shown[0]):
                note = f"no step {step} at rank {rank if rank is not None else shown[0]}"
            else:
                place = q.default_place(rank if rank is not None else shown[0], step)
        op = first_bad_op(q, *place) if place in trouble else None
        if not get_current_worker().is_cancelled:
            self.call_from_thread(self._opened_on, q, shown, place, op, note)

    def _opened_on(self, q: DumpQuery, shown: tuple[int, int], place: tuple[int, int], op: Optional[OpRow],
                   note: str) -> None:
        main = self._main()
        if q is not self.q or (self.rank, self.step) != shown or main.history or main.hits:
            return  # the index was replaced, or the user moved on meanwhile: never yank the cursor
        if note:
            self.notify(f"{note}; opened on rank {self.rank} step {self.step}", severity="warning", timeout=6)
        if place != shown:
            self.rank, self.step = place
            main.place_changed(select=op)
        if op is not None:
            main.jump_to(op, remember=False)

    def _recover_index(self, index: Any, exc: BaseException) -> bool:
        """A query met damaged pages after the explorer opened the index (``DumpIndex.on_damage``):
        discard the file, build a fresh index (on the file again, or in memory when the cache cannot
        be used), put it in place of the damaged one, say so once and reload the views.  Runs on the
        thread whose query failed (a worker, as the explorer's queries are); True: query again."""
        from dumpscope.core.index.dump_index import DumpIndex
        from dumpscope.core.index.faults import discard, is_damage

        if index.db_path == ":memory:" or not is_damage(exc):
            return False
        with self._recover_lock:
            if getattr(index, "recovered_from", None) is not None:
                return True  # another thread already rebuilt it
            path = Path(index.db_path)
            try:
                discard(path)
            except OSError:
                pass
            fresh = DumpIndex.open(index.root, **self._cache_kwargs())
            with index._lock:
                damaged = index.conn
                state = dict(fresh.__dict__)
                state.pop("_lock")
                index.__dict__.update(state)
                index.recovered_from = str(exc)
            try:
                damaged.close()
            except Exception:
                pass
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        where = "in memory" if index.db_path == ":memory:" else "and saved"
        self.notify(f"index cache {path} was damaged ({reason}): rebuilt {where}; the views were reloaded",
                    title="index", severity="warning", timeout=10)
        if index is getattr(self.q, "index", None):
            self.post_message(IndexReady(DumpQuery(index), refreshed=True))
        return True

    def _watch_tick(self) -> None:
        if self.q is not None and not self._refreshing:
            self._refreshing = True
            self._refresh_index(quiet=True)

    # -- compare ------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="compare", name="compare dumps")
    def _run_compare(self, q: DumpQuery, rank: int, step: int) -> None:
        from dumpscope.core.index.dump_index import DumpIndex, IndexCancelled
        from dumpscope.core.engines.compare import compare_dumps

        try:
            if self.target_q is None:
                target = DumpIndex.open(
                    self.compare_with or "", cancel=self._cancel,
                    progress=lambda p: self.post_message(IndexProgress(progress_text(p, "indexing target"))),
                    **self._cache_kwargs())
                self.target_q = DumpQuery(target)
            self.post_message(IndexProgress(""))
            last = [0.0]

            def progress(done: int, total: int) -> None:
                now = time.monotonic()
                if now - last[0] > 0.25:
                    last[0] = now
                    self.post_message(CompareProgress(f"comparing… {done:,}/{total:,} tensors"))

            result = compare_dumps(q, self.target_q, rank=rank, step=step, progress=progress, workers=IN_APP_WORKERS)
            from dumpscope.tui.view_compare import warm_view

            warm_view(self, result)  # the compare table sorted and counted here, so `c` has nothing to wait for
        except IndexCancelled:
            return
        except Exception as exc:
            self.post_message(CompareReady(None, f"compare failed: {type(exc).__name__}: {exc}".splitlines()[0]))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(CompareReady(result, None))

    def on_compare_progress(self, message: CompareProgress) -> None:
        if self.compare_result is None:
            self.compare_status = message.text
            self._main().update_status()

    def on_compare_ready(self, message: CompareReady) -> None:
        self.compare_result, self.compare_error = message.result, message.error
        self.compare_status = ""
        self.badges.verdicts.clear()
        for row in (message.result or {}).get("rows", []):
            self.badges.add_verdict(row.get("golden_op_id"), row.get("verdict"))
        self._main().badges_changed()
        from dumpscope.tui.view_compare import CompareScreen

        if isinstance(self.screen, CompareScreen):
            self.screen.load()

    # -- state changes ------------------------------------------------------------------------

    def set_place(self, rank: Optional[int] = None, step: Optional[int] = None) -> None:
        """Switch rank and/or step everywhere."""
        if self.q is None:
            return
        self._place_settled = True  # the user's choice: a finishing build does not move it
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
