"""The explorer's cold build and its `o` scan run in a child process (the CLI's builder and process pool):
the same ops and the same overflow document as the CLI, a fallback when the cache cannot be used, errors
said in one line, and no process left behind when the explorer ends early."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from conftest import cli_json
from test_tui_support import (INF_DOWNSTREAM, INF_OP, child_hooks, make_ms_tree, record_notes, screen_text,
                               set_env, settle, wait_for, wait_ready)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the child process path is POSIX only")

from dumpscope.core.engines import child_jobs
from synth.job_tree import write_cann_job  # noqa: E402
from dumpscope.tui.app import DumpscopeApp  # noqa: E402

SIZE = (100, 30)
#: the op columns that say what an op is (ids depend on the order folders came back from the pool)
OP_COLS = "rank, step, graph, exec_index, name, type, kind, scope, file_name, graph_only, status, nan, posinf, neginf"


def _ops(db: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(f"SELECT {OP_COLS} FROM ops ORDER BY rank, step, exec_index, name").fetchall()
    finally:
        con.close()


def _group_alive(pgid: int) -> list[int]:
    """Processes of the process group ``pgid`` still running (zombies waiting to be reaped are not)."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        if ")" not in stat:  # a process torn down while it was read: /proc gave an empty stat
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry))
    return alive


def _group_gone(pgid: int, limit: float = 30.0) -> bool:
    """The group was sent SIGKILL: its processes are gone once the kernel has delivered it (a worker
    not yet scheduled on a loaded machine can show a moment longer)."""
    import time

    deadline = time.monotonic() + limit
    while _group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def big_tree(tmp_path, monkeypatch) -> Path:
    """Two steps, one folder of 900 files (read by the builder's process pool) and a small one."""
    set_env(monkeypatch, tmp_path)
    ops = [(("Add", "Mul", "ReLU")[i % 3], f"Default/blk{i // 50}/{('Add', 'Mul', 'ReLU')[i % 3]}-op{i}")
           for i in range(450)]
    make_ms_tree(tmp_path / "t", steps=(0,), inf_op=None, ops=ops)
    return make_ms_tree(tmp_path / "t", steps=(1,), inf_op=ops[7][1], ops=ops[:20])


async def test_built_in_a_child_with_the_same_ops_as_the_cli(big_tree, tmp_path, capsys):
    from dumpscope.core.index.cache import index_path

    app = DumpscopeApp(str(big_tree), display_name="t")
    raised = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await wait_for(pilot, lambda: not app.progress, "the build to end")
        await settle(pilot)
        assert len(app._children) == 1 and not app._children[0].alive()  # built by a child, now ended
        assert not any("failed" in n.message for n in raised)
        db = app.q.index.db_path
        assert db == str(index_path(str(big_tree)))
        assert app.q.count_ops() == 470
        assert "450 ops" in screen_text(app)  # step 0, the lowest
    # the CLI's own build (another cache dir) stores the same ops
    cli_cache = tmp_path / "cli-cache"
    cli_json(capsys, "summary", str(big_tree), "--cache-dir", str(cli_cache))
    assert _ops(db) == _ops(str(index_path(str(big_tree), cli_cache)))


async def test_a_build_started_before_the_explorer_is_the_one_used(big_tree, tmp_path, monkeypatch):
    """``dumpscope PATH`` starts a cold build before Textual is imported (``prestart_build``)."""
    early = child_jobs.prestart_build(str(big_tree))
    assert early is not None
    app = DumpscopeApp(str(big_tree), display_name="t", early_build=early)
    raised = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await settle(pilot)
        assert app._children == [early] and not early.alive()  # no second child
        assert app.q.count_ops() == 470
        assert not any(n.severity == "warning" for n in raised)
    assert child_jobs.prestart_build(str(big_tree)) is None  # an index file exists: the explorer decides
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert child_jobs.prestart_build(str(big_tree), cache_dir=str(blocker / "cache")) is None


async def test_a_build_started_before_the_explorer_ends_with_it(big_tree, tmp_path, monkeypatch):
    child_hooks(monkeypatch, "stall_drain")
    early = child_jobs.prestart_build(str(big_tree))
    app = DumpscopeApp(str(big_tree), display_name="t", early_build=early)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(_group_alive(early.pid)) >= 2, "the child's pool workers")
        await pilot.press("q")
    assert _group_gone(early.pid)


async def test_unusable_cache_dir_builds_in_memory_with_one_notice(tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    dump = make_ms_tree(tmp_path / "t", steps=(0, 1))
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    monkeypatch.setenv("DUMPSCOPE_CACHE_DIR", str(blocker / "cache"))  # cannot be created
    app = DumpscopeApp(str(dump), display_name="t")
    raised = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        assert app.q.index.db_path == ":memory:" and app._children == []
        assert app.q.count_ops() == 12
        notes = [n.message for n in raised if "in-memory index" in n.message]
        assert len(notes) == 1, [n.message for n in raised]
        await pilot.press("o")  # an index in memory is scanned in the explorer's thread
        await settle(pilot)
        assert app._children == [] and app.overflow_doc is not None
        assert {(r["step"], r["name"]) for r in app.overflow_doc["ops"]} == {
            (s, n) for s in (0, 1) for n in (INF_OP, INF_DOWNSTREAM)}


async def test_cache_failing_in_the_child_builds_in_memory_with_one_notice(tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    child_hooks(monkeypatch, "max_page_count=12")  # the cache disk fills up half-way through the child's build
    ops = [("Add", f"Default/blk{i // 50}/Add-op{i}") for i in range(300)]
    dump = make_ms_tree(tmp_path / "t", steps=(0,), inf_op=None, ops=ops)
    app = DumpscopeApp(str(dump), display_name="t")
    raised = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await wait_for(pilot, lambda: app.q.index.db_path == ":memory:", "the in-memory index")
        await settle(pilot)
        assert len(app._children) == 1
        assert app.q.count_ops() == 300
        notes = [n.message for n in raised if n.severity == "warning"]
        assert len(notes) == 1 and "full" in notes[0] and "in-memory index" in notes[0], notes


@pytest.mark.parametrize("hook, said", [("fail=the test's bug", "RuntimeError: the test's bug"),
                                        ("crash", "MemoryError: the test's crash")])
async def test_builder_errors_are_said_in_one_line_and_the_explorer_still_opens(tmp_path, monkeypatch, hook, said):
    set_env(monkeypatch, tmp_path)
    child_hooks(monkeypatch, hook)
    dump = make_ms_tree(tmp_path / "t", steps=(0, 1))
    app = DumpscopeApp(str(dump), display_name="t")
    raised = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        notes = [n.message for n in raised if n.severity == "warning"]
        assert len(notes) == 1 and said in notes[0] and "\n" not in notes[0], notes
        assert app.q.count_ops() == 12  # built in the explorer's own thread instead


async def test_no_process_left_when_the_explorer_ends_during_the_build(big_tree, tmp_path, monkeypatch):
    pid_file = tmp_path / "child.pid"
    # the child stops once its pool has the big folder: its workers are running
    child_hooks(monkeypatch, f"pid_file={pid_file}", "stall_drain")
    app = DumpscopeApp(str(big_tree), display_name="t")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: pid_file.exists(), "the child to start")
        pid = int(pid_file.read_text())
        await wait_for(pilot, lambda: len(_group_alive(pid)) >= 2, "the child's pool workers")
        assert app.q is None and "indexing" in screen_text(app)
        await pilot.press("q")
    assert _group_gone(pid)


@pytest.fixture
def job(tmp_path, monkeypatch) -> Path:
    set_env(monkeypatch, tmp_path)
    return write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1, 2), overflow={(1, 1)})


async def test_o_scans_in_a_child_and_equals_the_cli(job, tmp_path, capsys):
    app = DumpscopeApp(str(job), display_name="job")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        before = len(app._children)
        await pilot.press("o")
        await settle(pilot)
        assert len(app._children) == before + 1  # the scan ran in a child
        doc = app.overflow_doc
        assert doc is not None and doc["ops"]
        assert app.screen.table.rows[0]["name"] == doc["ops"][0]["name"]
    # the CLI on its own cold index: the same document (op ids are the index's own numbering)
    cold = cli_json(capsys, "overflow", str(job), "--cache-dir", str(tmp_path / "cli-cache"))
    assert _without_ids(doc) == _without_ids(cold)
    # the CLI on the explorer's index, where the child kept its counts: exactly the same document
    assert cli_json(capsys, "overflow", str(job)) == doc


def _without_ids(doc: dict) -> dict:
    return dict(doc, ops=[{k: v for k, v in r.items() if k != "op_id"} for r in doc["ops"]])


async def test_o_says_scanning_until_the_child_ends_and_is_killed_on_quit(job, tmp_path, monkeypatch):
    gate = tmp_path / "gate"
    pid_file = tmp_path / "scan.pid"
    app = DumpscopeApp(str(job), display_name="job")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        child_hooks(monkeypatch, f"gate={gate}", f"pid_file={pid_file}")  # from here on: the o scan's child
        await pilot.press("o")
        await wait_for(pilot, lambda: pid_file.exists(), "the scan's child")
        await wait_for(pilot, lambda: "scanning" in screen_text(app), "the scan's screen")
        text = screen_text(app)
        assert "scanning" in text and "no overflow" not in text and "nothing found" not in text
        pid = int(pid_file.read_text())
        await pilot.press("q")
    assert _group_gone(pid)
    assert not gate.exists()


async def test_o_scan_child_error_is_said_in_one_line(job, monkeypatch):
    app = DumpscopeApp(str(job), display_name="job")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        child_hooks(monkeypatch, "fail=the scan's bug")
        await pilot.press("o")
        await settle(pilot)
        text = screen_text(app)
        assert "scan failed" in text and "the scan's bug" in text
        assert "no overflow" not in text and "nothing found" not in text


def test_child_kill_without_a_start_is_harmless(tmp_path):
    """``ChildJob.kill`` on a child that already ended (the explorer's unmount after a finished build)."""
    job = child_jobs.ChildJob(["overflow", str(tmp_path), str(tmp_path / "missing" / "index.sqlite")])
    events = list(job.events())
    assert events and events[-1]["event"] == "error"
    job.kill()
    job.kill()
    assert not job.alive()
