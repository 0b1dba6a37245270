"""Compare's process pool: what a worker is sent (``measure_many.wire``) gives the refs the rows say, and a
pool that cannot start or loses a worker still gives the answer measured in this process (issue 33)."""

from __future__ import annotations

import json
import pickle
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

from test_compare_batched import _pair_queries

from dumpscope.core.engines.compare import measure_many as mm
from dumpscope.core.query.rows import TensorRow


def _row(path: str, io: str, slot: int, **kw) -> TensorRow:
    fields = dict(id=0, op_id=0, io=io, slot=slot, dtype="float16", shape=(1, 16, 8, 8), format="NC1HWC0",
                  device_shape=(1, 1, 8, 8, 16), path=path, storage="cann", stored_dtype="float16",
                  offset=120 + 2048 * slot, nbytes=2048, sub_format=0, producer="cann", stats=None, extra={})
    fields.update(kw)
    return TensorRow(**fields)


def _jobs() -> list[mm.OpJob]:
    """Ops whose pairs the wire says by layout number (same files, same layout both sides) and every
    kind it must send whole: a pair in files of its own, sides laid out apart, an ``extra``, no pairs."""
    def op(g: str, t: str) -> mm.OpJob:
        return [(_row(g, io, k), _row(t, io, k), io, "tensor") for io in ("input", "output") for k in range(2)]

    same = op("/g/a.1", "/t/a.1")
    again = op("/g/b.2", "/t/b.2")  # the layouts of the first op again: sent once
    own_files = [(_row("/g/x.npy", "input", 0, storage="npy", format="ND", device_shape=()),
                  _row("/t/x.npy", "input", 0, storage="npy", format="ND", device_shape=()), "input", "tensor"),
                 (_row("/g/y.npy", "output", 0, storage="npy", format="ND", device_shape=()),
                  _row("/t/y.npy", "output", 0, storage="npy", format="ND", device_shape=()), "output", "tensor")]
    apart = [(_row("/g/c.3", "input", 0), _row("/t/c.3", "input", 0, dtype="float32", nbytes=4096), "input",
              "tensor"),
             (_row("/g/c.3", "output", 0), _row("/t/c.3", "output", 0, shape=(16, 64)), "output", "tensor")]
    extra = [(_row("/g/d.h5", "input", 0, storage="h5", extra={"dataset": "a/b"}),
              _row("/t/d.h5", "input", 0, storage="h5", extra={"dataset": "a/b"}), "input", "tensor")]
    return [same, [], again, own_files, apart, extra]


def test_a_wired_batch_gives_the_refs_of_its_rows():
    jobs = _jobs()
    sent = mm.wire(jobs)
    got = mm.unwire(pickle.loads(pickle.dumps(sent)))
    want = [[(g.ref(), t.ref()) for g, t, _io, _kind in job] for job in jobs]  # (each row's own TensorRef)
    assert got == want
    # the first op's four layouts (not the third's again) and the npy op's two
    assert len(sent[0]) == 6
    assert sent[1][3][2] == [4, ("/g/y.npy", "/t/y.npy", 5)]  # its second pair: its own files, the layout number
    assert [len(e) for e in sent[1][4][2] + sent[1][5][2]] == [2, 2, 2]  # the rest: their RefFields
    refs = [r for op in got for pair in op for r in pair]
    assert len({id(r.extra) for r in refs}) == len(refs)  # each ref its own dict, as from the rows


class _NoStart:
    """A process pool that cannot start a process (restricted sandboxes)."""

    def __init__(self) -> None:
        self.tries = 0

    def submit(self, *a, **k):
        self.tries += 1
        raise OSError("no processes here")

    def shutdown(self, **k):
        pass


class _DeadWorker:
    """A process pool whose every worker died (killed, out of memory) with the batch it had."""

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, *a, **k):
        self.submitted += 1
        fut: Future = Future()
        fut.set_exception(BrokenProcessPool("a worker died"))
        return fut

    def shutdown(self, **k):
        pass


def _compare(tmp_path, monkeypatch, pool):
    from dumpscope.core.engines.compare import compare_dumps, engine

    g, t = _pair_queries(tmp_path)
    reference = compare_dumps(g, t, workers=1)
    monkeypatch.setattr(mm, "BATCH_PAIRS", 16)
    monkeypatch.setattr(mm, "POOL_MIN_OPS", 1)
    monkeypatch.setattr(engine, "_CHUNK_OPS", 8)
    monkeypatch.setattr(mm, "_pool", lambda workers: pool)
    return compare_dumps(g, t), reference


def test_a_pool_that_cannot_start_measures_here(tmp_path, monkeypatch):
    pool = _NoStart()
    got, reference = _compare(tmp_path, monkeypatch, pool)
    assert pool.tries == 1  # given up at the first batch
    assert json.dumps(got) == json.dumps(reference)


def test_a_dead_workers_batch_is_measured_here(tmp_path, monkeypatch):
    pool = _DeadWorker()
    got, reference = _compare(tmp_path, monkeypatch, pool)
    assert pool.submitted >= 1
    assert json.dumps(got) == json.dumps(reference)
