"""``overflow`` over the whole job: every rank and step by default, what was scanned, the first rank."""

from __future__ import annotations

import json
import sys

import pytest

from synth.job_tree import write_cann_job
from dumpscope.tui.cli.entry import main


def cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def cli_json(capsys, *args):
    return json.loads(cli(capsys, *args, "--json"))


@pytest.fixture
def cache(tmp_path):
    return ["--cache-dir", str(tmp_path / "cache")]


@pytest.mark.parametrize("opdebug", [False, True])
def test_overflow_only_in_step_1_is_found_without_step(tmp_path, capsys, cache, opdebug):
    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0, 1, 2), overflow={(0, 1)}, opdebug=opdebug)
    doc = cli_json(capsys, "overflow", str(root), *cache)
    first = doc["ops"][0]
    assert (first["name"], first["step"], first["rank"]) == ("model/act/Exp", 1, 0)
    assert first["evidence"] == ("opdebug" if opdebug else "tensor") and first["posinf"] > 0
    assert [(p["rank"], p["step"]) for p in doc["scanned"]] == [(0, 0), (0, 1), (0, 2)]
    assert doc["not_scanned"] == []
    assert doc["first_bad"][0]["judgement"] == "born"
    assert doc["first_bad"][0]["reason"].startswith("inputs finite (max ")
    assert "float16 range exceeded" in doc["first_bad"][0]["reason"]
    out = cli(capsys, "overflow", str(root), *cache)
    assert "scanned rank 0 × step 0..2 (3 places)" in out and "model/act/Exp" in out


def test_rows_are_ordered_by_step_then_execution_and_cover_later_steps(tmp_path, capsys, cache):
    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0, 1, 2), overflow={(0, 0), (0, 2)})
    rows = cli_json(capsys, "overflow", str(root), *cache)["ops"]
    keys = [(r["step"], r["exec_index"]) for r in rows]
    assert keys == sorted(keys) and {r["step"] for r in rows} == {0, 2}
    assert rows[0]["name"] == "model/act/Exp"


def test_step_and_rank_narrow_and_say_so(tmp_path, capsys, cache):
    root = write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1), overflow={(1, 1)})
    doc = cli_json(capsys, "overflow", str(root), "--step", "0", *cache)
    assert doc["ops"] == [] and [(p["rank"], p["step"]) for p in doc["scanned"]] == [(0, 0), (1, 0)]
    out = cli(capsys, "overflow", str(root), "--step", "0", *cache)
    assert "rank 0..1 × step 0" in out and "found in what was scanned" in out
    doc = cli_json(capsys, "overflow", str(root), "--rank", "1", *cache)
    assert {r["rank"] for r in doc["ops"]} == {1} and [p["step"] for p in doc["scanned"]] == [0, 1]


def test_first_rank_is_the_one_whose_exp_overflowed(tmp_path, capsys, cache):
    root = write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1), overflow={(1, 1)})
    doc = cli_json(capsys, "overflow", str(root), *cache)
    firsts = {f["rank"]: f for f in doc["first_bad"]}
    assert firsts[1]["name"] == "model/act/Exp" and firsts[1]["judgement"] == "born"
    assert firsts[0]["type"] == "HcomAllReduce" and firsts[0]["judgement"] == "received"
    assert doc["origin"]["rank"] == 1 and "received it through a collective" in doc["origin"]["reason"]
    assert firsts[1]["first_bad"]["io"] == "output" and len(firsts[1]["first_bad"]["index"]) == 2


def test_scan_none_never_claims_an_all_clear(tmp_path, capsys, cache):
    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0, 1), overflow={(0, 1)})
    doc = cli_json(capsys, "overflow", str(root), "--scan", "none", *cache)
    assert doc["ops"] == [] and doc["scanned"] == []
    assert [(p["rank"], p["step"]) for p in doc["not_scanned"]] == [(0, 0), (0, 1)]
    out = cli(capsys, "overflow", str(root), "--scan", "none", *cache)
    assert "not looked at" in out and "nothing was scanned" in out and "no overflow" not in out


def test_warm_run_reads_no_tensor(tmp_path, capsys, cache, monkeypatch):
    root = write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1), overflow={(0, 1)})
    cold = cli_json(capsys, "overflow", str(root), *cache)

    def no_reads(jobs):
        raise AssertionError("a warm overflow run read tensor data")
    monkeypatch.setattr("dumpscope.core.engines.overflow.scan.scan_batch", no_reads)
    warm = cli_json(capsys, "overflow", str(root), *cache)
    assert warm == cold


def test_process_pool_gives_the_same_answer(tmp_path, monkeypatch):
    from dumpscope.core.engines.overflow import scan as overflow_scan
    from dumpscope.core.engines.overflow.lookup import overflow_report
    from dumpscope.core.query import open_query

    root = write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1, 2), overflow={(1, 2)})
    inline = overflow_report(open_query(str(root), use_cache=False))
    monkeypatch.setattr(overflow_scan, "INLINE_BYTES", 0)
    monkeypatch.setattr(overflow_scan, "BATCH_UNITS", 4)
    from dumpscope.core.index import pool as pool_mod
    made = []

    def pool(workers=None, _real=pool_mod.process_pool):
        made.append(_real(2))
        return made[-1]
    monkeypatch.setattr(pool_mod, "process_pool", pool)
    pooled = overflow_report(open_query(str(root), use_cache=False))
    assert made and made[0] is not None
    for doc in (pooled, inline):  # op ids depend on the order folders were stored in
        for r in doc["ops"]:
            r.pop("op_id")
    assert pooled == inline and pooled["ops"][0]["rank"] == 1


def test_path_at_a_time_or_device_folder_keeps_ranks_and_steps(tmp_path, capsys, cache):
    from synth.job_tree import TIME

    root = write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1, 2), overflow={(1, 1)})
    whole = cli_json(capsys, "overflow", str(root), *cache)
    at_time = cli_json(capsys, "overflow", str(root / TIME), *cache)
    assert at_time["scanned"] == whole["scanned"] and at_time["ops"][0]["name"] == whole["ops"][0]["name"]
    one = cli_json(capsys, "overflow", str(root / TIME / "1"), *cache)
    assert [(p["rank"], p["step"]) for p in one["scanned"]] == [(1, 0), (1, 1), (1, 2)]
    assert (one["ops"][0]["rank"], one["ops"][0]["step"]) == (1, 1)


def test_overflow_json_loads_neither_compare_nor_a_progress_bar(tmp_path):
    """Start-up is part of a cold answer on a big job: ``overflow --json`` into a pipe needs neither the
    compare package (``compare --help``'s rules are loaded when that help is shown) nor rich's progress."""
    import subprocess

    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0,))
    code = ("import sys; from dumpscope.tui.cli.entry import main; rc = main(sys.argv[1:]); "
            "loaded = [m for m in ('dumpscope.core.engines.compare', 'rich.progress') if m in sys.modules]; "
            "print('LOADED', loaded, file=sys.stderr); sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code, "overflow", str(root), "--json", "--cache-dir",
                        str(tmp_path / "cache")], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["scanned"]
    assert "LOADED []" in p.stderr
