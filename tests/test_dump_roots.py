"""PATH holding several dumps of the same rank/step places (two runs side by side, golden/ and
target/, a folder per day): each dump is recognised by its root, the first root in path order
answers for its places, every other root sharing one is set aside whole and said, never merged,
and the answer is the same on every build (pool timing, batch sizes, cache or not)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import dumpscope.core.index.dump_index as index_mod
import dumpscope.core.index.pool as pool_mod
from conftest import cli_json, unpack_data
from dumpscope.core.index.dump_roots import decide, dump_root, roots_of
from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.query import DumpQuery
from synth.job_tree import write_cann_job
from test_index_batches import _rows


def _files(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file())


def _all_ops(capsys, path: Path, cache: Path, places) -> dict:
    """``ops --json --kind all`` of every place, through the CLI."""
    return {(r, s): cli_json(capsys, "ops", str(path), "--rank", str(r), "--step", str(s), "--kind", "all",
                             "--cache-dir", str(cache))["ops"] for r, s in places}


def _build(root: Path, cache: Path, monkeypatch, workers: int, batch: int = 400, chunk_min: int = 400) -> DumpIndex:
    """An index built with a given pool size, batch size and big-folder threshold."""
    monkeypatch.setattr(pool_mod, "BATCH_FILES", batch)
    monkeypatch.setattr(index_mod, "PARALLEL_MIN_FILES", chunk_min)
    monkeypatch.setattr(pool_mod, "CHUNK_FILES", max(chunk_min, 1))
    idx = DumpIndex.open(str(root), cache_directory=cache, update=False)
    idx.update(workers=workers)
    return idx


def _op_rows(idx: DumpIndex) -> list[tuple]:
    """The finished ops table, in the order a reader lists it (ids are unit ids: build-dependent)."""
    return idx.query("SELECT rank, step, graph, name, file_name, type, exec_index, kind, folder, nan, posinf, "
                     "neginf FROM ops ORDER BY rank, step, kind, exec_index, name, folder")


# -- real data: two MindSpore runs (2.10 and 2.7) of the same 2-rank job side by side ------------

@pytest.fixture(scope="module")
def dp2(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_dp2")  # README.md, make_dp2_run.py, dp2/, dp2_ms27/


def test_two_real_runs_side_by_side_are_two_dumps_and_the_first_answers(capsys, dp2, tmp_path):
    doc = cli_json(capsys, "summary", str(dp2), "--cache-dir", str(tmp_path / "both"))
    alone = cli_json(capsys, "summary", str(dp2 / "dp2"), "--cache-dir", str(tmp_path / "alone"))
    assert alone["other_dumps"] == [] and alone["accounting"]["other_dump"] == 0
    # what was read is dp2 alone: not the 156 ops of both runs merged
    for key in ("ranks", "steps", "graphs", "ops", "parameters", "constants", "tensors"):
        assert doc[key] == alone[key], key
    assert [o["root"] for o in doc["other_dumps"]] == [str(dp2 / "dp2_ms27")]
    other = doc["other_dumps"][0]
    assert other["kept"] == str(dp2 / "dp2")
    assert other["places"] == [{"rank": r, "step": s} for r in (0, 1) for s in (0, 1)]
    assert str(dp2 / "dp2") in other["message"] and str(dp2 / "dp2_ms27") in other["message"]
    # said as a problem naming both roots, and in the layouts: both roots, the second set aside
    assert [p for p in doc["problems"] if p["path"] == str(dp2 / "dp2_ms27")] == [
        {"path": str(dp2 / "dp2_ms27"), "error": other["message"]}]
    roots = [(lay["root"], bool(lay.get("set_aside"))) for lay in doc["layouts"]]
    assert roots == [(str(dp2 / "dp2"), False), (str(dp2 / "dp2_ms27"), True)]
    assert doc["layouts"][1]["files"] == sum(1 for _ in (dp2 / "dp2_ms27").rglob("*.npy"))
    # every file accounted for: the set-aside run's files as other_dump, the rest as when read alone
    acc = doc["accounting"]
    assert doc["files"] == acc["files"] == _files(dp2)
    assert sum(v for k, v in acc.items() if k != "files") == acc["files"]
    assert acc["other_dump"] == _files(dp2 / "dp2_ms27")
    assert acc["not_recognised"] == 2  # README.md and make_dp2_run.py beside the runs
    for key in ("tensor", "graph", "order", "metadata", "problem"):
        assert acc[key] == alone["accounting"][key], key


def test_two_real_runs_give_the_same_ops_on_every_build_and_those_of_the_first_run(
        capsys, dp2, tmp_path, monkeypatch):
    places = [(r, s) for r in (0, 1) for s in (0, 1)]
    first = _all_ops(capsys, dp2, tmp_path / "a", places)
    again = _all_ops(capsys, dp2, tmp_path / "b", places)  # a fresh cache: built again from scratch
    alone = _all_ops(capsys, dp2 / "dp2", tmp_path / "alone", places)
    assert first == again == alone
    assert sum(1 for ops in first.values() for op in ops if op["kind"] == "op") == 80
    # the index itself, whatever the pool does: inline, small batches, big folders split in chunks
    builds = [_build(dp2, tmp_path / "inline", monkeypatch, workers=1),
              _build(dp2, tmp_path / "batched", monkeypatch, workers=2, batch=7),
              _build(dp2, tmp_path / "chunked", monkeypatch, workers=2, batch=50, chunk_min=30)]
    expected = _op_rows(builds[0])
    assert len([r for r in expected if r[7] == "op"]) == 80
    for idx in builds[1:]:
        assert _op_rows(idx) == expected
        assert _rows(idx) == _rows(builds[0])


def test_the_stderr_note_names_both_roots_for_any_command(dp2, tmp_path, capsys):
    from dumpscope.tui.cli.entry import main

    assert main(["ops", str(dp2), "--cache-dir", str(tmp_path), "--json"]) == 0
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.startswith("dumpscope: note:")]
    assert len(lines) == 1 and str(dp2 / "dp2_ms27") in lines[0] and str(dp2 / "dp2") + ")" in lines[0]
    doc = json.loads(out)  # the JSON document says it too
    assert [(o["root"], o["kept"]) for o in doc["other_dumps"]] == [(str(dp2 / "dp2_ms27"), str(dp2 / "dp2"))]
    assert main(["ops", str(dp2 / "dp2"), "--cache-dir", str(tmp_path / "alone"), "--json"]) == 0
    out_alone, err_alone = capsys.readouterr()
    assert "note:" not in err_alone and "other_dumps" not in json.loads(out_alone)
    assert doc["ops"] == json.loads(out_alone)["ops"]


# -- real data: msprobe 26.2 runs side by side, each with its own step0/rank… ---------------------

def test_real_msprobe_runs_side_by_side(capsys, tmp_path_factory, tmp_path):
    runs = unpack_data(tmp_path_factory, "real_msprobe26")
    # two copies of the distributed run: the same step0/rank0, step0/rank1 dump.json twice
    pair = tmp_path / "pair"
    shutil.copytree(runs / "dist_stats", pair / "day1")
    shutil.copytree(runs / "dist_stats", pair / "day2")
    doc = cli_json(capsys, "summary", str(pair), "--cache-dir", str(tmp_path / "c"))
    alone = cli_json(capsys, "summary", str(runs / "dist_stats"), "--cache-dir", str(tmp_path / "c1"))
    assert doc["ops"] == alone["ops"] > 0 and doc["tensors"] == alone["tensors"]
    assert [(o["root"], o["kept"]) for o in doc["other_dumps"]] == [(str(pair / "day2"), str(pair / "day1"))]
    assert doc["accounting"]["other_dump"] == _files(pair / "day2")
    assert doc["files"] == _files(pair)
    places = [(r, 0) for r in doc["ranks"]]
    assert _all_ops(capsys, pair, tmp_path / "c", places) == _all_ops(capsys, pair / "day1", tmp_path / "c2", places)


def test_real_msprobe_dumps_without_step_or_rank_folders_side_by_side(capsys, tmp_path_factory, tmp_path):
    """Two plain folders holding a ``dump.json`` each (a run copied out of its step0/rank0, as users
    keep ``golden/`` and ``target/``): two dumps, the second set aside, not merged into one place."""
    runs = unpack_data(tmp_path_factory, "real_msprobe26")
    proc = next((runs / "mix_stats" / "step0").iterdir())  # step0/proc<pid>/dump.json
    pair = tmp_path / "pair"
    shutil.copytree(proc, pair / "golden")
    shutil.copytree(proc, pair / "target")
    doc = cli_json(capsys, "summary", str(pair), "--cache-dir", str(tmp_path / "c"))
    alone = cli_json(capsys, "summary", str(pair / "golden"), "--cache-dir", str(tmp_path / "c1"))
    assert doc["ops"] == alone["ops"] > 0 and doc["tensors"] == alone["tensors"]
    assert [(o["root"], o["kept"]) for o in doc["other_dumps"]] == [(str(pair / "target"), str(pair / "golden"))]
    assert doc["accounting"]["other_dump"] == _files(pair / "target")


@pytest.mark.parametrize("dirs, roots", [
    # plain folders side by side: a root each; a dump's own subfolder stays in it
    (["g", "g/dump_tensor_data", "t"], ["g", "g", "t"]),
    # a plain folder beside a structured dump belongs to it
    (["graphs", "rank_0/Net/0/0"], ["", ""]),
    (["run/graphs", "run/rank_0/Net/0/0", "other"], ["run", "run", "other"]),
    # files in PATH itself: everything plain below is that dump
    (["", "sub"], ["", ""]),
])
def test_roots_of_plain_folders(dirs, roots):
    base = "/data/job"
    full = [f"{base}/{d}" if d else base for d in dirs]
    assert roots_of(full, base) == {p: (f"{base}/{r}" if r else base) for p, r in zip(full, roots)}


# -- generated trees --------------------------------------------------------------------------

def _two_jobs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_cann_job(root / "golden", ranks=(0, 1, 2), steps=(0, 1), overflow={(2, 1)}, opdebug=True)
    write_cann_job(root / "target", ranks=(0, 1, 2), steps=(0, 1), overflow={(1, 0)}, opdebug=True)
    return root


def test_generated_jobs_batched_and_inline_store_the_same_index(tmp_path, monkeypatch):
    root = _two_jobs(tmp_path)
    inline = _build(root, tmp_path / "inline", monkeypatch, workers=1)
    batched = _build(root, tmp_path / "batched", monkeypatch, workers=2, batch=7)
    assert _rows(batched) == _rows(inline)
    assert _op_rows(batched) == _op_rows(inline)
    q = DumpQuery(inline)
    assert [(o["root"], o["kept"]) for o in q.other_dumps()] == [(str(root / "target"), str(root / "golden"))]
    golden = _build(root / "golden", tmp_path / "golden", monkeypatch, workers=1)
    assert _op_rows(inline) == _op_rows(golden)
    # the overflow evidence of the set-aside run is not joined to the golden run's ops
    assert inline.query("SELECT COUNT(*) FROM overflow")[0] == golden.query("SELECT COUNT(*) FROM overflow")[0]


def test_a_set_aside_root_comes_back_when_the_clash_is_gone_and_goes_when_it_returns(tmp_path, monkeypatch):
    root = _two_jobs(tmp_path)
    idx = _build(root, tmp_path / "c", monkeypatch, workers=1)
    assert DumpQuery(idx).other_dumps()
    shutil.move(str(root / "golden"), str(tmp_path / "golden"))
    idx.update(workers=1)
    target = _build(root / "target", tmp_path / "t", monkeypatch, workers=1)
    assert DumpQuery(idx).other_dumps() == []
    assert _op_rows(idx) == _op_rows(target)
    assert idx.query("SELECT COUNT(*) FROM aside_units")[0] == (0,)
    shutil.move(str(tmp_path / "golden"), str(root / "golden"))
    idx.update(workers=1)
    golden = _build(root / "golden", tmp_path / "g", monkeypatch, workers=1)
    assert [o["root"] for o in DumpQuery(idx).other_dumps()] == [str(root / "target")]
    assert _op_rows(idx) == _op_rows(golden)


def test_roots_holding_different_ranks_stay_one_job(tmp_path, monkeypatch):
    """Hosts each holding their own ranks (no place twice): one job, nothing set aside."""
    root = tmp_path / "job"
    write_cann_job(root / "host1", ranks=(0, 1), steps=(0,))
    write_cann_job(root / "host2", ranks=(2, 3), steps=(0,))
    idx = _build(root, tmp_path / "c", monkeypatch, workers=1)
    q = DumpQuery(idx)
    assert q.other_dumps() == [] and q.ranks() == [0, 1, 2, 3]
    assert q.summary()["accounting"]["other_dump"] == 0


def test_decide_keeps_the_first_root_and_sets_aside_a_root_sharing_any_place():
    places = {"/p/b": {(0, 0, "0"), (0, 1, "0")}, "/p/a": {(0, 0, "0")}, "/p/c": {(1, 0, "0")},
              "/p/d": {(1, 0, "0"), (5, 0, "0")}}
    assert decide(places) == {"/p/b": ("/p/a", [(0, 0, "0")]), "/p/d": ("/p/c", [(1, 0, "0")])}
    assert decide({"/p/a": {(0, 0, "0")}, "/p/b": {(1, 0, "0")}}) == {}
    # the same rank and step of another graph (a CANN model beside a MindSpore graph): no clash
    assert decide({"/p/cann": {(0, 0, "ge_default_1")}, "/p/ms": {(0, 0, "0")}}) == {}


@pytest.mark.parametrize("rel, root", [
    ("dp2/rank_0/Net/0/0", "dp2"), ("rank_0/Net/0/0", ""), ("a/b/step0/rank0", "a/b"),
    ("x/20240801000000/0/model/1/0", "x"), ("graphs", ""), ("", "")])
def test_dump_root_is_the_folder_above_the_first_tree_level(rel, root):
    base = "/data/job"
    path = f"{base}/{rel}" if rel else base
    assert dump_root(path, base) == (f"{base}/{root}" if root else base)


def test_a_single_dump_writes_nothing_aside(tmp_path, monkeypatch):
    root = tmp_path / "one"
    write_cann_job(root, ranks=(0, 1), steps=(0, 1))
    idx = _build(root, tmp_path / "c", monkeypatch, workers=1)
    assert idx.query("SELECT value FROM meta WHERE key='other_dumps'") == [(json.dumps([]),)]
    assert idx.query("SELECT COUNT(*) FROM aside_dirs")[0] == (0,)
