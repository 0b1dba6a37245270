"""Arguments of one msprobe ``dump.json`` entry as leaves: tensors and plain values, in slot order.

msprobe writes every argument of an API/module call: tensors as ``{"type": "torch.Tensor",
"dtype", "shape", "Max", …}``, plain values as ``{"type": "int", "value": 3}``, ``None`` as a
JSON ``null`` and sequences as JSON lists.  dumpscope keeps all of them (INTERFACES.md §3):

* every leaf keeps its position, so ``[null, t1, t2]`` gives slots 0 (a "none" value), 1 and 2;
* a list holding no tensor is one value (``dtype "list"``, its plain values); a list holding a
  tensor is flattened depth first (positions ``"3.0"``, ``"3.1"``);
* ``pos`` is the positional path ("0", "3.1"), ``arg`` the name where there is one (kwargs key,
  parameter name, gradient name);
* a malformed item is reported (``problem``) and still takes its slot, so the slots after it
  do not shift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from dumpscope.core.model import INPUT, OUTPUT

#: dtype of a value leaf: the JSON type of its value (INTERFACES.md §3)
VALUE_DTYPES = ("float", "int", "bool", "str", "none", "list", "slice")
MAX_DEPTH = 16
_STAT_KEYS = (("Max", "max"), ("Min", "min"), ("Mean", "mean"), ("Norm", "l2norm"))
_NONFINITE_TEXT = {"nan": math.nan, "-nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
                   "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf}


@dataclass(slots=True)
class Leaf:
    io: str
    pos: str  # positional path ("0", "3.1") or "" for a named argument
    arg: Optional[str]  # kwargs key / parameter name / gradient name
    item: Any  # the dump.json item (tensor dict, value dict, None, list of plain values)
    is_tensor: bool
    problem: Optional[str] = None


def is_tensor_item(item: Any) -> bool:
    """A tensor description: ``type`` ending in "Tensor", or dtype+shape without a type."""
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    if isinstance(kind, str):
        return kind.endswith("Tensor") or kind.endswith("Parameter")
    return "dtype" in item and "shape" in item


def _has_tensor(value: Any, depth: int = 0) -> bool:
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, list):
        return any(_has_tensor(v, depth + 1) for v in value)
    return is_tensor_item(value)


def _leaves(io: str, value: Any, pos: str, arg: Optional[str], depth: int = 0) -> Iterator[Leaf]:
    if isinstance(value, list) and _has_tensor(value) and depth < MAX_DEPTH:
        for i, v in enumerate(value):
            yield from _leaves(io, v, f"{pos}.{i}" if pos else str(i), arg, depth + 1)
        return
    if is_tensor_item(value):
        yield Leaf(io, pos, arg, value, True)
        return
    problem = None
    if isinstance(value, dict) and "type" not in value and "value" not in value:
        problem = "neither a tensor nor a value (no type/value)"
    elif depth >= MAX_DEPTH:
        problem = "nested too deeply"
    yield Leaf(io, pos, arg, value, False, problem)


def entry_leaves(kind: str, direction: str, entry: dict[str, Any]) -> tuple[list[Leaf], list[str]]:
    """Leaves of a data entry in slot order, plus the problems of its fields.

    Forward: ``input_args`` then ``input_kwargs`` then ``parameters`` are inputs, ``output`` the
    outputs; backward: ``input``/``output``; ``parameters_grad``: every key is an output named
    by the key (``weight``, ``bias``).
    """
    out: list[Leaf] = []
    problems: list[str] = []

    def seq(io: str, field: str) -> None:
        value = entry.get(field)
        if value is None:
            return
        if isinstance(value, dict) and is_tensor_item(value):
            value = [value]  # a lone tensor written without its list
        if not isinstance(value, list):
            problems.append(f"{field} is {type(value).__name__}, expected a list")
            return
        for i, v in enumerate(value):
            out.extend(_leaves(io, v, str(i), None, 1))

    def named(io: str, field: str) -> None:
        value = entry.get(field)
        if value is None:
            return
        if not isinstance(value, dict):
            problems.append(f"{field} is {type(value).__name__}, expected an object")
            return
        for k, v in value.items():
            out.extend(_leaves(io, v, "", str(k), 1))

    if kind == "parameters_grad":
        for k, v in entry.items():
            if isinstance(v, list) and len(v) == 1:
                v = v[0]  # msprobe writes each gradient as a one-tensor list
            out.extend(_leaves(OUTPUT, v, "", str(k), 1))
    else:
        if "input_args" in entry or "input_kwargs" in entry:
            seq(INPUT, "input_args")
            named(INPUT, "input_kwargs")
        else:
            seq(INPUT, "input")
        named(INPUT, "parameters")
        seq(OUTPUT, "output")
        known = {"input_args", "input_kwargs", "input", "parameters", "output"}
        if not entry:
            problems.append("entry has no inputs or outputs")
        elif not known & set(entry):
            problems.append("no input/output fields (keys: " + ", ".join(sorted(map(str, entry))[:4]) + ")")
    for leaf in out:
        if leaf.problem:
            where = leaf.arg if leaf.arg is not None else leaf.pos
            problems.append(f"{leaf.io} {where}: {leaf.problem}")
    return out, problems


# ----------------------------------------------------------------------------- values


def value_of(item: Any) -> tuple[str, Any, Optional[str]]:
    """(dtype, JSON value, msprobe type) of a non-tensor leaf."""
    if item is None:
        return "none", None, None
    if isinstance(item, list):  # a list of plain values: unwrap each
        return "list", [plain(v) for v in item], None
    if isinstance(item, dict):
        kind = item.get("type")
        kind = kind if isinstance(kind, str) else None
        value = plain(item.get("value"))
        if kind == "slice":
            return "slice", value, kind
        return json_type(value), value, kind
    return json_type(item), item, None


def plain(value: Any, depth: int = 0) -> Any:
    """A dump.json value with its ``{"type", "value"}`` wrappers removed (lists kept)."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, dict) and "value" in value:
        return plain(value["value"], depth + 1)
    if isinstance(value, list):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def json_type(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "str"


# ----------------------------------------------------------------------------- tensor fields


def stat_number(value: Any) -> Optional[float]:
    """A dump.json statistic as a float: numbers, ``NaN``/``Infinity`` literals and the strings
    "nan"/"inf"/"-inf" (older writers), booleans of bool tensors (``"True"``/``false``) as 1/0;
    anything else → None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        s = value.strip().lower()
        if s in _NONFINITE_TEXT:
            return _NONFINITE_TEXT[s]
        if s in ("true", "false"):
            return float(s == "true")
        try:
            return float(s)
        except ValueError:
            return None
    return None


def tensor_stats(item: dict[str, Any], floating: bool, numel: int) -> tuple[Optional[dict[str, Any]], list[str]]:
    """``Max/Min/Mean/Norm`` (+ ``md5``) → stats keys, with non-finite values made floats.

    msprobe writes a tensor holding NaN as ``NaN`` (26.x), as the string "nan" (older), or as
    ``null`` where the value could not be written; a float tensor with elements whose Max and Min
    are both null counts as NaN (recorded in ``stats["null_stats"]``).
    """
    stats: dict[str, Any] = {}
    problems: list[str] = []
    nulls = 0
    for src, dst in _STAT_KEYS:
        if src not in item:
            continue
        raw = item[src]
        if raw is None:
            nulls += src in ("Max", "Min")
            continue
        num = stat_number(raw)
        if num is None:
            problems.append(f"{src} is {str(raw)[:20]!r}, not a number")
            continue
        stats[dst] = num
    if nulls == 2 and floating and numel > 0:
        stats["max"] = stats["min"] = math.nan
        stats["null_stats"] = True
    md5 = item.get("md5")
    if isinstance(md5, str) and md5:
        stats["md5"] = md5
    return stats or None, problems


def shape_of(raw: Any) -> tuple[tuple[int, ...], Optional[str]]:
    if raw is None:
        return (), None
    if isinstance(raw, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in raw):
        return tuple(raw), None
    return (), f"shape {str(raw)[:40]} is not a list of non-negative integers"
