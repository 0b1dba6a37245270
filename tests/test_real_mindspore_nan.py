"""A real MindSpore 2.10 training run whose loss goes NaN at Log-op0 in step 0, with steps 1-2 dumped
(tests/data/real_ms210_nan.tar.gz, see its README).  Expectations come from numpy on the dumped files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, unpack_data

LOG = "Default/network-WithLossCell/_backbone-Net/Log-op0"


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_nan") / "nan"


def _files(dump: Path, step: int, kernel: str, io: str) -> list[Path]:
    return sorted((dump / "rank_0" / "Net" / "0" / str(step)).glob(f"Log.{kernel}.*.{io}.*.npy"))


def test_plain_overflow_lists_the_log_first_and_covers_later_steps(capsys, dump, tmp_path):
    doc = cli_json(capsys, "overflow", str(dump), "--cache-dir", str(tmp_path))
    first = doc["ops"][0]
    assert (first["name"], first["step"]) == (LOG, 0)
    out = np.load(_files(dump, 0, "Default_network-WithLossCell__backbone-Net_Log-op0", "output")[0])
    assert (first["nan"], first["neginf"], first["posinf"]) == \
        (int(np.isnan(out).sum()), int(np.isneginf(out).sum()), int(np.isposinf(out).sum()))
    x = np.load(_files(dump, 0, "Default_network-WithLossCell__backbone-Net_Log-op0", "input")[0])
    assert np.isfinite(x).all() and (x <= 0).any()  # what MindSpore gave the Log: finite, not all positive
    assert {r["step"] for r in doc["ops"]} == {0, 1, 2}
    assert [(p["rank"], p["step"]) for p in doc["scanned"]] == [(0, 0), (0, 1), (0, 2)]
    judged = doc["first_bad"][0]
    assert judged["judgement"] == "born" and judged["reason"].startswith("inputs finite")
    # numpy agrees that every output before the Log in step 0 is finite, and the Log's is not
    ops = cli_json(capsys, "ops", str(dump), "--step", "0", "--cache-dir", str(tmp_path))["ops"]
    for op in ops:
        outs = [np.load(t["file"]) for t in op["tensors"] if t["io"] == "output"]
        finite = all(np.isfinite(o).all() for o in outs if o.dtype.kind == "f")
        if op["exec_index"] < first["exec_index"]:
            assert finite, op["name"]
        elif op["name"] == LOG:
            assert not finite


def test_trend_of_the_log_has_one_point_per_step_with_numpys_nan_count(capsys, dump, tmp_path):
    doc = cli_json(capsys, "trend", str(dump), LOG, "--cache-dir", str(tmp_path))
    assert (doc["op"], doc["io"], doc["slot"]) == (LOG, "output", 0)
    assert [(p["rank"], p["step"]) for p in doc["points"]] == [(0, 0), (0, 1), (0, 2)]
    for p in doc["points"]:
        out = np.load(_files(dump, p["step"], "Default_network-WithLossCell__backbone-Net_Log-op0", "output")[0])
        assert (p["nan"], p["neginf"], p["posinf"], p["count"]) == \
            (int(np.isnan(out).sum()), int(np.isneginf(out).sum()), int(np.isposinf(out).sum()), out.size)
        fin = out[np.isfinite(out)]
        assert p["max"] == pytest.approx(float(fin.max())) and p["min"] == pytest.approx(float(fin.min()))


def test_path_at_the_rank_folder_keeps_every_step(capsys, dump, tmp_path):
    doc = cli_json(capsys, "overflow", str(dump / "rank_0"), "--cache-dir", str(tmp_path))
    assert [(p["rank"], p["step"]) for p in doc["scanned"]] == [(0, 0), (0, 1), (0, 2)]
    assert (doc["ops"][0]["name"], doc["ops"][0]["step"]) == (LOG, 0)
