"""CANN dump file names (FORMATS.md §1.1, §1.6, §5.1, §5.6).

Names split on ``.`` positionally, because the writer turns ``/ . \\ space`` in op types and names
into ``_`` (so neither ever contains a dot):

* normal      ``{op_type}.{op_name}.{task}.{stream}.{ts}``
* old         ``{op_type}.{op_name}.{task}.{ts}``                       (no stream)
* FFTS+       ``{op_type}.{op_name}.{task}.{stream}.{ts}.{task_type}.{context}.{thread}.{device}``
              (and the 8-field doc variant without stream)
* Opdebug     ``Opdebug.Node_OpDebug.{task}.{stream}.{ts}[FFTS suffix]`` -> kind "opdebug"
* stats       any of the above + ``.csv``                                -> kind "stats"
* converted   ``{dump name}.{input|output}.{i}[.{AxBxC}|.{FORMAT}][.{dtype}].npy`` (msaccucmp plain,
              shape and ``-t msnpy`` forms; also the MindSpore npy names)  -> kind "converted_npy"
* Opdebug JSON ``Opdebug.Node_OpDebug.….output.{i}.json``                -> kind "opdebug"
* all-digit first field (``mapping.csv`` alias)                          -> kind "alias"

MindSpore r2.3.1 aclnn files swap the first two fields (``{op_name}.{op_type}.…``).  Heuristic: a
name is swapped when field 0 does NOT look like an op type while field 1 does; an op type looks
like ``^[A-Z][A-Za-z0-9]*$`` (CamelCase, no ``_``/``-``), op names usually carry ``_`` or ``-op``.
Limits: an op_type with ``_``/``-`` or a lower-case start (rare) next to a CamelCase op name is
read as swapped; a swapped pair whose op name is plain CamelCase (``Add.Add``) is read as normal.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

from dumpscope.core.names import sanitize_name

_TYPE_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_SHAPE_RE = re.compile(r"^\d+(?:x\d+)*$")
_IO = ("input", "output")


@dataclass(slots=True)
class DumpName:
    """What a dump file name says.  ``timestamp`` is in microseconds (16 digits normally)."""

    kind: str  # "dump" | "opdebug" | "stats" | "converted_npy" | "alias"
    op_type: str = ""
    op_name: str = ""
    task: Optional[int] = None
    stream: Optional[int] = None
    timestamp: Optional[int] = None
    task_type: Optional[int] = None  # FFTS+ only (4 = FFTSPLUS)
    context: Optional[int] = None
    thread: Optional[int] = None
    device: Optional[int] = None
    io: Optional[str] = None  # converted npy / Opdebug json: "input" | "output"
    slot: Optional[int] = None
    shape: Optional[tuple[int, ...]] = None  # converted npy with a shape token
    format: Optional[str] = None  # converted npy format token (msnpy / MindSpore)
    dtype: Optional[str] = None  # MindSpore r2.4+ npy dtype token, as written
    swapped: bool = False
    stem: str = ""  # the dump file name part (no converted suffix, no extension)
    ext: str = ""  # ".csv", ".npy", ".json" or ""

    @property
    def is_ffts(self) -> bool:
        return self.task_type is not None


#: the dump writers' file-name transform: ``/ . \\ space`` -> ``_`` (lossy)
sanitize = sanitize_name


def _looks_like_type(s: str) -> bool:
    return bool(_TYPE_RE.match(s))


def _parse_stem(stem: str, kind: str, ext: str) -> Optional[DumpName]:
    fields = stem.split(".")
    if not fields or not fields[0]:
        return None
    if fields[0].isdigit():
        return DumpName(kind="alias", op_name=fields[0], stem=stem, ext=ext)
    n = len(fields)
    if n not in (4, 5, 8, 9) or not fields[1]:
        return None
    nums = fields[2:]
    if not all(f.isdigit() for f in nums):
        return None
    v = [int(f) for f in nums]
    if n == 5:
        task, stream, ts, ffts = v[0], v[1], v[2], None
    elif n == 4:
        task, stream, ts, ffts = v[0], None, v[1], None
    elif n == 9:
        task, stream, ts, ffts = v[0], v[1], v[2], v[3:]
    else:  # 8: CANN doc FFTS form without stream
        task, stream, ts, ffts = v[0], None, v[1], v[2:]
    op_type, op_name, swapped = fields[0], fields[1], False
    if not _looks_like_type(op_type) and _looks_like_type(op_name):
        op_type, op_name, swapped = op_name, op_type, True
    if op_type == "Opdebug" and op_name == "Node_OpDebug" and kind == "dump":
        kind = "opdebug"
    out = DumpName(kind=kind, op_type=op_type, op_name=op_name, task=task, stream=stream, timestamp=ts,
                   swapped=swapped, stem=stem, ext=ext)
    if ffts is not None:
        out.task_type, out.context, out.thread, out.device = ffts
    return out


def _split_converted(body: str) -> Optional[tuple[str, str, int, list[str]]]:
    """``{stem}.{io}.{slot}[.extras…]`` -> (stem, io, slot, extras), using the LAST io marker."""
    fields = body.split(".")
    for i in range(len(fields) - 2, 0, -1):
        if fields[i] in _IO and fields[i + 1].isdigit():
            extras = fields[i + 2:]
            if len(extras) > 3:
                return None
            return ".".join(fields[:i]), fields[i], int(fields[i + 1]), extras
    return None


def _is_dtype_token(tok: str) -> bool:
    from dumpscope.core.formats.dtypes import DtypeError, normalize_dtype

    try:
        normalize_dtype(tok)
    except DtypeError:
        return False
    return True


def quick_dump_name(name: str) -> Optional[tuple[str, str, int, int, int]]:
    """``(op_type, op_name, task, stream, timestamp)`` of the usual five-field dump file name,
    else None (then ``parse_dump_name`` decides).  The indexer's hot path: no objects built."""
    fields = name.split(".")
    if len(fields) != 5:
        return None
    op_type, op_name, task, stream, ts = fields
    if not (task.isdigit() and stream.isdigit() and ts.isdigit() and op_name) or op_type == "Opdebug" \
            or not _TYPE_RE.match(op_type):
        return None
    return op_type, op_name, int(task), int(stream), int(ts)


def parse_dump_name(filename: str) -> Optional[DumpName]:
    """Parse a dump-related file name (a path is reduced to its base name); None if not one."""
    name = os.path.basename(filename)
    if name.endswith(".csv"):
        return _parse_stem(name[:-4], "stats", ".csv")
    if name.endswith(".npy") or name.endswith(".json"):
        ext = ".npy" if name.endswith(".npy") else ".json"
        body = name[: -len(ext)]
        if body.isdigit():
            return DumpName(kind="alias", op_name=body, stem=body, ext=ext)
        split = _split_converted(body)
        if split is None:
            return None
        stem, io, slot, extras = split
        base = _parse_stem(stem, "dump", ext)
        if base is None:
            return None
        if base.kind == "alias":
            base.io, base.slot = io, slot
            return base
        if ext == ".json":
            if base.kind != "opdebug" or extras:
                return None
        else:
            base.kind = "converted_npy"
        for tok in extras:
            if _SHAPE_RE.match(tok) and base.shape is None:
                base.shape = tuple(int(d) for d in tok.split("x"))
            elif base.format is None and not (_is_dtype_token(tok) and tok[:1].islower()):
                base.format = tok
            elif base.dtype is None:
                base.dtype = tok
            else:
                return None
        base.io, base.slot = io, slot
        return base
    if "." in name and name.rsplit(".", 1)[1] in ("txt", "pb", "ir", "json", "bin", "pt", "h5", "om", "log"):
        return None
    return _parse_stem(name, "dump", "")


def read_mapping_csv(path: str, problems: Optional[list[str]] = None) -> dict[str, str]:
    """``mapping.csv`` (``{alias},{original file name}`` per line, no header) -> alias -> original.

    Blank lines are skipped; malformed lines are skipped and, when ``problems`` is given, reported
    there as one-line messages ``"<path>:<line>: <reason>"``.
    """
    out: dict[str, str] = {}
    with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip().lstrip("\ufeff")
            if not text:
                continue
            alias, sep, original = text.partition(",")
            alias, original = alias.strip(), original.strip()
            if not sep or not alias or not original:
                if problems is not None:
                    problems.append(f"{path}:{lineno}: expected 'alias,original_name', got {text[:80]!r}")
                continue
            out[alias] = original
    return out
