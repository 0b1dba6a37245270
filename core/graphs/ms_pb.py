"""MindSpore ``ms_output_trace_code_graph_{id}.pb`` (FORMATS.md §5.5): the binary twin of the ``.ir``.

Read only when no ``.ir`` of the graph exists.  The file is a ``debugger.ModelProto`` of
MindInsight's ``ms_graph.proto`` (field numbers below); it is decoded straight from the
protobuf wire format, so no generated module is needed and unknown fields are skipped:

* ``ModelProto``: ``graph = 4``;
* ``GraphProto``: ``node = 1``, ``name = 2``, ``parameters = 3`` (``ParameterProto.name = 1``),
  ``const_vals = 5`` (``NamedValueProto.key = 1``);
* ``NodeProto``: ``input = 1`` (``InputProto``: ``name = 1``, ``type = 2``, 1 = control edge),
  ``name = 2`` (a node number, what inputs refer to), ``op_type = 3``, ``scope = 4``,
  ``attribute = 5`` (``name = 1``, ``value = 2``), ``full_name = 8``, and — seen in MindSpore
  2.10 output, not in the published proto — ``9``: the node's ``# In file`` source lines.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from dumpscope.core.model import Graph, GraphNode, SourceLine

from .common import GraphParseError, Source, one_line

KIND = "ms_pb"


class _Truncated(ValueError):
    pass


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(buf):
            raise _Truncated("truncated varint")
        c = buf[i]
        i += 1
        result |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return result, i
        if shift > 70:
            raise _Truncated("varint too long")


def _fields(buf: bytes) -> Iterator[tuple[int, Any]]:
    """``(field number, value)``: ints for varints, bytes for length-delimited and fixed fields."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise _Truncated("truncated field")
            value, i = buf[i:i + n], i + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            value, i = buf[i:i + n], i + n
        else:
            raise _Truncated(f"wire type {wire}")
        yield number, value


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _first(buf: bytes, number: int) -> Any:
    return next((v for n, v in _fields(buf) if n == number), None)


def _value(buf: bytes) -> Any:
    """A ``ValueProto``: the scalar or string it holds (lists as lists), else None."""
    out: dict[int, list[Any]] = {}
    for n, v in _fields(buf):
        out.setdefault(n, []).append(v)
    for n in (7, 3, 4, 2):  # str_val, int_val, uint_val, bool_val
        if n in out:
            v = out[n][0]
            return _text(v) if n == 7 else bool(v) if n == 2 else v
    if 15 in out:
        return [_text(v) for v in out[15]]
    if 11 in out:
        return list(out[11])
    return None


def parse_ms_pb(src: Source, *, warnings: Optional[list[str]] = None) -> Graph:
    """Parse a MindSpore trace-code ``.pb`` into one :class:`Graph` (like :func:`parse_ir`)."""
    from dumpscope.core.graphs.source_frames import parse_frame

    warns = warnings if warnings is not None else []
    label = str(src)
    try:
        with open(src, "rb") as fh:  # type: ignore[arg-type]
            data = fh.read()
    except OSError as exc:
        raise GraphParseError(f"{label}: cannot read: {one_line(exc)}") from None
    try:
        graph_buf = _first(data, 4)
        if not isinstance(graph_buf, bytes):
            raise GraphParseError(f"{label}: not a MindSpore graph .pb (no graph field)")
        gname = "graph"
        node_bufs: list[bytes] = []
        params: list[str] = []
        for n, v in _fields(graph_buf):
            if n == 1 and isinstance(v, bytes):
                node_bufs.append(v)
            elif n == 2:
                gname = _text(v)
            elif n == 3 and isinstance(v, bytes):
                params.append(_text(_first(v, 1) or b""))
    except _Truncated as exc:
        raise GraphParseError(f"{label}: not a MindSpore graph .pb ({exc})") from None
    graph = Graph(name=gname, path=label, kind=KIND)
    for p in params:
        if p:
            graph.nodes.setdefault(p, GraphNode(name=p, type="Parameter", graph=gname, node_id=p))
    by_number: dict[str, str] = {}
    raw: list[tuple[GraphNode, list[tuple[str, int]]]] = []
    for index, buf in enumerate(node_bufs):
        try:
            f: dict[int, list[Any]] = {}
            for n, v in _fields(buf):
                f.setdefault(n, []).append(v)
            number = _text(f.get(2, [b""])[0])
            name = _text(f.get(8, [b""])[0]) or f"{gname}/%{number}"
            node = GraphNode(name=name, type=_text(f.get(3, [b""])[0]), graph=gname, node_id=f"%{number}")
            scope = _text(f.get(4, [b""])[0])
            if scope:
                node.attrs["scope"] = scope
            for attr in f.get(5, []):
                key = _text(_first(attr, 1) or b"")
                value = _first(attr, 2)
                if key:
                    node.attrs[key] = _value(value) if isinstance(value, bytes) else None
            for text in f.get(9, []):
                for line in _text(text).splitlines():
                    frame = parse_frame(line.strip()) if "In file" in line else None
                    if frame:
                        node.source.append(SourceLine(frame["file"], frame["line"], frame["code"]))
            node.source.reverse()  # the .pb lists the innermost frame first; the .ir (and show.source) outermost
            inputs = [(_text(_first(i, 1) or b""), int(_first(i, 2) or 0)) for i in f.get(1, [])]
        except _Truncated as exc:
            warns.append(f"{label}: node {index}: skipped ({exc})")
            continue
        if name in graph.nodes:
            warns.append(f"{label}: duplicate node name {one_line(name)}")
            continue
        graph.nodes[name] = node
        by_number[number] = name
        raw.append((node, inputs))
    for node, inputs in raw:
        for ref, edge_type in inputs:
            target = by_number.get(ref)
            if edge_type == 1:
                node.control.append(target or ref)
            elif target is not None:
                node.inputs.append(f"{target}:0")
            elif ref in graph.nodes:  # a parameter
                node.inputs.append(f"param:{ref}")
            else:  # a constant (const_vals key) or something unnamed
                node.inputs.append(ref)
    if not raw:
        raise GraphParseError(f"{label}: no MindSpore graph nodes found in the .pb")
    return graph
