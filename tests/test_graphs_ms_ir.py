"""MindSpore .ir parser: generated fixtures for every syntax variant, the real files when present, fuzzing."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import shared
from dumpscope.core.graphs import GraphParseError, detect_graph_kind, load_graph_file, parse_ir, sanitize_name


# r2.x style, kernel-selected graph: params block with device types, three type lines,
# "# Fullname with scope", shared-line suffix, TupleGetItem, a value call, two subgraphs.
IR_V2 = """# IR entry: @kernel_graph0
# Total subgraphs: 2

# Total params: 2
# Params:
%para1_x: <Tensor[Float32], (8, 1, 32, 32)> : [8, 1, 32, 32]  :  <Float32xDefaultFormat[const vector]{8, 1, 32, 32}>  :  IsWeight: false
%para2_conv.weight: <Ref[Tensor[Float16]], (6, 1, 5, 5), ref_key=conv.weight, is_parameter>  :  has_default  :  <UnknownxFracZ[const vector]{25, 1, 16, 16}>  :  IsWeight: true

subgraph attr:
subgraph instance: kernel_graph0 : 0x1
subgraph @kernel_graph0() {
  %0(equiv_output) = PrimFunc_Conv2D(%para1_x, %para2_conv.weight) {instance name: conv2d} primitive_attrs: {kernel_size: (5, 5), pad_mode: "valid", input_names: [x, w]} cnode_attrs: {checkpoint: Bool(1)}
      : (<Tensor[Float32], (8, 1, 32, 32)>, <Tensor[Float16], (6, 1, 5, 5)>) -> (<Tensor[Float32], (8, 6, 28, 28)>)
      : (<Float16xNC1HWC0[const vector]{8, 1, 32, 32, 16}>, <Float16xFracZ[const vector]{25, 1, 16, 16}>) -> (<Float32xNC1HWC0[const vector]{8, 1, 28, 28, 16}>)
      : (Tensor, Tensor) -> (Tensor)
      # Fullname with scope: (Default/net/conv-Conv2d/Conv2D-op0)
      # In file /work/train.py:30~35, 4~20/    def construct(self, x):/
      # In file /work/net.py:17, 12~30/        x = self.conv(x)/<~~This line of code can be shared by multiple nodes, and may be duplicated./
  %1(CNode_5) = BatchNorm(%0, Bool(1)) primitive_attrs: {epsilon: F32(1e-05)}
      : (<Tensor[Float32], (8, 6, 28, 28)>, <Bool, NoShape>) -> (<Tuple[Tensor[Float32]*2], TupleShape((8, 6, 28, 28), (6))>)
      # Fullname with scope: (Default/net/bn-BatchNorm/BatchNorm-op3)
  %2(CNode_6) = TupleGetItem(%1, I64(1))
      : (<Tuple[Tensor[Float32]*2], TupleShape((8, 6, 28, 28), (6))>, <Int64, NoShape>) -> (<Tensor[Float32], (6)>)
      # Fullname with scope: (Default/net/bn-BatchNorm/TupleGetItem-op4)
  %3(CNode_7) = ReLU(%2)
      : (<Tensor[Float32], (6)>) -> (<Tensor[BFloat16], (6)>)
      # Fullname with scope: (Default/net/ReLU-op1)
      # In file /work/net.py:18, 8~20/        y = self.relu(x)/
  %4(CNode_8) = Switch(Bool(1), @then_graph, @else_graph)
      : (<Bool, NoShape>, <Func, NoShape>, <Func, NoShape>) -> (<Func, NoShape>)
      # Fullname with scope: (Default/Switch-op0)
  %5(CNode_9) = %4[@FuncUnion(@then_graph, @else_graph)]()
      : () -> (<Tensor[Float32], ()>)
      # Fullname with scope: (0)
  Return(%3)
      : (<Tensor[BFloat16], (6)>)
      # Fullname with scope: (Default/Return-op0)
}
# Order:
#   1: @kernel_graph0:CNode_74{[0]: ValueNode<Primitive> Return}

subgraph instance: then_graph : 0x2
# Parameters: 1, (<Tensor[Int32], (3)>)
subgraph @then_graph(%para3_p) {
  %0(out) = PrimFunc_Add(%para3_p, %para3_p)
      : (<Tensor[Int32], (3)>, <Tensor[Int32], (3)>) -> (<Tensor[Int32], (3)>)
      # Fullname with scope: (Default/Add-op0)
  Return(%0)
      : (<Tensor[Int32], (3)>)
}
"""

# r1.x style: "#IR entry      :", "x[const vector]" shapes, wrapped primitive_attrs header,
# bare ": (full name)" line, "file(line)" sources.
IR_V1 = """#IR entry      : @6_5_1_construct_wrapper.15
#attrs         :
#Total params  : 2

%para1_x : <Tensor[Float32]x[const vector][32, 128, 13, 13]>
%para2_w : <Tensor[Float16]x[const vector][192, 128, 3, 3]>

#Total subgraph : 1

subgraph attr:
subgraph @6_5_1_construct_wrapper.15() {
  %24(equivoutput) = Conv2D(%para1_x, %para2_w) {instance name: conv2d} primitive_attrs: {compile_info: , pri_format: NC1HWC0, stride: (1, 1, 1, 1), out_channel:
192, mode: 1, input_names: [
x, w], pad_list: (1, 1, 1, 1),
IsFeatureMapOutput: true, IsFeatureMapInputList: (0)}
       : (<Tensor[Float32]x[const vector][32, 128, 13, 13]>, <Tensor[Float16]x[const vector][192, 128, 3, 3]>) -> (<Tensor[Float16]x[const vector][32, 192, 13, 13]>)
       : (<Float16xNC1HWC0[const vector][32, 8, 13, 13, 16]>, <Float16xFracZ[const vector][72, 12, 16, 16]>) -> (<Float16xNC1HWC0[const vector][32, 12, 13, 13, 16]>)
       : (Default/network-WithLossCell/_backbone-AlexNet/conv3-Conv2d/Conv2D-op107)
       # In file /models/alexnet.py(58)/        x = self.conv3(x)/
  %25(equivoutput) = ReLU(%24) primitive_attrs: {output_names: [output]}
       : (<Tensor[Float16]x[const vector][32, 192, 13, 13]>) -> (<Tensor[Float16]x[const vector][32, 192, 13, 13]>)
       : full_name_with_scope: (Default/network-WithLossCell/_backbone-AlexNet/ReLU-op9)
       # In file train.py:59/        x = self.relu(x)/
  return(%25)
}
"""


def _ir(text: str, tmp_path: Path, name: str = "ms_output_trace_code_graph_0.ir") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---- generated fixtures -----------------------------------------------------------------------


def test_v2_nodes_types_names(tmp_path: Path) -> None:
    graph = parse_ir(_ir(IR_V2, tmp_path))
    assert graph.name == "kernel_graph0"
    assert graph.kind == "ms_ir"
    assert graph.subgraphs == ["then_graph"]
    conv = graph.nodes["Default/net/conv-Conv2d/Conv2D-op0"]
    assert conv.type == "Conv2D"
    assert conv.attrs["raw_type"] == "PrimFunc_Conv2D"
    assert conv.node_id == "%0"
    assert conv.graph == "kernel_graph0"
    assert conv.inputs == ["param:x", "param:conv.weight"]
    assert graph.nodes["Default/Return-op0"].type == "Return"


def test_v2_descs_host_and_device(tmp_path: Path) -> None:
    graph = parse_ir(IR_V2)
    conv = graph.nodes["Default/net/conv-Conv2d/Conv2D-op0"]
    assert conv.input_descs[0] == {
        "dtype": "float32", "shape": [8, 1, 32, 32], "device_format": "NC1HWC0", "device_shape": [8, 1, 32, 32, 16],
    }
    assert conv.input_descs[1]["dtype"] == "float16"
    assert conv.input_descs[1]["device_format"] == "FracZ"
    assert conv.output_descs == [
        {"dtype": "float32", "shape": [8, 6, 28, 28], "device_format": "NC1HWC0", "device_shape": [8, 1, 28, 28, 16]}
    ]
    assert graph.nodes["Default/net/ReLU-op1"].output_descs[0]["dtype"] == "bfloat16"
    bn = graph.nodes["Default/net/bn-BatchNorm/BatchNorm-op3"]
    assert [d["shape"] for d in bn.output_descs] == [[8, 6, 28, 28], [6]]


def test_v2_parameters(tmp_path: Path) -> None:
    graph = parse_ir(IR_V2)
    x = graph.nodes["x"]
    assert x.type == "Parameter"
    assert x.node_id == "%para1"
    assert x.output_descs[0]["shape"] == [8, 1, 32, 32]
    assert x.output_descs[0]["device_format"] == "DefaultFormat"
    w = graph.nodes["conv.weight"]
    assert w.output_descs[0]["dtype"] == "float16"  # "Unknown" device dtype must not override
    assert w.output_descs[0]["device_shape"] == [25, 1, 16, 16]
    assert w.attrs["has_default"] == "true"
    p = graph.nodes["p"]  # subgraph parameter, typed from "# Parameters:"
    assert p.graph == "then_graph"
    assert p.output_descs[0] == {"dtype": "int32", "shape": [3]}


def test_v2_attrs_flattened() -> None:
    conv = parse_ir(IR_V2).nodes["Default/net/conv-Conv2d/Conv2D-op0"]
    assert conv.attrs["instance_name"] == "conv2d"
    assert conv.attrs["kernel_size"] == "(5, 5)"
    assert conv.attrs["pad_mode"] == "valid"
    assert conv.attrs["input_names"] == "[x, w]"
    assert conv.attrs["checkpoint"] == "Bool(1)"


def test_v2_source_stack_in_order() -> None:
    conv = parse_ir(IR_V2).nodes["Default/net/conv-Conv2d/Conv2D-op0"]
    assert [(s.file, s.line) for s in conv.source] == [("/work/train.py", 30), ("/work/net.py", 17)]
    assert conv.source[0].code == "def construct(self, x):"
    assert conv.source[1].code == "x = self.conv(x)"  # shared-line suffix stripped


def test_tuple_get_item_maps_to_producer_slot() -> None:
    graph = parse_ir(IR_V2)
    relu = graph.nodes["Default/net/ReLU-op1"]
    assert relu.inputs == ["Default/net/bn-BatchNorm/BatchNorm-op3:1"]
    tgi = graph.nodes["Default/net/bn-BatchNorm/TupleGetItem-op4"]
    assert tgi.inputs[0] == "Default/net/bn-BatchNorm/BatchNorm-op3:1"
    consumers = graph.consumers()
    assert "Default/net/ReLU-op1" in consumers["Default/net/bn-BatchNorm/BatchNorm-op3"]
    assert consumers["Default/net/conv-Conv2d/Conv2D-op0"] == ["Default/net/bn-BatchNorm/BatchNorm-op3"]


def test_value_call_and_numeric_fullname_get_fallback_names() -> None:
    graph = parse_ir(IR_V2)
    call = graph.nodes["kernel_graph0/%5(CNode_9)"]
    assert call.type == "Call"
    assert call.attrs["callee"].startswith("%4[@FuncUnion")
    switch = graph.nodes["Default/Switch-op0"]
    assert switch.inputs == ["Bool(1)", "@then_graph", "@else_graph"]
    ret = graph.nodes["then_graph/Return"]  # Return without a full-name line
    assert ret.inputs == ["Default/Add-op0:0"]
    assert graph.nodes["Default/Add-op0"].inputs == ["param:p", "param:p"]


def test_v1_wrapped_header_bare_fullname_and_paren_lines() -> None:
    graph = parse_ir(IR_V1)
    assert graph.name == "6_5_1_construct_wrapper.15"
    conv = graph.nodes["Default/network-WithLossCell/_backbone-AlexNet/conv3-Conv2d/Conv2D-op107"]
    assert conv.type == "Conv2D"
    assert conv.attrs["input_names"] == "[x, w]"
    assert conv.attrs["IsFeatureMapOutput"] == "true"
    assert conv.attrs["out_channel"] == "192"
    assert conv.input_descs[0]["shape"] == [32, 128, 13, 13]
    assert conv.input_descs[1]["device_format"] == "FracZ"
    assert conv.output_descs[0]["dtype"] == "float16"
    assert conv.output_descs[0]["device_shape"] == [32, 12, 13, 13, 16]
    assert conv.source == [conv.source[0]] and conv.source[0].file == "/models/alexnet.py"
    assert conv.source[0].line == 58 and conv.source[0].code == "x = self.conv3(x)"
    relu = graph.nodes["Default/network-WithLossCell/_backbone-AlexNet/ReLU-op9"]
    assert relu.inputs == [conv.name + ":0"]
    assert relu.source[0].file == "train.py" and relu.source[0].line == 59
    assert graph.nodes["x"].output_descs[0]["shape"] == [32, 128, 13, 13]


def test_warnings_and_partial_graph_on_truncated_text() -> None:
    cut = IR_V2.index("BatchNorm(%0, Bool(1))") + len("BatchNorm(%0, B")
    text = IR_V2[:cut] + "\n  %9(bad) = Foo(\n"
    warnings: list[str] = []
    graph = parse_ir(text, warnings=warnings)
    assert "Default/net/conv-Conv2d/Conv2D-op0" in graph.nodes
    assert not any(n.type == "BatchNorm" for n in graph.nodes.values())
    assert warnings and all("<text>:" in w for w in warnings)


@pytest.mark.parametrize("text", ["", "hello world\nnothing here", "\x00\x01\x02binary", "subgraph @g() {\n}\n"])
def test_garbage_raises_graph_parse_error(text: str) -> None:
    with pytest.raises(GraphParseError) as info:
        parse_ir(text)
    assert "\n" not in str(info.value)


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(GraphParseError, match="cannot read"):
        load_graph_file(tmp_path / "missing.ir", "ms_ir")


def test_load_graph_file_and_sanitize(tmp_path: Path) -> None:
    path = _ir(IR_V2, tmp_path)
    assert detect_graph_kind(str(path)) == "ms_ir"
    graphs = load_graph_file(path)
    assert [g.name for g in graphs] == ["kernel_graph0"]
    assert sanitize_name("Default/net/conv-Conv2d/Conv2D-op0") == "Default_net_conv-Conv2d_Conv2D-op0"
    assert sanitize_name("a.b\\c d") == "a_b_c_d"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutated_ir_only_raises_graph_parse_error(data: st.DataObject) -> None:
    base = data.draw(st.sampled_from([IR_V1, IR_V2]))
    start = data.draw(st.integers(0, len(base)))
    end = data.draw(st.integers(start, min(len(base), start + 200)))
    junk = data.draw(st.text(alphabet=st.sampled_from(list("%()[]{}<>:#,=@\"\\ \n/~x0123abc")), max_size=40))
    text = base[:start] + junk + base[end:]
    try:
        graph = parse_ir(text, warnings=[])
    except GraphParseError:
        return
    for node in graph.nodes.values():
        assert isinstance(node.name, str) and isinstance(node.inputs, list)
    graph.consumers()


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_random_text(text: str) -> None:
    try:
        parse_ir(text)
    except GraphParseError:
        pass


# ---- real files (skipped in a user's clone) ------------------------------------------------------


@pytest.fixture(scope="module")
def lenet_ir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lenet_tar = shared("real_dumps", "mindspore-2.10-cpu-lenet.tar.gz")
    dest = tmp_path_factory.mktemp("lenet")
    with tarfile.open(lenet_tar) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("graphs/ms_output_trace_code_graph_0.ir"))
        try:
            tar.extract(member, dest, filter="data")
        except TypeError:  # Python without tarfile extraction filters
            tar.extract(member, dest)
    return next(dest.rglob("ms_output_trace_code_graph_0.ir"))


def test_real_lenet_ir(lenet_ir: Path) -> None:
    warnings: list[str] = []
    graph = load_graph_file(lenet_ir, detect_graph_kind(str(lenet_ir)), warnings=warnings)[0]
    assert warnings == []
    assert graph.name == "kernel_graph0"
    assert len(graph.nodes) == 21 + 78  # "Total params: 21", "Total number of cnodes: 78"
    conv_name = "Default/network-WithLossCell/_backbone-LeNet/conv1-Conv2d/Conv2D-op0"
    conv = graph.nodes[conv_name]
    assert conv.type == "Conv2D"
    assert any(s.file.endswith("net.py") and s.line == 17 for s in conv.source)
    assert conv.output_descs[0] == {
        "dtype": "float32", "shape": [8, 6, 28, 28], "device_format": "DefaultFormat", "device_shape": [8, 6, 28, 28],
    }
    relu = graph.nodes["Default/network-WithLossCell/_backbone-LeNet/relu-ReLU/ReLU-op0"]
    assert relu.type == "ReLU"
    assert f"{conv_name}:0" in relu.inputs
    consumers = graph.consumers()
    assert "Default/network-WithLossCell/_backbone-LeNet/pool-MaxPool2d/MaxPool-op0" in consumers[relu.name]
    # dump files name ops with "_" for "/" (e.g. "Conv2D.Default_network-WithLossCell__backbone-…-op0.0.0.….npy")
    assert sanitize_name(conv_name) == "Default_network-WithLossCell__backbone-LeNet_conv1-Conv2d_Conv2D-op0"


def test_real_kbyk_ir_multi_subgraph() -> None:
    warnings: list[str] = []
    graph = parse_ir(shared("real_samples", "ms_kbyk_18_validate_0068.ir"), warnings=warnings)
    assert warnings == []
    assert graph.name == "19_1___main___Net_construct_72"
    assert len(graph.subgraphs) == 2
    sub = graph.nodes["Default/Sub-op0"]
    assert sub.type == "Sub" and sub.inputs[0] == "param:x"
    assert sub.source[2].code == "a = ops.sub(x, 1)"
    assert graph.nodes["Default/Add-op0"].inputs == ["Default/Sub-op0:0", "param:y"]
    assert graph.nodes["Default/Mul-op0"].graph == "20_4_✓__main___Net_construct_75"
    assert graph.nodes["Default/Cast-op0"].output_descs == [{"dtype": "bool", "shape": []}]
