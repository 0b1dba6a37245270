"""Run every dumpscope benchmark and print one markdown table (run by hand, not in CI).

    python benchmarks/run_all.py --quick      # 10k-file trees, 10k-op TUI, 256 MB tensors: a few minutes
    python benchmarks/run_all.py --full       # 100k-file index, 1M-file memory, 100k-op TUI, 1 GB tensors
    python benchmarks/run_all.py --quick --index-files 100000 --only index   # one figure at another size

Each benchmark runs in its own subprocess; its figures are collected as JSON lines (``RESULT {...}``
from bench_index/bench_memory, parsed from the text of the others) and written to
``{workdir}/results-{mode}.jsonl``.  The table has metric, value, baseline, ratio, target and met?;
machine info (CPU, cores, RAM, load average, python/numpy) is printed above it.  Synthetic trees
live under ``--workdir`` (default /tmp/dumpscope-bench) and are reused between runs.

Troubleshooter: ``--ts-python`` names a python in which ``troubleshooter`` is installed (default
``/tmp/ts-venv/bin/python``; never the system python).  When it works, compare throughput is
measured against Troubleshooter's ``compare_npy_dir`` (what ``api_dump_compare`` runs per API) on the
same ``.npy`` pairs; otherwise against a straightforward numpy implementation (bench_compare.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402

SIZES = {
    "quick": {"index_files": 10_000, "memory_files": 10_000, "tui_ops": 10_000, "mb": 256, "graph_ops": 10_000},
    "full": {"index_files": 100_000, "memory_files": 1_000_000, "tui_ops": 100_000, "mb": 1024,
             "graph_ops": 50_000},
}
BENCHES = ("index", "memory", "stats", "compare", "troubleshooter", "tui", "graph", "overflow", "tuicold", "triage")


ENV: Optional[dict] = None  # set in main(): byte-code caching on (see common.bytecode_env)


def run(cmd: list[str], timeout: float) -> tuple[int, str, str, float]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(HERE), env=ENV)
        return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return -1, out, f"timed out after {timeout:.0f} s", time.perf_counter() - t0


def failed(name: str, rc: int, err: str) -> dict:
    tail = " ".join(err.strip().splitlines()[-2:])[:200] if err else ""
    return common.emit(f"{name}: FAILED/MISSING", None, note=f"rc={rc} {tail}")


def _num(pattern: str, text: str) -> Optional[float]:
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


# --------------------------------------------------------------------------------------- benchmarks


def bench_index(sz: dict, args) -> list[dict]:
    rc, out, err, _ = run([sys.executable, "bench_index.py", "--files", str(sz["index_files"]), "--workdir",
                           args.workdir, "--reps", str(args.reps)], args.timeout)
    res = common.parse_results(out)
    return res if rc == 0 and res else res + [failed("bench_index", rc, err)]


def bench_overflow(sz: dict, args) -> list[dict]:
    ops = "50" if sz["index_files"] >= 100_000 else "10"
    rc, out, err, _ = run([sys.executable, "bench_overflow.py", "--files", str(sz["index_files"]), "--workdir",
                           args.workdir, "--reps", str(args.reps), "--ops", ops], args.timeout)
    res = common.parse_results(out)
    return res if rc == 0 and res else res + [failed("bench_overflow", rc, err)]


def bench_triage(sz: dict, args) -> list[dict]:
    ops = "50" if sz["index_files"] >= 100_000 else "10"
    rc, out, err, _ = run([sys.executable, "bench_triage.py", "--files", str(sz["index_files"]), "--workdir",
                           args.workdir, "--reps", str(args.reps), "--ops", ops], args.timeout)
    res = common.parse_results(out)
    return res if rc == 0 and res else res + [failed("bench_triage", rc, err)]


def bench_tuicold(sz: dict, args) -> list[dict]:
    rc, out, err, _ = run([sys.executable, "bench_tui_cold.py", "--files", str(sz["index_files"]), "--workdir",
                           args.workdir, "--reps", str(args.reps)], args.timeout)
    res = common.parse_results(out)
    return res if rc == 0 and res else res + [failed("bench_tui_cold", rc, err)]


def bench_memory(sz: dict, args) -> list[dict]:
    rc, out, err, _ = run([sys.executable, "bench_memory.py", "--files", str(sz["memory_files"]), "--workdir",
                           args.workdir], args.timeout)
    res = common.parse_results(out)
    return res if rc == 0 and res else res + [failed("bench_memory", rc, err)]


def bench_stats(sz: dict, args) -> list[dict]:
    rc, out, err, _ = run([sys.executable, "bench_stats.py", "--mb", str(sz["mb"]), "--dir", args.workdir],
                          args.timeout)
    if rc != 0:
        return [failed("bench_stats", rc, err)]
    res = []
    gb = None
    for block in re.split(r"\n(?=(?:float16|bfloat16): )", out):
        m = re.match(r"(float16|bfloat16): ([\d,]+) elements, ([\d.]+) GB", block)
        if not m:
            continue
        kind, gb = m.group(1), float(m.group(3))
        # baselines: (label, seconds, GB/s); numpy cannot reduce bf16 without decoding it, so for bf16
        # the "one numpy pass" is the decode<<16 + reduce line (the raw-bits reduce is reported in the note)
        bases = re.findall(r"^  (.+?)\s+([\d.]+) s\s+([\d.]+) GB/s$", block, re.M)
        ours = re.search(r"^  compute_stats\s+([\d.]+) s\s+([\d.]+) GB/s", block, re.M)
        heap = _num(r"heap peak during compute_stats: ([\d.]+) MB", block)
        if not (bases and ours):
            res.append(failed(f"bench_stats {kind}", rc, block))
            continue
        pick = [b for b in bases if "decode" in b[0]] if kind == "bfloat16" else []
        label, bt, bgbs = (pick or bases)[0]
        others = "; ".join(f"vs {lb.strip()}: {float(ours.group(1)) / float(t):.2f}x" for lb, t, _ in bases
                           if lb != label)
        ratio = round(float(ours.group(1)) / float(bt), 2)
        bounded = heap is not None and heap <= max(64.0, 0.1 * gb * 1000)
        res.append(common.emit(
            f"full stats, {gb:.2f} GB {kind} memmap (compute_stats)", float(ours.group(2)), "GB/s",
            baseline=f"{float(bgbs):.2f} GB/s ({label.strip()}, one pass)", ratio=ratio,
            target="<= 3x one numpy pass, memory bounded", met=ratio <= 3.0 and bounded,
            note=f"{float(ours.group(1)):.2f} s vs {float(bt):.2f} s; numpy heap peak {heap} MB "
                 f"(bounded = <= max(64 MB, 10% of tensor)); ratio = time / baseline time; {others}"))
    rss = _num(r"peak RSS \(incl\. mapped file pages\): ([\d.]+) MB", out)
    if rss is not None:
        res.append(common.emit("peak RSS of bench_stats process (incl. mapped pages)", rss, "MB",
                               note=f"tensors of {gb} GB each are memmapped, so mapped pages count here"))
    return res


def bench_compare(sz: dict, args) -> list[dict]:
    rc, out, err, _ = run([sys.executable, "bench_compare.py", "--mb", str(sz["mb"]), "--repeat", "2"], args.timeout)
    ours = _num(r"compare_arrays\s*:\s*[\d.]+ s\s+([\d.]+) GB/s", out)
    naive = _num(r"naive numpy\s*:\s*[\d.]+ s\s+([\d.]+) GB/s", out)
    if rc != 0 or ours is None or naive is None:
        return [failed("bench_compare", rc, err)]
    r = ours / naive
    return [common.emit(f"compare throughput, 2 x {sz['mb']} MB fp32 in RAM (compare_arrays)", ours, "GB/s",
                        baseline=f"{naive:.2f} GB/s (straightforward numpy, same metrics)", ratio=round(r, 2),
                        target=">= 2x baseline", met=r >= 2.0,
                        note="ratio = our throughput / baseline throughput; metrics agree to 1e-9")]


_TS_CODE = r"""
import io, json, os, sys, time, contextlib
from troubleshooter.migrator.diff_handler import compare_npy_dir
od, td, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
best = float("inf")
for _ in range(reps):
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        compare_npy_dir(od, td, 1e-4, 1e-4, num_processes=1, output_file=os.devnull)
    best = min(best, time.perf_counter() - t0)
import numpy, troubleshooter
print(json.dumps({"seconds": best, "numpy": numpy.__version__,
                  "version": getattr(troubleshooter, "__version__", "?")}))
"""


def bench_troubleshooter(sz: dict, args) -> list[dict]:
    """Troubleshooter compare_npy_dir vs compare_arrays on the same 4 .npy pairs (one process each)."""
    import numpy as np

    ts_py = args.ts_python
    if not ts_py or not os.path.exists(ts_py):
        return [common.emit("compare vs Troubleshooter", None, note=f"not measured: no troubleshooter python "
                            f"at {ts_py!r} (create a throwaway venv, see README)")]
    probe = subprocess.run([ts_py, "-c", "import troubleshooter.migrator.diff_handler"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        return [common.emit("compare vs Troubleshooter", None, note="not measured: troubleshooter does not import: "
                            + probe.stderr.strip().splitlines()[-1][:150])]
    from dumpscope.core.engines.compare import Thresholds, compare_arrays

    root = common.check_workdir(args.workdir) / f"npypairs{sz['mb']}"
    od, td = root / "golden", root / "target"
    n_pairs = 4
    n = sz["mb"] * (1 << 20) // 4 // n_pairs
    marker = root / ".complete"
    if not marker.exists():
        od.mkdir(parents=True, exist_ok=True)
        td.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        for i in range(n_pairs):
            g = rng.standard_normal(n, dtype=np.float32)
            t = g + rng.standard_normal(n, dtype=np.float32) * np.float32(1e-3)
            np.save(od / f"Functional_linear_{i}_forward_output.npy", g)
            np.save(td / f"Functional_linear_{i}_forward_output.npy", t)
        marker.write_text("ok")
    names = sorted(p.name for p in od.glob("*.npy"))
    total_gb = 2 * n_pairs * n * 4 / 1e9
    th = Thresholds(rtol=1e-4, atol=1e-4)

    def ours() -> None:
        for name in names:
            compare_arrays(np.load(od / name, mmap_mode="r"), np.load(td / name, mmap_mode="r"), th)

    ours()  # warm the page cache
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        ours()
        best = min(best, time.perf_counter() - t0)
    p = subprocess.run([ts_py, "-c", _TS_CODE, str(od), str(td), "2"], capture_output=True, text=True,
                       timeout=args.timeout, env=ENV)
    if p.returncode != 0:
        return [common.emit("compare vs Troubleshooter", None, note="Troubleshooter run failed: "
                            + (p.stderr.strip().splitlines() or ["?"])[-1][:150])]
    ts = json.loads(p.stdout.strip().splitlines()[-1])
    ours_gbs, ts_gbs = total_gb / best, total_gb / ts["seconds"]
    r = ours_gbs / ts_gbs
    return [common.emit(f"compare throughput vs Troubleshooter, {n_pairs} .npy pairs, 2 x {sz['mb']} MB fp32",
                        round(ours_gbs, 2), "GB/s",
                        baseline=f"{ts_gbs:.2f} GB/s (troubleshooter {ts['version']} compare_npy_dir, "
                                 f"numpy {ts['numpy']})", ratio=round(r, 2), target=">= 2x Troubleshooter",
                        met=r >= 2.0,
                        note="both single-process, warm page cache, load included; ours computes cosine, "
                             "euclid, max abs/rel, 1e-3/5e-3 ratios, allclose, NaN/Inf; TS: allclose ratio, "
                             "cosine, mean/max diff")]


def bench_tui(sz: dict, args) -> list[dict]:
    script = HERE / "bench_tui.py"
    if not script.exists():
        return [common.emit("TUI first paint / key latency: MISSING", None, note="benchmarks/bench_tui.py absent")]
    ops = sz["tui_ops"]
    rc, out, err, _ = run([sys.executable, "bench_tui.py", "--ops", str(ops), "--dir", args.workdir,
                           "--keys", "200"], args.timeout)
    vals = {}
    for line in out.splitlines():
        m = re.match(r"^(\w+)\s+([-\d.]+)$", line.strip())
        if m:
            vals[m.group(1)] = float(m.group(2))
    if rc != 0 or "first_screen_with_ops_s" not in vals:
        return [failed("bench_tui", rc, err)]
    res = []
    warm_open = _num(r"index open \(warm\): ([\d.]+)s", out)
    scale = "" if ops >= 100_000 else f" (target is at 100k ops; this run: {ops:,})"
    res.append(common.emit(f"TUI first paint with ops, {ops:,}-op tree, warm index", vals["first_screen_with_ops_s"],
                           "s", baseline=f"{warm_open:.2f} s (warm open_query alone)" if warm_open else None,
                           target="<= 1.5 s" + scale, met=vals["first_screen_with_ops_s"] <= 1.5,
                           note=f"layout painted after {vals.get('first_paint_layout_s', float('nan')):.3f} s; "
                                "headless Pilot, 120x40"))
    for key in ("down", "pagedown"):
        p95 = vals.get(f"{key}_ms_p95")
        if p95 is None:
            continue
        res.append(common.emit(f"TUI key-to-paint `{key}` p95 ({ops:,} ops)", round(p95, 1), "ms",
                               baseline=f"p50 {vals.get(f'{key}_ms_p50', float('nan')):.1f} ms",
                               target="p95 <= 50 ms" + scale, met=p95 <= 50))
    if "end_ms" in vals:
        res.append(common.emit(f"TUI `end` (jump to last op, {ops:,} ops)", round(vals["end_ms"], 1), "ms"))
    return res


def bench_graph(sz: dict, args) -> list[dict]:
    if not (HERE / "bench_graph_parse.py").exists():
        return [common.emit("GE graph parse: MISSING", None)]
    rc, out, err, _ = run([sys.executable, "bench_graph_parse.py", "--ops", str(sz["graph_ops"]), "--dir",
                           args.workdir], args.timeout)
    rate = _num(r"([\d,.]+)\s*ops/s", out.replace(",", ""))
    if rc != 0 or rate is None:
        return [failed("bench_graph_parse", rc, err)]
    mb = _num(r"([\d.]+)\s*MB", out)
    return [common.emit(f"GE graph text parse, {sz['graph_ops']:,} ops", round(rate), "ops/s",
                        note=f"file {mb} MB" if mb else "")]


# ------------------------------------------------------------------------------------------ table


def fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(results: list[dict]) -> str:
    rows = ["| metric | value | baseline | ratio | target | met? |", "|---|---|---|---|---|---|"]
    for r in results:
        val = fmt(r.get("value")) + (f" {r['unit']}" if r.get("unit") and r.get("value") is not None else "")
        met = {True: "yes", False: "**no**", None: ""}[r.get("met")]
        ratio = f"{r['ratio']}x" if r.get("ratio") is not None else ""
        rows.append(f"| {r['metric']} | {val} | {fmt(r.get('baseline')) if r.get('baseline') else ''} | {ratio} "
                    f"| {r.get('target') or ''} | {met} |")
    notes = [f"- {r['metric']}: {r['note']}" for r in results if r.get("note")]
    return "\n".join(rows) + ("\n\nNotes:\n" + "\n".join(notes) if notes else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="10k files, 256 MB tensors (default)")
    mode.add_argument("--full", action="store_true", help="100k/1M files, 1 GB tensors")
    ap.add_argument("--workdir", default=common.DEFAULT_WORKDIR)
    ap.add_argument("--only", default=",".join(BENCHES), help=f"comma list of {', '.join(BENCHES)}")
    ap.add_argument("--index-files", type=int, help="override the cold-index tree size")
    ap.add_argument("--memory-files", type=int, help="override the memory-benchmark tree size")
    ap.add_argument("--tui-ops", type=int, help="override the TUI tree size")
    ap.add_argument("--mb", type=int, help="override the tensor size for stats/compare")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=3600, help="per benchmark, seconds")
    ap.add_argument("--ts-python", default="/tmp/ts-venv/bin/python",
                    help="python with troubleshooter installed (throwaway venv)")
    args = ap.parse_args()
    mode_name = "full" if args.full else "quick"
    sz = dict(SIZES[mode_name])
    for k in ("index_files", "memory_files", "tui_ops", "mb"):
        if getattr(args, k) is not None:
            sz[k] = getattr(args, k)
    common.check_workdir(args.workdir)
    global ENV
    ENV = common.bytecode_env(args.workdir)
    info_before = common.machine_info()
    print(f"mode={mode_name} sizes={json.dumps(sz)} workdir={args.workdir}", flush=True)
    results: list[dict] = []
    t_all = time.perf_counter()
    fns = {"index": bench_index, "memory": bench_memory, "stats": bench_stats, "compare": bench_compare,
           "troubleshooter": bench_troubleshooter, "tui": bench_tui, "graph": bench_graph,
           "overflow": bench_overflow, "tuicold": bench_tuicold, "triage": bench_triage}
    for name in [b.strip() for b in args.only.split(",") if b.strip()]:
        t0 = time.perf_counter()
        print(f"--- {name} ...", file=sys.stderr, flush=True)
        try:
            results += fns[name](sz, args)
        except Exception as exc:  # one broken benchmark must not lose the others' figures
            results.append(common.emit(f"{name}: FAILED", None, note=f"{type(exc).__name__}: {exc}"[:200]))
        print(f"--- {name} done in {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    info = common.machine_info()
    out = Path(args.workdir) / f"results-{mode_name}.jsonl"
    with open(out, "w") as fh:
        fh.write(json.dumps({"machine": info, "load_avg_at_start": info_before["load_avg"], "mode": mode_name,
                             "sizes": sz}) + "\n")
        for r in results:
            fh.write(json.dumps(r) + "\n")
    loaded = max(info_before["load_avg"][0], info["load_avg"][0]) > 1
    print()
    print(f"Machine: {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable), {info['ram_gb']} GB RAM, "
          f"python {info['python']}, numpy {info['numpy']}, {info['platform']}")
    print(f"Load average (1/5/15 min): at start {info_before['load_avg']}, at end {info['load_avg']}"
          + (" — the machine was shared/loaded during this run; absolute figures are pessimistic, "
             "same-run ratios are the meaningful ones" if loaded else ""))
    print(f"Mode: {mode_name} {json.dumps(sz)}; total {time.perf_counter() - t_all:.0f} s; JSON lines: {out}\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
