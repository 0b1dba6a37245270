"""Real 2-rank MindSpore 2.10 and 2.7 data-parallel runs (msrun on CPU, gloo) where rank 1 goes NaN at its
Log-op0 in step 0 and the gradient AllReduce carries NaN to rank 0 (tests/data/real_ms210_dp2.tar.gz,
see its README).  Expectations come from MindSpore's own execution-order CSVs and numpy on the dumped
files, never from dumpscope."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, unpack_data

LOG = "Default/network-WithLossCell/_backbone-Net/Log-op0"
MATMUL = "Default/network-WithLossCell/_backbone-Net/fc-Dense/MatMul-op0"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_dp2")


@pytest.fixture(params=["dp2", "dp2_ms27"])
def dump(request, dumps) -> Path:
    return dumps / request.param


def step_dir(dump: Path, rank: int, step: int) -> Path:
    return dump / f"rank_{rank}" / "Net" / "0" / str(step)


def kernel_files(dump: Path, rank: int, step: int, name: str, io: str) -> list[Path]:
    """The dumped files of one kernel, found the way MindSpore names them: ``{type}.{name with / → _}.…``."""
    kind = name.rsplit("/", 1)[-1].split("-op")[0]
    prefix = f"{kind}.{name.replace('/', '_')}."
    return sorted(p for p in step_dir(dump, rank, step).iterdir()
                  if p.name.startswith(prefix) and f".{io}." in p.name[len(prefix):])


def execution_order(dump: Path, rank: int) -> list[str]:
    lines = (dump / f"rank_{rank}" / "execution_order" / "ms_execution_order_graph_0.csv").read_text().split()
    return lines[1:]  # header: NodeExecutionOrder-FullNameWithScope


def first_nonfinite_kernel(dump: Path, rank: int, step: int) -> tuple[str, tuple[int, ...]]:
    """What numpy says: the first kernel in MindSpore's execution order with a non-finite output."""
    for name in execution_order(dump, rank):
        for f in kernel_files(dump, rank, step, name, "output"):
            a = np.load(f)
            if a.dtype.kind == "f" and not np.isfinite(a).all():
                return name, tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
    raise AssertionError("no non-finite output")


def test_summary_sees_both_ranks_and_steps_and_reads_every_file(capsys, dump, tmp_path):
    doc = cli_json(capsys, "summary", str(dump), "--cache-dir", str(tmp_path))
    assert doc["ranks"] == [0, 1] and doc["steps"] == [0, 1]
    assert doc["problems"] == []
    on_disk = sum(1 for p in dump.rglob("*") if p.is_file())
    acc = doc["accounting"]
    assert doc["files"] == acc["files"] == on_disk
    assert (acc["tensor"], acc["not_recognised"], acc["problem"]) == (sum(1 for _ in dump.rglob("*.npy")), 0, 0)


def test_overflow_names_rank_1s_log_as_the_origin_and_rank_0_as_receiving_it(capsys, dump, tmp_path):
    doc = cli_json(capsys, "overflow", str(dump), "--cache-dir", str(tmp_path))
    assert sorted((p["rank"], p["step"]) for p in doc["scanned"]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    by_rank = {fb["rank"]: fb for fb in doc["first_bad"]}
    for rank in (0, 1):
        name, index = first_nonfinite_kernel(dump, rank, 0)
        fb = by_rank[rank]
        assert (fb["name"], fb["step"]) == (name, 0)
        assert tuple(fb["first_bad"]["index"]) == index
        # its inputs are finite (numpy), so it is where the NaN shows first on that rank
        for f in kernel_files(dump, rank, 0, name, "input"):
            a = np.load(f)
            assert a.dtype.kind != "f" or np.isfinite(a).all()
    assert by_rank[1]["name"] == LOG and by_rank[1]["judgement"] == "born"
    # rank 0's first bad kernel is the gradient AllReduce: it received the NaN, it did not make it
    assert by_rank[0]["type"] == "AllReduce" and by_rank[0]["judgement"] == "received"
    origin = doc["origin"]
    assert (origin["rank"], origin["step"], origin["name"]) == (1, 0, LOG)
    assert doc["ops"][0]["name"] == LOG and doc["ops"][0]["rank"] == 1


def test_trend_of_the_log_over_ranks_and_steps_counts_numpys_nans(capsys, dump, tmp_path):
    doc = cli_json(capsys, "trend", str(dump), LOG, "--rank", "all", "--cache-dir", str(tmp_path))
    assert sorted((p["rank"], p["step"]) for p in doc["points"]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for p in doc["points"]:
        (f,) = kernel_files(dump, p["rank"], p["step"], LOG, "output")
        out = np.load(f)
        assert (p["count"], p["nan"]) == (out.size, int(np.isnan(out).sum()))
    nan_by_place = {(p["rank"], p["step"]): p["nan"] for p in doc["points"]}
    assert nan_by_place[(0, 0)] == 0 and nan_by_place[(1, 0)] > 0


def test_rank_against_rank_names_the_kernel_whose_data_differs_and_says_why(capsys, dump, tmp_path):
    doc = cli_json(capsys, "compare", str(dump), str(dump), "--golden-rank", "0", "--target-rank", "1",
                   "--cache-dir", str(tmp_path))
    fd = doc["first_divergence"]
    # numpy: the first kernel (MindSpore's order) whose output differs between the ranks, and the
    # input that already differs — each rank has its own batch
    differs = []
    for name in execution_order(dump, 0):
        g = [np.load(f) for f in kernel_files(dump, 0, 0, name, "output")]
        t = [np.load(f) for f in kernel_files(dump, 1, 0, name, "output")]
        if any(a.shape != b.shape or not np.allclose(a, b, equal_nan=True) for a, b in zip(g, t)):
            differs.append(name)
    assert fd["name"] == differs[0] == MATMUL
    (g_in,), (t_in,) = (kernel_files(dump, r, 0, MATMUL, "input")[:1] for r in (0, 1))
    assert not np.array_equal(np.load(g_in), np.load(t_in))
    assert (fd["rank"], fd["target_rank"], fd["origin"]) == (0, 1, "born")
    assert fd["rule"].startswith("input.0 (graph input inputs0) already differs")
