"""MindSpore Troubleshooter ``api_dump`` trees (1.0.14 – 1.0.18), FORMATS.md §10.

::

    {output_path}/rank{R}/{fw}_api_dump/*.npy            {Type}_{api}_{count}_{dir}_{io}[.i[.j]].npy
    {output_path}/rank{R}/{fw}_api_dump_info.pkl|.csv    TEXT: one JSON array per line
    {output_path}/rank{R}/{fw}_api_dump_stack.json       {"{Type}_{api}_{count}_forward_stack_info": [lines]}
                                                         (1.0.18 real output: {"torch.nn.Conv2d(0) forward": [lines]})

with ``fw`` in mindspore / torch / mindtorch.  The info file is read as text and never
unpickled; it drives the record list and the call order.  Choices made here:

* an npy listed in the info file but absent → statistics-only record (storage "none");
  an npy present but not listed → record from its name and npy header, ordered after
  the listed ones;
* ``slot`` counts an op's tensors per io in info order; ``extra["arg"]`` keeps the dotted
  index ("0", "1.0", "" when the name has none);
* ``LAYER_{module}_forward_input`` markers (torch/mindtorch) are not records: each sets
  ``extra["scope"]`` of the following *forward* APIs to the dotted prefixes of the module
  path (``layer1.0.conv1`` → ["layer1", "layer1.0", "layer1.0.conv1"]) until the next
  marker; backward APIs get no scope (markers only mark forward calls).  A marker file
  not listed in the info file has no known position and sets no scope;
* statistics written as NaN are "not collected" (Troubleshooter writes NaN for every statistic
  outside ``statistic_category``: the mean of every row by default) unless the file collects
  that statistic elsewhere and the tensor is floating point: then the NaN is the tensor's own
  and counts as overflow evidence (``_real_nans``);
* ``step`` is the row's ``dump_step`` when it is an integer; ``pt_net.pth``/``ad_net.pth``
  state dicts are claimed and ignored (they would need unpickling).
* The 1.0.10 ``toolbox/dump`` layout (user-named info file) is not recognised.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional

import numpy as np

from dumpscope.core.formats.dtypes import dtype_name
from dumpscope.core.formats.npy_header import NpyFormatError, read_npy_header
from dumpscope.core.layouts.base import DirListing, Item, Layout, rank_from_parts
from dumpscope.core.layouts.msprobe import itemsize
from dumpscope.core.model import (
    STORAGE_NONE,
    STORAGE_NPY,
    ExecOrder,
    Problem,
    TensorRecord,
)
from dumpscope.core.layouts.walk import OUTSIDE_LINK, names_inside

PRODUCER = "troubleshooter"
FRAMEWORKS = ("mindspore", "torch", "mindtorch")
STATEDICT_FILES = ("pt_net.pth", "ad_net.pth")
MAX_STACK_BYTES = 256 << 20


class TsNameError(ValueError):
    """A Troubleshooter npy prefix that matches neither the API regex nor a LAYER marker."""


# Troubleshooter's sorting key regex (api_dump_compare.py) is
#   ^(\w+?)_(\w+)_(\d+)+_(\w+)_([io][nu]t?put)\.?(\d+)?\.?(\d+)?$
# It backtracks polynomially on long names, so ``parse_ts_name`` splits by hand with the
# same result for real names (direction restricted to forward/backward).
_LAYER_RE = re.compile(r"^LAYER_(.+)_(forward|backward)_input$")
MAX_NAME = 1024


def _is_word(text: str) -> bool:
    return bool(text) and all(c == "_" or c.isalnum() for c in text)


@dataclass(frozen=True, slots=True)
class TsName:
    api_type: str  # "Functional", "NN", "Tensor", ... ("LAYER" for markers)
    api_name: str  # "conv2d", "Conv2d", "__matmul__"; module path for markers
    count: int
    direction: str
    io: str  # "input" / "output"
    index: str  # dotted index ("0", "1.0") or ""

    @property
    def op_name(self) -> str:
        return f"{self.api_type}_{self.api_name}_{self.count}_{self.direction}"

    @property
    def is_marker(self) -> bool:
        return self.api_type == "LAYER"


def parse_ts_name(prefix: str) -> TsName:
    """Parse an npy prefix (file name without ``.npy``); raises ``TsNameError``."""
    if not isinstance(prefix, str):
        raise TsNameError(f"not a string: {prefix!r}")
    if len(prefix) > MAX_NAME:
        raise TsNameError(f"name too long ({len(prefix)} chars)")
    m = _LAYER_RE.match(prefix)
    if m:
        return TsName("LAYER", m.group(1), 0, m.group(2), "input", "")
    head, _, index = prefix.partition(".")
    if index and not all(p.isdigit() and p.isascii() for p in index.split(".")[:2]) \
            or index.count(".") > 1:
        raise TsNameError(f"bad index in api_dump name: {prefix[:80]!r}")
    rest, _, io = head.rpartition("_")
    rest, _, direction = rest.rpartition("_")
    rest, _, count = rest.rpartition("_")
    cut = rest.find("_", 1)
    if (io not in ("input", "output") or direction not in ("forward", "backward")
            or not (count.isdigit() and count.isascii()) or cut < 0 or not _is_word(rest)
            or not rest[cut + 1:]):
        raise TsNameError(f"not a Troubleshooter api_dump name: {prefix[:80]!r}")
    return TsName(rest[:cut], rest[cut + 1:], int(count), direction, io, index)


def module_scope(module: str) -> list[str]:
    """Dotted prefixes of a named_modules path, outermost first."""
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


@dataclass
class InfoRow:
    prefix: str
    step: int
    dtype: str
    shape: tuple[int, ...]
    stats: Optional[dict[str, Any]]
    nan_keys: tuple[str, ...] = ()  # statistics written as NaN: unused, or a real NaN (see _real_nans)


def _clean(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def parse_info_line(line: str) -> InfoRow:
    """One info row (1.0.14–1.0.16: 6 fields, 1.0.18: 8 fields) → ``InfoRow``; ValueError if bad."""
    row = json.loads(line)
    if not (isinstance(row, list) and len(row) >= 5 and isinstance(row[0], str)):
        raise ValueError("not an info row (JSON array starting with a name)")
    step = row[1] if isinstance(row[1], int) and not isinstance(row[1], bool) else 0
    shape_raw = row[4] if isinstance(row[4], list) else []
    shape = tuple(int(d) for d in shape_raw if isinstance(d, (int, float)) and not isinstance(d, bool))
    stats: dict[str, Any] = {}
    nan_keys: list[str] = []
    if len(row) > 5 and isinstance(row[5], list):
        for key, value in zip(("max", "min", "mean"), row[5]):
            if _clean(value) is not None:
                stats[key] = value
            elif isinstance(value, float):
                nan_keys.append(key)
    if len(row) > 6 and row[6] not in ([], None, ""):
        stats["md5"] = row[6]
    if len(row) > 7 and isinstance(row[7], (int, float)):
        if _clean(row[7]) is not None:
            stats["l2norm"] = row[7]
        else:
            nan_keys.append("l2norm")
    dtype = dtype_name(row[3]) if isinstance(row[3], str) else ""
    return InfoRow(row[0], step, dtype, shape, stats or None, tuple(nan_keys))


_FLOAT_DTYPES = ("float", "bfloat", "complex")


def _real_nans(rows: list[InfoRow]) -> None:
    """Troubleshooter writes every statistic it did not collect as NaN (mean, with the default
    ``statistic_category`` max/min/l2norm, is NaN on every row).  A NaN is kept as the tensor's
    own value (overflow evidence) only in a column the file collects (a number on some row) and
    on a floating-point tensor; every other NaN means "not collected" and is dropped."""
    collected = {k for r in rows for k in ("max", "min", "mean", "l2norm") if r.stats and k in r.stats}
    for r in rows:
        real = [k for k in r.nan_keys if k in collected and r.dtype.startswith(_FLOAT_DTYPES)]
        if real:
            r.stats = dict(r.stats or {})
            r.stats.update({k: math.nan for k in real})


def _info_names(files: list[str]) -> dict[str, str]:
    """framework → info file name present in the listing (``.csv`` preferred over ``.pkl``)."""
    out: dict[str, str] = {}
    for fw in FRAMEWORKS:
        for ext in (".csv", ".pkl"):
            name = f"{fw}_api_dump_info{ext}"
            if name in files and fw not in out:
                out[fw] = name
    return out


class TroubleshooterLayout(Layout):
    name = "troubleshooter"
    title = "Troubleshooter api_dump (rank{R}/{fw}_api_dump + info + stack)"

    def scan_dir(self, listing: DirListing) -> Iterable[Item]:
        infos = _info_names(listing.files)
        for fw in FRAMEWORKS:
            npy_dir = f"{fw}_api_dump"
            has_dir = npy_dir in listing.subdirs
            if fw not in infos and not has_dir:
                continue
            stack_name = f"{fw}_api_dump_stack.json"
            listing.claimed.update(n for n in (infos.get(fw), stack_name) if n in listing.files)
            listing.claimed.update(n for n in STATEDICT_FILES if n in listing.files)
            if has_dir:
                listing.skip_subdirs.add(npy_dir)
            yield from _scan_fw(listing, fw, infos.get(fw), stack_name, npy_dir if has_dir else None)


def _read_stack(path: str) -> tuple[dict[str, list[str]], Optional[Problem]]:
    try:
        if os.path.getsize(path) > MAX_STACK_BYTES:
            return {}, Problem(path, "stack file too large, ignored")
        with open(path, encoding="utf-8") as fh:
            obj = json.load(fh)
    except (OSError, ValueError) as exc:
        return {}, Problem(path, f"{os.path.basename(path)}: unreadable ({str(exc)[:100]})")
    out: dict[str, list[str]] = {}
    if isinstance(obj, dict):
        for key, lines in obj.items():
            if not isinstance(lines, list):
                continue
            name = key[: -len("_stack_info")] if key.endswith("_stack_info") else key
            out[name] = [str(x) for x in lines]
            m = _STACK_KEY_1018.match(key)
            if m:
                # 1.0.18 writes "torch.nn.Conv2d(0) forward": index it by (api, count, direction)
                out[_stack_key(m.group(1).rsplit(".", 1)[-1], int(m.group(2)), m.group(3))] = out[name]
    return out, None


#: stack.json keys of Troubleshooter 1.0.18 (seen in real output): ``{qualified api}({count}) {direction}``
_STACK_KEY_1018 = re.compile(r"^([\w.]+)\((\d+)\) (forward|backward)$")


def _stack_key(api: str, count: int, direction: str) -> str:
    return f"\x00{api.lower()}\x00{count}\x00{direction}"


def _read_info(path: str) -> tuple[list[InfoRow], list[Problem]]:
    rows: list[InfoRow] = []
    problems: list[Problem] = []
    name = os.path.basename(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        return rows, [Problem(path, f"{name}: cannot read ({exc.strerror or exc})")]
    if raw[:1] == b"\x80":
        return rows, [Problem(path, f"{name}: binary pickle, refusing to unpickle")]
    text = raw.decode("utf-8", errors="replace")
    bad = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(parse_info_line(line))
        except (ValueError, TypeError, RecursionError) as exc:
            bad += 1
            if bad <= 3:
                problems.append(Problem(path, f"{name} line {lineno}: {str(exc)[:80]}"))
    if bad > 3:
        problems.append(Problem(path, f"{name}: {bad} unreadable lines in total"))
    _real_nans([r for r in rows if not r.prefix.startswith("LAYER_")])
    return rows, problems


def _scan_fw(listing: DirListing, fw: str, info_name: Optional[str], stack_name: str,
             npy_dir: Optional[str]) -> Iterator[Item]:
    rank = _rank(listing)
    present: set[str] = set()
    npy_path = listing.path(npy_dir) if npy_dir else ""
    if npy_dir:
        try:
            names, outside = names_inside(npy_path, listing.root)
            present = {n for n in names if n.endswith(".npy")}
            for name in outside:  # a tensor file linked from outside PATH: never opened
                yield Problem(os.path.join(npy_path, name), OUTSIDE_LINK)
        except OSError as exc:
            yield Problem(npy_path, f"{npy_dir}: cannot list ({exc.strerror or exc})")
    stacks: dict[str, list[str]] = {}
    if stack_name in listing.files:
        stacks, problem = _read_stack(listing.path(stack_name))
        if problem:
            yield problem
    rows: list[InfoRow] = []
    info_path = listing.path(info_name) if info_name else ""
    if info_name:
        rows, problems = _read_info(info_path)
        yield from problems
    listed = {r.prefix + ".npy" for r in rows}
    # unlisted files join at the end, in name order, their dtype/shape from the npy header
    for fname in sorted(present - listed):
        prefix = fname[:-4]
        try:
            parsed = parse_ts_name(prefix)
        except TsNameError:
            continue
        if parsed.is_marker:
            continue  # position unknown: cannot scope anything
        try:
            head = read_npy_header(os.path.join(npy_path, fname))
        except NpyFormatError as exc:
            yield Problem(os.path.join(npy_path, fname), str(exc))
            continue
        rows.append(InfoRow(prefix, 0, head.dtype, head.shape, None))
    yield from _records(rows, fw, rank, npy_path, present, stacks, info_path or npy_path)


def _records(rows: list[InfoRow], fw: str, rank: int, npy_path: str, present: set[str],
             stacks: dict[str, list[str]], source: str) -> Iterator[Item]:
    scope: list[str] = []
    order: dict[str, int] = {}
    slots: dict[tuple[str, str], int] = {}
    for row in rows:
        try:
            parsed = parse_ts_name(row.prefix)
        except TsNameError:
            yield Problem(source, f"unrecognised api_dump name {row.prefix[:80]!r}")
            continue
        if parsed.is_marker:
            scope = module_scope(parsed.api_name)
            continue
        op = parsed.op_name
        index = order.setdefault(op, len(order))
        slot = slots.get((op, parsed.io), 0)
        slots[(op, parsed.io)] = slot + 1
        fname = row.prefix + ".npy"
        has_file = fname in present
        extra: dict[str, Any] = {"direction": parsed.direction, "framework": fw,
                                 "api_type": parsed.api_type, "arg": parsed.index}
        if parsed.direction == "forward" and scope:
            extra["scope"] = list(scope)
        stack = stacks.get(op) or stacks.get(_stack_key(parsed.api_name, parsed.count, parsed.direction))
        if stack:
            extra["stack"] = stack
        count = 1
        for d in row.shape:
            count *= d
        yield TensorRecord(
            producer=PRODUCER, path=os.path.join(npy_path, fname) if has_file else source,
            op_type=parsed.api_name, op_name=op, file_name=op, io=parsed.io, slot=slot,
            dtype=row.dtype, shape=row.shape, rank=rank, step=row.step, graph="",
            storage=STORAGE_NPY if has_file else STORAGE_NONE,
            nbytes=count * itemsize(row.dtype) if has_file else 0,
            order_hint=float(index), stats=row.stats, extra=extra,
        )
    yield ExecOrder(rank=rank, graph="", names=list(order), source=source)


def _rank(listing: DirListing) -> int:
    """Rank from the ``rank{R}`` folder holding the dump (the listing's own directory)."""
    m = re.match(r"^rank_?(\d+)$", os.path.basename(os.path.normpath(listing.dirpath)))
    return int(m.group(1)) if m else rank_from_parts(listing.parts)


def load_tensor(rec: TensorRecord) -> np.ndarray:
    """Load the payload of a Troubleshooter record (plain ``.npy``, never pickled)."""
    from dumpscope.core.layouts.msprobe import load_tensor as _load

    return _load(rec)
