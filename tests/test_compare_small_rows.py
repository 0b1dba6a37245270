"""A small block's row read from its columns gives what its record gives (issue 33).

``measure_many.judged`` makes no ``CompareResult`` for a small block's row that the fixed rules pass
(``verdict.small_passes``); the engine reads the facts the walk judges (``engine._small_row_facts``)
and the row (``engine._op_rows``) from the block's values.  Here the same blocks go both ways: through
``judged`` as the engine gets them, and as records (``SmallBlock.results`` with ``fixed_verdict``, what
``judged`` gives where it cannot take the shortcut).  The facts before and after the walk, the origins
and the rows (floats by their exact repr) must be equal, on blocks with twins, zero goldens, one
element, sums of squares near overflow (an infinite distance), shapes that differ, dtypes that are an
error, stored dtypes other than the values' (a bfloat16 dump decoded as float32), arguments and
``--atol/--rtol``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

import numpy as np
import pytest

from dumpscope.core.engines.compare import engine
from dumpscope.core.engines.compare import measure_many as mm
from dumpscope.core.engines.compare import origin as org
from dumpscope.core.engines.compare import verdict as vd
from dumpscope.core.engines.compare.metrics import Tolerance
from dumpscope.core.engines.compare.small_pairs import small_block
from dumpscope.core.query.rows import OpRow, TensorRow


def _op(k: int, name: str, op_type: str) -> OpRow:
    return OpRow(k, 0, 0, "", name, name, op_type, "", k, "cann", None, None, 0, None, None, None, None, None, "", None,
                 None, None)


def _tensor(io: str, dtype: str, shape: tuple[int, ...], path: str) -> TensorRow:
    return TensorRow(0, 0, io, 0, dtype, shape, "ND", shape, path, "cann", dtype, 0, 0, 0, "cann", None)


def _arrays(rng: np.random.Generator, case: int, n: int, gdt: str, tdt: str) -> tuple[np.ndarray, np.ndarray]:
    g = rng.standard_normal(n)
    if case == 1:  # the target is the golden (twin rows)
        t = g.copy()
    elif case == 2:  # zeros in the golden: relative errors at eps
        g = rng.integers(-2, 3, n).astype(float)
        t = g + rng.standard_normal(n) * 1e-3
    elif case == 3:  # a golden of zeros
        g = np.zeros(n)
        t = rng.standard_normal(n)
    elif case == 4:  # far from 1
        g = g * 10.0 ** rng.integers(-20, 20)
        t = g * (1 + rng.standard_normal(n) * 1e-3)
    elif case == 5 and gdt == tdt == "float64":  # sums of squares finite, the differences' not: euc_dist inf
        g = np.full(n, 1.2e308 ** 0.5 / n ** 0.5)
        t = -g
    elif case == 6:  # far apart: errors beyond any rounding
        t = g + rng.standard_normal(n)
    else:
        t = g + rng.standard_normal(n) * 1e-3
    with np.errstate(all="ignore"):
        return g.astype(gdt), t.astype(tdt)


def _records(blocks_rows, block, jobs, th):
    """What ``judged`` gives with no shortcut: each row's record with its fixed rules' verdict."""
    made = block.results()
    out = []
    for (_g, _t, _io, kind), r in zip(jobs, blocks_rows):
        rec = made[r]
        rec.verdict, rec.rule = vd.fixed_verdict(rec, vd.Context(th, kind=kind)) or (vd.PASS, "")
        out.append((rec, rec.verdict, rec.rule))
    return out


def _ops(block, at: list[int], kinds: list[str], stored: tuple[str, str], th: vd.Thresholds, shortcut: bool):
    """The block's rows as ops of two pairs (input, output), each taken the engine's way (``judged``) or
    as records; returns the ops with their facts (before the walk), origins and rows."""
    rows_at = [r for r in at if r >= 0]
    jobs = [(None, None, "input" if i % 2 == 0 else "output", kinds[i % len(kinds)]) for i in range(len(rows_at))]
    if shortcut:
        got = mm.judged(([rows_at], [block]), [jobs], th)[0]
    else:
        got = _records(rows_at, block, jobs, th)
    ops, facts_before = [], []
    walk = org.Walk()
    walk.u_run = 2.0 ** -8
    origins, made_rows = [], []
    dtypes: dict[str, dict[str, int]] = {"golden": {}, "target": {}}
    for k in range(0, len(rows_at) - 1, 2):
        gop = top = _op(k, f"net/op{k}/MatMul" if k % 4 else f"net/op{k}/Add", "MatMul" if k % 4 else "Add")
        pairs = []
        for j in (k, k + 1):
            r = rows_at[j]
            io = jobs[j][2]
            g = _tensor(io, stored[0], block.shapes[r], f"g{j}")
            t = _tensor(io, stored[1], block.target_shapes[r], f"t{j}")
            p = engine._Pair(gop, top, "name", g, t, kind=jobs[j][3])
            p.loads = True
            pairs.append(p)
        op = engine._Op(gop, top, "name", pairs)
        op.facts = engine._facts(op, got[k:k + 2], {"inputs_from": []}, {}, set(), th, None, set())
        facts_before.append(repr(dataclasses.astuple(op.facts)))
        origin = walk.judge(op.facts)
        origins.append(origin)
        if engine._apply(op, dtypes):
            op.source = {"file": "x.py", "line": 3}
        made_rows += engine._op_rows(op, origin)
        ops.append(op)
    return ops, facts_before, origins, made_rows, dtypes, walk, got


def _walked(walk: org.Walk) -> str:
    """What the walk keeps of the rows it judged (the evidence), floats by their exact repr."""
    return repr(([dataclasses.astuple(n) for n in walk.nearest], walk.largest and dataclasses.astuple(walk.largest),
                 walk.exact_so_far, walk.noise_e, walk.noise_r))


DTYPES = [("float32", "float32"), ("float16", "float32"), ("float64", "float64"), ("int32", "int32"),
          ("int32", "float32"), ("int8", "int16"), ("bool", "bool")]


@pytest.mark.parametrize("gdt,tdt", DTYPES)
@pytest.mark.parametrize("seed", range(3))
def test_a_small_row_read_from_its_columns_is_its_record(gdt, tdt, seed):
    rng = np.random.default_rng(seed)
    for n in (1, 2, 7, 64):
        for allclose in (None, (1e-3, 1e-2)):
            th = vd.Thresholds() if allclose is None else vd.Thresholds(rtol=allclose[1], atol=allclose[0])
            pairs = []
            for i in range(24):
                g, t = _arrays(rng, i % 8, n, gdt, tdt)
                if i % 11 == 5 and n > 1:
                    t = t.reshape(1, n)  # the same count in another shape: no shortcut for that row
                pairs.append((g, t))
            block, at = small_block(pairs, Tolerance(rtol=vd.element_rtol(gdt, tdt), allclose=allclose))
            assert block is not None
            for stored in ((gdt, tdt), ("float32", "bfloat16"), ("bfloat16", "int8")):
                for kinds in (["tensor"], ["tensor", "scalar", "parameter"]):
                    fast = _ops(block, at, kinds, stored, th, shortcut=True)
                    slow = _ops(block, at, kinds, stored, th, shortcut=False)
                    assert fast[1] == slow[1]  # the facts the walk is given
                    assert [repr(dataclasses.astuple(op.facts)) for op in fast[0]] == \
                        [repr(dataclasses.astuple(op.facts)) for op in slow[0]]  # and judged
                    assert fast[2] == slow[2]  # origins
                    assert json.dumps(fast[3]) == json.dumps(slow[3])  # rows, floats by repr, key order
                    assert fast[4] == slow[4]
                    assert _walked(fast[5]) == _walked(slow[5])


def test_the_shortcut_is_taken_where_the_fixed_rules_pass_and_only_there():
    """``small_passes``: the fixed rules answer None to every row whose shapes agree (an argument aside),
    and the rows ``judged`` leaves as columns are exactly those; the others keep their records."""
    rng = np.random.default_rng(7)
    taken = 0
    for gdt, tdt in DTYPES:
        pairs = [_arrays(rng, i % 8, 16, gdt, tdt) for i in range(12)]
        pairs[3] = (pairs[3][0], pairs[3][1].reshape(4, 4))
        for allclose in (None, (0.0, 1e-3)):
            th = vd.Thresholds() if allclose is None else vd.Thresholds(rtol=allclose[1], atol=allclose[0])
            block, at = small_block(pairs, Tolerance(rtol=vd.element_rtol(gdt, tdt), allclose=allclose))
            rows_at = [r for r in at if r >= 0]
            for kind in ("tensor", "scalar", "parameter"):
                jobs = [(None, None, "output", kind)] * len(rows_at)
                got = mm.judged(([rows_at], [block]), [jobs], th)[0]
                records = _records(rows_at, block, jobs, th)
                for r, entry, (rec, verdict, rule) in zip(rows_at, got, records):
                    shortcut = type(entry) is list
                    assert shortcut == (kind != "scalar" and vd.fixed_verdict(rec, vd.Context(th, kind=kind)) is None
                                        and vd.small_passes(block.golden_dtype, block.target_dtype, th)
                                        and block.shapes[r] == block.target_shapes[r])
                    if shortcut:
                        taken += 1
                        assert entry[:16] == block.values[r].tolist() and entry[16] is block
                    else:
                        assert (entry[1], entry[2]) == (verdict, rule)
                    if vd.fixed_verdict(rec, vd.Context(th, kind=kind)) is not None:
                        assert not shortcut  # never past a rule that answers
    assert taken > 100
