"""The explorer's index-builder child with timeline marks (``bench_tui_timeline.py`` starts it).

Run as ``python timeline_child.py build ROOT DB`` in place of ``python -m dumpscope.core.engines.child_jobs``:
it notes (wall clock, in the file named by ``DUMPSCOPE_TIMELINE``) when it started, when its imports
were done, when the first folder was stored, when the first early ops were made, and the first
time it sent each kind of event; then runs the real child.  Imports nothing heavy of its own.
"""

from __future__ import annotations

import os
import sys
import time

_T0 = time.time()
_OUT = os.environ["DUMPSCOPE_TIMELINE"]
_seen: set[str] = set()


def mark(what: str, once: bool = True, t: float | None = None) -> None:
    if once and what in _seen:
        return
    _seen.add(what)
    with open(_OUT, "a") as fh:
        fh.write(f"{t if t is not None else time.time():.6f} child {what}\n")


def _sampler(every: float = 0.005) -> None:
    """``DUMPSCOPE_TIMELINE_SAMPLE=1``: every few ms, where this process's busy threads are, as
    ``sample`` lines (as the explorer's sampler in ``bench_tui_timeline.py``)."""
    import threading
    import traceback

    def run() -> None:
        while True:
            time.sleep(every)
            now = time.time()
            for ident, frame in sys._current_frames().items():
                if ident == threading.get_ident():
                    continue
                stack = [f"{os.path.basename(fs.filename)}:{fs.name}" for fs in traceback.extract_stack(frame)]
                if not any(x in stack[-1] for x in ("select", "wait", "sleep", "acquire", "_read")):
                    mark("sample " + " > ".join(stack[-7:]), once=False, t=now)

    threading.Thread(target=run, daemon=True).start()


def main() -> int:
    mark("process started", t=_T0)
    if os.environ.get("DUMPSCOPE_TIMELINE_SAMPLE"):
        _sampler()
    from dumpscope.core.engines import child_jobs

    mark("child_jobs imported")
    from dumpscope.core.index import finalize
    from dumpscope.core.index import dump_index as index_mod

    mark("index imported")
    store, early, out = index_mod.DumpIndex._store_result, finalize.finalize_early, child_jobs._Out.__call__
    executor, walk_done = index_mod._Pool._executor, index_mod._EarlyOps.walk_done
    init = index_mod.DumpIndex.__init__

    def timed_init(self, *a, **kw):
        init(self, *a, **kw)
        mark("index file open (schema written)")

    def timed_store(self, prog, scanned, old_id, units, *a, **kw):
        store(self, prog, scanned, old_id, units, *a, **kw)
        mark("first folder stored")
        if units:
            mark("first folder with tensors stored")

    def timed_early(*a, **kw):
        early(*a, **kw)
        mark("first early ops made")

    def timed_out(self, **event):
        out(self, **event)
        mark(f"sent {event.get('event')}")

    def timed_executor(self):
        started = self._pool is None
        pool = executor(self)
        if started:
            mark("pool started")
        return pool

    def timed_walk_done(self, *a, **kw):
        mark("walk over")
        walk_done(self, *a, **kw)

    index_mod.DumpIndex.__init__ = timed_init
    index_mod.DumpIndex._store_result = timed_store
    finalize.finalize_early = timed_early
    index_mod.finalizing.finalize_early = timed_early
    child_jobs._Out.__call__ = timed_out
    index_mod._Pool._executor = timed_executor
    index_mod._EarlyOps.walk_done = timed_walk_done
    return child_jobs.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
