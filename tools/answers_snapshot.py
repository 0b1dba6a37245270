"""Every answer dumpscope gives on the real dumps in tests/data (and ../shared/real_dumps), as one JSON file.

Used to prove a refactoring changed nothing (issue 32): run it before and after, on the same machine,
and diff the two files::

    python tools/answers_snapshot.py --out before.json      # on the old commit
    python tools/answers_snapshot.py --out after.json       # on the new one
    python tools/answers_snapshot.py --diff before.json after.json

For every dump folder in every tarball it records ``summary``, ``ops`` and ``overflow --json``; for
every folder beside one whose name holds ``golden`` it records ``compare --json`` against it.  Dumps are
unpacked to ``--work`` and that folder is written ``<work>`` in the answers, so runs made in different
folders (several worktrees at once) compare; keys that hold times are dropped.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TIME_KEYS = {"elapsed", "elapsed_s", "seconds", "wall_s", "took_s", "cpu_s", "built_at", "indexed_at"}


#: the ``--work`` folder of this run, as it appears in the answers' paths
_WORK = ""


def _clean(doc):
    if isinstance(doc, dict):
        return {_clean(k): _clean(v) for k, v in doc.items() if k not in TIME_KEYS}
    if isinstance(doc, list):
        return [_clean(v) for v in doc]
    if isinstance(doc, str) and _WORK and _WORK in doc:
        return doc.replace(_WORK, "<work>")
    return doc


def _run(args: list[str], cache: Path) -> object:
    env = {"DUMPSCOPE_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(cache), "NO_COLOR": "1"}
    p = subprocess.run([sys.executable, "-m", "dumpscope", *args], capture_output=True, text=True, env=env,
                       timeout=600)
    try:
        out: object = json.loads(p.stdout)
    except ValueError:
        out = {"stdout": p.stdout[-2000:]}
    return {"rc": p.returncode, "out": _clean(out), "stderr": _clean(p.stderr.strip().splitlines()[-3:])}


def _dump_dirs(root: Path) -> list[Path]:
    """Folders one and two levels down that hold files (each tarball's dumps sit there)."""
    found = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        found.append(d)
        found.extend(sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith(("rank", "step"))))
    return found


def tarballs(shared: Path) -> list[Path]:
    """The real dumps kept with the tests, then the shared ones when that folder exists."""
    return sorted((REPO / "tests" / "data").glob("*.tar.gz")) + sorted((shared / "real_dumps").glob("*.tar.gz"))


def snapshot(work: Path, tars: list[Path]) -> dict:
    global _WORK
    _WORK = str(work.resolve())
    answers: dict[str, object] = {}
    if work.exists():
        shutil.rmtree(work)
    cache = work / "cache"
    cache.mkdir(parents=True)
    for tar in tars:
        dest = work / tar.name.replace(".tar.gz", "")
        dest.mkdir()
        with tarfile.open(tar) as t:
            t.extractall(dest, filter="data")
        for d in _dump_dirs(dest):
            key = str(d.relative_to(work))
            for cmd in ("summary", "ops", "overflow"):
                answers[f"{cmd} {key}"] = _run([cmd, str(d), "--json"], cache)
            goldens = [g for g in d.parent.iterdir() if g.is_dir() and "golden" in g.name and g != d]
            for g in goldens:
                answers[f"compare {g.relative_to(work)} {key}"] = _run(["compare", str(g), str(d), "--json"], cache)
        print(tar.name, file=sys.stderr)
    return answers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--work", type=Path, default=Path("/tmp/dumpscope-answers"))
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared", help="the shared folder (its real_dumps/)")
    ap.add_argument("--diff", nargs=2, type=Path)
    a = ap.parse_args()
    if a.diff:
        x, y = (json.loads(p.read_text()) for p in a.diff)
        bad = [k for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
        for k in bad:
            print("differs:", k)
        print(f"{len(x)} answers before, {len(y)} after, {len(bad)} differ")
        return 1 if bad else 0
    a.out.write_text(json.dumps(snapshot(a.work, tarballs(a.shared)), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
