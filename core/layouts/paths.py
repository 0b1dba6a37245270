"""Read rank, graph/model and step off a dump file's folder path.

Every producer encodes them in folder names (FORMATS.md §5.1, §8.1):

* CANN model tree ``{time}/{device}/{model_name}/{model_id}/{step}`` (TF adapter, ACL,
  torchair GE mode, MindSpore O2 — the latter with a ``{step_id}/`` level above), with an
  optional ``worldsize{W}_global_rank{R}`` level on top;
* MindSpore r1.3+ ``rank_{r}/{net}/{graph_id}/{iteration}`` (+ ``constants/`` and the ``_``
  scratch folder of async runs);
* MindSpore r1.2 sync ``{net}/device_{id}/iteration_{n}`` and async
  ``{device}/{net}_graph_{id}/{id}/{iteration}``;
* single-op ACL ``{device}/{op_name}/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dumpscope.core.layouts.base import rank_from_parts

_TIME = re.compile(r"^\d{14}$")
_RANK_MS = re.compile(r"^rank_(\d+)$")
_WORLD = re.compile(r"^worldsize\d+_global_rank(\d+)$")
_ITER_OLD = re.compile(r"^iteration_(\d+)$")
_DEVICE_OLD = re.compile(r"^device_(\d+)$")
_GRAPH_OLD = re.compile(r"^(.+)_graph_(\d+)$")
_STEP_MSPROBE = re.compile(r"^step_?(\d+)$")

#: step number used for MindSpore ``constants/`` folders, which belong to no iteration
CONSTANTS_STEP = -1


@dataclass(slots=True)
class DumpPlace:
    rank: int
    graph: str
    step: int
    model_id: str = ""
    device: str = ""
    scheme: str = ""


def _digits(text: str) -> bool:
    return text.isdigit() and text.isascii()  # "²".isdigit() is True, int("²") raises


def place_of(parts: tuple[str, ...]) -> DumpPlace:
    """Interpret the folder components (root-relative) of a folder holding dump files."""
    n = len(parts)
    # CANN model tree: …/{time}/{device}/{model_name}/{model_id}/{step}
    for i in range(n - 1, -1, -1):
        if _TIME.match(parts[i]) and n - i >= 5 and _digits(parts[i + 1]) and _digits(parts[i + 4]):
            device = parts[i + 1]
            rank = _outer_rank(parts[:i], int(device))
            return DumpPlace(rank, parts[i + 2], int(parts[i + 4]), parts[i + 3], device, "cann_model")
    # MindSpore r1.3+: rank_{r}/{net}/{graph_id}/{iteration|constants}
    for i in range(n - 1, -1, -1):
        m = _RANK_MS.match(parts[i])
        if m and n - i >= 4 and _digits(parts[i + 2]):
            last = parts[i + 3]
            step = CONSTANTS_STEP if last == "constants" else int(last) if _digits(last) else 0
            return DumpPlace(int(m.group(1)), parts[i + 2], step, scheme="mindspore")
        if m and n - i == 4 and parts[i + 1] == "_":
            return DumpPlace(int(m.group(1)), parts[i + 2], 0, scheme="mindspore_scratch")
    # MindSpore r1.2 sync: {net}/device_{id}/iteration_{n}
    if n >= 2 and _ITER_OLD.match(parts[-1]) and _DEVICE_OLD.match(parts[-2]):
        return DumpPlace(int(_DEVICE_OLD.match(parts[-2]).group(1)), parts[-3] if n >= 3 else "",
                         int(_ITER_OLD.match(parts[-1]).group(1)), scheme="mindspore_r12_sync")
    # MindSpore r1.2 async: {device}/{net}_graph_{id}/{id}/{iteration}
    if n >= 3 and _GRAPH_OLD.match(parts[-3]) and _digits(parts[-2]) and _digits(parts[-1]):
        dev = parts[-4] if n >= 4 and _digits(parts[-4]) else "0"
        return DumpPlace(int(dev), parts[-2], int(parts[-1]), device=dev, scheme="mindspore_r12_async")
    # msprobe / O2 flattened: rank_{r}/{ts}/step_{s}
    for i in range(n - 1, -1, -1):
        m = _STEP_MSPROBE.match(parts[i])
        if m:
            return DumpPlace(rank_from_parts(parts[:i]), "", int(m.group(1)), scheme="step_folder")
    # single-op ACL: {device}/{op_name}
    if n >= 2 and _digits(parts[-2]):
        return DumpPlace(_outer_rank(parts[:-2], int(parts[-2])), parts[-1], 0, device=parts[-2], scheme="acl_op")
    step = int(parts[-1]) if n and _digits(parts[-1]) else 0
    return DumpPlace(rank_from_parts(parts), "", step, scheme="plain")


def _outer_rank(parts: tuple[str, ...], device: int) -> int:
    for part in reversed(parts):
        m = _WORLD.match(part) or _RANK_MS.match(part)
        if m:
            return int(m.group(1))
    return device
