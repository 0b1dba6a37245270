"""Pair ops of a golden dump with ops of a target dump, and their tensors slot by slot.

Matching runs in three passes, each over what the previous passes left unmatched, and every
pair records the rule that made it:

1. ``"name"`` — identical full names.
2. ``"name_normalized"`` — names equal after sanitising ``/ . \\ space`` to ``_`` (the dump
   file spelling, FORMATS.md §5.2) and dropping ``PrimFunc_`` (MindSpore 2.3+ prefixes
   primitive names with it in some paths, not in others); then, for names that end in a
   MindSpore ``Type-opN`` token, the token alone when it is unique among the remaining
   golden ops *and* among the remaining target ops (short ``Conv2D-op12`` vs scope-ful
   ``Default_..._Conv2D-op12``, or a scope renamed between runs).
3. ``"order_type"`` — ops renamed beyond that: within one op type, the n-th remaining golden
   op pairs with the n-th remaining target op in execution order, but only when both sides
   have the same number of remaining ops of that type.  With unequal counts we cannot tell
   which op was added or dropped, so none of that type is paired (all stay unmatched).

Repeated names (the same name several times, e.g. an op run in a loop) pair occurrence by
occurrence in execution order.  Call once per (rank, step) — ``key`` is carried, not used.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional

RULE_NAME = "name"
RULE_NORMALIZED = "name_normalized"
RULE_ORDER_TYPE = "order_type"

_SANITISE = re.compile(r"[/.\\ ]")
_OP_TOKEN = re.compile(r"([A-Za-z0-9]+-op\d+)$")


@dataclass(slots=True)
class OpRef:
    """One op of one side: what matching needs, plus the caller's own ``key`` to find it again."""

    name: str
    type: str
    exec_index: int
    key: Any = None


@dataclass(slots=True)
class MatchResult:
    """Pairs ``(golden, target, rule)`` in target execution order, and the leftovers of each side."""

    pairs: list[tuple[OpRef, OpRef, str]] = field(default_factory=list)
    unmatched_golden: list[OpRef] = field(default_factory=list)
    unmatched_target: list[OpRef] = field(default_factory=list)


def normalize_name(name: str) -> str:
    """Dump-file spelling of ``name`` without ``PrimFunc_`` prefixes."""
    return _SANITISE.sub("_", name).replace("PrimFunc_", "")


def op_token(name: str) -> Optional[str]:
    """The trailing MindSpore ``Type-opN`` token of a (normalised) name, else ``None``."""
    m = _OP_TOKEN.search(normalize_name(name))
    return m.group(1) if m else None


def _pair_by(
    golden: list[OpRef], target: list[OpRef], keyfn: Callable[[OpRef], Optional[Hashable]],
    rule: str, pairs: list[tuple[OpRef, OpRef, str]], unique_only: bool = False,
    equal_counts_only: bool = False,
) -> tuple[list[OpRef], list[OpRef]]:
    """Pair ops whose keys agree (occurrence by occurrence); return what is left of each side."""
    gk: dict[Hashable, list[OpRef]] = defaultdict(list)
    tk: dict[Hashable, list[OpRef]] = defaultdict(list)
    for op in golden:
        k = keyfn(op)
        if k is not None:
            gk[k].append(op)
    for op in target:
        k = keyfn(op)
        if k is not None:
            tk[k].append(op)
    used: set[int] = set()
    for k, gops in gk.items():
        tops = tk.get(k)
        if not tops:
            continue
        if unique_only and (len(gops) != 1 or len(tops) != 1):
            continue
        if equal_counts_only and len(gops) != len(tops):
            continue
        for g, t in zip(gops, tops):
            pairs.append((g, t, rule))
            used.add(id(g))
            used.add(id(t))
    return [o for o in golden if id(o) not in used], [o for o in target if id(o) not in used]


def match_ops(golden: list[OpRef], target: list[OpRef]) -> MatchResult:
    """Match golden ops to target ops by name, normalised name, then type + execution order."""
    g = sorted(golden, key=lambda o: o.exec_index)
    t = sorted(target, key=lambda o: o.exec_index)
    pairs: list[tuple[OpRef, OpRef, str]] = []
    g, t = _pair_by(g, t, lambda o: o.name, RULE_NAME, pairs)
    g, t = _pair_by(g, t, lambda o: normalize_name(o.name), RULE_NORMALIZED, pairs)
    g, t = _pair_by(g, t, lambda o: op_token(o.name), RULE_NORMALIZED, pairs, unique_only=True)
    g, t = _pair_by(
        g, t, lambda o: normalize_name(o.type) if o.type else None, RULE_ORDER_TYPE, pairs,
        equal_counts_only=True,
    )
    pairs.sort(key=lambda p: (p[1].exec_index, p[0].exec_index))
    return MatchResult(pairs=pairs, unmatched_golden=g, unmatched_target=t)


def pair_slots(golden: dict[tuple[str, int], Any], target: dict[tuple[str, int], Any]
               ) -> tuple[list[tuple[tuple[str, int], Any, Any]], list[tuple[str, int]]]:
    """Pair two ops' tensors by (io, slot): inputs first, then outputs, slot order.

    Slots are positions as the dump records them (msprobe keeps a ``null`` entry's position,
    so ``[null, t1, t2]`` gives slots 1 and 2 on both sides).  Returns the pairs and the golden
    keys the target lacks.
    """
    pairs, missing = [], []
    for key in sorted(golden, key=lambda k: (0 if k[0] == "input" else 1, k[1])):
        if key in target:
            pairs.append((key, golden[key], target[key]))
        else:
            missing.append(key)
    return pairs, missing
