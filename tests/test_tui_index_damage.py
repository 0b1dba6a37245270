"""The explorer keeps working when its index file is damaged after it opened (issue 20): the query
that meets the damage gets its answer from a rebuilt index, one notification says so, views reload."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from test_tui_support import TINY_OPS, make_ms_tree, record_notes, screen_text, set_env, settle, wait_ready


def _damage_ops_table(db: Path) -> None:
    """Overwrite the ops table's root page (opening the file still works: the damage shows up only
    when a query reads that table)."""
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file first
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name='ops'").fetchone()[0]
    con.close()
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    start = (root - 1) * page
    data[start:start + page] = bytes((i * 31) & 0xFF for i in range(page))
    db.write_bytes(bytes(data))
    with pytest.raises(sqlite3.DatabaseError):  # the damage is real
        sqlite3.connect(db).execute("SELECT * FROM ops").fetchall()


async def test_explorer_rebuilds_an_index_damaged_after_it_opened(tmp_path, monkeypatch):
    from dumpscope.tui.app import DumpscopeApp

    tree = make_ms_tree(tmp_path / "dump")
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(tree), display_name="dump")
    raised = record_notes(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        index = app.q.index
        expected = app.q.count_ops()
        db = Path(index.db_path)
        assert db.exists() and expected == 2 * len(TINY_OPS)  # two steps
        _damage_ops_table(db)
        index.conn.execute("PRAGMA shrink_memory")  # the explorer's page cache forgets the good pages
        # keys that query the ops table: the step picker's place change reloads the op list
        await pilot.press("s")
        await settle(pilot)
        await pilot.press("escape", "end")
        await settle(pilot)
        assert app.is_running and app.return_code is None
        notes = [n.message for n in raised if "damaged" in n.message]
        assert len(notes) == 1 and "rebuilt" in notes[0], [n.message for n in raised]
        assert app.q.count_ops() == expected
        assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM ops").fetchone()[0] >= expected  # healthy again
        text = screen_text(app)  # the op list and the detail of the op under the cursor are back
        assert f"{len(TINY_OPS)} ops" in text and "exec #" in text, text


async def test_explorer_without_the_hook_would_fail(tmp_path, monkeypatch):
    """The guard is the hook: without it the same damage is an error raised out of the query."""
    from dumpscope.tui.app import DumpscopeApp

    tree = make_ms_tree(tmp_path / "dump")
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(tree), display_name="dump")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        index = app.q.index
        _damage_ops_table(Path(index.db_path))
        index.conn.execute("PRAGMA shrink_memory")
        index.on_damage = None
        with pytest.raises(sqlite3.DatabaseError):
            app.q.count_ops()
        index.on_damage = app._recover_index
        assert app.q.count_ops() == 2 * len(TINY_OPS)
        await settle(pilot)
