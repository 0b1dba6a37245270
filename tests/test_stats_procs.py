"""Big float32/float64 tensors are reduced in forked processes when the process is single-threaded
(``dumpscope stats``): the answer is bit-for-bit the one-thread answer, whatever happens to the
children (killed, erring, garbled output), and nothing forks where it must not (threads alive,
``DUMPSCOPE_WORKERS=1``).  No timing here: speed is ``benchmarks/bench_stats.py``'s business."""

from __future__ import annotations

import dataclasses
import mmap
import os
import signal
import threading
import time

import numpy as np
import pytest

from dumpscope.core.tensors import stats as S
from dumpscope.core.tensors import stats_float as F
from dumpscope.core.tensors import stats_procs as P
from dumpscope.core.tensors.stats import compute_stats, compute_stats_chunks
from dumpscope.core.tensors import load as tensor_io
from dumpscope.core.tensors.load import FileChunks, TensorLoadError
from test_stats_blocks import threads_reducing
from test_stats_speed_paths import check

BLOCK = 4096
CHUNK = 3 * BLOCK  # chunks a multiple of the block: the process path may split them


@pytest.fixture
def small(monkeypatch):
    """Blocks of 4,096 elements (sub-blocks of 1,024), workers (threads or processes) from 20,000 elements on."""
    monkeypatch.setattr(S, "_BLOCK", BLOCK)
    monkeypatch.setattr(F, "_FSUB", 1024)
    monkeypatch.setattr(S, "PARALLEL_MIN_ELEMS", 20_000)
    monkeypatch.setattr(S, "PROCESS_MIN_ELEMS", 20_000)
    return monkeypatch


@pytest.fixture
def forks(monkeypatch):
    """The pids this process forked (children record nothing: they never return to the test)."""
    pids: list[int] = []
    real = os.fork

    def fork():
        pid = real()
        if pid:
            pids.append(pid)
        return pid
    monkeypatch.setattr(P.os, "fork", fork)
    yield pids
    for pid in pids:  # every child was reaped: waiting again finds none
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _data(dtype: str, n: int = 61_000, log: bool = False) -> np.ndarray:
    rng = np.random.default_rng(21)
    x = rng.standard_normal(n) * 3 + 2.5  # a mean the first block is not centred on
    if log:
        x[::997] *= 1e7  # heavy tails: log bins
    x = x.astype(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    x[[3, 9_000, 9_001, 30_123, n - 2]] = [np.nan, np.inf, -np.inf, np.nan, np.inf]  # in several blocks
    x[[17, 18, 44_000]] = 0.0
    x[40_000] = -0.0
    x[[50_000, 50_001]] = [tiny, -7 * tiny]  # subnormals
    return x


def _asdict(x: np.ndarray, workers: int, monkeypatch, **kw) -> dict:
    monkeypatch.setenv("DUMPSCOPE_WORKERS", str(workers))
    return dataclasses.asdict(compute_stats(x, chunk_elems=CHUNK, first_bad_n=4, **kw))


def _parent_blocks(monkeypatch) -> list[int]:
    """Offsets of the blocks pass 1 reduced in *this* process (children count in their own copy)."""
    me = os.getpid()
    seen: list[int] = []
    real = S._FloatAcc.add

    def add(self, block, offset):
        if os.getpid() == me:
            seen.append(offset)
        return real(self, block, offset)
    monkeypatch.setattr(S._FloatAcc, "add", add)
    return seen


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("log", [False, True])
def test_processes_give_the_one_thread_answer_bit_for_bit(dtype, log, small, forks):
    x = _data(dtype, log=log)
    one = _asdict(x, 1, small)
    assert not forks
    assert _asdict(x, 3, small) == one  # with work stealing: whoever reduced which block
    small.setattr(P, "STEAL", False)
    parent = _parent_blocks(small)
    procs = _asdict(x, 3, small)
    assert len(forks) == 4  # three workers: this process and two children, twice
    nblocks = -(-x.size // BLOCK)
    assert 0 < len(parent) < nblocks // 2  # the children really reduced most blocks
    assert procs == one
    assert one["hist_log"] is log
    st = S.TensorStats(**procs)
    check(st, x)
    bad = np.argwhere(~np.isfinite(x))[:4]
    assert st.first_bad == [tuple(int(i) for i in ix) for ix in bad]
    assert st.zeros == 4 and st.nan == 2 and st.posinf == 2 and st.neginf == 1


def test_shaped_tensor_first_bad_are_nd_indices(small, forks):
    x = _data("float32", n=64_000).reshape(16, 40, 100)
    one = _asdict(x, 1, small)
    assert _asdict(x, 2, small) == one and forks
    assert one["first_bad"][0] == (0, 0, 3) and one["shape"] == (16, 40, 100)


@pytest.mark.parametrize("phase", [1, 2])
@pytest.mark.parametrize("how", ["kill", "raise", "garble", "bad_json"])
def test_a_failing_child_changes_nothing(phase, how, small, forks):
    x = _data("float32")
    one = _asdict(x, 1, small)
    victim = -(-x.size // BLOCK) - 2  # a block of the last child

    def hook(msg, b, hints, slot):
        if msg["pass"] == phase and b == victim:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if how == "raise":
                raise RuntimeError("child fails")
            return b"not json\n" if how == "bad_json" else b'[%d, {"n": "x"}]\n' % b
        return None
    small.setattr(P, "_fault_hook", hook)
    assert _asdict(x, 3, small) == one
    assert len(forks) == 2


def test_no_fork_while_another_thread_runs(small, forks):
    x = _data("float64")
    one = _asdict(x, 1, small)
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    try:
        assert not P.can_fork()
        names = threads_reducing(small)
        assert _asdict(x, 3, small) == one
    finally:
        stop.set()
        helper.join()
    assert not forks  # the thread path instead
    assert any(n.startswith("dumpscope-stats") for n in names)


def test_one_worker_or_small_tensor_or_odd_chunks_never_fork(small, forks):
    x = _data("float32")
    _asdict(x, 1, small)  # DUMPSCOPE_WORKERS=1
    small.setenv("DUMPSCOPE_WORKERS", "3")
    compute_stats(x[:19_000], chunk_elems=CHUNK)  # under PARALLEL_MIN_ELEMS
    small.setattr(S, "PROCESS_MIN_ELEMS", 40_000)
    names = threads_reducing(small)
    assert _asdict(x[:30_000], 3, small) == _asdict(x[:30_000], 1, small)  # under PROCESS_MIN_ELEMS:
    assert names == {threading.current_thread().name}  # one thread (threads cost more than they save)
    small.setattr(S, "PROCESS_MIN_ELEMS", 20_000)
    small.setenv("DUMPSCOPE_WORKERS", "3")
    compute_stats(x, chunk_elems=CHUNK + 1)  # chunks that cut blocks short: not split by range
    compute_stats(x[::2], chunk_elems=CHUNK)  # not contiguous
    platform = P.sys.platform
    small.setattr(P.sys, "platform", "darwin")  # not fork-safe there
    assert _asdict(x, 3, small) == _asdict(x, 1, small)
    small.setattr(P.sys, "platform", platform)
    small.setenv("DUMPSCOPE_WORKERS", "3")
    assert not forks
    compute_stats(x, chunk_elems=CHUNK)
    assert forks


def test_keyboard_interrupt_ends_the_children(small, forks):
    x = _data("float32")
    me = os.getpid()
    real = S._FloatAcc.add
    calls = []

    def add(self, block, offset):
        if os.getpid() == me:
            calls.append(offset)
            if len(calls) == 3:  # in this process's own range, children running
                raise KeyboardInterrupt
        return real(self, block, offset)
    small.setattr(S._FloatAcc, "add", add)
    small.setenv("DUMPSCOPE_WORKERS", "3")
    with pytest.raises(KeyboardInterrupt):
        compute_stats(x, chunk_elems=CHUNK)
    assert len(forks) == 2  # and the fixture checks they were reaped


def test_file_chunks_split_over_processes(small, forks, tmp_path):
    x = _data("float64", n=55_000)
    path = tmp_path / "t.bin"
    path.write_bytes(b"HEAD" + x.tobytes())
    src = FileChunks(str(path), 4, x.size, np.dtype(np.float64), chunk=CHUNK)
    assert np.array_equal(src.read_range(10, 20), x[10:20], equal_nan=True)
    small.setenv("DUMPSCOPE_WORKERS", "1")
    one = dataclasses.asdict(compute_stats_chunks(src, x.shape, "float64", chunk_elems=CHUNK))
    small.setenv("DUMPSCOPE_WORKERS", "2")
    assert dataclasses.asdict(compute_stats_chunks(src, x.shape, "float64", chunk_elems=CHUNK)) == one
    assert len(forks) == 1
    assert one == dataclasses.asdict(compute_stats(x, chunk_elems=CHUNK))  # the same blocks as an array

    def no_mmap(*a, **k):
        raise OSError("no mmap here")
    small.setattr(tensor_io.mmap, "mmap", no_mmap)  # a file system without mmap: plain reads, same answer
    assert np.array_equal(src.read_range(7, 9000), x[7:9000], equal_nan=True)
    assert dataclasses.asdict(compute_stats_chunks(src, x.shape, "float64", chunk_elems=CHUNK)) == one


def test_file_truncated_under_the_children_is_one_error(small, forks, tmp_path):
    x = _data("float32")
    path = tmp_path / "t.bin"
    path.write_bytes(x.tobytes())
    src = FileChunks(str(path), 0, x.size + 5000, np.dtype(np.float32), chunk=CHUNK)  # claims more than is there
    small.setenv("DUMPSCOPE_WORKERS", "2")
    with pytest.raises(TensorLoadError, match="truncated"):
        compute_stats_chunks(src, (x.size + 5000,), "float32", chunk_elems=CHUNK)


def test_block_procs_results_in_block_order_and_split_ranges(forks):
    assert P.split_ranges(1, 11, 3) == [(1, 4), (4, 7), (7, 11)]
    assert P.split_ranges(0, 2, 4) == [(0, 1), (1, 2)]
    procs = P.BlockProcs.start(lambda msg, b: [msg["k"], b, os.getpid()], P.split_ranges(0, 9, 3), steal=False)
    assert procs is not None
    with procs:
        for k in (1, 2):  # two phases, the same children
            got = list(procs.run({"k": k}))
            assert [b for b, _ in got] == list(range(9))
            assert all(r[0] == k and r[1] == b for b, r in got)
            assert len({r[2] for _, r in got}) == 3  # three processes answered
    assert len(forks) == 2


@pytest.mark.parametrize("how", ["kill", "garble"])
def test_block_procs_compute_what_a_failed_child_did_not_deliver(how, forks, monkeypatch):
    me = os.getpid()

    def hook(msg, b, hints, slot):
        if b == 7:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            return b"[7, 1, 2]\n[oops\n"
        return None
    monkeypatch.setattr(P, "_fault_hook", hook)
    procs = P.BlockProcs.start(lambda msg, b: [b * 10, os.getpid()], P.split_ranges(0, 9, 3), steal=False)
    with procs:
        got = dict(procs.run({}))
    assert [got[b][0] for b in range(9)] == [b * 10 for b in range(9)]
    assert got[6][1] != me and got[7][1] == me and got[8][1] == me  # the rest of the last child's range: here
    assert got[3][1] != me and got[3][1] != got[6][1]


def test_work_stealing_takes_what_a_slow_child_has_not_started(forks, monkeypatch, tmp_path):
    """This process waits for the child to start its first block; the child is held there until this
    process has taken all its other blocks (from the end backwards); then the child delivers that one
    block and stops at the limit."""
    me = os.getpid()
    log = tmp_path / "child_blocks"
    held: dict[str, P.BlockProcs] = {}

    def give_up() -> float:  # (no hang if stealing were broken: the test fails instead)
        return time.monotonic() + 30

    def hook(msg, b, hints, slot):
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(fd, b"%d\n" % b)  # every block the child starts
        os.close(fd)
        end = give_up()
        while b == 3 and hints[3 * slot + 1] > 4 and time.monotonic() < end:
            os.sched_yield()  # until the parent's limit reaches 4
        return None

    def handler(msg, b):
        end = give_up()
        while os.getpid() == me and held["p"].hints[0] < 3 and time.monotonic() < end:
            os.sched_yield()  # here: until the child has started its first block (3)
        return [msg, b, os.getpid()]
    monkeypatch.setattr(P, "_fault_hook", hook)
    procs = held["p"] = P.BlockProcs.start(handler, [(0, 3), (3, 9)], steal=True)
    with procs:
        for phase in ("a", "b"):  # the hints are reset for every phase
            got = list(procs.run(phase))
            assert [b for b, _ in got] == list(range(9))
            assert all(r[0] == phase and r[1] == b for b, r in got)
            who = {b: r[2] for b, r in got}
            assert who[3] != me  # the child's first block: the child
            assert all(who[b] == me for b in (0, 1, 2, 4, 5, 6, 7, 8))  # all the rest: taken here
    assert len(forks) == 1
    assert log.read_text().split() == ["3", "3"]  # the child started no block it was not left


@pytest.mark.parametrize("map_min", [0, 1 << 40])  # every chunk mapped / every chunk read
def test_file_chunks_mapped_or_read_give_the_same_chunks_and_errors(map_min, tmp_path, monkeypatch):
    monkeypatch.setattr(tensor_io, "MAP_MIN_BYTES", map_min)
    x = np.arange(10_000, dtype=np.float32) - 5000
    path = tmp_path / "t.bin"
    path.write_bytes(b"H" * 12 + x.tobytes())
    chunks = list(FileChunks(str(path), 12, x.size, np.dtype(np.float32), chunk=3000)())
    assert [c.size for c in chunks] == [3000, 3000, 3000, 1000]
    assert all(isinstance(getattr(c.base, "obj", None), mmap.mmap) is (map_min == 0) for c in chunks)
    assert np.array_equal(np.concatenate(chunks), x)
    more = FileChunks(str(path), 12, x.size + 10, np.dtype(np.float32), chunk=3000)  # the file ends early
    it = iter(more())
    assert np.array_equal(np.concatenate([next(it), next(it), next(it)]), x[:9000])
    with pytest.raises(TensorLoadError, match="file ended 10000 elements into a tensor of 10010"):
        next(it)
