"""``dumpscope compare`` with the precision walk (issue 28) against an earlier checkout, in the same run.

    python benchmarks/bench_compare_precision.py --baseline /path/to/old/.venv/bin/dumpscope
        [--files 20000] [--reps 3] [--real DIR_GOLDEN DIR_TARGET] [--workdir /tmp/dumpscope-bench]

Issue 28 asks that judging at the run's precision (a walk over every op, relative errors, a 90th
percentile per tensor) cost nothing users feel: ``compare`` on a real msprobe pair and on two 20k-file
trees no slower than before.  Both executables run the same command on the same trees, alternately,
cold (a fresh index cache each time: the build is the same code in both, so the ratio is mostly the
compare), whole process; best of ``--reps`` wall and CPU (process + pool workers).  The ratio is this
checkout over the baseline's: <= 1.05 is "no slower" within this box's noise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from bench_compare_tree import one_step_tree  # noqa: E402
from bench_overflow import children_cpu  # noqa: E402


def run(exe: str, golden: Path, target: Path, cache: Path) -> tuple[float, float]:
    shutil.rmtree(cache, ignore_errors=True)
    env = common.fresh_cache_env(cache)
    c0, t0 = children_cpu(), time.perf_counter()
    subprocess.run([exe, "compare", str(golden), str(target), "--json"], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, children_cpu() - c0


def pair(name: str, new: str, old: str, golden: Path, target: Path, cache: Path, reps: int) -> None:
    best = {new: [float("inf"), float("inf")], old: [float("inf"), float("inf")]}
    for _ in range(reps):
        for exe in (old, new):  # alternated: the box's load falls on both
            wall, cpu = run(exe, golden, target, cache)
            best[exe][0], best[exe][1] = min(best[exe][0], wall), min(best[exe][1], cpu)
    (w_new, c_new), (w_old, c_old) = best[new], best[old]
    ratio = round(c_new / c_old, 3)
    common.emit(f"compare cold, {name}: this checkout vs baseline (CPU)", round(c_new, 2), "s CPU",
                baseline=f"{c_old:.2f} s CPU (wall {w_old:.2f} s vs {w_new:.2f} s)", ratio=ratio,
                target="<= 1.05x", met=ratio <= 1.05, note=f"best of {reps}, alternated; load {os.getloadavg()[0]:.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="the earlier checkout's dumpscope executable")
    ap.add_argument("--new", default=shutil.which("dumpscope") or "dumpscope")
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--real", nargs=2, metavar=("GOLDEN", "TARGET"), help="a real msprobe pair")
    ap.add_argument("--workdir", default=common.DEFAULT_WORKDIR)
    args = ap.parse_args()
    common.print_machine()
    cache = Path(args.workdir) / "cache-compare-precision"
    if args.real:
        pair("real msprobe pair", args.new, args.baseline, Path(args.real[0]), Path(args.real[1]), cache, args.reps)
    g = one_step_tree(args.workdir, args.files, "golden")
    t = one_step_tree(args.workdir, args.files, "target")
    pair(f"two {args.files:,}-file CANN trees", args.new, args.baseline, g, t, cache, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
