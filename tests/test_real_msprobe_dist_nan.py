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
