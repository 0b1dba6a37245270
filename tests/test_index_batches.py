"""Small folders read by the process pool in batches: the index is the same as when read inline."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dumpscope.core.index.dump_index as index_mod
import dumpscope.core.index.pool as pool_mod
from dumpscope.core.index.dump_index import DumpIndex
from synth.job_tree import write_cann_job, write_cann_stats_job


def _stats_job(root: Path, ranks: int = 3, steps: int = 2, ops: int = 4) -> None:
    """A CANN ``dump_data=stats`` job (one NaN op), with a bad CSV and a file nobody reads."""
    write_cann_stats_job(root, ranks, steps, ops, np.linspace(-1, 1, 12, dtype=np.float16).reshape(3, 4),
                         nan_at=(1, 1, 2), nan_index=(1, 2))
    place = root / "20240801000000" / "0" / "ge_default_20240801000000_1" / "1" / "0"
    (place / "Mul.model_broken_Mul.9.1.1722470400009999.csv").write_text("Input/Output,Index\nInput,x\n")
    (place / "notes.txt").write_text("not a dump file\n")
    if sys.platform != "win32":  # a name that is not UTF-8: reported once, by its folder
        with open(os.path.join(os.fsencode(str(place)), b"Mul.\xff.1.1.1.csv"), "wb") as fh:
            fh.write(b"x")


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "dump"
    write_cann_job(root, ranks=(0, 1, 2), steps=(0, 1), overflow={(2, 1)}, opdebug=True)  # same places, payloads
    _stats_job(root)
    return root


def _rows(idx: DumpIndex) -> dict[str, list[tuple]]:
    """Every table's rows with row ids replaced by what they stand for (folder path, first unit's path):
    ids follow the order folders were stored in, which the walk's threads already make vary."""
    dirs = dict(idx.query("SELECT id, path FROM dirs"))
    unit_path = dict(idx.query("SELECT id, path || '#' || slots FROM units"))

    def table(name: str, drop: tuple[str, ...], ids: dict[str, dict]) -> list[tuple]:
        cols = [c[1] for c in idx.query(f"PRAGMA table_info({name})")]
        out = []
        for row in idx.query(f"SELECT * FROM {name}"):
            out.append(tuple(ids[c].get(v, v) if c in ids else v for c, v in zip(cols, row) if c not in drop))
        return sorted(out, key=repr)

    by_dir = {"dir_id": dirs}
    return {
        # scanned_ns: when each folder was read (core.freshness), a time of this build
        "dirs": table("dirs", ("id", "first_unit", "last_unit", "scanned_ns"), {}),
        "files": table("files", ("id",), by_dir),
        "dir_units": sorted((dirs[d], n) for d, n in idx.query(
            "SELECT dir_id, COUNT(*) FROM units GROUP BY dir_id")),
        "units": table("units", ("id",), {"op_id": unit_path, "dir_id": dirs}),
        # seq numbers ops in the order places were finalized: early ops (made while the pool reads) differ
        "ops": table("ops", ("seq",), {"id": unit_path}),
        "problems": table("problems", (), by_dir),
        "exec_orders": table("exec_orders", (), by_dir),
        "graph_files": table("graph_files", (), by_dir),
        "overflow": table("overflow", (), by_dir),
        # a folder read in chunks records each chunk's dtypes (index/place_dtypes): their union is the folder's
        "dir_dtypes": _dtype_records(idx, dirs),
        "meta": sorted(_meta(k, v, dirs) for k, v in idx.query("SELECT key, value FROM meta") if k != "next_unit"),
    }


def _dtype_records(idx: DumpIndex, dirs: dict) -> list[tuple]:
    union: dict[tuple, object] = {}
    for d, rank, step, names in idx.query("SELECT dir_id, rank, step, names FROM dir_dtypes"):
        key = (dirs[d], rank, step)
        have = union.get(key, ())
        union[key] = None if names is None or have is None else tuple(sorted({*have, *json.loads(names)}))
    return sorted(union.items(), key=repr)


def _meta(key: str, value: str, dirs: dict) -> tuple:
    if key == "problem_files":  # {path: [dir_id, size, mtime]}
        return key, sorted((p, dirs[d], size, mtime) for p, (d, size, mtime) in json.loads(value).items())
    return key, value


def _batched_build(root: Path, cache: Path, monkeypatch) -> tuple[DumpIndex, list[str]]:
    monkeypatch.setattr(pool_mod, "BATCH_FILES", 7)  # several batches of a few folders each
    routes: list[str] = []
    real_flush = index_mod._Pool.flush

    def flush(self):
        batch = self._batch
        real_flush(self)
        if batch is not None:
            routes.append(type(batch.future).__name__)
    monkeypatch.setattr(index_mod._Pool, "flush", flush)
    idx = DumpIndex.open(str(root), cache_directory=cache, update=False)
    idx.update(workers=2)
    return idx, routes


def test_a_batched_build_stores_the_same_index_as_an_inline_one(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    inline = DumpIndex.open(str(root), cache_directory=tmp_path / "inline", update=False)
    inline.update(workers=1)  # no pool: every folder read where it was listed
    batched, routes = _batched_build(root, tmp_path / "batched", monkeypatch)
    assert routes.count("_PoolTask") >= 3  # the small folders really went to the pool, several per task
    expected, got = _rows(inline), _rows(batched)
    assert len(expected["dir_units"]) == 12  # 6 places x (payload folder + stats folder)
    assert expected["problems"] and expected["overflow"]
    for table in expected:
        assert got[table] == expected[table], table


def test_a_walk_that_outruns_the_storing_waits_and_stores_the_same_index(tmp_path, monkeypatch):
    """The backlog bound (files handed to the pool, not yet stored): the walk waits for the oldest
    folder, small batches gathered so far included, and the index is the one an unbounded build stores."""
    root = _tree(tmp_path)
    free, _ = _batched_build(root, tmp_path / "free", monkeypatch)
    monkeypatch.setattr(pool_mod, "BACKLOG_FILES_PER_WORKER", 10)  # x 2 workers; batches of 7 files
    # each batch takes 0.5 s in its worker: the walk outruns the reading on any machine, not only a slow one
    monkeypatch.setattr(pool_mod, "_scan_batch", _slow_batch)
    peaks: list[int] = []
    real_oldest = index_mod._Pool.oldest

    def oldest(self):
        peaks.append(self.backlog)
        return real_oldest(self)
    monkeypatch.setattr(index_mod._Pool, "oldest", oldest)
    bounded, routes = _batched_build(root, tmp_path / "bounded", monkeypatch)
    assert len(peaks) >= 2 and "_PoolTask" in routes  # the walk waited, with the pool reading
    # a folder is never split: the backlog is at most the bound plus one folder's files
    assert max(peaks) <= 20 + max(len(files) for _d, _s, files in os.walk(root))
    expected, got = _rows(free), _rows(bounded)
    for table in expected:
        assert got[table] == expected[table], table


_REAL_SCAN_BATCH = pool_mod._scan_batch


def _slow_batch(root, folders):
    time.sleep(0.5)
    return _REAL_SCAN_BATCH(root, folders)


def _worker_dies(root, folders):
    raise RuntimeError("worker died")


def test_a_batch_whose_worker_fails_is_read_inline(tmp_path, monkeypatch):
    root = _tree(tmp_path)
    inline = DumpIndex.open(str(root), cache_directory=tmp_path / "inline", update=False)
    inline.update(workers=1)
    monkeypatch.setattr(pool_mod, "_scan_batch", _worker_dies)
    batched, routes = _batched_build(root, tmp_path / "batched", monkeypatch)
    assert "_PoolTask" in routes
    assert _rows(batched) == _rows(inline)


@pytest.mark.parametrize("files", [3, 6])
def test_a_small_tree_starts_no_pool(tmp_path, monkeypatch, files):
    """Fewer small-folder files than one batch: read inline, no process started for them."""
    root = tmp_path / "dump"
    _stats_job(root, ranks=1, steps=1, ops=files)
    monkeypatch.setattr(pool_mod, "BATCH_FILES", 50)
    started: list[int] = []
    real = pool_mod._new_pool

    def new_pool(workers):
        started.append(workers)
        return real(workers)
    monkeypatch.setattr(pool_mod, "_new_pool", new_pool)
    idx = DumpIndex.open(str(root), cache_directory=tmp_path / "c", update=False)
    idx.update(workers=2)
    assert started == []
    assert idx.query("SELECT COUNT(*), SUM(ntensors) FROM units")[0] == (files, 2 * files)


def test_only_a_few_tasks_are_handed_to_the_pool_ahead_of_the_storing(tmp_path, monkeypatch):
    """Reading outruns storing: the results of every task handed to the workers wait in memory until
    their folder is stored.  Only ``TASKS_AHEAD_PER_WORKER`` per worker are out at a time (the task
    the storing waits for may go beyond it); the index is the same as with every task handed over."""
    root = _tree(tmp_path)
    free, free_routes = _batched_build(root, tmp_path / "free", monkeypatch)
    monkeypatch.setattr(pool_mod, "TASKS_AHEAD_PER_WORKER", 1)  # x 2 workers
    monkeypatch.setattr(pool_mod, "_scan_batch", _slow_batch)  # the walk is far ahead of the reading
    out: list[int] = []
    real_send = index_mod._Pool._send

    def send(self, task):
        real_send(self, task)
        out.append(self.in_flight)
    monkeypatch.setattr(index_mod._Pool, "_send", send)
    bounded, routes = _batched_build(root, tmp_path / "bounded", monkeypatch)
    assert routes.count("_PoolTask") >= 5  # more tasks than the window
    assert max(out) <= 2 + 1  # the window, and the task the storing waits for
    assert len(out) == routes.count("_PoolTask")  # every task was handed over, once
    expected, got = _rows(free), _rows(bounded)
    for table in expected:
        assert got[table] == expected[table], table


@pytest.mark.parametrize("paths, inside", [
    (["/d/a", "/d/b"], "/d/"),
    ([], "/d/"),
    (["/d/a", "/d/"], "/d/"),  # the folder itself: no file of it
    (["/d/a", "/d/s/b"], "/d/"),  # a file of a subfolder
    (["/d/a", "/e/b"], "/d/"),  # another folder
    (["/d/a", "/dd/b"], "/d/"),  # a folder whose name starts like it
    (["/x/d/a"], "/d/"),  # the folder's path inside another path
    (["/d/a\n/d/b", "/d/c"], "/d/"),  # a newline in a name
    (["/d/a", "/d/b/"], "/d/"),
    (["/a", "/b"], "/"),
    (["/a", "/b/c"], "/"),
    ([f"/d/{k}" for k in range(9000)], "/d/"),  # joined 4,096 at a time: every part looked at
    ([f"/d/{k}" for k in range(9000)] + ["/d/s/x"], "/d/"),
    ([f"/d/{k}" for k in range(5000)] + ["/e/x"] + [f"/d/x{k}" for k in range(5000)], "/d/"),
])
def test_all_own_is_own_of_each(paths, inside):
    """``accounting.all_own`` (one scan of the joined paths) says what asking each path does."""
    from dumpscope.core.index.accounting import all_own

    paths, inside = [p.replace("/", os.sep) for p in paths], inside.replace("/", os.sep)
    cut = len(inside)
    assert all_own(paths, inside) == all(p.startswith(inside) and os.sep not in p[cut:] and bool(p[cut:])
                                         for p in paths)
