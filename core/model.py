"""Plain record types shared by every layer of dumpscope.

Data flows one way: a layout walks a dump tree and yields these records; the index stores
them; queries and views read them back.  Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

INPUT = "input"
OUTPUT = "output"

#: How a tensor's payload is stored, which decides how ``tensor_io`` loads it.
STORAGE_NPY = "npy"  # a .npy file (header read while indexing, data mmapped later)
STORAGE_RAW = "raw"  # raw little-endian bytes of ``stored_dtype`` (old MindSpore .bin)
STORAGE_CANN = "cann"  # a slice of a CANN binary dump file (device layout, needs conversion)
STORAGE_PT = "pt"  # a torch .pt zip read by the restricted reader
STORAGE_H5 = "h5"  # a dataset inside an .h5 file (needs optional h5py)
STORAGE_NONE = "none"  # statistics only: no tensor data exists
#: a non-tensor argument (number, bool, string, None, list, slice) of an API call: ``dtype`` is its
#: JSON type name, ``shape`` (), ``extra["value"]`` the value (INTERFACES.md §3)
STORAGE_VALUE = "value"


@dataclass(slots=True)
class TensorRecord:
    """One tensor of one op at one step on one rank, as found on disk.

    ``op_name`` is the best full name known when the record is made (the name recorded
    inside the dump, else the file-side name); the index later replaces it by the
    graph-side name when a graph joins.  ``file_name`` is always the op name exactly as
    the dump file writes it (sanitised: ``/ . \\ space`` turned into ``_``).
    """

    producer: str  # layout name, e.g. "mindspore_npy", "cann", "msprobe"
    path: str  # absolute path of the file holding the payload (or stats)
    op_type: str
    op_name: str
    file_name: str
    io: str  # INPUT or OUTPUT
    slot: int
    dtype: str  # logical dtype, numpy spelling ("float16", "bfloat16", "float8_e5m2", ...)
    shape: tuple[int, ...]  # logical (original) shape
    format: str = "ND"  # device format as dumped ("NC1HWC0", "DefaultFormat", ...)
    device_shape: tuple[int, ...] = ()
    rank: int = 0
    step: int = 0
    graph: str = ""  # graph id / model name / API dump group
    task: Optional[int] = None
    stream: Optional[int] = None
    timestamp: Optional[int] = None  # microseconds, from the file name
    storage: str = STORAGE_NPY
    stored_dtype: str = ""  # dtype of the bytes on disk when it differs from ``dtype``
    offset: int = 0  # byte offset of the payload inside ``path``
    nbytes: int = 0  # payload length in bytes
    sub_format: int = 0  # CANN sub_format (e.g. group count of a grouped FRACTAL_Z)
    order_hint: float = 0.0  # a sortable position when no execution-order file exists
    stats: Optional[dict[str, Any]] = None  # precomputed statistics (stats CSV, dump.json)
    extra: dict[str, Any] = field(default_factory=dict)  # layout-specific details (stack, kind…)

    @property
    def key(self) -> tuple[int, int, str, str]:
        """The identity of the op this tensor belongs to."""
        return (self.rank, self.step, self.graph, self.op_name)


@dataclass(slots=True)
class ExecOrder:
    """An execution order for one graph of one rank: op names, first executed first.

    ``names`` are graph-side full names (MindSpore ``execution_order`` CSV) or file-side
    names; the index matches both ways.
    """

    rank: int
    graph: str
    names: list[str]
    source: str = ""  # the file it came from


@dataclass(slots=True)
class GraphFile:
    """A graph description found while walking (``.ir``, ``ge_proto_*.txt`` …).

    The layout only reports it; graph parsers in ``core.graphs`` read it when joined.
    """

    path: str
    kind: str  # "ms_ir", "ms_pb", "ge_text", "ge_onnx"
    rank: Optional[int] = None
    graph: str = ""  # graph id (MindSpore) or "" when the file names it itself


@dataclass(slots=True)
class Problem:
    """A file or folder dumpscope could not use, with a one-line reason."""

    path: str
    error: str


@dataclass(slots=True)
class OverflowEvidence:
    """An overflow status found in an ``Opdebug.Node_OpDebug.*`` file (or its JSON).

    ``task``/``stream`` (and ``context``/``thread`` for FFTS+) identify the overflowing op
    in the same folder; ``status`` is the raw status word; ``kind`` the unit
    ("AI Core", "DHA Atomic Add", "AIC", "SDMA", …).
    """

    path: str
    rank: int
    step: int
    graph: str
    task: int
    stream: int
    status: int
    kind: str
    context: Optional[int] = None
    thread: Optional[int] = None
    folder: str = ""


@dataclass(slots=True)
class SourceLine:
    file: str
    line: int
    code: str = ""


@dataclass(slots=True)
class GraphNode:
    """One node of a parsed graph (MindSpore ``.ir`` or GE graph text).

    ``inputs`` are data producers as ``"producer_full_name:out_index"`` (or a parameter /
    constant text for MindSpore), ``control`` are control predecessors' full names.
    """

    name: str  # full name with scope as the graph writes it
    type: str
    inputs: list[str] = field(default_factory=list)
    control: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    input_descs: list[dict[str, Any]] = field(default_factory=list)  # {"dtype","shape","format",...}
    output_descs: list[dict[str, Any]] = field(default_factory=list)
    source: list[SourceLine] = field(default_factory=list)
    graph: str = ""  # name of the (sub)graph holding the node
    no_task: bool = False  # GE ``_no_task``: executes no device task, never dumped
    node_id: str = ""  # "%12" in MindSpore IR, GE OpDef.id


@dataclass(slots=True)
class Graph:
    """A parsed graph file: nodes by full name, plus derived consumers."""

    name: str
    path: str
    kind: str
    nodes: dict[str, GraphNode] = field(default_factory=dict)
    subgraphs: list[str] = field(default_factory=list)

    def consumers(self) -> dict[str, list[str]]:
        """Map each producer's full name to the names of the nodes that read its outputs."""
        seen: dict[str, dict[str, None]] = {}  # insertion-ordered sets
        nodes = self.nodes
        for node in nodes.values():
            for src in node.inputs:
                producer = src.rsplit(":", 1)[0] if ":" in src else src
                if producer in nodes:
                    seen.setdefault(producer, {})[node.name] = None
        return {producer: list(names) for producer, names in seen.items()}
