"""The explorer's index: built (in a child process when it can, partial results shown), refreshed, recovered
from damage met later, and the place and op it opens on — each a thread worker of the app.

``IndexWorkers`` is a part of ``DumpscopeApp`` (its base class): the state it reads and sets is the app's
(``tui.explorer.Explorer`` lists it).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

from textual import work
from textual.css.query import NoMatches
from textual.worker import get_current_worker

from dumpscope.core.query import DumpQuery, OpRow
from dumpscope.tui.app_messages import IndexFailed, IndexProgress, IndexReady, progress_text

#: processes for work done in the explorer's own threads: one, no pool (forking a running Textual app is
#: not safe); the builds and scans run in child processes (``core.engines.child_jobs``) use their pools
IN_APP_WORKERS = 1

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


def _overflow_origin(q: DumpQuery) -> Optional[tuple[tuple[int, int], OpRow]]:
    """The whole job's overflow origin that ``dumpscope triage PATH`` names — the overflow engine's ``origin``:
    each rank's first bad op judged (born there, or received through a collective), the whole-job rule over
    them — on the evidence the index holds (Opdebug, statistics, an earlier scan): no tensor is scanned at open."""
    from dumpscope.core.engines.overflow.lookup import overflow_report

    doc = overflow_report(q, scan="none", workers=IN_APP_WORKERS)
    o = doc.get("origin")
    if not o:
        return None
    row = next((r for r in doc["ops"] if (r["name"], r["rank"], r["step"]) == (o["name"], o["rank"], o["step"])),
               None)
    op = q.op_by_id(row["op_id"]) if row else None
    return ((o["rank"], o["step"]), op) if op is not None else None


class IndexWorkers:
    """Indexing and opening, as a part of the app: ``DumpscopeApp`` is the class that holds the state."""

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
        try:
            self._main().index_ready(q, message.layouts, message.problems, refreshed=message.refreshed and not moved)
        except NoMatches:
            from dumpscope.tui.optree import OpTree

            if self._main().query(OpTree):  # the panes are made once and never removed: a real error
                raise
            return  # the app is closing: a refresh's result arrived after its panes were taken down
        if self.compare_with and message.final and not self._compare_started:
            # on the finished index only: partial results of a cold build would compare part of the tree
            self._compare_started = True
            self.compare_status = "comparing…"
            self._run_compare(q, self.rank, self.step, whole_job=self.want_place is None)

    def _partial_painted(self) -> None:
        self._partial_pending = False

    @work(thread=True, exclusive=True, group="opening", name="open on the answer", exit_on_error=False)
    def _open_on_answer(self, q: DumpQuery, shown: tuple[int, int],
                        trouble: dict[tuple[int, int], tuple[int, int]]) -> None:
        """Once the opening place is settled: the place ``--rank``/``--step`` asked for (checked against the
        index), and the cursor on its first op with overflow evidence, when it has trouble; without them, the
        overflow origin triage names (the place the index's evidence chose is its guess until then)."""
        from dumpscope.core.engines.overflow.lookup import first_bad_op

        place, note = shown, ""
        if self.want_place is None and trouble:
            found = _overflow_origin(q)
            if found is not None:
                place, op = found
                if not get_current_worker().is_cancelled:
                    self.call_from_thread(self._opened_on, q, shown, place, op, note)
                return
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
