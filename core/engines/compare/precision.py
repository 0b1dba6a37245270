"""Judging a tensor pair at the precision it was stored in: unit roundoffs and relative errors.

A bfloat16 target against a float32 golden differs everywhere by about one bfloat16 rounding
(2⁻⁸ of each value); that is the run's precision, not a divergence (DESIGN.md "Judging at the
precision the run computed in").  This module turns one measured pair (``metrics.CompareResult``,
tensor or statistics) into the numbers the judgement walk (``origin``) compares:

* ``unit_roundoff`` of the coarser of the two *stored* dtypes (the dump's record: a ``.pt`` holding
  bfloat16 is judged as bfloat16, never as the float32 copy decoding made);
* ``Err``: the pair's error relative to the tensor's own size, norm-wise (``e`` = ‖t−g‖/‖g‖, the
  measure rounding noise keeps near one unit roundoff whatever the values) and element-wise
  (``r`` = max |tᵢ−gᵢ| / (|gᵢ| + rms g): an element against its own size and the tensor's typical
  size, so a change confined to a few elements still shows while near-zero elements stay quiet).

Statistics-only pairs (msprobe ``statistics``, MindSpore ``statistic``, CANN per-op CSV) have no
elements: ``e`` is the largest of |Δ‖·‖|/‖g‖, |Δmean|/rms, |Δmax|/(|max|+rms), |Δmin|/(|min|+rms) —
each a lower bound of the element errors it summarises, on the same scale as ``e``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from dumpscope.core.engines.compare.metrics import CompareResult
from dumpscope.core.formats.dtypes import dtype_name

#: unit roundoff u = 2^-(mantissa bits + 1): the largest relative error of one round-to-nearest.
#: float8 kinds and hifloat8 are coarser still; integers and bool are exact (0).
_UNIT_ROUNDOFF: dict[str, float] = {
    "float64": 2.0 ** -53, "double": 2.0 ** -53, "complex128": 2.0 ** -53,
    "float32": 2.0 ** -24, "float": 2.0 ** -24, "complex64": 2.0 ** -24,
    "tf32": 2.0 ** -11, "hf32": 2.0 ** -11,
    "float16": 2.0 ** -11, "half": 2.0 ** -11,
    "bfloat16": 2.0 ** -8,
    "float8_e4m3fn": 2.0 ** -4, "float8_e4m3fnuz": 2.0 ** -4, "float8_e4m3": 2.0 ** -4,
    "float8_e5m2": 2.0 ** -3, "float8_e5m2fnuz": 2.0 ** -3,
    "float8_e8m0fnu": 2.0 ** -1, "float8_e3m4": 2.0 ** -5, "float8_e4m3b11fnuz": 2.0 ** -4,
    "hifloat8": 2.0 ** -3, "float4_e2m1fn": 2.0 ** -2,
}

#: TF32 / HF32: what GPUs (cuDNN/cuBLAS ``allow_tf32``) and Ascend's cube unit (``allow_hf32``) compute
#: float32 matrix products in by default; 10 mantissa bits.
TF32 = 2.0 ** -11

#: How far an output's error may exceed what its inputs carried plus one rounding before it is *born*
#: there.  msprobe warns when "the norm relative error of output is 10 times that of input"
#: (mindstudio-probe ``compare`` input→output checkers); 10 is that rule.  Measured on the real GPU/CPU
#: bf16/fp16 msprobe pairs (tests/data), correct ops stay below 3× (inputs' error + one rounding).
K_BORN = 10.0


def canonical(name: str) -> str:
    """A dtype name as this module keys it: ``torch.bfloat16``/``DT_BF16``/``BFloat16`` → ``bfloat16``
    (``formats.dtypes.dtype_name``: the table the layouts name dtypes by)."""
    return dtype_name(name or "")


@lru_cache(maxsize=1024)
def unit_roundoff(name: str) -> float:
    """The unit roundoff of a stored dtype (0 for integers, bool and names that are no float)."""
    n = canonical(name)
    if n in _UNIT_ROUNDOFF:
        return _UNIT_ROUNDOFF[n]
    if n.startswith("float8"):
        return 2.0 ** -3  # an fp8 kind not listed: the coarser common one (e5m2)
    return 0.0


@lru_cache(maxsize=1024)
def judged_dtype(golden: str, target: str) -> str:
    """The coarser of the two sides' stored dtypes: the precision the pair is judged at."""
    ug, ut = unit_roundoff(golden), unit_roundoff(target)
    if ug == ut == 0.0:
        return canonical(golden or target)
    return canonical(target) if ut >= ug else canonical(golden)


_MATMUL_WORDS = ("conv", "matmul", "linear", "bmm", "addmm", "baddbmm", "einsum", "dense", "gemm", "mm.",
                 "fullyconnection", "batchmatmul", "quantbatchmatmul", "weightquantbatchmatmul")


@lru_cache(maxsize=1024)
def is_matrix_product(op_type: str, name: str = "") -> bool:
    """Convolutions and matrix products (their float32 forms run in TF32/HF32 by default on GPUs and NPUs)."""
    text = f"{op_type} {name}".lower()
    return any(w in text for w in _MATMUL_WORDS) or text.split(".")[-1] in ("mm", "matmul")


@dataclass(slots=True)
class Err:
    """One pair's error relative to the tensor's size (module docstring).

    ``r`` is ``None`` for statistics; ``rms`` and ``n`` (elements, -1 unknown) let an op's output be
    set against the size of what it was computed from; ``abs_rms``/``abs_max`` are the error itself.
    Never changed once made, though not frozen: a compare makes one a pair (40,000 for two 20k-file
    trees), and a frozen dataclass's ``__init__`` costs eight times a plain one's."""

    e: float
    r: Optional[float]
    rms: float
    n: int
    abs_rms: float
    abs_max: float
    peak: float = 0.0  # largest |golden value|
    q: Optional[float] = None  # 90th percentile of the elements' relative errors (statistics: the extremes')

    @property
    def typical(self) -> float:
        """The relative error the tensor's elements carry: the norm-wise error, or the 90th percentile of the
        element errors where a few huge values (a −1e9 attention mask) make the norm-wise one tiny."""
        return max(self.e, self.q) if self.q is not None else self.e

    @property
    def exact(self) -> bool:
        return self.abs_max == 0.0 and self.abs_rms == 0.0


def _finite(x: Optional[float]) -> Optional[float]:
    return x if x is not None and x - x == 0.0 else None  # x - x is NaN for NaN and ±Inf


def error_of(r: CompareResult) -> Optional[Err]:
    """The relative error of a measured pair, or ``None`` when nothing numeric was compared."""
    g = r.golden_stats or {}
    if r.stat_diffs is not None:
        return _stats_error(r, g)
    return tensor_error(g.get("l2norm"), r.euc_dist, r.count, r.max_abs_err, r.max_scaled_err, r.rel_err_q90,
                        g.get("max"), g.get("min"))


def tensor_error(norm: Optional[float], euc: Optional[float], n: int, abs_max: Optional[float],
                 scaled: Optional[float], q: Optional[float], hi: Optional[float], lo: Optional[float]
                 ) -> Optional[Err]:
    """``error_of`` a measured tensor pair from its numbers (``CompareResult``'s golden L2 norm, euc_dist,
    count, max_abs_err, max_scaled_err, rel_err_q90, golden max and min), or ``None`` when nothing numeric
    was compared: the engine asks it of a small block's row without making the record."""
    # (``_finite`` spelled out, here and below: x - x is NaN for NaN and ±Inf)
    if norm is None or not norm - norm == 0.0 or euc is None or not euc - euc == 0.0 or not n:
        return None
    root = math.sqrt(n)
    rms = norm / root
    abs_rms = euc / root
    if abs_max is None or not abs_max - abs_max == 0.0 or not abs_max:
        abs_max = 0.0
    e = abs_rms / rms if rms > 0 else (0.0 if abs_rms == 0 else math.inf)
    if scaled is None or not scaled - scaled == 0.0:
        scaled = abs_max / rms if rms > 0 else (0.0 if abs_max == 0 else math.inf)
    a = abs(hi) if hi is not None and hi - hi == 0.0 else 0.0
    b = abs(lo) if lo is not None and lo - lo == 0.0 else 0.0
    return Err(e, scaled, rms, n, abs_rms, abs_max, b if b > a else a,  # (``_peak``)
               q if q is not None and q - q == 0.0 else None)


def _stats_error(r: CompareResult, g: dict) -> Optional[Err]:
    d = r.stat_diffs or {}
    if not d:
        return None
    n = r.size if r.size and r.size > 0 else -1
    norm = _finite(g.get("l2norm"))
    gmax, gmin = _finite(g.get("max")), _finite(g.get("min"))
    if norm is not None and n > 0:
        rms = norm / math.sqrt(n)
    else:  # no element count: the largest |value| stands in for the typical size
        rms = max(abs(gmax or 0.0), abs(gmin or 0.0))
    parts: list[float] = []
    abs_parts: list[float] = []
    for name, base in (("l2norm", norm), ("mean", rms), ("max", abs(gmax or 0.0) + rms),
                       ("min", abs(gmin or 0.0) + rms)):
        diff = d.get(name)
        if diff is None:
            continue
        diff = abs(diff)
        if name == "l2norm":
            abs_parts.append(diff / math.sqrt(n) if n > 0 else diff)
        else:
            abs_parts.append(diff)
        if base:
            parts.append(diff / base)
        elif diff:
            parts.append(math.inf)
        else:
            parts.append(0.0)
    if not parts:
        return None
    # the extremes' own relative errors: what the elements typically carry where one huge value (a −1e9
    # mask) sets the scale of everything else (``Err.typical``; used for what inputs carry, never to accuse)
    own = [abs(d[k]) / abs(v) for k, v in (("max", gmax), ("min", gmin)) if d.get(k) is not None and v]
    return Err(max(parts), None, rms, n, max(abs_parts), max(abs_parts), _peak(g), max(own, default=None))


def _peak(g: dict) -> float:
    hi, lo = _finite(g.get("max")), _finite(g.get("min"))
    a, b = abs(hi) if hi is not None else 0.0, abs(lo) if lo is not None else 0.0
    return b if b > a else a  # (``max(a, b)``)


@lru_cache(maxsize=64)
def fmt_u(u: float) -> str:
    """A unit roundoff as a power of two (``2^-8``)."""
    if u <= 0:
        return "0"
    k = math.log2(u)
    return f"2^{int(k)}" if k == int(k) else f"{u:.3g}"
