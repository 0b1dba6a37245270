"""``dumpscope triage`` on big trees, whole process, against floors measured in the same run (issue 31).

    python benchmarks/bench_triage.py [--files 100000] [--ranks 64 --steps 4 --ops 50] [--reps 3]
                                      [--workdir /tmp/dumpscope-bench] [--skip-tensor] [--skip-stats]
    python benchmarks/bench_triage.py --rss-files 250000 500000 1000000

* **stats**: ``--ranks`` x ``--steps`` places of a CANN ``dump_data=stats`` job (``--ops`` per-op CSVs per place,
  one NaN op on one rank/step: ``bench_overflow.write_stats_job``), so every answer comes from statistics.
  ``triage cold`` = ``dumpscope triage PATH --json`` with a fresh index cache; floor = cold ``dumpscope summary``
  (fresh cache, whole process); target <= 1.5x.  Peak RSS of the triage process (``ru_maxrss``).
* **tensor**: the CANN tensor tree of ``common.cann_tree`` (no Opdebug, no statistics: every output must be
  read).  Floor = cold ``summary`` + one read of every byte; target <= 2x.

* **rss** (``--rss-files N``, any number of times: ``--rss-files 250000 500000 1000000``): a stats job of N
  per-op CSVs (``N/1000`` ranks x 4 steps x 250 ops), one cold ``triage --json`` run alone under a wrapper
  process, so ``ru_maxrss`` is the triage process's own peak (and its workers'), never a summary's.  Target
  <= 500 MB at 1M files (issue 31); the smaller sizes show the growth.  Generation is slow (minutes per
  100k files on a loaded box); trees are kept under ``--workdir`` and reused.

The answer is checked each time (the NaN op named with its rank and step; the finite tree clean, every
place covered).  The page cache is warm (each tree is read once before timing).  Best of ``--reps``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from bench_overflow import best, cold, dumpscope, read_all, write_stats_job  # noqa: E402


def _cold_triage(dump: Path, cache: Path) -> tuple[float, str]:
    """``triage`` exits 3 when it finds trouble: run it without ``check`` and keep its stdout."""
    import subprocess

    shutil.rmtree(cache, ignore_errors=True)
    env = common.fresh_cache_env(cache)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "dumpscope", "triage", str(dump), "--json"], env=env,
                       capture_output=True, text=True)
    if p.returncode not in (0, 3):
        raise SystemExit(f"triage failed ({p.returncode}): {p.stderr.strip()}")
    return time.perf_counter() - t0, p.stdout


def bench_stats(workdir: str, ranks: int, steps: int, ops: int, reps: int) -> None:
    root = common.check_workdir(workdir) / f"statsjob{ranks}x{steps}x{ops}"
    dump = root / "dump"
    if not (root / ".complete").exists():
        shutil.rmtree(dump, ignore_errors=True)
        write_stats_job(dump, ranks, steps, ops)
        (root / ".complete").write_text("done")
    cache = Path(workdir) / "cache-triage-stats"
    read_all(dump)  # page cache warm
    t_sum, _ = best(lambda: cold(["summary", str(dump), "--json"], cache), reps)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t_tri, out = best(lambda: _cold_triage(dump, cache), reps)
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    doc = json.loads(out)
    o = doc["origin"] or {}
    ok = (doc["verdict"] == "overflow" and (o.get("rank"), o.get("step")) == (ranks // 2, min(1, steps - 1))
          and len(doc["covered"]["places"]) == ranks * steps and not doc["covered"]["not_covered"])
    ratio = round(t_tri / t_sum, 2)
    n = ranks * steps * ops
    common.emit(f"triage cold, {ranks} ranks x {steps} steps stats job ({n:,} CSVs)", round(t_tri, 2), "s",
                baseline=f"{t_sum:.2f} s (cold summary)", ratio=ratio, target="<= 1.5x", met=ratio <= 1.5 and ok,
                note=f"load {os.getloadavg()[0]:.1f}; answer checked (NaN op's rank and step, every place): {ok}")
    common.emit(f"peak RSS, triage on the {ranks}x{steps} job", round(rss_mb, 1), "MB",
                baseline=f"{before / 1024:.1f} MB (largest child before)", target="<= 500 MB", met=rss_mb <= 500,
                note="ru_maxrss of the largest child process so far (the summary runs are children too)")


def bench_tensor(workdir: str, n_files: int, reps: int) -> None:
    dump = common.cann_tree(workdir, n_files)
    cache = Path(workdir) / "cache-triage-tensor"
    t_read, nbytes = best(lambda: read_all(dump), reps)
    t_sum, _ = best(lambda: cold(["summary", str(dump), "--json"], cache), reps)
    t_tri, out = best(lambda: _cold_triage(dump, cache), reps)
    doc = json.loads(out)
    ok = doc["verdict"] == "clean" and not doc["covered"]["not_covered"] and \
        all(p["unknown"] == 0 for p in doc["covered"]["places"])
    floor = t_sum + t_read
    ratio = round(t_tri / floor, 2)
    common.emit(f"triage cold, {n_files:,}-file CANN tensor tree (every output read)", round(t_tri, 2), "s",
                baseline=f"{floor:.2f} s (cold summary {t_sum:.2f} s + read every byte {t_read:.2f} s, "
                         f"{int(nbytes) / 1e6:.0f} MB)", ratio=ratio, target="<= 2x", met=ratio <= 2.0 and ok,
                note=f"load {os.getloadavg()[0]:.1f}; answer checked (clean, every place, nothing unknown): {ok}")
    t_warm, _ = best(lambda: dumpscope(["summary", str(dump), "--json"], cache), reps)
    common.emit("summary warm after triage (same cache)", round(t_warm, 3), "s", note="for reference")


_RSS_WRAPPER = """
import resource, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
dt = time.perf_counter() - t0
sys.stderr.write(p.stderr)
print(p.returncode, dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stdout.write(p.stdout)
"""


def bench_rss(workdir: str, n_files: int) -> None:
    """Peak RSS of one cold triage on an ``n_files`` stats job, measured in a wrapper of its own."""
    import subprocess

    ranks, steps, ops = max(1, n_files // 1000), 4, 250
    root = common.check_workdir(workdir) / f"statsjob{ranks}x{steps}x{ops}"
    dump = root / "dump"
    if not (root / ".complete").exists():
        shutil.rmtree(dump, ignore_errors=True)
        t0 = time.perf_counter()
        write_stats_job(dump, ranks, steps, ops)
        (root / ".complete").write_text(f"{time.perf_counter() - t0:.1f}")
    cache = Path(workdir) / "cache-triage-rss"
    shutil.rmtree(cache, ignore_errors=True)
    env = common.fresh_cache_env(cache)
    p = subprocess.run([sys.executable, "-c", _RSS_WRAPPER, sys.executable, "-m", "dumpscope", "triage", str(dump),
                        "--json"], env=env, capture_output=True, text=True)
    head, _, out = p.stdout.partition("\n")
    rc, secs, maxrss = head.split()
    if int(rc) not in (0, 3):
        raise SystemExit(f"triage failed ({rc}): {p.stderr.strip()[-500:]}")
    doc = json.loads(out)
    o = doc["origin"] or {}
    ok = (doc["verdict"] == "overflow" and (o.get("rank"), o.get("step")) == (ranks // 2, 1)
          and len(doc["covered"]["places"]) == ranks * steps and not doc["covered"]["not_covered"])
    n = ranks * steps * ops
    rss_mb = int(maxrss) / 1024
    common.emit(f"peak RSS, cold triage on a {n:,}-CSV stats job ({ranks} ranks x {steps} steps x {ops} ops)",
                round(rss_mb, 1), "MB", target="<= 500 MB at 1M files", met=rss_mb <= 500,
                note=f"ru_maxrss of the triage process tree (its largest process), alone in a wrapper; "
                     f"{float(secs):.1f} s; load {os.getloadavg()[0]:.1f}; answer checked: {ok}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--ops", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workdir", default=common.DEFAULT_WORKDIR)
    ap.add_argument("--skip-tensor", action="store_true")
    ap.add_argument("--skip-stats", action="store_true")
    ap.add_argument("--rss-files", type=int, nargs="*", default=[],
                    help="only the peak-RSS runs, on stats jobs of these many files")
    args = ap.parse_args()
    common.print_machine()
    if args.rss_files:
        for n in args.rss_files:
            bench_rss(args.workdir, n)
        return 0
    if not args.skip_stats:
        bench_stats(args.workdir, args.ranks, args.steps, args.ops, args.reps)
    if not args.skip_tensor:
        bench_tensor(args.workdir, args.files, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
