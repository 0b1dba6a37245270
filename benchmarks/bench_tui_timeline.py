"""Timeline of one explorer cold open (issue 21 Build 3; run by hand, not a target row).

Where the time to the first ops goes, whole process, on the same tree as ``bench_tui_cold.py``:
the explorer process (started as ``bench_tui_cold.py --explore`` is: the real ``DumpscopeApp``
headless, the cold build started before Textual is imported) and its index-builder child
(``timeline_child.py``: the real child with marks) each note wall-clock marks in one file; this
prints them in order, in ms from just before the explorer process was started.

    python benchmarks/bench_tui_timeline.py [--files 100000] [--workdir /tmp/dumpscope-bench] [--reps 1]

Page cache warm (the tree is walked first), index cache cold (deleted before each run).  The marks
cost a little themselves (a file append each); compare with ``bench_tui_cold.py`` for the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time

_T0 = time.time()
HERE = os.path.dirname(os.path.abspath(__file__))


def _mark(what: str, t: float | None = None) -> None:
    with open(os.environ["DUMPSCOPE_TIMELINE"], "a") as fh:
        fh.write(f"{t if t is not None else time.time():.6f} explorer {what}\n")


def _sampler(every: float = 0.005) -> None:
    """``DUMPSCOPE_TIMELINE_SAMPLE=1``: every few ms, where each thread of this process is (innermost
    frames of the project or Textual), into the timeline file as ``sample`` lines."""
    import threading
    import traceback

    main = threading.main_thread().ident

    def run() -> None:
        while True:
            time.sleep(every)
            now = time.time()
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == threading.get_ident():
                    continue
                stack = [f"{os.path.basename(fs.filename)}:{fs.name}" for fs in traceback.extract_stack(frame)]
                busy = not any(x in stack[-1] for x in ("select", "wait", "_worker", "sleep", "acquire", "_read"))
                if busy:
                    who = "main" if ident == main else names.get(ident, "?")
                    _mark(f"sample [{who}] " + " > ".join(stack[-6:]), now)

    threading.Thread(target=run, daemon=True).start()


async def _explore(dump: str) -> None:
    _mark("python up, script running", _T0)
    if os.environ.get("DUMPSCOPE_TIMELINE_SAMPLE"):
        _sampler()
    import dumpscope.tui.cli.entry  # noqa: F401  (what `dumpscope PATH` imports before it starts the build)

    _mark("cli imported")
    from dumpscope.core.engines import child_jobs

    child_jobs.CHILD_COMMAND = [sys.executable, os.path.join(HERE, "timeline_child.py")]
    early = child_jobs.prestart_build(dump)
    _mark("child spawned")
    from dumpscope.tui import app as app_mod

    _mark("tui.app imported (Textual too)")
    from pathlib import Path

    ready_init = app_mod.IndexReady.__init__
    build_index = child_jobs.build_index

    def timed_ready(self, q, *a, **kw):
        _mark(f"IndexReady: built in the worker ({'final' if kw.get('final', True) else 'partial'}) start")
        ready_init(self, q, *a, **kw)
        _mark(f"IndexReady: built in the worker ({'final' if self.final else 'partial'}) end")

    def timed_build(root, db, cancel, on_start, progress, partial, *a, **kw):
        def timed_partial():
            _mark("worker: child said partial")
            partial()
        return build_index(root, db, cancel, on_start, progress, timed_partial, *a, **kw)

    app_mod.IndexReady.__init__ = timed_ready
    child_jobs.build_index = timed_build

    from dumpscope.core.query import DumpQuery

    def timed_query(name: str):
        real = getattr(DumpQuery, name)

        def run(self, *a, **kw):
            t = time.time()
            try:
                return real(self, *a, **kw)
            finally:
                _mark(f"query {name} {1000 * (time.time() - t):.0f} ms", t)
        return run

    for name in ("scope_facts", "kind_counts", "snapshot_counts",
                 "ops_in_scope", "count_ops", "ops", "tensors", "ranks", "steps", "default_place"):
        if hasattr(DumpQuery, name):
            setattr(DumpQuery, name, timed_query(name))

    real_ready, real_mount = app_mod.DumpscopeApp.on_index_ready, app_mod.DumpscopeApp.on_mount

    def on_mount(self) -> None:
        _mark("app mounted")
        real_mount(self)

    def on_index_ready(self, message) -> None:
        _mark(f"on_index_ready ({'final' if message.final else 'partial'}) start")
        real_ready(self, message)
        _mark(f"on_index_ready ({'final' if message.final else 'partial'}) end")
        if message.final:
            self.call_after_refresh(self._complete)

    # patched in place (Textual calls the handler of every class of the MRO: an override would run twice)
    app_mod.DumpscopeApp.on_index_ready, app_mod.DumpscopeApp.on_mount = on_index_ready, on_mount

    class Timed(app_mod.DumpscopeApp):
        CSS_PATH = str(Path(app_mod.__file__).parent / "app.tcss")
        shown = False
        done = False

        def on_op_tree_loaded(self, message) -> None:
            tree = message.tree
            _mark(f"op tree loaded: rank {tree.rank} step {tree.step}, {len(tree.root.children)} scopes")
            if not self.shown and message.tree.root.children:
                self.shown = True
                self.call_after_refresh(_mark, "FIRST OPS painted")

        def _complete(self) -> None:
            _mark("COMPLETE painted")
            self.done = True

    app = Timed(dump, display_name="bench", early_build=early)
    _mark("app constructed")
    async with app.run_test(size=(120, 40)) as pilot:
        while not app.done:
            await pilot.pause(0.01)


def run_once(dump, cache) -> None:
    import subprocess

    import common

    common.drop_index(dump, cache)
    fd, path = tempfile.mkstemp(prefix="dumpscope-timeline-")
    os.close(fd)
    env = common.fresh_cache_env(cache)
    env["DUMPSCOPE_TIMELINE"] = path
    t0 = time.time()
    subprocess.run([sys.executable, os.path.abspath(__file__), "--explore", str(dump)], env=env, check=True)
    with open(path) as fh:
        rows = sorted((float(t), who, what) for t, who, what in (ln.rstrip("\n").split(" ", 2) for ln in fh))
    os.unlink(path)
    for t, who, what in rows:
        print(f"{(t - t0) * 1000:8.0f} ms  {who:8s} {what}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--explore", metavar="PATH", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.explore:
        asyncio.run(_explore(args.explore))
        return 0
    sys.path.insert(0, HERE)
    import common

    common.print_machine()
    dump = common.cann_tree(args.workdir or common.DEFAULT_WORKDIR, args.files)
    cache = common.check_workdir(args.workdir or common.DEFAULT_WORKDIR) / "cache-tui-timeline"
    cache.mkdir(exist_ok=True)
    sum(len(files) for _d, _s, files in os.walk(dump))  # page cache warm
    for rep in range(args.reps):
        print(f"-- run {rep + 1} (load {os.getloadavg()[0]:.2f})")
        run_once(dump, cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
