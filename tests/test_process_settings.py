"""Process-wide settings: what the console script takes for its one-shot process, what the index build
and the pool workers do with the cyclic collector, and what a library caller of ``main`` does not get."""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import sys
import threading

import pytest

from dumpscope.core.index import pool
from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.support import gc_pause

_PROBE = r"""
import os, sys
from dumpscope.tui.cli import entry
assert "numpy" not in sys.modules, "a module the entry imports at start imports numpy: too late for OpenBLAS"
entry.main = lambda: 0  # the settings only, no command
entry.script()
import numpy
tasks = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1
print(os.environ["OPENBLAS_NUM_THREADS"], tasks)
"""


def _probe(env_value: str | None) -> tuple[str, int]:
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True).stdout
    value, tasks = out.split()
    return value, int(tasks)


def test_script_runs_numpy_without_blas_threads():
    value, tasks = _probe(None)
    assert value == "1"
    if tasks < 0:
        pytest.skip("no /proc/self/task here to count the process's threads")
    # OpenBLAS would start one thread per further core at numpy's import, each spinning ~0.1 s idle
    assert tasks == 1


def test_script_keeps_the_users_blas_threads():
    assert _probe("2")[0] == "2"


def test_the_explorers_builder_child_takes_them_too():
    """``python -m dumpscope.core.engines.child_jobs``: a one-shot process of its own (the explorer's cold build)."""
    code = ("import os, runpy, sys\n"
            "sys.argv = ['child_jobs', '--help']\n"
            "try:\n    runpy.run_module('dumpscope.core.engines.child_jobs', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "from dumpscope.core.support import gc_pause\n"
            "print(os.environ.get('OPENBLAS_NUM_THREADS'), gc_pause._freeze_before_fork)\n")
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split()[-2:] == ["1", "True"]


def test_main_alone_sets_nothing(monkeypatch):
    """A caller of ``main`` (a test run, an app) keeps its own process settings."""
    from dumpscope.tui.cli import entry

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setattr(gc_pause, "_freeze_before_fork", False)
    assert entry.main(["--version"]) == 0
    assert "OPENBLAS_NUM_THREADS" not in os.environ
    assert gc_pause._freeze_before_fork is False


def test_before_fork_freezes_only_a_one_shot_process(monkeypatch):
    assert gc.get_freeze_count() == 0  # nothing in the test run froze its heap
    monkeypatch.setattr(gc_pause, "_freeze_before_fork", False)
    gc_pause.before_fork()
    assert gc.get_freeze_count() == 0
    gc_pause.freeze_before_forks()
    try:
        gc_pause.before_fork()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def _update_sees_collector(index: DumpIndex) -> list[bool]:
    seen: list[bool] = []

    def fake_update(*args, **kwargs):
        seen.append(gc.isenabled())

    index._update = fake_update  # type: ignore[method-assign]
    return seen


def test_index_build_pauses_the_collector_in_the_main_thread(tmp_path):
    assert gc.isenabled()
    index = DumpIndex(tmp_path / "tree", db_path=":memory:")
    seen = _update_sees_collector(index)
    index.update()
    assert seen == [False] and gc.isenabled()  # paused while building, back on after

    in_thread = threading.Thread(target=index.update)  # the explorer builds in a thread: never paused
    in_thread.start()
    in_thread.join()
    assert seen == [False, True] and gc.isenabled()


def _collector_state() -> tuple[bool, bool]:
    return gc.isenabled(), gc.get_freeze_count() > 0


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="workers are forked only here")
def test_pool_workers_collect_even_when_forked_during_a_pause():
    with gc_pause.gc_paused():
        executor = pool.process_pool(2)
        if executor is None:
            pytest.skip("no process pool on this machine (one core)")
        try:
            enabled, frozen = executor.submit(_collector_state).result(timeout=60)
        finally:
            executor.shutdown()
    assert enabled and frozen  # collecting their own cycles, skipping what they inherited
