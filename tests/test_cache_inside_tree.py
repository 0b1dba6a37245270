"""The index cache is refused when its folder lies at or under PATH (issue 30): the index is built
in memory with one warning, and nothing is written inside the dump tree."""

from __future__ import annotations

import os

import pytest

from dumpscope.core.engines import child_jobs
from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.query import DumpQuery
from synth.trees import write_mindspore_tree
from dumpscope.tui.cli.entry import main


def _files(tree) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs} | {d for d, _, _ in os.walk(tree)}


@pytest.mark.parametrize("where", [".cache", "rank_0/.cache", "."])
def test_a_cache_dir_inside_path_is_refused_with_one_warning(tmp_path, capsys, where):
    tree = write_mindspore_tree(tmp_path / "golden", steps=(0,)).parent
    before = _files(tree)
    cache = tree / where
    code = main(["summary", str(tree), "--cache-dir", str(cache)])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if "in-memory index" in ln]
    assert len(lines) == 1 and "inside the dump tree" in lines[0], err
    assert _files(tree) == before  # no folder, no index file written inside PATH
    assert child_jobs.prestart_build(str(tree), cache_dir=str(cache)) is None
    assert _files(tree) == before


def test_home_inside_the_tree_is_refused(tmp_path, monkeypatch):
    tree = write_mindspore_tree(tmp_path / "golden", steps=(0,)).parent
    monkeypatch.delenv("DUMPSCOPE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tree / "home" / ".cache"))
    before = _files(tree)
    index = DumpIndex.open(str(tree))
    try:
        assert index.db_path == ":memory:" and DumpQuery(index).count_ops() > 0
        assert len(index.warnings) == 1 and "inside the dump tree" in index.warnings[0]
    finally:
        index.close()
    assert _files(tree) == before
