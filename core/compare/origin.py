"""Where an error is born: the origin of each op's divergence and the first divergence.

Walking ops in execution order, an op whose outputs are in error is

* ``"constant"`` when one of its constant/scalar inputs changed (msprobe ParametersErrChecker:
  "scalar parameters inconsistent" is its first error too) — also when no output moved;
* ``"born"`` when none of its inputs that have a producer carries an error: the error starts
  here (msprobe OneThousandthErrChecker / RelativeErrChecker: inputs fine, output not).  When a
  tensor input is itself in error although nothing dumped before it diverged (different data or
  weights), ``via`` names that input and the first divergence's rule says so;
* ``"inherited"`` otherwise, naming the input that carries it.

An input *carries* an error when its row is in error (or a warning, or for statistics-only pairs
any move beyond noise: after an upstream error that is the error, diluted), it has a producer (an op in the graph,
not a Parameter, a Load of one or a literal; for API dumps without a graph every tensor input
counts as produced) and some op before it in execution order has an output in error (the graph's
producer is not required to be that op: MindSpore's graph files describe the graph before
kernel expansion, whose input order can differ from the dumped kernel's) — an input
that differs while nothing upstream did was changed outside the dumped ops (different weights or
data), so the op reading it is where the difference first shows.  For output-only dumps the
producers named by the graph stand in for the inputs, and in API dumps (msprobe,
Troubleshooter) a backward call also carries what its forward call's tensors carry: it computes
from tensors the forward call saved, which the dump does not list as its inputs.

The first divergence is the first op (execution order) whose origin is ``born`` or ``constant``,
never a parameter while any op diverges; if every error is inherited (the culprit was not dumped)
it falls back to the first op with an error output.  Parameters (MindSpore writes them after the
optimizer update, so they differ from step 0 on) only answer when no op diverges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from dumpscope.core.model import INPUT, OUTPUT

BORN = "born"
INHERITED = "inherited"
CONSTANT = "constant"

CAUSE_TENSOR = "tensor"
CAUSE_CONSTANT = "constant"

ERROR = "error"
WARNING = "warning"


@dataclass(slots=True)
class RowFacts:
    """What the walk needs of one compared tensor row."""

    io: str
    slot: int
    verdict: str
    kind: str = "tensor"  # "tensor" | "scalar" | "parameter"
    produced: bool = True  # False: Parameter / Load / literal / graph input
    rule: str = ""
    stats_differ: bool = False  # statistics-only pair whose stats moved beyond noise (verdict may be pass)

    @property
    def label(self) -> str:
        return f"{self.io}.{self.slot}"


@dataclass(slots=True)
class OpFacts:
    """One matched op: its rows, and (graph) the names of the ops producing its inputs."""

    name: str
    rows: list[RowFacts]
    parameter: bool = False
    producers: list[str] = field(default_factory=list)
    input_producers: dict[int, str] = field(default_factory=dict)  # input slot -> producing *dumped* op
    saved_from: Optional[str] = None  # API dumps: the forward call whose saved tensors a backward call uses


@dataclass(slots=True)
class Origin:
    """The judgement for one op: ``kind`` None when its outputs are fine and no constant changed."""

    kind: Optional[str]
    via: Optional[str] = None  # "input.5" (constant) / "input.0 ← producer" (inherited)
    rule: Optional[str] = None


@dataclass(slots=True)
class FirstDivergence:
    op: int  # index into the ops given to trace
    row: int  # index into that op's rows
    cause: str
    rule: str


def _bad(r: RowFacts) -> bool:
    return r.verdict == ERROR


def _off(r: RowFacts) -> bool:
    """An error or a warning — or, for statistics, any move beyond noise: after an upstream error
    that is the error, diluted (aggregates hide element moves that a tensor compare would see)."""
    return r.verdict in (ERROR, WARNING) or r.stats_differ


def trace(ops: Sequence[OpFacts]) -> list[Origin]:
    """The origin of every op, in the order given (execution order)."""
    out: list[Origin] = []
    seen_bad_output = False
    bad_ops: set[str] = set()
    off_ops: set[str] = set()
    for op in ops:
        origin = _origin(op, seen_bad_output, bad_ops, off_ops)
        out.append(origin)
        if not op.parameter and any(_bad(r) for r in op.rows if r.io == OUTPUT):
            seen_bad_output = True
            bad_ops.add(op.name)
        if not op.parameter and any(_off(r) for r in op.rows):
            off_ops.add(op.name)
    return out


def _origin(op: OpFacts, upstream_bad: bool, bad_ops: set[str], off_ops: set[str]) -> Origin:
    if op.parameter:
        return Origin(None)
    consts = [r for r in op.rows if r.io == INPUT and r.kind == "scalar" and _bad(r)]
    if consts:
        return Origin(CONSTANT, consts[0].label, consts[0].rule)
    outs_bad = [r for r in op.rows if r.io == OUTPUT and _bad(r)]
    if not outs_bad:
        return Origin(None)
    for r in op.rows:
        if r.io != INPUT or r.kind == "scalar" or not _off(r) or not r.produced:
            continue
        if not upstream_bad:
            continue
        producer = op.input_producers.get(r.slot)
        via = f"{r.label} ← {producer}" if producer in bad_ops else r.label
        return Origin(INHERITED, via, r.rule)
    if upstream_bad and op.saved_from is not None and op.saved_from in off_ops:
        return Origin(INHERITED, f"saved tensors of {op.saved_from}", None)
    if not any(r.io == INPUT for r in op.rows):
        for p in op.producers:
            if p != op.name and p in bad_ops:
                return Origin(INHERITED, f"← {p}", None)
    return Origin(BORN, _outside_input(op), outs_bad[0].rule)


def _outside_input(op: OpFacts) -> Optional[str]:
    """The first tensor input that already differs although no dumped op before it diverged: the
    difference came from outside the dumped ops (data, weights), which the answer must say — the op
    computed nothing wrong, it is only where the difference first shows."""
    for r in op.rows:
        if r.io == INPUT and r.kind != "scalar" and _bad(r):
            return r.label
    return None


def first_divergence(ops: Sequence[OpFacts], origins: Sequence[Origin]) -> Optional[FirstDivergence]:
    """The first op where an error is born (module docstring), or ``None`` when nothing erred."""
    fallback: Optional[FirstDivergence] = None
    param_fd: Optional[FirstDivergence] = None
    for i, (op, org) in enumerate(zip(ops, origins)):
        bad_rows = [j for j, r in enumerate(op.rows) if _bad(r)]
        if not bad_rows:
            continue
        if op.parameter:
            if param_fd is None:
                param_fd = FirstDivergence(i, bad_rows[0], CAUSE_TENSOR, op.rows[bad_rows[0]].rule)
            continue
        outs = [j for j in bad_rows if op.rows[j].io == OUTPUT]
        if org.kind == CONSTANT:
            j = outs[0] if outs else next(j for j in bad_rows if op.rows[j].label == org.via)
            return FirstDivergence(i, j, CAUSE_CONSTANT, f"{org.via} {org.rule}")
        if org.kind == BORN:
            rule = op.rows[outs[0]].rule
            if org.via:
                rule = (f"{org.via} already differs and no dumped op before it diverged "
                        f"(different input data or weights); output: {rule}")
            return FirstDivergence(i, outs[0], CAUSE_TENSOR, rule)
        if outs and fallback is None:
            fallback = FirstDivergence(i, outs[0], CAUSE_TENSOR, op.rows[outs[0]].rule)
    return fallback or param_fd
