"""One op by name in a big index: ``resolve_op`` by graph name and by file name, and the graph-link lookup.

    python benchmarks/bench_lookup.py [--ops 100000,1000000] [--workdir /tmp/dumpscope-bench] [--lookups 300]

The ops table is filled directly (a 1M-file tree takes 20-45 min to write; the lookups only read
``ops``): one rank, two steps, MindSpore-style names ``Default/net/block{k}/Conv2D-op{i}`` whose
file-side spelling (``_`` for ``/``) is the ``file_name``, ``joined`` = the graph name.

* baseline: the index as it was before issue 22 — single-column ``ops(name)`` / ``ops(file_name)``,
  no ``joined`` index, no ``ANALYZE`` statistics (SQLite then walks the whole ``(rank, step)``
  through ``ops_order``);
* now: ``OP_INDEXES`` and ``DumpIndex.analyze()``, exactly what a build leaves.

Figures: p50 / p95 / max per lookup over ``--lookups`` random ops (target: <= 2 ms), and the time
``analyze()`` adds to a build.  Printed as ``RESULT {json}`` lines.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

OLD = {"ops_name": "CREATE INDEX ops_name ON ops(name)",
       "ops_file_name": "CREATE INDEX ops_file_name ON ops(file_name)"}


def fill(idx, n: int) -> list[tuple[str, str, int]]:
    rows = []
    names = []
    per_step = n // 2
    for i in range(n):
        step = i // per_step
        name = f"Default/net/block{(i % per_step) // 50}/Conv2D-op{i}"
        file_name = name.replace("/", "_")
        rows.append((i + 1, 0, step, "0", name, file_name, "Conv2D", name.rsplit("/", 1)[0], i % per_step,
                     1700000000000000 + i, "mindspore", name, "name", 0, i + 1))
        names.append((name, file_name, step))
    with idx._lock:
        cur = idx.conn.cursor()
        cur.execute("BEGIN")
        cur.executemany("INSERT INTO ops(id, rank, step, graph, name, file_name, type, scope, exec_index, first_ts, "
                        "producer, joined, join_rule, graph_only, seq) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        cur.execute("COMMIT")
    return names


def timings(fn, items) -> list[float]:
    out = []
    for it in items:
        t0 = time.perf_counter()
        fn(it)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def summary(ms: list[float]) -> tuple[float, float, float]:
    ms = sorted(ms)
    return statistics.median(ms), ms[int(len(ms) * 0.95) - 1], ms[-1]


def measure(q, sample) -> dict[str, tuple[float, float, float]]:
    return {
        "name": summary(timings(lambda it: q.resolve_op(it[0], 0, it[2]), sample)),
        "file name": summary(timings(lambda it: q.resolve_op(it[1], 0, it[2]), sample)),
        "graph link": summary(timings(lambda it: q.find_by_graph_name(it[0], 0, it[2]), sample)),
    }


def run(n: int, workdir: Path, lookups: int) -> None:
    from dumpscope.core.index.dump_index import OP_INDEXES, DumpIndex
    from dumpscope.core.query import DumpQuery

    empty = workdir / "empty-dump"
    empty.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=workdir) as cache:
        idx = DumpIndex.open(str(empty), cache_directory=Path(cache), update=False)
        with idx._lock:
            DumpIndex._drop_indexes(idx.conn.cursor(), OP_INDEXES)
        t0 = time.perf_counter()
        names = fill(idx, n)
        print(f"{n:,} ops stored in {time.perf_counter() - t0:.1f} s", flush=True)
        rng = random.Random(22)
        sample = rng.sample(names, lookups)
        q = DumpQuery(idx)
        # baseline: the indexes before issue 22, no statistics
        with idx._lock:
            cur = idx.conn.cursor()
            DumpIndex._create_indexes(cur, {k: v for k, v in OP_INDEXES.items() if k in ("ops_order", "ops_scope")})
            DumpIndex._create_indexes(cur, OLD)
            cur.execute("DROP TABLE IF EXISTS sqlite_stat1")
        before = measure(q, sample[: max(20, lookups // 10)])  # a slow path: fewer lookups
        # now: what a build leaves
        with idx._lock:
            DumpIndex._create_indexes(idx.conn.cursor(), OP_INDEXES)
            DumpIndex._drop_indexes(idx.conn.cursor(), OLD)  # once per old cache, not per build: not timed
        t0 = time.perf_counter()
        idx.analyze()
        analyze_s = time.perf_counter() - t0
        now = measure(q, sample)
        left = {r[0] for r in idx.query("SELECT name FROM sqlite_master WHERE type='index' AND name LIKE 'ops_%'")}
        assert left == set(OP_INDEXES), left
        idx.close()
    for kind in ("name", "file name", "graph link"):
        p50, p95, worst = now[kind]
        b50 = before[kind][0]
        common.emit(f"lookup by {kind}, {n:,} ops (p50)", round(p50, 3), "ms", baseline=round(b50, 3),
                    ratio=round(b50 / p50, 1) if p50 else None, target="<= 2 ms", met=p95 <= 2.0,
                    note=f"p95 {p95:.3f} ms, max {worst:.3f} ms; baseline = no ANALYZE, single-column indexes")
    common.emit(f"ANALYZE after a build, {n:,} ops", round(analyze_s * 1000, 1), "ms",
                note="DumpIndex.analyze(): sampled statistics (analysis_limit) + PRAGMA optimize")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="100000,1000000", help="comma-separated op counts")
    ap.add_argument("--workdir", default=common.DEFAULT_WORKDIR)
    ap.add_argument("--lookups", type=int, default=300)
    args = ap.parse_args()
    common.print_machine()
    workdir = common.check_workdir(args.workdir)
    for n in (int(x) for x in args.ops.split(",")):
        run(n, workdir, args.lookups)


if __name__ == "__main__":
    main()
