"""Two real 2-rank msprobe jobs (tests/data/real_msprobe_dist_nan.tar.gz, see its README): in ``target`` a NaN is
born on rank 1 at step 1 (``torch.sqrt`` of a negative value) and an all_reduce hands it to rank 0.  Which API
went NaN first on each rank is msprobe's own record (dump.json statistics in call order)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cli_json, unpack_data


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_msprobe_dist_nan") / "dist"


def _first_nan_api(dump: Path, step: int, rank: int) -> str:
    data = json.loads((dump / f"step{step}" / f"rank{rank}" / "dump.json").read_text())["data"]
    for name, entry in data.items():
        for out in entry.get("output") or []:
            if isinstance(out, dict) and any(str(out.get(k)).lower() == "nan" for k in ("Max", "Min", "Mean")):
                return name
    raise AssertionError("no NaN")


def test_the_whole_job_first_divergence_is_where_the_nan_was_born_not_where_it_was_received(capsys, dist, tmp_path):
    born, received = _first_nan_api(dist / "target", 1, 1), _first_nan_api(dist / "target", 1, 0)
    assert (born, received) == ("Torch.sqrt.0.forward", "Distributed.all_reduce.0.forward")
    doc = cli_json(capsys, "compare", str(dist / "golden"), str(dist / "target"), "--step", "all", "--rank", "all",
                   "--cache-dir", str(tmp_path))
    per_place = {(p["first_divergence"]["rank"], p["first_divergence"]["step"]): p["first_divergence"]["name"]
                 for p in doc["places"] if p["first_divergence"]}
    assert per_place == {(0, 1): received, (1, 1): born}  # each place alone: what it saw first
    first = doc["first_divergence"]
    assert (first["rank"], first["step"], first["name"]) == (1, 1, born)
    assert "rank(s) 0 received it through a collective" in first["reason"]
    # the overflow engine says the same of the target alone
    origin = cli_json(capsys, "overflow", str(dist / "target"), "--cache-dir", str(tmp_path))["origin"]
    assert (origin["rank"], origin["step"], origin["name"]) == (1, 1, born)


def test_trend_shows_a_step_whose_statistics_are_nan_as_non_finite_not_as_no_data(capsys, dist, tmp_path):
    from dumpscope.tui.cli.entry import main

    target = dist / "target"
    recorded = {}
    for step in (0, 1):  # what msprobe wrote for the sqrt's output on rank 1
        out = json.loads((target / f"step{step}" / "rank1" / "dump.json").read_text())["data"][
            "Torch.sqrt.0.forward"]["output"][0]
        recorded[step] = {k.lower(): out[k] for k in ("Max", "Min", "Mean")}
    assert all(v != v for v in recorded[1].values()) and all(v == v for v in recorded[0].values())  # NaN at 1
    args = ["trend", str(target), "Torch.sqrt.0.forward", "--rank", "1", "--cache-dir", str(tmp_path)]
    points = cli_json(capsys, *args)["points"]
    assert [(p["step"], p["nonfinite"]) for p in points] == [(0, False), (1, True)]
    assert points[0]["max"] == pytest.approx(recorded[0]["max"]) and "recorded_nonfinite" not in points[0]
    assert {k: points[1]["recorded_nonfinite"][k] for k in ("max", "min", "mean")} == \
        {"max": "nan", "min": "nan", "mean": "nan"}
    assert main(args) == 0
    text = capsys.readouterr().out
    cells = {c[1].strip(): [x.strip() for x in c] for c in (line.split("│") for line in text.splitlines())
             if len(c) > 5}
    assert cells["1"][2:5] == ["nan", "nan", "nan"]  # step 1's min, max and mean say nan, not "-"
    assert "nan" not in cells["0"][2:5]
    spark = next(line for line in text.splitlines() if line.startswith("rank 1  max"))
    assert spark.split()[3][1] == "×" and spark.split()[3][0] != "·"
    assert main([*args, "--csv"]) == 0
    rows = capsys.readouterr().out.splitlines()
    head = rows[0].split(",")
    last = dict(zip(head, rows[2].split(",")))
    assert (last["max"], last["nonfinite"]) == ("nan", "True")


def test_triage_with_a_golden_says_why_rank_1_and_not_the_lowest_rank(capsys, dist, tmp_path):
    from dumpscope.tui.cli.entry import main

    code = main(["triage", str(dist / "target"), "--golden", str(dist / "golden"), "--step", "all", "--rank", "all",
                 "--cache-dir", str(tmp_path), "--json"])
    assert code == 3  # trouble found
    doc = json.loads(capsys.readouterr().out)
    origin = doc["origin"]
    assert (origin["rank"], origin["step"], origin["name"]) == (1, 1, "Torch.sqrt.0.forward")
    assert "rank(s) 0 received it through a collective" in doc["why"] and "then rank)" not in doc["why"]


def test_non_tensor_arguments_between_tensors_are_not_inputs_that_were_not_dumped(tmp_path_factory, tmp_path):
    """msprobe 26 (tests/data/real_msprobe26): ``F.layer_norm(h, (6,), None, self.scale)`` records input 1 and 2
    as values and 0 and 3 as tensors; the judgement must not call 1 and 2 "not dumped"."""
    from dumpscope.core.index.dump_index import DumpIndex
    from dumpscope.core.engines.overflow.lookup import judge
    from dumpscope.core.query import DumpQuery

    dump = unpack_data(tmp_path_factory, "real_msprobe26") / "l1_tensor"
    q = DumpQuery(DumpIndex.open(str(dump), cache_directory=tmp_path))
    op = q.resolve_op("Functional.layer_norm.1.forward")
    assert [(t.slot, t.storage == "value") for t in q.tensors(op.id) if t.io == "input"] == \
        [(0, False), (1, True), (2, True), (3, False)]
    assert "not dumped" not in judge(q, op).reason
    q.index.close()
