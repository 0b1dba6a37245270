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
* files in ``dump_tensor_data`` not referenced by ``dump.json`` are ignored;
* ``dump.json``, ``stack.json`` and ``construct.json`` are read one entry at a time
  (``core.layouts.json_stream``), so memory follows the largest entry, not the file; an entry over
  :data:`MAX_ENTRY_BYTES` is a named problem and skipped, a file that breaks off keeps the
  entries before the break and names where it broke, an entry key written twice is named (the
  first is kept).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, NamedTuple, Optional, TextIO

import numpy as np

from dumpscope.core.formats.dtypes import dtype_name
from dumpscope.core.layouts.api_args import VALUE_DTYPES, Leaf, entry_leaves, shape_of, tensor_stats, value_of
from dumpscope.core.layouts.base import DirListing, Item, Layout
from dumpscope.core.layouts.json_stream import BadValue, JsonObjectReader, JsonStreamError, ValueTooLarge
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
from dumpscope.core.layouts.walk import OUTSIDE_LINK, names_inside

PRODUCER = "msprobe"
DATA_DIR = "dump_tensor_data"
OWNED_FILES = ("dump.json", "stack.json", "construct.json", "dump_error_info.log")

# ----------------------------------------------------------------------------- dtypes

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
            head, data_kind, entries = _open_dump(path)
        except (OSError, ValueError) as exc:
            if siblings:
                listing.claimed.add("dump.json")
                yield Problem(path, f"dump.json: unreadable msprobe dump.json ({_short(exc)})")
            return
        looks_msprobe = "task" in head or "framework" in head or "level" in head
        if not (looks_msprobe and data_kind == "object"):
            if looks_msprobe or (siblings and data_kind):
                listing.claimed.add("dump.json")
                what = "missing" if not data_kind else f"a {_KIND_NAMES.get(data_kind, data_kind)}"
                yield Problem(path, f"dump.json: 'data' is {what}, expected an object of API/module "
                                    "entries; nothing read from this file")
            return
        listing.claimed.update(f for f in OWNED_FILES if f in listing.files)
        if DATA_DIR in listing.subdirs:
            listing.skip_subdirs.add(DATA_DIR)
        yield from _scan_dump(listing, path, head, entries)


#: one ``dump.json`` entry (or top-level field, or side-file member) larger than this is a named
#: problem and is skipped unread; memory while reading follows the largest entry (issue 20)
MAX_ENTRY_BYTES = 64 << 20
_KIND_NAMES = {"array": "list", "string": "str", "number": "number", "true": "bool", "false": "bool",
               "null": "null"}


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__


class _Broken(NamedTuple):
    """Marks where the entry stream stopped: the rest of ``dump.json`` could not be read."""

    error: str
    read: int


def _open_dump(path: str) -> tuple[dict[str, Any], str, Iterator[tuple[str, Any]]]:
    """``dump.json``'s top-level fields, the kind of its ``data`` value ("object", "array", … or ""
    when absent) and an iterator over ``data``'s entries as ``(key, value or exception)``, ending
    with ``("", _Broken)`` when the file breaks off.

    msprobe writes ``data`` last, after ``task``/``level``/``framework``: then one pass reads the
    fields and streams the entries.  Any other order (or no ``framework`` before ``data``) reads the
    top level once, skipping ``data``, then streams ``data`` in a second pass."""
    fh = open(path, encoding="utf-8")
    try:
        reader = JsonObjectReader(fh, MAX_ENTRY_BYTES)
        members = reader.members()
        head: dict[str, Any] = {}
        kind = ""
        for key in members:
            if key == "data":
                kind = reader.value_kind()
                if isinstance(head.get("framework"), str) and kind == "object":
                    return head, kind, _stream_entries(fh, reader, members, head)  # it closes fh
                break
            head[key] = _field(reader)
        else:
            reader.finish()
            fh.close()
            return head, kind, iter([])
        # unusual order: read the whole top level, then stream the last ``data`` member
        reader.skip_value()
        nth = seen = 1
        for key in members:
            if key == "data":
                seen += 1
                nth, kind = seen, reader.value_kind()
                reader.skip_value()
            else:
                head[key] = _field(reader)
        reader.finish()
    except BaseException:
        fh.close()
        raise
    fh.close()
    return head, kind, _second_pass(path, nth)


def _field(reader: JsonObjectReader) -> Any:
    try:
        return reader.read_value()
    except (BadValue, ValueTooLarge) as exc:
        return exc


def _second_pass(path: str, nth: int) -> Iterator[tuple[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        reader = JsonObjectReader(fh, MAX_ENTRY_BYTES)
        members = reader.members()
        seen = 0
        for key in members:
            if key == "data":
                seen += 1
                if seen == nth:
                    yield from _entries(reader, members, {})
                    return


def _stream_entries(fh: TextIO, reader: JsonObjectReader, members: Iterator[str],
                    head: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    with fh:
        yield from _entries(reader, members, head)


def _entries(reader: JsonObjectReader, members: Iterator[str], head: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """``data``'s entries, then the rest of the top level (a second ``data`` is reported)."""
    read = 0
    try:
        for key in reader.members():
            try:
                value = reader.read_value()
            except (BadValue, ValueTooLarge) as exc:
                value = exc
            read += 1
            yield key, value
        for key in members:
            if key == "data":
                yield "", _Broken("a second 'data' member follows the first; it was not read", -1)
            else:
                head[key] = _field(reader)
        reader.finish()
    except (JsonStreamError, UnicodeDecodeError, OSError) as exc:
        yield "", _Broken(_short(exc), read)


def _side_members(listing: DirListing, name: str) -> tuple[Iterator[tuple[str, Any]], list[Problem]]:
    """Members of a side file (``stack.json``, ``construct.json``), streamed like ``dump.json``; what
    could not be read is a named problem (the members before a break are kept)."""
    problems: list[Problem] = []
    if name not in listing.files:
        return iter(()), problems
    path = listing.path(name)

    def members() -> Iterator[tuple[str, Any]]:
        read = 0
        try:
            with open(path, encoding="utf-8") as fh:
                reader = JsonObjectReader(fh, MAX_ENTRY_BYTES)
                for key in reader.members():
                    try:
                        value = reader.read_value()
                    except (BadValue, ValueTooLarge) as exc:
                        problems.append(Problem(path, f"{name}: entry {key[:80]!r} skipped ({_short(exc)})"))
                        continue
                    read += 1
                    yield key, value
                reader.finish()
        except (OSError, ValueError) as exc:
            kept = f"; the {read} entries before it are used" if read else ""
            problems.append(Problem(path, f"{name}: unreadable ({_short(exc)}){kept}"))

    return members(), problems


MAX_PROBLEMS_PER_FILE = 5
#: entries looked at to tell the framework when ``dump.json`` has no ``framework`` field
_FRAMEWORK_PROBE = 50


def _framework_from_types(data: Iterable[Any]) -> str:
    """No ``framework`` field (older msprobe): the first tensor ``type`` tells ("torch.Tensor")."""
    for k, entry in enumerate(data):
        if k >= _FRAMEWORK_PROBE:
            break
        text = json.dumps(entry, default=str)[:20000]
        for fw, mark in (("mindspore", '"type": "mindspore.'), ("pytorch", '"type": "torch.')):
            if mark in text:
                return fw
    return ""


def _scan_dump(listing: DirListing, path: str, head: dict[str, Any],
               entries: Iterator[tuple[str, Any]]) -> Iterator[Item]:
    """Records of every entry as it is read: an op's records go out as soon as it is complete (a
    module's ``parameters_grad`` waits for its ``backward`` entry, which msprobe writes next), so
    memory does not grow with the file."""
    # the full path, so a tree opened at its step{N}/rank{R} folder keeps its ids
    step, rank, base_extra = step_rank_from_parts(tuple(listing.dirpath.split(os.sep)))
    framework = head.get("framework")
    if not isinstance(framework, str):
        probe = list(itertools.islice(entries, _FRAMEWORK_PROBE))
        framework = _framework_from_types(v for _, v in probe if not isinstance(v, (Exception, _Broken)))
        entries = itertools.chain(probe, entries)
    stacks, side_problems = _read_stacks(listing)
    scopes, more = _read_scopes(listing)
    yield from side_problems + more
    data_dir = listing.path(DATA_DIR)
    try:
        names, outside = names_inside(data_dir, listing.root) if DATA_DIR in listing.subdirs else ([], [])
    except OSError:
        names, outside = [], []
    present = set(names)
    for name in outside:  # a tensor file linked from outside PATH: never opened
        yield Problem(os.path.join(data_dir, name), OUTSIDE_LINK)
    problems: list[str] = []
    nproblems = 0

    def problem(text: str) -> None:
        nonlocal nproblems
        nproblems += 1
        if len(problems) < MAX_PROBLEMS_PER_FILE:
            problems.append(text)

    ops: dict[str, _Op] = {}  # op name -> what is left to emit; first seen first
    seen: set[str] = set()
    broken: Optional[_Broken] = None

    def emit(op: _Op, leaves: list[Leaf], is_grad: bool) -> Iterator[Item]:
        for leaf in leaves:
            extra = dict(base_extra)
            extra.update(direction=op.parsed.direction, framework=framework, api_type=op.parsed.api_type,
                         kind=op.parsed.kind)
            if op.scope:
                extra["scope"] = op.scope
            if not op.started and op.stack:
                extra["stack"] = op.stack
            op.started = True
            slot = op.slots[leaf.io]
            op.slots[leaf.io] += 1
            rec, bad = _record(leaf, is_grad, op, slot, path, data_dir, present, rank, step, extra)
            for b in bad:
                if isinstance(b, Problem):
                    yield b
                else:
                    problem(f"{op.name[:80]} {leaf.io}.{rec.slot}: {b}")
            yield rec

    for index, (key, entry) in enumerate(entries):
        if isinstance(entry, _Broken):
            broken = entry
            continue
        if key in seen:
            problem(f"entry {key[:80]!r} appears twice; the second one is skipped")
            continue
        seen.add(key)
        if isinstance(entry, (BadValue, ValueTooLarge)):
            problem(f"entry {key[:80]!r} skipped: {_short(entry)}")
            continue
        if not isinstance(entry, dict):
            problem(f"entry {key[:80]!r} is {type(entry).__name__}, not an object; skipped")
            continue
        try:
            parsed = parse_msprobe_name(key)
        except MsprobeNameError:
            parsed = MsprobeName(key.split(".")[0], key, key.split(".")[-1], 0,
                                 "backward" if ".backward" in key else "forward", "api")
        leaves, bad = entry_leaves(parsed.kind, parsed.direction, entry)
        for b in bad:
            problem(f"{key[:80]}: {b}")
        if not leaves and not bad:
            problem(f"{key[:80]}: no arguments or outputs recorded; not listed")
        op_name = owner_name(key, parsed)
        op = ops.get(op_name)
        if op is None:
            op = ops[op_name] = _Op(op_name, parsed, index)
        if parsed.kind == "parameters_grad":
            if op.own_seen:
                yield from emit(op, leaves, True)
            else:
                op.grads.extend(leaves)
        else:
            op.parsed, op.own_seen = parsed, True
            op.stack = stacks.get(key)
            op.scope = scopes.get(key)
            yield from emit(op, leaves, False)
            grads, op.grads = op.grads, []
            yield from emit(op, grads, True)
    for op in ops.values():  # gradients whose module has no backward entry
        if op.grads:
            grads, op.grads = op.grads, []
            yield from emit(op, grads, True)
    for text in problems:
        yield Problem(path, f"dump.json: {text}")
    if nproblems > MAX_PROBLEMS_PER_FILE:
        yield Problem(path, f"dump.json: {nproblems} malformed fields in total "
                            f"({nproblems - MAX_PROBLEMS_PER_FILE} more not listed)")
    if broken is not None:
        if broken.read < 0:
            yield Problem(path, f"dump.json: {broken.error}")
        else:
            yield Problem(path, f"dump.json: broken JSON ({broken.error}); the {broken.read} entries before it "
                                "were read, the rest of the file was not")
    yield ExecOrder(rank=rank, graph="", names=list(ops), source=path)


def _read_stacks(listing: DirListing) -> tuple[dict[str, list[str]], list[Problem]]:
    members, problems = _side_members(listing, "stack.json")
    out: dict[str, list[str]] = {}
    shared: dict[tuple[str, ...], list[str]] = {}  # identical stacks share one list
    for key, value in members:
        for name, lines in parse_stack_json({key: value}).items():
            out[name] = shared.setdefault(tuple(lines), lines)
    return out, problems


def _read_scopes(listing: DirListing) -> tuple[dict[str, list[str]], list[Problem]]:
    members, problems = _side_members(listing, "construct.json")
    construct = dict(members)
    return scopes_from_construct(construct) if construct else {}, problems


@dataclass
class _Op:
    name: str
    parsed: MsprobeName
    index: int
    grads: list[Leaf] = field(default_factory=list)  # parameters_grad leaves waiting for the backward entry
    stack: Optional[list[str]] = None
    scope: Optional[list[str]] = None
    own_seen: bool = False
    started: bool = False  # a record went out (the stack goes on the first one)
    slots: dict[str, int] = field(default_factory=lambda: {INPUT: 0, OUTPUT: 0})


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
        dtype = dtype_name(str(raw_dtype))  # a JSON number or list: named by its text
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
