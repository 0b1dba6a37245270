"""msprobe (mindstudio-probe) API/module-level dumps: ``step{N}/rank{R}/dump.json`` trees.

Layout (FORMATS.md §9.1)::

    {dump_path}/step{N}/rank{R}/dump.json            ops in call order, tensor meta + stats
                               /stack.json           call stacks (old or new layout)
                               /construct.json       module hierarchy {node: parent}
                               /dump_error_info.log
                               /dump_tensor_data/    {name}.{io}.{i}.npy | .pt  (task=tensor)

Conventions (shared with the Troubleshooter layout):

* one record per argument leaf (``core.layouts.api_args``): tensors, and non-tensor values
  (storage "value", INTERFACES.md §3) so that a ``null`` or a number keeps its slot;
  ``slot`` counts an op's leaves per io (input_args, input_kwargs, parameters; outputs);
  ``extra["pos"]`` is the positional path ("0", "3.1"), ``extra["arg"]`` the name where there
  is one (kwargs key, parameter name, gradient name);
* ``{module}.parameters_grad.N`` entries (L0/mix) are outputs of the module's backward call
  ``{module}.backward.N``, after its own outputs, named by ``arg`` ("weight", "bias") and
  marked ``extra["kind"] = "parameters_grad"``;
* ``stack.json`` lines go on the op's first record (``extra["stack"]``), for ``show.source``;
* statistics keep non-finite values as floats (``NaN``, "nan", ``Infinity`` …), which the
  index reads as overflow evidence;
* a malformed entry or field is a named problem (a few per file, then a count); the rest of
  the file stays; a ``dump.json`` next to msprobe's side files whose ``data`` is not an object
  is one problem;
* ``rank`` folder without id → 0; ``proc{pid}`` (a non-distributed run) → rank 0 with
  ``extra["proc"] = pid``; a ``graph``/``pynative`` ancestor (MindSpore
  ≥ 2.7 jit) is kept in ``extra["run_mode"]``;
* files in ``dump_tensor_data`` not referenced by ``dump.json`` are ignored.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

import numpy as np

from dumpscope.core.layouts.api_args import VALUE_DTYPES, Leaf, entry_leaves, shape_of, tensor_stats, value_of
from dumpscope.core.layouts.base import DirListing, Item, Layout
from dumpscope.core.model import (
    INPUT,
    OUTPUT,
    STORAGE_NONE,
    STORAGE_NPY,
    STORAGE_PT,
    STORAGE_VALUE,
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
    if len(parts) >= 3 and parts[-1] == "parameters_grad":  # older writers: no call count
        return MsprobeName(parts[0], ".".join(parts[1:-1]), parts[-2], 0, "backward",
                           "parameters_grad")
    if (len(parts) >= 4 and parts[-2] == "parameters_grad" and parts[-1].isdigit()
            and parts[-1].isascii()):  # msprobe 26: Module.fc1.Linear.parameters_grad.0
        return MsprobeName(parts[0], ".".join(parts[1:-2]), parts[-3], int(parts[-1]), "backward",
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
        looks_msprobe = isinstance(meta, dict) and ("task" in meta or "framework" in meta or "level" in meta)
        if not (looks_msprobe and isinstance(meta.get("data"), dict)):
            if looks_msprobe or (siblings and isinstance(meta, dict) and "data" in meta):
                listing.claimed.add("dump.json")
                data = meta.get("data")
                what = "missing" if data is None else f"a {type(data).__name__}"
                yield Problem(path, f"dump.json: 'data' is {what}, expected an object of API/module "
                                    "entries; nothing read from this file")
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


MAX_PROBLEMS_PER_FILE = 5


def _framework_from_types(data: dict[str, Any]) -> str:
    """No ``framework`` field (older msprobe): the first tensor ``type`` tells ("torch.Tensor")."""
    for k, entry in enumerate(data.values()):
        if k >= 50:
            break
        text = json.dumps(entry, default=str)[:20000]
        for fw, mark in (("mindspore", '"type": "mindspore.'), ("pytorch", '"type": "torch.')):
            if mark in text:
                return fw
    return ""


def _scan_dump(listing: DirListing, path: str, meta: dict[str, Any]) -> Iterator[Item]:
    # the full path, so a tree opened at its step{N}/rank{R} folder keeps its ids
    step, rank, base_extra = step_rank_from_parts(tuple(listing.dirpath.split(os.sep)))
    framework = meta.get("framework")
    framework = framework if isinstance(framework, str) else _framework_from_types(meta["data"])
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
    problems: list[str] = []
    ops: dict[str, _Op] = {}  # op name -> its leaves, first seen first
    for index, (key, entry) in enumerate(meta["data"].items()):
        if not isinstance(entry, dict):
            problems.append(f"entry {key[:80]!r} is {type(entry).__name__}, not an object; skipped")
            continue
        try:
            parsed = parse_msprobe_name(key)
        except MsprobeNameError:
            parsed = MsprobeName(key.split(".")[0], key, key.split(".")[-1], 0,
                                 "backward" if ".backward" in key else "forward", "api")
        leaves, bad = entry_leaves(parsed.kind, parsed.direction, entry)
        problems.extend(f"{key[:80]}: {b}" for b in bad)
        if not leaves and not bad:
            problems.append(f"{key[:80]}: no arguments or outputs recorded; not listed")
        op_name = owner_name(key, parsed)
        op = ops.get(op_name)
        if op is None:
            op = ops[op_name] = _Op(op_name, parsed, index)
        if parsed.kind == "parameters_grad":
            op.grads.extend(leaves)
        else:
            op.parsed, op.leaves = parsed, leaves
            op.stack = stacks.get(key)
            op.scope = scopes.get(key)
    for op in ops.values():
        extra = dict(base_extra)
        extra.update(direction=op.parsed.direction, framework=framework, api_type=op.parsed.api_type,
                     kind=op.parsed.kind)
        if op.scope:
            extra["scope"] = op.scope
        slots = {INPUT: 0, OUTPUT: 0}
        first = True
        for leaf, is_grad in [(x, False) for x in op.leaves] + [(x, True) for x in op.grads]:
            rec_extra = dict(extra)
            if first and op.stack:
                rec_extra["stack"] = op.stack
            first = False
            rec, bad = _record(leaf, is_grad, op, slots[leaf.io], path, data_dir, present, rank, step, rec_extra)
            slots[leaf.io] += 1
            for b in bad:
                if isinstance(b, Problem):
                    yield b
                else:
                    problems.append(f"{op.name[:80]} {leaf.io}.{rec.slot}: {b}")
            yield rec
    for text in problems[:MAX_PROBLEMS_PER_FILE]:
        yield Problem(path, f"dump.json: {text}")
    if len(problems) > MAX_PROBLEMS_PER_FILE:
        yield Problem(path, f"dump.json: {len(problems)} malformed fields in total "
                            f"({len(problems) - MAX_PROBLEMS_PER_FILE} more not listed)")
    yield ExecOrder(rank=rank, graph="", names=list(ops), source=path)


@dataclass
class _Op:
    name: str
    parsed: MsprobeName
    index: int
    leaves: list[Leaf] = field(default_factory=list)
    grads: list[Leaf] = field(default_factory=list)
    stack: Optional[list[str]] = None
    scope: Optional[list[str]] = None


def owner_name(key: str, parsed: MsprobeName) -> str:
    """The op a data entry belongs to: itself, or for ``{module}.parameters_grad[.N]`` the module's
    backward call ``{module}.backward.N`` (the gradients are outputs of that call)."""
    if parsed.kind != "parameters_grad":
        return key
    return f"{parsed.api_type}.{parsed.api_name}.backward.{parsed.count}"


_FLOAT_PREFIXES = ("float", "bfloat", "complex", "half", "double")


def _record(leaf: Leaf, is_grad: bool, op: _Op, slot: int, dump_path: str, data_dir: str, present: set[str], rank: int,
            step: int, extra: dict[str, Any]) -> tuple[TensorRecord, list[Any]]:
    """One record of one leaf, plus what was wrong with it (texts, or a Problem naming a file)."""
    bad: list[Any] = []
    if leaf.arg is not None:
        extra["arg"] = leaf.arg
    if leaf.pos:
        extra["pos"] = leaf.pos
    common = dict(producer=PRODUCER, op_type=op.parsed.op_type, op_name=op.name, file_name=op.name,
                  io=leaf.io, slot=slot, rank=rank, step=step, graph="", order_hint=float(op.index))
    if is_grad:
        extra["kind"] = "parameters_grad"
    if not leaf.is_tensor:
        dtype, value, kind = value_of(leaf.item)
        extra["value"] = value
        if kind and kind not in VALUE_DTYPES:
            extra["type"] = kind
        return TensorRecord(path=dump_path, dtype=dtype, shape=(), storage=STORAGE_VALUE, extra=extra,
                            **common), bad
    item = leaf.item
    raw_dtype = item.get("dtype")
    if isinstance(raw_dtype, str):
        dtype = normalize_dtype(raw_dtype)
    else:
        dtype = ""
        if raw_dtype is not None or "dtype" not in item:
            bad.append(f"dtype {str(raw_dtype)[:20]!r} is not a string")
    shape, problem = shape_of(item.get("shape"))
    if problem:
        bad.append(problem)
    count = 1
    for d in shape:
        count *= d
    stats, problems = tensor_stats(item, dtype.startswith(_FLOAT_PREFIXES), count)
    bad.extend(problems)
    if "requires_grad" in item:
        extra["requires_grad"] = item["requires_grad"]
    storage, file_path = STORAGE_NONE, dump_path
    data_name = item.get("data_name")
    if isinstance(data_name, str) and data_name:
        candidate = os.path.join(data_dir, data_name)
        if data_name in present:
            storage = STORAGE_PT if data_name.endswith(".pt") else STORAGE_NPY
            file_path = candidate
        else:
            bad.append(Problem(candidate, f"{data_name}: listed in dump.json but missing; "
                                          "using statistics only"))
        extra["data_name"] = data_name
    elif data_name is not None and data_name != "-1":
        bad.append(f"data_name {str(data_name)[:40]!r} is not a file name")
    rec = TensorRecord(path=file_path, dtype=dtype, shape=shape, storage=storage,
                       nbytes=count * itemsize(dtype) if storage != STORAGE_NONE else 0,
                       stats=stats, extra=extra, **common)
    return rec, bad


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
