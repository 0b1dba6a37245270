"""What the explorer's cold open relies on to paint its first ops early (issue 21 Build 3): views never
wait for the builder's writes, the builder steps back once its first partial results are out, and the
partial results' facts are cheap but say the same as the finished index's."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading

import pytest

from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.query import DumpQuery
from synth.job_tree import write_cann_job


@pytest.fixture
def built(tmp_path) -> DumpQuery:
    root = write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1), overflow=[(1, 1)], opdebug=True)
    index = DumpIndex(str(root), str(tmp_path / "index.db"))
    index.update()
    yield DumpQuery(index)
    index.close()


def test_a_best_effort_cache_write_never_waits_for_another_writer(built):
    q = built
    q.index.conn.execute("PRAGMA busy_timeout=600000")  # a wait would last ten minutes
    other = sqlite3.connect(q.index.db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the builder in the middle of storing a folder
    try:
        writer = threading.Thread(target=q._remember, args=("INSERT OR REPLACE INTO meta VALUES('probe', '1')", [()]),
                                  daemon=True)
        writer.start()
        writer.join(timeout=120)
        assert not writer.is_alive(), "the cache write waited for the other writer"
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert not q.index.query("SELECT 1 FROM meta WHERE key='probe'")  # skipped, not half-done
    assert q.index.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 600000  # the index's own waits kept
    q._remember("INSERT OR REPLACE INTO meta VALUES('probe', '1')", [()])
    assert q.index.query("SELECT value FROM meta WHERE key='probe'") == [("1",)]  # no other writer: written


@pytest.mark.skipif(os.name != "posix" or not hasattr(os, "setpriority"), reason="POSIX priorities")
@pytest.mark.parametrize("own_group", [True, False])
def test_the_builder_steps_back_only_in_a_process_group_of_its_own(own_group):
    from dumpscope.core.engines import child_jobs

    if os.getpriority(os.PRIO_PROCESS, 0) + child_jobs.BACKGROUND_NICE > 19:
        pytest.skip("this process already runs at the lowest priority")
    code = ("import os; from dumpscope.core.engines import child_jobs as c; b = os.getpriority(os.PRIO_PROCESS, 0); "
            "c._to_background(); print(b, os.getpriority(os.PRIO_PROCESS, 0))")
    before_here = os.getpriority(os.PRIO_PGRP, 0)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         start_new_session=own_group).stdout.split()
    before, after = int(out[0]), int(out[1])
    assert after == before + (child_jobs.BACKGROUND_NICE if own_group else 0)
    assert os.getpriority(os.PRIO_PGRP, 0) == before_here  # the caller's group (the explorer's) untouched


def test_partial_results_name_the_same_layouts_as_the_finished_index(built):
    from dumpscope.tui.app_messages import IndexReady

    partial = IndexReady(built, final=False, facts=built)
    final = IndexReady(built)
    assert [lay["name"] for lay in partial.layouts] == [lay["name"] for lay in final.layouts]
    assert partial.layouts  # the tree has a CANN dump: not an empty list by accident
    assert (partial.start, partial.trouble) == (final.start, final.trouble)


async def test_the_next_partial_results_wait_until_these_are_painted(built, tmp_path, monkeypatch):
    """A cold build's partial results are posted one at a time: the flag that holds back the next ones
    is cleared after the frame showing these was painted, not when their handler starts (a second
    tree load before that paint would delay the first ops)."""
    from test_tui_support import set_env, wait_ready

    from dumpscope.tui.app import DumpscopeApp
    from dumpscope.tui.app_messages import IndexReady

    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(built.root, display_name="job")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        after_refresh = []
        monkeypatch.setattr(app, "call_after_refresh", lambda fn, *a: after_refresh.append(fn))
        app._partial_pending = True  # as the build's worker sets it when it posts partial results
        app.on_index_ready(IndexReady(built, refreshed=True, final=False))
        assert app._partial_pending  # still held back: nothing painted yet
        assert after_refresh, "nothing waits for the paint"
        for fn in after_refresh:
            fn()
        assert not app._partial_pending


def test_every_module_warmed_up_during_a_cold_build_exists():
    import importlib

    from dumpscope.tui.app_index import WARM_UP

    for name in WARM_UP:  # a renamed module would be skipped silently by the warm-up itself
        importlib.import_module(name)
