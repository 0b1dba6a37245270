"""Troubleshooter's NaN-in-summary quirk on real dumps (tests/data/ts_nan/README.md): the NaN it writes for
statistics it did not collect (the mean of every row) is no overflow evidence; a tensor's own NaN is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, unpack_data


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ts_nan")


def _bad_outputs(root: Path) -> list[str]:
    """Ops whose output npy holds a NaN/Inf, in the info file's order (numpy decides)."""
    out = []
    for line in next(root.rglob("*_api_dump_info.csv")).read_text().splitlines():
        prefix = json.loads(line)[0]
        npy = next(root.rglob(prefix + ".npy"), None)
        if "_output" in prefix and npy is not None and not np.isfinite(np.load(npy)).all():
            out.append(prefix.rsplit("_", 1)[0])
    return out


def test_the_nan_api_comes_first_and_matches_the_tensors(capsys, nan_run):
    bad = _bad_outputs(nan_run)
    assert bad[0] == "Torch_sqrt_0_forward"
    rows = cli_json(capsys, "overflow", str(nan_run))["ops"]
    assert [r["name"] for r in rows] == bad
    assert rows[0]["evidence"] == "stats"


def test_statistics_only_the_nan_api_still_comes_first(capsys, nan_run, tmp_path):
    tree = tmp_path / "ts"
    shutil.copytree(nan_run, tree)
    shutil.rmtree(next(tree.rglob("torch_api_dump")))
    rows = cli_json(capsys, "overflow", str(tree))["ops"]
    assert rows and rows[0]["name"] == "Torch_sqrt_0_forward" and rows[0]["nan"] >= 1
    st = cli_json(capsys, "stats", str(tree), "Torch_sub_0_forward")
    assert st["source"] == "stats" and st["mean"] is None  # not collected: not a NaN mean
    assert st["dtype"] == "float32" and st["shape"] == [2, 4]


def test_nan_third_summary_value_on_every_row_is_not_evidence(capsys, tmp_path_factory):
    dumps = unpack_data(tmp_path_factory, "real_api_dumps")
    info = (dumps / "ts_a" / "rank0" / "torch_api_dump_info.csv").read_text().splitlines()
    assert all(json.loads(line.replace("NaN", "null"))[5][2] is None for line in info)  # every mean is NaN
    assert _bad_outputs(dumps / "ts_a") == []  # the tensors are finite
    assert cli_json(capsys, "overflow", str(dumps / "ts_a"))["ops"] == []
