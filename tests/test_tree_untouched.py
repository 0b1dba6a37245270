"""dumpscope never writes inside a dump tree: every command (and every refused export) leaves the
content, mtime and listing of every file and folder under the tree exactly as it was."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from synth.faults import HOSTILE_NAMES, write_fault_corpus, write_hostile_tree
from dumpscope.tui.cli.entry import main

from test_inert_cli import hostile_runs


def snapshot(root: Path) -> dict[str, tuple]:
    """path -> (kind, size, mtime_ns, content hash) of everything below ``root`` (symlinks not followed)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if os.path.islink(p):
                out[p] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[p] = ("dir", st.st_mtime_ns)
            else:
                with open(p, "rb") as fh:
                    out[p] = ("file", st.st_size, st.st_mtime_ns, hashlib.sha1(fh.read()).hexdigest())
    out[str(root)] = ("dir", os.lstat(root).st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("untouched")
    write_fault_corpus(base / "corpus")
    write_hostile_tree(base / "hostile")
    return base


def test_no_command_writes_inside_the_dump_tree(trees, tmp_path, capsys, monkeypatch):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    before = snapshot(trees)
    runs = []
    for tree in (trees / "corpus", trees / "hostile"):
        runs.append(["cd", str(tree)])  # the working directory inside the dump (relative outputs)
        for cmd, items in hostile_runs(tree, tmp_path / cmd_dir(tree)).items():
            runs += [argv for argv, _ in items]
        runs.append(["compare", str(tree), str(tree), "--export-config", str(tree / "redump.json")])
        runs.append(["compare", str(tree), str(tree), "--export-config", "redump.json"])  # relative: in the tree
        runs.append(["triage", str(tree), "--export-config", "redump.json"])  # relative: in the tree
        runs.append(["convert", str(tree), str(tree / "converted")])
        runs.append(["summary", str(tree), "--json"])
        runs.append(["show", str(tree), HOSTILE_NAMES[0], "--json"])
    for argv in runs:
        if argv[0] == "cd":
            monkeypatch.chdir(argv[1])
            continue
        main(argv + (cache if argv[0] != "help" else []))
        capsys.readouterr()
        assert snapshot(trees) == before, f"{argv} changed the dump tree"


def cmd_dir(tree: Path) -> str:
    return f"out_{tree.name}"


def test_the_guard_sees_a_change(trees, tmp_path):
    """The snapshot notices a rewrite that keeps the size, and a touched mtime."""
    before = snapshot(trees)
    victim = next(p for p in sorted((trees / "corpus").rglob("*")) if p.is_file() and p.stat().st_size > 8)
    data = victim.read_bytes()
    st = victim.stat()
    victim.write_bytes(bytes([data[0] ^ 1]) + data[1:])
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    try:
        assert snapshot(trees) != before
    finally:
        victim.write_bytes(data)
        os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert snapshot(trees) == before
