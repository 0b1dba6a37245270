"""HiFloat8 decoding, checked code by code against msaccucmp's own decoder (mindstudio-probe 26.2.0,
answers recorded in tests/data/msaccucmp_hifloat8.json by make_msaccucmp_hifloat8.py)."""

from __future__ import annotations

import json
import math

import numpy as np

from conftest import DATA
from dumpscope.core.formats.dtypes import HIFLOAT8_LUT, decode, decoded_numpy_dtype, nbytes_for

TOOL = json.loads((DATA / "msaccucmp_hifloat8.json").read_text())["values"]

#: codes where msaccucmp disagrees with the HiF8 definition: dot 0001 (exponent 0, 3-bit mantissa:
#: 1.0 .. 1.875) and dot 001 (exponent ±1: 2 .. 3.75 and 0.5 .. 0.9375) of both signs, and 0xEF,
#: which msaccucmp reads as +Inf although its sign bit is set
SPEC_OVER_TOOL = set(range(0x08, 0x20)) | set(range(0x88, 0xA0)) | {0xEF}
POSITIVE = [c for c in range(1, 0x80) if c != 0x6F]  # 0x6F is +Inf


def _tool(code: int) -> float:
    v = TOOL[code]
    return float(v) if isinstance(v, str) else v


def test_all_256_codes_against_msaccucmp():
    ours = decode(np.arange(256, dtype=np.uint8), "hifloat8")
    agree = [c for c in range(256) if c not in SPEC_OVER_TOOL]
    for code in agree:
        t, o = _tool(code), float(ours[code])
        assert (math.isnan(t) and math.isnan(o)) or t == o, (hex(code), t, o)
    assert len(agree) == 207
    # where they differ, msaccucmp leaves gaps no 8-bit float has: nothing between 1.47 and 4
    tool_pos = sorted(_tool(c) for c in POSITIVE)
    assert not any(1.5 <= v < 4 for v in tool_pos)
    assert [float(ours[c]) for c in range(0x08, 0x20)] == \
        [1 + m / 8 for m in range(8)] + [2 * (1 + m / 8) for m in range(8)] + [0.5 * (1 + m / 8) for m in range(8)]
    assert _tool(0xEF) == math.inf and ours[0xEF] == -np.inf


def test_hifloat8_definition_properties():
    lut = HIFLOAT8_LUT.astype(np.float64)
    assert lut[0x00] == 0 and np.isnan(lut[0x80]) and lut[0x6F] == np.inf and lut[0xEF] == -np.inf
    pos = lut[POSITIVE]
    assert len(set(pos.tolist())) == len(pos) == 126  # every code its own value: no redundant encoding
    assert pos.min() == 2.0 ** -22 and pos.max() == 2.0 ** 15  # exponents -22 .. 15
    assert np.array_equal(lut[[c | 0x80 for c in POSITIVE]], -pos)  # sign-symmetric
    exps = {math.frexp(v)[1] - 1 for v in pos}
    assert exps == set(range(-22, 16))  # the 38 exponents the format covers


def test_hifloat8_loads_like_any_float8():
    assert decoded_numpy_dtype("hifloat8") == np.float32 and nbytes_for("hifloat8", 5) == 5
    assert decode(bytes([0x08, 0x10, 0x18, 0x6E]), "hif8").tolist() == [1.0, 2.0, 0.5, 32768.0]
