"""Explorer cold open vs ``dumpscope summary`` cold on the same tree (issue 21 Build 3; run by hand).

Both are whole processes started from here, each on a fresh (deleted) index in its own cache dir,
alternating per repetition, best of ``--reps``:

* ``summary`` cold: ``dumpscope summary PATH`` wall time (the CLI's index build with its process pool).
* explorer cold: ``python bench_tui_cold.py --explore PATH`` starts the cold build as ``dumpscope PATH``
  does (``child_jobs.prestart_build``, before Textual is imported), runs the real ``DumpscopeApp`` headless
  (``App.run_test``, 120x40) and prints a marker after the first frame painted once the ops list
  holds ops (**first ops**), and after the frame painted once the cold build has finished
  (**complete**); times are taken here, when the marker line arrives, from just before the process
  was started.  ``--in-thread`` measures the old path (the build in the explorer's own thread, no
  pool) in the same run, for comparison.
* peak RSS: the explorer process, and the largest of its child processes (the builder and its
  pool workers), from ``getrusage``.

Page cache: warm — the tree is walked once before the first timed run and every run reads the same
files again within seconds; the index cache is always cold (deleted before each run).

    python benchmarks/bench_tui_cold.py [--files 100000] [--workdir /tmp/dumpscope-bench] [--reps 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

common: Any = None  # imported by the driver only: the explorer process imports what `dumpscope PATH` does


# ------------------------------------------------------------------------------- inside the explorer


def _mark(what: str) -> None:
    print(f"MARK {what}", flush=True)


async def _explore(dump: str, in_thread: bool) -> None:
    from dumpscope.core.engines import child_jobs

    import dumpscope.tui.cli.entry  # noqa: F401  (what `dumpscope PATH` imports before it starts the build)

    early = None
    if in_thread:
        child_jobs.usable = lambda: False  # the build in the explorer's own thread, as before
    else:
        early = child_jobs.prestart_build(dump)  # as `dumpscope PATH` does, before Textual is imported
    from dumpscope.tui import app as app_mod

    real_ready = app_mod.DumpscopeApp.on_index_ready

    def on_index_ready(self, message) -> None:
        real_ready(self, message)
        if message.final and not self.finished:
            self.finished = True
            self.call_after_refresh(self._complete)

    # patched in place, not overridden in the subclass: Textual calls the handler of every class of
    # the MRO, so an override calling super() would run the explorer's twice for each message
    app_mod.DumpscopeApp.on_index_ready = on_index_ready

    class Bench(app_mod.DumpscopeApp):
        CSS_PATH = str(Path(app_mod.__file__).parent / "app.tcss")
        shown = False
        finished = False

        def on_op_tree_loaded(self, message) -> None:
            # the op pane's worker has put the place's scopes in the tree: the next frame shows ops
            # (the status count arrives from its own worker; checking it in on_index_ready saw only the
            # count of the partial result before, one partial late)
            if not self.shown and message.tree.root.children:
                self.shown = True
                self.call_after_refresh(_mark, "first_ops")

        def _complete(self) -> None:
            _mark(f"complete ops={self.q.count_ops() if self.q else 0}")
            self.done = True

    app = Bench(dump, display_name="bench", early_build=early)
    app.done = False
    async with app.run_test(size=(120, 40)) as pilot:
        while not app.done:
            await pilot.pause(0.01)
        if app.index_error:
            _mark(f"error {app.index_error}")
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    _mark(f"rss self={me * 1024} children={kids * 1024}")


# ------------------------------------------------------------------------------------------ driver


def explorer_run(dump: Path, cache: Path, in_thread: bool) -> dict:
    common.drop_index(dump, cache)
    cmd = [sys.executable, os.path.join(HERE, "bench_tui_cold.py"), "--explore", str(dump)]
    if in_thread:
        cmd.append("--in-thread")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=common.fresh_cache_env(cache))
    out: dict = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        if not line.startswith("MARK "):
            continue
        now = time.perf_counter() - t0
        what = line[5:].split()
        if what[0] == "first_ops":
            out["first_ops"] = now
        elif what[0] == "complete":
            out["complete"] = now
            out["ops"] = int(what[1].split("=")[1])
        elif what[0] == "rss":
            out["rss_self"] = int(what[1].split("=")[1])
            out["rss_children"] = int(what[2].split("=")[1])
        elif what[0] == "error":
            out["error"] = " ".join(what[1:])
    err = proc.stderr.read() if proc.stderr else ""
    if proc.wait() != 0 or "complete" not in out:
        raise SystemExit(f"explorer run failed: {err.strip().splitlines()[-1:] or proc.returncode}")
    return out


def summary_run(dump: Path, cache: Path) -> float:
    common.drop_index(dump, cache)
    exe = os.path.join(os.path.dirname(sys.executable), "dumpscope")  # not a pyenv shim
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "dumpscope"]
    t0 = time.perf_counter()
    subprocess.run(cmd + ["summary", str(dump)], check=True, env=common.fresh_cache_env(cache),
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    global common
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--in-thread", action="store_true", help="also measure the old in-thread build")
    ap.add_argument("--explore", metavar="PATH", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.explore:
        asyncio.run(_explore(args.explore, args.in_thread))
        return 0
    import common
    info = common.print_machine()
    args.workdir = args.workdir or common.DEFAULT_WORKDIR
    dump = common.cann_tree(args.workdir, args.files)
    work = common.check_workdir(args.workdir)
    cache = work / "cache-tui-cold"
    cache.mkdir(exist_ok=True)
    n = sum(len(files) for _d, _s, files in os.walk(dump))  # also brings the tree into the page cache
    best: dict[str, float] = {}
    rss = {"self": 0, "children": 0}
    ops = set()
    for rep in range(args.reps):
        t_sum = summary_run(dump, cache)
        runs = [("child", explorer_run(dump, cache, False))]
        if args.in_thread:
            runs.append(("thread", explorer_run(dump, cache, True)))
        print(f"rep {rep + 1}: summary {t_sum:.2f}s; " + "; ".join(
            f"explorer ({k}) first ops {r.get('first_ops', float('nan')):.2f}s complete {r['complete']:.2f}s"
            for k, r in runs), flush=True)
        best["summary"] = min(best.get("summary", 1e9), t_sum)
        for k, r in runs:
            best[f"{k}_first"] = min(best.get(f"{k}_first", 1e9), r.get("first_ops", r["complete"]))
            best[f"{k}_complete"] = min(best.get(f"{k}_complete", 1e9), r["complete"])
            ops.add(r["ops"])
            if k == "child":
                rss["self"] = max(rss["self"], r["rss_self"])
                rss["children"] = max(rss["children"], r["rss_children"])
    load = f"load avg {info['load_avg']}; warm page cache, cold index; best of {args.reps}"
    common.emit(f"`summary` cold, {n:,}-file CANN tree", round(best["summary"], 2), "s", note=load)
    common.emit(f"explorer cold open: first ops, {n:,} files", round(best["child_first"], 2), "s",
                target="<= 1 s", met=best["child_first"] <= 1.0, note=f"ops {sorted(ops)}")
    ratio = best["child_complete"] / best["summary"]
    common.emit(f"explorer cold open: complete, {n:,} files", round(best["child_complete"], 2), "s",
                baseline=round(best["summary"], 2), ratio=round(ratio, 2), target="<= 1.2x summary cold",
                met=ratio <= 1.2)
    common.emit(f"explorer cold open: peak RSS (explorer / largest child), {n:,} files",
                f"{rss['self'] / 2**20:.0f} / {rss['children'] / 2**20:.0f}", "MB", target="<= 500 MB",
                met=max(rss.values()) <= 500 * 2**20)
    if args.in_thread:
        common.emit(f"explorer cold open, old in-thread build: first ops / complete, {n:,} files",
                    f"{best['thread_first']:.2f} / {best['thread_complete']:.2f}", "s",
                    baseline=round(best["summary"], 2), ratio=round(best["thread_complete"] / best["summary"], 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
