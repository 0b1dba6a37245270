"""Nothing from the current folder or the dump tree is ever imported (issue 30): the explorer's
child processes and ``serve``'s per-tab explorer run dumpscope in isolated mode, so a folder
``dumpscope/`` with an ``__init__.py`` beside them changes nothing.

Each ``__init__.py`` planted here writes a marker file when imported; the tests check the
command worked and that no marker was written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_tui_support import make_ms_tree, set_env

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the child process path is POSIX only")


def _plant(folder: Path, marker: Path) -> None:
    """A ``dumpscope`` package (and ``dumpscope/core``) that records being imported."""
    pkg = folder / "dumpscope"
    (pkg / "core").mkdir(parents=True, exist_ok=True)
    code = f"open({str(marker)!r}, 'a').write(__name__ + ' from ' + __file__ + '\\n')\n"
    (pkg / "__init__.py").write_text(code)
    (pkg / "core" / "__init__.py").write_text(code)


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    """(current folder, dump tree, marker): the current folder (``tmp_path``) and the dump tree hold a planted package."""
    set_env(monkeypatch, tmp_path)
    dump = make_ms_tree(tmp_path / "dump", steps=(0,), inf_op=None)
    marker = tmp_path / "imported.txt"
    _plant(tmp_path, marker)
    _plant(dump, marker)
    return tmp_path, dump, marker


def test_the_child_builder_imports_only_dumpscope_itself(hostile, monkeypatch):
    """The explorer's cold open: the index built by the child, from the current folder and from
    inside the dump tree."""
    from dumpscope.core.engines import child_jobs
    from dumpscope.core.index.cache import index_path
    from dumpscope.core.index.dump_index import DumpIndex
    from dumpscope.core.query import DumpQuery

    here, dump, marker = hostile
    for cwd in (here, dump):
        monkeypatch.chdir(cwd)
        db = index_path(str(dump))
        for p in (db, Path(str(db) + "-wal"), Path(str(db) + "-shm")):
            if p.exists():
                p.unlink()
        job = child_jobs.prestart_build(str(dump))  # what ``dumpscope PATH`` starts first
        assert job is not None
        warnings = child_jobs.build_index(str(dump), str(db), None, lambda j: None, lambda e: None,
                                          lambda: None, 0.2, job=job)
        assert warnings == []
        assert not marker.exists(), marker.read_text()
        index = DumpIndex.open(str(dump), update=False)
        try:
            assert DumpQuery(index).count_ops() == 6
        finally:
            index.close()


def test_the_child_command_keeps_the_checkout_it_runs_from(monkeypatch, tmp_path):
    """The current folder is left out of the child's import path, except where this process found
    dumpscope itself (a checkout run in place)."""
    from dumpscope.core.support.isolated import import_path

    import dumpscope

    home = os.path.dirname(os.path.dirname(os.path.abspath(dumpscope.__file__)))
    paths, _ = import_path(str(tmp_path))
    assert "" not in paths and str(tmp_path) not in paths
    monkeypatch.setattr(sys, "path", [str(tmp_path), home, *sys.path])
    paths, _ = import_path(str(tmp_path))
    assert str(tmp_path) not in paths and home in paths
    paths, _ = import_path(home)
    assert home in paths


def test_serve_command_imports_only_dumpscope_itself(hostile):
    """The shell command textual-serve runs per tab, run from the current folder and the dump tree."""
    from dumpscope.tui.serve import explore_command

    here, dump, marker = hostile
    cmd = explore_command(str(dump)).replace(" explore ", " explore --help ", 1)
    for cwd in (here, dump):
        done = subprocess.run(cmd, shell=True, cwd=cwd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "usage: dumpscope explore" in done.stdout
        assert not marker.exists(), marker.read_text()
