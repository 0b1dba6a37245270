"""compare over several places: --rank all, --step all, --golden-step/--target-step, --golden-rank/--target-rank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import unpack_data
from synth.job_tree import write_cann_job
from dumpscope.tui.cli.entry import main


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys, *args):
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def msprobe(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_msprobe26")


@pytest.fixture(scope="module")
def msnan(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_nan") / "nan"


def test_rank_all_on_the_real_two_rank_run_has_rows_for_both_ranks(capsys, msprobe, tmp_path):
    p = str(msprobe / "dist_stats")
    doc = cli_json(capsys, "compare", p, p, "--rank", "all", "--cache-dir", str(tmp_path))
    assert {r["rank"] for r in doc["rows"]} == {0, 1}
    assert [(x["golden"]["rank"], x["target"]["rank"]) for x in doc["places"]] == [(0, 0), (1, 1)]
    assert doc["first_divergence"] is None and {r["verdict"] for r in doc["rows"]} == {"pass"}
    assert doc["unmatched_places"] == {"golden": [], "target": []}


def test_rank_against_rank_of_one_run(capsys, msprobe, tmp_path):
    p = msprobe / "dist_stats"
    doc = cli_json(capsys, "compare", str(p), str(p), "--golden-rank", "0", "--target-rank", "1",
                   "--cache-dir", str(tmp_path))
    assert (doc["golden"]["rank"], doc["target"]["rank"]) == (0, 1)
    assert all(r["rank"] == 0 and r["target_rank"] == 1 for r in doc["rows"])
    fd = doc["first_divergence"]
    assert fd is not None and fd["target_rank"] == 1
    # msprobe's own statistics of that tensor differ between the two ranks
    data = [json.loads((p / "step0" / f"rank{r}" / "dump.json").read_text())["data"] for r in (0, 1)]
    key = "output" if fd["io"] == "output" else "input_args"
    a, b = (d[fd["name"]][key][fd["slot"]] for d in data)
    assert (a["Max"], a["Min"], a["Mean"]) != (b["Max"], b["Min"], b["Mean"])


def test_step_against_step_of_the_real_nan_run(capsys, msnan, tmp_path):
    doc = cli_json(capsys, "compare", str(msnan), str(msnan), "--golden-step", "0", "--target-step", "2",
                   "--cache-dir", str(tmp_path))
    assert (doc["golden"]["step"], doc["target"]["step"]) == (0, 2)
    assert doc["rows"] and all(r["step"] == 0 and r["target_step"] == 2 for r in doc["rows"])
    assert doc["first_divergence"] is not None
    code, out, err = run(capsys, "compare", str(msnan), str(msnan), "--golden-step", "0", "--target-step", "2",
                         "--cache-dir", str(tmp_path))
    assert code == 0 and "with target rank 0 step 2" in out


def test_step_all_first_divergence_is_the_earliest_step(capsys, tmp_path):
    golden = write_cann_job(tmp_path / "g", ranks=(0, 1), steps=(0, 1, 2))
    target = write_cann_job(tmp_path / "t", ranks=(0, 1), steps=(0, 1, 2), overflow={(1, 2), (0, 1)})
    doc = cli_json(capsys, "compare", str(golden), str(target), "--step", "all", "--rank", "all", "--no-cache")
    assert [(x["golden"]["step"], x["golden"]["rank"]) for x in doc["places"]] == \
        [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    fd = doc["first_divergence"]
    assert (fd["step"], fd["rank"], fd["name"]) == (1, 0, "model/act/Exp")
    steps = [r["step"] for r in doc["rows"]]
    assert steps == sorted(steps)


def test_unknown_place_is_one_line(capsys, tmp_path):
    root = write_cann_job(tmp_path / "g", ranks=(0,), steps=(0, 1))
    code, out, err = run(capsys, "compare", str(root), str(root), "--golden-step", "0", "--target-step", "7",
                         "--no-cache")
    assert code == 1 and "step 7 is not in the target dump" in err and err.count("\n") == 1
    code, out, err = run(capsys, "compare", str(root), str(root), "--step", "x", "--no-cache")
    assert code == 2
