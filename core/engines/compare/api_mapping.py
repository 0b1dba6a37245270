"""Pair the API calls of a MindSpore dump with those of its PyTorch reference, the way msprobe does.

msprobe names calls ``{ApiType}.{api}.{count}.{forward|backward}`` and modules
``{Cell|Module}.{path}.{Class}.{direction}.{count}``; the two frameworks spell the same call
differently (``Mint.cos`` / ``Torch.cos``, ``Functional.dense`` / ``Functional.linear``) and
name the same module differently (``network_with_loss`` / ``module``).  Rules, each a pass
over what the earlier ones left, each pair carrying the rule's name:

1. ``"api_mapping"`` (msprobe ``compare -am``): the MindSpore name with ``Mint`` → ``Torch``,
   ``MintFunctional`` → ``Functional``, then msprobe's built-in table (``ms_pt_table``), then
   the user's ``--api-mapping`` file (``ms_api`` → ``pt_api``) equals the PyTorch name,
   call count included;
2. ``"fuzzy_order"`` (msprobe's fuzzy match): within one mapped API and direction, the n-th
   remaining MindSpore call pairs with the n-th remaining PyTorch call, in call order, even when
   the counts differ (the extra calls stay unmatched);
3. ``"layer_mapping"`` (msprobe ``compare -lm``) replaces 1 and 2: each call is placed in its
   module tree (``construct.json`` parents, plus the framework function that called the API,
   read from the stack as msprobe does), the tree paths are renamed by the layer-mapping
   file, and the call pairs with the call at the same position under the same renamed path.

Calls no rule pairs are listed unmatched, never force-paired.  Golden may be either side: the
MindSpore side is the one whose names are rewritten.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

from dumpscope.core.engines.compare.match import MatchResult, OpRef
from dumpscope.core.engines.compare.ms_pt_table import MS_TO_PT
from dumpscope.core.engines.compare.yaml_subset import YamlSubsetError, loads

RULE_API_MAPPING = "api_mapping"
RULE_FUZZY_ORDER = "fuzzy_order"
RULE_LAYER_MAPPING = "layer_mapping"

MINDSPORE = "mindspore"
PYTORCH = "pytorch"
_FRAMEWORK_ALIASES = {"mindspore": MINDSPORE, "pytorch": PYTORCH, "torch": PYTORCH, "mindtorch": PYTORCH}
MAX_MAPPING_BYTES = 16 << 20


class MappingFileError(ValueError):
    """A ``--layer-mapping`` / ``--api-mapping`` file that cannot be used (message names the file)."""


@dataclass(slots=True)
class CallInfo:
    """What the matcher needs of one op besides its name: its framework, parent module and stack."""

    framework: str = ""
    parent: str = ""  # construct.json parent (direct), "" at top level
    stack: list[str] = field(default_factory=list)  # innermost frame first, as msprobe writes it


def framework_of(text: Any) -> str:
    return _FRAMEWORK_ALIASES.get(str(text or "").lower(), "")


# ----------------------------------------------------------------------------- files


def _read(path: str) -> str:
    try:
        if os.path.getsize(path) > MAX_MAPPING_BYTES:
            raise MappingFileError(f"{path}: mapping file larger than {MAX_MAPPING_BYTES >> 20} MB")
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise MappingFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise MappingFileError(f"{path}: not UTF-8 text") from None


def _load_yaml(path: str) -> Any:
    """A mapping file parsed by the YAML subset reader; a syntax error names the file."""
    try:
        return loads(_read(path))
    except YamlSubsetError as exc:
        raise MappingFileError(f"{path}: {exc}") from None


def load_layer_mapping(path: str) -> dict[str, dict[str, str]]:
    """msprobe ``layer_mapping.yaml``: ``{ClassName: {ms_child[.ms_api]: pt_child[.pt_api]}}``."""
    doc = _load_yaml(path)
    if doc is None:
        return {}
    if not isinstance(doc, dict) or not all(isinstance(v, dict) or v is None for v in doc.values()):
        raise MappingFileError(f"{path}: expected 'ClassName:' blocks of 'ms_name: pt_name' lines")
    out: dict[str, dict[str, str]] = {}
    for cls, names in doc.items():
        for k, v in (names or {}).items():
            if not isinstance(v, (str, int)) or isinstance(v, bool):
                raise MappingFileError(f"{path}: {cls}.{k}: expected a name, got {v!r}")
            out.setdefault(str(cls), {})[str(k)] = str(v)
    return out


def load_api_mapping(path: str) -> dict[str, str]:
    """msprobe ``api_mapping.yaml``: a list of ``{ms_api, pt_api, ...}`` → ``{ms_api: pt_api}``.

    The argument/output index lists (``ms_args``/``pt_args``…) are not applied: slots of a mapped
    pair still pair by position."""
    doc = _load_yaml(path)
    if doc is None:
        return {}
    if isinstance(doc, dict):  # a plain {ms_api: pt_api} table is accepted too
        items = [{"ms_api": k, "pt_api": v} for k, v in doc.items()]
    elif isinstance(doc, list):
        items = doc
    else:
        raise MappingFileError(f"{path}: expected a list of ms_api/pt_api entries")
    out: dict[str, str] = {}
    for i, item in enumerate(items):
        if not (isinstance(item, dict) and isinstance(item.get("ms_api"), str)
                and isinstance(item.get("pt_api"), str)):
            raise MappingFileError(f"{path}: entry {i + 1} lacks ms_api/pt_api names")
        out[item["ms_api"]] = item["pt_api"]
    return out


# ----------------------------------------------------------------------------- api names


def api_of(name: str) -> Optional[str]:
    """``{ApiType}.{api}`` of an msprobe API call name (None for modules and other names)."""
    parts = name.split(".")
    if len(parts) < 4 or parts[0] in ("Cell", "Module") or parts[-1] not in ("forward", "backward") \
            or not parts[-2].isdigit():
        return None
    return f"{parts[0]}.{parts[1]}"


def mapped_name(ms_name: str, user: Optional[dict[str, str]] = None) -> str:
    """The PyTorch spelling of a MindSpore call name (msprobe's internal mapping, then the user's)."""
    parts = ms_name.split(".")
    name = ms_name
    if len(parts) >= 2:
        api = f"{parts[0]}.{parts[1]}"
        if parts[0] == "Mint":
            name = ms_name.replace("Mint", "Torch")
        elif parts[0] == "MintFunctional":
            name = ms_name.replace("MintFunctional", "Functional")
        elif api in MS_TO_PT:
            name = ms_name.replace(api, MS_TO_PT[api], 1)
    if user:
        api = api_of(ms_name)
        if api and api in user:
            name = user[api] + ms_name[len(api):]
    return name


def _call_key(name: str) -> Optional[tuple[str, str]]:
    """(api without count, direction) for fuzzy pairing."""
    parts = name.split(".")
    if len(parts) >= 4 and parts[-1] in ("forward", "backward") and parts[-2].isdigit():
        return ".".join(parts[:-2]), parts[-1]
    if len(parts) >= 4 and parts[-2] in ("forward", "backward") and parts[-1].isdigit():
        return ".".join(parts[:-1]), "module"
    m = _TS_CALL.match(name)  # Troubleshooter: {Type}_{api}_{count}_{direction}
    if m:
        return m.group(1), m.group(3)
    return None


_TS_CALL = re.compile(r"^(\w+?)_(\d+)_(forward|backward)$")


# ----------------------------------------------------------------------------- layer mapping

_LAYER_TYPES = ("Cell", "Module")
_NO_STACK_TYPES = ("Primitive", "Jit")
_FRAME_FILES = ("site-packages/torch", "package/torch", "site-packages/mindspore", "package/mindspore")
_SKIP_FILES = ("msprobe", "MindSpeed")
_SKIP_FUNCS = ("construct", "__call__")
_STACK_SIGNS = {MINDSPORE: ("Template", "construct"), PYTORCH: ("Template", r"in (for|back)ward,")}
TOP_LAYER = "TopLayer"


@dataclass(slots=True)
class _Item:
    name: str
    type_name: str
    api_name: str
    state: str
    layer_scope: str
    full_scope: str = ""


def _frame_function(stack: list[str], framework: str) -> str:
    """The framework function that made the call: msprobe takes the lines between the last
    ``Template`` frame and the first frame of the module's forward/construct, and the last
    framework line of the leading run of framework lines there."""
    start_sign, end_sign = _STACK_SIGNS.get(framework, _STACK_SIGNS[PYTORCH])
    start, end = -1, len(stack)
    for i, line in enumerate(stack):
        if re.search(start_sign, line):
            start = i
        elif start >= 0 and re.search(end_sign, line):
            end = i
            break
    frame_line = None
    for line in stack[start + 1:end]:
        if any(f in line.split(",")[0] for f in _FRAME_FILES):
            frame_line = line
        else:
            break
    if not frame_line:
        return ""
    fields = frame_line.split(",")
    if any(s in fields[0] for s in _SKIP_FILES) or len(fields) < 3:
        return ""
    func = fields[2]
    if any(s in func for s in _SKIP_FUNCS):
        return ""
    words = func.split()
    return words[1] if len(words) > 1 else ""


def _item(name: str, info: CallInfo, framework: str) -> Optional[_Item]:
    parts = name.split(".")
    if len(parts) < 4 or "parameters_grad" in parts[-2:]:
        return None
    api_type, type_name = parts[0], parts[-3]
    if api_type in _LAYER_TYPES:
        api_name, state = parts[-4], parts[-2]
        scope_parts = parts[:-4] + parts[-3:]
    else:
        api_name, state = type_name, parts[-1]
        scope_parts = info.parent.split(".") if info.parent else []
    layer_scope = ".".join(scope_parts[:-3]) if scope_parts else TOP_LAYER
    item = _Item(name, type_name, api_name, state, layer_scope)
    frame = ""
    if api_type not in _LAYER_TYPES and api_type not in _NO_STACK_TYPES and info.stack:
        frame = _frame_function(info.stack, framework)
    item.full_scope = ".".join([layer_scope] + ([frame] if frame else []) + [api_name])
    return item


def _backward_from_forward(items: list[_Item]) -> None:
    """Backward calls have no stack: they take their forward call's place (msprobe's backward pass)."""
    by_name = {it.name: it for it in items}
    for it in items:
        parts = it.name.split(".")
        if "backward" in parts[-2:]:
            fwd = ".".join(parts[:-2] + [p.replace("backward", "forward") for p in parts[-2:]])
            f = by_name.get(fwd)
            if f is not None:
                it.full_scope, it.layer_scope = f.full_scope, f.layer_scope


def _renumber_layers(items: list[_Item], type_name: str = "ParallelTransformer", suffix: str = "layers") -> None:
    """Layer numbers under a ``ParallelTransformer`` counted from its lowest (pipeline stages
    number layers globally in MindSpore, locally in PyTorch)."""
    prefixes = {f"{it.full_scope}.{suffix}": math.inf for it in items if it.type_name == type_name}

    def number(scope: str, prefix: str) -> float:
        m = re.search(rf"^{re.escape(prefix)}\.(\S+?)(?:\.|$)", scope)
        nums = re.findall(r"\d+", m.group(1)) if m else []
        return int(nums[-1]) if nums else math.inf

    for prefix in prefixes:
        prefixes[prefix] = min([prefixes[prefix]] + [number(it.full_scope, prefix) for it in items])
    for prefix, low in prefixes.items():
        for it in items:
            rel = number(it.full_scope, prefix) - low
            if math.isinf(rel):
                continue
            m = re.search(rf"^{re.escape(prefix)}\.(\S+?)(?:\.|$)", it.full_scope)
            if m:
                it.full_scope = re.sub(rf"^{re.escape(prefix)}\.{re.escape(m.group(1))}", f"{prefix}.{rel}",
                                       it.full_scope, count=1)


class _Node:
    __slots__ = ("type_name", "items", "children")

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name
        self.items: dict[str, list[_Item]] = defaultdict(list)
        self.children: dict[str, _Node] = {}


def _tree(items: list[_Item]) -> _Node:
    root = _Node(TOP_LAYER)
    for it in items:
        node = root
        for part in it.full_scope.split(".")[1:]:
            node = node.children.setdefault(part, _Node(part))
        node.items[it.state].append(it)
        node.type_name = it.type_name
    return root


def _rules(mapping: dict[str, dict[str, str]]) -> dict[str, dict[str, list[tuple[list[str], str]]]]:
    """``{Class: {first part: [(origin parts, target), longest origin first]}}`` ("Cell" = top layer)."""
    out: dict[str, dict[str, list[tuple[list[str], str]]]] = {}
    for cls, names in mapping.items():
        cls = TOP_LAYER if cls == "Cell" else cls
        for origin, target in names.items():
            parts = origin.split(".")
            out.setdefault(cls, {}).setdefault(parts[0], []).append((parts, target.split("(")[0]))
    for by_first in out.values():
        for rules in by_first.values():
            rules.sort(key=lambda r: -len(r[0]))
    return out


def _renamed_place(root: _Node, item: _Item, rules: dict) -> tuple[str, int]:
    """The item's tree path with the layer-mapping renames applied, and its position there."""
    parts = item.full_scope.split(".")
    new = [TOP_LAYER]
    node, i = root, 1
    while i < len(parts):
        child = parts[i]
        step, target = 1, child
        for origin, tgt in rules.get(node.type_name, {}).get(child, []):
            if parts[i:i + len(origin)] == origin:
                step, target = len(origin), tgt
                break
        new.append(target)
        for _ in range(step):
            node = node.children[parts[i]]
            i += 1
    index = -1
    for k, other in enumerate(node.items[item.state]):
        if other.name == item.name:
            index = k
    return ".".join(new), index


def _lookup(root: _Node, scope: str, state: str, index: int) -> Optional[_Item]:
    node = root
    for part in scope.split(".")[1:]:
        node = node.children.get(part)
        if node is None:
            return None
    found = node.items.get(state, [])
    return found[index] if 0 <= index < len(found) else None


def layer_mapped_names(ms: list[tuple[str, CallInfo]], pt: list[tuple[str, CallInfo]],
                       mapping: dict[str, dict[str, str]]) -> dict[str, Optional[str]]:
    """msprobe's layer mapping: each MindSpore call name → the PyTorch call name (None = N/A).

    ``ms``/``pt`` list every call in dump order with its parent module and stack."""
    def items(calls: list[tuple[str, CallInfo]], fw: str) -> list[_Item]:
        out = [it for name, info in calls if (it := _item(name, info, fw)) is not None]
        _backward_from_forward(out)
        _renumber_layers(out)
        return out

    for calls in (ms, pt):
        # like msprobe: without a module hierarchy (construct.json) and stacks on a side there is no tree
        if not any(info.parent for _, info in calls) or not any(info.stack for _, info in calls):
            return {name: None for name, _ in ms}
    ms_items, pt_items = items(ms, MINDSPORE), items(pt, PYTORCH)
    ms_root, pt_root = _tree(ms_items), _tree(pt_items)
    rules = _rules(mapping)
    out: dict[str, Optional[str]] = {}
    for it in ms_items:
        scope, index = _renamed_place(ms_root, it, rules)
        hit = _lookup(pt_root, scope, it.state, index)
        out[it.name] = hit.name if hit else None
    return out


# ----------------------------------------------------------------------------- the matcher


def cross_match(golden: list[OpRef], target: list[OpRef], infos: dict[Any, CallInfo], golden_is_ms: bool,
                layer_mapping: Optional[dict[str, dict[str, str]]] = None,
                api_mapping: Optional[dict[str, str]] = None) -> MatchResult:
    """Pair golden and target calls by the rules above (``infos`` by ``OpRef.key``)."""
    ms, pt = (golden, target) if golden_is_ms else (target, golden)
    ms = sorted(ms, key=lambda o: o.exec_index)
    pt = sorted(pt, key=lambda o: o.exec_index)
    found: list[tuple[OpRef, OpRef, str]] = []  # (ms, pt, rule)
    if layer_mapping is not None:
        names = layer_mapped_names([(o.name, infos.get(o.key, CallInfo())) for o in ms],
                                   [(o.name, infos.get(o.key, CallInfo())) for o in pt], layer_mapping)
        by_name: dict[str, list[OpRef]] = defaultdict(list)
        for o in pt:
            by_name[o.name].append(o)
        used: set[int] = set()
        for o in ms:
            target_name = names.get(o.name)
            cands = [c for c in by_name.get(target_name or "", []) if id(c) not in used]
            if cands:
                used.add(id(cands[0]))
                found.append((o, cands[0], RULE_LAYER_MAPPING))
    else:
        pt_by_name: dict[str, list[OpRef]] = defaultdict(list)
        for o in pt:
            pt_by_name[o.name].append(o)
        used = set()
        left_ms = []
        for o in ms:
            cands = [c for c in pt_by_name.get(mapped_name(o.name, api_mapping), []) if id(c) not in used]
            if cands:
                used.add(id(cands[0]))
                found.append((o, cands[0], RULE_API_MAPPING))
            else:
                left_ms.append(o)
        groups: dict[tuple[str, str], list[OpRef]] = defaultdict(list)
        for o in pt:
            if id(o) not in used and (k := _call_key(o.name)) is not None:
                groups[k].append(o)
        for o in left_ms:
            k = _call_key(mapped_name(o.name, api_mapping))
            if k is not None and groups.get(k):
                c = groups[k].pop(0)
                used.add(id(c))
                found.append((o, c, RULE_FUZZY_ORDER))
    paired_ms = {id(m) for m, _, _ in found}
    paired_pt = {id(p) for _, p, _ in found}
    pairs = [((m, p, r) if golden_is_ms else (p, m, r)) for m, p, r in found]
    pairs.sort(key=lambda x: (x[1].exec_index, x[0].exec_index))
    left_m = [o for o in ms if id(o) not in paired_ms]
    left_p = [o for o in pt if id(o) not in paired_pt]
    return MatchResult(pairs=pairs, unmatched_golden=left_m if golden_is_ms else left_p,
                       unmatched_target=left_p if golden_is_ms else left_m)


# ----------------------------------------------------------------------------- engine entry

API_PRODUCERS = ("msprobe", "troubleshooter")


def _infos(q: Any, ops: list[Any], need_stack: bool) -> dict[int, CallInfo]:
    out: dict[int, CallInfo] = {}
    for op in ops if need_stack else ops[:1]:
        info = CallInfo()
        for t in q.tensors(op.id):
            ex = t.extra or {}
            info.framework = info.framework or str(ex.get("framework") or "")
            scope = ex.get("scope")
            if scope and not info.parent:
                info.parent = str(scope[-1]) if isinstance(scope, list) else str(scope)
            if ex.get("stack") and not info.stack:
                info.stack = [str(x) for x in ex["stack"]]
        out[op.id] = info
    return out


def match_across_frameworks(golden: Any, target: Any, g_ops: list[Any], t_ops: list[Any],
                            layer_mapping: Optional[str] = None,
                            api_mapping: Optional[str] = None,
                            position: Any = lambda o: o.exec_index or 0) -> Optional[MatchResult]:
    """The cross-framework match of two API dumps (``DumpQuery`` + their ops of one place), or None
    when the rules do not apply (same framework, not API dumps, and no mapping file given)."""
    lm = load_layer_mapping(layer_mapping) if layer_mapping else None
    am = load_api_mapping(api_mapping) if api_mapping else None
    if not g_ops or not t_ops:
        return None
    if lm is None and am is None and not (g_ops[0].producer in API_PRODUCERS and t_ops[0].producer in API_PRODUCERS):
        return None
    g_infos = _infos(golden, g_ops, lm is not None)
    t_infos = _infos(target, t_ops, lm is not None)
    g_fw = framework_of(g_infos[g_ops[0].id].framework)
    t_fw = framework_of(t_infos[t_ops[0].id].framework)
    if lm is None and am is None and not (g_fw and t_fw and g_fw != t_fw):
        return None
    golden_is_ms = g_fw == MINDSPORE or (t_fw != MINDSPORE and any(o.name.startswith(("Mint.", "Cell.", "Primitive."))
                                                                   for o in g_ops))
    refs_g = [OpRef(o.name, o.type, position(o), ("g", o.id)) for o in g_ops]
    refs_t = [OpRef(o.name, o.type, position(o), ("t", o.id)) for o in t_ops]
    infos = {("g", k): v for k, v in g_infos.items()}
    infos.update({("t", k): v for k, v in t_infos.items()})
    result = cross_match(refs_g, refs_t, infos, golden_is_ms, lm, am)
    for ref in (*[p[0] for p in result.pairs], *[p[1] for p in result.pairs], *result.unmatched_golden,
                *result.unmatched_target):
        ref.key = ref.key[1]
    return result
