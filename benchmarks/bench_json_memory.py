"""Peak RSS of indexing one big msprobe ``dump.json`` (issue 20; run by hand).

    python benchmarks/bench_json_memory.py [--mb 100] [--workdir /tmp/dumpscope-bench]

Writes ``{workdir}/msprobe_json{mb}/step0/rank0/dump.json`` (``tests/synth/faults.write_msprobe_json``:
msprobe 26 ``mix`` statistics entries, indent 1, about 800 bytes an entry) and runs
``dumpscope summary PATH --json`` in a fresh subprocess on a fresh cache dir; the peak is the summed
RSS of the whole process tree (pool workers included), sampled from ``/proc`` every 0.2 s, and the
child's own ``ru_maxrss``.  Baselines, same run: the child after importing the CLI only, and a
child that only ``json.load``\\ s the file (the whole-file parse the layout used before).
A second row measures the layout alone (``MsprobeLayout.scan_dir``, items consumed one by one):
what the streamed reader holds.  Target: <= 200 MB peak for a 100 MB file.
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
from bench_memory import run_sampled  # noqa: E402

_CHILD = r"""
import contextlib, io, json, resource, sys, time
from dumpscope.tui.cli import entry as cli
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
if sys.argv[1] == "json.load":
    with open(sys.argv[2], encoding="utf-8") as fh:
        n = len(json.load(fh)["data"])
elif sys.argv[1] == "summary":
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["summary", sys.argv[2], "--json"])
    doc = json.loads(out.getvalue())
    n = doc["ops"] if isinstance(doc.get("ops"), int) else doc
elif sys.argv[1] == "scan":  # the layout alone, its items consumed one by one
    import os
    from dumpscope.core.layouts.base import DirListing
    from dumpscope.core.layouts.msprobe import MsprobeLayout
    d = os.path.dirname(sys.argv[2])
    listing = DirListing(d, d, (), sorted(os.listdir(d)), [])
    n = sum(1 for _ in MsprobeLayout().scan_dir(listing))
else:
    n = 0
print(json.dumps({"base_kb": base, "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "n": n,
                  "seconds": time.perf_counter() - t0}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--workdir", default=common.DEFAULT_WORKDIR)
    args = ap.parse_args()
    common.print_machine()
    work = common.check_workdir(args.workdir)
    root = work / f"msprobe_json{args.mb}"
    dump = root / "step0" / "rank0" / "dump.json"
    if not (root / ".complete").exists():
        from synth.faults import write_msprobe_json

        dump.parent.mkdir(parents=True, exist_ok=True)
        write_msprobe_json(dump, min_bytes=args.mb << 20)
        (root / ".complete").write_text("ok")
    size_mb = dump.stat().st_size / 2 ** 20
    cache = Path(tempfile.mkdtemp(prefix="jsoncache-", dir=work))
    env = common.fresh_cache_env(cache)
    try:
        def child(*argv: str) -> tuple[dict, int]:
            out, tree_kb, _ = run_sampled([sys.executable, "-c", _CHILD, *argv], env=env)
            return json.loads(out), tree_kb

        base, _ = child("import-only", "")
        whole, whole_tree = child("json.load", str(dump))
        scan, _ = child("scan", str(dump))
        common.emit(f"peak RSS, msprobe layout reading one {size_mb:.0f} MB dump.json (records consumed one by one)",
                    round(scan["self_kb"] / 1024), "MB", baseline=f"{whole['self_kb'] / 1024:.0f} MB (json.load of the file)",
                    ratio=round(scan["self_kb"] / whole["self_kb"], 2), target="<= 200 MB at 100 MB",
                    met=scan["self_kb"] / 1024 <= 200 if args.mb >= 100 else None,
                    note=f"{scan['n']:,} items in {scan['seconds']:.1f} s; after CLI import {base['self_kb'] / 1024:.0f} MB")
        t0 = time.perf_counter()
        summ, tree_kb = child("summary", str(root))
        wall = time.perf_counter() - t0
        base_mb = base["self_kb"] / 1024
        peak_mb = max(tree_kb, summ["self_kb"]) / 1024
        common.emit(f"peak RSS, cold `summary` of one {size_mb:.0f} MB msprobe dump.json (process tree)",
                    round(peak_mb), "MB", baseline=f"{whole['self_kb'] / 1024:.0f} MB (json.load of the file)",
                    ratio=round(peak_mb / (whole["self_kb"] / 1024), 2),
                    target="<= 200 MB at 100 MB", met=peak_mb <= 200 if args.mb >= 100 else None,
                    note=f"child ru_maxrss {summ['self_kb'] / 1024:.0f} MB, after CLI import {base_mb:.0f} MB; "
                         f"{summ['n']} ops; summary {summ['seconds']:.1f} s (wall {wall:.1f} s); "
                         f"json.load alone {whole['seconds']:.1f} s")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
