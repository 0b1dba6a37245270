"""The NaN/Inf counting kernel of the overflow scan, checked against numpy on the decoded values."""

from __future__ import annotations

import numpy as np
import pytest

from dumpscope.core.tensors.nonfinite import Count, count_block, count_unit, may_hold_nonfinite
from synth.cann_writer import SynthTensor, bf16_bits, fp8_codes, write_dump

SPECIALS = np.array([1.0, np.nan, np.inf, -np.inf, -2.5, 0.0, -np.nan, np.inf, 3.0], np.float32)


def _expect(values: np.ndarray) -> Count:
    v = values.astype(np.float64)
    bad = ~np.isfinite(v)
    return Count(int(np.isnan(v).sum()), int(np.isposinf(v).sum()), int(np.isneginf(v).sum()),
                 int(np.argmax(bad)) if bad.any() else None)


@pytest.mark.parametrize("stored", ["float16", "float32", "float64"])
def test_native_floats_match_numpy(stored):
    vals = SPECIALS.astype(stored)
    block = vals.view(np.uint16) if stored == "float16" else vals
    assert count_block(block, stored) == _expect(vals)


def test_bfloat16_bits_match_numpy():
    bits = bf16_bits(SPECIALS)
    assert count_block(bits, "bfloat16") == _expect(SPECIALS)


def test_float8_bits_match_their_decoded_values():
    from dumpscope.core.formats.dtypes import decode

    for dtype, vals in (("float8_e5m2", SPECIALS), ("float8_e4m3fn", np.array([1, np.nan, 2, np.nan], np.float32))):
        codes = fp8_codes(vals, dtype)
        assert count_block(codes, dtype) == _expect(decode(codes, dtype, codes.size)), dtype


def test_clean_block_has_no_first_index():
    c = count_block(np.arange(10, dtype=np.float32), "float32")
    assert (c.bad, c.first_bad) == (0, None)


def test_integers_are_never_read():
    assert not may_hold_nonfinite("int32") and not may_hold_nonfinite("bool")
    assert may_hold_nonfinite("float16") and may_hold_nonfinite("bfloat16")


def _job(path, storage, entries):
    return (1, str(path), storage, [tuple(e) for e in entries])


def test_npy_file_counts_and_first_index(tmp_path):
    a = np.ones((3, 4), np.float16)
    a[1, 2] = np.inf
    a[2, 0] = np.nan
    np.save(tmp_path / "t.npy", a)
    entry = ("output", 0, "float16", [3, 4], "ND", [3, 4], "float16", 0, a.nbytes, 0, None)
    uid, res, err = count_unit(_job(tmp_path / "t.npy", "npy", [entry]))
    assert err is None and res == [("output", 0, 1, 1, 0, 6)]


def test_device_format_padding_is_not_counted(tmp_path):
    """NC1HWC0 pads C to C0: garbage NaN in the padding must not count, a logical NaN must."""
    from dumpscope.core.formats.cann_dump import read_header

    x = np.ones((1, 3, 2, 2), np.float16)
    x[0, 1, 1, 0] = -np.inf
    path = write_dump(tmp_path, "Relu", "net/Relu", 1, 1, 1000,
                      outputs=[SynthTensor(x, "float16", "NC1HWC0")])
    t = read_header(str(path)).outputs[0]
    raw = bytearray(path.read_bytes())
    payload = np.frombuffer(raw, np.uint16, count=t.size // 2, offset=t.offset).copy()
    assert payload.size > x.size  # padded to C0
    dev = payload.reshape(1, 1, 2, 2, -1)
    dev[..., 3:] = 0x7E00  # NaN in every padding lane
    raw[t.offset:t.offset + t.size] = dev.tobytes()
    path.write_bytes(bytes(raw))
    entry = ("output", 0, "float16", [1, 3, 2, 2], "NC1HWC0", list(t.shape), "float16", t.offset, t.size, 0, None)
    _uid, res, err = count_unit(_job(path, "cann", [entry]))
    assert err is None
    assert res == [("output", 0, 0, 0, 1, int(np.ravel_multi_index((0, 1, 1, 0), x.shape)))]


def test_unreadable_file_is_one_line_naming_it(tmp_path):
    p = tmp_path / "gone.npy"
    entry = ("output", 0, "float32", [2], "ND", [2], "float32", 0, 8, 0, None)
    _uid, res, err = count_unit(_job(p, "npy", [entry]))
    assert res == [] and "gone.npy" in err and "\n" not in err
