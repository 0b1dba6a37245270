"""Worker counts are passed, never guessed from what is imported (issue 32): core used to switch its
process pools off whenever ``textual.app`` was in ``sys.modules``, so a library user with Textual loaded
got serial work.  Now the explorer passes ``workers=1`` for what its own threads do, and core pools
whenever more than one worker is asked for."""

from __future__ import annotations

import textual.app  # noqa: F401  (loaded on purpose: it must change nothing below)

from test_tui_support import wait_ready

import dumpscope.core.index.dump_index as index_mod
import dumpscope.core.index.pool as pool_mod
from dumpscope.core.engines.compare import measure_many
from dumpscope.core.engines.compare.verdict import Thresholds
from dumpscope.tui.app import DumpscopeApp


def test_a_loaded_textual_leaves_the_pools_on():
    pool = pool_mod.process_pool(2)
    try:
        assert pool is not None
    finally:
        if pool is not None:
            pool.shutdown()
    assert pool_mod._Pool(2).usable
    with measure_many.shared_pool():
        m = measure_many.Measurer(Thresholds(), workers=2, pool=True)
        assert m._pool is not None  # the compare pool too


def test_one_worker_means_no_pool():
    assert pool_mod.process_pool(1) is None
    assert not pool_mod._Pool(1).usable


async def test_the_explorer_builds_in_its_own_thread_without_forking(tiny, monkeypatch):
    """An in-memory index (no cache file, so no child builder) is built in the explorer's thread: with
    every folder small enough to go to the pool and 4 workers the default, the app's explicit
    ``workers=1`` is what keeps it from forking itself."""
    monkeypatch.setenv("DUMPSCOPE_WORKERS", "4")
    monkeypatch.setattr(index_mod, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(pool_mod, "CHUNK_FILES", 1)
    monkeypatch.setattr(pool_mod, "BATCH_FILES", 1)
    started: list[int] = []
    real = pool_mod._new_pool

    def spy(workers):
        started.append(workers)
        return real(workers)

    monkeypatch.setattr(pool_mod, "_new_pool", spy)
    app = DumpscopeApp(str(tiny), display_name="tiny", use_cache=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        assert app.q is not None and app.q.index.db_path == ":memory:" and app.q.count_ops() > 0
    assert started == []
