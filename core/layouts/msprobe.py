"""msprobe (mindstudio-probe) API/module-level dumps: ``step{N}/rank{R}/dump.json`` trees.

Layout (FORMATS.md §9.1)::

    {dump_path}/step{N}/rank{R}/dump.json            ops in call order, tensor meta + stats
                               /stack.json           call stacks (old or new layout)
                               /construct.json       module hierarchy {node: parent}
                               /dump_error_info.log
                               /dump_tensor_data/    {name}.{io}.{i}.npy | .pt  (task=tensor)

Conventions (shared with the Troubleshooter layout):

* one record per tensor argument; non-tensor arguments (ints, None, strings …) make no
  record; their values are kept on every record of the op in ``extra["op_args"]``
  (``{arg_path: value}``) so the detail pane can show them;
* ``slot`` counts the op's tensors per io in order (input_args, then input_kwargs, then
  parameters; nested lists flattened depth first); ``extra["arg"]`` keeps the original
  position ("0", "1.0", "attn_mask", "weight");
* ``parameters`` and kwargs are inputs; ``parameters_grad`` entries are backward outputs;
* ``rank`` folder without id → 0; ``proc{pid}`` (a non-distributed run) → rank 0 with
  ``extra["proc"] = pid``; a ``graph``/``pynative`` ancestor (MindSpore
  ≥ 2.7 jit) is kept in ``extra["run_mode"]``;
* files in ``dump_tensor_data`` not referenced by ``dump.json`` are ignored.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional

import numpy as np

from dumpscope.core.layouts.base import DirListing, Item, Layout
from dumpscope.core.model import (
    INPUT,
    OUTPUT,
    STORAGE_NONE,
    STORAGE_NPY,
    STORAGE_PT,
    ExecOrder,
    Problem,
    TensorRecord,
)

PRODUCER = "msprobe"
DATA_DIR = "dump_tensor_data"
OWNED_FILES = ("dump.json", "stack.json", "construct.json", "dump_error_info.log")

# ----------------------------------------------------------------------------- dtypes

_DTYPE_ALIASES = {
    "float": "float32", "double": "float64", "half": "float16", "long": "int64",
    "int": "int32", "short": "int16", "cfloat": "complex64", "cdouble": "complex128",
    "bool_": "bool", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
}


def normalize_dtype(text: Any) -> str:
    """``torch.float32``/``Float32``/``mindspore.bfloat16`` → numpy spelling ("float32")."""
    s = str(text).strip()
    for prefix in ("torch.", "mindspore.", "ms.", "numpy.", "np."):
        if s.startswith(prefix):
            s = s[len(prefix):]
    s = s.lower()
    return _DTYPE_ALIASES.get(s, s)


def itemsize(dtype: str) -> int:
    """Bytes per element of a numpy-spelled dtype (0 when unknown)."""
    if dtype == "bfloat16":
        return 2
    if dtype.startswith("float8"):
        return 1
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        return 0


# ----------------------------------------------------------------------------- names


class MsprobeNameError(ValueError):
    """An msprobe API/module name that does not follow ``Type.name.count.direction``."""


DIRECTIONS = ("forward", "backward")


@dataclass(frozen=True, slots=True)
class MsprobeName:
    api_type: str  # "Functional", "Tensor", "Module", "Cell", ...
    api_name: str  # "conv2d", "norm.RmsNorm", "conv1.Conv2d"
    op_type: str  # short name: "conv2d", "RmsNorm", "Conv2d"
    count: int
    direction: str  # "forward" / "backward"
    kind: str  # "api", "module" or "parameters_grad"


def parse_msprobe_name(name: str) -> MsprobeName:
    """Split a ``dump.json`` data key into its parts (raises ``MsprobeNameError``)."""
    if not isinstance(name, str):
        raise MsprobeNameError(f"not a string: {name!r}")
    parts = name.split(".")
    if len(parts) >= 3 and parts[-1] == "parameters_grad":
        return MsprobeName(parts[0], ".".join(parts[1:-1]), parts[-2], 0, "backward",
                           "parameters_grad")
    if len(parts) >= 4 and parts[-1] in DIRECTIONS and parts[-2].isdigit() and parts[-2].isascii():
        body = parts[1:-2]
        if parts[0] and all(body):
            return MsprobeName(parts[0], ".".join(body), body[-1], int(parts[-2]), parts[-1], "api")
    if len(parts) >= 4 and parts[-2] in DIRECTIONS and parts[-1].isdigit() and parts[-1].isascii():
        body = parts[1:-2]
        if parts[0] and all(body):
            return MsprobeName(parts[0], ".".join(body), body[-1], int(parts[-1]), parts[-2],
                               "module")
    raise MsprobeNameError(f"not an msprobe API/module name: {name[:80]!r}")


# ----------------------------------------------------------------------------- side files


def parse_stack_json(obj: Any) -> dict[str, list[str]]:
    """Both ``stack.json`` layouts → ``{name: [lines]}``.

    Old: ``{name: [lines]}``; new (msprobe 26.x): ``{"0": [[names…], [lines…]], …}``.
    """
    out: dict[str, list[str]] = {}
    if not isinstance(obj, dict):
        return out
    for key, value in obj.items():
        if (isinstance(value, list) and len(value) == 2 and isinstance(value[0], list)
                and isinstance(value[1], list) and key.isdigit()):
            lines = [str(v) for v in value[1]]
            for name in value[0]:
                out[str(name)] = lines
        elif isinstance(value, list):
            out[str(key)] = [str(v) for v in value]
        elif isinstance(value, str):
            out[str(key)] = [value]
    return out


def scopes_from_construct(construct: Any) -> dict[str, list[str]]:
    """``{node: parent}`` → ``{node: [ancestors, outermost first]}`` (cycles cut)."""
    if not isinstance(construct, dict):
        return {}
    cache: dict[str, list[str]] = {}
    for node in construct:
        chain: list[str] = []
        seen = {node}
        parent = construct.get(node)
        while isinstance(parent, str) and parent and parent not in seen:
            if parent in cache:
                chain.extend(reversed(cache[parent] + [parent]))
                break
            chain.append(parent)
            seen.add(parent)
            parent = construct.get(parent)
        cache[node] = list(reversed(chain))
    return cache


# ----------------------------------------------------------------------------- folders

_STEP_RE = re.compile(r"^step(\d+)$")
_RANK_RE = re.compile(r"^rank(\d*)$")
_PROC_RE = re.compile(r"^proc(\d+)$")


def step_rank_from_parts(parts: tuple[str, ...]) -> tuple[int, int, dict[str, Any]]:
    """(step, rank, extra) read off ``step{N}/rank{R}|rank|proc{pid}`` path components."""
    step, rank, extra = 0, 0, {}
    found_rank = found_step = False
    for part in reversed(parts):
        if not found_rank and (m := _RANK_RE.match(part)):
            rank, found_rank = int(m.group(1) or 0), True
        elif not found_rank and (m := _PROC_RE.match(part)):
            # msprobe writes proc{pid} when the run is not distributed: that is rank 0
            rank, found_rank = 0, True
            extra["proc"] = int(m.group(1))
        elif not found_step and (m := _STEP_RE.match(part)):
            step, found_step = int(m.group(1)), True
        elif part in ("graph", "pynative") and "run_mode" not in extra:
            extra["run_mode"] = part
    return step, rank, extra


def _is_tensor(item: Any) -> bool:
    return isinstance(item, dict) and (
        str(item.get("type", "")).endswith("Tensor") or ("dtype" in item and "shape" in item
                                                         and "type" not in item))


def _flatten(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Depth-first (arg_path, leaf) pairs of a nested list/tuple argument."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            yield from _flatten(v, f"{path}.{i}" if path else str(i))
    else:
        yield path, value


def _stats(item: dict[str, Any]) -> Optional[dict[str, Any]]:
    stats = {}
    for src, dst in (("Max", "max"), ("Min", "min"), ("Mean", "mean"), ("Norm", "l2norm"),
                     ("md5", "md5")):
        if item.get(src) is not None:
            stats[dst] = item[src]
    return stats or None


def _arg_groups(kind: str, direction: str, entry: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(io, arg_prefix, value) for every argument of a data entry, in slot order."""
    if kind == "parameters_grad":
        for pname, value in entry.items():
            yield OUTPUT, pname, value
        return
    if direction == "forward" and ("input_args" in entry or "input_kwargs" in entry):
        for i, v in enumerate(entry.get("input_args") or []):
            yield INPUT, str(i), v
        for k, v in (entry.get("input_kwargs") or {}).items():
            yield INPUT, str(k), v
    else:
        for i, v in enumerate(entry.get("input") or []):
            yield INPUT, str(i), v
    for k, v in (entry.get("parameters") or {}).items():
        yield INPUT, str(k), v
    for i, v in enumerate(entry.get("output") or []):
        yield OUTPUT, str(i), v


# ----------------------------------------------------------------------------- layout


class MsprobeLayout(Layout):
    name = "msprobe"
    title = "msprobe API/module dump (step{N}/rank{R}/dump.json + dump_tensor_data)"

    def scan_dir(self, listing: DirListing) -> Iterable[Item]:
        if "dump.json" not in listing.files:
            return
        path = listing.path("dump.json")
        siblings = any(f in listing.files for f in OWNED_FILES[1:]) or DATA_DIR in listing.subdirs
        try:
            with open(path, encoding="utf-8") as fh:
                meta = json.load(fh)
        except (OSError, ValueError) as exc:
            if siblings:
                listing.claimed.add("dump.json")
                yield Problem(path, f"dump.json: unreadable msprobe dump.json ({_short(exc)})")
            return
        if not (isinstance(meta, dict) and isinstance(meta.get("data"), dict)
                and ("task" in meta or "framework" in meta)):
            return
        listing.claimed.update(f for f in OWNED_FILES if f in listing.files)
        if DATA_DIR in listing.subdirs:
            listing.skip_subdirs.add(DATA_DIR)
        yield from _scan_dump(listing, path, meta)


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__


def _load_side_json(listing: DirListing, name: str) -> tuple[Any, Optional[Problem]]:
    if name not in listing.files:
        return None, None
    path = listing.path(name)
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh), None
    except (OSError, ValueError) as exc:
        return None, Problem(path, f"{name}: unreadable ({_short(exc)})")


def _scan_dump(listing: DirListing, path: str, meta: dict[str, Any]) -> Iterator[Item]:
    # the full path, so a tree opened at its step{N}/rank{R} folder keeps its ids
    step, rank, base_extra = step_rank_from_parts(tuple(listing.dirpath.split(os.sep)))
    framework = str(meta.get("framework") or "")
    stack_obj, problem = _load_side_json(listing, "stack.json")
    if problem:
        yield problem
    construct, problem = _load_side_json(listing, "construct.json")
    if problem:
        yield problem
    stacks = parse_stack_json(stack_obj)
    scopes = scopes_from_construct(construct)
    data_dir = listing.path(DATA_DIR)
    try:
        present = set(os.listdir(data_dir)) if DATA_DIR in listing.subdirs else set()
    except OSError:
        present = set()
    names: list[str] = []
    for index, (op_name, entry) in enumerate(meta["data"].items()):
        if not isinstance(entry, dict):
            yield Problem(path, f"dump.json: entry {op_name[:80]!r} is not an object")
            continue
        try:
            parsed = parse_msprobe_name(op_name)
        except MsprobeNameError:
            parsed = MsprobeName(op_name.split(".")[0], op_name, op_name.split(".")[-1], 0,
                                 "backward" if ".backward" in op_name else "forward", "api")
        names.append(op_name)
        extra = dict(base_extra)
        extra.update(direction=parsed.direction, framework=framework, api_type=parsed.api_type,
                     kind=parsed.kind)
        if op_name in stacks:
            extra["stack"] = stacks[op_name]
        if scopes.get(op_name):
            extra["scope"] = scopes[op_name]
        leaves = [(io, arg, v) for io, prefix, value in _arg_groups(parsed.kind, parsed.direction, entry)
                  for arg, v in _flatten(value, prefix)]
        scalars = {arg: v.get("value") for io, arg, v in leaves
                   if isinstance(v, dict) and not _is_tensor(v) and "value" in v}
        if scalars:
            extra["op_args"] = scalars
        slots = {INPUT: 0, OUTPUT: 0}
        for io, arg, item in leaves:
            if not _is_tensor(item):
                continue
            rec, problem = _record(item, op_name, parsed, io, slots[io], arg, path, data_dir,
                                   present, rank, step, index, extra)
            slots[io] += 1
            if problem:
                yield problem
            yield rec
    yield ExecOrder(rank=rank, graph="", names=names, source=path)


def _record(item: dict[str, Any], op_name: str, parsed: MsprobeName, io: str, slot: int, arg: str,
            dump_path: str, data_dir: str, present: set[str], rank: int, step: int, index: int,
            op_extra: dict[str, Any]) -> tuple[TensorRecord, Optional[Problem]]:
    dtype = normalize_dtype(item.get("dtype", ""))
    shape_raw = item.get("shape") or []
    shape = tuple(int(d) for d in shape_raw if isinstance(d, (int, float))) \
        if isinstance(shape_raw, list) else ()
    extra = dict(op_extra)
    extra["arg"] = arg
    if "requires_grad" in item:
        extra["requires_grad"] = item["requires_grad"]
    problem = None
    storage, file_path = STORAGE_NONE, dump_path
    data_name = item.get("data_name")
    if isinstance(data_name, str) and data_name:
        candidate = os.path.join(data_dir, data_name)
        if data_name in present:
            storage = STORAGE_PT if data_name.endswith(".pt") else STORAGE_NPY
            file_path = candidate
        else:
            problem = Problem(candidate, f"{data_name}: listed in dump.json but missing; "
                                         "using statistics only")
        extra["data_name"] = data_name
    count = 1
    for d in shape:
        count *= d
    rec = TensorRecord(
        producer=PRODUCER, path=file_path, op_type=parsed.op_type, op_name=op_name,
        file_name=op_name, io=io, slot=slot, dtype=dtype, shape=shape, rank=rank, step=step,
        graph="", storage=storage, nbytes=count * itemsize(dtype) if storage != STORAGE_NONE else 0,
        order_hint=float(index), stats=_stats(item), extra=extra,
    )
    return rec, problem


def load_tensor(rec: TensorRecord) -> np.ndarray:
    """Load the payload of an msprobe/Troubleshooter record (npy or restricted .pt)."""
    if rec.storage == STORAGE_NPY:
        from dumpscope.core.formats.npy_header import load_npy

        return load_npy(rec.path)
    if rec.storage == STORAGE_PT:
        from dumpscope.core.formats.pt_reader import load_pt

        return load_pt(rec.path)
    raise ValueError(f"{os.path.basename(rec.path)}: {rec.op_name} {rec.io} {rec.slot} has no "
                     "tensor data (statistics only)")
