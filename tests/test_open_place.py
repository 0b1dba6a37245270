"""Where the explorer opens (``core.overflow.start_place``): the whole-job rule on what the index knows,
nothing read.  A two-rank MindSpore-style tree (numpy-written, like the real dp2 run of
test_real_ms210_dp2 but with the collective *earlier*): rank 0's first bad op is its AllReduce (it
received the NaN), rank 1's is a Log that made it, later by execution index and by timestamp."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from conftest import cli_json
from dumpscope.core.engines.overflow.lookup import first_bad_op, start_place, trouble_places
from dumpscope.core.query import open_query

OPS = {0: [("AllReduce", "Default/grad/AllReduce-op0"), ("Mul", "Default/grad/Mul-op0"),
           ("Log", "Default/net/Log-op0")],
       1: [("MatMul", "Default/net/MatMul-op0"), ("Add", "Default/net/Add-op0"), ("Log", "Default/net/Log-op0")]}
BAD = {0: "Default/grad/AllReduce-op0", 1: "Default/net/Log-op0"}


def _tree(root: Path) -> Path:
    for rank, ops in OPS.items():
        order = root / f"rank_{rank}" / "execution_order"
        order.mkdir(parents=True)
        (order / "ms_execution_order_graph_0.csv").write_text(
            "NodeExecutionOrder-FullNameWithScope\n" + "".join(f"{n}\n" for _, n in ops))
        folder = root / f"rank_{rank}" / "Net" / "0" / "0"
        folder.mkdir(parents=True)
        bad_seen = False
        for i, (kind, name) in enumerate(ops):
            ts = 1700000000000000 + i * 10 + rank * 5  # rank 0's AllReduce is the earliest bad op of all
            for io in ("input", "output"):
                a = np.full((2, 2), 0.5, np.float32)
                if io == "output" and (name == BAD[rank] or bad_seen):
                    a[0, 0] = np.nan
                np.save(folder / f"{kind}.{name.replace('/', '_')}.0.0.{ts + (io == 'output')}.{io}.0"
                                 f".DefaultFormat.float32.npy", a)
            bad_seen = bad_seen or name == BAD[rank]
    return root


def test_a_rank_that_received_the_nan_through_a_collective_is_not_where_the_explorer_opens(tmp_path, capsys):
    root = _tree(tmp_path / "dump")
    cache = tmp_path / "cache"
    doc = cli_json(capsys, "overflow", str(root), "--cache-dir", str(cache))  # evidence kept in the index
    assert {(r["rank"], r["name"]) for r in doc["ops"]} >= {(0, BAD[0]), (1, BAD[1])}
    q = open_query(str(root), cache_directory=cache)
    trouble = trouble_places(q)
    assert set(trouble) == {(0, 0), (1, 0)}
    assert trouble[(0, 0)][1] < trouble[(1, 0)][1]  # by execution index alone rank 0 would win
    assert start_place(q, trouble) == ((1, 0), True)
    assert first_bad_op(q, 1, 0).name == BAD[1] and first_bad_op(q, 0, 0).name == BAD[0]
    assert start_place(q, {}) == ((0, 0), False)
