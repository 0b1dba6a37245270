"""Statistics without NaN/Inf counts (msprobe's Max/Min/Mean/Norm) read by the overflow judgement as the index
reads them: on the real 2-rank msprobe float16 job (tests/data/msprobe_fp16_dist/README.md) torch.mul's output
holds +inf and -inf and no NaN (its Mean is NaN only because +inf + -inf is)."""

from __future__ import annotations

import json
import math

from conftest import cli_json, unpack_data

from dumpscope.core.engines.overflow.lookup import _from_extremes
from dumpscope.core.engines.overflow.origin import TensorSummary


def _read(raw: dict) -> tuple:
    s = TensorSummary("output", 0, "float16")
    _from_extremes(s, raw)
    return s.nan, s.posinf, s.neginf


def test_both_infinities_make_a_nan_mean_but_no_nan():
    assert _read({"max": math.inf, "min": -math.inf, "mean": math.nan, "l2norm": math.inf}) == (0, 1, 1)


def test_a_nan_max_or_min_is_a_nan():
    assert _read({"max": math.nan, "min": 1.0, "mean": math.nan}) == (1, 0, 0)
    assert _read({"max": 2.0, "min": -1.0, "mean": 0.5, "l2norm": 3.0}) == (0, 0, 0)


def test_without_max_and_min_the_mean_still_tells():
    assert _read({"mean": math.nan}) == (1, 0, 0)


def test_real_fp16_overflow_is_judged_an_inf_not_a_nan(tmp_path_factory, tmp_path, capsys):
    root = unpack_data(tmp_path_factory, "real_msprobe_fp16_dist") / "fp16_dist"
    data = json.loads((root / "step2" / "rank1" / "dump.json").read_text())["data"]
    out = data["Torch.mul.0.forward"]["output"][0]
    assert (out["Max"], out["Min"]) == (math.inf, -math.inf)  # what msprobe recorded
    doc = cli_json(capsys, "overflow", str(root), "--cache-dir", str(tmp_path))
    first = next(f for f in doc["first_bad"] if f["rank"] == 1)
    assert first["name"] == "Torch.mul.0.forward" and first["step"] == 2 and first["judgement"] == "born"
    assert "output 0 +inf and -inf: float16 range exceeded" in first["reason"]
