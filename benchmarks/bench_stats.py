"""Benchmark compute_stats against one numpy reduction pass (run by hand).

    python benchmarks/bench_stats.py [--mb 1024] [--dir /tmp] [--kinds float32,float64] [--reps 3] [--cli]

Writes a float32, float64, float16 and bfloat16 (uint16 bits) array of ``--mb`` MB each to temporary
files (``--kinds`` picks a subset), maps them with np.memmap, warms the page cache, then times the
baselines and ``compute_stats`` (best of ``--reps`` runs: the numbers are noisy on a shared box).
The first baseline, one ``np.add.reduce(x, dtype=float64)`` pass, is the reference for the ratio.
Reports GB/s, the ratio to the baseline, the numpy heap peak during compute_stats (tracemalloc;
memmapped pages are not heap) and the process peak RSS (which does include mapped file pages).

``compute_stats`` is timed three ways: in forked processes (``stats_workers()``: the cores, at most 4;
what ``dumpscope stats`` does: the process is single-threaded), on as many threads (what the explorer
does: a helper thread is kept alive during those runs, so forking is refused) and with
``DUMPSCOPE_WORKERS=1``.  ``cpu/wall`` says how much the workers really ran at once (a busy box gives
them no second core; children's CPU counted).  One ``RESULT`` line per dtype (target for
float32/float64: <= 2x one numpy pass, issue 21 Build 4) timing the default (process) path and naming
it, with the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import tempfile
import threading
import time
import tracemalloc
from typing import Iterator, Optional

import numpy as np

from dumpscope.core.tensors import stats as _stats
from dumpscope.core.tensors.stats import compute_stats, stats_workers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

_WIDTH = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}


def _fill(path: str, n: int, kind: str) -> None:
    rng = np.random.default_rng(0)
    if kind in ("float32", "float64"):
        mm = np.memmap(path, dtype=kind, mode="w+", shape=(n,))
        for i in range(0, n, 1 << 22):
            mm[i : i + (1 << 22)] = rng.standard_normal(min(1 << 22, n - i)) * 3
        mm[n // 2] = np.nan
        mm.flush()
        del mm
        return
    mm = np.memmap(path, dtype=np.uint16, mode="w+", shape=(n,))
    step = 1 << 22
    for i in range(0, n, step):
        v = rng.standard_normal(min(step, n - i), dtype=np.float32) * 3
        if kind == "float16":
            mm[i : i + v.size] = v.astype(np.float16).view(np.uint16)
        else:
            mm[i : i + v.size] = (v.view(np.uint32) >> 16).astype(np.uint16)
    mm[n // 2] = 0x7E00 if kind == "float16" else 0x7FC0  # one NaN
    mm.flush()
    del mm


def _bf16_decoded_reduce(bits: np.ndarray) -> float:
    total = 0.0
    for i in range(0, bits.size, 1 << 22):
        total += float(np.add.reduce((bits[i : i + (1 << 22)].astype(np.uint32) << 16).view(np.float32),
                                     dtype=np.float64))
    return total


@contextlib.contextmanager
def _workers_env(workers: Optional[str]) -> Iterator[None]:
    """``DUMPSCOPE_WORKERS=workers`` for the duration (None: leave the default)."""
    saved = os.environ.get("DUMPSCOPE_WORKERS")
    if workers is not None:
        os.environ["DUMPSCOPE_WORKERS"] = workers
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("DUMPSCOPE_WORKERS", None)
        else:
            os.environ["DUMPSCOPE_WORKERS"] = saved


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (the forked stats workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _pass_split(run, reps: int) -> tuple[float, float]:
    """Best-of-``reps`` wall seconds of the float engine's pass 1 (until the histogram is planned:
    ``_FloatAcc.hist_plan``, called in this process on every path) and pass 2 (the rest), from one
    instrumented run each."""
    real = _stats._FloatAcc.hist_plan
    seen: list[float] = []

    def timed(self, *a, **k):
        seen.append(time.perf_counter())
        return real(self, *a, **k)
    _stats._FloatAcc.hist_plan = timed
    try:
        rows = []
        for _ in range(reps):
            seen.clear()
            w = time.perf_counter()
            run()
            end = time.perf_counter()
            rows.append((seen[0] - w, end - seen[0]))
    finally:
        _stats._FloatAcc.hist_plan = real
    return min(r[0] for r in rows), min(r[1] for r in rows)


@contextlib.contextmanager
def _no_fork() -> Iterator[None]:
    """A second thread alive for the duration (as in the explorer): compute_stats takes its thread path."""
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait, daemon=True)
    helper.start()
    try:
        yield
    finally:
        stop.set()
        helper.join()


def _cli_row(d: str, raw: str, kind: str, n: int, gb: float, reps: int) -> None:
    """``dumpscope stats`` on the tensor as a MindSpore ``.npy`` (whole process, fresh index cache each
    run so no cached statistics), default workers and ``DUMPSCOPE_WORKERS=1``, against a whole-process
    floor: ``python -c`` that maps the ``.npy`` and runs one ``np.add.reduce(x, dtype=float64)``."""
    import subprocess
    import shutil

    leaf = os.path.join(d, f"cli_{kind}", "rank_0", "Net", "0", "0")
    os.makedirs(leaf, exist_ok=True)
    npy = os.path.join(leaf, f"MatMul.Default--MatMul-op1.0.0.1700000000000000.output.0.DefaultFormat.{kind}.npy")
    src = np.memmap(raw, dtype=kind, mode="r", shape=(n,))
    out = np.lib.format.open_memmap(npy, mode="w+", dtype=kind, shape=(n,))
    for i in range(0, n, 1 << 22):
        out[i : i + (1 << 22)] = src[i : i + (1 << 22)]
    out.flush()
    del out, src
    floor_code = (f"import numpy as np; x = np.load({npy!r}, mmap_mode='r'); "
                  "np.add.reduce(x.reshape(-1), dtype=np.float64)")
    floor = common.time_subprocess(floor_code, reps=reps)
    cli = [sys.executable, "-c", "import sys; from dumpscope.tui.cli.entry import main; sys.exit(main())",
           "stats", os.path.join(d, f"cli_{kind}"), "Default--MatMul-op1", "--io", "output", "--slot", "0",
           "--json", "--no-cache"]
    timed = {}
    for label, workers in (("default workers", None), ("DUMPSCOPE_WORKERS=1", "1")):
        env = dict(os.environ)
        env.pop("DUMPSCOPE_WORKERS", None)
        if workers:
            env["DUMPSCOPE_WORKERS"] = workers
        timed[label] = common.best_time(
            lambda: subprocess.run(cli, check=True, env=env, stdout=subprocess.DEVNULL), reps)
    shutil.rmtree(os.path.join(d, f"cli_{kind}"), ignore_errors=True)
    for label, t in timed.items():
        print(f"  {'dumpscope stats (.npy), ' + label:40s} {t:7.3f} s  vs floor {floor:.3f} s: {t / floor:.2f}x")
    t = timed["default workers"]
    common.emit(f"dumpscope stats {kind}, {gb:.2f} GB .npy, whole process", round(t, 3), "s",
                baseline=f"{floor:.3f} s (python -c: np.load mmap + one np.add.reduce pass)",
                ratio=round(t / floor, 2), target="", met=None,
                note=", ".join(f"{k} {v:.3f} s" for k, v in timed.items()) + f"; load {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024, help="size of each test array in MB")
    ap.add_argument("--dir", default=None, help="where to put the temporary files")
    ap.add_argument("--kinds", default="float32,float64,float16,bfloat16", help="comma-separated dtypes")
    ap.add_argument("--reps", type=int, default=5, help="runs per timing (best is reported)")
    ap.add_argument("--cli", action="store_true",
                    help="also time `dumpscope stats` whole-process on the float32/float64 tensors saved as .npy")
    args = ap.parse_args()
    summary = []
    common.print_machine()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for kind in args.kinds.split(","):
            n = args.mb * (1 << 20) // _WIDTH[kind]
            gb = n * _WIDTH[kind] / 1e9
            path = os.path.join(d, f"{kind}.bin")
            _fill(path, n, kind)
            if kind in ("float32", "float64"):
                x = np.memmap(path, dtype=kind, mode="r", shape=(n,))
                baselines = {"np.add.reduce(x, dtype=float64)": lambda: np.add.reduce(x, dtype=np.float64),
                             "x.min() + x.max()": lambda: (x.min(), x.max())}
                run = lambda: compute_stats(x)  # noqa: E731
            elif kind == "float16":
                x = np.memmap(path, dtype=np.float16, mode="r", shape=(n,))
                baselines = {"np.add.reduce(x, dtype=float64)": lambda: np.add.reduce(x, dtype=np.float64),
                             "x.sum()": lambda: x.sum()}
                run = lambda: compute_stats(x)  # noqa: E731
            else:
                x = np.memmap(path, dtype=np.uint16, mode="r", shape=(n,))
                baselines = {"np.add.reduce(bits, dtype=float64)": lambda: np.add.reduce(x, dtype=np.float64),
                             "decode<<16 + reduce, chunked": lambda: _bf16_decoded_reduce(x)}
                run = lambda: compute_stats(x, dtype="bfloat16")  # noqa: E731
            np.add.reduce(x, dtype=np.float64)  # warm the page cache
            print(f"\n{kind}: {n:,} elements, {gb:.2f} GB (memmap, warm page cache)")
            times = {}
            for name, fn in baselines.items():
                times[name] = common.best_time(fn, args.reps)
                print(f"  {name:40s} {times[name]:7.3f} s  {gb / times[name]:6.2f} GB/s")
            tracemalloc.start()  # one traced run for the heap peak, then untraced timings
            run()
            heap_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            first = next(iter(times.values()))
            timed = {}
            floats = kind in ("float32", "float64")
            ways = [(f"{stats_workers()} processes", None, contextlib.nullcontext),
                    (f"{stats_workers()} threads", None, _no_fork), ("1 thread", "1", contextlib.nullcontext)]
            if not floats or stats_workers() == 1:  # only the float engine forks / uses threads
                ways = [("default", None, contextlib.nullcontext)]
            for label, workers, guard in ways:
                with _workers_env(workers), guard():
                    c0 = _cpu()
                    t = common.best_time(run, args.reps)
                    cpu = (_cpu() - c0) / max(1, args.reps)
                    split = _pass_split(run, args.reps) if floats else None
                timed[label] = t
                print(f"  {'compute_stats, ' + label:40s} {t:7.3f} s  {gb / t:6.2f} GB/s  ratio vs first baseline "
                      f"{t / first:.2f}x, vs best {t / min(times.values()):.2f}x  (cpu/wall ~{cpu / t:.1f})")
                if split is not None:
                    p1w, p2w = split
                    print(f"  {'  pass 1 (moments) / pass 2 (histogram)':40s} wall {p1w:.3f} / {p2w:.3f} s "
                          f"({p1w / first:.2f}x / {p2w / first:.2f}x)")
            st = run()
            way = next(iter(timed))  # the default path: processes (the dumpscope CLI) for float32/float64
            t = timed[way]
            print(f"  numpy heap peak during compute_stats: {heap_peak / 2**20:.1f} MB; "
                  f"nan={st.nan} mean={st.mean:.6f} std={st.std:.6f} log_hist={st.hist_log}")
            summary.append((kind, first, t))
            target = kind in ("float32", "float64")
            common.emit(f"stats {kind}, {gb:.2f} GB memmap (compute_stats, {way}, full statistics + exact histogram)",
                        round(t, 3), "s", baseline=f"{first:.3f} s ({next(iter(times))}, one pass)",
                        ratio=round(t / first, 2), target="<= 2x one numpy pass" if target else "",
                        met=(t / first <= 2.0) if target else None,
                        note=", ".join(f"{k} {v:.3f} s" for k, v in timed.items())
                        + f"; numpy heap peak {heap_peak / 2**20:.1f} MB; load {os.getloadavg()[0]:.1f}")
            del x
            if args.cli and kind in ("float32", "float64"):
                _cli_row(d, path, kind, n, gb, args.reps)
    print("\nsummary (best of %d): dtype, one np.add.reduce pass, compute_stats, ratio" % args.reps)
    for kind, first, t in summary:
        print(f"  {kind:9s} {first:7.3f} s  {t:7.3f} s  {t / first:5.2f}x")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"\npeak RSS (incl. mapped file pages): {rss / 1024:.0f} MB; load average at the end "
          f"{os.getloadavg()}")


if __name__ == "__main__":
    main()
