"""Unit tests: MindSpore / msaccucmp npy names, old .bin names, folder interpretation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from dumpscope.core.layouts.mindspore import parse_npy_name, parse_old_bin_name
from dumpscope.core.layouts.paths import CONSTANTS_STEP, place_of


def test_210_name_with_capitalised_dtype():
    p = parse_npy_name("Conv2D.Default_network-WithLossCell__backbone-LeNet_conv1-Conv2d_Conv2D-op0.0.0."
                       "1795304216497474.input.0.DefaultFormat.Float32.npy")
    assert (p.op_type, p.task, p.stream, p.timestamp) == ("Conv2D", 0, 0, 1795304216497474)
    assert p.op_name == "Default_network-WithLossCell__backbone-LeNet_conv1-Conv2d_Conv2D-op0"
    assert (p.io, p.slot, p.format, p.dtype, p.kind) == ("input", 0, "DefaultFormat", "Float32", "mindspore")


def test_name_without_dtype_field_and_short_op_name():
    p = parse_npy_name("Conv2D.Conv2D-op12.2.7.161243956333802.output.0.NC1HWC0.npy")
    assert (p.op_name, p.io, p.slot, p.format, p.dtype) == ("Conv2D-op12", "output", 0, "NC1HWC0", "")


def test_constants_and_msprobe_upper_case_names():
    p = parse_npy_name("Parameter.data-1.0.0.1734008383669918.output.0.DefaultFormat.float32.npy")
    assert (p.op_type, p.op_name, p.dtype) == ("Parameter", "data-1", "float32")
    p = parse_npy_name("MatMul.Default_MatMul-op0.3.4.1734008383669918.output.0.ND.BF16.npy")
    assert (p.task, p.stream, p.format, p.dtype) == (3, 4, "ND", "BF16")


def test_msaccucmp_converted_names():
    p = parse_npy_name("Conv2D.Default_network_Conv2D-op12.2.7.161243956333802.input.0.32x256x13x13.npy")
    assert p.kind == "converted" and p.slot == 0 and p.io == "input"
    p = parse_npy_name("Add.Default_Add-op1.3.1.1673383728093446.output.1.npy")
    assert p.kind == "converted" and p.slot == 1 and p.op_name == "Default_Add-op1"


def test_not_dump_names():
    for name in ("weights.npy", "a.b.npy", "statistic.csv", "Conv2D.x.1.2.3.input.npy"):
        assert parse_npy_name(name) is None


def test_old_bin_names():
    assert parse_old_bin_name(
        "Default--network-WithLossCell--_backbone-AlexNet--conv3-Conv2d--Conv2D-op308_output_0_shape_4_4_4_4_"
        "Float32_NCHW.bin") == ("Default/network-WithLossCell/_backbone-AlexNet/conv3-Conv2d/Conv2D-op308",
                                "Conv2D", "output", 0, (4, 4, 4, 4), "Float32", "NCHW")
    op_name, op_type, io, slot, shape, dtype, fmt = parse_old_bin_name(
        "conv2.bias_output_0_shape_128_Float32_DefaultFormat.bin")
    assert (op_name, op_type, shape, fmt) == ("conv2.bias", "Parameter", (128,), "DefaultFormat")
    assert parse_old_bin_name("Conv2D-op308_output_0_shape_4_4_4_4_kNumberTypeFloat32_FRACTAL_Z.bin")[5:] == (
        "kNumberTypeFloat32", "FRACTAL_Z")


@pytest.mark.parametrize("parts,expected", [
    (("rank_3", "LeNet", "0", "7"), (3, "0", 7)),
    (("out", "rank_0", "LeNet", "1", "constants"), (0, "1", CONSTANTS_STEP)),
    (("dump", "20240613143502", "2", "ge_default_1", "1", "5"), (2, "ge_default_1", 5)),
    (("worldsize2_global_rank1", "20241121457380", "0", "graph_1", "1", "0"), (1, "graph_1", 0)),
    (("net", "device_4", "iteration_9"), (4, "net", 9)),
    (("0", "alexnet_graph_2", "2", "11"), (0, "2", 11)),
    (("5", "step_3"), (0, "", 3)),
])
def test_place_of(parts, expected):
    p = place_of(parts)
    assert (p.rank, p.graph, p.step) == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcXYZ._-0123456789", max_size=80))
def test_parsers_never_raise_on_arbitrary_names(name):
    parse_npy_name(name + ".npy")
    parse_old_bin_name(name + ".bin")
    place_of(tuple(name.split(".")))
