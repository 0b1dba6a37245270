"""Damage a query meets after the open (issue 30): the explorer and the CLI call ``discard`` with no
check of their own, and it used to remove the file once it got the writer lock.  Another process
may have held that lock to rebuild the same index: what it wrote is sound and must be kept; a file
still damaged under the lock goes."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from dumpscope.core.index import faults as index_faults
from dumpscope.core.index.lock import writer_lock

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the writer lock across processes is flock")


def _good_index(db: Path) -> None:
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t(x)")
    con.executemany("INSERT INTO t VALUES(?)", [(i,) for i in range(100)])
    con.commit()
    con.close()


def _damage(db: Path) -> None:
    """Pages overwritten past the header: SQLite opens it, a query reading them says "malformed"."""
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xff" * (len(data) - page)
    db.write_bytes(bytes(data))


def _rebuilder(db: str, held, release, good: bool) -> None:
    """Another dumpscope: holds the writer lock while it rebuilds the index, then lets go."""
    with writer_lock(db):
        held.set()
        release.wait(30)
        for p in (Path(db), Path(db + "-wal"), Path(db + "-shm")):
            if p.exists():
                p.unlink()
        _good_index(Path(db))
        if not good:
            _damage(Path(db))


def _race(tmp_path: Path, good: bool) -> tuple[bool, Path]:
    db = tmp_path / "index.sqlite"
    _good_index(db)
    _damage(db)
    with pytest.raises(sqlite3.DatabaseError) as seen:  # what the explorer's query met
        con = sqlite3.connect(db)
        try:
            con.execute("SELECT count(*) FROM t").fetchall()
        finally:
            con.close()
    assert index_faults.is_damage(seen.value)
    ctx = multiprocessing.get_context("fork")
    held, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_rebuilder, args=(str(db), held, release, good))
    proc.start()
    try:
        assert held.wait(30)
        release.set()  # it finishes its rebuild while we wait for the lock
        gone = index_faults.discard(db)
    finally:
        proc.join(30)
    assert proc.exitcode == 0
    return gone, db


def test_an_index_rebuilt_while_waiting_for_the_lock_is_kept(tmp_path):
    gone, db = _race(tmp_path, good=True)
    assert not gone
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 100
    finally:
        con.close()


def test_an_index_still_damaged_under_the_lock_goes(tmp_path):
    gone, db = _race(tmp_path, good=False)
    assert gone and not db.exists()


def test_damage_with_no_writer_about_goes_at_once(tmp_path):
    db = tmp_path / "index.sqlite"
    _good_index(db)
    _damage(db)
    assert index_faults.discard(db)
    assert not db.exists()
