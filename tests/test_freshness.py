"""Files changed in place after indexing (issue 20): a rewrite at the same or a larger size, with its
old mtime put back, is seen by the next command; the check is time-boxed and says how far it got."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dumpscope.core.index import freshness
from dumpscope.core.index.dump_index import DumpIndex
from synth.faults import rewrite_in_place
from synth.trees import write_mindspore_tree
from dumpscope.tui.cli.entry import main


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.fixture
def ms(tmp_path) -> Path:
    return write_mindspore_tree(tmp_path / "dump", steps=(0,)).parent


def _npy(a: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _victim(ms: Path) -> Path:
    return sorted(p for p in ms.rglob("*.npy") if ".output.0." in p.name)[2]


def _stats(ms: Path, victim: Path, cache: list[str], capsys) -> tuple[list[int], float]:
    doc = json.loads(run(["summary", str(ms), "--json", *cache], capsys))
    assert doc["changes"]["complete"], doc["changes"]
    op = victim.name.split(".")[1]
    out = json.loads(run(["stats", str(ms), op, "--json", *cache], capsys))
    assert out["io"] == "output" and out["slot"] == 0
    return out["shape"], out["max"]


@pytest.mark.parametrize("grow", [False, True])
def test_a_file_rewritten_in_place_with_its_old_mtime_is_read_again(ms, tmp_path, capsys, grow):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    victim = _victim(ms)
    old = np.load(victim)
    shape, top = _stats(ms, victim, cache, capsys)
    assert shape == list(old.shape) and top == pytest.approx(float(old.max()), rel=1e-6)
    # the same bytes in another shape, or three times as many: only the header, read again, tells
    new = np.full(old.shape[::-1] if not grow else (old.size * 3,), 1234.5, dtype=old.dtype)
    assert new.shape != old.shape
    data = _npy(new)
    assert (len(data) == victim.stat().st_size) != grow  # same size, or larger
    folder_mtime = victim.parent.stat().st_mtime_ns
    mtime = victim.stat().st_mtime_ns
    rewrite_in_place(victim, data)
    assert victim.stat().st_mtime_ns == mtime and victim.parent.stat().st_mtime_ns == folder_mtime
    assert _stats(ms, victim, cache, capsys) == (list(new.shape), 1234.5)  # the file as it is now
    # ... and the index itself was brought up to date (show lists what the index holds)
    shown = json.loads(run(["show", str(ms), victim.name.split(".")[1], "--json", *cache], capsys))["op"]
    assert [t["shape"] for t in shown["tensors"] if t["file"] == str(victim)] == [list(new.shape)]


def test_truncated_then_restored_file_with_old_mtime(ms, tmp_path, capsys):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    victim = _victim(ms)
    data = victim.read_bytes()
    assert json.loads(run(["summary", str(ms), "--json", *cache], capsys))["problems"] == []
    rewrite_in_place(victim, data[:-8])
    problems = json.loads(run(["summary", str(ms), "--json", *cache], capsys))["problems"]
    assert [p["path"] for p in problems] == [str(victim)]
    rewrite_in_place(victim, data)
    assert json.loads(run(["summary", str(ms), "--json", *cache], capsys))["problems"] == []


def test_an_unchanged_tree_is_not_read_again(ms, tmp_path):
    """No slack that re-reads: a tree written just before indexing is read once."""
    cache = tmp_path / "cache"
    index = DumpIndex.open(str(ms), cache_directory=cache)
    try:
        prog = index.update()
        assert prog.changed_dirs == 0 and index.freshness.complete and index.freshness.changed == 0
        assert index.freshness.files > 0
    finally:
        index.close()


def test_the_check_is_time_boxed_continues_next_run_and_says_so(ms, tmp_path, capsys, monkeypatch):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    run(["summary", str(ms), "--json", *cache], capsys)
    monkeypatch.setattr(freshness, "_BATCH", 2)
    monkeypatch.setattr(DumpIndex, "check_budget_s", 0.0)  # one batch per run
    victim = _victim(ms)
    rewrite_in_place(victim, victim.read_bytes()[:-8])
    seen = []
    for _ in range(40):
        doc = json.loads(run(["summary", str(ms), "--json", *cache], capsys))
        changes = doc["changes"]
        seen.append(bool(doc["problems"]))
        if doc["problems"]:
            assert changes["changed"] == 1
            break
        assert not changes["complete"] and changes["checked"] == 2 and changes["files"] > 2
    assert seen[-1] and len(seen) > 1  # found by a later run, where the previous one stopped
    out = run(["summary", str(ms), *cache], capsys)
    assert "changes in place: 2 of" in out and "--recheck" in out
    out = run(["summary", str(ms), "--recheck", *cache], capsys)
    assert "changes in place" not in out
    doc = json.loads(run(["summary", str(ms), "--json", "--recheck", *cache], capsys))
    assert doc["changes"]["complete"] and doc["changes"]["checked"] == doc["changes"]["files"]


def test_whole_second_filesystem_times_count_the_same_second_as_changed():
    read = 1_700_000_000_400_000_000  # read started 0.4 s into a second
    assert freshness.changed_since(read + 1, read) and freshness.changed_since(read, read)
    assert not freshness.changed_since(read - 1, read)
    # a FAT or network mount keeping seconds: the same second may be after the read, so it counts
    assert freshness.changed_since(1_700_000_000_000_000_000, read)
    assert not freshness.changed_since(1_699_999_999_000_000_000, read)
    assert freshness.changed_since(1_700_000_000_000_000_000, 1_700_000_001_500_000_000)  # FAT: 2 s


def test_read_start_is_after_every_earlier_write(tmp_path):
    """The read time waits for the file clock to tick: a file written just before has an earlier
    ctime, one written just after has the same or a later one."""
    before = tmp_path / "before"
    before.write_bytes(b"x")
    start = freshness.read_start_ns()
    after = tmp_path / "after"
    after.write_bytes(b"y")
    assert not freshness.changed_since(before.stat().st_ctime_ns, start)
    assert freshness.changed_since(after.stat().st_ctime_ns, start)


def _fds() -> int:
    import os

    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("n_files", [1, 6])  # 3 paths: by full path; 8: from the folder's descriptor
def test_changed_count_sees_each_kind_of_file_either_way(tmp_path, n_files):
    """Files of the folder (by name from its descriptor, or by full path below ``_FD_MIN_FILES``), in a
    subfolder of it (msprobe's dump_tensor_data), outside it (a graph file elsewhere), and gone."""
    import os

    folder = tmp_path / "dir"
    (folder / "sub").mkdir(parents=True)
    outside = tmp_path / "graph.txt"
    files = [folder / f"f{i}" for i in range(n_files)] + [folder / "sub" / "s", outside]
    for f in files:
        f.write_bytes(b"x")
    latest = max(f.stat().st_ctime_ns for f in files)
    paths = [str(f) for f in files]
    before = _fds() if os.path.isdir("/proc/self/fd") else None
    assert freshness.changed_count(str(folder), paths, latest + 1) == 0
    assert freshness.changed_count(str(folder), paths, None) == len(paths)  # never read: all of them
    for f in (files[0], files[-2], files[-1]):  # at the read time or after it: changed
        assert freshness.changed_count(str(folder), [str(f)], f.stat().st_ctime_ns) == 1
    one = files[0].stat().st_ctime_ns
    assert freshness.changed_count(str(folder), paths, one) == sum(f.stat().st_ctime_ns >= one for f in files)
    files[1].unlink()
    assert freshness.changed_count(str(folder), paths, latest + 1) == 1  # gone
    assert freshness.changed_count(str(tmp_path / "no-such-folder"), paths, latest + 1) == 1  # by full path
    if before is not None:
        assert _fds() == before  # the folder's descriptor is closed


def test_the_time_boxed_check_counts_the_files_of_folders_split_between_batches(ms, tmp_path, monkeypatch):
    """Batches of 3 files cut folders in two: every file is still looked at once and counted."""
    cache = tmp_path / "cache"
    DumpIndex.open(str(ms), cache_directory=cache).close()
    monkeypatch.setattr(freshness, "_BATCH", 3)
    index = DumpIndex.open(str(ms), cache_directory=cache, update=False)
    try:
        looked: list[str] = []
        real = freshness.changed_count
        monkeypatch.setattr(freshness, "changed_count", lambda folder, paths, read_ns: looked.extend(paths)
                            or real(folder, paths, read_ns))
        stale, report = freshness.check(index, None)
        files = [p for (p,) in index.query("SELECT path FROM files ORDER BY id")]
        assert not stale and report.complete and report.changed == 0
        assert looked == files and sum(report.per_dir.values()) == len(files) > 3
    finally:
        index.close()
