"""MindSpore ``.ir`` text reader (FORMATS.md §6): nodes, edges, types, attrs and source stacks.

The text is line oriented but varies across releases (r1.x wrapped headers and ``(line)``
source locations, r2.x ``# Fullname with scope`` lines, device type lines after kernel
select).  One pass over the lines builds nodes per subgraph; ``%N`` references are
resolved when the subgraph closes, because ``%N`` ids restart in every subgraph.
A node that cannot be read is skipped with a warning; only a text with no node at all
is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from dumpscope.core.model import Graph, GraphNode, SourceLine
from dumpscope.core.graphs.source_frames import parse_frame
from dumpscope.core.names import OP_COUNTER

from .common import GraphParseError, Source, ms_dtype, one_line, read_source

KIND = "ms_ir"

_ENTRY_RE = re.compile(r"^#\s*IR entry\s*:\s*@(\S+)")
#: ``%para3_fc.weight: <Ref[…]> …``; a kernel graph's input handed from another graph has no name
#: (``%para1_: <Tensor[Float32], (2, 4)> …``, MindSpore 2.10 control flow): a name never holds a colon
_PARAM_RE = re.compile(r"^%para(\d+)_([^\s:]*)\s*:\s*(<.*)$")
_NODE_RE = re.compile(r"^%(\d+)\(([^()]*)\)\s*=\s*(.*)$", re.S)
_RETURN_RE = re.compile(r"^([Rr]eturn)\s*(\(.*)$", re.S)
_SUBGRAPH_RE = re.compile(r"^subgraph\s+@(\S+?)(?:\s+parent:.*?)?\((.*)$", re.S)
_FULLNAME_RE = re.compile(r"full[ _]?name[ _]with[ _]scope\s*:\s*\((.*)\)\s*$", re.I)
_SCOPE_RE = re.compile(r"^#\s*scope\s*:\s*\((.*)\)\s*$", re.I)
_GRAPH_PARAMS_RE = re.compile(r"^#\s*Parameters\s*:\s*\d+\s*,\s*(\(.*\))\s*$")
_DEVICE_RE = re.compile(
    r"^<\s*([A-Za-z][A-Za-z0-9_]*?)x([A-Za-z][A-Za-z0-9_]*)\s*\[const vector\]\s*[\[{]([^\]}]*)[\]}]"
)
_TENSOR_DTYPE_RE = re.compile(r"Tensor[\[(]([A-Za-z0-9_]+)[\])]")
_SHAPE_RE = re.compile(r"[\[(]\s*(-?\d+(?:\s*,\s*-?\d+)*\s*,?)?\s*[\])]")
_INT_RE = re.compile(r"-?\d+")
_TGI_INDEX_RE = re.compile(r"^(?:I64|I32|Int64|Int32)?\(?\s*(-?\d+)\s*\)?$")
_MAX_JOIN = 400

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}


# ---- small text helpers -----------------------------------------------------------------


def _depth(text: str) -> int:
    """Unclosed bracket count of ``text`` (quotes respected); joins wrapped r1.x headers."""
    if '"' not in text:
        return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
    depth = 0
    quote = False
    esc = False
    for ch in text:
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                quote = False
        elif ch == '"':
            quote = True
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
    return depth


def _match(text: str, start: int, angle: bool = False) -> int:
    """Index of the bracket closing ``text[start]``, or -1 when the text ends first."""
    depth = 0
    quote = False
    esc = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                quote = False
            continue
        if ch == '"':
            quote = True
        elif ch in _OPEN or (angle and ch == "<"):
            depth += 1
        elif ch in _CLOSE or (angle and ch == ">" and text[i - 1] != "-"):
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_top(text: str, angle: bool = False) -> list[str]:
    """Split on commas outside brackets and quotes; empty text gives no items."""
    items: list[str] = []
    depth = 0
    quote = False
    esc = False
    start = 0
    for i, ch in enumerate(text):
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                quote = False
            continue
        if ch == '"':
            quote = True
        elif ch in _OPEN or (angle and ch == "<"):
            depth += 1
        elif ch in _CLOSE or (angle and ch == ">" and text[i - 1 : i] != "-"):
            depth -= 1
        elif ch == "," and depth <= 0:
            items.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    if last or items:
        items.append(last)
    return items


def _paren_groups(text: str) -> list[str]:
    """The contents of each top-level ``( … )`` group of a type line, in order."""
    groups: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "(":
            end = _match(text, i)
            if end < 0:
                break
            groups.append(text[i + 1 : end])
            i = end + 1
        else:
            i += 1
    return groups


def _ints(text: str) -> list[int]:
    return [int(x) for x in _INT_RE.findall(text)]


# ---- abstracts (types and shapes) ---------------------------------------------------------


def _device_desc(item: str) -> Optional[dict[str, Any]]:
    """``<Float32xDefaultFormat[const vector]{8, 1}>`` → dtype/device_format/device_shape."""
    m = _DEVICE_RE.match(item.strip())
    if not m:
        return None
    return {"dtype": ms_dtype(m.group(1)), "device_format": m.group(2), "device_shape": _ints(m.group(3))}


def _host_descs(item: str) -> list[dict[str, Any]]:
    """One host abstract → descs: one per tensor (a tuple abstract may hold several)."""
    body = item.strip()
    if body.startswith("<") and body.endswith(">"):
        body = body[1:-1].strip()
    head = re.match(r"[A-Za-z_]\w*", body)
    kind = head.group(0) if head else ""
    if kind in ("Tuple", "List"):
        dtypes: list[str] = []
        for m in re.finditer(r"Tensor[\[(](\w+)[\])](?:\*(\d+))?", body):
            dtypes.extend([ms_dtype(m.group(1))] * int(m.group(2) or 1))
        shapes_at = body.find("Shape(")
        outer = _paren_groups(body[shapes_at + 5 :]) if shapes_at >= 0 else []
        shapes = [_ints(g) for g in _paren_groups(outer[0])] if outer else []
        if dtypes and len(shapes) == len(dtypes):
            return [{"dtype": d, "shape": s} for d, s in zip(dtypes, shapes)]
        return [{"dtype": "", "shape": [], "abstract": kind.lower()}]
    m = _TENSOR_DTYPE_RE.search(body)
    if m:
        shape_m = _SHAPE_RE.search(body, m.end())
        shape = _ints(shape_m.group(1) or "") if shape_m else []
        return [{"dtype": ms_dtype(m.group(1)), "shape": shape}]
    dtype = ms_dtype(kind)
    if dtype:
        return [{"dtype": dtype, "shape": []}]
    return [{"dtype": "", "shape": [], "abstract": kind}]


def _angle_items(text: str) -> list[str]:
    """Top-level ``<…>`` items of a parameter line (host abstract, device type)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "<":
            end = _match(text, i, angle=True)
            if end < 0:
                break
            out.append(text[i : end + 1])
            i = end + 1
        else:
            i += 1
    return out


def _merge_device(descs: list[dict[str, Any]], devices: list[dict[str, Any]]) -> None:
    """Attach device format/shape to host descs by position (adding descs if host had none)."""
    for i, dev in enumerate(devices):
        if i < len(descs):
            target = descs[i]
            target["device_format"] = dev["device_format"]
            target["device_shape"] = dev["device_shape"]
            if not target.get("dtype") and dev["dtype"]:
                target["dtype"] = dev["dtype"]
        else:
            descs.append({"dtype": dev["dtype"], "shape": [], **{k: dev[k] for k in ("device_format", "device_shape")}})


# ---- attribute dicts ------------------------------------------------------------------------


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return value[1:-1]
    return value


def _parse_dict(body: str) -> dict[str, str]:
    """``{k: v, k2: (1, 2)}`` body → {k: text}; keys keep their spelling."""
    out: dict[str, str] = {}
    for item in _split_top(body):
        key, sep, value = item.partition(":")
        if sep and key.strip():
            out[key.strip()] = _unquote(value)
    return out


def _parse_tail(tail: str) -> dict[str, str]:
    """Attribute dicts after the argument list, flattened (first dict wins a key clash)."""
    attrs: dict[str, str] = {}
    i = 0
    label = ""
    while i < len(tail):
        ch = tail[i]
        if ch == "{":
            end = _match(tail, i)
            if end < 0:
                break
            for key, value in _parse_dict(tail[i + 1 : end]).items():
                key = key.replace(" ", "_") if not label else key
                if key in attrs and attrs[key] != value:
                    attrs[f"{label or 'attrs'}.{key}"] = value
                else:
                    attrs.setdefault(key, value)
            label = ""
            i = end + 1
            continue
        m = re.match(r"([A-Za-z_]\w*)\s*:\s*(?=\{)", tail[i:])
        if m:
            label = m.group(1)
            i += m.end()
            continue
        i += 1
    return attrs


# ---- node building ------------------------------------------------------------------------


@dataclass
class _Pending:
    """A node being read: raw args are resolved to names when its subgraph closes."""

    node_id: str  # "12" for %12, "" for Return
    debug: str
    callee: str
    args: list[str]
    attrs: dict[str, Any]
    graph: str
    fullname: str = ""
    host_seen: bool = False
    input_descs: list[dict[str, Any]] = field(default_factory=list)
    output_descs: list[dict[str, Any]] = field(default_factory=list)
    source: list[SourceLine] = field(default_factory=list)
    node: Optional[GraphNode] = None


class _IrReader:
    """State machine over logical lines; see the module docstring."""

    def __init__(self, label: str, warnings: list[str]):
        self.label = label
        self.warnings = warnings
        self.entry = ""
        self.subgraph_names: list[str] = []
        self.nodes: dict[str, GraphNode] = {}
        self.current_graph: Optional[str] = None
        self.pending: list[_Pending] = []
        self.node: Optional[_Pending] = None
        self.graph_param_descs: list[dict[str, Any]] = []
        self.param_names: dict[str, str] = {}  # "%para3_x" → node name

    # -- bookkeeping
    def warn(self, lineno: int, msg: str) -> None:
        self.warnings.append(f"{self.label}:{lineno}: {one_line(msg)}")

    def unique(self, name: str) -> str:
        if name not in self.nodes:
            return name
        n = 2
        while f"{name}#{n}" in self.nodes:
            n += 1
        return f"{name}#{n}"

    def graph_name(self) -> str:
        return self.current_graph or self.entry or "graph"

    # -- parameters
    def add_param(self, index: str, name: str, rest: str, graph: str) -> None:
        items = _angle_items(rest)
        descs: list[dict[str, Any]] = _host_descs(items[0]) if items else []
        devices = [d for d in (_device_desc(x) for x in items[1:]) if d]
        _merge_device(descs, devices)
        attrs: dict[str, Any] = {}
        if "has_default" in rest:
            attrs["has_default"] = "true"
        weight = re.search(r"IsWeight\s*:\s*(\w+)", rest)
        if weight:
            attrs["is_weight"] = weight.group(1)
        self._param_node(index, name, descs, attrs, graph)

    def _param_node(self, index: str, name: str, descs: list[dict[str, Any]], attrs: dict[str, Any], graph: str) -> None:
        ref = f"%para{index}_{name}"
        if ref in self.param_names:
            return
        name = name or f"%para{index}"  # unnamed (its users spell it ``%para1_▸фx``): the .ir's own handle
        node_name = name if name not in self.nodes else self.unique(name)
        self.param_names[ref] = node_name
        self.nodes[node_name] = GraphNode(
            name=node_name, type="Parameter", attrs=attrs, output_descs=descs, graph=graph, node_id=f"%para{index}"
        )

    # -- nodes
    def start_node(self, lineno: int, node_id: str, debug: str, rest: str) -> None:
        rest = rest.strip()
        depth = 0
        paren = -1
        for i, ch in enumerate(rest):
            if ch in "[{":
                depth += 1
            elif ch in "]}":
                depth -= 1
            elif ch == "(" and depth == 0:
                paren = i
                break
        end = _match(rest, paren) if paren >= 0 else -1
        if paren < 0 or end < 0:
            self.warn(lineno, f"unreadable node %{node_id}({debug}): {rest[:80]}")
            self.node = None
            return
        callee = rest[:paren].strip()
        attrs: dict[str, Any] = _parse_tail(rest[end + 1 :])
        if re.fullmatch(r"[A-Za-z_][\w.]*", callee):
            op_type = callee[len("PrimFunc_") :] if callee.startswith("PrimFunc_") else callee
            if op_type != callee:
                attrs["raw_type"] = callee
        else:
            op_type = "Call"
            attrs["callee"] = callee
        if debug:
            attrs["debug_name"] = debug
        pend = _Pending(node_id, debug, op_type, _split_top(rest[paren + 1 : end]), attrs, self.graph_name())
        self.pending.append(pend)
        self.node = pend

    def node_colon_line(self, text: str) -> None:
        node = self.node
        assert node is not None
        body = text[1:].strip()
        m = _FULLNAME_RE.search(body)
        if m:
            node.fullname = node.fullname or m.group(1).strip()
            return
        groups = _paren_groups(body)
        if not groups:
            return
        if "<" not in body:
            candidate = groups[0].strip()
            if len(groups) == 1 and "->" not in body and ("/" in candidate or OP_COUNTER.search(candidate)):
                node.fullname = node.fullname or candidate
            return  # kernel object types "(Tensor, Tensor) -> (Tensor)"
        ins = _split_top(groups[0], angle=True)
        outs = _split_top(groups[-1], angle=True) if len(groups) > 1 else []
        in_dev = [_device_desc(x) for x in ins]
        out_dev = [_device_desc(x) for x in outs]
        if any(in_dev) or any(out_dev):
            _merge_device(node.input_descs, [d for d in in_dev if d])
            _merge_device(node.output_descs, [d for d in out_dev if d])
        elif not node.host_seen:
            node.host_seen = True
            node.input_descs = [d for x in ins for d in _host_descs(x)[:1]]
            node.output_descs = [d for x in outs for d in _host_descs(x)]

    def node_comment(self, text: str) -> None:
        node = self.node
        assert node is not None
        m = _FULLNAME_RE.search(text)
        if m:
            node.fullname = node.fullname or m.group(1).strip()
            return
        m = _SCOPE_RE.match(text)
        if m:
            node.attrs.setdefault("scope", m.group(1).strip())
            return
        frame = parse_frame(text)  # every source style of r1.x–r2.10, ``# inlined:`` frames included
        if frame is not None:
            node.source.append(SourceLine(file=frame["file"], line=frame["line"], code=frame["code"]))

    def finish_node(self) -> None:
        pend = self.node
        self.node = None
        if pend is None:
            return
        name = pend.fullname
        if not name or name.isdigit():
            name = f"{pend.graph}/%{pend.node_id}({pend.debug})" if pend.node_id else f"{pend.graph}/{pend.callee}"
        name = self.unique(name)
        pend.node = GraphNode(
            name=name,
            type=pend.callee,
            attrs=pend.attrs,
            input_descs=pend.input_descs,
            output_descs=pend.output_descs,
            source=pend.source,
            graph=pend.graph,
            node_id=f"%{pend.node_id}" if pend.node_id else "",
        )
        self.nodes[name] = pend.node

    def close_graph(self) -> None:
        """Resolve ``%N`` args of the nodes read since the last close (one subgraph)."""
        self.finish_node()
        by_id = {p.node_id: p for p in self.pending if p.node_id and p.node}
        tuple_items: dict[str, tuple[str, int]] = {}
        for p in self.pending:
            if p.callee == "TupleGetItem" and len(p.args) >= 2 and p.args[0].startswith("%"):
                idx = _TGI_INDEX_RE.match(p.args[1].strip())
                src = by_id.get(p.args[0][1:])
                if idx and src and src.node:
                    tuple_items[p.node_id] = (src.node.name, int(idx.group(1)))
        for p in self.pending:
            if not p.node:
                continue
            inputs: list[str] = []
            for i, arg in enumerate(p.args):
                ref = arg[1:] if arg.startswith("%") else ""
                if ref.isdigit():
                    if p.node_id in tuple_items and i == 0:
                        inputs.append("%s:%d" % tuple_items[p.node_id])
                    elif ref in tuple_items:
                        inputs.append("%s:%d" % tuple_items[ref])
                    elif ref in by_id and by_id[ref].node:
                        inputs.append(f"{by_id[ref].node.name}:0")  # type: ignore[union-attr]
                    else:
                        inputs.append(arg)
                elif arg.startswith("%para"):
                    # MindSpore 2.10 marks a kernel graph's copy of a parameter at its use sites with the
                    # trace symbol ``▸`` (``%para3_▸dense2.weight``, declared ``%para3_dense2.weight``)
                    m = re.match(r"%para\d+_▸?(.+)$", arg)
                    inputs.append(f"param:{m.group(1)}" if m else arg)
                else:
                    inputs.append(arg)
            p.node.inputs = inputs
        self.pending = []

    # -- subgraphs
    def start_subgraph(self, name: str, params_text: str) -> None:
        self.close_graph()
        self.current_graph = name
        if name not in self.subgraph_names:
            self.subgraph_names.append(name)
        refs = re.findall(r"%para(\d+)_([^,()\s]+)", params_text.split(")")[0])
        for i, (index, pname) in enumerate(refs):
            descs = [self.graph_param_descs[i]] if i < len(self.graph_param_descs) else []
            self._param_node(index, pname, [dict(d) for d in descs], {}, name)
        self.graph_param_descs = []

    def end_subgraph(self) -> None:
        self.close_graph()
        self.current_graph = None


def _logical_lines(text: str):
    """Yield ``(lineno, stripped_line)``, joining wrapped node headers (r1.x) into one line."""
    lines = text.splitlines()
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i].strip()
        start = i
        i += 1
        if (line.startswith("%") or line.startswith("subgraph @") or line.startswith("Return(")) and _depth(line) > 0:
            joined = [line]
            while i < n and i - start < _MAX_JOIN and _depth("".join(joined)) > 0:
                nxt = lines[i].strip()
                if not nxt or nxt[0] in ":#}" or _NODE_RE.match(nxt) or nxt.startswith(("subgraph ", "Return(")):
                    break
                joined.append(nxt)
                i += 1
            line = "".join(joined)
        yield start + 1, line


def parse_ir(src: Source, *, warnings: Optional[list[str]] = None) -> Graph:
    """Parse a MindSpore ``.ir`` file (path) or text into one :class:`Graph`.

    Node names are full names with scope; ``inputs`` are ``producer:index``, ``param:name``
    or constant text.  Problems with single nodes are appended to ``warnings``.
    Raises :class:`GraphParseError` when no node can be read.
    """
    text, label = read_source(src)
    warns: list[str] = warnings if warnings is not None else []
    if "\x00" in text[:4096]:
        raise GraphParseError(f"{label}: binary data, not a MindSpore .ir text")
    reader = _IrReader(label, warns)
    for lineno, line in _logical_lines(text):
        if not line:
            continue
        try:
            _dispatch(reader, lineno, line)
        except (ValueError, IndexError, KeyError, AttributeError, TypeError) as exc:  # never die on one line
            reader.node = None
            reader.warn(lineno, f"skipped line: {exc}")
    reader.close_graph()
    if not reader.nodes:
        raise GraphParseError(f"{label}: no MindSpore IR nodes found")
    name = reader.entry or (reader.subgraph_names[0] if reader.subgraph_names else "graph")
    others = [g for g in reader.subgraph_names if g != name]
    return Graph(name=name, path=label, kind=KIND, nodes=reader.nodes, subgraphs=others)


def _dispatch(reader: _IrReader, lineno: int, line: str) -> None:
    """Route one logical line to the reader."""
    first = line[0]
    if reader.node is not None and first == ":":
        reader.node_colon_line(line)
        return
    if reader.node is not None and first == "#":
        reader.node_comment(line)
        return
    if first == "%":
        m = _NODE_RE.match(line)
        if m:
            reader.finish_node()
            reader.start_node(lineno, m.group(1), m.group(2), m.group(3))
            return
        m = _PARAM_RE.match(line)
        if m and reader.current_graph is None:
            reader.finish_node()
            reader.add_param(m.group(1), m.group(2), m.group(3), reader.entry or "")
            return
    m = _RETURN_RE.match(line)
    if m:
        reader.finish_node()
        reader.start_node(lineno, "", "", m.group(1) + m.group(2))
        return
    reader.finish_node()
    if first == "}":
        reader.end_subgraph()
        return
    if line.startswith("subgraph @"):
        m = _SUBGRAPH_RE.match(line)
        if m:
            reader.start_subgraph(m.group(1), m.group(2))
        else:
            reader.warn(lineno, f"unreadable subgraph header: {line[:80]}")
        return
    if first == "#":
        m = _ENTRY_RE.match(line)
        if m:
            reader.entry = reader.entry or m.group(1)
            return
        m = _GRAPH_PARAMS_RE.match(line)
        if m:
            reader.graph_param_descs = [
                d for item in _split_top(m.group(1)[1:-1], angle=True) for d in _host_descs(item)[:1]
            ]
