"""Data type tables and exact decoding of stored tensor bytes (FORMATS.md §1.4, §1.5).

Two numberings exist and must never be mixed: the *proto* numbering (``OutputDataType`` in dump
headers, ``ge_ir.proto`` graphs, ``DT_*`` strings in stats CSVs) and the C++ ``ge::DataType``
numbering (nano/TLV dumps, GE C++ APIs).  Everything here speaks one canonical spelling: the
numpy / ml_dtypes name (``float16``, ``bfloat16``, ``float8_e4m3fn``, ``int4`` …).

``decode`` turns stored bytes into the exact numeric values without ml_dtypes: bfloat16 and the
float8 variants become float32 (every value is exactly representable), packed sub-byte integers
become int8/uint8, complex32 becomes complex64.

Packing conventions (MindSpore ``SplitInt8ToInt4x2`` / ``SplitUint1x8ToUint8s``, debug/data_dump):
* int4: two elements per byte, element ``2i`` in the LOW nibble, ``2i+1`` in the high nibble.
* uint1: eight elements per byte, element ``8i`` in the MOST significant bit (bit 7).
* int2 / uint2: four per byte, element ``4i`` in the lowest two bits — by analogy with int4;
  no public reference was found, so treat these as unverified.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Union

import numpy as np


class DtypeError(ValueError):
    """An unknown, non-numeric or unsupported data type, or a buffer that cannot hold it."""


@dataclass(frozen=True, slots=True)
class DtypeInfo:
    """One row of a dtype table: enum name, canonical spelling, bits per element."""

    code: int
    name: str  # "DT_FLOAT16"
    numpy: str  # canonical spelling, "float16"
    bits: int  # bits per element on disk; 0 when not a fixed-size numeric type


# Canonical spellings that ``decode`` understands: name -> (bits, storage numpy dtype).
# "packed" types use uint8 storage units.
_NATIVE: dict[str, str] = {
    "float16": "<f2", "float32": "<f4", "float64": "<f8",
    "int8": "i1", "uint8": "u1", "int16": "<i2", "uint16": "<u2",
    "int32": "<i4", "uint32": "<u4", "int64": "<i8", "uint64": "<u8",
    "complex64": "<c8", "complex128": "<c16",
}
_SPECIAL_BITS: dict[str, int] = {
    "bool": 8, "bfloat16": 16, "complex32": 32,
    "float8_e5m2": 8, "float8_e4m3fn": 8, "float8_e8m0fnu": 8, "hifloat8": 8,
    "int4": 4, "int2": 2, "uint2": 2, "uint1": 1,
    "float6_e3m2fn": 6, "float6_e2m3fn": 6, "float4_e2m1fn": 4, "float4_e1m2": 4,
    "hifloat4": 4,
}
#: Known dtypes whose value decoding is not implemented (format unverified or packing unknown).
UNSUPPORTED: frozenset[str] = frozenset(
    {"float6_e3m2fn", "float6_e2m3fn", "float4_e2m1fn", "float4_e1m2", "hifloat4", "hifloat4_scale"}
)
#: Known but non-numeric dtypes (no tensor values to decode).
NON_NUMERIC: frozenset[str] = frozenset({"undefined", "string", "string_ref", "dual", "variant"})


def _row(code: int, name: str, numpy_name: str) -> DtypeInfo:
    bits = _SPECIAL_BITS.get(numpy_name)
    if bits is None:
        bits = np.dtype(_NATIVE[numpy_name]).itemsize * 8 if numpy_name in _NATIVE else 0
    return DtypeInfo(code, name, numpy_name, bits)


_PROTO_ROWS = [
    (0, "DT_UNDEFINED", "undefined"), (1, "DT_FLOAT", "float32"), (2, "DT_FLOAT16", "float16"),
    (3, "DT_INT8", "int8"), (4, "DT_UINT8", "uint8"), (5, "DT_INT16", "int16"), (6, "DT_UINT16", "uint16"),
    (7, "DT_INT32", "int32"), (8, "DT_INT64", "int64"), (9, "DT_UINT32", "uint32"), (10, "DT_UINT64", "uint64"),
    (11, "DT_BOOL", "bool"), (12, "DT_DOUBLE", "float64"), (13, "DT_STRING", "string"),
    (14, "DT_DUAL_SUB_INT8", "int8"), (15, "DT_DUAL_SUB_UINT8", "uint8"), (16, "DT_COMPLEX64", "complex64"),
    (17, "DT_COMPLEX128", "complex128"), (18, "DT_QINT8", "int8"), (19, "DT_QINT16", "int16"),
    (20, "DT_QINT32", "int32"), (21, "DT_QUINT8", "uint8"), (22, "DT_QUINT16", "uint16"),
    (23, "DT_RESOURCE", "int64"), (24, "DT_STRING_REF", "string_ref"), (25, "DT_DUAL", "dual"),
    (26, "DT_VARIANT", "variant"), (27, "DT_BF16", "bfloat16"), (28, "DT_INT4", "int4"), (29, "DT_UINT1", "uint1"),
    (30, "DT_INT2", "int2"), (31, "DT_UINT2", "uint2"), (32, "DT_COMPLEX32", "complex32"),
    (33, "DT_HIFLOAT8", "hifloat8"), (34, "DT_FLOAT8_E5M2", "float8_e5m2"),
    (35, "DT_FLOAT8_E4M3FN", "float8_e4m3fn"), (36, "DT_FLOAT8_E8M0", "float8_e8m0fnu"),
    (37, "DT_FLOAT6_E3M2", "float6_e3m2fn"), (38, "DT_FLOAT6_E2M3", "float6_e2m3fn"),
    (39, "DT_FLOAT4_E2M1", "float4_e2m1fn"), (40, "DT_FLOAT4_E1M2", "float4_e1m2"),
    (41, "DT_HIFLOAT4", "hifloat4"), (42, "DT_HIFLOAT4_SCALE", "hifloat4_scale"),
]
#: Proto ``OutputDataType`` / ``ge.proto.DataType`` numbering: code -> info.
PROTO_DTYPES: dict[int, DtypeInfo] = {c: _row(c, n, s) for c, n, s in _PROTO_ROWS}

_GE_ROWS = [
    (0, "DT_FLOAT", "float32"), (1, "DT_FLOAT16", "float16"), (2, "DT_INT8", "int8"), (3, "DT_INT32", "int32"),
    (4, "DT_UINT8", "uint8"), (6, "DT_INT16", "int16"), (7, "DT_UINT16", "uint16"), (8, "DT_UINT32", "uint32"),
    (9, "DT_INT64", "int64"), (10, "DT_UINT64", "uint64"), (11, "DT_DOUBLE", "float64"), (12, "DT_BOOL", "bool"),
    (13, "DT_STRING", "string"), (14, "DT_DUAL_SUB_INT8", "int8"), (15, "DT_DUAL_SUB_UINT8", "uint8"),
    (16, "DT_COMPLEX64", "complex64"), (17, "DT_COMPLEX128", "complex128"), (18, "DT_QINT8", "int8"),
    (19, "DT_QINT16", "int16"), (20, "DT_QINT32", "int32"), (21, "DT_QUINT8", "uint8"), (22, "DT_QUINT16", "uint16"),
    (23, "DT_RESOURCE", "int64"), (24, "DT_STRING_REF", "string_ref"), (25, "DT_DUAL", "dual"),
    (26, "DT_VARIANT", "variant"), (27, "DT_BF16", "bfloat16"), (28, "DT_UNDEFINED", "undefined"),
    (29, "DT_INT4", "int4"), (30, "DT_UINT1", "uint1"), (31, "DT_INT2", "int2"), (32, "DT_UINT2", "uint2"),
    (33, "DT_COMPLEX32", "complex32"), (34, "DT_HIFLOAT8", "hifloat8"), (35, "DT_FLOAT8_E5M2", "float8_e5m2"),
    (36, "DT_FLOAT8_E4M3FN", "float8_e4m3fn"), (37, "DT_FLOAT8_E8M0", "float8_e8m0fnu"),
    (38, "DT_FLOAT6_E3M2", "float6_e3m2fn"), (39, "DT_FLOAT6_E2M3", "float6_e2m3fn"),
    (40, "DT_FLOAT4_E2M1", "float4_e2m1fn"), (41, "DT_FLOAT4_E1M2", "float4_e1m2"), (42, "DT_HIFLOAT4", "hifloat4"),
]
#: C++ ``ge::DataType`` numbering (nano/TLV dumps): code -> info.  NOT the proto numbering.
GE_CPP_DTYPES: dict[int, DtypeInfo] = {c: _row(c, n, s) for c, n, s in _GE_ROWS}

#: Canonical spelling -> proto code (first code wins, so "int8" -> DT_INT8, not DT_QINT8).
PROTO_CODE_OF: dict[str, int] = {}
for _info in PROTO_DTYPES.values():
    PROTO_CODE_OF.setdefault(_info.numpy, _info.code)


def proto_dtype_name(code: int) -> str:
    """Canonical spelling for a proto dtype code, ``"unknown(N)"`` when the code is not known."""
    info = PROTO_DTYPES.get(code)
    return info.numpy if info is not None else f"unknown({code})"


# ---------------------------------------------------------------------------------------------
# normalize_dtype


def _key(text: str) -> str:
    return text.lower().replace("_", "").replace(" ", "")


_ALIASES: dict[str, str] = {}


def _alias(canon: str, *spellings: str) -> None:
    _ALIASES[_key(canon)] = canon
    for s in spellings:
        _ALIASES[_key(s)] = canon


for _info in list(PROTO_DTYPES.values()) + list(GE_CPP_DTYPES.values()):
    _alias(_info.numpy, _info.name, _info.name[3:])
_alias("float16", "half", "fp16", "f16", "<f2")
_alias("float32", "float", "fp32", "f32", "<f4", "single")
_alias("float64", "double", "fp64", "f64", "<f8")
_alias("bfloat16", "bf16", "bfloat", "DT_BFLOAT16")
_alias("bool", "bool_", "boolean", "?")
_alias("int8", "i1", "char")
_alias("uint8", "u1", "byte")
_alias("int16", "i2", "<i2", "short")
_alias("uint16", "u2", "<u2")
_alias("int32", "i4", "<i4", "int", "intc")
_alias("uint32", "u4", "<u4", "uint")
_alias("int64", "i8", "<i8", "long")
_alias("uint64", "u8", "<u8")
_alias("complex64", "c8", "<c8", "cfloat")
_alias("complex128", "c16", "<c16", "cdouble")
_alias("complex32", "chalf", "complexhalf")
_alias("float8_e5m2", "fp8_e5m2", "f8e5m2", "e5m2")
_alias("float8_e4m3fn", "fp8_e4m3fn", "f8e4m3fn", "float8_e4m3", "fp8_e4m3", "e4m3fn", "e4m3")
_alias("float8_e8m0fnu", "float8_e8m0", "fp8_e8m0", "e8m0", "float8_e8m0fnu")
_alias("hifloat8", "hif8", "hifp8")
_alias("float6_e3m2fn", "float6_e3m2")
_alias("float6_e2m3fn", "float6_e2m3")
_alias("float4_e2m1fn", "float4_e2m1", "fp4_e2m1")
_alias("uint1", "bit")
_PREFIXES = ("torch.", "mindspore.", "ms.", "numpy.", "np.", "tf.", "paddle.", "knumbertype", "dt_", "dtype.")


def normalize_dtype(text: Union[str, np.dtype, type]) -> str:
    """Canonical (numpy / ml_dtypes) spelling for any dtype spelling seen in dumps.

    Accepts ``DT_FLOAT16``, ``float16``, ``Float32``, ``kNumberTypeFloat32``, ``BFloat16``,
    ``Int32``, ``Bool``, ``UInt8``, ``torch.float32``, ``mindspore.float32``, numpy dtypes …
    Raises ``DtypeError`` for anything unrecognised.
    """
    if not isinstance(text, str):
        try:
            text = np.dtype(text).name
        except TypeError as exc:
            raise DtypeError(f"unrecognised dtype {text!r}") from exc
    raw = text.strip()
    if raw.startswith("<class '") and raw.endswith("'>"):  # str(np.float32)
        raw = raw[8:-2]
    k = _key(raw)
    hit = _ALIASES.get(k)
    if hit is not None:
        return hit
    low = raw.lower()
    for p in _PREFIXES:
        if low.startswith(p):
            hit = _ALIASES.get(_key(raw[len(p):]))
            if hit is not None:
                return hit
    raise DtypeError(f"unrecognised dtype {text!r}")


@lru_cache(maxsize=1024)  # a job spells a few dtypes thousands of times
def dtype_name(text: str) -> str:
    """``normalize_dtype`` for a spelling read from a dump or asked by a rule, never an error: one
    it does not know is kept, stripped, lower-cased and without a framework prefix (``torch.``,
    ``DT_`` …), so a new dtype still shows under its own name.  The one table every layout, the
    statistics CSVs and compare's precision rules share (they once had four that disagreed)."""
    try:
        return normalize_dtype(text)
    except DtypeError:
        pass
    low = text.strip().lower()
    for p in _PREFIXES:
        if low.startswith(p):
            return low[len(p):]
    return low


# ---------------------------------------------------------------------------------------------
# sizes


def itemsize_bits(dtype: str) -> int:
    """Bits per stored element of a canonical (or any accepted) dtype spelling."""
    name = normalize_dtype(dtype)
    if name in _NATIVE:
        return np.dtype(_NATIVE[name]).itemsize * 8
    bits = _SPECIAL_BITS.get(name)
    if bits is None:
        raise DtypeError(f"dtype {name!r} has no fixed element size")
    return bits


def nbytes_for(dtype: str, count: int) -> int:
    """Bytes needed to store ``count`` elements (packed types round up to whole bytes)."""
    return (itemsize_bits(dtype) * count + 7) // 8


def decoded_numpy_dtype(dtype: str) -> np.dtype:
    """The dtype ``decode`` returns for a given stored dtype."""
    name = normalize_dtype(dtype)
    if name in _NATIVE:
        return np.dtype(_NATIVE[name]).newbyteorder("=")
    special = {"bool": "bool", "bfloat16": "float32", "complex32": "complex64", "float8_e5m2": "float32",
               "float8_e4m3fn": "float32", "float8_e8m0fnu": "float32", "hifloat8": "float32", "int4": "int8", "int2": "int8",
               "uint2": "uint8", "uint1": "uint8"}
    if name in special:
        return np.dtype(special[name])
    raise DtypeError(f"dtype {name!r} cannot be decoded")


# ---------------------------------------------------------------------------------------------
# float8 lookup tables, built from the bit definitions (sign | exponent | mantissa)


def _minifloat_lut(exp_bits: int, man_bits: int, bias: int, *, ieee_specials: bool, fn_nan_only_all_ones: bool
                   ) -> np.ndarray:
    codes = np.arange(256, dtype=np.int64)
    sign = np.where(codes >> 7, -1.0, 1.0)
    e = (codes >> man_bits) & ((1 << exp_bits) - 1)
    m = codes & ((1 << man_bits) - 1)
    normal = np.ldexp(1.0 + m / (1 << man_bits), (e - bias).astype(np.int64))
    sub = np.ldexp(m / (1 << man_bits), 1 - bias)
    val = sign * np.where(e == 0, sub, normal)
    emax = (1 << exp_bits) - 1
    if ieee_specials:  # e5m2: all-ones exponent is Inf (m == 0) or NaN
        val = np.where((e == emax) & (m == 0), sign * np.inf, val)
        val = np.where((e == emax) & (m != 0), np.nan, val)
    if fn_nan_only_all_ones:  # e4m3fn: only S.1111.111 is NaN, no infinities
        val = np.where((e == emax) & (m == (1 << man_bits) - 1), np.nan, val)
    return val.astype(np.float32)


#: 256-entry code -> float32 tables.
FLOAT8_E5M2_LUT = _minifloat_lut(5, 2, 15, ieee_specials=True, fn_nan_only_all_ones=False)
FLOAT8_E4M3FN_LUT = _minifloat_lut(4, 3, 7, ieee_specials=False, fn_nan_only_all_ones=True)
# e8m0fnu: unsigned power of two 2**(code-127); code 0xFF is NaN; no zero, no sign.
FLOAT8_E8M0_LUT = np.where(np.arange(256) == 255, np.nan,
                           np.ldexp(1.0, np.arange(256) - 127)).astype(np.float32)


def _hifloat8_lut() -> np.ndarray:
    """HiFloat8 (Ascend HiF8): sign | dot | exponent | mantissa, with a tapered field split.

    The dot field is a prefix code for the exponent width D: ``11`` D=4, ``10`` D=3, ``01`` D=2,
    ``001`` D=1, ``0001`` D=0, ``0000`` denormal.  The exponent (D bits) is sign-magnitude with
    the magnitude's leading 1 implicit (D=1: ±1, D=2: ±[2, 3], … D=4: ±[8, 15]; D=0: 0), the
    mantissa takes the remaining bits (3 for D<=2, 2 for D=3, 1 for D=4) after an implicit 1.
    Denormals (dot ``0000``) are 2**(m - 23) for the 3-bit m = 1..7 (exponents -22..-16).
    Specials: 0x00 zero, 0x80 NaN, S.11.0111.1 (0x6F, 0xEF) ±Inf.  (CANN HiFloat8 format notes.)
    """
    out = np.empty(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        b = code & 0x7F
        if b >> 5 == 0b11:
            d, rest = 4, 5
        elif b >> 5 == 0b10:
            d, rest = 3, 5
        elif b >> 5 == 0b01:
            d, rest = 2, 5
        elif b >> 4 == 0b001:
            d, rest = 1, 4
        elif b >> 3 == 0b0001:
            d, rest = 0, 3
        else:  # denormal: no exponent field
            m = b & 0x7
            out[code] = sign * (2.0 ** (m - 23)) if m else 0.0
            continue
        field_bits = b & ((1 << rest) - 1)
        man_bits = rest - d
        e_field, m = field_bits >> man_bits, field_bits & ((1 << man_bits) - 1)
        if d == 0:
            e = 0
        else:
            mag = (1 << (d - 1)) | (e_field & ((1 << (d - 1)) - 1))
            e = -mag if e_field >> (d - 1) else mag
        out[code] = sign * (2.0 ** e) * (1.0 + m / (1 << man_bits))
    out[0x80] = np.nan
    out[0x6F], out[0xEF] = np.inf, -np.inf
    return out.astype(np.float32)


HIFLOAT8_LUT = _hifloat8_lut()
for _lut in (FLOAT8_E5M2_LUT, FLOAT8_E4M3FN_LUT, FLOAT8_E8M0_LUT, HIFLOAT8_LUT):
    _lut.setflags(write=False)
_FP8_LUTS = {"float8_e5m2": FLOAT8_E5M2_LUT, "float8_e4m3fn": FLOAT8_E4M3FN_LUT,
             "float8_e8m0fnu": FLOAT8_E8M0_LUT, "hifloat8": HIFLOAT8_LUT}


# ---------------------------------------------------------------------------------------------
# decode

BufferLike = Union[bytes, bytearray, memoryview, np.ndarray]


def _as_u8(buf: BufferLike) -> np.ndarray:
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint8:
            buf = np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
        return buf.reshape(-1)
    return np.frombuffer(buf, dtype=np.uint8)


def decode(buf: BufferLike, dtype: str, count: Optional[int] = None) -> np.ndarray:
    """Decode stored little-endian bytes into a flat array of exact values.

    ``count`` is the element count; bytes beyond what it needs are ignored (dump ``size`` may
    exceed the tensor).  Without ``count``, whole-byte types use every byte (the length must be a
    multiple of the item size) and packed types decode every slot in the buffer.
    Native types come back as zero-copy views when the input allows it.
    """
    name = normalize_dtype(dtype)
    if name in NON_NUMERIC:
        raise DtypeError(f"dtype {name!r} is not numeric and has no values to decode")
    if name in UNSUPPORTED:
        raise DtypeError(f"decoding dtype {name!r} is not supported")
    raw = _as_u8(buf)
    bits = itemsize_bits(name)
    if count is None:
        if bits >= 8 and raw.size % (bits // 8):
            raise DtypeError(f"{raw.size} bytes is not a whole number of {name} elements ({bits // 8} bytes each)")
        count = raw.size * 8 // bits
    if count < 0:
        raise DtypeError(f"negative element count {count}")
    need = (bits * count + 7) // 8
    if raw.size < need:
        raise DtypeError(f"{count} {name} elements need {need} bytes, buffer has {raw.size}")
    raw = raw[:need]
    if name in _NATIVE:
        out = raw.view(_NATIVE[name])
        return out if out.dtype.isnative else out.astype(out.dtype.newbyteorder("="))
    if name == "bool":
        return raw != 0
    if name == "bfloat16":
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
    if name == "complex32":
        return raw.view("<f2").astype(np.float32).view(np.complex64)
    lut = _FP8_LUTS.get(name)
    if lut is not None:
        return lut[raw]
    if name == "int4":
        pairs = np.empty((raw.size, 2), dtype=np.uint8)
        pairs[:, 0] = raw & 0x0F
        pairs[:, 1] = raw >> 4
        vals = pairs.reshape(-1)[:count].view(np.int8)
        return np.where(vals >= 8, vals - 16, vals).astype(np.int8)
    if name in ("int2", "uint2"):
        quads = np.stack([(raw >> s) & 0x3 for s in (0, 2, 4, 6)], axis=1).reshape(-1)[:count]
        if name == "uint2":
            return quads.astype(np.uint8)
        q = quads.astype(np.int8)
        return np.where(q >= 2, q - 4, q).astype(np.int8)
    if name == "uint1":
        return np.unpackbits(raw, bitorder="big")[:count]
    raise DtypeError(f"decoding dtype {name!r} is not supported")


#: stored in place of a logical dtype without losing a value (MindSpore writes bfloat16 / int4 / uint1
#: payloads as float32 / int8 / uint8, MSDOC r2.5)
_EXACT_IN = {"bfloat16": {"float32", "float64"}, "float16": {"float32", "float64"}, "float32": {"float64"},
             "float8_e5m2": {"float16", "float32", "float64"}, "float8_e4m3fn": {"float16", "float32", "float64"},
             "int4": {"int8", "int16", "int32", "int64"}, "uint1": {"uint8", "bool"}, "int8": {"int16", "int32"}}


#: bit-pattern types numpy has no type of: a ``.npy`` of them holds unsigned/signed integer words (or
#: ml_dtypes' void items) of this many bytes, and only the file's name says what the words are
_WORD_BYTES = {"bfloat16": 2, "float8_e5m2": 1, "float8_e4m3fn": 1, "float8_e8m0fnu": 1}


def npy_words(logical: str, header: np.dtype) -> Optional[bool]:
    """Does a ``.npy`` payload of ``header`` items hold the bit patterns of ``logical`` (its name's dtype)?

    True: integer (or void) words as wide as ``logical``'s, little-endian: a writer saved the bits
    (``<u2`` for bfloat16) because numpy has no such type, so they decode as ``logical``.
    False: integer words of another width or byte order named by such a type: what they are cannot
    be told, so they are a named problem, never numbers that only look like the tensor.
    None: the header's type is the values' own (floats, or a name of no bit-pattern type).
    """
    width = _WORD_BYTES.get(logical)
    if width is None or header.kind not in "iuV" or header.names is not None or header.subdtype is not None:
        return None
    return header.itemsize == width and header.byteorder != ">"


def npy_words_named(logical: str, header: str) -> Optional[bool]:
    """``npy_words`` of a header dtype given by name (``read_npy_header``'s ``dtype``; byte order unknown)."""
    try:
        return npy_words(logical, np.dtype(header))
    except TypeError:
        return None


def npy_words_problem(logical: str, header: np.dtype) -> str:
    """The one line for ``npy_words(...) is False``."""
    return (f"file name says {logical}, payload header {header.str} ({header.name}): not {logical} bit patterns "
            f"(another width or byte order), and not {logical} values: not decoded")


def stored_dtype_note(logical: str, stored: str) -> Optional[str]:
    """One line for ``show`` when a file's name and its payload header disagree on the dtype.

    The values are always read as the payload header says (the bytes are what they are); the
    name's dtype stays the tensor's description in every command.
    """
    if not stored or not logical or stored == logical:
        return None
    if npy_words_named(logical, stored) is False:
        return npy_words_problem(logical, np.dtype(stored))
    holds = stored in _EXACT_IN.get(logical, ())
    return (f"file name says {logical}, payload header {stored}: values read as {stored}"
            + (f" (a {stored} holds every {logical} value)" if holds else f" ({stored} cannot hold every {logical} value)"))
