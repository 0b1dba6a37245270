"""Wall-clock scaling of the parsers that must stay linear in their input (run by hand).

    python benchmarks/bench_parsers_linear.py [--small 10000] [--factor 8] [--reps 2]

The tests check these parsers by counting work (tests/test_parsers_linear.py, test_layout_troubleshooter.py);
the times live here, where a loaded machine makes a number slow instead of a test red:

- ``parse_ge_text`` on one-line op messages with stray ``}`` lines (issue 30: 80k lines took 46 s), at
  ``small`` and ``factor x small`` lines: a linear parser's time ratio is about ``factor``, a quadratic one's
  about ``factor**2``;
- ``parse_ts_name`` on the two names that a backtracking parser took quadratic time on (each refused).
"""

from __future__ import annotations

import argparse
import json
import time

import common
from dumpscope.core.graphs.ge_text import parse_ge_text
from dumpscope.core.layouts.troubleshooter import TsNameError, parse_ts_name
from synth.ge_graph_writer import one_line_ge_text

#: names a backtracking Troubleshooter name parser spent quadratic time on
TS_BAD_NAMES = ("a_" + "_1" * 500 + "_forward_x", "a_b_" + "1" * 1000 + "x")


def best_of(reps: int, fn) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=10_000, help="GE text lines of the small input")
    ap.add_argument("--factor", type=int, default=8, help="the big input is this many times the small one")
    ap.add_argument("--reps", type=int, default=2, help="best of this many runs")
    a = ap.parse_args()
    print(json.dumps(common.machine_info()))
    small, big = one_line_ge_text(a.small), one_line_ge_text(a.small * a.factor)
    t_small = best_of(a.reps, lambda: parse_ge_text(small))
    t_big = best_of(a.reps, lambda: parse_ge_text(big))
    ratio = t_big / t_small
    common.emit(f"parse_ge_text, {a.small * a.factor:,} vs {a.small:,} one-line ops", round(t_big, 3), "s",
                baseline=round(t_small, 3), ratio=round(ratio, 2), target=f"< {a.factor * 2.5:g} (linear ~{a.factor})",
                met=ratio < a.factor * 2.5)

    def refuse_all() -> None:
        for name in TS_BAD_NAMES:
            try:
                parse_ts_name(name)
            except TsNameError:
                continue
            raise SystemExit(f"parse_ts_name accepted {name[:40]!r}...")

    t_ts = best_of(a.reps, refuse_all)
    common.emit("parse_ts_name, two 1 kB pathological names", round(t_ts * 1000, 3), "ms", target="< 500 ms",
                met=t_ts < 0.5)


if __name__ == "__main__":
    main()
