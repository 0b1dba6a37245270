"""``dumpscope compare --output FILE.csv`` against ``--json`` alone, whole process, at several sizes.

    python benchmarks/bench_compare_output.py [--files 10000,20000,40000] [--reps 3] [--xlsx]
                                              [--baseline OTHER_CHECKOUT/.venv/bin/python]

Issue 33: writing the table looked up every op's ``show`` document, and one of its lookups
(``snapshots_of``) walked the op's whole place, so the table cost grew with the square of a place's
ops (two 10k-file trees: 21 s CPU against 3.5 s for ``--json``).  Trees: ``bench_compare_tree``'s
one-step CANN trees (every file one op of one place, two tensors each, golden and target copies).
Indexes are built first (warm), so both figures are the compare and its output only, the output's
share as large as it gets.  Each figure is the CPU time of the whole process tree (``dumpscope``
and its pool workers), best of ``--reps`` runs, the two commands alternated; CPU because the box
is shared (the wall time moves with the other sessions' load).  ``--json --output x.csv`` prints
the same document as ``--json`` and writes the table besides: the ratio is the table's cost.
Targets: the ratio <= 1.2x at every size, and CPU per row flat from the smallest size to the largest.
``--baseline PYTHON``: the same two commands run by another checkout's interpreter too (its
``-m dumpscope``), alternated with ours in each round, so both ratios come from one run (the box's load
moves between runs).
The note adds each round's own ratio (its two runs back to back, under one load: the box's load drifts
between rounds, and the best of each command may come from different rounds), their median and range.
``--terminal``: the command as a user types it, ``compare G T --output x`` against ``compare G T`` (the
terminal's print of every row, here to a pipe), and ``--json`` in the same rounds for the print's own cost.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from bench_compare_tree import one_step_tree  # noqa: E402
from bench_overflow import children_cpu  # noqa: E402


def timed(args: list[str], env: dict, python: str = sys.executable) -> tuple[float, float]:
    """(wall, CPU of the process tree) of one ``dumpscope`` run, its stdout thrown away."""
    c0, t0 = children_cpu(), time.perf_counter()
    subprocess.run([python, "-m", "dumpscope", *args], check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, children_cpu() - c0


def bench(workdir: str, n_files: int, reps: int, ext: str, baseline: str = "",
          terminal: bool = False, distinct: bool = False) -> tuple[float, float]:
    if distinct:  # (every file's statistics its own, each side's its own: a real NPU-vs-GPU compare's)
        g = one_step_tree(workdir, n_files, "golden-distinct")
        t = one_step_tree(workdir, n_files, "target-distinct-noisy")
    else:
        g, t = one_step_tree(workdir, n_files, "golden"), one_step_tree(workdir, n_files, "target")
    pythons = {"": sys.executable, **({"baseline ": baseline} if baseline else {})}
    # each interpreter its own index cache: a checkout of another index schema would rebuild the other's
    # index at every run (its "warm" figures would then hold a cold build)
    envs = {who: common.fresh_cache_env(Path(workdir) / f"cache-compare-output{'-baseline' if who else ''}")
            for who in pythons}
    for who, python in pythons.items():
        for tree in (g, t):  # warm indexes: the figures are the compare and its output
            subprocess.run([python, "-m", "dumpscope", "summary", str(tree), "--json"], check=True, env=envs[who],
                           stdout=subprocess.DEVNULL)
    out = Path(workdir) / f"compare-output{ext}"
    plain = ["compare", str(g), str(t)] + ([] if terminal else ["--json"])
    runs = [("json", plain), ("output", plain + ["--output", str(out)])]
    if terminal:
        runs.append(("--json", plain + ["--json"]))
    best = {who + key: (float("inf"), float("inf")) for who in pythons for key, _ in runs}
    paired: list[float] = []  # each round's own ratio (ours): its two runs back to back, under one load
    for _ in range(max(1, reps)):
        for who, python in pythons.items():
            cpu = {}
            for key, args in runs:
                w, c = timed(args, envs[who], python)
                best[who + key] = (min(best[who + key][0], w), min(best[who + key][1], c))
                cpu[key] = c
            if not who:
                paired.append(cpu["output"] / cpu["json"])
    json_flag, alone = ("", "compare (the terminal's print)") if terminal else (" --json", "--json")
    if baseline:
        ratio = round(best["baseline output"][1] / best["baseline json"][1], 2)
        common.emit(f"baseline ({baseline}): compare{json_flag} --output x{ext} vs {alone}, two {n_files:,}-file "
                    "trees", round(best["baseline output"][1], 2), "s CPU",
                    baseline=f"{best['baseline json'][1]:.2f} s CPU ({alone})", ratio=ratio, target="<= 1.2x",
                    met=ratio <= 1.2, note=f"alternated with the run below; load {os.getloadavg()[0]:.1f}")
    rows = 2 * n_files
    ratio = round(best["output"][1] / best["json"][1], 2)
    literal = (f"; compare --output x{ext} vs --json: {best['output'][1] / best['--json'][1]:.2f}x "
               f"({best['--json'][1]:.2f} s CPU: the terminal's print of {rows:,} rows costs the rest)"
               if terminal else "")
    trees = "distinct noisy" if distinct else "one-place"
    common.emit(f"compare{json_flag} --output x{ext} vs {alone}, two {n_files:,}-file {trees} trees (warm index)",
                round(best["output"][1], 2), "s CPU", baseline=f"{best['json'][1]:.2f} s CPU ({alone})", ratio=ratio,
                target="<= 1.2x", met=ratio <= 1.2,
                note=f"{rows:,} rows; {best['output'][1] / rows * 1e6:.0f} vs {best['json'][1] / rows * 1e6:.0f} us "
                     f"CPU per row; wall {best['output'][0]:.2f} vs {best['json'][0]:.2f} s; "
                     f"load {os.getloadavg()[0]:.1f}; each round's own ratio: median "
                     f"{statistics.median(paired):.2f}, {min(paired):.2f}-{max(paired):.2f}{literal}")
    return best["output"][1] / rows, best["json"][1] / rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", default="10000,20000,40000", help="comma-separated tree sizes")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--xlsx", action="store_true", help="write .xlsx instead of .csv")
    ap.add_argument("--terminal", action="store_true",
                    help="compare G T --output x against compare G T (the print users see), not --json's")
    ap.add_argument("--distinct", action="store_true",
                    help="trees whose every file's statistics are its own and differ between the sides (as a real "
                         "job's do: the default trees repeat a few hundred values, which the table remembers)")
    ap.add_argument("--workdir", default=common.DEFAULT_WORKDIR)
    ap.add_argument("--baseline", default="", metavar="PYTHON",
                    help="another checkout's interpreter, run alternated with ours (its ratio printed first)")
    args = ap.parse_args()
    common.print_machine()
    sizes = [int(s) for s in args.files.split(",")]
    per_row = [bench(args.workdir, n, args.reps, ".xlsx" if args.xlsx else ".csv", args.baseline, args.terminal,
                     args.distinct) for n in sizes]
    if len(sizes) > 1:
        growth = per_row[-1][0] / per_row[0][0]
        common.emit(f"compare --output CPU per row, {sizes[-1]:,} vs {sizes[0]:,} files", round(growth, 2), "x",
                    target="<= 1.3x (linear)", met=growth <= 1.3,
                    note=f"{per_row[0][0] * 1e6:.0f} -> {per_row[-1][0] * 1e6:.0f} us per row")
    return 0


if __name__ == "__main__":
    sys.exit(main())
