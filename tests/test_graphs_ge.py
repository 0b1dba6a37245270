"""GE graph readers (ge_proto text, atc JSON, ge_onnx) and the synthetic GE graph writer."""

from __future__ import annotations

import gc
import json
from dataclasses import asdict
from pathlib import Path

import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared
from dumpscope.core.graphs import (
    GraphParseError,
    detect_graph_kind,
    ge_ir_pb2,
    load_graph_file,
    parse_ge_json,
    parse_ge_onnx,
    parse_ge_text,
)
from dumpscope.core.graphs import ge_text
from dumpscope.core.graphs.pbtext import parse_text_tree
from synth.ge_graph_writer import build_model, ge_graph_text, write_ge_graph


OPS = [
    {"name": "data", "type": "Data", "inputs": [""], "id": 0,
     "outputs": [{"dtype": "float32", "shape": [1, 3, 4, 4], "layout": "NCHW", "origin_shape": [1, 3, 4, 4],
                  "origin_format": "NCHW"}]},
    {"name": "init", "type": "NoOp", "id": 1, "attrs": {"_no_task": True}},
    {"name": "conv1/Conv2D", "type": "Conv2D", "id": 2, "stream_id": 1,
     "inputs": ["data:0", "", "init:-1"],
     "attrs": {"_datadump_original_op_names": ["conv1/Conv2D", "conv1/BiasAdd"], "strides": [1, 1, 1, 1],
               "pad_mode": "SAME", "alpha": 0.5, "use_bias": False, "pads": [[0, 0], [1, 1]]},
     "input_descs": [{"dtype": "float16", "shape": [1, 1, 4, 4, 16], "layout": "NC1HWC0",
                      "origin_shape": [1, 3, 4, 4], "origin_format": "NCHW"}],
     "outputs": [{"dtype": "bfloat16", "shape": [1, 1, 4, 4, 16], "layout": "NC1HWC0", "origin_shape": [1, 8, 4, 4],
                  "origin_format": "NCHW", "attrs": {"_datadump_origin_name": "conv1/BiasAdd"}}]},
    {"name": "if_op", "type": "If", "id": 3, "inputs": ["conv1/Conv2D:0"], "subgraphs": ["then_0"]},
]
SUB = {"then_0": [{"name": "then_0/relu", "type": "Relu", "inputs": ["then_0/arg:0"]}]}


def _text() -> str:
    return ge_graph_text("ge_default_20240613143502_1", OPS, SUB)


# ---- writer ----------------------------------------------------------------------------------


def test_writer_output_is_strict_protobuf_text(tmp_path: Path) -> None:
    path = write_ge_graph(tmp_path, "ge_default_20240613143502_1", OPS, SUB, index=5, graph_id=1)
    assert Path(path).name == "ge_proto_00000005_graph_1_Build.txt"
    model = ge_ir_pb2.ModelDef()
    text_format.Parse(Path(path).read_text(), model)  # strict: no unknown fields allowed
    assert [g.name for g in model.graph] == ["ge_default_20240613143502_1", "then_0"]
    conv = model.graph[0].op[2]
    assert list(conv.input) == ["data:0", "", "init:-1"]
    names = conv.attr["_datadump_original_op_names"].list
    assert names.val_type == ge_ir_pb2.AttrDef.ListValue.VT_LIST_STRING
    assert [s.decode() for s in names.s] == ["conv1/Conv2D", "conv1/BiasAdd"]
    assert conv.output_desc[0].dtype == ge_ir_pb2.DT_BF16
    assert model.graph[0].op[1].attr["_no_task"].b is True


def test_writer_rejects_unknown_dtype() -> None:
    with pytest.raises(ValueError):
        build_model("g", [{"name": "a", "type": "X", "outputs": [{"dtype": "float99", "shape": []}]}])


# ---- ge_proto text ---------------------------------------------------------------------------


def test_parse_ge_text_graphs_edges_attrs() -> None:
    graphs = parse_ge_text(_text())
    assert [g.name for g in graphs] == ["ge_default_20240613143502_1", "then_0"]
    root = graphs[0]
    assert root.kind == "ge_text" and root.subgraphs == ["then_0"]
    conv = root.nodes["conv1/Conv2D"]
    assert conv.type == "Conv2D" and conv.graph == root.name and conv.node_id == "2"
    assert conv.inputs == ["data:0", ""]  # "" keeps the unconnected slot
    assert conv.control == ["init"]
    assert conv.attrs["_datadump_original_op_names"] == ["conv1/Conv2D", "conv1/BiasAdd"]
    assert conv.attrs["strides"] == [1, 1, 1, 1]
    assert conv.attrs["pad_mode"] == "SAME"
    assert conv.attrs["alpha"] == pytest.approx(0.5)
    assert conv.attrs["use_bias"] is False
    assert conv.attrs["pads"] == [[0, 0], [1, 1]]
    assert conv.attrs["stream_id"] == 1
    assert conv.no_task is False and root.nodes["init"].no_task is True
    assert root.nodes["if_op"].attrs["subgraph_names"] == ["then_0"]
    assert root.consumers()["data"] == ["conv1/Conv2D"]
    assert graphs[1].nodes["then_0/relu"].graph == "then_0"


def test_parse_ge_text_descs() -> None:
    conv = parse_ge_text(_text())[0].nodes["conv1/Conv2D"]
    assert conv.input_descs == [{
        "dtype": "float16", "format": "NC1HWC0", "shape": [1, 3, 4, 4], "origin_shape": [1, 3, 4, 4],
        "device_shape": [1, 1, 4, 4, 16], "origin_format": "NCHW",
    }]
    out = conv.output_descs[0]
    assert out["dtype"] == "bfloat16" and out["shape"] == [1, 8, 4, 4]
    assert out["_datadump_origin_name"] == "conv1/BiasAdd"


def test_tree_reader_agrees_with_text_format() -> None:
    """The fast reader sees the same ops/inputs/attr keys as google.protobuf.text_format."""
    text = _text()
    model = ge_ir_pb2.ModelDef()
    text_format.Parse(text, model)
    graphs = parse_ge_text(text)
    for gdef, graph in zip(model.graph, graphs):
        assert [op.name for op in gdef.op] == list(graph.nodes)
        for op in gdef.op:
            node = graph.nodes[op.name]
            assert [i for i in op.input if not i.endswith(":-1")] == node.inputs
            assert set(op.attr) <= set(node.attrs)


def test_bare_graph_fragment_and_unknown_fields() -> None:
    text = """graph {
  name: "g1"
  some_new_field: 3
  op {
    name: "a"
    type: "Const"
    attr_groups { hidden { x: 1 } }
    output_desc { dtype: DT_NEW_TYPE_42 shape { dim: 2 dim: 3 } layout: "ND" }
  }
  op { name: "b" type: "Add" input: "a:0" input: 'a:0' }
}
"""
    warnings: list[str] = []
    graphs = parse_ge_text(text, warnings=warnings)
    assert warnings == []
    nodes = graphs[0].nodes
    assert nodes["a"].output_descs[0]["dtype"] == "new_type_42"
    assert nodes["a"].output_descs[0]["shape"] == [2, 3]
    assert nodes["b"].inputs == ["a:0", "a:0"]
    bare = parse_ge_text('name: "g2"\nop {\n  name: "x"\n  type: "Data"\n}\n')
    assert bare[0].name == "g2" and list(bare[0].nodes) == ["x"]


def test_escaped_strings() -> None:
    text = 'graph {\n  name: "g"\n  op {\n    name: "a\\"q\\" \\303\\251"\n    type: "T"\n  }\n}\n'
    assert list(parse_ge_text(text)[0].nodes) == ['a"q" é']


def test_truncated_text_gives_partial_graph_with_warning() -> None:
    text = _text()
    cut = text.index('name: "if_op"')
    warnings: list[str] = []
    graphs = parse_ge_text(text[:cut], warnings=warnings)
    assert "conv1/Conv2D" in graphs[0].nodes
    assert any("truncated" in w for w in warnings)


@pytest.mark.parametrize("text", ["", "just some words here\nand more words", "\x00\x00binary", "graph {\n}\n", "{{{{"])
def test_broken_ge_text_raises(text: str) -> None:
    with pytest.raises(GraphParseError) as info:
        parse_ge_text(text)
    assert "\n" not in str(info.value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutated_ge_text(data: st.DataObject) -> None:
    base = _text()
    start = data.draw(st.integers(0, len(base)))
    end = data.draw(st.integers(start, min(len(base), start + 120)))
    junk = data.draw(st.text(alphabet=st.sampled_from(list('{}<>[]:,;"\'\\# \nabc_019-.')), max_size=40))
    try:
        graphs = parse_ge_text(base[:start] + junk + base[end:], warnings=[])
    except GraphParseError:
        return
    for graph in graphs:
        graph.consumers()


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_random_ge_text(text: str) -> None:
    for parser in (parse_ge_text, parse_ge_onnx, parse_ge_json):
        try:
            parser(text)
        except GraphParseError:
            pass


# ---- fast path (canonical text) vs the generic tree reader ---------------------------------------


def _rich_text() -> str:
    """Canonical text (as GE / text_format print it) with every attr shape and a few oddities."""
    model = build_model("g_\u00e9", OPS, SUB)
    lv = ge_ir_pb2.AttrDef.ListValue
    op = model.graph[0].op[2]
    op.attr["func_attr"].func.name = "f"
    op.attr["func_attr"].func.attr["x"].i = 1
    td = op.attr["td_attr"].td
    td.dtype = ge_ir_pb2.DT_FLOAT16
    td.shape.dim.extend([2, 3])
    td.layout = "ND"
    op.attr["dt_attr"].dt = ge_ir_pb2.DT_FLOAT16
    op.attr["flist"].list.f.extend([0.5, 1.5])
    op.attr["flist"].list.val_type = lv.VT_LIST_FLOAT
    op.attr["blist"].list.b.extend([True, False])
    op.attr["blist"].list.val_type = lv.VT_LIST_BOOL
    op.attr["empty"].list.val_type = lv.VT_LIST_INT
    op.attr["esc"].s = 'a"b\\c \u00e9'.encode()
    op.attr["neg"].i = -7
    op.attr["tiny"].f = 1e-30
    op.attr["nothing"].SetInParent()
    out = op.output_desc[0]
    out.size, out.device_type, out.real_dim_cnt = 64, "NPU", 4
    out.attr["_datadump_origin_output_index"].i = 2
    out.attr["tdlist"].list.td.add().dtype = ge_ir_pb2.DT_INT8
    op.input_desc[0].name = "x"
    model.graph[0].op[1].attr['k"q'].i = 1  # an escaped key: this op goes to the generic reader
    model.graph[0].op[0].name = "data/\u00e9"  # printed as octal escapes
    model.graph[0].attr["graph_level"].s = b"x"
    model.attr["model_level"].i = 3
    return text_format.MessageToString(model)


def _plain(parse, text: str) -> str:
    """Everything a parse yields (graphs, nodes, warnings) as one comparable string (nan-safe)."""
    warnings: list[str] = []
    try:
        graphs = parse(text, warnings)
    except GraphParseError:
        return "GraphParseError"
    return repr(([(g.name, g.kind, g.subgraphs, [asdict(n) for n in g.nodes.values()]) for g in graphs], warnings))


def _generic_parse(text: str, warnings: list[str]) -> list:
    root, label = ge_text._text_tree((text, "<text>"), warnings)
    return ge_text.graphs_from_tree(root, label, "ge_text", warnings)


def _public_parse(text: str, warnings: list[str]) -> list:
    return parse_ge_text(text, warnings=warnings)


def test_fast_path_matches_generic_reader() -> None:
    text = _rich_text()
    reader = ge_text._FastReader(text, "<text>")
    reader.graphs()  # the fast path takes this text (one op handed to the generic reader)
    assert reader.generic_ops == 1
    assert _plain(_public_parse, text) == _plain(_generic_parse, text)
    conv = parse_ge_text(text)[0].nodes["conv1/Conv2D"]
    assert conv.attrs["esc"] == 'a"b\\c \u00e9' and conv.attrs["neg"] == -7 and conv.attrs["empty"] == []
    assert conv.attrs["func_attr"] == {"name": "f", "attr": {"x": 1}}
    assert conv.attrs["td_attr"]["device_shape"] == [2, 3] and conv.attrs["nothing"] is None
    assert conv.input_descs[0]["name"] == "x" and conv.output_descs[0]["_datadump_origin_output_index"] == 2
    assert "data/\u00e9" in parse_ge_text(text)[0].nodes
    assert gc.isenabled()


def test_fast_path_crlf_and_missing_final_newline() -> None:
    text = _text()
    assert _plain(_public_parse, text.replace("\n", "\r\n")) == _plain(_generic_parse, text)
    assert _plain(_public_parse, text.rstrip("\n")) == _plain(_generic_parse, text)


@pytest.mark.parametrize("field", ["t", "td", "func", "g", "list_list_int", "list_list_float", "list"])
def test_a_scalar_where_a_message_belongs_is_read_as_an_empty_message(field: str) -> None:
    """Damaged text such as ``value { t: 5 }`` (found by the fuzz test below: an ``int`` reached
    ``.get``): both readers agree and neither raises."""
    base = _rich_text()
    assert 'value {\n        dt: 2\n      }' in base
    text = base.replace('value {\n        dt: 2\n      }', f'value {{\n        {field}: 5\n      }}', 1)
    assert _plain(_public_parse, text) == _plain(_generic_parse, text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_fast_path_agrees_with_generic_reader(data: st.DataObject) -> None:
    """Whatever the damage, the fast path either reads the text exactly as the generic reader does
    or hands it over to it: same graphs, nodes, warnings and errors."""
    base = _rich_text()
    start = data.draw(st.integers(0, len(base)))
    end = data.draw(st.integers(start, min(len(base), start + 120)))
    junk = data.draw(st.text(alphabet=st.sampled_from(list('{}<>[]:,;"\'\\# \nabc_019-.')), max_size=40))
    text = base[:start] + junk + base[end:]
    assert _plain(_public_parse, text) == _plain(_generic_parse, text)


# ---- JSON / ONNX / dispatch -------------------------------------------------------------------


def test_parse_ge_json_atc_shape_and_object_maps(tmp_path: Path) -> None:
    """atc JSON writes maps as [{key, value}] lists; JSON-object maps and int64-as-string are accepted too."""
    doc = {
        "name": "m",
        "graph": [{
            "name": "g",
            "op": [
                {"name": "data", "type": "Data", "input": [""]},
                {"name": "conv", "type": "Conv2D", "id": "7", "input": ["data:0", "init:-1"],
                 "attr": [{"key": "_datadump_original_op_names",
                           "value": {"list": {"s": ["a/Conv2D", "a/BiasAdd"], "val_type": "VT_LIST_STRING"}}},
                          {"key": "_no_task", "value": {"b": True}}],
                 "output_desc": [{"dtype": "DT_FLOAT16", "layout": "NC1HWC0", "shape": {"dim": ["1", "1", "4", "4", "16"]},
                                  "attr": {"origin_shape": {"list": {"i": ["1", "3", "4", "4"]}},
                                           "origin_format": {"s": "NCHW"}}}]},
            ],
        }],
    }
    path = tmp_path / "ge_proto_00000001_graph_1_Build.json"
    path.write_text(json.dumps(doc))
    graph = load_graph_file(path)[0]
    assert graph.kind == "ge_json"
    conv = graph.nodes["conv"]
    assert conv.inputs == ["data:0"] and conv.control == ["init"] and conv.node_id == "7"
    assert conv.attrs["_datadump_original_op_names"] == ["a/Conv2D", "a/BiasAdd"]
    assert conv.no_task is True
    assert conv.output_descs[0]["shape"] == [1, 3, 4, 4]
    assert conv.output_descs[0]["device_shape"] == [1, 1, 4, 4, 16]
    assert conv.output_descs[0]["origin_format"] == "NCHW"
    with pytest.raises(GraphParseError):
        parse_ge_json("[1, 2]")
    with pytest.raises(GraphParseError):
        parse_ge_json("{not json")


def test_parse_ge_onnx_text() -> None:
    text = """ir_version: 3
graph {
  name: "ge_default_1"
  node {
    input: "data:0"
    input: "w"
    input: "init:-1"
    output: "conv:0"
    name: "conv"
    op_type: "ge:Conv2D"
    attribute { name: "strides" ints: 1 ints: 1 type: INTS }
    attribute { name: "pad" s: "SAME" type: STRING }
  }
}
"""
    graph = parse_ge_onnx(text)[0]
    conv = graph.nodes["conv"]
    assert conv.type == "ge:Conv2D" and conv.inputs == ["data:0", "w:0"] and conv.control == ["init"]
    assert conv.attrs == {"strides": [1, 1], "pad": "SAME"}


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("dump/ge_proto_00000179_graph_1_Build.txt", "ge_text"),
        ("ge_proto_00000003_aclop_graph_0_PreRunAfterBuild.txt", "ge_text"),
        ("ge_proto_00005_Build.txt", "ge_text"),
        ("ge_onnx_00000179_graph_1_Build.pbtxt", "ge_onnx"),
        ("rank_0/graphs/ms_output_trace_code_graph_0.ir", "ms_ir"),
        ("rank_0/graphs/ms_output_trace_code_graph_0.pb", "ms_pb"),
        ("rank_0/graphs/other.pb", "ms_pb"),
        ("saved/18_execute_0121.ir", "ms_ir"),
        ("model/weights.pb", None),
        ("ge_readable_00000001_graph_1_Build.txt", None),
        ("notes.txt", None),
    ],
)
def test_detect_graph_kind(name: str, kind: str | None) -> None:
    assert detect_graph_kind(name) == kind


def test_load_graph_file_errors(tmp_path: Path) -> None:
    pb = tmp_path / "graphs" / "ms_output_trace_code_graph_0.pb"
    pb.parent.mkdir()
    pb.write_bytes(b"\x0a\x00")
    with pytest.raises(GraphParseError, match="not a MindSpore graph"):
        load_graph_file(pb)
    pb.write_bytes(b"\x22\xff\xff\x03garbage")  # a graph field longer than the file
    with pytest.raises(GraphParseError, match="not a MindSpore graph"):
        load_graph_file(pb)
    with pytest.raises(GraphParseError, match="not a known graph"):
        load_graph_file(tmp_path / "x.bin")


def test_tree_reader_one_line_messages_and_lists() -> None:
    root, reader = parse_text_tree('a { b: 1 c: [2, 3] d < e: "x" > }\nf: 1.5e3\ng: -inf\n', "<t>")
    assert reader.warnings == []
    assert root["a"][0]["c"] == [2, 3] and root["a"][0]["d"][0]["e"] == ["x"]
    assert root["f"] == [1500.0] and root["g"] == [float("-inf")]


# ---- real samples (skipped in a user's clone) -----------------------------------------------------


def test_real_build_excerpt() -> None:
    path = shared("real_samples", "ge_proto_Build_excerpt_from_cann_doc.txt")
    graphs = parse_ge_text(path)
    assert graphs[0].name == "ge_default_20240613143502_1"
    node = graphs[0].nodes["atomic_addr_clean0_71"]
    assert node.type == "AtomicAddrClean" and node.attrs == {"_fe_imply_type": 6}


def test_real_atc_json() -> None:
    path = shared("real_samples", "atc_om_model_sub_model.json")
    raw = json.loads(path.read_text())
    graph = parse_ge_json(path)[0]
    assert graph.name == "sub_model_NPU_0"
    assert len(graph.nodes) == len(raw["graph"][0]["op"]) == 19
    cast = graph.nodes["trans_Cast_2"]
    assert cast.type == "Cast" and cast.inputs == ["scores_all:0"]
    assert cast.input_descs[0]["dtype"] == "float32" and cast.input_descs[0]["shape"] == [1000, 80]
    assert cast.output_descs[0]["dtype"] == "float16"
    assert cast.output_descs[0]["_datadump_origin_name"] == "scores_all"
    assert cast.attrs["_datadump_original_op_names"] == []
    assert cast.attrs["OUTPUT_IS_VAR"] == [False]
    assert "trans_Cast_2" in graph.consumers()["scores_all"]
