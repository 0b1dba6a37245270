"""Writes synthetic GE graph dumps (``ge_proto_…_Build.txt``) for samples, tests and benchmarks.

The text is produced by ``google.protobuf.text_format`` from a real ``ge.proto.ModelDef``
message, so it is valid protobuf text of our ``ge_ir.proto`` by construction.

Ops are plain dicts (or any mapping)::

    {"name": "conv1/Conv2D", "type": "Conv2D",
     "inputs": ["data:0", "weight:0", "init:-1"],          # data "src:idx", control "src:-1"
     "attrs": {"_datadump_original_op_names": ["conv1/Conv2D", "conv1/BiasAdd"], "_no_task": False},
     "outputs": [{"dtype": "float16", "shape": [1, 1, 4, 4, 16], "layout": "NC1HWC0",
                  "origin_shape": [1, 3, 4, 4], "origin_format": "NCHW"}],
     "input_descs": [...same keys...], "id": 3, "stream_id": 0, "subgraphs": ["then_0"]}

``dtype`` accepts numpy spelling (``float16``, ``bfloat16``) or a ``DT_*`` name.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional

from google.protobuf import text_format

from dumpscope.core.graphs import ge_ir_pb2 as pb
from dumpscope.core.graphs.common import GE_DTYPE_NAMES, ge_dtype

_NUMPY_TO_DT = {ge_dtype(name): name for name in GE_DTYPE_NAMES if ge_dtype(name)}
_NUMPY_TO_DT.update({"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "bfloat16": "DT_BF16"})

_LV = pb.AttrDef.ListValue


def dt_name(dtype: str) -> str:
    """numpy spelling or ``DT_*`` name → ``DT_*`` enum name."""
    if dtype.startswith("DT_"):
        return dtype
    try:
        return _NUMPY_TO_DT[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype for a GE graph: {dtype!r}") from None


def _set_attr(attr: pb.AttrDef, value: Any) -> None:
    """Python value → AttrDef (bool/int/float/str/bytes, lists of those, list of int lists, desc dict)."""
    if isinstance(value, bool):
        attr.b = value
    elif isinstance(value, int):
        attr.i = value
    elif isinstance(value, float):
        attr.f = value
    elif isinstance(value, str):
        attr.s = value.encode("utf-8")
    elif isinstance(value, bytes):
        attr.s = value
    elif isinstance(value, Mapping):
        _fill_desc(attr.td, value)
    elif isinstance(value, (list, tuple)):
        items = list(value)
        if items and all(isinstance(x, (list, tuple)) for x in items):
            for row in items:
                attr.list_list_int.list_list_i.add().list_i.extend(int(x) for x in row)
            return
        lst = attr.list
        if all(isinstance(x, bool) for x in items) and items:
            lst.b.extend(items)
            lst.val_type = _LV.VT_LIST_BOOL
        elif all(isinstance(x, int) and not isinstance(x, bool) for x in items) and items:
            lst.i.extend(items)
            lst.val_type = _LV.VT_LIST_INT
        elif all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items) and items:
            lst.f.extend(float(x) for x in items)
            lst.val_type = _LV.VT_LIST_FLOAT
        else:  # strings; an empty list is written as an empty string list, like GE does
            lst.s.extend(x.encode("utf-8") if isinstance(x, str) else bytes(x) for x in items)
            lst.val_type = _LV.VT_LIST_STRING
    else:
        raise TypeError(f"cannot write attr value of type {type(value).__name__}")


def _fill_desc(td: pb.TensorDescriptor, desc: Mapping[str, Any]) -> None:
    td.dtype = pb.DataType.Value(dt_name(str(desc.get("dtype", "float32"))))
    td.shape.dim.extend(int(d) for d in desc.get("shape", []))
    td.layout = str(desc.get("layout", desc.get("format", "ND")))
    if desc.get("name"):
        td.name = str(desc["name"])
    attrs = dict(desc.get("attrs", {}))
    if desc.get("origin_shape") is not None:
        attrs["origin_shape"] = [int(d) for d in desc["origin_shape"]]
    if desc.get("origin_format"):
        attrs["origin_format"] = str(desc["origin_format"])
    for key, value in attrs.items():
        _set_attr(td.attr[key], value)


def _fill_op(op: pb.OpDef, spec: Mapping[str, Any]) -> None:
    op.name = str(spec["name"])
    op.type = str(spec.get("type", ""))
    op.input.extend(str(x) for x in spec.get("inputs", []))
    if spec.get("id") is not None:
        op.id = int(spec["id"])
    if spec.get("stream_id") is not None:
        op.stream_id = int(spec["stream_id"])
    for key, value in dict(spec.get("attrs", {})).items():
        _set_attr(op.attr[key], value)
    for desc in spec.get("input_descs", []):
        _fill_desc(op.input_desc.add(), desc)
    for desc in spec.get("outputs", spec.get("output_descs", [])):
        _fill_desc(op.output_desc.add(), desc)
    op.subgraph_name.extend(str(s) for s in spec.get("subgraphs", []))


def build_model(
    graph_name: str,
    ops: Iterable[Mapping[str, Any]],
    subgraphs: Optional[Mapping[str, Iterable[Mapping[str, Any]]]] = None,
    model_name: str = "",
) -> pb.ModelDef:
    """A ModelDef holding the root graph ``graph_name`` first, then each named subgraph."""
    model = pb.ModelDef(name=model_name or graph_name)
    for name, graph_ops in [(graph_name, ops), *(subgraphs or {}).items()]:
        graph = model.graph.add()
        graph.name = name
        for spec in graph_ops:
            _fill_op(graph.op.add(), spec)
            if spec.get("type") == "Data":
                graph.input.append(f"{spec['name']}:0")
    return model


def ge_graph_text(
    graph_name: str,
    ops: Iterable[Mapping[str, Any]],
    subgraphs: Optional[Mapping[str, Iterable[Mapping[str, Any]]]] = None,
    model_name: str = "",
) -> str:
    """The protobuf text of :func:`build_model` (what GE writes to ``ge_proto_*_Build.txt``)."""
    return text_format.MessageToString(build_model(graph_name, ops, subgraphs, model_name), as_utf8=True)


def write_ge_graph(
    folder: str | os.PathLike[str],
    graph_name: str,
    ops: Iterable[Mapping[str, Any]],
    subgraphs: Optional[Mapping[str, Iterable[Mapping[str, Any]]]] = None,
    *,
    index: int = 1,
    graph_id: int = 0,
    stage: str = "Build",
    file_name: Optional[str] = None,
) -> str:
    """Write ``ge_proto_{index:08d}_graph_{graph_id}_{stage}.txt`` (or ``file_name``) in ``folder``; return its path."""
    name = file_name or f"ge_proto_{index:08d}_graph_{graph_id}_{stage}.txt"
    path = os.path.join(os.fspath(folder), name)
    os.makedirs(os.fspath(folder), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(ge_graph_text(graph_name, ops, subgraphs))
    return path


def one_line_ge_text(lines: int) -> str:
    """GE text of ``lines`` one-line op messages, then one stray ``}`` line per 50 of them: the input that made
    the text parser quadratic (issue 30), for tests/test_parsers_linear.py and benchmarks/bench_parsers_linear.py."""
    out = ['graph {', '  name: "g"']
    out += [f'  op {{ name: "op{i}" type: "Add" input: "op{max(0, i - 1)}:0" }}' for i in range(lines)]
    out.append("}")
    out += ["}"] * (lines // 50)
    return "\n".join(out) + "\n"
