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

Names MindSpore *generates* when it expands a kernel (``Expand/_Muls/Mul-op1``,
``Expand/_MatMulExt/BatchMatMul-op3``) come from one counter over the whole graph: the same name in
two runs is the same op only when everything expanded before it is the same.  Across MindSpore
versions, or after a change earlier in the net, ``Expand/_Muls/Mul-op1`` can be a different
multiplication.  So generated names never pair by name alone: what counts is the name without its
counter (``Expand__Muls_Mul``: what was expanded, into which op).  Each generated op is placed
between the ops before and after it that already paired (its *anchors*: both, because independent
branches can run in another order); within one stretch, ops of one such kind pair in execution order
when both sides have as many, then across the graph where both sides have as many of a kind left; repeated until nothing more pairs (``"name"`` when the full names agree
too, else ``"order_type"``).  The rest stay unmatched.

Repeated names (the same name several times, e.g. an op run in a loop) pair occurrence by
occurrence in execution order.  Call once per (rank, step) — ``key`` is carried, not used.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Callable, Hashable, Optional

from dumpscope.core.names import OP_COUNTER
from dumpscope.core.query.rows import slot_key

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
    g_keys, t_keys = list(map(keyfn, golden)), list(map(keyfn, target))
    if len(set(g_keys)) == len(g_keys) and len(set(t_keys)) == len(t_keys):
        # each key once a side (the usual place: no name repeats): the pairs below without a list a key
        # (a one-to-one pairing meets ``unique_only`` and ``equal_counts_only`` alike)
        by_key = dict(zip(t_keys, target))
        paired: set[Hashable] = set()
        for k, g in zip(g_keys, golden):
            if k is not None:
                t = by_key.get(k)
                if t is not None:
                    pairs.append((g, t, rule))
                    paired.add(k)
        if not paired:
            return golden, target
        return ([o for o, k in zip(golden, g_keys) if k not in paired],
                [o for o, k in zip(target, t_keys) if k not in paired])
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


def generated_name(name: str) -> bool:
    """A name from MindSpore's kernel expansion (``Expand/…``): numbered by a graph-wide counter."""
    if "Expand" not in name and "PrimFunc" not in name:
        return False  # normalising only turns / . \ and spaces into _ and drops PrimFunc_: no Expand_ then
    return normalize_name(name).startswith("Expand_")


def _type_key(o: OpRef) -> Optional[str]:
    return normalize_name(o.type) if o.type else None


def match_ops(golden: list[OpRef], target: list[OpRef]) -> MatchResult:
    """Match golden ops to target ops by name, normalised name, then type + execution order."""
    g_all = sorted(golden, key=lambda o: o.exec_index)
    t_all = sorted(target, key=lambda o: o.exec_index)
    g_gen = [o for o in g_all if generated_name(o.name)]
    t_gen = [o for o in t_all if generated_name(o.name)]
    generated = {id(o) for o in g_gen + t_gen}
    g = [o for o in g_all if id(o) not in generated]
    t = [o for o in t_all if id(o) not in generated]
    pairs: list[tuple[OpRef, OpRef, str]] = []
    g, t = _pair_by(g, t, attrgetter("name"), RULE_NAME, pairs)
    g, t = _pair_by(g, t, lambda o: normalize_name(o.name), RULE_NORMALIZED, pairs)
    g, t = _pair_by(g, t, lambda o: op_token(o.name), RULE_NORMALIZED, pairs, unique_only=True)
    g_gen, t_gen = _pair_generated(g_all, t_all, g_gen, t_gen, pairs)
    g, t = _pair_by(g, t, _type_key, RULE_ORDER_TYPE, pairs, equal_counts_only=True)
    pairs.sort(key=lambda p: (p[1].exec_index, p[0].exec_index))
    left_g = sorted(g + g_gen, key=lambda o: o.exec_index)
    left_t = sorted(t + t_gen, key=lambda o: o.exec_index)
    return MatchResult(pairs=pairs, unmatched_golden=left_g, unmatched_target=left_t)


def _generated_kind(o: OpRef) -> str:
    """A generated name without its counter: what was expanded and into which op
    (``Expand__SoftmaxBackward_Mul``)."""
    return OP_COUNTER.sub("", normalize_name(o.name))


def _pair_generated(g_all: list[OpRef], t_all: list[OpRef], g_gen: list[OpRef], t_gen: list[OpRef],
                    pairs: list[tuple[OpRef, OpRef, str]]) -> tuple[list[OpRef], list[OpRef]]:
    """Pair generated-name ops (module docstring), in rounds until nothing more pairs: within the
    stretch between the same anchors (the paired ops before and after), then across the graph
    where both sides have as many left of one kind; each round's pairs are new anchors."""

    if not g_gen or not t_gen:
        return g_gen, t_gen
    generated = {id(o) for o in g_gen + t_gen}
    kind = {id(o): _generated_kind(o) for o in g_gen + t_gen}

    def add(a: OpRef, b: OpRef) -> None:
        pairs.append((a, b, RULE_NAME if a.name == b.name else RULE_ORDER_TYPE))

    def stretches(ops: list[OpRef], anchor_of: dict[int, int], paired: set[int]
                  ) -> dict[tuple[int, int, str], list[OpRef]]:
        after: dict[int, int] = {}
        anchor = -1
        for o in ops:
            if id(o) in paired:
                anchor = anchor_of.get(id(o), anchor)
            elif id(o) in generated:
                after[id(o)] = anchor
        out: dict[tuple[int, int, str], list[OpRef]] = defaultdict(list)
        anchor = -2
        for o in reversed(ops):
            if id(o) in paired:
                anchor = anchor_of.get(id(o), anchor)
            elif id(o) in after:
                out[(after[id(o)], anchor, kind[id(o)])].append(o)
        for group in out.values():
            group.reverse()
        return out

    while True:
        before = len(pairs)
        anchor_of = {}
        for i, (go, to, _rule) in enumerate(pairs):
            anchor_of[id(go)] = anchor_of[id(to)] = i
        paired = set(anchor_of)
        gs, ts = stretches(g_all, anchor_of, paired), stretches(t_all, anchor_of, paired)
        for key, go in gs.items():
            to = ts.get(key, [])
            if len(go) == len(to):
                for a, b in zip(go, to):
                    add(a, b)
                    paired.update((id(a), id(b)))
        gk: dict[str, list[OpRef]] = defaultdict(list)
        tk: dict[str, list[OpRef]] = defaultdict(list)
        for o in g_gen:
            if id(o) not in paired:
                gk[kind[id(o)]].append(o)
        for o in t_gen:
            if id(o) not in paired:
                tk[kind[id(o)]].append(o)
        for k, go in gk.items():
            if len(go) == len(tk.get(k, ())):
                for a, b in zip(go, tk[k]):
                    add(a, b)
        if len(pairs) == before:
            break
    paired = {id(o) for p in pairs for o in p[:2]}
    return [o for o in g_gen if id(o) not in paired], [o for o in t_gen if id(o) not in paired]


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


def same_slots(golden: list[Any], target: list[Any]) -> Optional[list[tuple[Any, Any]]]:
    """``pair_slots``' pairs (golden, target) of two ops' tensors (records with ``io`` and ``slot``) when the
    target holds its tensors in the golden's slots, listed alike in pair order (inputs first, each kind by
    slot: how ``DumpQuery.tensors_of`` lists an op's), else None (then ``pair_slots`` pairs them).  The usual
    op of a compare: one pass over the two lists, no keyed dicts and sort an op."""
    if len(golden) != len(target):
        return None
    prev: Optional[tuple[bool, int]] = None
    for g, t in zip(golden, target):
        if g.io != t.io or g.slot != t.slot:
            return None
        key = slot_key(g)  # pair order; strictly rising: no key twice, none out of order
        if prev is not None and not prev < key:
            return None
        prev = key
    return list(zip(golden, target))
