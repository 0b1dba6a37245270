"""The explorer's child process (``python -m dumpscope.core.engines.child_jobs``) with test hooks applied first.

Tests point ``child_jobs.CHILD_COMMAND`` here (``test_tui_support.child_hooks``) and name the hooks in
``DUMPSCOPE_TEST_CHILD_HOOKS`` (comma-separated), since a monkeypatch of the test process does not
reach a child process:

* ``highest_step_first``: the walk yields folders in reverse path order (partial results hold step 2 first)
* ``slow_store=S``: each folder is stored after sleeping S seconds
* ``slow_listing=NAME``: listing a folder named NAME takes 0.5 s more (its siblings' listings finish first)
* ``gate_store=SUFFIX@PATH``: storing the folder whose path ends with SUFFIX waits until PATH exists (the
  explorer has shown the partial results of the folders stored before it, whatever the machine's speed)
* ``stall_drain``: the build stops for good once the walk is over and the pool has its work
* ``max_page_count=N``: index files hold at most N pages (a cache disk that fills up half-way)
* ``gate=PATH``: the job waits until PATH exists (a scan or build still running, for as long as a test needs)
* ``fail=TEXT``: the job raises ``RuntimeError(TEXT)`` (a bug in the builder)
* ``crash``: the process dies after printing a traceback-like line to stderr, with no event
* ``pid_file=PATH``: the child writes its pid to PATH when it starts
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time


def _apply(hooks: list[str]) -> None:
    from dumpscope.core.engines import child_jobs
    from dumpscope.core.index import dump_index as index_mod

    for hook in hooks:
        name, _, value = hook.partition("=")
        if name == "highest_step_first":
            real_scan = index_mod.scan_tree

            def highest_step_first(root, *a, _real=real_scan, **kw):
                yield from sorted(_real(root, *a, **kw), key=lambda s: s.dirpath, reverse=True)
            index_mod.scan_tree = highest_step_first
        elif name == "slow_store":
            real_store = index_mod.DumpIndex._store_result

            def slow_store(self, *a, _real=real_store, _s=float(value), **kw):
                time.sleep(_s)
                return _real(self, *a, **kw)
            index_mod.DumpIndex._store_result = slow_store
        elif name == "slow_listing":
            from dumpscope.core.layouts import walk

            def slow_listing(path, *a, _name=value, **kw):
                if os.path.basename(path) == _name:
                    time.sleep(0.5)
                return walk.list_folder(path, *a, **kw)

            real_scan = index_mod.scan_tree

            def slow_listed(root, *a, _real=real_scan, **kw):
                return _real(root, *a, lister=slow_listing, **kw)
            index_mod.scan_tree = slow_listed
        elif name == "gate_store":
            suffix, _, gate = value.partition("@")
            real_store = index_mod.DumpIndex._store_result

            def gated_store(self, prog, scanned, *a, _real=real_store, _suffix=suffix, _gate=gate, **kw):
                if scanned.dirpath.endswith(_suffix):
                    deadline = time.monotonic() + 120
                    while not os.path.exists(_gate):
                        if time.monotonic() > deadline:
                            raise RuntimeError(f"gate_store: {_gate} never appeared")
                        time.sleep(0.02)
                return _real(self, prog, scanned, *a, **kw)
            index_mod.DumpIndex._store_result = gated_store
        elif name == "stall_drain":
            def stall(self, *a, **kw):
                while True:
                    time.sleep(1)
                yield  # pragma: no cover
            index_mod._Pool.drain = stall
        elif name == "max_page_count":
            real_connect = sqlite3.connect

            def connect(db, *a, _real=real_connect, _n=int(value), **kw):
                conn = _real(db, *a, **kw)
                if db != ":memory:":
                    conn.execute(f"PRAGMA max_page_count={_n}")
                return conn
            sqlite3.connect = connect  # this process is the test's child: patched everywhere
        elif name in ("gate", "fail", "crash", "pid_file"):
            real_main = child_jobs._run_build, child_jobs._run_overflow

            def wrap(real):
                def run(*a, _name=name, _value=value, **kw):
                    if _name == "gate":
                        while not os.path.exists(_value):
                            time.sleep(0.02)
                    elif _name == "fail":
                        raise RuntimeError(_value)
                    elif _name == "crash":
                        sys.stderr.write("Traceback (most recent call last):\nMemoryError: the test's crash\n")
                        sys.stderr.flush()
                        os._exit(3)
                    elif _name == "pid_file":
                        with open(_value + ".tmp", "w") as fh:  # whole or absent for the test reading it
                            fh.write(f"{os.getpid()}\n")
                        os.replace(_value + ".tmp", _value)
                    return real(*a, **kw)
                return run
            child_jobs._run_build, child_jobs._run_overflow = wrap(real_main[0]), wrap(real_main[1])
        elif name:
            raise SystemExit(f"unknown test hook {hook!r}")


if __name__ == "__main__":
    _apply([h for h in os.environ.get("DUMPSCOPE_TEST_CHILD_HOOKS", "").split(",") if h])
    from dumpscope.core.engines.child_jobs import main

    sys.exit(main())
