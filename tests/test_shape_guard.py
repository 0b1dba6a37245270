"""The joins' tensor check (core/index/shape_guard.py, graph_join.join_names): a dumped op is never joined to
a MindSpore graph node whose tensors cannot be its files.  Small made-up graphs, shaped like the real
cases in test_real_ms_joins (which shows them on the dumps themselves)."""

from __future__ import annotations

from dumpscope.core.index.graph_join import _prepare, join_names
from dumpscope.core.index.op_groups import OpAcc
from dumpscope.core.index.shape_guard import Dumped, disagreement
from dumpscope.core.model import Graph, GraphNode

SCOPE = "Default/net"
_TENSORS: dict[int, tuple[Dumped, ...]] = {}  # what each made-up op's files hold, by id(op)


def _desc(dtype: str, shape: list[int]) -> dict:
    return {"dtype": dtype, "shape": shape}


def _graph(*nodes: GraphNode, kind: str = "ms_ir"):
    g = Graph(name="kernel_graph6", path="g.ir", kind=kind)
    for n in nodes:
        g.nodes[n.name] = n
    return _prepare("g.ir#kernel_graph6", g)


def _node(name: str, dtype: str, shape: list[int]) -> GraphNode:
    return GraphNode(name=f"{SCOPE}/{name}", type=name.split("-")[0], input_descs=[_desc(dtype, shape)],
                     output_descs=[_desc(dtype, shape)])


def _op(file_op: str, ts: int, dtype: str, shape: tuple[int, ...]) -> OpAcc:
    op = OpAcc(0, 0, "6", f"Default_net_{file_op}", f"Default_net_{file_op}", file_op.split("-")[0], "ms_npy", "",
               first_ts=ts, unit_ids=[ts])
    _TENSORS[id(op)] = (Dumped("output", 0, frozenset({dtype}), frozenset({_count(shape)})),)
    return op


def _count(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _dumped(op: OpAcc) -> tuple[Dumped, ...]:
    return _TENSORS[id(op)]


def test_a_group_is_paired_by_its_tensors_where_names_and_order_disagree_with_them():
    """The real cf_nan case: file Add-op1 (int32 counter) ran first, CSV order Add-op1 then Add-op0, but
    the .ir's Add-op1 is the float32 [2, 4] one."""
    lg = _graph(_node("Add-op1", "float32", [2, 4]), _node("Add-op0", "int32", []))
    counter, body = _op("Add-op1", 1, "int32", ()), _op("Add-op0", 2, "float32", (2, 4))
    csv = {f"{SCOPE}/Add-op1": 0, f"{SCOPE}/Add-op0": 1}
    join_names([counter, body], lg, csv, None, _dumped)
    assert (body.joined, counter.joined) == (f"{SCOPE}/Add-op1", f"{SCOPE}/Add-op0")
    assert body.join_rule == counter.join_rule == "scope_type_tensors"
    join_names(fresh := [_op("Add-op1", 1, "int32", ()), _op("Add-op0", 2, "float32", (2, 4))], lg, csv)
    assert [o.joined for o in fresh] == [f"{SCOPE}/Add-op1", f"{SCOPE}/Add-op0"]  # unchecked: by order, wrong


def test_a_node_whose_tensors_differ_is_not_joined_and_the_op_says_why():
    lg = _graph(_node("Add-op0", "int32", []), _node("Sqrt", "float32", [2, 4]))
    add, sqrt = _op("Add-op0", 1, "float32", (2, 4)), _op("Sqrt", 2, "float32", (3,))
    sqrt.name = sqrt.file_name = "Default_net_Sqrt"
    join_names([add, sqrt], lg, {}, None, _dumped)
    assert add.joined is None and sqrt.joined is None  # the by-name join and the exact one both refused
    assert add.note == (f"not joined to the graph's {SCOPE}/Add-op0: its tensors differ "
                        "(dumped output 0 is float32, the node's int32)")
    assert sqrt.note == (f"not joined to the graph's {SCOPE}/Sqrt: its tensors differ "
                         "(dumped output 0 holds 3 elements, the node's [2, 4] 8)")
    assert add.scope == sqrt.scope == SCOPE  # still placed under its scope


def test_a_view_op_dumped_in_its_input_shape_still_joins():
    """MindSpore 2.10 writes a Flatten's output in the shape before the view: same elements, same data."""
    node = GraphNode(name=f"{SCOPE}/Flatten-op0", type="Flatten", output_descs=[_desc("float32", [2, 32])])
    assert disagreement((Dumped("output", 0, frozenset({"float32"}), frozenset({64})),), node) is None
    # descriptors that say nothing: a tuple, no data type, a dynamic shape, a slot the node does not describe
    vague = GraphNode(name="x", type="T", input_descs=[{"dtype": "int64", "shape": [], "abstract": "tuple"},
                                                       {"dtype": "", "shape": [2]}, _desc("float32", [-1, 4])])
    dumped = tuple(Dumped("input", i, frozenset({"float16"}), frozenset({7})) for i in range(4))
    assert disagreement(dumped, vague) is None


def test_graphs_other_than_mindspore_are_not_checked():
    """GE descriptors may hold device layouts the files do not: the check is for MindSpore graphs only."""
    lg = _graph(_node("Add-op0", "int32", []), kind="ge_text")
    add = _op("Add-op0", 1, "float32", (2, 4))
    join_names([add], lg, {}, None, _dumped)
    assert add.joined == f"{SCOPE}/Add-op0"


def test_a_float_kernel_at_another_width_still_joins_but_an_integer_never_joins_a_float_node():
    """Widths may differ between a device kernel and the graph file (Ascend reduce-precision kernel selection,
    int64 carried as int32, an async dump beside a pre-selection graph); kinds never do (a float tensor is
    never a loop counter).  The real async-dump case: test_real_mindspore_bn's float16 CANN files joined to
    a float32 .ir node."""
    node = _node("Conv2D-op0", "float32", [2, 4])
    assert disagreement((Dumped("output", 0, frozenset({"float16"}), frozenset({8})),), node) is None
    assert disagreement((Dumped("output", 0, frozenset({"bfloat16"}), frozenset({8})),), node) is None
    assert "int32" in disagreement((Dumped("output", 0, frozenset({"int32"}), frozenset({8})),), node)
    assert "bool" in disagreement((Dumped("output", 0, frozenset({"bool"}), frozenset({8})),), node)
    counter = _node("Add-op0", "int64", [])
    assert disagreement((Dumped("output", 0, frozenset({"int32"}), frozenset({1})),), counter) is None
    assert "elements" in disagreement((Dumped("output", 0, frozenset({"float16"}), frozenset({6})),), node)
