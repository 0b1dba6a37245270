"""Whether a dumped op can be a graph node: its dumped tensors against the node's tensor descriptors.

A join of dump files to a graph node goes by names, and MindSpore's names are not a safe key inside a
kernel graph: it numbers some ops differently in the files than in the ``.ir`` (``join_names``), and
on a real 2.10 CPU while loop it wrote the loop body's ``x + 0.1`` as ``Add-op0`` and the counter's
``i + 1`` as ``Add-op1`` while the body's ``.ir``/``.pb`` (graph 6) and execution-order CSV call them
the other way round (tests/data/real_ms210_cf_nan: file ``Add-op0`` float32 [2, 4], node ``Add-op0``
int32 []).  What the files hold is the fact; a node whose tensors cannot be those files is not the op.
Part of ``graph_join``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from dumpscope.core.model import GraphNode

#: graph kinds whose node descriptors are the host tensors MindSpore's dump files hold (checked on every
#: real MindSpore dump in tests/data: 0 disagreements besides the two swapped Adds).  GE graph text,
#: ONNX and JSON descriptors are left out: CANN files hold device layouts (padded C0, FRACTAL_NZ) and no
#: real GE graph with its dump was at hand to check them against.
CHECKED_KINDS = frozenset({"ms_ir", "ms_pb"})


@dataclass(frozen=True, slots=True)
class Dumped:
    """One dumped tensor as far as the guard needs it: where it sits and what it can be."""

    io: str  # "input" | "output"
    slot: int
    dtypes: frozenset[str]  # the label, and the stored data type where it differs
    counts: frozenset[int]  # element counts of the logical and the device shape


def dumped_of(tensors_json: Iterable[str]) -> tuple[Dumped, ...]:
    """The tensors of an op's units (``units.tensors`` as stored) as ``Dumped`` records."""
    out: list[Dumped] = []
    for text in tensors_json:
        if not text:
            continue
        for entry in json.loads(text):
            io, slot, dtype, shape, _fmt, dshape, stored = entry[:7]
            counts = {c for c in (_count(shape), _count(dshape)) if c is not None}
            out.append(Dumped(str(io), int(slot), frozenset(str(d) for d in (dtype, stored) if d), frozenset(counts)))
    return tuple(out)


def _count(shape: Any) -> Optional[int]:
    """Elements of a static shape; None for a dynamic (``-1``, ``-2``) or unreadable one."""
    if not isinstance(shape, (list, tuple)) or any(not isinstance(d, int) or d < 0 for d in shape):
        return None
    return math.prod(shape)


def disagreement(dumped: tuple[Dumped, ...], node: GraphNode) -> Optional[str]:
    """Why the dumped tensors cannot be this node's, or None when they agree or nothing compares.

    Per dumped tensor, the node's descriptor at the same input or output slot must have its data type
    and its number of elements.  Element counts, not shapes: MindSpore 2.10 writes a view op's
    tensors with the shape before the view (tests/data/real_mindspore_train ms210_stem: ``Flatten``
    output dumped [2, 2, 4, 4], ``.ir`` [2, 32]; the consumer's input likewise), the same data.  A
    Data types compare by kind (float, integer, bool, complex), not width: a device kernel may run a
    node at another width than the graph file says (Ascend's precision-reducing kernel selection; int64
    carried as int32; an async CANN dump beside a graph file written before kernel selection), while a
    float tensor can never be an int32 loop counter.  A
    descriptor without a data type (a tuple, a monad, an unnamed kernel-graph input) or with a dynamic
    dimension says nothing; a slot the node does not describe says nothing either (the guard refuses
    only on evidence)."""
    for t in dumped:
        descs = node.input_descs if t.io == "input" else node.output_descs if t.io == "output" else []
        if t.slot < 0 or t.slot >= len(descs):
            continue
        d = descs[t.slot]
        dtypes = {d["dtype"]} if d.get("dtype") else set()
        counts = {c for c in (_count(d.get("shape")), _count(d.get("device_shape"))) if c is not None}
        if not dtypes or not counts or d.get("abstract"):
            continue
        if t.dtypes and not {kind_of(x) for x in t.dtypes} & {kind_of(x) for x in dtypes}:
            return f"dumped {t.io} {t.slot} is {'/'.join(sorted(t.dtypes))}, the node's {'/'.join(sorted(dtypes))}"
        if t.counts and not t.counts & counts:
            return (f"dumped {t.io} {t.slot} holds {_n(t.counts)} elements, the node's "
                    f"{d.get('shape')} {_n(counts)}")
    return None


def kind_of(dtype: str) -> str:
    """A data type's kind: ``float`` (float8 to float64, bfloat16, hifloat8), ``int`` (signed and
    unsigned, packed int4/int2/uint1 too), ``bool``, ``complex``; an unknown name is its own kind."""
    name = dtype.lower().replace("_", "")
    if name.startswith("bool"):
        return "bool"
    if name.startswith("complex"):
        return "complex"
    if "float" in name or name.startswith(("bf", "fp", "half", "double", "hif")):
        return "float"
    if name.startswith(("int", "uint", "qint", "quint")):
        return "int"
    return name


def _n(counts: frozenset[int] | set[int]) -> str:
    return "/".join(str(c) for c in sorted(counts))
