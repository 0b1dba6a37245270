#!/usr/bin/env python3
"""Install the lowest versions pyproject.toml allows into a throwaway venv and run the test suite there.

    python3.11 tools/check_floors.py [--python python3.10] [--venv /tmp/dumpscope-floors] [-- PYTEST ARGS]

Every ``name>=X`` of ``dependencies`` and of the ``test``, ``serve`` and ``xlsx`` extras becomes
``name==X`` (environment markers are kept), then ``pip install -e . --no-deps`` and ``pytest``.
A floor that does not install, or a suite that fails there, means the floor is wrong.
Needs the package registry (pip); run it by hand, not in CI.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def floors() -> list[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in ("test", "serve", "xlsx"):
        reqs += project["optional-dependencies"].get(extra, [])
    pins = []
    for req in reqs:
        spec, _, marker = req.partition(";")
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-\[\]]+)\s*>=\s*([^,\s]+)\s*", spec)
        if not m:
            raise SystemExit(f"pyproject.toml: {req!r} has no plain '>=' floor")
        pins.append(f"{m.group(1)}=={m.group(2)}" + (f"; {marker.strip()}" if marker else ""))
    return pins


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default="python3.10", help="interpreter of the venv (the lowest Python supported)")
    ap.add_argument("--venv", default="/tmp/dumpscope-floors")
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()
    venv = Path(args.venv)
    pins = floors()
    print("floors:", *pins, sep="\n  ")
    subprocess.run([args.python, "-m", "venv", "--clear", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", *pins], check=True)
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)], check=True)
    return subprocess.run([str(venv / "bin" / "pytest"), "-q", "-p", "no:cacheprovider", *args.pytest_args],
                          cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
