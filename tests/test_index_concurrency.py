"""Several dumpscope processes on one tree at once, and index files that cannot be trusted.

Every run must answer, and answer the same as a run on its own: writers take turns on the index
file, and a cache that cannot be written or read falls back to an in-memory index with one
warning line.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from dumpscope.core.index.cache import index_path
from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.query import DumpQuery
from synth.faults import write_fault_corpus
from dumpscope.tui.cli.entry import main



@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("conc") / "dump"
    write_fault_corpus(root)
    return root


def _reference(tree: Path, capsys) -> dict:
    out = {}
    for cmd in ("ops", "summary"):
        assert main([cmd, str(tree), "--json", "--no-cache"]) == 0
        out[cmd] = json.loads(capsys.readouterr().out)
    return out


def _spawn(args: list[str], cache: Path) -> subprocess.Popen:
    env = dict(os.environ, DUMPSCOPE_CACHE_DIR=str(cache), DUMPSCOPE_WORKERS="1")
    return subprocess.Popen([sys.executable, "-m", "dumpscope", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=str(REPO), text=True)


def test_three_processes_building_one_index_all_answer_identically(tree, tmp_path, capsys):
    ref = _reference(tree, capsys)
    for trial in range(4):
        cache = tmp_path / f"cache{trial}"  # a cold cache each trial: all three build at once
        procs = [_spawn([cmd, str(tree), "--json"], cache) for cmd in ("ops", "summary", "ops")]
        for cmd, p in zip(("ops", "summary", "ops"), procs):
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, f"trial {trial} {cmd}: {err}"
            assert err == "", err
            assert json.loads(out) == ref[cmd], f"trial {trial}: {cmd} differs from a run on its own"
        # the index they left behind is whole: a warm run gives the same answer
        p = _spawn(["ops", str(tree), "--json"], cache)
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and json.loads(out) == ref["ops"], err


def test_writer_lock_is_reentrant_and_serialises_threads(tmp_path):
    import threading
    import time

    from dumpscope.core.index.lock import writer_lock

    db = str(tmp_path / "x.sqlite")
    inside = []
    overlap = []

    def work(k):
        with writer_lock(db):
            with writer_lock(db):  # nested in the same thread: no deadlock
                inside.append(k)
                if len(inside) > 1:
                    overlap.append(k)
                time.sleep(0.02)
                inside.remove(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not overlap


# -- cache faults -------------------------------------------------------------------------------


def _ops(argv_tail: list[str], tree: Path, capsys) -> tuple[int, dict, list[str]]:
    code = main(["ops", str(tree), "--json", *argv_tail])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else {}), [line for line in err.splitlines() if line]


def _one_warning(err: list[str]) -> None:
    assert len(err) == 1 and err[0].startswith("dumpscope: warning: "), err


def test_a_cache_locked_for_a_moment_at_open_is_waited_for_not_replaced(tree, tmp_path, capsys, monkeypatch):
    """"database is locked" while opening (processes opening one new file at once) is tried again: the
    answer comes from the cache file, with no warning; a lock that never goes falls back to memory."""
    from dumpscope.core.index import faults as index_faults

    ref = _reference(tree, capsys)["ops"]
    monkeypatch.setattr(index_faults, "LOCKED_PAUSE_S", 0.01)
    real_init = DumpIndex.__init__
    fails = {"left": 2}

    def locked_at_first(self, root, db_path, *a, **kw):
        real_init(self, root, db_path, *a, **kw)
        if fails["left"] and db_path != ":memory:":
            fails["left"] -= 1
            raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(DumpIndex, "__init__", locked_at_first)
    cache = tmp_path / "cache"
    code, doc, err = _ops(["--cache-dir", str(cache)], tree, capsys)
    assert code == 0 and doc == ref and err == [] and fails["left"] == 0
    assert index_path(str(tree), cache).stat().st_size > 0  # built in the cache file
    fails["left"] = 100  # locked for good: memory, one warning
    code, doc, err = _ops(["--cache-dir", str(tmp_path / "cache2")], tree, capsys)
    assert code == 0 and doc == ref
    _one_warning(err)
    assert "database is locked" in err[0] and fails["left"] == 100 - 1 - index_faults.LOCKED_RETRIES


def test_cache_dir_that_cannot_be_created_answers_from_memory(tree, tmp_path, capsys):
    ref = _reference(tree, capsys)["ops"]
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    code, doc, err = _ops(["--cache-dir", str(blocker / "cache")], tree, capsys)
    assert code == 0 and doc == ref
    _one_warning(err)
    assert "in-memory index" in err[0]


def test_index_file_that_cannot_be_opened_answers_from_memory(tree, tmp_path, capsys):
    ref = _reference(tree, capsys)["ops"]
    cache = tmp_path / "cache"
    index_path(str(tree), cache).mkdir(parents=True)  # a folder where the file should be
    code, doc, err = _ops(["--cache-dir", str(cache)], tree, capsys)
    assert code == 0 and doc == ref
    _one_warning(err)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_cache_dir_answers_from_memory(tree, tmp_path, capsys):
    ref = _reference(tree, capsys)["ops"]
    cache = tmp_path / "ro"
    cache.mkdir()
    cache.chmod(0o555)
    try:
        code, doc, err = _ops(["--cache-dir", str(cache)], tree, capsys)
    finally:
        cache.chmod(0o755)
    assert code == 0 and doc == ref
    _one_warning(err)


def _connect_with(monkeypatch, pragma: str = "", read_only: bool = False) -> None:
    """SQLite as a full disk (``max_page_count``) or a read-only filesystem would present itself."""
    from dumpscope.core.index import dump_index as index_mod

    real = sqlite3.connect

    def connect(db, *args, **kwargs):
        if db == ":memory:":
            return real(db, *args, **kwargs)
        if read_only:
            kwargs["uri"] = True
            db = f"file:{db}?mode=ro"
        conn = real(db, *args, **kwargs)
        if pragma:
            conn.execute(pragma)
        return conn

    monkeypatch.setattr(index_mod.sqlite3, "connect", connect)


def test_disk_full_in_the_middle_of_a_build_answers_from_memory(tree, tmp_path, capsys, monkeypatch):
    ref = _reference(tree, capsys)["ops"]
    _connect_with(monkeypatch, "PRAGMA max_page_count=12")  # 12 pages of 16 KiB: full half-way
    code, doc, err = _ops(["--cache-dir", str(tmp_path / "cache")], tree, capsys)
    assert code == 0 and doc == ref
    _one_warning(err)
    assert "full" in err[0]


def test_read_only_index_file_answers_from_memory(tree, tmp_path, capsys, monkeypatch):
    ref = _reference(tree, capsys)["ops"]
    cache = tmp_path / "cache"
    assert _ops(["--cache-dir", str(cache)], tree, capsys)[0] == 0
    (tree / "new_empty_dir").mkdir()  # the tree changed: the stored index must be written to
    try:
        _connect_with(monkeypatch, read_only=True)
        code, doc, err = _ops(["--cache-dir", str(cache)], tree, capsys)
    finally:
        (tree / "new_empty_dir").rmdir()
    assert code == 0 and doc == ref
    _one_warning(err)


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    if how == "truncated":
        path.write_bytes(bytes(data[: len(data) // 2 + 100]))
    elif how == "not_sqlite":
        path.write_bytes(b"this is no database\n" * 100)
    elif how == "all_pages":  # every page after the first: the folder table cannot be read
        for i in range(page, len(data)):
            data[i] = (i * 7919) & 0xFF
        path.write_bytes(bytes(data))
    elif how == "ops_table":  # only the ops table's root page: opening and updating still work
        con = sqlite3.connect(path)
        root = con.execute("SELECT rootpage FROM sqlite_master WHERE name='ops'").fetchone()[0]
        con.close()
        start = (root - 1) * page
        data[start:start + page] = bytes((i * 31) & 0xFF for i in range(page))
        path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["truncated", "not_sqlite", "all_pages", "ops_table"])
def test_damaged_index_is_rebuilt_with_one_warning(tree, tmp_path, capsys, how):
    ref = _reference(tree, capsys)["ops"]
    cache = tmp_path / "cache"
    assert _ops(["--cache-dir", str(cache)], tree, capsys)[0] == 0
    db = index_path(str(tree), cache)
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file, then damage it
    con.close()
    _damage(db, how)
    code, doc, err = _ops(["--cache-dir", str(cache)], tree, capsys)
    assert code == 0, err
    assert doc == ref
    _one_warning(err)
    assert "damaged" in err[0] or "not usable" in err[0]
    # the next run finds a healthy index again (no warning: the damage did not stick)
    code, doc, err = _ops(["--cache-dir", str(cache)], tree, capsys)
    assert code == 0 and doc == ref and err == []


def test_damaged_index_found_by_the_library_is_rebuilt(tree, tmp_path):
    cache = tmp_path / "cache"
    DumpIndex.open(str(tree), cache_directory=cache).close()
    db = index_path(str(tree), cache)
    _damage(db, "all_pages")
    index = DumpIndex.open(str(tree), cache_directory=cache)
    try:
        assert len(index.warnings) == 1 and "damaged" in index.warnings[0]
        assert DumpQuery(index).count_ops() > 0
    finally:
        index.close()


def test_damage_met_by_a_query_after_opening_is_rebuilt_once(tree, tmp_path, capsys, monkeypatch):
    """Damage that opening did not touch shows up in some later query: the command discards the
    index file and answers from a fresh one."""
    ref = _reference(tree, capsys)["ops"]
    cache = tmp_path / "cache"
    calls = []
    real = DumpQuery.ops

    def ops_on_damaged_page(self, *args, **kwargs):
        calls.append(self.index.db_path)
        if len(calls) == 1:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(DumpQuery, "ops", ops_on_damaged_page)
    code, doc, err = _ops(["--cache-dir", str(cache)], tree, capsys)
    assert code == 0 and doc == ref
    _one_warning(err)
    assert len(calls) == 2


async def test_explorer_answers_when_the_cache_disk_is_full(tree, tmp_path, monkeypatch):
    from test_tui_support import record_notes, set_env, wait_ready

    from dumpscope.tui.app import DumpscopeApp

    set_env(monkeypatch, tmp_path)
    expected = DumpQuery(DumpIndex.open(str(tree), use_cache=False)).count_ops()
    _connect_with(monkeypatch, "PRAGMA max_page_count=12")
    app = DumpscopeApp(str(tree), display_name="dump")
    notes = record_notes(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        assert app.q.index.db_path == ":memory:"
        assert app.q.count_ops() == expected
        assert any("in-memory index" in n.message for n in notes)
