"""``dumpscope trend``: one tensor across steps and ranks, stats-only dumps included."""

from __future__ import annotations

import csv
import io
import json

import numpy as np

from conftest import SAMPLES
from synth.job_tree import _place_values, write_cann_job
from dumpscope.core.engines.trend import marks, sparkline
from dumpscope.tui.cli.entry import main


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_stats_only_dump_gives_the_csv_statistics_per_step(capsys, tmp_path):
    code, out, err = run(capsys, "trend", str(SAMPLES / "mindspore_stats"), "Default/Exp-op0", "--json",
                         "--cache-dir", str(tmp_path))
    assert code == 0, err
    doc = json.loads(out)
    rows = {}
    for step in (0, 1):
        with open(SAMPLES / f"mindspore_stats/rank_0/Net/0/{step}/statistic.csv", newline="") as fh:
            rows[step] = next(r for r in csv.DictReader(fh) if r["Op Name"] == "Default_Exp-op0"
                              and r["IO"] == "output" and r["Slot"] == "0")
    assert [p["step"] for p in doc["points"]] == [0, 1]
    for p in doc["points"]:
        r = rows[p["step"]]
        assert p["max"] == float(r["Max Value"]) and p["posinf"] == int(r["Positive Inf Count"])
        assert p["source"] == "stats"


def test_rank_all_and_csv(capsys, tmp_path):
    root = write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1, 2), overflow={(1, 2)})
    code, out, err = run(capsys, "trend", str(root), "model/act/Exp", "--rank", "all", "--csv", "--no-cache")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["rank"], r["step"]) for r in rows] == [("0", "0"), ("1", "0"), ("0", "1"), ("1", "1"),
                                                      ("0", "2"), ("1", "2")]
    exp_bad = _place_values(1, 2, True)[1][1]  # the Exp output the writer stored
    assert [r["posinf"] for r in rows] == ["0"] * 5 + [str(int(np.isposinf(exp_bad).sum()))]
    code, out, err = run(capsys, "trend", str(root), "model/act/Exp", "--rank", "1", "--json", "--no-cache")
    doc = json.loads(out)
    assert [(p["rank"], p["step"]) for p in doc["points"]] == [(1, 0), (1, 1), (1, 2)]
    code, out, err = run(capsys, "trend", str(root), "model/act/Exp", "--rank", "x")
    assert code == 1 and "--rank" in err


def test_unknown_op_is_one_line_with_close_names(capsys, tmp_path):
    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0,))
    code, out, err = run(capsys, "trend", str(root), "model/act/Exq", "--no-cache")
    assert code == 1 and "model/act/Exp" in err and err.count("\n") == 1


def test_sparkline_and_marks():
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert sparkline([1.0, None, float("nan")]) == "▄·×"  # no data, then not finite (issue 29)
    assert marks([{"nan": 0}, {"nan": 2}, {"posinf": 1}]) == " !!"
    assert np.isnan(float("nan"))


def test_sparkline_tells_non_finite_from_no_data():
    import math

    from dumpscope.core.engines.trend import series, sparkline

    pts = [{"max": 1.0}, {"max": None, "recorded_nonfinite": {"max": "nan"}}, {"max": None}, {"max": None, "nan": 4}]
    assert sparkline(series(pts, "max")) == "▄×·×"
    assert sparkline([1.0, math.inf, None]) == "▄×·"
