"""One writer per index file, across threads and processes (readers never wait: WAL snapshots).

Two ``dumpscope`` processes opening the same tree at once used to interleave their builds in one
SQLite file (``UNIQUE constraint failed: dirs.path``; ``database is locked`` when a deferred
transaction could not upgrade).  Now the whole build holds an advisory lock on ``<index>.lock``:
the second process waits, then finds the work done and only checks the tree.  Within one process
a re-entrant thread lock per file comes first (``flock`` locks of two descriptors of one process
conflict with each other).
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from dumpscope.core.errors import IndexCancelled

try:
    import fcntl
except ImportError:  # Windows: the thread lock and SQLite's busy timeout still serialise writers
    fcntl = None  # type: ignore[assignment]

#: how long a build waits for another process's build of the same tree before building in memory
WAIT_S = float(os.environ.get("DUMPSCOPE_LOCK_WAIT", "600"))
POLL_S = 0.05

_guard = threading.Lock()
_held: dict[str, list] = {}  # lock path -> [RLock, depth, fd]


class LockTimeout(Exception):
    """Another process held the index lock for longer than ``WAIT_S``."""


def lock_path(db_path: str) -> Optional[str]:
    return None if db_path == ":memory:" else db_path + ".lock"


@contextmanager
def writer_lock(db_path: str, cancelled: Callable[[], bool] = lambda: False,
                waiting: Optional[Callable[[], None]] = None, wait_s: Optional[float] = None) -> Iterator[None]:
    """Hold the index's writer lock.  ``waiting()`` is called once if another writer must finish
    first; ``cancelled()`` is polled while waiting.  Raises ``LockTimeout`` after ``wait_s``."""
    path = lock_path(db_path)
    if path is None:
        yield
        return
    with _guard:
        entry = _held.setdefault(path, [threading.RLock(), 0, None])
    rlock: threading.RLock = entry[0]
    deadline = time.monotonic() + (WAIT_S if wait_s is None else wait_s)
    told = False
    while not rlock.acquire(timeout=POLL_S):
        told = _wait_tick(cancelled, waiting, told, deadline)
    try:
        if entry[1] == 0:
            entry[2] = _flock(path, cancelled, waiting, told, deadline)
        entry[1] += 1
        try:
            yield
        finally:
            entry[1] -= 1
            if entry[1] == 0 and entry[2] is not None:
                try:
                    fcntl.flock(entry[2], fcntl.LOCK_UN)  # type: ignore[union-attr]
                finally:
                    os.close(entry[2])
                    entry[2] = None
    finally:
        rlock.release()


def _wait_tick(cancelled, waiting, told: bool, deadline: float) -> bool:
    if cancelled():
        raise IndexCancelled()
    if time.monotonic() > deadline:
        raise LockTimeout("another dumpscope kept the index locked")
    if not told and waiting is not None:
        waiting()
    return True


def _flock(path: str, cancelled, waiting, told: bool, deadline: float) -> Optional[int]:
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # a read-only cache dir: the caller falls back to an in-memory index anyway
        return None
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                told = _wait_tick(cancelled, waiting, told, deadline)
                time.sleep(POLL_S)
            except OSError:  # a filesystem without flock (some network mounts): SQLite's own locking
                os.close(fd)
                return None
    except BaseException:
        os.close(fd)
        raise
