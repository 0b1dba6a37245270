"""Synthetic statistics-only dumps (FORMATS.md §4) written from real arrays.

Used by the sample generator for stats-only trees and as ground truth for the stats CSV readers.
Values are computed here with plain numpy (float64 over the finite elements) and printed with
``repr`` so they read back exactly.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

CANN_HEADER = ["Input/Output", "Index", "Data Size", "Data Type", "Format", "Shape", "Max Value", "Min Value",
               "Avg Value", "Count", "Nan Count", "Negative Inf Count", "Positive Inf Count"]
_CANN_STATS = ("max", "min", "mean", "count", "nan", "neginf", "posinf")

#: numpy spelling → proto DT_* name used in CANN CSVs.
DT_NAME = {"float32": "DT_FLOAT", "float16": "DT_FLOAT16", "int8": "DT_INT8", "uint8": "DT_UINT8",
           "int16": "DT_INT16", "uint16": "DT_UINT16", "int32": "DT_INT32", "int64": "DT_INT64",
           "uint32": "DT_UINT32", "uint64": "DT_UINT64", "bool": "DT_BOOL", "float64": "DT_DOUBLE",
           "bfloat16": "DT_BF16", "complex64": "DT_COMPLEX64"}

#: MindSpore r2.3.1+ statistic_category → column header (§4.4 ``header_map``).
MS_HEADER_MAP = {"max": "Max Value", "min": "Min Value", "avg": "Avg Value", "count": "Count",
                 "negative zero count": "Negative Zero Count", "positive zero count": "Positive Zero Count",
                 "nan count": "Nan Count", "negative inf count": "Negative Inf Count",
                 "positive inf count": "Positive Inf Count", "zero count": "Zero Count", "l2norm": "L2Norm Value",
                 "md5": "MD5"}
_MS_KEY = {"max": "max", "min": "min", "avg": "mean", "count": "count", "negative zero count": "negzeros",
           "positive zero count": "poszeros", "nan count": "nan", "negative inf count": "neginf",
           "positive inf count": "posinf", "zero count": "zeros", "l2norm": "l2norm", "md5": "md5"}
MS_COMMON = ["Op Type", "Op Name", "Task ID", "Stream ID", "Timestamp", "IO", "Slot", "Data Size", "Data Type",
             "Shape"]
MS_OLD_STATS = ["Max Value", "Min Value", "Avg Value", "Count", "Negative Zero Count", "Positive Zero Count",
                "NaN Count", "Negative Inf Count", "Positive Inf Count", "Zero Count"]
_MS_OLD_KEYS = ["max", "min", "mean", "count", "negzeros", "poszeros", "nan", "neginf", "posinf", "zeros"]


def array_stats(array: np.ndarray) -> dict[str, Any]:
    """Reference statistics of ``array`` (float64, min/max/mean/l2norm over finite values)."""
    a = np.asarray(array)
    x = np.abs(a) if a.dtype.kind == "c" else a
    x = x.astype(np.float64).reshape(-1)
    fin = x[np.isfinite(x)]
    out: dict[str, Any] = {
        "count": int(x.size), "nan": int(np.isnan(x).sum()), "posinf": int((x == np.inf).sum()),
        "neginf": int((x == -np.inf).sum()), "zeros": int((x == 0).sum()),
        "negzeros": int(((x == 0) & np.signbit(x)).sum()), "poszeros": int(((x == 0) & ~np.signbit(x)).sum()),
        "md5": hashlib.md5(np.ascontiguousarray(a).tobytes()).hexdigest(),
    }
    if fin.size:
        # math.fsum: exactly rounded, so the written files are the same on every machine (np.dot goes
        # through BLAS, whose summation order depends on the CPU)
        out.update(max=float(fin.max()), min=float(fin.min()), mean=math.fsum(fin) / fin.size,
                   l2norm=math.sqrt(math.fsum(fin * fin)))
    else:
        out.update(max=None, min=None, mean=None, l2norm=None)
    return out


def _cell(v: Any, null: str = "") -> str:
    if v is None:
        return null
    if isinstance(v, float):
        return repr(v)
    return str(v)


def cann_csv_name(op_type: str, op_name: str, task: int, stream: int, ts: int) -> str:
    """``{op_type}.{op_name}.{task}.{stream}.{ts}.csv`` with ``/ . \\ space`` sanitised to ``_``."""
    def clean(s: str) -> str:
        for ch in "/.\\ ":
            s = s.replace(ch, "_")
        return s
    return f"{clean(op_type)}.{clean(op_name)}.{task}.{stream}.{ts}.csv"


TensorSpec = Union[np.ndarray, tuple]  # array, or (array, dtype, format)


def _spec(t: TensorSpec) -> tuple[np.ndarray, str, str]:
    if isinstance(t, tuple):
        arr = np.asarray(t[0])
        return arr, (t[1] if len(t) > 1 else arr.dtype.name), (t[2] if len(t) > 2 else "ND")
    arr = np.asarray(t)
    return arr, arr.dtype.name, "ND"


def _itemsize(dtype: str, arr: np.ndarray) -> int:
    return 2 if dtype in ("bfloat16", "float16") else arr.dtype.itemsize


def write_cann_stats_csv(directory: Union[str, os.PathLike], op_type: str, op_name: str, task: int, stream: int,
                         ts: int, inputs: Sequence[TensorSpec] = (), outputs: Sequence[TensorSpec] = (),
                         blank_stats: Sequence[tuple[str, int]] = ()) -> Path:
    """A §4.1 per-op CSV.  Tensors are arrays or ``(array, dtype, format)`` (dtype = numpy spelling
    of the logical type, e.g. ``"bfloat16"`` for float32 values).  ``blank_stats`` lists
    ``("input"|"output", slot)`` rows written with empty stat cells (unsupported dtype)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / cann_csv_name(op_type, op_name, task, stream, ts)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(CANN_HEADER)
        for io, seq in (("Input", inputs), ("Output", outputs)):
            for slot, t in enumerate(seq):
                arr, dtype, fmt = _spec(t)
                shape = "x".join(str(s) for s in arr.shape) if arr.shape else "-"
                head = [io, str(slot), str(arr.size * _itemsize(dtype, arr)), DT_NAME.get(dtype, "-"), fmt, shape]
                if (io.lower(), slot) in blank_stats:
                    w.writerow(head + [""] * 7)
                    continue
                st = array_stats(arr)
                w.writerow(head + [_cell(st[k]) for k in _CANN_STATS])
    return path


def write_ms_statistic_csv(path: Union[str, os.PathLike], rows: Sequence[Mapping[str, Any]],
                           categories: Optional[Sequence[str]] = ("max", "min", "l2norm"),
                           trailing_comma: bool = True, null: str = "null") -> Path:
    """A MindSpore ``statistic.csv``.

    ``rows``: dicts with ``op_type, op_name, task, stream, timestamp, io ("input"/"output"), slot,
    array`` and optional ``dtype``.  ``categories`` = r2.3.1+ ``statistic_category`` order;
    ``None`` writes the r1.6–r2.2 fixed header (``NaN Count`` spelling).  ``trailing_comma`` mimics
    the r2.4/2.5 rows that end with ``,``.  Missing min/max/avg are written as ``null``.
    """
    if categories is None:
        stats_header, keys = MS_OLD_STATS, _MS_OLD_KEYS
    else:
        stats_header = [MS_HEADER_MAP[c] for c in categories]
        keys = [_MS_KEY[c] for c in categories]
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    lines = [",".join(MS_COMMON + stats_header)]
    for r in rows:
        arr = np.asarray(r["array"])
        dtype = r.get("dtype", arr.dtype.name)
        st = array_stats(arr)
        shape = "(" + ",".join(str(s) for s in arr.shape) + ")"
        cells = [str(r["op_type"]), str(r["op_name"]), str(r.get("task", 0)), str(r.get("stream", 0)),
                 str(r["timestamp"]), str(r["io"]), str(r["slot"]), str(arr.size * _itemsize(dtype, arr)),
                 dtype, f'"{shape}"'] + [_cell(st[k], null) for k in keys]
        lines.append(",".join(cells) + ("," if trailing_comma else ""))
    p.write_text("\n".join(lines) + "\n")
    return p


def write_msprobe_statistic_csv(path: Union[str, os.PathLike], rows: Sequence[Mapping[str, Any]]) -> Path:
    """msprobe's aggregated §4.3 ``statistic.csv`` (Max, Min, Avg, L2Norm, NaN, -Inf, +Inf, MD5)."""
    header = ["Op Type", "Op Name", "Task ID", "Stream ID", "Timestamp", "Input/Output", "Slot", "Data Size",
              "Data Type", "Format", "Shape", "Max Value", "Min Value", "Avg Value", "L2Norm Value", "NaN Count",
              "Negative Inf Count", "Positive Inf Count", "MD5 Value"]
    keys = ["max", "min", "mean", "l2norm", "nan", "neginf", "posinf", "md5"]
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            arr = np.asarray(r["array"])
            dtype = r.get("dtype", arr.dtype.name)
            st = array_stats(arr)
            w.writerow([r["op_type"], r["op_name"], r.get("task", 0), r.get("stream", 0), r["timestamp"],
                        str(r["io"]).capitalize(), r["slot"], arr.size * _itemsize(dtype, arr),
                        DT_NAME.get(dtype, "-"), r.get("format", "ND"),
                        "x".join(str(s) for s in arr.shape) if arr.shape else "-"]
                       + [_cell(st[k], "NA") for k in keys])
    return p
