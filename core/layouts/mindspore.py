"""MindSpore graph-mode synchronous/e2e dumps (and msaccucmp-converted npy).

Reads names and npy headers only (FORMATS.md §5):

* 2.x npy ``{op_type}.{op_name}.{task}.{stream}.{ts}.{input|output}.{slot}.{format}[.{dtype}].npy``
  (the dtype field appears in r2.4+, spelled ``float32`` in docs and ``Float32`` by 2.10);
* msaccucmp ``convert`` output ``{dump file}.{input|output}.{i}[.{AxB}].npy``;
* r1.0–1.2 raw ``{op_name}_{input|output}_{idx}_shape_{dims}_{dtype}_{format}.bin``;
* ``execution_order/`` CSVs, ``graphs/*.ir|.pb``, ``.dump_metadata/``, ``statistic.csv``,
  ``mapping.csv``.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Iterator, Optional

from dumpscope.core.formats.dtypes import normalize_dtype, npy_words_named
from dumpscope.core.errors import reason
from dumpscope.core.formats.npy_header import read_npy_header
from dumpscope.core.layouts.base import DirListing, Item, Layout, as_int, rank_from_parts
from dumpscope.core.layouts.paths import place_of
from dumpscope.core.model import (
    STORAGE_NPY,
    STORAGE_RAW,
    ExecOrder,
    GraphFile,
    Problem,
    TensorRecord,
)
from dumpscope.core.names import OP_COUNTER

_IO = {"input", "output"}
_SHAPE_TOKEN = re.compile(r"^\d+(?:x\d+)*$")
_OLD_BIN = re.compile(
    r"^(?P<op>.+?)_(?P<io>input|output)_(?P<slot>\d+)_shape_(?P<dims>(?:\d+_)*)"
    r"(?P<dtype>(?:kNumberType)?[A-Z][A-Za-z]*\d*)_(?P<fmt>[A-Za-z0-9_]+)\.bin$"
)
_EXEC_ORDER = re.compile(r"^ms_execution_order_graph_(\d+)\.csv$")
_GLOBAL_ORDER = re.compile(r"^ms_global_execution_order_graph_(\d+)\.csv$")
_GRAPH_FILE = re.compile(r"^(?:ms_output_)?.*?graph_(\d+)\.(ir|pb)$")


class NpyName:
    """The fields of a MindSpore / msaccucmp npy dump name."""

    __slots__ = ("op_type", "op_name", "task", "stream", "timestamp", "io", "slot", "format", "dtype", "kind")

    def __init__(self, op_type: str, op_name: str, task: Optional[int], stream: Optional[int],
                 timestamp: Optional[int], io: str, slot: int, fmt: str, dtype: str, kind: str) -> None:
        self.op_type, self.op_name, self.task, self.stream = op_type, op_name, task, stream
        self.timestamp, self.io, self.slot, self.format, self.dtype, self.kind = timestamp, io, slot, fmt, dtype, kind


def parse_npy_name(filename: str) -> Optional[NpyName]:
    """Split a MindSpore or msaccucmp-converted ``.npy`` name; ``None`` if it is neither.

    The op name may itself contain dots only in the ``-t msnpy``-free forms we see, so the
    split anchors on the last ``input``/``output`` token followed by a slot number.
    """
    if not filename.endswith(".npy"):
        return None
    tokens = filename[:-4].split(".")
    for i in range(len(tokens) - 2, 4, -1):
        if tokens[i] in _IO and tokens[i + 1].isdigit():
            tail = tokens[i + 2:]
            head = tokens[:i]
            if len(head) < 5:
                return None
            op_type = head[0]
            task, stream, ts = as_int(head[-3]), as_int(head[-2]), as_int(head[-1])
            op_name = ".".join(head[1:-3])
            if ts is None or not op_name:
                # old name without stream id: {type}.{name}.{task}.{ts}
                task, stream, ts = as_int(head[-2]), None, as_int(head[-1])
                op_name = ".".join(head[1:-2])
                if ts is None or not op_name:
                    return None
            slot = int(tokens[i + 1])
            if not tail:
                return NpyName(op_type, op_name, task, stream, ts, tokens[i], slot, "ND", "", "converted")
            if len(tail) == 1 and _SHAPE_TOKEN.match(tail[0]):
                return NpyName(op_type, op_name, task, stream, ts, tokens[i], slot, "NCHW", "", "converted")
            if len(tail) == 1:
                return NpyName(op_type, op_name, task, stream, ts, tokens[i], slot, tail[0], "", "mindspore")
            if len(tail) == 2:
                return NpyName(op_type, op_name, task, stream, ts, tokens[i], slot, tail[0], tail[1], "mindspore")
            return None
    return None


def parse_old_bin_name(filename: str) -> Optional[tuple[str, str, str, int, tuple[int, ...], str, str]]:
    """Split an r1.0–1.2 sync ``.bin`` name → (op_name, op_type, io, slot, shape, dtype, format)."""
    m = _OLD_BIN.match(filename)
    if not m:
        return None
    op_name = m.group("op").replace("--", "/")
    last = op_name.rsplit("/", 1)[-1]
    sm = OP_COUNTER.search(last)
    op_type = last[:sm.start()] if sm else ("Parameter" if "/" not in op_name else last)
    dims = tuple(int(d) for d in m.group("dims").split("_") if d)
    return op_name, op_type, m.group("io"), int(m.group("slot")), dims, m.group("dtype"), m.group("fmt")


#: an execution order naming more kernels than this is not used (a named problem): each name costs
#: about 1 KB through indexing and joining (a 1M-line CSV took 1 GB and 43 s for no dump data at all),
#: and real kernel graphs stay far below it
MAX_EXEC_ORDER_NAMES = 500_000


class ExecOrderTooLong(ValueError):
    """An execution-order CSV longer than ``MAX_EXEC_ORDER_NAMES`` (read up to the limit only)."""


def read_exec_order(path: str, max_names: Optional[int] = None) -> list[str]:
    """Read ``ms_execution_order_graph_N.csv``: an optional header line, then one name a line.
    Streams the file and stops with ``ExecOrderTooLong`` past ``max_names`` names."""
    limit = MAX_EXEC_ORDER_NAMES if max_names is None else max_names
    names: list[str] = []
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for i, line in enumerate(fh):
            name = line.strip().strip('"')
            if not name or (i == 0 and name.startswith("NodeExecutionOrder")):
                continue
            if len(names) >= limit:
                raise ExecOrderTooLong(f"more than {limit:,} names")
            names.append(name)
    return names


def read_mapping(path: str) -> dict[str, str]:
    """``mapping.csv``: ``{alias},{original file name}`` per line, no header."""
    out: dict[str, str] = {}
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            alias, sep, original = line.strip().partition(",")
            if sep and alias and original:
                out[alias.strip()] = original.strip()
    return out


class MindSporeLayout(Layout):
    name = "mindspore"
    title = "MindSpore sync/e2e dump (npy / bin)"

    def scan_dir(self, listing: DirListing) -> Iterable[Item]:
        folder = listing.parts[-1] if listing.parts else ""
        if folder == "execution_order":
            yield from self._exec_orders(listing)
            return
        if folder == "graphs":
            yield from self._graphs(listing)
            return
        if folder in (".dump_metadata", ".metadata"):
            listing.claimed.update(n for n in listing.files if n.endswith(".json"))
            return
        aliases: dict[str, str] = {}
        if "mapping.csv" in listing.files:
            try:
                aliases = read_mapping(listing.path("mapping.csv"))
            except OSError as exc:
                yield Problem(listing.path("mapping.csv"), f"cannot read mapping.csv: {exc.strerror or exc}")
        place = None
        used_alias = False
        for fname in list(listing.unclaimed()):
            if fname.endswith(".npy"):
                real = fname
                head = fname.split(".", 1)[0]
                if head.isdigit() and fname in aliases:
                    real, used_alias = aliases[fname], True
                elif head.isdigit() and head in aliases:
                    real, used_alias = aliases[head] + fname[len(head):], True
                parsed = parse_npy_name(real)
                if parsed is None:
                    continue
                if place is None:
                    place = place_of(listing.parts)
                listing.claimed.add(fname)
                yield self._npy_record(listing, fname, parsed, place)
            elif fname.endswith(".bin"):
                old = parse_old_bin_name(fname)
                if old is None:
                    continue
                listing.claimed.add(fname)
                yield self._bin_record(listing, fname, old)
        if used_alias:
            listing.claimed.add("mapping.csv")

    # -- pieces -------------------------------------------------------------------------

    def _npy_record(self, listing: DirListing, fname: str, p: NpyName, place) -> Item:
        path = listing.path(fname)
        try:
            hdr = read_npy_header(path)
        except Exception as exc:  # every reader error becomes a named problem
            return Problem(path, reason(exc, path))
        stored = hdr.dtype
        logical = normalize_dtype(p.dtype) if p.dtype else stored
        if logical != stored and npy_words_named(logical, stored):
            stored = logical  # integer words of the name's bfloat16/float8 bits: what the bytes are
        rec = TensorRecord(
            producer="mindspore" if p.kind == "mindspore" else "msaccucmp_npy",
            path=path,
            op_type=p.op_type,
            op_name=p.op_name,
            file_name=p.op_name,
            io=p.io,
            slot=p.slot,
            dtype=logical,
            shape=tuple(hdr.shape),
            format=p.format,
            device_shape=tuple(hdr.shape),
            rank=place.rank,
            step=place.step,
            graph=place.graph,
            task=p.task,
            stream=p.stream,
            timestamp=p.timestamp,
            storage=STORAGE_NPY,
            stored_dtype=stored,
            offset=hdr.data_offset,
            nbytes=hdr.nbytes,
            order_hint=float(p.timestamp or 0),
        )
        if hdr.file_size < hdr.data_offset + hdr.nbytes:
            return Problem(path, f"truncated npy: {hdr.file_size} bytes, header promises "
                                 f"{hdr.data_offset + hdr.nbytes}")
        if hdr.oversized:  # e.g. a Float16 name and '<f2' header over a float32 payload: never read as labelled
            return Problem(path, hdr.size_problem("npy").split(": ", 1)[1])
        return rec

    def _bin_record(self, listing: DirListing, fname: str, old) -> Item:
        op_name, op_type, io, slot, shape, dtype_tok, fmt = old
        path = listing.path(fname)
        try:
            size = os.stat(path).st_size
            dtype = normalize_dtype(dtype_tok)
        except (OSError, ValueError) as exc:
            return Problem(path, reason(exc, path))
        place = place_of(listing.parts)
        return TensorRecord(
            producer="mindspore_bin", path=path, op_type=op_type, op_name=op_name,
            file_name=op_name.replace("/", "_"), io=io, slot=slot, dtype=dtype, shape=shape,
            format=fmt, device_shape=shape, rank=place.rank, step=place.step, graph=place.graph,
            storage=STORAGE_RAW, stored_dtype=dtype, offset=0, nbytes=size,
        )

    def _exec_orders(self, listing: DirListing) -> Iterator[Item]:
        rank = rank_from_parts(listing.parts)
        for fname in listing.files:
            m = _EXEC_ORDER.match(fname)
            if m:
                listing.claimed.add(fname)
                try:
                    yield ExecOrder(rank=rank, graph=m.group(1), names=read_exec_order(listing.path(fname)),
                                    source=listing.path(fname))
                except OSError as exc:
                    yield Problem(listing.path(fname), f"cannot read execution order: {exc.strerror or exc}")
                except ExecOrderTooLong as exc:
                    yield Problem(listing.path(fname), f"execution order too long ({exc}): not used, ops keep "
                                                       "their dump-time order")
            elif _GLOBAL_ORDER.match(fname):
                listing.claimed.add(fname)

    def _graphs(self, listing: DirListing) -> Iterator[Item]:
        rank = rank_from_parts(listing.parts)
        for fname in listing.files:
            m = _GRAPH_FILE.match(fname)
            if m:
                listing.claimed.add(fname)
                yield GraphFile(path=listing.path(fname), kind="ms_ir" if m.group(2) == "ir" else "ms_pb",
                                rank=rank, graph=m.group(1))
            elif fname.endswith(".ir"):
                listing.claimed.add(fname)
                yield GraphFile(path=listing.path(fname), kind="ms_ir", rank=rank, graph="")
