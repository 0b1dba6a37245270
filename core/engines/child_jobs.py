"""Index builds and overflow scans in a child process, for the explorer.

The CLI reads big folders with a process pool forked from itself.  The explorer cannot fork: a
running Textual app (threads, a terminal driver) is not safe to copy.  So it starts a fresh
``dumpscope.core.engines.child_jobs`` in a fresh Python (fork + exec, safe from any thread; isolated mode,
``core.isolated``: never a ``dumpscope/`` folder of the current folder or the dump tree), which runs exactly
what the CLI runs — ``DumpIndex.update`` with its pool, or ``overflow_report`` — on the same
index file, while the explorer reads what it stored through SQLite WAL snapshots (the writer
lock of ``core.index_lock`` keeps other writers out).

The child talks JSON lines on stdout (``{"event": "progress"|"partial"|"done"|"error", ...}``),
runs in a session of its own so that killing its process group also ends its pool workers, and
kills that group itself when its stdin closes (the explorer went away without saying so).
POSIX only: elsewhere ``usable()`` is False and the explorer builds in its own thread.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Iterator, Optional

from dumpscope.core.errors import IndexCancelled

#: how the explorer starts a child; None: ``core.isolated.module_command`` (tests point it at a script
#: applying their hooks first)
CHILD_COMMAND: Optional[list[str]] = None


def child_command() -> list[str]:
    """The child's command line (made when a child starts: the current folder may have changed)."""
    if CHILD_COMMAND is not None:
        return list(CHILD_COMMAND)
    from dumpscope.core.support.isolated import module_command

    return module_command("dumpscope.core.engines.child_jobs")
#: progress lines at most this often (the explorer redraws its status bar for each)
PROGRESS_EVERY_S = 0.1
#: the first partial results of an explorer's cold build come after this long (then as ``index.PARTIAL_AFTER_S``);
#: a build done sooner shows its finished index only
FIRST_PARTIAL_S = 0.2
#: once its first partial results are sent, the builder (and its pool workers) runs at this niceness
#: more: the explorer drawing them comes first on a machine with fewer cores than busy processes
BACKGROUND_NICE = 5


class ChildFailed(Exception):
    """The child could not be started, died, or reported an error (one line)."""


class ChildCacheError(Exception):
    """The child could not write the index file: ``error`` is the exception it met, rebuilt here."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def usable() -> bool:
    return os.name == "posix" and hasattr(os, "killpg")


class ChildJob:
    """One running child: its JSON events, and a kill that takes its pool workers with it."""

    def __init__(self, args: list[str]) -> None:
        self._stderr = tempfile.TemporaryFile()
        command = child_command()
        try:
            self.proc = subprocess.Popen([*command, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=self._stderr, start_new_session=True, close_fds=True)
        except OSError as exc:
            self._stderr.close()
            raise ChildFailed(f"cannot start {command[0]}: {exc.strerror or exc}") from None
        self.pid = self.proc.pid
        self._stream: Optional[Iterator[dict[str, Any]]] = None
        self._cancel: Optional[threading.Event] = None

    def events(self, cancel: Optional[threading.Event] = None) -> Iterator[dict[str, Any]]:
        """The child's events until it exits (one stream: a second call goes on where the first
        stopped); raises ``IndexCancelled`` (after killing it) when ``cancel`` is set, ``ChildFailed``
        when it ends without a ``done`` or ``error`` event."""
        self._cancel = cancel
        if self._stream is None:
            self._stream = self._read()
        return self._stream

    def _read(self) -> Iterator[dict[str, Any]]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = b""
        ended = False
        try:
            while True:
                if self._cancel is not None and self._cancel.is_set():
                    raise IndexCancelled()
                ready, _, _ = select.select([fd], [], [], 0.1)
                if not ready:
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue  # not ours (a library printing to stdout): ignored
                    if event.get("event") in ("done", "error"):
                        ended = True
                    yield event
        finally:
            if not ended:
                self.kill()
        rc = self.proc.wait()
        if not ended:
            raise ChildFailed(self._why(rc))
        self._stderr.close()

    def _why(self, rc: int) -> str:
        try:
            self._stderr.seek(0)
            lines = [ln for ln in self._stderr.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except (OSError, ValueError):
            lines = []
        if lines:
            return lines[-1].strip()
        if rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exited with status {rc}"

    pushed_back: Optional[dict[str, Any]] = None
    failure: Optional[ChildFailed] = None

    def replay(self, cancel: Optional[threading.Event] = None) -> Iterator[dict[str, Any]]:
        """``events``, starting with the one ``wait_opened`` stopped at (or the failure it met)."""
        if self.failure is not None:
            raise self.failure
        if self.pushed_back is not None:
            event, self.pushed_back = self.pushed_back, None
            yield event
        yield from self.events(cancel)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """End the child and its pool workers (its whole process group) and reap it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover (SIGKILL is not ignored)
            pass
        try:
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        except OSError:
            pass


def _cache_error(event: dict[str, Any]) -> BaseException:
    """The child's exception rebuilt, for ``index_faults`` to judge (damage or not) and word."""
    import sqlite3

    kind, message = event.get("kind", ""), event.get("message", "")
    if kind == "OSError":
        return OSError(event.get("errno") or 0, event.get("strerror") or message)
    cls = getattr(sqlite3, kind, None)
    if isinstance(cls, type) and issubclass(cls, sqlite3.DatabaseError):
        return cls(message)
    return sqlite3.DatabaseError(message)


def prestart_build(root: str, use_cache: bool = True, cache_dir: Optional[str] = None) -> Optional[ChildJob]:
    """``dumpscope PATH``: start the cold build before Textual is imported, so that the explorer's
    start-up (~0.5 s) and the child's overlap.  Only for a tree with no index file yet: a stored
    index or a cache that cannot be used is left to the explorer's own checks.  None: not started."""
    if not (use_cache and usable()):
        return None
    from pathlib import Path

    from dumpscope.core.index.cache import index_path
    from dumpscope.core.support.tree_paths import inside_tree

    path = index_path(root, Path(cache_dir) if cache_dir else None)
    if inside_tree(path.parent, root):  # the explorer's open refuses it (in memory, one warning)
        return None
    try:
        if os.path.lexists(path):
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        return ChildJob(["build", root, str(path)])
    except (OSError, ChildFailed):
        return None


def wait_opened(job: ChildJob, cancel: Optional[threading.Event]) -> None:
    """Wait until the child has the index file open (schema written): the explorer's own open then
    never waits for the writer lock the build holds."""
    try:
        for event in job.events(cancel):
            if event.get("event") in ("opened", "done", "error"):
                job.pushed_back = event
                return
    except ChildFailed as exc:  # said when the build reads the events again
        job.failure = exc


def build_index(root: str, db_path: str, cancel: Optional[threading.Event],
                on_start: Callable[[ChildJob], None],
                progress: Callable[[dict[str, Any]], None],
                partial: Callable[[], None], partial_after: float, job: Optional[ChildJob] = None) -> list[str]:
    """Build (update) the index file ``db_path`` of ``root`` in a child; returns its warnings.

    ``partial()`` is called each time the child stored ops the caller can show (read them through
    a connection of your own); raises ``ChildCacheError`` when the index file could not be written,
    ``ChildFailed`` on anything else, ``IndexCancelled`` when ``cancel`` was set (child killed).
    ``job``: a child already building it (``prestart_build``)."""
    if job is None:
        job = ChildJob(["build", root, db_path, "--partial-after", repr(float(partial_after))])
        on_start(job)
    try:
        for event in job.replay(cancel):
            kind = event.get("event")
            if kind == "progress":
                progress(event)
            elif kind == "partial":
                partial()
            elif kind == "error":
                if event.get("cache"):
                    raise ChildCacheError(_cache_error(event))
                raise ChildFailed(event.get("message") or "index builder failed")
            elif kind == "done":
                return list(event.get("warnings") or [])
    finally:
        job.kill()
    raise ChildFailed("index builder ended without an answer")  # pragma: no cover (events raises)


def overflow_report(root: str, db_path: str, cancel: Optional[threading.Event],
                    on_start: Callable[[ChildJob], None],
                    progress: Optional[Callable[[int, int], None]] = None) -> dict[str, Any]:
    """``core.overflow.overflow_report`` (every rank and step) run in a child over the index file:
    its process pool counts the tensors, the counts are kept in the index as by the CLI."""
    job = ChildJob(["overflow", root, db_path])
    on_start(job)
    try:
        for event in job.events(cancel):
            kind = event.get("event")
            if kind == "progress" and progress is not None:
                progress(int(event.get("done", 0)), int(event.get("total", 0)))
            elif kind == "error":
                raise ChildFailed(event.get("message") or "overflow scan failed")
            elif kind == "done":
                return event["doc"]
    finally:
        job.kill()
    raise ChildFailed("overflow scan ended without an answer")  # pragma: no cover


# ---------------------------------------------------------------------------------------- child side


class _Out:
    """JSON lines to the parent, one writer at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fh = sys.stdout
        sys.stdout = sys.stderr  # anything else printed goes to stderr, not into the event stream

    def __call__(self, **event: Any) -> None:
        line = json.dumps(event, allow_nan=False, default=str)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()


def _watch_parent() -> None:
    """A parent that went away (killed without ending us) reparents us: end this process group, our
    pool workers too.  Polled, not a blocking read of a pipe: a thread holding a lock while the pool
    forks its workers would leave them deadlocked."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        if os.getpgrp() == os.getpid():  # our own session (as the explorer starts us)
            os.killpg(0, signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="parent watch", daemon=True).start()


def _error_event(exc: BaseException) -> dict[str, Any]:
    import sqlite3

    message = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    if isinstance(exc, (sqlite3.DatabaseError, OSError)):
        return {"event": "error", "cache": True, "kind": "OSError" if isinstance(exc, OSError) else type(exc).__name__,
                "message": message, "errno": getattr(exc, "errno", None), "strerror": getattr(exc, "strerror", None)}
    return {"event": "error", "cache": False, "message": f"{type(exc).__name__}: {message}"}


def _json_safe(value: Any) -> Any:
    """JSON has no NaN/Infinity: spelled as strings, as the CLI's ``--json`` does."""
    import math

    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _to_background() -> None:
    """Lower the priority of this process group (the builder and its pool workers; only when it is
    ours, as the explorer starts us): a best effort, never an error."""
    try:
        if os.getpgrp() == os.getpid():
            os.setpriority(os.PRIO_PGRP, 0, os.getpriority(os.PRIO_PGRP, 0) + BACKGROUND_NICE)
    except (AttributeError, OSError):
        pass


def _run_build(out: _Out, root: str, db_path: str, partial_after: Optional[float]) -> int:
    from dumpscope.core.index import dump_index as index_mod
    from dumpscope.core.index.dump_index import DumpIndex

    if partial_after is None:
        partial_after = index_mod.PARTIAL_AFTER_S
    first_after = min(FIRST_PARTIAL_S, partial_after)
    index_mod.PARTIAL_AFTER_S = first_after
    index = DumpIndex(root, db_path)
    out(event="opened")
    started = time.monotonic()
    last = [0.0]
    shown = [0]  # ops (or records) the explorer was last told about: each partial shows 4x as many

    def announce(prog: Any, now_shown: int) -> None:
        """Tell the explorer partial results are there; after the first, the builder steps back."""
        first = not shown[0]
        shown[0] = now_shown
        out(event="partial", files=prog.files, records=prog.records)
        if first:
            _to_background()

    def progress(prog: Any) -> None:
        made = index.early_seq  # ops of plain places made while the pool reads the rest: showable now
        if made and made >= 4 * shown[0] and time.monotonic() - started >= first_after:
            announce(prog, made)
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S or prog.done:
            last[0] = now
            out(event="progress", files=prog.files, dirs=prog.dirs, records=prog.records, phase=prog.phase)

    def partial(prog: Any) -> None:
        index_mod.PARTIAL_AFTER_S = partial_after  # after the first: the build's own pace
        announce(prog, max(shown[0], prog.records))

    prog = index.update(progress=progress, partial=partial)
    out(event="done", files=prog.files, warnings=index.warnings)
    index.close()
    return 0


def _run_overflow(out: _Out, root: str, db_path: str) -> int:
    from dumpscope.core.index.dump_index import DumpIndex
    from dumpscope.core.engines.overflow.lookup import overflow_report as report
    from dumpscope.core.query import DumpQuery

    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S or done == total:
            last[0] = now
            out(event="progress", done=done, total=total)

    index = DumpIndex(root, db_path)
    doc = report(DumpQuery(index), progress=progress)
    out(event="done", doc=_json_safe(doc))
    index.close()
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dumpscope.core.engines.child_jobs",
                                     description="dumpscope's explorer runs this; not a user command")
    parser.add_argument("job", choices=("build", "overflow"))
    parser.add_argument("root")
    parser.add_argument("db")
    parser.add_argument("--partial-after", type=float, default=None)
    args = parser.parse_args(argv)
    out = _Out()
    _watch_parent()
    try:
        if args.job == "build":
            return _run_build(out, args.root, args.db, args.partial_after)
        return _run_overflow(out, args.root, args.db)
    except Exception as exc:
        out(**_error_event(exc))
        return 1


if __name__ == "__main__":  # the explorer's builder: a process that ends with its job
    from dumpscope.core.support import process_settings

    process_settings.one_shot()
    sys.exit(main())
