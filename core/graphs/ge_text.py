"""GE graph dumps (FORMATS.md §7): ``ge_proto_*.txt`` text, atc JSON, ``ge_onnx_*.pbtxt``.

All three are read into the same plain tree (``pbtext`` for text, ``json`` for JSON) and
converted here, so tolerance and speed do not depend on the protobuf runtime: unknown
fields and enum names are kept or ignored, a truncated file yields the ops read so far.
Canonically printed ``ge_proto`` text (what GE writes) takes a ~5x faster path that builds
the same nodes without the intermediate tree (see "fast path" below).

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
import re
from typing import Any, Iterable, Optional

from dumpscope.core.model import Graph, GraphNode
from dumpscope.core.support.gc_pause import gc_paused

from .common import GraphParseError, Source, ge_dtype, one_line, read_source
from .pbtext import TextTreeReader, Tree, parse_scalar, parse_text_tree, unescape

_LIST_FIELDS = {
    "VT_LIST_STRING": "s", "VT_LIST_INT": "i", "VT_LIST_FLOAT": "f", "VT_LIST_BOOL": "b",
    "VT_LIST_BYTES": "bt", "VT_LIST_TENSOR_DESC": "td", "VT_LIST_TENSOR": "t",
    "VT_LIST_GRAPH": "g", "VT_LIST_NAMED_ATTRS": "na", "VT_LIST_DATA_TYPE": "dt",
}
_LIST_ORDER = ("s", "i", "f", "b", "bt", "td", "t", "g", "na", "dt")


# ---- tree access ---------------------------------------------------------------------------


def _first(tree: Tree, key: str, default: Any = None) -> Any:
    """The first value of ``key``; ``default`` when absent, or when ``tree`` is no message at all (a
    damaged file can hold ``t: 5`` where a message belongs)."""
    if not isinstance(tree, dict):
        return default
    vals = tree.get(key)
    return vals[0] if vals else default


def _message(value: Any) -> Tree:
    """``value`` if it is a message, else an empty one (damaged text: a scalar where a message belongs)."""
    return value if isinstance(value, dict) else {}


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


_BINARY = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]")


def _bytes_text(value: Any) -> str:
    """A ``bytes`` attr (``bt``): its text when it is text (JSON, names), else a short placeholder —
    GE keeps kernel binaries (``_tbe_kernel_buffer``) there, which mean nothing on a terminal."""
    text = _as_str(value)
    return text if not _BINARY.search(text) else f"<binary data, {len(text)} characters>"


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
    return {k: _attr_value(v) for k, v in _attr_entries(_message(tree).get(key, []))}


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
        lli = _message(_first(value, "list_list_int", {}))
        return [[_as_int(x) for x in _message(row).get("list_i", [])] for row in lli.get("list_list_i", [])]
    if "list_list_float" in value:
        llf = _message(_first(value, "list_list_float", {}))
        return [[_as_float(x) for x in _message(row).get("list_f", [])] for row in llf.get("list_list_f", [])]
    if "bt" in value:
        return _bytes_text(_first(value, "bt"))
    if "expression" in value:
        return _as_str(_first(value, "expression"))
    return None


def _list_value(lst: Tree) -> list[Any]:
    field = _LIST_FIELDS.get(_as_str(_first(lst, "val_type", "")), "")
    if not field or field not in lst:
        field = next((f for f in _LIST_ORDER if f in lst), "")
    items = lst.get(field, []) if field else []
    if field == "s":
        return [_as_str(x) for x in items]
    if field == "bt":
        return [_bytes_text(x) for x in items]
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
    name = _first(td, "name")
    return _desc_dict(ge_dtype(_first(td, "dtype", 0)), _as_str(_first(td, "layout", "")), dims, _attrs(td),
                      _as_str(name) if name else "")


def _desc_dict(dtype: str, fmt: str, dims: list[int], attrs: dict[str, Any], name: str) -> dict[str, Any]:
    """The desc keys both readers produce: logical ``shape`` from ``origin_shape`` when present,
    the dumped dims as ``device_shape``, and the ``_datadump_*`` attrs."""
    desc: dict[str, Any] = {"dtype": dtype, "format": fmt}
    origin_shape = attrs.get("origin_shape")
    if isinstance(origin_shape, list):
        desc["shape"] = [_as_int(x) for x in origin_shape]
        desc["origin_shape"] = list(desc["shape"])
    else:
        desc["shape"] = dims
    desc["device_shape"] = dims
    if "origin_format" in attrs:
        desc["origin_format"] = attrs["origin_format"]
    if name:
        desc["name"] = name
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
    specs = []
    for index, gt in enumerate(graph_trees):
        gname = _as_str(_first(gt, "name", "")) or f"graph_{index}"
        specs.append((gname, [_node(op, gname) if isinstance(op, dict) else None for op in gt.get("op", [])]))
    return _assemble(specs, label, kind, warnings)


def _assemble(specs: list[tuple[str, list[Optional[GraphNode]]]], label: str, kind: str,
              warnings: list[str]) -> list[Graph]:
    """``(graph name, nodes or None per op)`` → Graphs; unnamed / duplicate ops become warnings."""
    graphs: list[Graph] = []
    for gname, nodes in specs:
        graph = Graph(name=gname, path=label, kind=kind)
        for node in nodes:
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


# ---- fast path for canonically printed text --------------------------------------------------
#
# GE (C++ ``TextFormat::Print``) and ``google.protobuf.text_format`` print one field per line,
# two spaces of indent per nesting level, fields in field-number order.  For such text the
# structure follows from the indentation, so instead of building a generic tree line by line
# (~120 lines per op), the reader below cuts the text into op blocks with ``str.find`` and reads
# each op with one ``findall`` whose tokens are whole items: a field line, a whole
# ``attr { key … value { … } }`` entry (common values decoded straight from the groups), a whole
# tensor desc.  Repeating values (``origin_shape`` lists …) and whole descs are cached per file.
# Every line is accounted for (the token regex ends in a catch-all, second-stage scans are
# anchored at line starts and count-checked).  What is not exactly in that shape goes to the
# generic reader: one attr value (``td``/``func``/``t``…), one op (escaped strings, odd spacing,
# ``attr_groups``…), or — when the outline is odd, or the generic reader complains anywhere — the
# whole file, so results, warnings and errors are always those of the generic path
# (``tests/test_graphs_ge.py`` checks that on fuzzed text).


class _Fallback(Exception):
    """The text is not canonically printed: parse the whole file with the generic reader."""


class _OpFallback(Exception):
    """This op is not canonically printed: parse its block with the generic reader."""


_NAME = r"[A-Za-z_]\w*"
# plain quoted strings only (a char class run is ~10x cheaper in ``re`` than an alternation
# per char); a string with escapes makes its op go to the generic reader
_QKEY = r'"([^"\\\n]*)"'
_Q = r'"[^"\\\n]*"'
_TOP_ITEM = re.compile(rf"(?:({_NAME}): (.*)\n|({_NAME}) \{{\n|[ \t]*\n)")
_GRAPH_ITEM = re.compile(rf"  (?:({_NAME}): (.*)\n|({_NAME}) \{{\n)")


def _value_rx(n: int) -> str:
    """An ``AttrDef`` body indented by ``n``: one line, a flat ``list {…}``, or any deeper lines.

    Loose on purpose (``[^}]*`` runs are much cheaper in ``re`` than a repeated line group);
    :meth:`_FastReader._value` reads the captured text exactly.
    """
    sp = " " * n
    return rf"(?:{sp}[^\n]*\n|{sp}list \{{\n[^}}]*{sp}\}}\n|(?:{sp}[^\n]*\n)+)?"


def _simple_rx(n: int) -> str:
    """The commonest ``AttrDef`` bodies, decoded straight from the groups: ``s: "plain"``, ``i: N``, ``b: …``."""
    return " " * n + r'(?:s: (")([^"\\\n]*)"|i: (-?[0-9]+)|b: (true|false))\n'


def _attr_rx(n: int) -> str:
    """A whole map entry ``attr { key: "…" value { … } }`` indented by ``n`` (simple value | other body)."""
    s0, s2 = " " * n, " " * (n + 2)
    return (rf"{s0}attr \{{\n{s2}key: {_QKEY}\n{s2}value \{{\n"
            rf"(?:{_simple_rx(n + 4)}|({_value_rx(n + 4)})){s2}\}}\n{s0}\}}\n")


# One token per op-level item.  The catch-all last alternative makes ``findall`` consume every
# line, so anything unexpected shows up as an ``other`` token (→ the generic reader for that op).
# A whole ``attr { key value }`` entry is one token, and so is a whole tensor desc printed in
# field order (name, dtype, shape, layout, attr entries, then only scalar fields).  Indents are
# literal runs of spaces (``\ {6}`` would compile to a slower counted repeat).
_S4, _S6 = " " * 4, " " * 6
_OP_TOKEN = re.compile(
    "(?="  # tag group 1 for attr entries: an empty-width "attr" look-ahead keeps _attr_rx reusable
    + _S4 + "(attr) )" + _attr_rx(4)
    + rf'|{_S4}({_NAME}): (?:(")([^"\\\n]*)"|([^\n]*))\n'
    + rf"|{_S4}(input_desc|output_desc) \{{\n"
    + rf"(?:{_S6}name: ({_Q})\n)?"
    + rf"(?:{_S6}dtype: ([A-Za-z_0-9]+)\n)?"
    + rf"(?:{_S6}shape \{{\n([^}}]*){_S6}\}}\n)?"
    + rf"(?:{_S6}layout: ({_Q})\n)?"
    + rf"((?:{_S6}attr \{{\n[^}}]*\}}\n(?: {{8,10}}\}}\n)*{_S6}\}}\n)*)"
    + rf'((?:{_S6}{_NAME}: (?:"[^"\\\n]*"|[-+\w.]+)\n)*)'  # unused fields: plain values only
    + rf"{_S4}\}}\n"
    + r"|([^\n]*\n)"
)
_DESC_ATTR = re.compile(r"(?<![^\n])" + _attr_rx(6))  # at line starts only: the count check relies on it
_DESC_LATE = re.compile(r"(?:^|\n) {6}(?:name|dtype|layout|shape|attr):")
_BARE = re.compile(r"[-+\w.]+")
_DQ_STR = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_SQ_STR = re.compile(r"'((?:[^'\\\n]|\\.)*)'")
_VALUE_SCALAR = {n: re.compile(rf" {{{n}}}({_NAME}): ([^\n]*)\n") for n in (8, 10)}
_VALUE_LIST = {n: re.compile(rf" {{{n}}}list \{{\n((?:[^}}]*\n)?) {{{n}}}\}}\n") for n in (8, 10)}
_LIST_ITEM = {n: re.compile(rf"(?<![^\n]) {{{n + 2}}}({_NAME}): ([^\n]*)\n") for n in (8, 10)}
_SIMPLE_VALUE = {"s": _as_str, "i": _as_int, "f": _as_float, "b": _as_bool, "dt": ge_dtype, "bt": _bytes_text,
                 "expression": _as_str}
_OP_SCALARS = frozenset({"name", "type", "input", "id", "stream_id", "subgraph_name", "attr", "input_desc",
                         "output_desc"})
_VALUE_CACHE_MAX = 200_000
_DESC_CACHE_MAX = 20_000
_MISS = object()


def _raw(raw: str) -> Any:
    """One printed scalar (the text after ``key: ``) → value, as the generic reader reads it."""
    c = raw[:1]
    if c == '"':
        body = raw[1:-1]
        if raw[-1] == '"' and len(raw) > 1 and '"' not in body and "\\" not in body:
            return body
        m = _DQ_STR.fullmatch(raw)
    elif c == "'":
        m = _SQ_STR.fullmatch(raw)
    elif _BARE.fullmatch(raw):
        return parse_scalar(raw)
    else:
        raise _OpFallback
    if m is None:
        raise _OpFallback
    return unescape(m.group(1))


def _copy_desc(desc: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.copy() if type(v) is list else v) for k, v in desc.items()}


class _FastReader:
    """Reads canonically printed ``ModelDef`` text; see the comment above."""

    def __init__(self, text: str, label: str):
        self.text = text
        self.label = label
        self.values: dict[str, Any] = {}
        self.descs: dict[tuple[str, ...], dict[str, Any]] = {}
        self.dtypes: dict[str, str] = {}
        self.generic_ops = 0

    # -- outline ----------------------------------------------------------------------------

    def _block_end(self, start: int, indent: str, check: bool = True) -> int:
        """End of the block whose body starts at ``start``: index just past its closing line."""
        text = self.text
        close = text.find(f"\n{indent}}}\n", start - 1)
        if close < 0:
            raise _Fallback
        # every body line must be indented deeper than the braces, else the outline is not canonical
        if check and text.count("\n", start, close + 1) != text.count(f"\n{indent}  ", start - 1, close):
            raise _Fallback
        return close + len(indent) + 3

    def graphs(self) -> list[tuple[str, list[Optional[GraphNode]]]]:
        text = self.text
        end = len(text)
        pos = 0
        graph_bodies: list[tuple[int, int]] = []
        match = _TOP_ITEM.match
        while pos < end:
            m = match(text, pos)
            if m is None:
                raise _Fallback
            pos = m.end()
            block = m.group(3)
            if m.group(1):
                try:
                    _raw(m.group(2))  # model name/version …: unused, but must be readable
                except _OpFallback:
                    raise _Fallback from None
            elif block:
                body_end = self._block_end(pos, "")
                if block == "graph":
                    graph_bodies.append((pos, body_end - 2))
                else:  # model attrs …: unused, but must be well formed
                    self._generic(text[pos:body_end - 2])
                pos = body_end
        if not graph_bodies:
            raise _Fallback
        return [self._graph(index, start, stop) for index, (start, stop) in enumerate(graph_bodies)]

    def _graph(self, index: int, start: int, end: int) -> tuple[str, list[Optional[GraphNode]]]:
        text = self.text
        gname: Any = None
        ops: list[tuple[int, int]] = []
        pos = start
        match = _GRAPH_ITEM.match
        block_end = self._block_end
        while pos < end:
            m = match(text, pos, end)
            if m is None:
                raise _Fallback
            pos = m.end()
            block = m.group(3)
            if block == "op":  # op bodies are checked line by line by _OP_TOKEN
                body_end = block_end(pos, "  ", False)
                ops.append((pos, body_end - 4))
                pos = body_end
            elif block:  # graph attrs …: unused, but must be well formed
                body_end = block_end(pos, "  ")
                self._generic(text[pos:body_end - 4])
                pos = body_end
            else:
                try:
                    value = _raw(m.group(2))  # input/output/…: unused, but must be readable
                except _OpFallback:
                    raise _Fallback from None
                if m.group(1) == "name" and gname is None:
                    gname = value
        name = _as_str(gname if gname is not None else "") or f"graph_{index}"
        return name, [self._op(s, e, name) for s, e in ops]

    # -- ops --------------------------------------------------------------------------------

    def _op(self, start: int, end: int, graph: str) -> Optional[GraphNode]:
        try:
            return self._fast_op(start, end, graph)
        except _OpFallback:
            self.generic_ops += 1
            return _node(self._generic(self.text[start:end]), graph)

    def _generic(self, body: str) -> Tree:
        reader = TextTreeReader(self.label)
        tree = reader.feed(body)
        if reader.bad_lines:
            raise _Fallback  # let the generic pass over the whole file report it
        return tree

    def _fast_op(self, start: int, end: int, graph: str) -> Optional[GraphNode]:
        first: dict[str, Any] = {}
        inputs: list[str] = []
        control: list[str] = []
        subgraphs: list[str] = []
        attrs: dict[str, Any] = {}
        in_descs: list[dict[str, Any]] = []
        out_descs: list[dict[str, Any]] = []
        descs = self.descs
        for (tag, akey, sq, sval, ival, bval, aval, fkey, fq, fstr, fval, dkind, dname, dtype, dims, layout, dattrs,
             rest, _other) in _OP_TOKEN.findall(self.text, start, end):
            if tag:
                attrs[unescape(akey) if "\\" in akey else akey] = self._attr_value(sq, sval, ival, bval, aval, 8)
            elif fkey:
                if fkey == "input":
                    src = fstr if fq else _as_str(_raw(fval))
                    if src.endswith(":-1"):
                        control.append(src[:-3])
                    else:
                        inputs.append(src)
                elif fkey in _OP_SCALARS:
                    if fkey == "subgraph_name":
                        subgraphs.append(fstr if fq else _as_str(_raw(fval)))
                    elif fkey in ("attr", "input_desc", "output_desc"):
                        raise _OpFallback
                    elif fkey not in first:
                        first[fkey] = fstr if fq else _raw(fval)
                elif not fq:
                    _raw(fval)  # unused, but must be readable
            elif dkind:
                if rest and _DESC_LATE.search(rest):
                    raise _OpFallback  # fields out of the printed order
                key = (dname, dtype, dims, layout, dattrs)
                desc = descs.get(key)
                if desc is None:
                    desc = self._desc(dname, dtype, dims, layout, dattrs)
                    if len(descs) < _DESC_CACHE_MAX:
                        descs[key] = desc
                (in_descs if dkind == "input_desc" else out_descs).append(_copy_desc(desc))
            else:
                raise _OpFallback  # a line of another shape (attr_groups {…}, odd spacing, one-line message …)
        name = _as_str(first.get("name", ""))
        if not name:
            return None
        if "stream_id" in first:
            attrs.setdefault("stream_id", _as_int(first["stream_id"]))
        if "id" in first:
            attrs.setdefault("op_id", _as_int(first["id"]))
        if subgraphs:
            attrs.setdefault("subgraph_names", subgraphs)
        return GraphNode(
            name=name,
            type=_as_str(first.get("type", "")),
            inputs=inputs,
            control=control,
            attrs=attrs,
            input_descs=in_descs,
            output_descs=out_descs,
            graph=graph,
            no_task=_as_bool(attrs.get("_no_task", False)),
            node_id=str(_as_int(first["id"])) if "id" in first else "",
        )

    def _desc(self, name: str, dtype: str, dims_text: str, layout: str, attrs_text: str) -> dict[str, Any]:
        """The parts of one ``TensorDescriptor`` token → the same dict as :func:`_desc` builds from a tree."""
        attrs: dict[str, Any] = {}
        if attrs_text:
            found = _DESC_ATTR.findall(attrs_text)
            if len(found) != attrs_text.count("\n      attr {\n") + 1:
                raise _OpFallback
            for key, sq, sval, ival, bval, body in found:
                attrs[unescape(key) if "\\" in key else key] = self._attr_value(sq, sval, ival, bval, body, 10)
        dims: list[int] = []
        if dims_text:
            parts = dims_text.split()
            n = len(parts) >> 1
            if len(parts) & 1 or parts[::2] != ["dim:"] * n or dims_text.count("\n") != n:
                raise _OpFallback
            try:
                dims = [int(d) for d in parts[1::2]]
            except ValueError:
                raise _OpFallback from None
        dt = self.dtypes.get(dtype) if dtype else ""
        if dt is None:
            dt = self.dtypes[dtype] = ge_dtype(_raw(dtype))
        name_value = _raw(name) if name else ""
        return _desc_dict(dt, _as_str(_raw(layout)) if layout else "", dims, attrs,
                          _as_str(name_value) if name_value else "")

    # -- attr values ------------------------------------------------------------------------

    def _attr_value(self, sq: str, sval: str, ival: str, bval: str, body: str, indent: int) -> Any:
        """An attr value from the fast token regex: a quoted string, an int or a bool read straight from
        the match, else the ``AttrDef`` body decoded (cached values are shared, so lists are copied)."""
        if sq:
            return sval
        if ival:
            return int(ival)
        if bval:
            return bval == "true"
        value = self.values.get(body, _MISS)
        if value is _MISS:
            return self._value(body, indent)
        return list(value) if type(value) is tuple else value

    def _value(self, body: str, indent: int) -> Any:
        """An ``AttrDef`` body (lines indented by ``indent``) → plain Python; simple ones are cached."""
        m = _VALUE_SCALAR[indent].fullmatch(body)
        if m is not None and m.group(1) in _SIMPLE_VALUE:
            result = _SIMPLE_VALUE[m.group(1)](_raw(m.group(2)))
            if len(self.values) < _VALUE_CACHE_MAX:
                self.values[body] = result
            return result
        m = _VALUE_LIST[indent].fullmatch(body)
        if m is not None:
            items = _LIST_ITEM[indent].findall(m.group(1))
            if len(items) == m.group(1).count("\n"):
                lst: Tree = {}
                for key, raw in items:
                    lst.setdefault(key, []).append(_raw(raw))
                result = _list_value(lst)
                if len(self.values) < _VALUE_CACHE_MAX:
                    self.values[body] = tuple(result)
                return result
        if body and not _deeper(body, indent):
            raise _OpFallback
        return _attr_value(self._generic(body))  # td / func / t / g / list_list_int … (not cached: nested)


def _deeper(body: str, indent: int) -> bool:
    """Every line of ``body`` (which starts with ``indent`` spaces) is indented at least that much."""
    return body.count("\n") - 1 == body.count("\n" + " " * indent)


def _fast_graphs(text: str, label: str) -> Optional[list[tuple[str, list[Optional[GraphNode]]]]]:
    """Graph specs read by the fast path, or None when the text needs the generic reader."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            return None
    if not text.endswith("\n"):
        text += "\n"
    try:
        return _FastReader(text, label).graphs()
    except (_Fallback, _OpFallback, RecursionError):
        return None


def _text_tree(src: "Source | tuple[str, str]", warnings: list[str]) -> tuple[Tree, str]:
    text, label = src if isinstance(src, tuple) else read_source(src)
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
    text, label = read_source(src)
    if "\x00" in text[:4096]:
        raise GraphParseError(f"{label}: binary data, not a protobuf text graph")
    with gc_paused():  # millions of small containers: cyclic GC passes would cost ~30 %
        specs = _fast_graphs(text, label)
        if specs is not None:
            return _assemble(specs, label, "ge_text", warns)
        root, label = _text_tree((text, label), warns)
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
