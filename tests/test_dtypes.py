"""dtype tables, spelling normalisation and exact decoding (ml_dtypes is the independent oracle)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpscope.core.formats import dtypes
from dumpscope.core.formats.dtypes import DtypeError, decode, itemsize_bits, normalize_dtype


def test_proto_table_matches_formats_md():
    # Hand-copied from FORMATS.md §1.4.
    expect = {0: "DT_UNDEFINED", 1: "DT_FLOAT", 2: "DT_FLOAT16", 3: "DT_INT8", 4: "DT_UINT8", 7: "DT_INT32",
              8: "DT_INT64", 9: "DT_UINT32", 11: "DT_BOOL", 12: "DT_DOUBLE", 16: "DT_COMPLEX64", 27: "DT_BF16",
              28: "DT_INT4", 29: "DT_UINT1", 32: "DT_COMPLEX32", 33: "DT_HIFLOAT8", 34: "DT_FLOAT8_E5M2",
              35: "DT_FLOAT8_E4M3FN", 36: "DT_FLOAT8_E8M0", 42: "DT_HIFLOAT4_SCALE"}
    for code, name in expect.items():
        assert dtypes.PROTO_DTYPES[code].name == name
    assert dtypes.proto_dtype_name(27) == "bfloat16"
    assert dtypes.proto_dtype_name(1) == "float32"
    assert dtypes.proto_dtype_name(35) == "float8_e4m3fn"
    assert dtypes.proto_dtype_name(99) == "unknown(99)"
    assert dtypes.PROTO_CODE_OF["int8"] == 3 and dtypes.PROTO_CODE_OF["bfloat16"] == 27


def _ge(code: int) -> str:
    info = dtypes.GE_CPP_DTYPES.get(code)
    return info.numpy if info is not None else f"unknown({code})"


def test_ge_cpp_table_is_separate():
    # FORMATS.md §1.5: 0 FLOAT, 1 FLOAT16, 3 INT32, 9 INT64, 12 BOOL, 27 BF16, 29 INT4, 35 FLOAT8_E5M2.
    assert _ge(0) == "float32"
    assert _ge(1) == "float16"
    assert _ge(3) == "int32"
    assert _ge(9) == "int64"
    assert _ge(12) == "bool"
    assert _ge(29) == "int4"
    assert _ge(35) == "float8_e5m2"
    assert _ge(5) == "unknown(5)"
    assert dtypes.proto_dtype_name(1) != _ge(1)


@pytest.mark.parametrize("text,want", [
    ("DT_FLOAT16", "float16"), ("float16", "float16"), ("Float32", "float32"), ("kNumberTypeFloat32", "float32"),
    ("BFloat16", "bfloat16"), ("Int32", "int32"), ("Bool", "bool"), ("UInt8", "uint8"),
    ("torch.float32", "float32"), ("mindspore.float32", "float32"), ("DT_FLOAT", "float32"),
    ("DT_DOUBLE", "float64"), ("DT_BF16", "bfloat16"), ("DT_BFLOAT16", "bfloat16"), ("torch.bfloat16", "bfloat16"),
    ("kNumberTypeBFloat16", "bfloat16"), ("kNumberTypeInt4", "int4"), ("DT_FLOAT8_E8M0", "float8_e8m0fnu"),
    ("torch.float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2"), ("Int64", "int64"),
    ("kNumberTypeBool", "bool"), ("complex64", "complex64"), ("DT_COMPLEX32", "complex32"), ("half", "float16"),
    (np.float16, "float16"), (np.dtype("int16"), "int16"), ("DT_QINT8", "int8"), ("uint1", "uint1"),
])
def test_normalize_dtype(text, want):
    assert normalize_dtype(text) == want


@pytest.mark.parametrize("bad", ["", "floaty", "DT_NOPE", "torch.tensor"])
def test_normalize_dtype_rejects(bad):
    with pytest.raises(DtypeError):
        normalize_dtype(bad)


def test_sizes():
    assert itemsize_bits("bfloat16") == 16
    assert itemsize_bits("int4") == 4
    assert itemsize_bits("uint1") == 1
    assert itemsize_bits("complex32") == 32
    assert itemsize_bits("float8_e4m3fn") == 8


@pytest.mark.parametrize("name", ["float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu"])
def test_float8_tables_match_ml_dtypes(name):
    codes = np.arange(256, dtype=np.uint8)
    ref = codes.view(getattr(ml_dtypes, name)).astype(np.float32)
    got = decode(codes.tobytes(), name)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ref)  # NaN positions equal too
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(ref[~np.isnan(ref)]))


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=64).filter(lambda b: len(b) % 2 == 0))
def test_bfloat16_exact(raw):
    got = decode(raw, "bfloat16")
    ref = np.frombuffer(raw, dtype=ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(got, ref)


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=32))
def test_int4_low_nibble_first(raw):
    got = decode(raw, "int4")
    want = []
    for b in raw:  # independent scalar reference: low nibble, then high nibble, sign-extended
        for nib in (b & 0xF, b >> 4):
            want.append(nib - 16 if nib >= 8 else nib)
    assert got.dtype == np.int8
    assert got.tolist() == want


def test_int4_odd_count_and_ml_dtypes():
    raw = bytes([0x21, 0xF8, 0x07])  # 1, 2, -8, -1, 7, 0
    assert decode(raw, "int4", count=5).tolist() == [1, 2, -8, -1, 7]
    # ml_dtypes int4 (one nibble per byte, low bits) gives the sign extension of the same nibbles
    nibs = np.array([1, 2, 8, 15, 7], dtype=np.uint8)
    assert decode(raw, "int4", count=5).tolist() == nibs.view(ml_dtypes.int4).astype(np.int8).tolist()
    with pytest.raises(DtypeError):
        decode(raw, "int4", count=7)


def test_uint1_msb_first_and_int2():
    assert decode(bytes([0b10000001, 0b01000000]), "uint1", count=10).tolist() == [1, 0, 0, 0, 0, 0, 0, 1, 0, 1]
    assert decode(bytes([0b11100100]), "int2").tolist() == [0, 1, -2, -1]
    assert decode(bytes([0b11100100]), "uint2").tolist() == [0, 1, 2, 3]


def test_native_bool_complex():
    a = np.arange(-5, 5, dtype=np.int32)
    np.testing.assert_array_equal(decode(a.tobytes(), "int32"), a)
    f = np.linspace(-2, 2, 7).astype(np.float16)
    out = decode(memoryview(f.tobytes()), "float16")
    assert out.dtype == np.float16 and np.array_equal(out, f)
    assert decode(np.frombuffer(bytes([0, 1, 2, 255]), np.uint8), "bool").tolist() == [False, True, True, True]
    c = np.array([1 + 2j, -0.5 + 4j], dtype=np.complex64)
    halves = np.stack([c.real, c.imag], axis=1).astype(np.float16)
    got = decode(halves.tobytes(), "complex32")
    assert got.dtype == np.complex64 and np.array_equal(got, c)
    cc = np.array([1 + 1j, 3 - 2j], dtype=np.complex128)
    np.testing.assert_array_equal(decode(cc.tobytes(), "complex128"), cc)


def test_count_limits_and_errors():
    a = np.arange(6, dtype=np.float32)
    assert decode(a.tobytes() + b"\x00\x00\x00\x00", "float32", count=6).tolist() == a.tolist()
    with pytest.raises(DtypeError):
        decode(a.tobytes(), "float32", count=7)
    with pytest.raises(DtypeError):
        decode(b"\x00" * 5, "float32")
    for bad in ("string", "hifloat4", "undefined", "variant"):
        with pytest.raises(DtypeError):
            decode(b"\x00" * 8, bad)
