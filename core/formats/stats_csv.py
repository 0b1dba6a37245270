"""Readers for statistics-only dumps (FORMATS.md §4): CANN per-op CSVs, the adump variant, msprobe's
aggregated ``statistic.csv`` and MindSpore ``statistic.csv`` of every version.

One tolerant reader: the kind is detected from the header (matched case-insensitively, spaces
normalised, trailing empty header cells ignored); each bad row is skipped and reported in
``warnings``; only an unusable header (no io / slot column) fails the file.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from dumpscope.core.formats.dtypes import dtype_name

KIND_CANN = "cann_per_op"  # §4.1 exact header
KIND_ADUMP = "cann_adump"  # §4.2 per-op CSV with a non-default selection of items
KIND_MSPROBE = "msprobe"  # §4.3 aggregated statistic.csv (has Format and Input/Output)
KIND_MINDSPORE = "mindspore"  # §4.4 MindSpore statistic.csv (IO, no Format)

CANN_HEADER = ("Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,"
               "Nan Count,Negative Inf Count,Positive Inf Count")

#: Normalised keys always present in ``StatsRow.stats``.
STAT_KEYS = ("max", "min", "mean", "count", "nan", "neginf", "posinf", "zeros", "l2norm", "md5")

_COLUMNS: dict[str, str] = {
    "op type": "op_type", "op name": "op_name", "task id": "task", "stream id": "stream",
    "timestamp": "timestamp", "input/output": "io", "io": "io", "index": "slot", "slot": "slot",
    "data size": "size", "data type": "dtype", "format": "format", "shape": "shape",
    "max value": "max", "max": "max", "min value": "min", "min": "min", "avg value": "mean",
    "avg": "mean", "mean": "mean", "count": "count", "nan count": "nan", "negative inf count": "neginf",
    "positive inf count": "posinf", "zero count": "zeros", "l2norm": "l2norm", "l2norm value": "l2norm",
    "l2 value": "l2norm", "l2 norm": "l2norm", "md5": "md5", "md5 value": "md5",
    "negative zero count": "negzeros", "positive zero count": "poszeros",
}
_INT_STATS = {"count", "nan", "neginf", "posinf", "zeros", "negzeros", "poszeros"}
_FLOAT_STATS = {"max", "min", "mean", "l2norm"}
_NULLS = {"", "-", "na", "n/a", "null", "none"}


class StatsCsvError(ValueError):
    """A stats CSV whose header cannot be used (one line: file and problem)."""


@dataclass(slots=True)
class StatsRow:
    """One tensor's statistics line; identity fields are None when the file does not say."""

    op_type: Optional[str]
    op_name: Optional[str]
    task: Optional[int]
    stream: Optional[int]
    timestamp: Optional[int]
    io: str  # "input" | "output"
    slot: int
    dtype: str  # numpy spelling ("" when unknown)
    format: str  # "" when the file has no/unknown format
    shape: tuple[int, ...]
    size: Optional[int]
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class StatsCsv:
    path: str
    kind: str
    rows: list[StatsRow]
    warnings: list[str]


def normalize_dtype(text: str) -> str:
    """``DT_FLOAT`` → ``float32``, ``Float16`` → ``float16`` (``formats.dtypes.dtype_name``: the one
    table); ``-``/empty → ``""``."""
    if text.strip().lower() in _NULLS:
        return ""
    return dtype_name(text)


def parse_shape(text: str) -> tuple[int, ...]:
    """``4x50x50x16``, ``(32,256,13,13)``, ``[2, 3]``, ``()``, ``-`` → tuple; ValueError otherwise."""
    t = text.strip()
    if t.isdecimal():  # the common spellings first: "64", "4x16"
        return (int(t),)
    dims = t.split("x")
    if len(dims) > 1 and all(d.isdecimal() for d in dims):
        return tuple(int(d) for d in dims)
    if t.lower() in _NULLS:
        return ()
    inner = t.strip("()[] ")
    if not inner:
        return ()
    parts = [p for p in re.split(r"[x,\s]+", inner) if p]
    dims = tuple(int(p) for p in parts)
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimension in {text!r}")
    return dims


def ops_from_file_name(path: str) -> Optional[tuple[str, str, int, int, int]]:
    """``{op_type}.{op_name}.{task}.{stream}.{ts}[.ffts fields].csv`` → the 5 identity fields."""
    stem = os.path.basename(path)
    if stem.lower().endswith(".csv"):
        stem = stem[:-4]
    f = stem.split(".")
    for i in range(len(f)):
        if len(f) - i not in (5, 9):
            continue
        if all(x.isdigit() for x in f[i + 2 : i + 5]) and f[i] and f[i + 1]:
            return f[i], f[i + 1], int(f[i + 2]), int(f[i + 3]), int(f[i + 4])
    return None


def read_stats_csv(path: str) -> StatsCsv:
    """Read any §4 stats CSV; raises StatsCsvError when the file or its header is unusable."""
    try:
        data = _read_bytes(path)
    except OSError as exc:
        raise StatsCsvError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_stats_csv(data.decode("utf-8-sig", errors="replace"), path)


def _read_bytes(path: str) -> bytes:
    """The whole file through the raw descriptor (a buffered file object costs more than the read
    of a small CSV; a 64-rank statistics job has thousands)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        parts = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            parts.append(chunk)
    finally:
        os.close(fd)
    return b"".join(parts)


def parse_stats_csv(text: str, path: str = "<text>") -> StatsCsv:
    """Parse CSV text (``path`` names the file in messages and gives per-op identity fields)."""
    warnings: list[str] = []
    reader = csv.reader(io.StringIO(text.replace("\x00", "")))
    header: Optional[list[str]] = None
    records: list[tuple[int, list[str]]] = []
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            warnings.append(f"{path}:{reader.line_num}: unreadable line: {exc}")
            if len(warnings) > 10000:
                break
            continue
        if header is None:
            if not any(c.strip() for c in cells):
                continue
            header = cells
            continue
        if cells and any(c.strip() for c in cells):
            records.append((reader.line_num, cells))
    if header is None:
        raise StatsCsvError(f"{path}: empty file, no stats CSV header")
    cols, kind, unknown = _map_header(header, path)
    if unknown:
        warnings.append(f"{path}: ignored unknown columns: {', '.join(unknown)}")
    ident = None
    if kind in (KIND_CANN, KIND_ADUMP):
        ident = ops_from_file_name(path)
        if ident is None:
            warnings.append(f"{path}: file name is not {{op_type}}.{{op_name}}.{{task}}.{{stream}}.{{ts}}.csv")
    rows: list[StatsRow] = []
    width = len(cols)
    for line_no, cells in records:
        while len(cells) > width and not cells[-1].strip():
            cells = cells[:-1]
        if len(cells) != width:
            warnings.append(f"{path}:{line_no}: {len(cells)} cells, header has {width}; row skipped")
            continue
        try:
            rows.append(_row(cols, cells, ident))
        except ValueError as exc:
            warnings.append(f"{path}:{line_no}: {exc}; row skipped")
    return StatsCsv(path=path, kind=kind, rows=rows, warnings=warnings)


#: header cells -> (columns, kind, unknown columns): a job's thousands of CSVs share a few headers
_HEADERS: dict[tuple[str, ...], tuple[list[Optional[str]], str, list[str]]] = {}


def _map_header(header: list[str], path: str) -> tuple[list[Optional[str]], str, list[str]]:
    key = tuple(header)
    known = _HEADERS.get(key)
    if known is None:
        known = _map_header_cells(header, path)  # raises for an unusable header: never cached
        if len(_HEADERS) < 256:
            _HEADERS[key] = known
    cols, kind, unknown = known
    return list(cols), kind, list(unknown)


def _map_header_cells(header: list[str], path: str) -> tuple[list[Optional[str]], str, list[str]]:
    names = [" ".join(h.split()).lower() for h in header]
    while names and not names[-1]:
        names.pop()
    cols: list[Optional[str]] = []
    unknown: list[str] = []
    for raw, name in zip(header, names):
        key = _COLUMNS.get(name)
        if key is None or key in cols:
            unknown.append(raw.strip() or "<empty>")
            key = None
        cols.append(key)
    if "io" not in cols or "slot" not in cols:
        raise StatsCsvError(f"{path}: not a stats CSV header (no Input/Output or IO and Index/Slot column)")
    if "op_name" in cols:
        kind = KIND_MSPROBE if "format" in cols or "input/output" in names else KIND_MINDSPORE
    elif ",".join(h.strip() for h in header[: len(names)]) == CANN_HEADER:
        kind = KIND_CANN
    else:
        kind = KIND_ADUMP
    return cols, kind, unknown


#: the keys ``_row`` reads by position (``_plan``): -1 where the header has no such column
_FIELDS = ("io", "slot", "op_type", "op_name", "task", "stream", "timestamp", "shape", "format", "dtype", "size")

#: columns -> positions of ``_FIELDS`` and the statistics cells (column order: the first bad one is named)
_PLANS: dict[tuple[Optional[str], ...], tuple[tuple[int, ...], list[tuple[int, str, int]]]] = {}


def _plan(cols: list[Optional[str]]) -> tuple[tuple[int, ...], list[tuple[int, str, int]]]:
    key = tuple(cols)
    plan = _PLANS.get(key)
    if plan is None:
        pos = {k: i for i, k in enumerate(cols) if k is not None}
        stats = [(i, k, 0 if k in _INT_STATS else 1 if k in _FLOAT_STATS else 2) for i, k in enumerate(cols)
                 if k in _INT_STATS or k in _FLOAT_STATS or k == "md5"]
        plan = (tuple(pos.get(f, -1) for f in _FIELDS), stats)
        if len(_PLANS) < 256:
            _PLANS[key] = plan
    return plan


def _row(cols: list[Optional[str]], cells: list[str], ident: Optional[tuple[str, str, int, int, int]]) -> StatsRow:
    (io_at, slot_at, type_at, name_at, task_at, stream_at, ts_at, shape_at, fmt_at, dtype_at, size_at), \
        stat_cells = _plan(cols)
    io_cell = cells[io_at].strip() if io_at >= 0 else ""
    io_text = io_cell.lower()
    if io_text not in ("input", "output"):
        raise ValueError(f"io {io_cell!r} is not input/output")
    slot = _int(cells[slot_at].strip() if slot_at >= 0 else None, "slot")
    if slot is None:
        raise ValueError("empty slot")
    stats: dict[str, Any] = dict.fromkeys(STAT_KEYS)
    for i, key, kind in stat_cells:
        cell = cells[i].strip()
        if kind == 0:
            stats[key] = _int(cell, key)
        elif kind == 1:
            stats[key] = _float(cell, key)
        else:
            stats[key] = None if cell.lower() in _NULLS else cell
    if ident is not None:
        op_type, op_name, task, stream, ts = ident
    else:
        op_type = _str(cells[type_at].strip() if type_at >= 0 else None)
        op_name = _str(cells[name_at].strip() if name_at >= 0 else None)
        task = _int(cells[task_at].strip() if task_at >= 0 else None, "task id")
        stream = _int(cells[stream_at].strip() if stream_at >= 0 else None, "stream id")
        ts = _int(cells[ts_at].strip() if ts_at >= 0 else None, "timestamp")
    shape_cell = cells[shape_at].strip() if shape_at >= 0 else ""
    try:
        shape = parse_shape(shape_cell)
    except ValueError:
        raise ValueError(f"bad shape {shape_cell!r}") from None
    fmt = cells[fmt_at].strip() if fmt_at >= 0 else ""
    return StatsRow(
        op_type=op_type, op_name=op_name, task=task, stream=stream, timestamp=ts, io=io_text,
        slot=slot, dtype=normalize_dtype(cells[dtype_at].strip() if dtype_at >= 0 else ""),
        format="" if fmt.lower() in _NULLS else fmt, shape=shape,
        size=_int(cells[size_at].strip() if size_at >= 0 else None, "data size"), stats=stats,
    )


def _str(cell: Optional[str]) -> Optional[str]:
    return None if cell is None or cell.lower() in _NULLS else cell


def _int(cell: Optional[str], what: str) -> Optional[int]:
    if cell is None:
        return None
    if cell.isdecimal():  # the common case, before any null spelling is looked for
        return int(cell)
    if cell.lower() in _NULLS:
        return None
    try:
        return int(cell)
    except ValueError:
        pass
    try:
        f = float(cell)
    except ValueError:
        raise ValueError(f"bad {what} {cell!r}") from None
    if f != f or f in (float("inf"), float("-inf")) or f != int(f):
        raise ValueError(f"bad {what} {cell!r}")
    return int(f)


def _float(cell: str, what: str) -> Optional[float]:
    try:
        return float(cell)  # "nan"/"inf" are numbers here, as before; no null spelling parses
    except ValueError:
        pass
    if cell.lower() in _NULLS:
        return None
    raise ValueError(f"bad {what} {cell!r}") from None
