"""The index damage check never races a writer (issue 30): a checker looking at an index file while
another process writes and closes it (the file growing through checkpoints, its WAL coming and
going) must never call it damaged, and nothing is discarded while a build of it is alive."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time
from pathlib import Path

import pytest

from dumpscope.core.index import faults as index_faults
from dumpscope.core.index.lock import writer_lock

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the writer lock across processes is flock")


def _writer(db: str, stop_at: float, closes: "multiprocessing.Value") -> None:
    """A builder: under the writer lock, open the file, add pages through the WAL, close it (the
    close checkpoints the WAL into the file and removes it), again and again."""
    blob = os.urandom(3000)
    while time.monotonic() < stop_at and closes.value < 200:
        with writer_lock(db):
            con = sqlite3.connect(db, isolation_level=None)
            con.execute("PRAGMA page_size=16384")
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("CREATE TABLE IF NOT EXISTS t(x BLOB)")
            con.execute("BEGIN")
            con.executemany("INSERT INTO t VALUES(?)", [(blob,)] * 20)
            con.execute("COMMIT")
            con.close()
        with closes.get_lock():
            closes.value += 1


class _Opened:
    """Stands for ``DumpIndex`` in ``open_with_fallback``: the damage check is what is tested."""

    def __init__(self, root: str, db_path: str) -> None:
        self.warnings: list[str] = []

    def close(self) -> None:
        pass


def test_checker_beside_a_writer_never_discards_a_good_index(tmp_path):
    db = tmp_path / "index.sqlite"
    ctx = multiprocessing.get_context("fork")
    closes = ctx.Value("i", 0)
    stop_at = time.monotonic() + 10.0  # 200 closes take ~2 s idle
    proc = ctx.Process(target=_writer, args=(str(db), stop_at, closes))
    proc.start()
    looks, verdicts = 0, []
    try:
        while proc.is_alive():
            if not db.exists():
                continue
            looks += 1  # the explorer's open of the index its builder writes, up to SQLite's own open
            opened = index_faults.open_with_fallback(_Opened, str(tmp_path / "tree"), db, None, None, False)
            verdicts += opened.warnings
    finally:
        proc.join(30)
    assert proc.exitcode == 0
    assert verdicts == []
    assert closes.value >= 100 and looks >= 100, (closes.value, looks)  # hundreds of closes, checked beside
    con = sqlite3.connect(db)
    try:  # every row the writer stored is still there: the file was never removed under it
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 20 * closes.value
    finally:
        con.close()


def test_nothing_is_discarded_while_a_build_holds_the_lock(tmp_path):
    db = tmp_path / "index.sqlite"
    db.write_bytes(b"not an sqlite file at all" * 10)
    ctx = multiprocessing.get_context("fork")
    started, release = ctx.Event(), ctx.Event()

    def hold() -> None:
        with writer_lock(str(db)):
            started.set()
            release.wait(30)

    proc = ctx.Process(target=hold)
    proc.start()
    try:
        assert started.wait(30)
        assert index_faults.settled_problem(db) == "not an SQLite file"
        assert not index_faults.discard(db, index_faults._confirmed_header_problem(db), wait_s=0)
        assert db.exists()
    finally:
        release.set()
        proc.join(30)
    # once the build is over, a file still damaged on a second look under the lock goes
    assert index_faults.discard(db, index_faults._confirmed_header_problem(db), wait_s=0)
    assert not db.exists()


def test_a_header_that_changes_while_it_is_read_is_no_verdict(tmp_path, monkeypatch):
    db = tmp_path / "index.sqlite"
    db.write_bytes(b"SQLite format 3\x00" + b"\x40\x00" + b"\x00" * 82 + b"x" * 1000)  # cut short
    assert index_faults.header_problem(db) is not None
    real = index_faults.header_problem

    def growing(path: Path):
        out = real(path)
        with open(path, "ab") as fh:  # a checkpoint writing pages meanwhile
            fh.write(b"y" * 100)
        return out

    monkeypatch.setattr(index_faults, "header_problem", growing)
    assert index_faults.settled_problem(db) is None


def test_a_wal_removed_while_the_header_is_read_is_no_error(tmp_path, monkeypatch):
    """A writer's close removes the WAL at any moment: seen there at one look and gone at the next, it is
    no reason to raise (which made the explorer's open say the index 'is not usable (no such file or
    directory)' and fall back to memory: CI caught it once beside a writer under load)."""
    db = tmp_path / "index.sqlite"
    head = bytearray(b"SQLite format 3\x00" + b"\x40\x00" + b"\x00" * 82)
    head[28:32] = (4).to_bytes(4, "big")  # four pages of 16 KiB promised...
    head[92:96] = head[24:28]
    db.write_bytes(bytes(head) + b"\x00" * (16384 - 100))  # ...one written: the rest lie in the WAL
    wal = Path(str(db) + "-wal")
    wal.write_bytes(b"w" * 4096)
    real_stat = Path.stat
    looks = {"n": 0}

    def stat(self, *a, **k):
        if self == wal:
            looks["n"] += 1
            if looks["n"] > 1:  # there at the first look, removed by the writer's close just after
                raise FileNotFoundError(2, "No such file or directory", str(self))
        return real_stat(self, *a, **k)

    monkeypatch.setattr(Path, "stat", stat)
    assert index_faults.header_problem(db) is None  # the WAL holds the promised pages
    looks["n"] = 1  # from now on the WAL is gone
    assert index_faults.header_problem(db) is not None  # and without it the file is short: damage
