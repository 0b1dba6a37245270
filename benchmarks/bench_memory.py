"""Peak RSS of building the index of an N-file CANN tree, in a fresh subprocess (run by hand).

    python benchmarks/bench_memory.py [--files 100000 | --full] [--workdir /tmp/dumpscope-bench]

The child process imports dumpscope, opens the index of the tree on an empty cache dir (cold
build: walk, header decode in the process pool, SQLite inserts, finalize) and then runs one
``count_ops`` query; it reports ``resource.getrusage`` ``ru_maxrss`` of itself.  The parent also
samples ``/proc`` every 0.2 s for the largest pool worker (``VmHWM``) and the summed RSS of the
whole process tree (pool workers are forkserver grandchildren, invisible to RUSAGE_CHILDREN).  The baseline is the RSS of the same child after ``import
dumpscope.core.query`` only.  ``--full`` uses 1,000,000 files (target: RSS <= 500 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

_CHILD = r"""
import json, resource, sys, time
import dumpscope.core.query as q
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if sys.argv[1] == "import-only":
    print(json.dumps({"base_kb": base})); sys.exit(0)
from dumpscope.core.index.dump_index import DumpIndex
t0 = time.perf_counter()
from pathlib import Path
idx = DumpIndex.open(sys.argv[1], cache_directory=Path(sys.argv[2]))
query = q.DumpQuery(idx)
n_ops = query.count_ops()
dt = time.perf_counter() - t0
print(json.dumps({"base_kb": base, "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "child_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "ops": n_ops, "seconds": dt}))
"""


_LISTED = r"""
import sys
from dumpscope.core.engines.compare import places
real = places.compare_places
places.compare_places = lambda *a, spool_rows=False, **kw: real(*a, **kw)
from dumpscope.tui.cli.entry import main
sys.exit(main(sys.argv[1:]))
"""


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(children.get(p, ()))
    return out


def _status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pss_kb(pid: int) -> int:
    """Proportional set size: pages shared with other processes (a forked pool worker shares most of
    its parent's) counted in shares, so a tree's sum is the memory it really holds."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


#: peak summed PSS of the process tree in the last ``run_sampled`` (KB)
LAST_PSS_KB = 0
#: at that peak: (pid, short command, RSS KB, PSS KB, anonymous KB) per process of the tree
LAST_PEAK_TREE: list = []


def _rollup_kb(pid: int) -> dict:
    out: dict = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    out[parts[0][:-1]] = int(parts[1])
    except OSError:
        pass
    return out


def _short_cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(a.decode(errors="replace") for a in argv[1:4])
    return text[:60]


def run_sampled(cmd: list[str], env: "dict | None" = None, stdout: int = subprocess.PIPE) -> tuple[str, int, int]:
    """Run ``cmd``; return (stdout, peak summed RSS of the process tree in KB, peak single worker KB).
    The peak summed PSS is left in ``LAST_PSS_KB``."""
    global LAST_PSS_KB, LAST_PEAK_TREE
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env)
    peak_sum = peak_other = peak_pss = 0
    tree: list = []
    import threading

    done = threading.Event()

    def sample() -> None:
        nonlocal peak_sum, peak_other, peak_pss, tree
        while not done.is_set():
            pids = _descendants(proc.pid)
            rss = {p: _status_kb(p, "VmRSS:") for p in pids}
            peak_sum = max(peak_sum, sum(rss.values()))
            roll = {p: _rollup_kb(p) for p in pids}
            pss = sum(r.get("Pss", 0) for r in roll.values())
            if pss > peak_pss:
                peak_pss = pss
                tree = [(p, _short_cmd(p), rss[p], roll[p].get("Pss", 0), roll[p].get("Anonymous", 0))
                        for p in pids]
            for p in pids:
                if p != proc.pid:
                    peak_other = max(peak_other, _status_kb(p, "VmHWM:"))
            done.wait(0.2)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    done.set()
    th.join()
    LAST_PSS_KB = peak_pss
    LAST_PEAK_TREE = tree
    if proc.returncode:
        raise SystemExit(f"child failed:\n{err}")
    return out, peak_sum, peak_other


def _measure_path(cmd: str, dump, n: int, workdir: str, shape: str = "") -> None:
    """Peak RSS of the whole process tree of ``dumpscope CMD dump --json`` on a cold cache."""
    cache = tempfile.mkdtemp(prefix=f"memcache-{cmd}-", dir=common.check_workdir(workdir))
    env = None
    if cmd == "explore":
        # the real explorer, headless, until its cold build has finished (bench_tui_cold.py --explore):
        # the explorer, its builder child and the builder's pool workers
        argv = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_tui_cold.py"),
                "--explore", str(dump)]
        env = common.fresh_cache_env(Path(cache))
    elif cmd == "compare-listed":
        # compare as before the rows were spooled (session 6): every row kept in a list until the
        # document is written; the same CLI otherwise
        argv = [sys.executable, "-c", _LISTED, "compare", str(dump), str(dump), "--json", "--cache-dir", cache]
    else:
        argv = [sys.executable, "-m", "dumpscope", cmd, str(dump)] + ([str(dump)] if cmd == "compare" else [])
        argv += ["--json", "--cache-dir", cache]
    try:
        t0 = time.perf_counter()
        out, tree_kb, worker_kb = run_sampled(argv, env=env, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    tree_mb = tree_kb / 1024
    common.emit(f"peak RSS, `dumpscope {cmd}` cold on a {n:,}-file tree{shape} (whole process tree)", round(tree_mb), "MB",
                target="<= 500 MB at 1M files" if n >= 1_000_000 else "<= 500 MB at 1M files (this is a smaller tree)",
                met=tree_mb <= 500 if n >= 1_000_000 else None,
                note=f"summed PSS {LAST_PSS_KB / 1024:.0f} MB (shared pages of forked workers counted once); "
                     f"largest single child {worker_kb / 1024:.0f} MB (sampled every 0.2 s); wall {wall:.1f} s; "
                     "output discarded")
    for pid, what, rss_kb, pss_kb, anon_kb in LAST_PEAK_TREE:
        print(f"  at the PSS peak: pid {pid} {what!r}: RSS {rss_kb / 1024:.0f} MB, PSS {pss_kb / 1024:.0f} MB, "
              f"anonymous {anon_kb / 1024:.0f} MB", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--full", action="store_true", help="1,000,000 files")
    ap.add_argument("--workdir", default=common.DEFAULT_WORKDIR)
    ap.add_argument("--paths", default="", help="also measure these commands cold: summary,overflow,compare,explore (and compare-listed: compare with its rows kept in a list, as before session 6)")
    ap.add_argument("--skip-build", action="store_true", help="only the --paths commands")
    ap.add_argument("--one-place", action="store_true",
                    help="the --paths commands on a tree of --files files in ONE step folder (compare: 2 x "
                         "--files pairs in one place)")
    args = ap.parse_args()
    n = 1_000_000 if args.full else args.files
    common.print_machine()
    dump = common.cann_place_tree(args.workdir, n) if args.one_place else common.cann_tree(args.workdir, n)
    for cmd in [c for c in args.paths.split(",") if c]:
        _measure_path(cmd, dump, n, args.workdir, " in one step folder" if args.one_place else "")
    if args.skip_build:
        return 0
    cache = tempfile.mkdtemp(prefix="memcache-", dir=common.check_workdir(args.workdir))
    try:
        base = json.loads(subprocess.run([sys.executable, "-c", _CHILD, "import-only"], check=True,
                                         capture_output=True, text=True).stdout)
        t0 = time.perf_counter()
        out, tree_kb, worker_kb = run_sampled([sys.executable, "-c", _CHILD, str(dump), cache])
        wall = time.perf_counter() - t0
        r = json.loads(out)
        self_mb = r["self_kb"] / 1024
        child_mb = r["child_kb"] / 1024
        base_mb = base["base_kb"] / 1024
        target = "<= 500 MB at 1M files" if n >= 1_000_000 else "<= 500 MB at 1M files (this is a smaller tree)"
        common.emit(f"peak RSS, cold index of {n:,}-file tree (main process)", round(self_mb), "MB",
                    baseline=f"{base_mb:.0f} MB (after import only)", ratio=round(self_mb / base_mb, 1),
                    target=target, met=self_mb <= 500 if n >= 1_000_000 else None,
                    note=f"largest pool worker {max(child_mb, worker_kb / 1024):.0f} MB, whole process tree "
                         f"{tree_kb / 1024:.0f} MB (sampled every 0.2 s); {r['ops']:,} ops; build {r['seconds']:.1f} s "
                         f"(wall incl. start {wall:.1f} s)")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
