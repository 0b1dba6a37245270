"""Write msaccucmp_hifloat8.json: what msaccucmp's own HiFloat8 decoder gives for each of the 256 codes.

Run with the Python that has mindstudio-probe installed (here: mindstudio-probe 26.2.0):
    /work/tools/probe/bin/python tests/data/make_msaccucmp_hifloat8.py
It imports the tool's decoder and records its answers; no code of the tool is copied.
"""
import json
import math
import os
import sys

import msprobe

sys.path.insert(0, os.path.join(os.path.dirname(msprobe.__file__), "msaccucmp"))
from conversion.dtype_conversion import hifloat8_to_float32  # noqa: E402


def spell(v: float):
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else v


values = [spell(float(hifloat8_to_float32(code))) for code in range(256)]
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "msaccucmp_hifloat8.json")
with open(out, "w") as fh:
    json.dump({"tool": "mindstudio-probe " + getattr(msprobe, "__version__", "26.2.0") + " msaccucmp "
               "conversion.dtype_conversion.hifloat8_to_float32", "values": values}, fh, indent=0)
    fh.write("\n")
