"""Where an error is born: every row's judgement and the first divergence, by propagation.

The walk takes ops in execution order (``Walk.judge``, one op at a time, so ``compare`` judges a
place as its measurements arrive) and decides each tensor once:

* an **argument or constant** that changed (msprobe ParametersErrChecker) makes its op the origin,
  ``"constant"``, whatever the noise;
* an **input** that is the same tensor as one seen before (the same values on both sides: a
  producer's output read by its consumer) carries that tensor's judgement — one tensor, one verdict;
  any other input (a weight, the data, a tensor made by an op that was not dumped) is judged against
  one rounding at its op's precision: beyond ``K_BORN`` × that it *changed* outside the dumped ops,
  and while no op before it diverged, its op is where the difference is ``"born"``;
* an **output** whose error clearly exceeds what its inputs' errors plus one rounding at the op's
  precision explain — more than ``precision.K_BORN`` (10) × (largest input error + unit roundoff),
  msprobe's "norm relative error of output is 10 times that of input" — is ``"born"`` there.  An
  error that large relative to the output but small against the size of what it was computed from
  is cancellation (a bias gradient that is zero in exact arithmetic), not a divergence.  Error of
  the size its inputs carried is ``"inherited"`` (an error while an input carries one and it is
  beyond one rounding at the op's precision); error of the size its precision gives is ``"noise"``.

The op's precision is the coarser stored dtype of its outputs (golden or target), and TF32 for a
float32 convolution or matrix product once the pair is seen not to be bit-identical (GPUs and
NPUs compute them in TF32/HF32 by default: cross-device noise is noise).  A pair bit-identical so
far has no noise: there any change beyond float rounding is born.

API dumps (msprobe, Troubleshooter) list a backward call's gradients but not the forward tensors it
computes from: a backward call also carries what its forward call's tensors carry (``saved_from``).

Rows without a measurement (``err`` None: hand-made facts, unreadable tensors, the ``--rtol/--atol``
mode) keep the verdict they came with, and an error there counts as an error of unknown size.

The first divergence is the first op (execution order) whose origin is ``born`` or ``constant``,
never a parameter while any op diverges; if every error is inherited (the culprit was not dumped)
it falls back to the first op with an error output.  Parameters (MindSpore writes them after the
optimizer update, so they differ from step 0 on) only answer when no op diverges.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional, Sequence

from dumpscope.core.engines.compare.precision import K_BORN, TF32, Err, fmt_u, is_matrix_product, unit_roundoff
from dumpscope.core.model import INPUT, OUTPUT

BORN = "born"
INHERITED = "inherited"
CONSTANT = "constant"

#: row judgements (``judgement`` in compare rows)
NOISE = "noise"
CHANGED = "changed"

CAUSE_TENSOR = "tensor"
CAUSE_CONSTANT = "constant"

PASS = "pass"
ERROR = "error"
WARNING = "warning"


@dataclass(slots=True)
class RowFacts:
    """What the walk needs of one compared tensor row; ``judgement``/``rel_err``/``allowed`` are its
    answer (``verdict``/``rule`` too, unless ``err`` is None or a fixed rule decided them)."""

    io: str
    slot: int
    verdict: str
    kind: str = "tensor"  # "tensor" | "scalar" (argument / constant) | "parameter"
    produced: bool = True  # False: Parameter / Load / literal / graph input
    rule: str = ""
    stats_differ: bool = False  # unmeasured statistics row that moved (counts as carrying an error)
    err: Optional[Err] = None
    u: float = 0.0  # unit roundoff of the dtype the pair is judged at
    dtype: str = ""  # that dtype
    fixed: bool = False  # verdict set by a fixed rule (dtype kind, shape, NaN/Inf, argument, allclose)
    key: Optional[tuple] = None  # the tensor's identity: element count, max and min on both sides (None: unknown)
    sig: Optional[tuple] = None  # (golden mean, golden L2 norm, target mean, target L2 norm): confirms a key match
    judgement: Optional[str] = None
    rel_err: Optional[float] = None
    allowed: Optional[float] = None
    tainted: bool = False  # carries an error born upstream (or here)
    source: str = ""  # what feeds the input when it is no op's output: "Parameter conv2.weight"
    inplace: bool = False  # the buffer the op updates in place, dumped after the update (equals an output)
    share: Optional[float] = None  # its error as a share of what it was allowed (norm- or element-wise: the larger)

    @property
    def label(self) -> str:
        return f"{self.io}.{self.slot}"

    @property
    def named(self) -> str:
        """The label with what feeds it: ``input.2 (Parameter learning_rate)``."""
        return f"{self.label} ({self.source})" if self.source else self.label


@dataclass(slots=True)
class OpFacts:
    """One matched op: its rows, and (graph) the names of the ops producing its inputs."""

    name: str
    rows: list[RowFacts]
    parameter: bool = False
    producers: list[str] = field(default_factory=list)
    input_producers: dict[int, str] = field(default_factory=dict)  # input slot -> producing *dumped* op
    saved_from: Optional[str] = None  # API dumps: the forward call whose saved tensors a backward call uses
    type: str = ""
    #: input slot the dump lacks -> what feeds it, by the graph: ("Parameter", "dense2.weight")
    undumped: dict[int, tuple[str, str]] = field(default_factory=dict)


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


@dataclass(slots=True, order=True)
class Near:
    """A row near the line: its error as a share of what it was allowed (1.0 = on the line)."""

    ratio: float
    op: str = field(compare=False)
    label: str = field(compare=False)
    rel_err: float = field(compare=False)
    allowed: float = field(compare=False)
    dtype: str = field(compare=False)
    judgement: str = field(compare=False)


@dataclass(slots=True)
class _Seen:
    sig: Optional[tuple]
    verdict: str
    rule: str
    judgement: Optional[str]
    rel_err: Optional[float]
    allowed: Optional[float]
    tainted: bool
    err: Optional[Err]
    op: str


def _off(r: RowFacts) -> bool:
    return r.verdict in (ERROR, WARNING) or r.stats_differ


def _fmt(x: float) -> str:
    return f"{x:.3g}"


class Walk:
    """The streaming judgement of one place's ops (module docstring); ``judge`` them in order."""

    def __init__(self, keep_nearest: int = 3) -> None:
        self._seen: dict[tuple, list[_Seen]] = {}
        self._op_err: dict[str, tuple[float, float, bool]] = {}  # API forward call -> (e, r, tainted) of its tensors
        self.exact_so_far = True  # every measured tensor so far bit-identical
        #: the noise the pair has carried so far: the largest error of an output judged noise (norm-wise,
        #: element-wise); a tensor that is no dumped op's output may carry that much from upstream
        self.noise_e = self.noise_r = 0.0
        #: the coarsest precision the run stored tensors in (set by the caller: compare knows the place's
        #: dtypes ahead of the walk); a weight or data no dumped op produced was made at it (previous steps'
        #: updates were computed at it), so it may differ by that much
        self.u_run = 0.0
        self.diverged = False  # some op before had an error output (or a changed input)
        self.bad_ops: set[str] = set()
        self.off_ops: set[str] = set()
        self.nearest: list[Near] = []  # a min-heap of the rows nearest the line
        self._keep = keep_nearest
        self.largest: Optional[Near] = None  # the largest relative error seen (whatever its allowance)
        #: the ops a later op's ``saved_from`` may name (set by the caller: compare knows every backward call's
        #: forward call ahead of the walk); only theirs are remembered.  None: every op's
        self.forward_calls: Optional[set[str]] = None

    # -- precision of an op ------------------------------------------------------------------------

    def op_u(self, op: OpFacts) -> float:
        """The op's compute precision: the coarser stored dtype of its outputs (of its rows if it has no
        float output); TF32 for a float32 matrix product, unless the pair has been bit-identical so far
        and this op's own inputs differ (then a change is judged at float32: no noise to hide in)."""
        # one pass (not two comprehensions an op): the largest float output's u, else the largest row's
        u_out = u_any = 0.0
        has_out = False
        for r in op.rows:
            if r.kind != "scalar":
                u = r.u
                if u > u_any:
                    u_any = u
                if r.io == OUTPUT and u > 0:
                    has_out = True
                    if u > u_out:
                        u_out = u
        u = u_out if has_out else u_any
        if 0 < u < TF32 and is_matrix_product(op.type, op.name):
            inputs_exact = all(r.err is None or r.err.exact for r in op.rows if r.io == INPUT and r.kind != "scalar")
            if not self.exact_so_far or inputs_exact:
                u = TF32
        return u

    # -- the walk ----------------------------------------------------------------------------------

    def judge(self, op: OpFacts) -> Origin:
        if op.parameter:
            return self._parameter(op)
        u_op = self.op_u(op)
        rows = op.rows
        changed: Optional[RowFacts] = None
        carrier: Optional[RowFacts] = None
        e_in = r_in = 0.0
        s_in: list[tuple[float, int]] = []
        consts: list[RowFacts] = []  # changed arguments and constants (rows the loop below does not judge)
        has_input = False
        updates: Optional[bool] = None  # (``_updates``, asked when an input equals an output)
        for r in rows:
            if r.io != INPUT:
                continue
            has_input = True
            if r.kind == "scalar":
                if r.verdict == ERROR:
                    consts.append(r)
                continue
            # an input equal to an output of its own op is the buffer it updated in place (an optimizer's
            # weight, dumped after the update): it says what the op wrote, not what it computed from
            r.inplace = False
            key = r.key
            if key is not None:
                for o in rows:  # (an output with the same key and signature, then whether the op updates)
                    if o.io == OUTPUT and o.key == key and o.sig == r.sig:
                        if updates is None:
                            updates = _updates(op)
                        r.inplace = updates
                        break
            self._judge_input(op, r, u_op)
            if r.inplace:
                if r.judgement in (CHANGED, INHERITED):
                    r.judgement = "in-place"
                continue
            if r.judgement == CHANGED and changed is None:
                changed = r
            if r.tainted and carrier is None and r.judgement != CHANGED:
                carrier = r
            e, rr = self._size_of(r)
            # (``max(x, y)`` spelled ``y if y > x else x``, what it returns, NaN included: here and below,
            # a few calls a row)
            if e > e_in:
                e_in = e
            if rr > r_in:
                r_in = rr
            if r.err is not None and r.err.peak > 0:
                s_in.append((r.err.peak, r.err.n))
        saved_tainted = False
        if op.saved_from is not None and op.saved_from in self._op_err:
            e, rr, saved_tainted = self._op_err[op.saved_from]
            if e > e_in:
                e_in = e
            if rr > r_in:
                r_in = rr
        producer = None
        if not has_input:  # output-only dumps: the graph's producers stand in
            producer = next((p for p in op.producers if p != op.name and p in self.bad_ops), None)
        tainted = changed is not None or carrier is not None or saved_tainted or producer is not None
        for r in rows:
            if r.io == OUTPUT:
                self._judge_output(op, r, u_op, e_in, r_in, s_in, tainted)
        if self.forward_calls is None or op.name in self.forward_calls:
            self._remember(op, e_in, r_in)
        return self._origin(op, consts, changed, carrier, saved_tainted, producer)

    def _size_of(self, r: RowFacts) -> tuple[float, float]:
        """An input's error for the allowance of the op's outputs (an error of unknown size: infinite): the
        relative error its elements typically carry (``Err.typical``: an attention score's error is not
        hidden by the −1e9 mask added to it), never less than its norm-wise error."""
        if r.err is None:
            return (math.inf, math.inf) if _off(r) else (0.0, 0.0)
        if r.fixed and r.verdict == ERROR:
            return math.inf, math.inf
        err = r.err
        e, q = err.e, err.q
        if q is not None and q > e:  # (``Err.typical``)
            e = q
        rr = err.r if err.r is not None else e
        return e, (rr if rr > e else e)

    def _judge_input(self, op: OpFacts, r: RowFacts, u_op: float) -> None:
        key = r.key
        same = self._seen.get(key) if key is not None else None  # (kept for ``_add_seen``)
        seen = _find(same, r.sig) if same is not None else None
        if seen is not None and not r.fixed:
            r.verdict, r.rule, r.judgement = seen.verdict, seen.rule, seen.judgement
            r.rel_err, r.allowed, r.tainted = seen.rel_err, seen.allowed, seen.tainted
            return
        if r.err is None or r.fixed:
            if r.verdict == ERROR and (not self.diverged or not r.produced):
                r.judgement, r.tainted = CHANGED, True
            elif _off(r) and self.diverged:
                r.judgement, r.tainted = INHERITED, True
            return
        err = r.err
        if self.exact_so_far and not (err.abs_max == 0.0 and err.abs_rms == 0.0):  # (``Err.exact``)
            self.exact_so_far = False
        u = r.u if r.u > u_op else u_op  # (``max(u_op, r.u, self.u_run)``)
        if self.u_run > u:
            u = self.u_run
        noise_e, noise_r = self.noise_e, self.noise_r
        lim = K_BORN * (noise_e + u)
        lim_r = K_BORN * ((noise_e if noise_e > noise_r else noise_r) + u)
        e, rr = err.e, (err.r if err.r is not None else err.e)
        r.rel_err, r.allowed = e, lim
        ratio = e / lim if lim else (math.inf if e else 0.0)
        ratio_r = rr / lim_r if lim_r else (math.inf if rr else 0.0)
        if ratio_r > ratio:
            ratio = ratio_r
        r.share = ratio
        if e > lim or rr > lim_r:
            r.verdict = ERROR
            what = f"rel err {_fmt(e)} > {_fmt(lim)}" if e > lim else f"max element rel err {_fmt(rr)} > {_fmt(lim_r)}"
            carried = f"the noise carried so far {_fmt(self.noise_e)} + " if self.noise_e else ""
            r.rule = (f"{what} = {K_BORN:g} × ({carried}{_prec(u, r.dtype)} rounding {fmt_u(u)}): "
                      f"differs beyond its precision and is no dumped op's output")
            r.judgement = CHANGED if not self.diverged else INHERITED
            r.tainted = True
        else:
            r.verdict, r.judgement = PASS, NOISE
            r.rule = _noise_rule(e, lim, _prec(u, r.dtype), u)
        self._near(op, r, e, lim, r.judgement or NOISE, ratio)
        if key is not None:  # (``_store`` of a row looked up above and not seen)
            self._add_seen(op, r, key, same)

    def _judge_output(self, op: OpFacts, r: RowFacts, u_op: float, e_in: float, r_in: float,
                      s_in: list[tuple[float, int]], tainted_in: bool) -> None:
        if r.err is None or r.fixed:
            if r.verdict == ERROR:
                r.judgement = INHERITED if tainted_in else BORN
                r.tainted = True
            elif _off(r):
                r.tainted = tainted_in
            self._store(op, r)
            return
        err = r.err
        if self.exact_so_far and not (err.abs_max == 0.0 and err.abs_rms == 0.0):  # (``Err.exact``)
            self.exact_so_far = False
        e, rr = err.e, (err.r if err.r is not None else err.e)
        a = K_BORN * (e_in + u_op)
        a_r = K_BORN * ((e_in if e_in > r_in else r_in) + u_op)
        r.rel_err, r.allowed = e, a
        beyond = e > a or rr > a_r
        scale = _input_scale(s_in, err.n)
        # a reduction whose result is tiny against its terms (a bias gradient before a normalisation):
        # its error is judged against the size of the terms, where the rounding happened
        explained = beyond and scale > err.rms and err.abs_rms <= a * scale and err.abs_max <= a_r * scale
        own_noise = (e <= K_BORN * u_op and rr <= K_BORN * u_op) or (
            scale > err.rms and max(err.abs_rms, err.abs_max) <= K_BORN * u_op * scale)
        if beyond and not explained:
            r.verdict, r.judgement, r.tainted = ERROR, BORN, True
            which = (f"rel err {_fmt(e)} > {_fmt(a)}" if e > a else f"max element rel err {_fmt(rr)} > {_fmt(a_r)}")
            r.rule = (f"{which} = {K_BORN:g} × (inputs' error {_fmt(e_in)} + {_prec(u_op, r.dtype)} rounding "
                      f"{fmt_u(u_op)}): born here")
        elif tainted_in and not own_noise:
            r.verdict, r.judgement, r.tainted = ERROR, INHERITED, True
            r.rule = f"rel err {_fmt(e)}, of the size its inputs carried ({_fmt(e_in)}): inherited"
        else:
            r.verdict, r.judgement = PASS, NOISE
            r.rule = (f"pass (abs err within the rounding noise of its inputs' size {_fmt(scale)})"
                      if explained or (beyond and own_noise) else _noise_rule(e, a, _prec(u_op, r.dtype), u_op, e_in))
            if not explained and not tainted_in:
                if e > self.noise_e:
                    self.noise_e = e
                if rr > self.noise_r:
                    self.noise_r = rr
        ratio = e / a if a else (math.inf if e else 0.0)
        ratio_r = rr / a_r if a_r else (math.inf if rr else 0.0)
        if ratio_r > ratio:
            ratio = ratio_r
        if explained or (r.judgement == NOISE and beyond and own_noise):
            # judged against the size of the terms: the share is of what that allows
            ratio = max(err.abs_rms / (a * scale), err.abs_max / (a_r * scale)) if scale and a else ratio
        r.share = ratio
        self._near(op, r, ratio * a if a else e, a, r.judgement or NOISE, ratio)
        self._store(op, r)

    def _store(self, op: OpFacts, r: RowFacts) -> None:
        """Remember a judged tensor, unless it was seen before."""
        key = r.key
        if key is None:
            return
        same = self._seen.get(key)
        if same is None or _find(same, r.sig) is None:
            self._add_seen(op, r, key, same)

    def _add_seen(self, op: OpFacts, r: RowFacts, key: tuple, same: Optional[list[_Seen]]) -> None:
        """Remember a judged tensor not seen before; ``same``: the ones remembered under its key (None: none)."""
        item = _Seen(r.sig, r.verdict, r.rule, r.judgement, r.rel_err, r.allowed, r.tainted, r.err, op.name)
        if same is None:
            self._seen[key] = [item]
        else:
            same.append(item)

    def _near(self, op: OpFacts, r: RowFacts, e: float, allowed: float, judgement: str,
              ratio: Optional[float] = None) -> None:
        if ratio is None:
            ratio = e / allowed if allowed else (math.inf if e else 0.0)
        if not math.isfinite(ratio):
            ratio = 1e300
        rel_err = r.rel_err if r.rel_err is not None else e
        largest = self.largest is None or rel_err > self.largest.rel_err
        nearest = len(self.nearest) < self._keep or ratio > self.nearest[0].ratio
        if not largest and not nearest:  # (most rows: no record made)
            return
        item = Near(ratio, op.name, r.label, rel_err, allowed, r.dtype, judgement)
        if largest:
            self.largest = item
        if len(self.nearest) < self._keep:
            heapq.heappush(self.nearest, item)
        elif nearest:
            heapq.heapreplace(self.nearest, item)

    def _remember(self, op: OpFacts, e_in: float, r_in: float) -> None:
        e, rr, tainted = e_in, r_in, False
        for r in op.rows:
            if r.kind == "scalar":
                continue
            err = r.err
            if err is not None:
                t, q = err.e, err.q
                if q is not None and q > t:  # (``Err.typical``)
                    t = q
                if t > e:
                    e = t
                t = err.r if err.r is not None else err.e
                if t > rr:
                    rr = t
            if r.tainted:
                tainted = True
        self._op_err[op.name] = (e, rr, tainted)

    def _origin(self, op: OpFacts, consts: list[RowFacts], changed: Optional[RowFacts],
                carrier: Optional[RowFacts], saved_tainted: bool, producer: Optional[str]) -> Origin:
        outs_bad: list[RowFacts] = []
        has_outputs = off = False
        for r in op.rows:
            if r.io == OUTPUT:
                has_outputs = True
                if r.verdict == ERROR:
                    outs_bad.append(r)
            if not off and (r.tainted or _off(r)):
                off = True
        shows = bool(outs_bad) or (changed is not None and not has_outputs)
        if outs_bad or changed is not None:
            self.bad_ops.add(op.name)
        if off:
            self.off_ops.add(op.name)
        if consts:
            self.diverged = True
            return Origin(CONSTANT, consts[0].label, consts[0].rule)
        if not shows:
            return Origin(None)
        self.diverged = True
        born = [r for r in outs_bad if r.judgement == BORN]
        if born and changed is None and carrier is None:
            return Origin(BORN, None, born[0].rule)
        if changed is not None:  # a weight or data that differs: where the difference first shows
            return Origin(BORN, changed.named, (born or outs_bad or [changed])[0].rule)
        if born:
            return Origin(BORN, None, born[0].rule)
        if carrier is not None:
            src = op.input_producers.get(carrier.slot)
            via = f"{carrier.label} ← {src}" if src else carrier.named
            return Origin(INHERITED, via, carrier.rule)
        if saved_tainted and op.saved_from is not None:
            return Origin(INHERITED, f"saved tensors of {op.saved_from}", None)
        if producer is not None:
            return Origin(INHERITED, f"← {producer}", None)
        return Origin(BORN, None, outs_bad[0].rule)

    def _parameter(self, op: OpFacts) -> Origin:
        for r in op.rows:
            if r.err is None or r.fixed or r.kind == "scalar":
                continue
            u = r.u
            lim = K_BORN * u
            e, rr = r.err.e, (r.err.r if r.err.r is not None else r.err.e)
            r.rel_err, r.allowed = e, lim
            if e > lim or rr > lim:
                r.verdict, r.judgement = ERROR, CHANGED
                r.rule = f"rel err {_fmt(max(e, rr))} > {K_BORN:g} × {r.dtype or 'its'} rounding ({fmt_u(u)})"
            else:
                r.verdict, r.judgement = PASS, NOISE
                r.rule = _noise_rule(e, lim, r.dtype, u)
        return Origin(None)


_UPDATING = ("apply", "assign", "scatter", "adam", "sgd", "momentum", "lamb", "lars", "ftrl", "adagrad", "rmsprop")
_UPDATING_WORDS = re.compile("|".join(map(re.escape, _UPDATING)))  # any of them, anywhere


@lru_cache(maxsize=1024)
def _updating_type(op_type: str) -> bool:
    """Whether an op type names an in-place update (``_updates``): asked once a type, not once an op."""
    return _UPDATING_WORDS.search(op_type.lower()) is not None


def _updates(op: OpFacts) -> bool:
    """Ops that write one of their inputs in place (optimizer steps, Assign, Scatter*, a PyTorch ``x.add_``):
    an input equal to their output is that buffer.  A Reshape's input equals its output too, and is read."""
    if _updating_type(op.type):
        return True
    name = op.name.lower()
    for w in _UPDATING:  # (``_UPDATING_WORDS`` as substring tests: a plain loop, no regex or generator a name)
        if w in name:
            return True
    api = op.name.split(".")
    return len(api) > 1 and api[1].endswith("_") and not api[1].endswith("__")


def _find(same: list[_Seen], sig: Optional[tuple]) -> Optional[_Seen]:
    """The earlier tensor a row is, among those remembered under its key (``key`` equal, mean and norm within
    2⁻⁶: a bfloat16 tensor's mean and norm as msprobe computes them, or summed in another order, still match;
    a different tensor with the same extremes does not)."""
    for seen in same:
        if _same_sig(seen.sig, sig):
            return seen
    return None


def _same_sig(a: Optional[tuple], b: Optional[tuple]) -> bool:
    """Whether two signatures (golden mean, golden L2 norm, target mean, target L2 norm) are of one tensor:
    each side's norms within 2⁻⁶ of the larger, its means within 2⁻⁶ of the norm (``_find``)."""
    if a is None or b is None:
        return a is b
    if a == b:  # (the same tensor dumped twice, most often: equal numbers are within any tolerance)
        return True
    return _same_side(a[0], a[1], b[0], b[1]) and _same_side(a[2], a[3], b[2], b[3])


def _same_side(mean_a: Optional[float], norm_a: Optional[float], mean_b: Optional[float],
               norm_b: Optional[float]) -> bool:
    if (norm_a is None) != (norm_b is None) or (mean_a is None) != (mean_b is None):
        return False
    if norm_a is not None:
        # (``max(x, y)`` spelled out: ``y if y > x else x`` is what it returns, NaN included)
        size_a, size_b = abs(norm_a), abs(norm_b)
        if abs(norm_a - norm_b) > 2.0 ** -6 * (size_b if size_b > size_a else size_a):
            return False
        if mean_a is not None and abs(mean_a - mean_b) > 2.0 ** -6 * (1e-300 if 1e-300 > size_a else size_a):
            return False
    return True


def _input_scale(s_in: list[tuple[float, int]], n_out: int) -> float:
    """The size of the terms a reduction summed: each larger input's largest |value| (rounding happens at
    the size of the terms, not of their sum) times √(terms per output element) (rounding errors of n terms
    add up like a random walk); 0 when no input is larger than the output (not a reduction: a scaled or
    broadcast tensor is rounded at its own size)."""
    best = 0.0
    for peak, n in s_in:
        if n_out > 0 and n > n_out:
            best = max(best, peak * math.sqrt(n / n_out))
    return best


@lru_cache(maxsize=1024)
def _prec(u: float, dtype: str) -> str:
    """The precision an allowance was set by: the row's dtype, or the coarser one the op or run computed in."""
    if dtype and unit_roundoff(dtype) == u:
        return dtype
    if u == TF32:
        return "TF32/float16"
    return {2.0 ** -8: "bfloat16", 2.0 ** -24: "float32"}.get(u, dtype or "its")


def _noise_rule(e: float, allowed: float, dtype: str, u: float, e_in: Optional[float] = None) -> str:
    if e == 0.0:
        return "pass (identical)"
    carried = f", inputs carried {e_in:.3g}" if e_in else ""  # (``_fmt``, here and below)
    return f"pass (rel err {e:.3g} ≤ {allowed:.3g}: {dtype or 'its'} rounding {fmt_u(u)}{carried})"


def trace(ops: Sequence[OpFacts]) -> list[Origin]:
    """The origin of every op, in the order given (execution order)."""
    walk = Walk()
    return [walk.judge(op) for op in ops]


def first_divergence(ops: Sequence[OpFacts], origins: Sequence[Origin],
                     erred: Optional[Sequence[int]] = None) -> Optional[FirstDivergence]:
    """The first op where an error is born (module docstring), or ``None`` when nothing erred.  ``erred``:
    the positions, in order, of the ops that may have a row in error (at least all that do: compare lists
    the ops with a row that did not pass); no other op can answer, so only those are looked at."""
    fallback: Optional[FirstDivergence] = None
    param_fd: Optional[FirstDivergence] = None
    at = range(len(ops)) if erred is None else erred
    differing = {ops[i].name for i in at if ops[i].parameter and any(r.verdict == ERROR for r in ops[i].rows)}
    for i in at:
        op, org = ops[i], origins[i]
        fd = divergence_of(i, op, org, differing)
        if fd is None:
            continue
        if op.parameter:
            param_fd = param_fd or fd
            continue
        if org.kind in (CONSTANT, BORN):
            return fd
        fallback = fallback or fd
    return fallback or param_fd


def _undumped(feeders: dict[int, tuple[str, str]], differing: set[str]) -> str:
    """An op born where the dump lacks inputs that a Parameter or graph input feeds (MindSpore dumps no input
    of a loop's ``TensorMove`` copy of a weight, none at all with ``input_output: 2``): the difference is in
    the op or in those inputs, and the dump cannot tell which, so both are said.  MindSpore also writes each
    Parameter on its own, after the step's update (``differing``: those whose dump pair differs): that is
    said of each, as evidence and no proof either way (an update from a different gradient changes a weight
    that was equal; an equal dump of a weight the step does not update, as in inference, clears it)."""
    named = [f"input.{slot} ({what} {name}{', whose dump after the step differs' if name in differing else ''})"
             for slot, (what, name) in sorted(feeders.items())]
    which = "that input" if len(named) == 1 else "one of those inputs"
    return (f"{', '.join(named)} {'was' if len(named) == 1 else 'were'} not dumped and no dumped op before it "
            f"diverged (the op or {which} differs)")


def divergence_of(i: int, op: OpFacts, org: Origin, differing: Optional[set[str]] = None) -> Optional[FirstDivergence]:
    """What the first divergence says if it is op ``i`` (None: the op has no row in error); ``differing``:
    the Parameters whose own dumps differ (``_undumped``)."""
    bad_rows = [j for j, r in enumerate(op.rows) if r.verdict == ERROR]
    if not bad_rows:
        return None
    if op.parameter:
        return FirstDivergence(i, bad_rows[0], CAUSE_TENSOR, op.rows[bad_rows[0]].rule)
    outs = [j for j in bad_rows if op.rows[j].io == OUTPUT]
    if org.kind == CONSTANT:
        j = outs[0] if outs else next(j for j in bad_rows if op.rows[j].label == org.via)
        return FirstDivergence(i, j, CAUSE_CONSTANT, f"{org.via} {org.rule}")
    if org.kind == BORN:
        via = next((r for r in op.rows if org.via and r.named == org.via), None)
        what = "different input data or weights" if via is None or not via.source else f"the {via.source} differs"
        if not outs:
            j = next(j for j in bad_rows if op.rows[j].named == org.via)
            return FirstDivergence(i, j, CAUSE_TENSOR, f"{org.via} differs and no dumped op before it diverged "
                                                       f"({what}): {op.rows[j].rule}")
        rule = op.rows[outs[0]].rule
        if org.via:
            rule = f"{org.via} already differs and no dumped op before it diverged ({what}); output: {rule}"
        elif op.undumped:
            rule = f"{_undumped(op.undumped, differing or set())}; output: {rule}"
        return FirstDivergence(i, outs[0], CAUSE_TENSOR, rule)
    if outs:
        return FirstDivergence(i, outs[0], CAUSE_TENSOR, op.rows[outs[0]].rule)
    return None
