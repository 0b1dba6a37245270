"""Graph parsers: MindSpore ``.ir`` text and GE graph dumps (``ge_proto_*.txt``, atc JSON).

Graphs give dumps their edges, attributes and source lines.  Entry points:

* :func:`detect_graph_kind` — which parser a file name calls for (``None``: not a graph);
* :func:`load_graph_file` — parse a file of a given kind into ``list[Graph]``;
* :func:`sanitize_name` — the dump-file spelling of a graph-side name, used for joining.

Every parser raises only :class:`GraphParseError` for bad input.
"""

from __future__ import annotations

import importlib
import os
import re
from typing import TYPE_CHECKING, Any, Optional

from dumpscope.core.model import Graph
from dumpscope.core.names import sanitize_name

from .common import GraphParseError

if TYPE_CHECKING:
    from .ge_text import parse_ge_json, parse_ge_onnx, parse_ge_text
    from .ms_ir import parse_ir

#: the parsers' modules, imported on first use (PEP 562): every ``core.graphs.*`` import runs this
#: package first, and most commands never parse a graph (a warm index has the joins stored), while
#: the parsers' regexes and records cost every process ~4 ms of start-up
_LAZY = {"parse_ge_json": ".ge_text", "parse_ge_onnx": ".ge_text", "parse_ge_text": ".ge_text", "parse_ir": ".ms_ir"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "GraphParseError",
    "detect_graph_kind",
    "sniff_ge_json",
    "load_graph_file",
    "parse_ge_json",
    "parse_ge_onnx",
    "parse_ge_text",
    "parse_ir",
    "sanitize_name",
]

# ge_proto_{idx:08d}[_aclop]_graph_{id}_{stage}.txt, old ge_proto_{idx:05d}_{stage}.txt
_GE_PROTO_RE = re.compile(r"^ge_proto_\d+_.+\.txt$")
_GE_ONNX_RE = re.compile(r"^ge_onnx_\d+_.+\.pbtxt$")
_MS_TRACE_RE = re.compile(r"^ms_output_trace_code_graph_\d+\.(ir|pb)$")


def detect_graph_kind(filename: str) -> Optional[str]:
    """Kind of graph file from its name: ``ms_ir``, ``ms_pb``, ``ge_text``, ``ge_onnx``, ``ge_json`` or None.

    ``.pb`` counts only as MindSpore's ``ms_output_trace_code_graph_{id}.pb`` or inside a
    ``graphs/`` folder (many other ``.pb`` files are not graphs); ``.json`` only when the
    name starts with ``ge_proto_`` (an ``atc --mode=5`` rendering of the text graph).
    """
    norm = filename.replace("\\", "/")
    base = norm.rsplit("/", 1)[-1]
    parent = norm.rsplit("/", 2)[-2] if norm.count("/") >= 1 else ""
    if _GE_PROTO_RE.match(base):
        return "ge_text"
    if _GE_ONNX_RE.match(base):
        return "ge_onnx"
    if base.startswith("ge_proto_") and base.endswith(".json"):
        return "ge_json"
    m = _MS_TRACE_RE.match(base)
    if m:
        return "ms_ir" if m.group(1) == "ir" else "ms_pb"
    if base.endswith(".ir") and len(base) > 3:
        return "ms_ir"
    if base.endswith(".pb") and parent == "graphs":
        return "ms_pb"
    return None


_JSON_SNIFF_BYTES = 1 << 16


def sniff_ge_json(path: str | os.PathLike[str]) -> bool:
    """An ``atc --mode=1|5 --json=…`` file under any name: a JSON object holding GE ``graph`` /
    ``op`` entries (only the first 64 KiB are read; an unreadable file is not a graph)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_JSON_SNIFF_BYTES)
    except OSError:
        return False
    text = head.lstrip()
    return text.startswith(b"{") and b'"graph"' in head and b'"op"' in head and b'"type"' in head and \
        (b'"attr"' in head or b'"input_desc"' in head or b'"output_desc"' in head)


def load_graph_file(path: str | os.PathLike[str], kind: Optional[str] = None, *, warnings: Optional[list[str]] = None) -> list[Graph]:
    """Parse the graph file at ``path`` as ``kind`` (detected from the name when None).

    Returns one Graph for a MindSpore ``.ir``; one per ``graph {}`` (root first) for GE
    files.  Per-node problems go to ``warnings``.  Raises GraphParseError for an unknown
    kind, an unreadable file or a file with nothing usable.
    """
    spath = os.fspath(path)
    kind = kind or detect_graph_kind(spath)
    if kind == "ms_ir":
        from .ms_ir import parse_ir

        return [parse_ir(path, warnings=warnings)]
    if kind in ("ge_text", "ge_json", "ge_onnx"):
        from . import ge_text

        parse = {"ge_text": ge_text.parse_ge_text, "ge_json": ge_text.parse_ge_json, "ge_onnx": ge_text.parse_ge_onnx}
        return parse[kind](path, warnings=warnings)
    if kind == "ms_pb":
        from .ms_pb import parse_ms_pb

        return [parse_ms_pb(spath, warnings=warnings)]
    raise GraphParseError(f"{spath}: not a known graph file kind ({kind!r})")
