"""The whole-job overflow scan holds a few places at a time (issue 21: RSS <= 500 MB at 1M files on
every path): places load their units when their turn comes, clean op counts are recorded on the ops
and dropped, and the answer is the one a scan of everything at once gives."""

from __future__ import annotations

import pytest

from dumpscope.core.engines.overflow import scan as overflow_scan
from dumpscope.core.engines.overflow.lookup import overflow_report
from dumpscope.core.query import open_query
from synth.job_tree import write_cann_job


@pytest.fixture
def job(tmp_path):
    return write_cann_job(tmp_path / "job", ranks=(0, 1, 2), steps=(0, 1, 2, 3), overflow={(2, 1)})


def _watch_places(monkeypatch, pooled: bool) -> list[tuple[tuple[int, int], int]]:
    """Log, as each place's units load, how many places loaded before it are not finished yet (their
    op counts not yet recorded on the ops)."""
    log: list[tuple[tuple[int, int], int]] = []
    loaded: list[tuple[int, int]] = []
    recorded: set[tuple[int, int]] = set()
    real_scan, real_record = overflow_scan.scan_places, overflow_scan.record_counts
    if pooled:
        monkeypatch.setattr(overflow_scan, "INLINE_BYTES", 0)
        monkeypatch.setattr(overflow_scan, "BATCH_UNITS", 2)  # several batches per place

    def record_counts(q, counts):
        for (r, s) in q.index.query(f"SELECT DISTINCT rank, step FROM ops WHERE id IN ({','.join(map(str, counts))})"):
            recorded.add((r, s))
        real_record(q, counts)

    def watched(job):
        def units():
            log.append((job.key, len([k for k in loaded if k not in recorded])))
            loaded.append(job.key)
            return job.units()
        return overflow_scan.PlaceJob(job.key, units, job.keep)

    def scan_places(q, places, total, progress=None, workers=None, record=True):
        return real_scan(q, (watched(j) for j in places), total, progress, 2 if pooled else workers, record)
    monkeypatch.setattr(overflow_scan, "record_counts", record_counts)
    monkeypatch.setattr("dumpscope.core.engines.overflow.lookup.scan_places", scan_places)
    return log


@pytest.mark.parametrize("pooled", [False, True], ids=["inline", "pool"])
def test_places_load_one_after_another_and_the_answer_is_unchanged(job, monkeypatch, pooled):
    everything = overflow_report(open_query(str(job), use_cache=False))
    log = _watch_places(monkeypatch, pooled)
    doc = overflow_report(open_query(str(job), use_cache=False))
    assert [k for k, _ in log] == sorted((k for k, _ in log), key=lambda k: (k[1], k[0]))  # step, then rank
    assert len(log) == 12
    # inline: each place is finished before the next loads; pooled: a bounded window of batches in flight
    # (2 workers x 2 batches) spans at most a few places
    worst = max(n for _, n in log)
    assert worst == 0 if not pooled else worst <= 4
    for d in (doc, everything):
        for r in d["ops"]:
            r.pop("op_id")
    assert doc == everything
    assert doc["ops"][0]["rank"] == 2 and doc["ops"][0]["step"] == 1


def test_clean_counts_are_recorded_and_not_kept(job):
    q = open_query(str(job), use_cache=False)
    places = [overflow_scan.PlaceJob((r, s), (lambda r=r, s=s: q.index.query(
        "SELECT id, op_id, path, storage, tensors FROM units WHERE rank=? AND step=?", (r, s))))
        for s in range(4) for r in range(3)]
    total = q.index.query("SELECT COUNT(*) FROM units")[0][0]
    seen: list[tuple[int, int]] = []
    kept, counted = overflow_scan.scan_places(q, places, total, progress=lambda d, t: seen.append((d, t)))
    n_ops = q.index.query("SELECT COUNT(*) FROM ops WHERE graph_only=0")[0][0]
    assert sum(counted.values()) == n_ops  # every op counted ...
    assert kept and all(c.bad for c in kept.values())  # ... only the bad ones kept in memory
    assert len(kept) < n_ops
    assert seen[-1] == (total, total) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    # ... and the clean ones remembered on the ops: nothing is left without evidence
    assert q.index.query("SELECT COUNT(*) FROM ops WHERE graph_only=0 AND nan IS NULL")[0][0] == 0
    bad_in_index = {i for (i,) in q.index.query("SELECT id FROM ops WHERE nan > 0 OR posinf > 0 OR neginf > 0")}
    assert bad_in_index == set(kept)
