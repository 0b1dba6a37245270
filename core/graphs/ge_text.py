"""GE graph dumps (FORMATS.md §7): ``ge_proto_*.txt`` text, atc JSON, ``ge_onnx_*.pbtxt``.

All three are read into the same plain tree (``pbtext`` for text, ``json`` for JSON) and
converted here, so tolerance and speed do not depend on the protobuf runtime: unknown
fields and enum names are kept or ignored, a truncated file yields the ops read so far.

Conventions of the resulting nodes:

* ``inputs`` keep one entry per data input anchor, in order, as ``"src:idx"``; an
  unconnected anchor stays as ``""`` so ``inputs[i]`` lines up with ``input_descs[i]``.
  Control edges (``"src:-1"``) go to ``control`` as bare names.
* descs: ``dtype`` (numpy spelling), ``shape`` (the logical ``origin_shape`` when given,
  else the desc shape), ``format`` (the desc layout = device format), ``device_shape``,
  ``origin_shape``/``origin_format`` when present, plus any ``_datadump_*`` desc attrs.
* ``attrs`` are plain Python values; OpDef's ``stream_id``/``id`` are added as
  ``stream_id``/``op_id`` unless an attr of that name exists.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Optional

from dumpscope.core.model import Graph, GraphNode

from .common import GraphParseError, Source, ge_dtype, one_line, read_source
from .pbtext import Tree, parse_text_tree

_LIST_FIELDS = {
    "VT_LIST_STRING": "s", "VT_LIST_INT": "i", "VT_LIST_FLOAT": "f", "VT_LIST_BOOL": "b",
    "VT_LIST_BYTES": "bt", "VT_LIST_TENSOR_DESC": "td", "VT_LIST_TENSOR": "t",
    "VT_LIST_GRAPH": "g", "VT_LIST_NAMED_ATTRS": "na", "VT_LIST_DATA_TYPE": "dt",
}
_LIST_ORDER = ("s", "i", "f", "b", "bt", "td", "t", "g", "na", "dt")


# ---- tree access ---------------------------------------------------------------------------


def _first(tree: Tree, key: str, default: Any = None) -> Any:
    vals = tree.get(key)
    return vals[0] if vals else default


def _as_int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        return default


def _as_str(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.lower() in ("true", "1", "t")
    return bool(value)


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _attr_entries(values: Iterable[Any]) -> Iterable[tuple[str, Tree]]:
    """Map entries as ``(key, value tree)``: ``attr { key value }`` or a JSON object map."""
    for entry in values:
        if not isinstance(entry, dict):
            continue
        if "key" in entry:
            value = _first(entry, "value", {})
            yield _as_str(_first(entry, "key")), value if isinstance(value, dict) else {}
        else:
            for key, vals in entry.items():
                value = vals[0] if vals else {}
                yield key, value if isinstance(value, dict) else {}


def _attrs(tree: Tree, key: str = "attr") -> dict[str, Any]:
    return {k: _attr_value(v) for k, v in _attr_entries(tree.get(key, []))}


# ---- value decoding ------------------------------------------------------------------------


def _attr_value(value: Tree) -> Any:
    """One ``AttrDef`` → plain Python (lists per ``val_type``, ``td`` → desc dict …)."""
    if "list" in value:
        lst = _first(value, "list", {})
        return _list_value(lst if isinstance(lst, dict) else {})
    if "s" in value:
        return _as_str(_first(value, "s"))
    if "i" in value:
        return _as_int(_first(value, "i"))
    if "f" in value:
        return _as_float(_first(value, "f"))
    if "b" in value:
        return _as_bool(_first(value, "b"))
    if "dt" in value:
        return ge_dtype(_first(value, "dt"))
    if "td" in value:
        return _desc(_first(value, "td", {}))
    if "func" in value:
        func = _first(value, "func", {})
        return {"name": _as_str(_first(func, "name", "")), "attr": _attrs(func)}
    if "t" in value:
        t = _first(value, "t", {})
        return {"desc": _desc(_first(t, "desc", {})), "data_bytes": len(_as_str(_first(t, "data", "")))}
    if "g" in value:
        return {"graph": _as_str(_first(_first(value, "g", {}), "name", ""))}
    if "list_list_int" in value:
        lli = _first(value, "list_list_int", {})
        return [[_as_int(x) for x in row.get("list_i", [])] for row in lli.get("list_list_i", [])]
    if "list_list_float" in value:
        llf = _first(value, "list_list_float", {})
        return [[_as_float(x) for x in row.get("list_f", [])] for row in llf.get("list_list_f", [])]
    for key in ("bt", "expression"):
        if key in value:
            return _as_str(_first(value, key))
    return None


def _list_value(lst: Tree) -> list[Any]:
    field = _LIST_FIELDS.get(_as_str(_first(lst, "val_type", "")), "")
    if not field or field not in lst:
        field = next((f for f in _LIST_ORDER if f in lst), "")
    items = lst.get(field, []) if field else []
    if field in ("s", "bt"):
        return [_as_str(x) for x in items]
    if field == "i":
        return [_as_int(x) for x in items]
    if field == "f":
        return [_as_float(x) for x in items]
    if field == "b":
        return [_as_bool(x) for x in items]
    if field == "dt":
        return [ge_dtype(x) for x in items]
    if field == "td":
        return [_desc(x) for x in items if isinstance(x, dict)]
    if field == "g":
        return [{"graph": _as_str(_first(x, "name", ""))} for x in items if isinstance(x, dict)]
    if field == "na":
        return [{"name": _as_str(_first(x, "name", "")), "attr": _attrs(x)} for x in items if isinstance(x, dict)]
    if field == "t":
        return [{"desc": _desc(_first(x, "desc", {}))} for x in items if isinstance(x, dict)]
    return []


def _desc(td: Any) -> dict[str, Any]:
    """A ``TensorDescriptor`` → desc dict (see the module docstring for the keys)."""
    if not isinstance(td, dict):
        return {"dtype": "", "shape": []}
    shape_tree = _first(td, "shape", {})
    dims = [_as_int(d) for d in shape_tree.get("dim", [])] if isinstance(shape_tree, dict) else []
    attrs = _attrs(td)
    desc: dict[str, Any] = {"dtype": ge_dtype(_first(td, "dtype", 0)), "format": _as_str(_first(td, "layout", ""))}
    origin_shape = attrs.get("origin_shape")
    if isinstance(origin_shape, list):
        desc["shape"] = [_as_int(x) for x in origin_shape]
        desc["origin_shape"] = list(desc["shape"])
    else:
        desc["shape"] = dims
    desc["device_shape"] = dims
    if "origin_format" in attrs:
        desc["origin_format"] = attrs["origin_format"]
    name = _first(td, "name")
    if name:
        desc["name"] = _as_str(name)
    for key, value in attrs.items():
        if key.startswith("_datadump_"):
            desc[key] = value
    return desc


# ---- graphs --------------------------------------------------------------------------------


def _node(op: Tree, graph: str) -> Optional[GraphNode]:
    name = _as_str(_first(op, "name", ""))
    if not name:
        return None
    inputs: list[str] = []
    control: list[str] = []
    for raw in op.get("input", []):
        src = _as_str(raw)
        if src.endswith(":-1"):
            control.append(src[:-3])
        else:
            inputs.append(src)
    attrs = _attrs(op)
    if "stream_id" in op:
        attrs.setdefault("stream_id", _as_int(_first(op, "stream_id")))
    if "id" in op:
        attrs.setdefault("op_id", _as_int(_first(op, "id")))
    subgraphs = [_as_str(s) for s in op.get("subgraph_name", [])]
    if subgraphs:
        attrs.setdefault("subgraph_names", subgraphs)
    return GraphNode(
        name=name,
        type=_as_str(_first(op, "type", "")),
        inputs=inputs,
        control=control,
        attrs=attrs,
        input_descs=[_desc(x) for x in op.get("input_desc", [])],
        output_descs=[_desc(x) for x in op.get("output_desc", [])],
        graph=graph,
        no_task=_as_bool(attrs.get("_no_task", False)),
        node_id=str(_as_int(_first(op, "id"))) if "id" in op else "",
    )


def graphs_from_tree(root: Tree, label: str, kind: str, warnings: list[str]) -> list[Graph]:
    """Turn a ``ModelDef`` (or bare ``GraphDef``) tree into Graphs, root graph first."""
    graph_trees = [g for g in root.get("graph", []) if isinstance(g, dict)]
    if not graph_trees and "op" in root:
        graph_trees = [root]
    if not graph_trees:
        raise GraphParseError(f"{label}: no GE graph found (no 'graph' or 'op' entries)")
    graphs: list[Graph] = []
    for index, gt in enumerate(graph_trees):
        gname = _as_str(_first(gt, "name", "")) or f"graph_{index}"
        graph = Graph(name=gname, path=label, kind=kind)
        for op in gt.get("op", []):
            node = _node(op, gname) if isinstance(op, dict) else None
            if node is None:
                warnings.append(f"{label}: graph {gname}: skipped an op without a name")
                continue
            if node.name in graph.nodes:
                warnings.append(f"{label}: graph {gname}: duplicate op name {one_line(node.name)}")
                continue
            graph.nodes[node.name] = node
            for sub in node.attrs.get("subgraph_names", []):
                if sub and sub not in graph.subgraphs:
                    graph.subgraphs.append(sub)
        graphs.append(graph)
    if not any(g.nodes for g in graphs):
        raise GraphParseError(f"{label}: GE graph has no readable op")
    referenced = {s for g in graphs for s in g.subgraphs}
    for g in graphs[1:]:
        if g.name not in referenced and g.name not in graphs[0].subgraphs:
            graphs[0].subgraphs.append(g.name)
    return graphs


def _text_tree(src: Source, warnings: list[str]) -> tuple[Tree, str]:
    text, label = read_source(src)
    if "\x00" in text[:4096]:
        raise GraphParseError(f"{label}: binary data, not a protobuf text graph")
    root, reader = parse_text_tree(text, label)
    warnings.extend(reader.warnings)
    if reader.bad_lines > _MAX_BAD_SHOWN:
        warnings.append(f"{label}: {reader.bad_lines} unreadable lines in all")
    if reader.bad_lines and reader.bad_lines > reader.good_lines:
        raise GraphParseError(f"{label}: not protobuf text ({reader.bad_lines} unreadable lines)")
    return root, label


_MAX_BAD_SHOWN = 20


def parse_ge_text(src: Source, *, warnings: Optional[list[str]] = None) -> list[Graph]:
    """Parse a ``ge_proto_*.txt`` (``ge.proto.ModelDef`` text, or a bare ``graph {…}`` /
    ``GraphDef`` fragment) into Graphs, root first.

    Raises GraphParseError when the text is not protobuf text or holds no op.
    """
    warns: list[str] = warnings if warnings is not None else []
    root, label = _text_tree(src, warns)
    return graphs_from_tree(root, label, "ge_text", warns)


def _normalize_json(value: Any) -> Any:
    """JSON → the pbtext tree shape (every field a list of values)."""
    if isinstance(value, dict):
        return {k: [_normalize_json(x) for x in v] if isinstance(v, list) else [_normalize_json(v)] for k, v in value.items()}
    return value


def parse_ge_json(src: Source, *, warnings: Optional[list[str]] = None) -> list[Graph]:
    """Parse an atc JSON rendering of a ``ModelDef`` (``atc --mode=1`` / ``--mode=5``)."""
    warns: list[str] = warnings if warnings is not None else []
    text, label = read_source(src)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise GraphParseError(f"{label}: not JSON: {one_line(exc)}") from None
    if not isinstance(data, dict):
        raise GraphParseError(f"{label}: JSON top level is not an object")
    return graphs_from_tree(_normalize_json(data), label, "ge_json", warns)


def parse_ge_onnx(src: Source, *, warnings: Optional[list[str]] = None) -> list[Graph]:
    """Best-effort reader of ``ge_onnx_*.pbtxt`` (ONNX ``ModelProto`` text written by GE).

    Nodes come from ``graph.node``: ``name``, ``op_type``, ``input`` (``src:idx`` kept,
    bare names get ``:0``, ``:-1`` → control) and ``attribute`` values.
    """
    warns: list[str] = warnings if warnings is not None else []
    root, label = _text_tree(src, warns)
    graphs: list[Graph] = []
    for gt in root.get("graph", []):
        if not isinstance(gt, dict):
            continue
        gname = _as_str(_first(gt, "name", "")) or f"graph_{len(graphs)}"
        graph = Graph(name=gname, path=label, kind="ge_onnx")
        for nt in gt.get("node", []):
            if not isinstance(nt, dict) or not _first(nt, "name"):
                warns.append(f"{label}: graph {gname}: skipped a node without a name")
                continue
            name = _as_str(_first(nt, "name"))
            node = GraphNode(name=name, type=_as_str(_first(nt, "op_type", "")), graph=gname)
            for raw in nt.get("input", []):
                src_name = _as_str(raw)
                head, _, idx = src_name.rpartition(":")
                if idx == "-1" and head:
                    node.control.append(head)
                elif head and idx.lstrip("-").isdigit():
                    node.inputs.append(src_name)
                else:
                    node.inputs.append(f"{src_name}:0" if src_name else "")
            for at in nt.get("attribute", []):
                if isinstance(at, dict) and _first(at, "name"):
                    node.attrs[_as_str(_first(at, "name"))] = _onnx_attr(at)
            graph.nodes.setdefault(name, node)
        graphs.append(graph)
    if not any(g.nodes for g in graphs):
        raise GraphParseError(f"{label}: no ONNX graph nodes found")
    return graphs


def _onnx_attr(at: Tree) -> Any:
    for key in ("s", "i", "f"):
        if key in at:
            value = _first(at, key)
            return _as_str(value) if key == "s" else value
    for key in ("strings", "ints", "floats"):
        if key in at:
            return list(at[key])
    return None
