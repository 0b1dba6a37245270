"""Overflow origin judgement: was an op's NaN/Inf born there, and which rank went bad first.

Rules (msprobe's, for multi-rank NaN analysis):
- a compute op is the origin when its inputs are finite and its outputs are not;
  an op whose input was already non-finite inherited it;
- a collective whose inputs are finite but whose outputs are not *received* the values from
  another rank (a recv follows its send; an all_reduce makes every rank bad at once), so the
  rank that went bad before the collective is the origin; when every rank's inputs to the same
  collective were finite, the collective itself overflowed.
The reason texts are what views show ("inputs finite (max 88.7) → output +inf: float16 range
exceeded").  Pure functions of plain values: no index, no files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

#: largest finite value per dtype: an Inf born from finite inputs exceeded it
_RANGE = {"float16": 65504.0, "bfloat16": 3.3895e38, "float32": 3.4028e38, "float64": 1.7977e308,
          "float8_e5m2": 57344.0, "float8_e4m3fn": 448.0}

#: communication ops by what they are: MindSpore / CANN (``AllReduce``, ``HcomAllReduce``…), torch.distributed
#: and mint.distributed APIs (msprobe ``Distributed.all_reduce``), spelled lower case without ``_``, a leading
#: ``hcom`` or ``distributed.``; a name holding one of these (``BroadcastTo``, ``MatmulAllReduce``,
#: ``npu_mm_all_reduce_base``: a compute op, or compute fused with communication) is not one
_COLLECTIVES = {
    "allreduce": "all_reduce", "allgather": "all_gather", "allgatherintotensor": "all_gather",
    "allgatherbase": "all_gather", "allgatherv": "all_gather", "allgatherobject": "all_gather",
    "allgathertensor": "all_gather", "allgatherintotensorcoalesced": "all_gather",
    "reducescatter": "reduce_scatter", "reducescattertensor": "reduce_scatter", "reducescatterbase": "reduce_scatter",
    "reducescatterv": "reduce_scatter", "reducescattertensorcoalesced": "reduce_scatter",
    "broadcast": "broadcast", "broadcastobjectlist": "broadcast",
    "alltoall": "all_to_all", "alltoallsingle": "all_to_all", "alltoallv": "all_to_all", "alltoallvc": "all_to_all",
    "alltoallvsingle": "all_to_all", "neighborexchange": "all_to_all", "neighborexchangev2": "all_to_all",
    "send": "send", "isend": "send",
    "recv": "recv", "irecv": "recv", "receive": "recv", "collectivepermute": "recv", "batchisendirecv": "recv",
    "collectivegather": "gather", "collectivescatter": "scatter",
}
#: names that are communication only where the op is one of torch.distributed / HCCL (``Torch.gather`` and
#: ``Tensor.scatter`` compute): ``Distributed.reduce``, ``HcomReduce``, MindSpore's ``Reduce`` primitive
_COLLECTIVES_IF_DISTRIBUTED = {"reduce": "reduce", "gather": "gather", "scatter": "scatter"}


@dataclass(slots=True)
class TensorSummary:
    """What is known of one tensor: counts over all elements, extremes over finite ones."""

    io: str
    slot: int
    dtype: str = ""
    min: Optional[float] = None
    max: Optional[float] = None
    nan: Optional[int] = None
    posinf: Optional[int] = None
    neginf: Optional[int] = None
    dumped: bool = True  # False: an input the op has (a lower slot was skipped, or the graph lists it) with no file

    @property
    def known(self) -> bool:
        return self.nan is not None or self.posinf is not None or self.neginf is not None

    @property
    def bad(self) -> bool:
        return bool(self.nan) or bool(self.posinf) or bool(self.neginf)


@dataclass(slots=True)
class Judgement:
    """``kind``: "born" (this op made the non-finite values), "inherited" (an input already had them),
    "received" (a collective brought them from another rank), "unknown" (inputs not dumped)."""

    kind: str
    reason: str


def collective_kind(op_type: str, name: str = "") -> Optional[str]:
    """"send", "recv", "all_reduce"… for communication ops, None for every other op (compute ops, and
    compute fused with communication).  ``name``: the op's full name, which says where an API comes from
    (msprobe's ``Distributed.reduce.0.forward``)."""
    low = (op_type or "").lower()
    distributed = low.startswith(("hcom", "distributed.")) or (name or "").lower().startswith("distributed.")
    flat = low.removeprefix("distributed.").removeprefix("hcom").replace("_", "").replace("-", "")
    kind = _COLLECTIVES.get(flat)
    if kind is None and (distributed or op_type == "Reduce"):
        kind = _COLLECTIVES_IF_DISTRIBUTED.get(flat)
    if kind is None and low.startswith("hcom") and flat.isalpha():
        kind = "collective"  # an HCCL op this list does not know yet: still communication
    return kind


def _what(t: TensorSummary) -> str:
    parts = [w for w, n in (("nan", t.nan), ("+inf", t.posinf), ("-inf", t.neginf)) if n]
    return " and ".join(parts) or "non-finite"


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _max_abs(ts: list[TensorSummary]) -> Optional[float]:
    vals = [abs(v) for t in ts for v in (t.min, t.max) if isinstance(v, (int, float))]
    return max(vals) if vals else None


def judge_op(op_type: str, tensors: list[TensorSummary], name: str = "") -> Judgement:
    """Whether an op with non-finite outputs was their origin (see the module rules).  An input that was
    not dumped (``TensorSummary.dumped``) or not read leaves the question open: nothing is said of it."""
    inputs = [t for t in tensors if t.io == "input" and t.dtype not in ("none", "str", "bool", "int", "list")]
    outputs = [t for t in tensors if t.io == "output"]
    bad_out = [t for t in outputs if t.bad]
    out = bad_out[0] if bad_out else None
    out_text = f"output {out.slot} {_what(out)}" if out is not None else "outputs non-finite"
    bad_in = [t for t in inputs if t.bad]
    if bad_in:
        t = bad_in[0]
        return Judgement("inherited", f"input {t.slot} already {_what(t)} → {out_text}: inherited from an "
                                      "earlier op")
    missing = [t.slot for t in inputs if not t.dumped]
    if missing:
        which = f"input {missing[0]}" if len(missing) == 1 else f"inputs {', '.join(map(str, missing))}"
        return Judgement("unknown", f"{which} not dumped → {out_text}: cannot tell whether it was born here")
    if not inputs:
        return Judgement("unknown", f"inputs not dumped → {out_text}: cannot tell whether it was born here")
    unread = [t.slot for t in inputs if not t.known]
    if unread:
        which = f"input {unread[0]}" if len(unread) == 1 else f"inputs {', '.join(map(str, unread))}"
        return Judgement("unknown", f"{which} not read → {out_text}: cannot tell whether it was born here")
    m = _max_abs(inputs)
    finite = f"inputs finite (max {_fmt(m)})" if m is not None else "inputs finite"
    coll = collective_kind(op_type, name)
    if coll is not None:
        return Judgement("received", f"{finite} → {out_text}: received from another rank by {coll}")
    if out is None:
        return Judgement("born", f"{finite} → {out_text}")
    whys = []
    if out.nan:
        whys.append("invalid operation (0/0, inf-inf, 0*inf, sqrt or log of a negative…)")
    if out.posinf or out.neginf or not out.nan:
        whys.append(_why_inf(op_type, out.dtype, m))
    return Judgement("born", f"{finite} → {out_text}: {'; '.join(whys)}")


def _why_inf(op_type: str, dtype: str, max_in: Optional[float]) -> str:
    """Why finite inputs gave ±Inf: a zero where the op divides (log(0) = -inf, 1/0 = inf) needs no
    large value, anything else means the output's range was exceeded."""
    kind = (op_type or "").lower().rsplit(".", 1)[-1]
    if kind.startswith("log") and "softmax" not in kind:
        return "log of 0 (or of a value that underflowed to 0)"
    if any(k in kind for k in ("div", "reciprocal", "rsqrt")):
        return "division by zero"
    limit = _RANGE.get(dtype)
    if max_in is not None and limit is not None and max_in > limit:
        return f"an input exceeds the {dtype} range (max {_fmt(limit)})"
    if not dtype:
        return "range exceeded"
    return f"{dtype} range exceeded" + (f" (max {_fmt(limit)})" if limit else "")


@dataclass(slots=True)
class RankFirst:
    """One rank's first bad op."""

    rank: int
    step: int
    exec_index: Optional[int]
    name: str
    type: str
    first_ts: Optional[int] = None
    judgement: Optional[Judgement] = None
    extra: dict = field(default_factory=dict)


_CLASS = {"born": 0, "inherited": 0, "unknown": 1, "received": 2}


def first_rank(firsts: list[RankFirst]) -> tuple[Optional[RankFirst], str]:
    """Which rank went bad first, and why (the text a view shows).

    Earlier step first; within a step a rank whose trouble began in its own ops (born or
    inherited before any collective) comes before one that received it through a collective;
    then timestamps where every candidate has one, else execution index.
    """
    if not firsts:
        return None, ""
    if len(firsts) == 1:
        f = firsts[0]
        return f, f"rank {f.rank}: first bad op {f.name} (step {f.step}, exec {f.exec_index})"

    def cls(f: RankFirst) -> int:
        return _CLASS.get(f.judgement.kind, 1) if f.judgement else 1

    step0 = min(f.step for f in firsts)
    same = [f for f in firsts if f.step == step0]
    use_ts = all(f.first_ts is not None for f in same)

    def key(f: RankFirst) -> tuple:
        when = f.first_ts if use_ts else (f.exec_index if f.exec_index is not None else 1 << 62)
        return (cls(f), when, f.rank)

    same.sort(key=key)
    best = same[0]
    clock = "timestamp" if use_ts else "execution index"
    if len(same) == 1:
        others = sorted({f.step for f in firsts if f is not best})
        return best, (f"rank {best.rank} went bad first: step {best.step} ({best.name}, exec {best.exec_index}); "
                      f"the other ranks first at step {others[0]}")
    if all(cls(f) == 2 for f in same):
        kinds = {collective_kind(f.type, f.name) for f in same}
        return best, (f"every rank went bad at step {step0} in a collective ({', '.join(sorted(k for k in kinds if k))}) "
                      "whose inputs were finite on every rank: the collective itself produced the values")
    received = [f.rank for f in same if cls(f) == 2]
    text = (f"rank {best.rank} went bad first: step {best.step}, {best.name} (exec {best.exec_index}"
            + (f", ts {best.first_ts}" if best.first_ts is not None else "") + ")")
    if received:
        text += f"; rank(s) {', '.join(map(str, received))} received it through a collective"
    elif cls(same[1]) == cls(best) and key(same[1])[1] == key(best)[1]:
        text += f"; rank {same[1].rank} went bad at the same {clock} (independently)"
    else:
        text += f", before rank {same[1].rank} (by {clock})"
    return best, text
