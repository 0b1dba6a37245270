"""Throughput of ``compare_arrays`` vs a straightforward numpy implementation of the same metrics.

Run by hand: ``python benchmarks/bench_compare.py [--mb 256] [--repeat 3] [--memmap]``.
Throughput counts the bytes of both inputs (2 × MB) per second of wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

from dumpscope.core.engines.compare import Thresholds, compare_arrays

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402


def naive_metrics(golden: np.ndarray, target: np.ndarray) -> dict[str, float]:
    """The same metric set, written the obvious whole-array way (float64, finite elements)."""
    g = golden.astype(np.float64).ravel()
    t = target.astype(np.float64).ravel()
    ok = np.isfinite(g) & np.isfinite(t)
    g, t = g[ok], t[ok]
    diff = t - g
    absdiff = np.abs(diff)
    denom = np.where(g == 0, np.finfo(golden.dtype).eps, np.abs(g))
    rel = absdiff / denom
    return {
        "cosine": float(np.dot(g, t) / (np.linalg.norm(g) * np.linalg.norm(t))),
        "euc_dist": float(np.linalg.norm(diff)),
        "max_abs_err": float(absdiff.max()),
        "max_rel_err": float(rel.max()),
        "one_thousandth_ratio": float(np.mean(rel < 0.001)),
        "five_thousandth_ratio": float(np.mean(rel < 0.005)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=int, default=256, help="size of EACH fp32 input in MB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memmap", action="store_true", help="read the inputs from .npy memmaps")
    args = ap.parse_args()

    n = args.mb * (1 << 20) // 4
    common.print_machine()
    print(f"inputs: 2 x {args.mb} MB float32 ({n:,} elements each)")
    rng = np.random.default_rng(0)
    golden = rng.standard_normal(n, dtype=np.float32)
    target = golden + rng.standard_normal(n, dtype=np.float32) * np.float32(1e-3)
    tmp = None
    if args.memmap:
        tmp = tempfile.TemporaryDirectory()
        for name, arr in (("g", golden), ("t", target)):
            np.save(os.path.join(tmp.name, name + ".npy"), arr)
        del golden, target
        golden = np.load(os.path.join(tmp.name, "g.npy"), mmap_mode="r")
        target = np.load(os.path.join(tmp.name, "t.npy"), mmap_mode="r")

    total_gb = 2 * n * 4 / 1e9
    th = Thresholds()
    res = compare_arrays(golden, target, th)
    ref = naive_metrics(golden, target)
    for k, v in ref.items():
        got = getattr(res, k)
        assert abs(got - v) <= 1e-9 * max(1.0, abs(v)), (k, got, v)

    t_ours = common.best_time(lambda: compare_arrays(golden, target, th), args.repeat)
    t_naive = common.best_time(lambda: naive_metrics(golden, target), args.repeat)
    print(f"compare_arrays : {t_ours:7.3f} s  {total_gb / t_ours:6.2f} GB/s")
    print(f"naive numpy    : {t_naive:7.3f} s  {total_gb / t_naive:6.2f} GB/s")
    print(f"speed-up       : {t_naive / t_ours:5.2f}x   (metrics agree to 1e-9)")
    if tmp is not None:
        del golden, target
        tmp.cleanup()


if __name__ == "__main__":
    main()
