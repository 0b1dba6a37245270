"""A real MindSpore 2.10 CPU run with a while loop and an if on tensors (tests/data/real_ms210_cf_nan.tar.gz, see
its README): the step runs kernel graphs 2, 6, 2, 6, 2, 10, 16, 0, 13, 9, 1, and a NaN is born in the loop body's
Sqrt (graph 6) before graph 0 runs.  Expectations come from the files themselves (their timestamps) and numpy."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, unpack_data

SQRT = "Default/network-WithLossCell/_backbone-Net/Sqrt-op0"


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_cf_nan") / "cf"


def _ts(path: str) -> int:
    return int(os.path.basename(path).split(".")[-6])


def _graph_runs(dump: Path, step: int) -> list[str]:
    """The kernel graphs in the order their files were written, one entry per uninterrupted run."""
    files = []
    for graph in os.listdir(dump / "rank_0" / "Net"):
        for f in os.listdir(dump / "rank_0" / "Net" / graph / str(step)):
            if not f.startswith("Parameter."):  # parameters are written after the step's last kernel
                files.append((_ts(f), graph))
    return [g for g, _ in itertools.groupby(g for _, g in sorted(files))]


def test_ops_of_a_step_follow_the_graphs_as_they_ran(capsys, dump, tmp_path):
    for step in (0, 1):
        ops = cli_json(capsys, "ops", str(dump), "--step", str(step), "--cache-dir", str(tmp_path))["ops"]
        assert [o["exec_index"] for o in ops] == list(range(len(ops)))
        ran = [g for g, _ in itertools.groupby(o["graph"] for o in ops)]
        assert ran == _graph_runs(dump, step)
        assert ran.index("6") < ran.index("0")  # the loop body ran before graph 0


def test_overflow_names_the_sqrt_in_the_loop_body_as_born(capsys, dump, tmp_path):
    doc = cli_json(capsys, "overflow", str(dump), "--cache-dir", str(tmp_path))
    origin = doc["origin"]
    assert (origin["name"], origin["step"], origin["judgement"]) == (SQRT, 0, "born")
    sqrt_files = sorted((dump / "rank_0" / "Net" / "6" / "0").glob("Sqrt.*.npy"), key=lambda p: _ts(str(p)))
    x, y = np.load(sqrt_files[0]), np.load(sqrt_files[1])  # the first run: its input, then its output
    assert ".input.0." in sqrt_files[0].name and ".output.0." in sqrt_files[1].name
    assert np.isfinite(x).all() and (x < 0).any()
    assert origin["first_bad"]["index"] == [int(i) for i in np.argwhere(np.isnan(y))[0]]
    first = doc["ops"][0]
    assert (first["name"], first["nan"]) == (SQRT, int(np.isnan(y).sum()))
    # numpy agrees: every float output that ran before the Sqrt in step 0 is finite
    ops = cli_json(capsys, "ops", str(dump), "--step", "0", "--cache-dir", str(tmp_path))["ops"]
    for op in ops:
        if op["exec_index"] >= origin["exec_index"]:
            break
        for t in op["tensors"]:
            arr = np.load(t["file"])
            if t["io"] == "output" and arr.dtype.kind == "f":
                assert np.isfinite(arr).all(), op["name"]
