"""Dump file name variants (FORMATS.md §1.1, §1.6, §5.1, §5.6)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import shared
from dumpscope.core.formats.cann_names import parse_dump_name, read_mapping_csv, sanitize


def test_normal():
    n = parse_dump_name("Conv2D.Default_network-WithLossCell__backbone-AlexNet_conv3-Conv2d_Conv2D-op12.2.7.1612439563338020")
    assert (n.kind, n.op_type, n.task, n.stream, n.timestamp) == ("dump", "Conv2D", 2, 7, 1612439563338020)
    assert n.op_name == "Default_network-WithLossCell__backbone-AlexNet_conv3-Conv2d_Conv2D-op12"
    assert not n.swapped and not n.is_ffts and n.ext == ""


def test_path_is_reduced_to_basename():
    n = parse_dump_name("/dump/20240101/0/ge_default_1/1/0/MatMul.mm_1.5.6.1700000000000001")
    assert n.op_type == "MatMul" and n.op_name == "mm_1" and n.task == 5


def test_old_without_stream():
    n = parse_dump_name("Conv2D.Default_conv1.12.1612439563338020")
    assert (n.kind, n.task, n.stream, n.timestamp) == ("dump", 12, None, 1612439563338020)


def test_ffts_msaccucmp_example():
    n = parse_dump_name("Add.partition0_rank1_new_sub_graph1_sgt_graph_0_Add.0.3.1673383728093446.4.1.0.0")
    assert n.op_type == "Add" and n.op_name == "partition0_rank1_new_sub_graph1_sgt_graph_0_Add"
    assert (n.task, n.stream, n.timestamp) == (0, 3, 1673383728093446)
    assert (n.task_type, n.context, n.thread, n.device) == (4, 1, 0, 0) and n.is_ffts


def test_ffts_lxslice_and_doc_variant_without_stream():
    n = parse_dump_name("Conv2D.a_Conv2D_lxslice0.2.9.1670205071724946.4.487.0.0")
    assert n.op_name == "a_Conv2D_lxslice0" and n.context == 487
    m = parse_dump_name("Conv2D.a_Conv2D.2.1670205071724946.4.487.0.1")
    assert m.stream is None and m.timestamp == 1670205071724946 and m.device == 1


def test_opdebug():
    n = parse_dump_name("Opdebug.Node_OpDebug.3.5.1673383728093446")
    assert n.kind == "opdebug" and (n.task, n.stream) == (3, 5)
    f = parse_dump_name("Opdebug.Node_OpDebug.3.5.1673383728093446.4.1.0.0")
    assert f.kind == "opdebug" and f.context == 1
    j = parse_dump_name("Opdebug.Node_OpDebug.3.5.1673383728093446.output.0.json")
    assert j.kind == "opdebug" and j.io == "output" and j.slot == 0 and j.ext == ".json"


def test_stats_csv():
    n = parse_dump_name("Conv2D.conv1.1.2.1700000000000000.csv")
    assert (n.kind, n.op_type, n.op_name, n.task, n.stream) == ("stats", "Conv2D", "conv1", 1, 2)
    assert parse_dump_name("statistic.csv") is None
    assert parse_dump_name("mapping.csv") is None


def test_stats_real_sample_name():
    name = "FIXTURE_cann_per_op_stats.Conv2D.conv1.1.2.1700000000000000.csv"
    assert shared("real_samples", name).is_file()
    n = parse_dump_name(name.replace("FIXTURE_cann_per_op_stats.", ""))
    assert n.kind == "stats" and n.timestamp == 1700000000000000


def test_converted_npy_forms():
    n = parse_dump_name("Conv2D.Default_Conv2D-op12.2.7.161243956333802.input.0.32x256x13x13.npy")
    assert (n.kind, n.io, n.slot, n.shape) == ("converted_npy", "input", 0, (32, 256, 13, 13))
    assert n.stem == "Conv2D.Default_Conv2D-op12.2.7.161243956333802"
    p = parse_dump_name("Conv2D.Conv2D-op12.2.7.161243956333802.output.1.npy")
    assert (p.io, p.slot, p.shape, p.format) == ("output", 1, None, None)
    m = parse_dump_name("Conv2D.Conv2D-op12.2.7.161243956333802.output.3.NC1HWC0.npy")  # -t msnpy
    assert m.format == "NC1HWC0" and m.slot == 3
    ms = parse_dump_name("Add.Default_Add-op0.0.0.1734008383669918.input.0.DefaultFormat.float32.npy")
    assert (ms.op_type, ms.op_name, ms.format, ms.dtype) == ("Add", "Default_Add-op0", "DefaultFormat", "float32")
    c = parse_dump_name("Parameter.data-1.0.0.1734008383669918.output.0.DefaultFormat.npy")
    assert c.op_type == "Parameter" and c.op_name == "data-1"


def test_swapped_aclnn_names():
    n = parse_dump_name("Default_network-Net_Add-op1.Add.4.2.1734008383669918")
    assert n.swapped and n.op_type == "Add" and n.op_name == "Default_network-Net_Add-op1"
    normal = parse_dump_name("Add.Default_network-Net_Add-op1.4.2.1734008383669918")
    assert not normal.swapped and normal.op_type == "Add"
    both_types = parse_dump_name("MatMul.MatMul.1.2.1734008383669918")
    assert not both_types.swapped


def test_aliases():
    n = parse_dump_name("1234567890123456789")
    assert n.kind == "alias" and n.op_name == "1234567890123456789"
    a = parse_dump_name("98765432109876543210987654321012.input.0.npy")
    assert a.kind == "alias" and a.io == "input"


@pytest.mark.parametrize("name", ["", "README.md", "ge_proto_00001_Build.txt", "foo.bar",
                                  "add_1-aten.add.Tensor.INPUT.0.20251017071211190258.npy",
                                  "Conv2D.x.a.b.c", "Conv2D..1.2.3", "x.y.1.2.3.4", "acl_dump_0.json"])
def test_not_dump_names(name):
    assert parse_dump_name(name) is None


@settings(max_examples=100, deadline=None)
@given(op_type=st.from_regex(r"[A-Z][A-Za-z0-9]{0,12}", fullmatch=True),
       op_name=st.text(alphabet="abcXYZ_-/. \\0123", min_size=1, max_size=30),
       task=st.integers(0, 65535), stream=st.integers(0, 65535), ts=st.integers(10 ** 15, 10 ** 16 - 1))
def test_roundtrip_sanitized(op_type, op_name, task, stream, ts):
    name = f"{op_type}.{sanitize(op_name)}.{task}.{stream}.{ts}"
    n = parse_dump_name(name)
    assert n is not None and (n.task, n.stream, n.timestamp) == (task, stream, ts)
    if not n.swapped:
        assert n.op_type == op_type and n.op_name == sanitize(op_name)
    else:  # only when the name itself looks like an op type and the type does not — impossible here
        raise AssertionError("CamelCase op_type must never be read as swapped")


def test_sanitize():
    assert sanitize("Default/network-WithLossCell/_backbone-AlexNet/conv3-Conv2d/Conv2D-op12") == \
        "Default_network-WithLossCell__backbone-AlexNet_conv3-Conv2d_Conv2D-op12"
    assert sanitize(r"a.b\c d") == "a_b_c_d"


def test_read_mapping_csv(tmp_path):
    p = tmp_path / "mapping.csv"
    p.write_text("1234,Conv2D.very_long_name.1.2.1700000000000000\n\n"
                 "garbage-line\n5678,Add.x.1.2.1700000000000001.input.0.npy\n,empty\n", encoding="utf-8")
    problems: list[str] = []
    m = read_mapping_csv(str(p), problems)
    assert m == {"1234": "Conv2D.very_long_name.1.2.1700000000000000",
                 "5678": "Add.x.1.2.1700000000000001.input.0.npy"}
    assert len(problems) == 2 and problems[0].startswith(f"{p}:3:")
    assert read_mapping_csv(str(p)) == m
