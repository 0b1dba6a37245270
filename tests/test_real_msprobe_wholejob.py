"""Whole-job answers on the real msprobe 26.2 dumps (tests/data/msprobe26/README.md): the NaN run's origin
judged from msprobe's own statistics, the 2-rank gloo run covered rank by rank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cli_json, unpack_data


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_msprobe26")


def _dump_json(run: Path) -> dict:
    return json.loads(next(run.glob("step0/*/dump.json")).read_text())["data"]


def test_nan_run_origin_is_the_sqrt_of_a_negative_input(capsys, dumps, tmp_path):
    doc = cli_json(capsys, "overflow", str(dumps / "nan_stats"), "--cache-dir", str(tmp_path))
    data = _dump_json(dumps / "nan_stats")
    # msprobe's own statistics: the first forward call whose output extremes are NaN/Inf
    first = next(name for name, v in data.items() if any(
        isinstance(o, dict) and str(o.get("Max")) in ("nan", "inf", "-inf") for o in v.get("output", [])))
    assert doc["ops"][0]["name"] == first == "Torch.sqrt.0.forward"
    judged = doc["first_bad"][0]
    inp = data[first]["input_args"][0]
    assert judged["judgement"] == "born"
    assert judged["reason"].startswith(f"inputs finite (max {max(abs(inp['Max']), abs(inp['Min'])):.4g})")


def test_two_rank_run_is_scanned_on_both_ranks(capsys, dumps, tmp_path):
    doc = cli_json(capsys, "overflow", str(dumps / "dist_stats"), "--cache-dir", str(tmp_path))
    assert [(p["rank"], p["step"]) for p in doc["scanned"]] == [(0, 0), (1, 0)]
    assert all(p["unknown"] == 0 for p in doc["scanned"]) and doc["ops"] == []
