"""Synthetic multi-rank, multi-step CANN jobs: ``{time}/{device}/{model}/1/{step}/`` per rank.

Every place runs the same five ops on float16 values computed with numpy: MatMul → Exp → Mul →
HcomAllReduce (the sum over ranks of the Mul outputs) → Add.  ``overflow={(rank, step)}`` makes
that rank's Exp overflow to +Inf at that step (its inputs stay finite); the Inf then reaches every
rank through the all-reduce.  ``opdebug=True`` also writes an Opdebug file naming each overflowing
Exp (the way an overflow-detection run reports it).  Deterministic; writes only below ``root``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from synth.cann_writer import SynthTensor, write_dump
from synth.opdebug_writer import encode_opdebug_payload_old, write_opdebug_file
from synth.stats_csv_writer import write_cann_stats_csv

TIME = "20240701000000"
MODEL = f"ge_default_{TIME}_1"
OPS = ("model/mm/MatMul", "model/act/Exp", "model/scale/Mul", "model/grad/HcomAllReduce", "model/out/Add")
TYPES = ("MatMul", "Exp", "Mul", "HcomAllReduce", "Add")


def _place_values(rank: int, step: int, bad: bool) -> list[tuple[list[np.ndarray], np.ndarray]]:
    rng = np.random.default_rng(1000 * rank + step)
    x = (rng.standard_normal((4, 8)) * 0.5).astype(np.float16)
    w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float16)
    mm = (x.astype(np.float32) @ w.astype(np.float32)).astype(np.float16)
    scale = np.float16(40.0 if bad else 0.5)
    with np.errstate(over="ignore"):
        exp = np.exp((mm * scale).astype(np.float16) + np.float16(8.0 if bad else 0.0)).astype(np.float16)
        mul = (exp * np.float16(0.5)).astype(np.float16)
    return [([x, w], mm), ([mm], exp), ([exp], mul)]


def write_cann_job(root, ranks: Iterable[int] = (0, 1), steps: Iterable[int] = (0, 1, 2),
                   overflow: Iterable[tuple[int, int]] = (), opdebug: bool = False) -> Path:
    """Write the job; returns ``root`` (the dump path holding the ``{time}`` folder)."""
    root = Path(root)
    ranks, steps, bad = list(ranks), list(steps), set(overflow)
    for step in steps:
        per_rank = {r: _place_values(r, step, (r, step) in bad) for r in ranks}
        with np.errstate(over="ignore", invalid="ignore"):
            total = np.sum([per_rank[r][2][1].astype(np.float32) for r in ranks], axis=0).astype(np.float16)
            out = (total + np.float16(1.0)).astype(np.float16)
        for r in ranks:
            folder = root / TIME / str(r) / MODEL / "1" / str(step)
            calls = per_rank[r] + [([per_rank[r][2][1]], total), ([total], out)]
            ts0 = 1719792000000000 + step * 1_000_000 + r * 7
            for k, (ins, o) in enumerate(calls):
                ts = ts0 + k * 100
                write_dump(folder, TYPES[k], OPS[k], task=10 + k, stream=2, ts=ts,
                           inputs=[SynthTensor(a, "float16") for a in ins], outputs=[SynthTensor(o, "float16")])
            if opdebug and (r, step) in bad:
                payload = encode_opdebug_payload_old(
                    aicore={"model_id": 1, "stream_id": 2, "task_id": 11, "task_type": 0, "pc_start": 0x1000,
                            "para_base": 0x2000, "kernel_code": 0x1000, "block_idx": 0, "status": 0x20})
                write_opdebug_file(str(folder / f"Opdebug.Node_OpDebug.99.2.{ts0 + 150}"), payload,
                                   dump_time=ts0 + 150)
    return root


def write_cann_stats_job(root, ranks: int, steps: int, ops: int, values: np.ndarray,
                         nan_at: tuple[int, int, int], nan_index: tuple[int, ...]) -> Path:
    """A CANN ``dump_data=stats`` job: ``{time}/{rank}/{model}/1/{step}/`` holding ``ops`` per-op CSVs
    of one ``Mul`` each (input and output ``values``, float16); the op at ``nan_at`` = (rank, step, op)
    has a NaN at ``nan_index`` in its output.  Returns ``root``."""
    root = Path(root)
    bad = values.copy()
    bad[nan_index] = np.nan
    for r in range(ranks):
        for s in range(steps):
            folder = root / "20240801000000" / str(r) / "ge_default_20240801000000_1" / "1" / str(s)
            for k in range(ops):
                out = bad if (r, s, k) == nan_at else values
                write_cann_stats_csv(folder, "Mul", f"model/layer_{k}/Mul", k + 1, 1,
                                     1722470400000000 + s * 10_000_000 + k * 100 + r,
                                     inputs=[(values, "float16", "ND")], outputs=[(out, "float16", "ND")])
    return root
