"""A fixed corpus of synthetic CANN dump files: every data type and device format ``cann_writer`` writes.

The corpus is what tests/data/make_cann_oracle.py hands to msprobe's own CANN dump parser and what
tests/test_cann_oracle.py decodes with dumpscope, so it must come out byte for byte the same on every
machine: values are small rationals made by integer arithmetic (no random generator, no libm), exact in
every float type they are stored in (specials added where the type has them), and file names are fixed.
One tensor per file for the type sweep (msprobe refuses a whole file over one type it cannot decode);
the format sweep mirrors tests/test_cann_dump.py's device-format cases plus the padded, grouped and C04
variants; one file carries inputs, outputs, a buffer and a workspace to check the payload order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np

from synth.cann_writer import SynthTensor, write_dump

#: the corpus's own folder under the root it is written to
CORPUS = "cann_corpus"


@dataclass
class Case:
    """One dump file: its name in the corpus and what it holds."""

    name: str
    inputs: list[SynthTensor] = field(default_factory=list)
    outputs: list[SynthTensor] = field(default_factory=list)
    buffers: list[bytes] = field(default_factory=list)
    spaces: list[bytes] = field(default_factory=list)


def ramp(shape: tuple[int, ...], step: int = 37, modulus: int = 101, scale: float = 8.0) -> np.ndarray:
    """Values ``((i * step) % modulus - modulus // 2) / scale`` in C order: exact binary fractions, no RNG."""
    n = int(np.prod(shape)) if shape else 1
    k = (np.arange(n, dtype=np.int64) * step) % modulus - modulus // 2
    return (k / scale).reshape(shape)


def ints(shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    """Evenly spaced integers from ``lo`` to ``hi`` (both included) in a shuffled order, as Python ints
    (exact up to 64 bits; the caller picks the storage type)."""
    n = int(np.prod(shape))
    assert n > 1 and np.gcd(7, n) == 1
    return np.array([lo + (hi - lo) * ((k * 7) % n) // (n - 1) for k in range(n)], dtype=object).reshape(shape)


def _with_specials(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64).copy()
    flat = a.reshape(-1)
    flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return a


def _float_cases() -> list[Case]:
    shape = (3, 7)
    out = []
    for dtype, specials in (("float32", True), ("float16", True), ("float64", True), ("bfloat16", True),
                            ("float8_e5m2", True), ("float8_e4m3fn", False)):
        a = _with_specials(ramp(shape)) if specials else ramp(shape)
        if dtype == "float8_e4m3fn":  # no infinities: NaN and -0 only
            a = a.copy()
            a.reshape(-1)[:2] = [np.nan, -0.0]
        out.append(Case(f"dtype_{dtype}", outputs=[SynthTensor(a, dtype)]))
    e8m0 = np.array([2.0 ** -127, 2.0 ** -3, 0.5, 1.0, 2.0, 2.0 ** 20, 2.0 ** 127, np.nan])
    out.append(Case("dtype_float8_e8m0fnu", outputs=[SynthTensor(e8m0, "float8_e8m0fnu")]))
    return out


def _int_cases() -> list[Case]:
    shape = (2, 9)
    ranges = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
              "int32": (-2 ** 31, 2 ** 31 - 1), "uint32": (0, 2 ** 32 - 1), "int64": (-2 ** 63, 2 ** 63 - 1),
              "uint64": (0, 2 ** 64 - 1), "int4": (-8, 7), "int2": (-2, 1), "uint2": (0, 3)}
    out = []
    for dtype, (lo, hi) in ranges.items():
        vals = ints(shape, lo, hi)
        store = {"int4": "int8", "int2": "int8", "uint2": "uint8"}.get(dtype, dtype)
        out.append(Case(f"dtype_{dtype}", outputs=[SynthTensor(vals.astype(store), dtype)]))
    bits = (np.arange(13) * 5 % 3 == 1).astype(np.uint8)  # 13 bits: the last byte is partly padding
    out.append(Case("dtype_uint1", outputs=[SynthTensor(bits, "uint1")]))
    out.append(Case("dtype_bool", outputs=[SynthTensor(np.arange(10).reshape(2, 5) % 3 == 0, "bool")]))
    return out


def _complex_cases() -> list[Case]:
    re, im = ramp((2, 3)), ramp((2, 3), step=11)
    return [Case(f"dtype_{dtype}", outputs=[SynthTensor((re + 1j * im).astype(np.complex128), dtype)])
            for dtype in ("complex64", "complex128", "complex32")]


#: (format, logical shape, dtype, extra SynthTensor arguments): test_cann_dump's device-format cases and more
FORMATS = [
    ("NC1HWC0", (2, 20, 3, 3), "float16", {}), ("NC1HWC0", (1, 40, 2, 2), "int8", {}),
    ("NC1HWC0", (2, 5, 3, 3), "float32", {}), ("NC1HWC0", (1, 16, 2, 2), "float16", {}),
    ("NC1HWC0_C04", (2, 3, 4, 4), "float16", {}),
    ("FRACTAL_Z", (17, 20, 3, 3), "float16", {}), ("FRACTAL_Z", (5, 3, 1, 1), "float32", {}),
    ("FRACTAL_Z", (32, 16, 1, 1), "float16", {}), ("FRACTAL_Z", (8, 3, 3, 3), "float16", {"sub_format": 4}),
    ("FRACTAL_Z_C04", (16, 3, 2, 2), "float16", {}),
    ("FRACTAL_NZ", (2, 20, 33), "float16", {}), ("FRACTAL_NZ", (40, 70), "bfloat16", {}),
    ("FRACTAL_NZ", (33,), "float8_e4m3fn", {}), ("FRACTAL_NZ", (5, 17), "float32", {}),
    ("FRACTAL_NZ", (32, 16), "float16", {}),
    ("NDC1HWC0", (2, 18, 2, 3, 3), "float16", {}),
    ("FRACTAL_Z_3D", (18, 5, 2, 3, 2), "float16", {}),
    ("C1HWNCoC0", (3, 20, 2, 2), "float16", {}),
    ("NHWC", (2, 3, 4, 5), "float32", {}), ("HWCN", (3, 3, 4, 2), "float16", {}),
    ("NCDHW", (1, 2, 3, 4, 5), "float32", {}), ("NCHW", (2, 3, 2, 2), "float32", {}),
]


def _format_cases() -> list[Case]:
    out = []
    for fmt, shape, dtype, extra in FORMATS:
        vals = ramp(shape)
        if dtype == "int8":
            vals = (ramp(shape) * 8).astype(np.int8)
        label = "x".join(map(str, shape)) + ("_g%d" % extra["sub_format"] if "sub_format" in extra else "")
        out.append(Case(f"format_{fmt}_{dtype}_{label}", inputs=[SynthTensor(vals, dtype, fmt, **extra)]))
    return out


def _mixed_case() -> Case:
    """Two inputs, two outputs, a buffer and a workspace: the payloads' order in the file."""
    return Case("mixed_inputs_outputs_buffer_space",
                inputs=[SynthTensor(ramp((4, 5)), "float32"), SynthTensor(ramp((1, 20, 2, 2)), "float16", "NC1HWC0")],
                outputs=[SynthTensor(ramp((3, 3), step=5), "float16"),
                         SynthTensor(ints((6,), -100, 100).astype(np.int32), "int32")],
                buffers=[bytes(range(16))], spaces=[b"\x07" * 12])


def cases() -> list[Case]:
    """Every case of the corpus, in a fixed order."""
    return _float_cases() + _int_cases() + _complex_cases() + _format_cases() + [_mixed_case()]


def write_corpus(root: Union[str, Path]) -> dict[str, Path]:
    """Write every case under ``root/cann_corpus/<case>/`` and return {case name: file path}."""
    written = {}
    for i, case in enumerate(cases()):
        folder = Path(root) / CORPUS / case.name
        written[case.name] = write_dump(folder, "Oracle", f"corpus/{case.name}", 10 + i, 2, 1700000000000000 + i,
                                        inputs=case.inputs, outputs=case.outputs, buffers=case.buffers,
                                        spaces=case.spaces)
    return written
