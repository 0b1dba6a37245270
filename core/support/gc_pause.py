"""Pause Python's cyclic garbage collector while a big result is built.

Building 40,000 compare rows makes millions of small containers; every time the heap grows by a
quarter the collector walks all of them, and those walks cost as much as building the rows (13 full
collections, about half of compare's own CPU time, none of which found anything: the rows hold no
cycles).  Reference counting still frees everything as usual; only the search for cycles waits.
Re-entrant and thread-safe: the collector is switched back on when the outermost pause ends, and only
if it was on before.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic cycle collection inside the block (the collector's state is restored after)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()


_freeze_before_fork = False


def freeze_before_forks() -> None:
    """Say that this process ends with its command (``process_settings.one_shot``): forks may freeze its heap.

    CPython's advice for a fork without exec: freeze the parent's objects right before the fork, so
    neither the parent's nor the children's full collections walk them again (15-20 ms each, several
    per cold build) and the parent's collections write to none of the pages it shares with its
    children.  Frozen objects are never collected: a long-lived process that forks again and again
    (a test run, an app embedding the engine) would keep the garbage cycles of each moment it forked,
    so only a process that says it ends with its command gets this.
    """
    global _freeze_before_fork
    _freeze_before_fork = True


def before_fork() -> None:
    """Called right before a process pool forks its workers (``core.index.pool``)."""
    if _freeze_before_fork:
        gc.freeze()
