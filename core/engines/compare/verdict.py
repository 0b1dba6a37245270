"""Verdict rules: is one golden/target pair a pass, a warning or an error — and in whose words.

The fixed rules are tried first, in the order of :data:`FIXED_RULES`; the first that answers decides
and its text becomes the row's ``rule``.  Each names the msprobe (mindstudio-probe 26.2,
``core/engines/compare/indicator_analysis/algorithm.py``) rule it mirrors.  What they leave open — do the
values differ by more than the run's precision? — is judged at the precision the tensor was stored
in (``precision``): alone (``judge``: as if what the op computed from were exact), and inside a
compare by propagation over the ops (``origin.Walk``: an error is *born* where it clearly exceeds
what the op's inputs carried plus one rounding, *inherited* where it is of the size its inputs
carried, *noise* where it is of the size its precision gives).

====  ===========================================  ========  ==========================================
 #    rule                                          verdict   mirrors (msprobe)
====  ===========================================  ========  ==========================================
 1    dtypes of different kinds (float vs int,      error     DTypeErrChecker (two float dtypes are
      bool, complex) or integer widths differ                 not an error: judged at the coarser)
 2    shapes differ                                 error     ShapeErrChecker (a warning when the same
                                                              values fill another shape: a view)
 3    NaN/Inf where the other side is finite        error     InfNanErrChecker
 4    argument / constant: value differs            error     ParametersErrChecker ("scalar parameters
                                                              inconsistent"); never cosine
 5    --rtol/--atol given: any element outside      error     (numpy allclose)
 6    relative error beyond 10 × one rounding at    error     "norm relative error of output is 10
      the stored precision (``precision.K_BORN``)             times that of input" (the walk adds the
                                                              inputs' error to the allowance)
====  ===========================================  ========  ==========================================

The relative error is norm-wise (‖t−g‖/‖g‖) and element-wise (max |tᵢ−gᵢ| / (|gᵢ| + rms g)); one
rounding at bfloat16 is 2⁻⁸, float16 2⁻¹¹, float32 2⁻²⁴ (TF32 2⁻¹¹ for a float32 matrix product in
a pair that is not bit-identical), float8 2⁻⁴/2⁻³; integers and bool must be equal.
Statistics-only pairs use the same rules on max/min/mean/L2 norm (``precision.error_of``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Optional

from dumpscope.core.engines.compare import precision as pr
from dumpscope.core.engines.compare.metrics import CompareResult, dtype_class, dtype_eps

#: The default rules in a few lines, for ``dumpscope compare --help`` and the README.
RULES_HELP = """\
verdict of each golden/target tensor pair (first rule that fires; msprobe rule mirrored):
  error    dtypes of different kinds (float vs int/bool) or integer widths (msprobe DTypeErr);
           shape differs (ShapeErr); NaN/Inf on one side only (InfNanErr); an argument or constant
           changed, e.g. "argument changed: 1e-05 -> 0.5" (ParametersErr)
  judged at the precision each tensor was stored in (the coarser of the two sides: a bfloat16
  target against a float32 golden is judged at bfloat16, 2^-8; float16 2^-11; float32 2^-24, TF32
  2^-11 for float32 convolutions/matrix products across devices); relative error = ||t-g||/||g||
  and max |t-g|/(|g|+rms g) per element:
  born     an op's output error > 10 x (its inputs' error + one rounding at its precision), or an
           input that is no earlier op's output (a weight, the data) differing by > 10 x one
           rounding: an error row, and the first such op in execution order is the first divergence
  inherited  an error of the size its inputs carried (an error row; not the origin)
  noise    within that: pass ("no divergence" lists the rows nearest the line)
  --rtol/--atol replace the precision rules by numpy allclose (any element outside: error)
first divergence: the first op (execution order) where an error is born (origin "born", cause
"tensor"), or one of whose constants or scalar arguments changed (origin "constant"); parameters
only when no op diverges."""

PASS = "pass"
WARNING = "warning"
ERROR = "error"

Verdict = tuple[str, str]


@dataclass(slots=True)
class Thresholds:
    """``rtol``/``atol`` = CLI ``--rtol/--atol`` (numpy allclose instead of the precision rules)."""

    rtol: Optional[float] = None
    atol: Optional[float] = None

    @property
    def allclose(self) -> bool:
        return self.rtol is not None or self.atol is not None


@dataclass(slots=True)
class Context:
    """What a rule may know beyond the pair: thresholds, the op-side magnitude, the row kind."""

    th: Thresholds
    magnitude: float = 0.0  # typical size of what the tensor was computed from (0: unknown); see rule_precision
    kind: str = "tensor"  # "tensor" | "scalar" (argument / constant) | "parameter"


# -- helpers ------------------------------------------------------------------------------


def fmt(x: Any) -> str:
    """Numbers as msprobe prints them in messages: 6 significant digits."""
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, (int, float)):
        return f"{x:.6g}"
    return str(x)


def _shape_text(s: tuple[int, ...]) -> str:
    return "(" + ",".join(str(d) for d in s) + ")"


def _is_float(name: str) -> bool:
    return name.startswith(("float", "bfloat", "complex")) or name in ("half", "double")


def element_rtol(golden_dtype: str, target_dtype: str) -> float:
    """msprobe's per-element relative tolerance, kept for its "moved" counts (one_thousandth_ratio):
    0.001 for 32/64-bit floats, 0.005 for float16, 4·eps for coarser formats, 0 for integers."""
    names = [n for n in (golden_dtype, target_dtype) if n]
    if not names or not any(_is_float(n) for n in names):
        return 0.0 if names else 1e-3
    eps = max(dtype_eps(n) for n in names if _is_float(n))
    if eps <= 1.2e-7:  # float32 / float64 / complex of them
        return 1e-3
    if eps <= 1e-3:  # float16
        return 5e-3
    return 4 * eps  # bfloat16, float8


def _value_of(stats: Optional[dict[str, Optional[float]]]) -> Optional[float]:
    return None if not stats else stats.get("max")


# -- tensor rules ---------------------------------------------------------------------------


def rule_dtype(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """1. msprobe DTypeErrChecker, less the normal case: two float dtypes (a float32 golden and a
    bfloat16/float16 target under autocast or an NPU's defaults) are judged at the coarser one, not
    called an error; dtypes of different kinds, or integers of different widths, are."""
    return _dtype_verdict(r.golden_dtype, r.target_dtype)


@lru_cache(maxsize=256)
def _dtype_verdict(g: str, t: str) -> Optional[Verdict]:
    """``rule_dtype`` of a pair of dtype names (asked once a pair of names, not once a pair of tensors)."""
    if g and t and g != t:
        gc, tc = dtype_class(g), dtype_class(t)
        if gc == tc and pr.unit_roundoff(g) > 0 and pr.unit_roundoff(t) > 0:
            return None
        note = "" if gc == tc and gc != "other" else " (not comparable)"
        return ERROR, f"dtype {g} vs {t}{note}"
    if g and dtype_class(g) == "other":
        return ERROR, f"dtype {g} not comparable"
    return None


def rule_shape(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """2. msprobe ShapeErrChecker: the shapes differ.

    Unlike msprobe, the same number of elements holding the same values (by the remaining
    rules) is only a warning: a view or reshape recorded in another shape (MindSpore 2.10
    dumps a Flatten's output in its input's shape, 2.7 in the flat one) is not a divergence.
    """
    if not r.extra.get("shapes_known", True) or tuple(r.shape) == tuple(r.target_shape):
        return None
    text = f"shape {_shape_text(r.shape)} vs {_shape_text(r.target_shape)}"
    if math.prod(r.shape) != math.prod(r.target_shape) or (r.count == 0 and r.stat_diffs is None):
        return ERROR, text
    rules = STATS_RULES if r.stat_diffs is not None else TENSOR_RULES
    rest = _first(rules[rules.index(rule_shape) + 1:], r, ctx)
    if rest is None or rest[0] == PASS:
        return WARNING, f"{text}: the same values in another shape"
    return ERROR, f"{text}; {rest[1]}"


def rule_nonfinite(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """3. msprobe InfNanErrChecker: NaN/Inf on one side where the other side is finite."""
    if r.stat_diffs is not None:  # statistics: from the counts and the stats themselves
        for kind in ("nan", "inf"):
            g, t = getattr(r, f"golden_{kind}"), getattr(r, f"target_{kind}")
            if t and not g:
                return ERROR, f"{kind} only in target"
            if g and not t:
                return ERROR, f"{kind} only in golden"
        bad = r.extra.get("nonfinite_stats")
        if bad:
            return ERROR, "non-finite stat on one side: " + ", ".join(bad)
        return None
    if not r.nonfinite_mismatch:
        return None
    ex, parts = r.extra, []
    for kind in ("nan", "inf"):
        g_only, t_only = ex.get(f"golden_only_{kind}", 0), ex.get(f"target_only_{kind}", 0)
        if t_only and not g_only:
            parts.append(f"{kind} only in target")
        elif g_only and not t_only:
            parts.append(f"{kind} only in golden")
        elif g_only and t_only:
            parts.append(f"{kind} at different positions")
    return ERROR, f"{', '.join(parts) or 'inf sign differs'} ({r.nonfinite_mismatch} elements)"


def rule_scalar(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """4. msprobe ParametersErrChecker: arguments and constants (kind "scalar") must be equal, judged by
    value, never by cosine.  A computed one-element tensor is a tensor: judged at its precision."""
    if ctx.kind != "scalar":
        return None
    g, t = _value_of(r.golden_stats), _value_of(r.target_stats)
    if g is None or t is None:
        return None  # nothing finite (rule 3 handled one-sided NaN/Inf)
    if g != t:
        return ERROR, f"argument changed: {fmt(g)} → {fmt(t)}"
    return PASS, "pass (argument unchanged)"


def rule_allclose(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """5. ``--rtol/--atol``: numpy allclose decides (replaces rules 6-11)."""
    th = ctx.th
    if not th.allclose or r.allclose_failed is None:
        return None
    tol = f"atol {fmt(th.atol or 0.0)} + rtol {fmt(th.rtol or 0.0)}*|golden|"
    if r.allclose_failed:
        return ERROR, f"allclose: {r.allclose_failed} of {r.count} elements exceed {tol}"
    return PASS, f"pass (allclose: {tol})"


def rule_precision(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """6. Beyond 10 × one rounding at the stored precision (``precision.K_BORN``): the pair judged on its
    own, as if what it was computed from were exact (inside a compare ``origin.Walk`` adds what the
    op's inputs carried).  Arguments and constants were decided by rule 4."""
    err = pr.error_of(r)
    if err is None:
        return None
    dt = pr.judged_dtype(r.golden_dtype, r.target_dtype)
    u = pr.unit_roundoff(dt)
    lim = pr.K_BORN * u
    e, rr = err.e, (err.r if err.r is not None else err.e)
    if err.exact:
        return PASS, "pass (identical)" if r.stat_diffs is None else "pass (identical statistics)"
    if (e > lim or rr > lim) and ctx.magnitude > err.rms and max(err.abs_rms, err.abs_max) <= lim * ctx.magnitude:
        # cancellation: tiny against what it was computed from (``magnitude``: the inputs' typical size)
        return PASS, f"pass (abs err {fmt(err.abs_max)} within {dt} rounding of its inputs' size {fmt(ctx.magnitude)})"
    if e > lim or rr > lim:
        what = f"rel err {fmt(e)}" if e > lim else f"max element rel err {fmt(rr)}"
        return ERROR, f"{what} > {pr.K_BORN:g} × {dt} rounding ({pr.fmt_u(u)})"
    return PASS, f"pass (rel err {fmt(e)} ≤ {pr.K_BORN:g} × {dt} rounding {pr.fmt_u(u)})"


def rule_stats_empty(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """Statistics records with no number on one side: nothing to judge."""
    if r.stat_diffs is not None and not r.stat_diffs:
        return PASS, "pass (no statistics to compare)"
    return None


Rule = Callable[[CompareResult, Context], Optional[Verdict]]

#: rules whose answer stands inside a compare (the walk judges what they leave open)
FIXED_RULES: tuple[Rule, ...] = (rule_dtype, rule_shape, rule_nonfinite, rule_scalar, rule_allclose)
TENSOR_RULES: tuple[Rule, ...] = FIXED_RULES + (rule_precision,)
STATS_RULES: tuple[Rule, ...] = (rule_dtype, rule_shape, rule_nonfinite, rule_scalar, rule_stats_empty,
                                 rule_precision)
_FIXED_STATS_RULES: tuple[Rule, ...] = FIXED_RULES + (rule_stats_empty,)


def _first(rules: tuple[Rule, ...], r: CompareResult, ctx: Context) -> Optional[Verdict]:
    for rule in rules:
        v = rule(r, ctx)
        if v is not None:
            return v
    return None


def fixed_verdict(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """The verdict of rules 1-5 (and a statistics pair with nothing to compare), or ``None``: what is
    left is judged at the run's precision (``rule_precision`` alone, ``origin.Walk`` in a compare)."""
    if (r.stat_diffs is None and not r.nonfinite_mismatch and ctx.kind != "scalar" and not ctx.th.allclose
            and tuple(r.shape) == tuple(r.target_shape) and _dtype_verdict(r.golden_dtype, r.target_dtype) is None):
        # the common case, said at once: a measured tensor pair of comparable dtypes, one shape, no NaN/Inf
        # apart, no argument, no --rtol/--atol (each rule below answers None to it)
        return None
    for rule in (_FIXED_STATS_RULES if r.stat_diffs is not None else FIXED_RULES):
        v = rule(r, ctx)
        if v is not None:
            return v
    return None


def small_passes(golden_dtype: str, target_dtype: str, th: Thresholds) -> bool:
    """Whether ``fixed_verdict`` answers None to every row of a ``small_pairs.SmallBlock`` of these value
    dtypes whose two shapes agree, unless the row is an argument (kind "scalar"; ``measure_many.judged``
    makes no record for the others).  A block row is measured (no statistics), finite on both sides (no
    NaN/Inf apart) and, without --atol/--rtol, has no allclose count: what is left is rule 1's dtypes,
    the same for the whole block (the common case ``fixed_verdict`` says at once)."""
    return not th.allclose and _dtype_verdict(golden_dtype, target_dtype) is None


def judge(r: CompareResult, ctx: Context) -> Verdict:
    """Run the rules in order on a measured pair; the first that answers decides."""
    v = _first(STATS_RULES if r.stat_diffs is not None else TENSOR_RULES, r, ctx)
    if v is not None:
        return v
    if r.stat_diffs is None and r.count == 0:
        return PASS, "pass (no finite elements)"
    return PASS, "pass"


def judge_value(golden: Any, target: Any) -> Verdict:
    """msprobe ParametersErrChecker for non-tensor arguments (numbers, bools, strings, None, lists, slices)."""
    if _same_value(golden, target):
        return PASS, "pass (argument unchanged)"
    return ERROR, f"argument changed: {value_text(golden)} → {value_text(target)}"


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                       and not isinstance(a, bool) and not isinstance(b, bool)):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    return a == b


def value_text(v: Any) -> str:
    """An argument value in a rule: numbers like msprobe (6 digits), others as JSON would show them."""
    if isinstance(v, float):
        return fmt(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {value_text(x)}" for k, x in v.items()) + "}"
    if v is None:
        return "None"
    return repr(v) if isinstance(v, str) else str(v)
