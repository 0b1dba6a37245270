"""Verdict rules: is one golden/target pair a pass, a warning or an error — and in whose words.

All the judgement of a single pair lives here, one small function per rule, tried in the
order of :data:`TENSOR_RULES` / :data:`STATS_RULES`; the first rule that answers decides and its
text becomes the row's ``rule``.  Each rule names the msprobe (mindstudio-probe 26.2,
``core/compare/indicator_analysis/algorithm.py`` and "Accuracy Reached or Not") rule it mirrors.

Why not msprobe's per-tensor "Accuracy Reached" alone: cosine cannot see a change of scale or
offset (a LayerNorm epsilon 1e-5 → 0.5 moves every element by up to 0.27 at cosine 0.9999998),
and it over-reacts to near-zero tensors (a bias gradient of ~1e-10 gets cosine 0.72 from
rounding alone).  msprobe catches the first with its input→output checkers (One Thousandth Err
Ratio of the inputs > 0.9 while the output's is not); per tensor we use the same ratio idea —
the share of elements that *moved* beyond the dtype's tolerance — and put a noise floor under
it scaled by the magnitude of what the op computed from.

Defaults (``--rtol/--atol`` replace rules 6-11 by numpy ``allclose``):

====  ===========================================  ========  ==========================================
 #    rule                                          verdict   mirrors (msprobe)
====  ===========================================  ========  ==========================================
 1    dtypes differ                                 error     DTypeErrChecker
 2    shapes differ                                 error     ShapeErrChecker (a warning when the same
                                                              values fill another shape: a view)
 3    NaN/Inf where the other side is finite        error     InfNanErrChecker
 4    scalar / 0-d / 1-element: value differs       error     ParametersErrChecker ("scalar parameters
      (exactly for arguments and constants, beyond             inconsistent"); never cosine
      the dtype tolerance for computed 1-element)
 5    --rtol/--atol given: any element outside      error     (numpy allclose)
 6    max |Δ| below the noise floor                 pass      — (msprobe divides by |golden|+eps)
 7    > 10 % of elements moved                      error     OneThousandthErrChecker (ratio < 0.9)
 8    cosine < 0.9                                  error     Accuracy Reached or Not
 9    > 1 % of elements moved                       warning
 10   cosine < 0.99 and max |Δ| > 0.001             warning   Accuracy Reached or Not
 11   max |Δ| > 1                                   warning   Accuracy Reached or Not (error there;
                                                              here only when few elements moved)
====  ===========================================  ========  ==========================================

An element *moved* when |Δ| > max(rtol·|golden|, noise floor); rtol is 0.001 for 32/64-bit
floats (msprobe's One Thousandth), 0.005 for float16 (Five Thousandths), 4·eps for coarser
formats (bfloat16, float8) and 0 for integers and bool.  The noise floor is
``noise_ulps`` (16) × eps of the coarser dtype × the magnitude (largest |value| of the tensor
and of the op's tensor inputs): a difference below what rounding of those values can produce
is not a divergence, whatever the cosine.

Statistics-only pairs (msprobe ``statistics``, MindSpore ``statistic``) use rules 1-4, 6, then
max/min/L2-norm relative error > 5 % error (msprobe RelativeErrChecker uses 50 % on the norm,
but only for an output whose inputs are within 10 %) and > 0.5 % warning; max and min are
taken relative to the tensor's largest |value| (a minimum near zero has no scale of its own),
the L2 norm relative to itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

from dumpscope.core.compare.metrics import CompareResult, dtype_class, dtype_eps, moved_count

#: The default rules in a few lines, for ``dumpscope compare --help`` and the README.
RULES_HELP = """\
verdict of each golden/target tensor pair (first rule that fires; msprobe rule mirrored):
  error    dtype or shape differs (msprobe DTypeErr/ShapeErr); NaN/Inf on one side only (InfNanErr);
           an argument or constant changed, e.g. "argument changed: 1e-05 -> 0.5" (ParametersErr);
           a 0-d/1-element tensor off by more than the element tolerance (never judged by cosine);
           more than 10% of the elements moved (OneThousandthErr); cosine < 0.9 (Accuracy Reached)
  pass     max |diff| at or below the noise floor: 16 x eps(dtype) x the largest |value| of the
           tensor and of its op's inputs (near-zero gradients are noise whatever their cosine)
  warning  more than 1% moved; cosine < 0.99 with max |diff| > 0.001; max |diff| > 1
  an element moved when |diff| > max(rtol x |golden|, noise floor): rtol 0.001 for float32/64,
  0.005 for float16, 4 x eps for bfloat16/float8, 0 for integers and bool
  statistics-only pairs: max/min/L2-norm relative error > 5% error, > 0.5% warning
  --rtol/--atol replace the moved/cosine/max rules by numpy allclose (any element outside: error)
first divergence: the first op (execution order) whose output errs while no input that has a
producer carries an error (origin "born", cause "tensor"), or one of whose constants or scalar
arguments changed (origin "constant"); parameters only when no op diverges."""

PASS = "pass"
WARNING = "warning"
ERROR = "error"

Verdict = tuple[str, str]


@dataclass(slots=True)
class Thresholds:
    """The numbers behind the rules (module docstring); ``rtol``/``atol`` = CLI ``--rtol/--atol``."""

    cos_warn: float = 0.99
    abs_warn: float = 0.001
    cos_error: float = 0.9
    abs_error: float = 1.0
    moved_error: float = 0.10
    moved_warn: float = 0.01
    noise_ulps: float = 16.0
    rtol: Optional[float] = None
    atol: Optional[float] = None
    stat_rel_warn: float = 0.005
    stat_rel_error: float = 0.05

    @property
    def allclose(self) -> bool:
        return self.rtol is not None or self.atol is not None


@dataclass(slots=True)
class Context:
    """What a rule may know beyond the pair: thresholds, the op-side magnitude, the row kind."""

    th: Thresholds
    magnitude: float = 0.0  # largest |value| among the op's tensor inputs (every row is judged against it)
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
    """Relative error beyond which an element "moved" (module docstring)."""
    names = [n for n in (golden_dtype, target_dtype) if n]
    if not names or not any(_is_float(n) for n in names):
        return 0.0 if names else 1e-3
    eps = max(dtype_eps(n) for n in names if _is_float(n))
    if eps <= 1.2e-7:  # float32 / float64 / complex of them
        return 1e-3
    if eps <= 1e-3:  # float16
        return 5e-3
    return 4 * eps  # bfloat16, float8


def noise_floor(golden_dtype: str, target_dtype: str, magnitude: float, th: Thresholds) -> float:
    """Absolute differences at or below this are rounding noise for these dtypes at this magnitude."""
    names = [n for n in (golden_dtype, target_dtype) if n and _is_float(n)]
    if not names or not math.isfinite(magnitude):
        return 0.0
    return th.noise_ulps * max(dtype_eps(n) for n in names) * magnitude


def magnitude_of(stats: Optional[dict[str, Optional[float]]]) -> float:
    """Largest finite |value| from a max/min record (0 when unknown)."""
    if not stats:
        return 0.0
    vals = [abs(v) for v in (stats.get("max"), stats.get("min")) if v is not None and math.isfinite(v)]
    return max(vals, default=0.0)


def _magnitude(r: CompareResult, ctx: Context) -> float:
    return max(magnitude_of(r.golden_stats), magnitude_of(r.target_stats), ctx.magnitude)


def _value_of(stats: Optional[dict[str, Optional[float]]]) -> Optional[float]:
    return None if not stats else stats.get("max")


# -- tensor rules ---------------------------------------------------------------------------


def rule_dtype(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """1. msprobe DTypeErrChecker: the dtypes differ (an error even when values agree)."""
    if r.golden_dtype and r.target_dtype and r.golden_dtype != r.target_dtype:
        g, t = dtype_class(r.golden_dtype), dtype_class(r.target_dtype)
        note = "" if g == t and g != "other" else " (not comparable)"
        return ERROR, f"dtype {r.golden_dtype} vs {r.target_dtype}{note}"
    if r.golden_dtype and dtype_class(r.golden_dtype) == "other":
        return ERROR, f"dtype {r.golden_dtype} not comparable"
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
    """4. msprobe ParametersErrChecker: scalars are judged by their value, never by cosine.

    Arguments and constants (kind "scalar") must be equal; a computed 0-d/1-element tensor
    may differ within the element tolerance and noise floor.
    """
    if ctx.kind != "scalar" and (r.size > 1 or r.size < 0):
        return None
    g, t = _value_of(r.golden_stats), _value_of(r.target_stats)
    if g is None or t is None:
        return None  # nothing finite (rule 3 handled one-sided NaN/Inf)
    if ctx.kind == "scalar":
        if g != t:
            return ERROR, f"argument changed: {fmt(g)} → {fmt(t)}"
        return PASS, "pass (argument unchanged)"
    d = abs(t - g)
    lim = max(element_rtol(r.golden_dtype, r.target_dtype) * abs(g),
              noise_floor(r.golden_dtype, r.target_dtype, _magnitude(r, ctx), ctx.th))
    if d > lim:
        rel = f", rel err {fmt(d / abs(g))}" if g else ""
        return ERROR, f"value {fmt(g)} → {fmt(t)}{rel}"
    return PASS, "pass (value within tolerance)"


def rule_allclose(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """5. ``--rtol/--atol``: numpy allclose decides (replaces rules 6-11)."""
    th = ctx.th
    if not th.allclose or r.allclose_failed is None:
        return None
    tol = f"atol {fmt(th.atol or 0.0)} + rtol {fmt(th.rtol or 0.0)}*|golden|"
    if r.allclose_failed:
        return ERROR, f"allclose: {r.allclose_failed} of {r.count} elements exceed {tol}"
    return PASS, f"pass (allclose: {tol})"


def rule_noise(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """6. Differences no larger than rounding of the op's values can make are noise, whatever the cosine."""
    if r.max_abs_err is None:
        return None
    floor = noise_floor(r.golden_dtype, r.target_dtype, _magnitude(r, ctx), ctx.th)
    if r.max_abs_err == 0.0:
        return PASS, "pass (identical)"
    if r.max_abs_err <= floor:
        return PASS, f"pass (max_abs_err {fmt(r.max_abs_err)} ≤ noise floor {fmt(floor)})"
    return None


def _moved_share(r: CompareResult, ctx: Context) -> tuple[float, int]:
    if not r.count or r.moved_hist is None:
        return 0.0, 0
    floor = noise_floor(r.golden_dtype, r.target_dtype, _magnitude(r, ctx), ctx.th)
    n = moved_count(r.moved_hist, floor)
    return n / r.count, n


def _moved_text(r: CompareResult, n: int, share: float) -> str:
    cos = f", cosine {fmt(r.cosine)}" if r.cosine is not None else ""
    return (f"{share:.1%} of elements moved ({n} of {r.count} beyond {fmt(r.rtol)}·|golden|, "
            f"max_abs_err {fmt(r.max_abs_err)}{cos})")


def rule_moved_error(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """7. msprobe OneThousandthErrChecker's ratio: more than 10 % of the elements moved."""
    share, n = _moved_share(r, ctx)
    if share > ctx.th.moved_error:
        return ERROR, _moved_text(r, n, share)
    return None


def rule_cosine_error(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """8. msprobe "Accuracy Reached or Not": cosine < 0.9."""
    if r.cosine is not None and r.cosine < ctx.th.cos_error:
        return ERROR, f"cosine {fmt(r.cosine)} < {fmt(ctx.th.cos_error)}"
    return None


def rule_moved_warn(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """9. More than 1 % of the elements moved."""
    share, n = _moved_share(r, ctx)
    if share > ctx.th.moved_warn:
        return WARNING, _moved_text(r, n, share)
    return None


def rule_cosine_warn(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """10. msprobe "Accuracy Reached or Not": cosine < 0.99 and max_abs_err > 0.001."""
    th = ctx.th
    if r.cosine is not None and r.max_abs_err is not None and r.cosine < th.cos_warn \
            and r.max_abs_err > th.abs_warn:
        return WARNING, f"cosine {fmt(r.cosine)} < {fmt(th.cos_warn)} and max_abs_err {fmt(r.max_abs_err)} > " \
                        f"{fmt(th.abs_warn)}"
    return None


def rule_max_abs(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """11. msprobe "Accuracy Reached or Not": max_abs_err > 1 (a warning: few elements moved)."""
    if r.max_abs_err is not None and r.max_abs_err > ctx.th.abs_error:
        return WARNING, f"max_abs_err {fmt(r.max_abs_err)} > {fmt(ctx.th.abs_error)}"
    return None


def rule_stat_rel(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """Statistics: max/min/L2-norm relative error (msprobe RelativeErrChecker / RelativeWarnChecker)."""
    assert r.stat_diffs is not None and r.stat_rel_errs is not None
    mag = _magnitude(r, ctx)
    floor = noise_floor(r.golden_dtype, r.target_dtype, mag, ctx.th)
    own = magnitude_of(r.golden_stats) or magnitude_of(r.target_stats)
    for level, limit in ((ERROR, ctx.th.stat_rel_error), (WARNING, ctx.th.stat_rel_warn)):
        for name in ("max", "min", "l2norm"):
            diff = r.stat_diffs.get(name)
            if diff is None or abs(diff) <= floor:
                continue
            # max/min relative to the tensor's largest |value|: a min near zero moving by 1e-6 in a
            # tensor reaching 1.7 is no change; the L2 norm relative to itself (msprobe NormRelativeErr)
            g = (r.golden_stats or {}).get(name)
            base = abs(g) if name == "l2norm" and g else own
            rel = abs(diff) / base if base else r.stat_rel_errs.get(name, 0.0)
            if rel > limit:
                return level, f"{name} rel err {fmt(rel)} > {fmt(limit)}"
    if not r.stat_diffs:
        return PASS, "pass (no statistics to compare)"
    return None


def rule_stat_noise(r: CompareResult, ctx: Context) -> Optional[Verdict]:
    """6 for statistics: every stat difference within the noise floor."""
    assert r.stat_diffs is not None
    if not r.stat_diffs:
        return None
    floor = noise_floor(r.golden_dtype, r.target_dtype, _magnitude(r, ctx), ctx.th)
    worst = max(abs(v) for v in r.stat_diffs.values())
    if worst == 0.0:
        return PASS, "pass (identical statistics)"
    if worst <= floor:
        return PASS, f"pass (stat diffs ≤ noise floor {fmt(floor)})"
    return None


def beyond_noise(r: CompareResult, ctx: Context) -> bool:
    """Whether the pair differs by more than the noise floor at all (whatever its verdict)."""
    floor = noise_floor(r.golden_dtype, r.target_dtype, _magnitude(r, ctx), ctx.th)
    if r.stat_diffs is not None:
        return any(abs(v) > floor for v in r.stat_diffs.values()) or bool(r.extra.get("nonfinite_stats"))
    return (r.max_abs_err or 0.0) > floor or bool(r.nonfinite_mismatch)


Rule = Callable[[CompareResult, Context], Optional[Verdict]]

TENSOR_RULES: tuple[Rule, ...] = (
    rule_dtype, rule_shape, rule_nonfinite, rule_scalar, rule_allclose, rule_noise, rule_moved_error,
    rule_cosine_error, rule_moved_warn, rule_cosine_warn, rule_max_abs,
)
STATS_RULES: tuple[Rule, ...] = (rule_dtype, rule_shape, rule_nonfinite, rule_scalar, rule_stat_noise, rule_stat_rel)


def _first(rules: tuple[Rule, ...], r: CompareResult, ctx: Context) -> Optional[Verdict]:
    for rule in rules:
        v = rule(r, ctx)
        if v is not None:
            return v
    return None


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
