"""The explorer opened cold again and again, with ``dumpscope summary`` of the same tree running beside
it on the same cache: every open must show the right op count (issue 30: the index damage check raced
the builder child's close, and the explorer deleted the index it had just built: "no dump found │ 0 ops").

    python benchmarks/check_cold_open_loop.py PATH [--times 50] [--cache-dir DIR]

Each round removes the index files, starts ``dumpscope summary PATH --json`` (a process of its own)
and opens the explorer headless at once as ``dumpscope PATH`` does (``prestart_build``: the index built
in a child), waits for the finished index and compares both op counts with a ``--no-cache`` summary's.
Prints one line per failure and a summary line; exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))


def _summary(path: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-I", "-m", "dumpscope", "summary", path, "--json", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def _open_once(path: str, cache: str) -> tuple[int, list[str]]:
    from test_tui_support import wait_ready

    from dumpscope.core.engines.child_jobs import prestart_build
    from dumpscope.tui.app import DumpscopeApp

    early = prestart_build(path, True, cache)
    app = DumpscopeApp(path, display_name="t", cache_dir=cache, early_build=early)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot, timeout=120)
        waited = 0.0
        while app.progress and waited < 120:
            await pilot.pause(0.05)
            waited += 0.05
        notes = [n.message for n in app._notifications if n.severity != "information"]
        return app.q.count_ops(), notes


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--times", type=int, default=50)
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args()
    path = os.path.abspath(args.path)
    want = json.loads(_summary(path, "--no-cache").communicate()[0])["ops"]
    cache = args.cache_dir or tempfile.mkdtemp(prefix="dumpscope-cold-")
    failures = 0
    started = time.monotonic()
    for i in range(args.times):
        shutil.rmtree(cache, ignore_errors=True)
        os.makedirs(cache)
        beside = _summary(path, "--cache-dir", cache)
        got, notes = asyncio.run(_open_once(path, cache))
        out, err = beside.communicate(timeout=300)
        other = json.loads(out)["ops"] if beside.returncode == 0 else None
        if got != want or other != want or notes or "damaged" in err:
            failures += 1
            print(f"round {i + 1}: explorer {got} ops, summary beside it {other}, want {want}; "
                  f"notes {notes}; summary stderr {err.strip()[-300:]!r}")
    print(f"{args.times} cold opens with summary beside: {args.times - failures} right ({want} ops), "
          f"{failures} wrong, {time.monotonic() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
