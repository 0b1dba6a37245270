"""Device layout round trips: random logical -> synth forward transform -> to_logical == original."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpscope.core.formats.device_format import (DeviceFormatError, canonical_format, format_name, logical_shape,
                                          to_logical)
from synth import device_layout as dl

RNG = np.random.default_rng(1234)
DTYPES_C0 = [(np.float16, 16), (np.float32, 16), (np.float32, 8), (np.int8, 32)]


def _rand(shape, dtype):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-100, 100, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype) + 1.0  # avoid zeros so padding mistakes show


def _roundtrip(a, fmt, c0, target=None, source=None, groups=1):
    dev = dl.to_device(a, fmt, c0=c0, source=source, groups=groups)
    back = to_logical(dev.reshape(-1), fmt, dev.shape, a.shape, sub_format=groups, target=target)
    return dev, back


@pytest.mark.parametrize("dtype,c0", DTYPES_C0)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 5, 3, 4), (1, 16, 2, 2), (3, 33, 1, 5), (2, 40, 3, 3)])
def test_nc1hwc0(shape, dtype, c0):
    a = _rand(shape, dtype)
    dev, back = _roundtrip(a, "NC1HWC0", c0)
    assert dev.shape == (shape[0], -(-shape[1] // c0), shape[2], shape[3], c0)
    assert back.dtype == a.dtype and np.array_equal(back, a)


def test_nc1hwc0_element_formula():
    a = _rand((2, 20, 3, 4), np.float32)
    dev = dl.to_device(a, "NC1HWC0", c0=16)
    assert dev[1, 1, 2, 3, 3] == a[1, 19, 2, 3]
    assert dev[1, 1, 2, 3, 4] == 0  # padding


@pytest.mark.parametrize("target", ["NCHW", "NHWC", "HWCN"])
def test_nc1hwc0_targets(target):
    nchw = _rand((2, 7, 3, 5), np.float16)
    perm = ["NCHW".index(ch) for ch in target]
    logical = np.ascontiguousarray(nchw.transpose(perm))
    dev = dl.to_device(logical, "NC1HWC0", c0=16, source=target)
    back = to_logical(dev, "NC1HWC0", dev.shape, logical.shape, target=target)
    assert np.array_equal(back, logical)


def test_nc1hwc0_c04_and_short_original():
    a = _rand((2, 3, 4, 4), np.float16)
    dev = dl.to_device(a, "NC1HWC0_C04")
    assert dev.shape[-1] == 4
    assert np.array_equal(to_logical(dev, "NC1HWC0_C04", dev.shape, a.shape), a)
    bias = _rand((20,), np.float32)
    dev = dl.to_device(bias, "NC1HWC0", c0=16)
    assert dev.shape == (1, 2, 1, 1, 16)
    assert np.array_equal(to_logical(dev, "NC1HWC0", dev.shape, (20,)), bias)


@pytest.mark.parametrize("dtype,c0", DTYPES_C0)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (3, 17, 2, 2), (16, 16, 3, 3), (33, 5, 1, 1), (20, 40, 2, 3)])
def test_fractal_z(shape, dtype, c0):
    a = _rand(shape, dtype)
    dev, back = _roundtrip(a, "FRACTAL_Z", c0)
    n, c, h, w = shape
    assert dev.shape == (-(-c // c0) * h * w, -(-n // 16), 16, c0)
    assert np.array_equal(back, a)


def test_fractal_z_hwcn_target():
    nchw = _rand((5, 6, 3, 2), np.float16)
    hwcn = np.ascontiguousarray(nchw.transpose(2, 3, 1, 0))
    dev = dl.to_device(hwcn, "FRACTAL_Z", c0=16, source="HWCN")
    assert np.array_equal(to_logical(dev, "FRACTAL_Z", dev.shape, hwcn.shape, target="HWCN"), hwcn)
    assert np.array_equal(to_logical(dev, "FRACTAL_Z", dev.shape, nchw.shape), nchw)


@pytest.mark.parametrize("groups,n,c", [(2, 4, 3), (4, 8, 2), (3, 48, 5), (2, 32, 16), (8, 8, 1)])
def test_grouped_fractal_z(groups, n, c):
    a = _rand((n, c, 3, 2), np.float16)
    dev, back = _roundtrip(a, "FRACTAL_Z", 16, groups=groups)
    assert np.array_equal(back, a)


def test_grouped_with_one_group_equals_plain():
    a = _rand((20, 7, 2, 2), np.float16)
    plain = dl.to_device(a, "FRACTAL_Z", c0=16)
    grouped = dl.fractal_z_grouped(a, 16, 1)
    assert np.array_equal(plain, grouped)


@pytest.mark.parametrize("dtype,c0", DTYPES_C0)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), (2, 3, 4, 5, 6), (1, 33, 2, 1, 3)])
def test_ndc1hwc0(shape, dtype, c0):
    a = _rand(shape, dtype)
    dev, back = _roundtrip(a, "NDC1HWC0", c0)
    assert dev.shape == (shape[0], shape[2], -(-shape[1] // c0), shape[3], shape[4], c0)
    assert np.array_equal(back, a)


@pytest.mark.parametrize("dtype,c0", DTYPES_C0)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), (18, 5, 2, 3, 2), (16, 32, 1, 2, 2), (3, 40, 2, 1, 1)])
def test_fractal_z_3d(shape, dtype, c0):
    a = _rand(shape, dtype)
    dev, back = _roundtrip(a, "FRACTAL_Z_3D", c0)
    n, c, d, h, w = shape
    assert dev.shape == (d * -(-c // c0) * h * w, -(-n // 16), 16, c0)
    assert np.array_equal(back, a)


@pytest.mark.parametrize("target", ["NDHWC", "DHWCN"])
def test_5d_targets(target):
    ncdhw = _rand((3, 5, 2, 3, 2), np.float16)
    logical = np.ascontiguousarray(ncdhw.transpose(["NCDHW".index(ch) for ch in target]))
    for fmt in ("NDC1HWC0", "FRACTAL_Z_3D"):
        dev = dl.to_device(logical, fmt, c0=16, source=target)
        assert np.array_equal(to_logical(dev, fmt, dev.shape, logical.shape, target=target), logical)


@pytest.mark.parametrize("dtype,c0", DTYPES_C0)
@pytest.mark.parametrize("shape", [(7,), (16,), (1, 1), (20, 33), (2, 3, 17, 5), (4, 16, 32)])
def test_fractal_nz(shape, dtype, c0):
    a = _rand(shape, dtype)
    dev, back = _roundtrip(a, "FRACTAL_NZ", c0)
    h, w = (1, shape[0]) if len(shape) == 1 else shape[-2:]
    assert dev.shape == tuple(shape[:-2]) + (-(-w // c0), -(-h // 16), 16, c0)
    assert np.array_equal(back, a)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (3, 20, 2, 2), (5, 16, 1, 3)])
def test_c1hwncoc0(shape):
    a = _rand(shape, np.float16)
    dev, back = _roundtrip(a, "C1HWNCoC0", 16)
    assert dev.shape == (-(-shape[1] // 16), shape[2], shape[3], shape[0], 16, 16)
    assert np.array_equal(back, a)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 20), c=st.integers(1, 40), h=st.integers(1, 4), w=st.integers(1, 4),
       fmt=st.sampled_from(["NC1HWC0", "FRACTAL_Z", "C1HWNCoC0"]), c0=st.sampled_from([4, 8, 16, 32]))
def test_property_4d(n, c, h, w, fmt, c0):
    a = _rand((n, c, h, w), np.float32)
    _, back = _roundtrip(a, fmt, c0)
    assert np.array_equal(back, a)


def test_plain_and_unknown():
    a = np.arange(24, dtype=np.float32)
    assert np.array_equal(to_logical(a, "NHWC", (2, 3, 4), (2, 3, 4)), a.reshape(2, 3, 4))
    assert to_logical(a, "ND", (24,), ()).shape == (24,)
    assert to_logical(a, "DefaultFormat", (2, 12), (4, 6)).shape == (4, 6)
    assert to_logical(a, "UNKNOWN(77)", (24,), (6, 4)).shape == (6, 4)
    assert to_logical(np.array([3.0], np.float32), "ND", (), ()).shape == ()
    with pytest.raises(DeviceFormatError):
        to_logical(a, "UNKNOWN(77)", (24,), (5, 4))
    with pytest.raises(DeviceFormatError):
        to_logical(a, "NCHW", (24,), (5, 4))
    with pytest.raises(DeviceFormatError):
        to_logical(a[:10], "ND", (24,), ())


def test_errors_are_clear():
    dev = dl.to_device(_rand((3, 17, 2, 2), np.float16), "FRACTAL_Z", c0=16)
    with pytest.raises(DeviceFormatError, match="original_shape"):
        to_logical(dev, "FRACTAL_Z", dev.shape, ())
    with pytest.raises(DeviceFormatError, match="does not fit"):
        to_logical(dev, "FRACTAL_Z", dev.shape, (3, 17, 3, 3))
    with pytest.raises(DeviceFormatError, match="target"):
        to_logical(dev, "FRACTAL_Z", dev.shape, (3, 17, 2, 2), target="NCDHW")


def test_names_and_logical_shape():
    assert format_name(29) == "FRACTAL_NZ" and format_name(25) == "C1HWNCoC0" and format_name(33) == "FRACTAL_Z_3D"
    assert format_name(3) == "NC1HWC0" and format_name(2) == "ND" and format_name(30) == "NCDHW"
    assert format_name(52) == "FRACTAL_NZ_C0_2" and format_name(99) == "UNKNOWN(99)"
    assert canonical_format("FORMAT_c1hwncoc0") == "C1HWNCoC0"
    assert canonical_format("DefaultFormat") == "DefaultFormat"
    assert canonical_format("FracZ") == "FRACTAL_Z" and canonical_format("FracNZ") == "FRACTAL_NZ"
    assert logical_shape("NC1HWC0", (2, 2, 3, 3, 16), ()) == (2, 32, 3, 3)
    assert logical_shape("NC1HWC0", (2, 2, 3, 3, 16), (), target="NHWC") == (2, 3, 3, 32)
    assert logical_shape("FRACTAL_NZ", (4, 2, 3, 16, 16), ()) == (4, 48, 32)
    assert logical_shape("FRACTAL_Z", (8, 1, 16, 16), (3, 17, 2, 2)) == (3, 17, 2, 2)


def test_fractal_nz_c0_variants_and_no_original():
    a = _rand((5, 20), np.float32)
    dev = dl.to_device(a, "FRACTAL_NZ", c0=8)
    assert np.array_equal(to_logical(dev, "FRACTAL_NZ_C0_8", dev.shape, a.shape), a)
    full = to_logical(dev, "FRACTAL_NZ", dev.shape, ())
    assert full.shape == (16, 24) and np.array_equal(full[:5, :20], a) and not full[5:].any()
