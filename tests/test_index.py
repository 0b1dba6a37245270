"""The index: incremental updates, bad folders, cache placement, read-only guarantee."""

from __future__ import annotations

import hashlib
import os

import numpy as np

from dumpscope.core.layouts import walk
from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.query import DumpQuery, open_query


def _ms_file(d, op_type, scoped, ts, io, slot, arr):
    d.mkdir(parents=True, exist_ok=True)
    name = f"{op_type}.{scoped.replace('/', '_')}.0.0.{ts}.{io}.{slot}.DefaultFormat.float32.npy"
    np.save(d / name, arr)


def make_tree(root, steps=(0,)):
    for step in steps:
        d = root / "rank_0" / "Net" / "0" / str(step)
        x = np.arange(6, dtype=np.float32).reshape(2, 3) + step
        _ms_file(d, "Add", "Default/Add-op0", 1000000000000000 + 10 * step, "input", 0, x)
        _ms_file(d, "Add", "Default/Add-op0", 1000000000000001 + 10 * step, "output", 0, x + 1)
        _ms_file(d, "Exp", "Default/Exp-op0", 1000000000000002 + 10 * step, "output", 0, np.exp(x))
    order = root / "rank_0" / "execution_order"
    order.mkdir(parents=True, exist_ok=True)
    (order / "ms_execution_order_graph_0.csv").write_text(
        "NodeExecutionOrder-FullNameWithScope\nDefault/Add-op0\nDefault/Exp-op0\n")


def digest(root) -> str:
    h = hashlib.sha256()
    for dirpath, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files) + sorted(dirs):
            st = os.lstat(os.path.join(dirpath, name))
            h.update(f"{dirpath}/{name}|{st.st_size}|{st.st_mtime_ns}|{st.st_mode}\n".encode())
    return h.hexdigest()


def test_build_and_incremental_update_picks_up_new_step(tmp_path):
    make_tree(tmp_path, steps=(0,))
    q = open_query(str(tmp_path))
    assert q.steps() == [0]
    assert [op.name for op in q.ops(0, 0)] == ["Default/Add-op0", "Default/Exp-op0"]
    make_tree(tmp_path, steps=(1,))
    prog = q.index.update()
    assert prog.changed_dirs >= 1
    assert q.steps() == [0, 1]
    assert q.count_ops(0, 1) == 2
    # an unchanged tree re-reads no folder
    assert q.index.update().changed_dirs == 0


def test_removed_folder_disappears(tmp_path):
    make_tree(tmp_path, steps=(0, 1))
    q = open_query(str(tmp_path))
    assert q.steps() == [0, 1]
    for f in (tmp_path / "rank_0/Net/0/1").iterdir():
        f.unlink()
    (tmp_path / "rank_0/Net/0/1").rmdir()
    q.index.update()
    assert q.steps() == [0]


def test_index_never_writes_into_the_tree(tmp_path):
    make_tree(tmp_path, steps=(0, 1))
    before = digest(tmp_path)
    q = open_query(str(tmp_path))
    for op in q.ops(0, 0):
        for t in q.tensors(op.id):
            q.tensor_stats(t)
    assert digest(tmp_path) == before
    assert not str(q.index.db_path).startswith(str(tmp_path))


def test_symlink_loop_is_a_problem_not_a_hang(tmp_path):
    make_tree(tmp_path)
    os.symlink(tmp_path / "rank_0", tmp_path / "rank_0" / "Net" / "loop")
    q = open_query(str(tmp_path))
    assert q.count_ops(0, 0) == 2
    assert any("symlink loop" in p["error"] for p in q.problems())


def test_unreadable_folder_is_a_problem(tmp_path, monkeypatch):
    make_tree(tmp_path)
    bad = tmp_path / "rank_0" / "Net" / "0" / "9"
    bad.mkdir()
    real_scandir = os.scandir

    def scandir(path):
        if os.fspath(path) == str(bad):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(walk.os, "scandir", scandir)
    q = DumpQuery(DumpIndex.open(str(tmp_path), use_cache=False))
    assert q.count_ops(0, 0) == 2
    assert [p for p in q.problems() if p["path"] == str(bad) and "permission denied" in p["error"]]


def test_corrupt_cache_file_is_rebuilt(tmp_path, monkeypatch):
    make_tree(tmp_path)
    cache = tmp_path.parent / (tmp_path.name + "-cache")
    q = DumpQuery(DumpIndex.open(str(tmp_path), cache_directory=cache))
    db = q.index.db_path
    q.index.close()
    with open(db, "wb") as fh:
        fh.write(b"this is not sqlite" * 100)
    q = DumpQuery(DumpIndex.open(str(tmp_path), cache_directory=cache))
    assert q.count_ops(0, 0) == 2


def test_missing_root_raises_one_line(tmp_path):
    import pytest

    with pytest.raises(FileNotFoundError) as exc:
        DumpIndex.open(str(tmp_path / "nope"))
    assert "no such file or directory" in str(exc.value) and "\n" not in str(exc.value)


def test_short_doc_style_names_take_full_names_from_the_exec_order_csv(tmp_path):
    d = tmp_path / "rank_0" / "Net" / "0" / "0"
    x = np.ones((2, 2), np.float32)
    # r1.3–2.5 doc style: only the last scope segment in the file name, timestamps out of CSV order
    _ms_file(d, "Exp", "Exp-op3", 1000000000000001, "output", 0, x)
    _ms_file(d, "Conv2D", "Conv2D-op12", 1000000000000002, "output", 0, x)
    order = tmp_path / "rank_0" / "execution_order"
    order.mkdir(parents=True)
    (order / "ms_execution_order_graph_0.csv").write_text(
        "NodeExecutionOrder-FullNameWithScope\nDefault/net/conv1/Conv2D-op12\nDefault/net/Exp-op3\n")
    q = open_query(str(tmp_path))
    assert [o.name for o in q.ops(0, 0)] == ["Default/net/conv1/Conv2D-op12", "Default/net/Exp-op3"]


def test_warm_update_lists_no_unchanged_folder_and_sees_new_files(tmp_path, monkeypatch):
    make_tree(tmp_path, steps=(0,))
    old = 1_600_000_000_000_000_000  # folders last changed long ago (recent ones are always listed)
    for d in [tmp_path, *[p for p in tmp_path.rglob("*") if p.is_dir()]]:
        os.utime(d, ns=(old, old))
    q = open_query(str(tmp_path))
    listed: list[str] = []
    real_scandir = os.scandir

    def scandir(path):
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(walk.os, "scandir", scandir)
    assert q.index.update().changed_dirs == 0
    assert listed == []  # one stat per folder, no listing
    step_dir = tmp_path / "rank_0" / "Net" / "0" / "0"
    _ms_file(step_dir, "Relu", "Default/Relu-op0", 1000000000000009, "output", 0, np.ones(3, np.float32))
    os.utime(step_dir, ns=(os.stat(step_dir).st_atime_ns, os.stat(step_dir).st_mtime_ns + 1_000_000))
    assert q.index.update().changed_dirs == 1
    assert listed == [str(step_dir)]
    assert "Default_Relu-op0" in {op.file_name for op in q.ops(0, 0)}


def test_paged_ops_equal_the_full_list(tmp_path):
    make_tree(tmp_path, steps=(0,))
    d = tmp_path / "rank_0" / "Net" / "0" / "0"
    for i in range(40):
        _ms_file(d, "Relu", f"Default/Relu-op{i}", 1000000000000100 + i, "output", 0, np.ones(2, np.float32))
    q = open_query(str(tmp_path))
    full = [op.id for op in q.ops(0, 0)]
    paged = [op.id for off in range(0, len(full), 7) for op in q.ops(0, 0, limit=7, offset=off)]
    assert paged == full and len(full) == 42


def test_long_builds_show_partial_results_to_a_reader(tmp_path, monkeypatch):
    import dumpscope.core.index.dump_index as index_mod

    make_tree(tmp_path / "tree", steps=(0, 1, 2, 3))
    monkeypatch.setattr(index_mod, "PARTIAL_AFTER_S", 0.0)
    cache = tmp_path / "cache"
    idx = DumpIndex.open(str(tmp_path / "tree"), cache_directory=cache, update=False)
    seen: list[int] = []

    def partial(prog):
        reader = DumpQuery(DumpIndex(str(tmp_path / "tree"), idx.db_path))
        seen.append(reader.count_ops())
        reader.index.close()

    idx.update(partial=partial)
    assert seen and seen[0] >= 1
    assert all(a <= b for a, b in zip(seen, seen[1:]))  # partial views only grow
    assert DumpQuery(idx).count_ops() == 8


def test_a_stalled_folder_listing_is_a_problem_not_a_hang(tmp_path, monkeypatch):
    import threading

    make_tree(tmp_path, steps=(0, 1))
    stuck = str(tmp_path / "rank_0" / "Net" / "0" / "1")
    release = threading.Event()
    real_scandir = os.scandir

    def scandir(path):
        if os.fspath(path) == stuck:
            release.wait(20)  # a hung network mount
        return real_scandir(path)

    monkeypatch.setattr(walk.os, "scandir", scandir)
    monkeypatch.setattr(walk, "STALL_S", 0.5)
    try:
        q = DumpQuery(DumpIndex.open(str(tmp_path), use_cache=False))
        assert q.steps() == [0]
        assert [p for p in q.problems() if p["path"] == stuck and "stalled" in p["error"]]
    finally:
        release.set()


def test_big_folders_read_by_the_pool_report_bad_names_once(tmp_path):
    import dumpscope.core.index.dump_index as index_mod

    d = tmp_path / "rank_0" / "Net" / "0" / "0"
    arr = np.ones(2, np.float32)
    for i in range(index_mod.PARALLEL_MIN_FILES + 5):
        _ms_file(d, "Relu", f"Default/Relu-op{i}", 1000000000000000 + i, "output", 0, arr)
    bad = os.path.join(os.fsencode(str(d)), b"Relu.\xff\xfe.0.0.1000000000000000.output.0.DefaultFormat.float32.npy")
    with open(bad, "wb") as fh:
        fh.write(b"x")
    (d / "mapping.csv").write_text("123,not a dump name\ngarbage line\n")
    idx = DumpIndex.open(str(tmp_path), use_cache=False, update=False)
    idx.update(workers=2)
    q = DumpQuery(idx)
    assert q.count_ops(0, 0) == index_mod.PARALLEL_MIN_FILES + 5
    problems = q.problems()
    assert len([p for p in problems if "UTF-8" in p["error"]]) == 1
    mapping = [p for p in problems if p["path"].endswith("mapping.csv")]
    assert len(mapping) == len({(p["path"], p["error"]) for p in mapping})
