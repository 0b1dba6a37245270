"""Golden-vs-target compare of two indexed dumps: pairs, measures, judges, traces origins.

Ops are matched by name, then normalised name, then type and execution order (``match``);
tensors by io and slot.  Each tensor pair is measured in its logical layout in a common dtype
(``metrics``), or by statistics when one side holds no tensor data; non-tensor arguments
(msprobe/Troubleshooter ``storage == "value"``) by value.  The verdict of each row (``verdict``)
leaves open what the fixed rules do not decide; ``origin`` then walks the ops in execution order to say
where each error was born.  The index is asked for every op's tensors in a few queries, and the
tensor pairs are measured by ``measure_many`` (a process pool for big places, results in op order);
within an op each small dump file is read once, its header parsed once, and all its tensors decoded
from that one buffer (``tensor_io.OnceReader``: a CANN file holds every input and output of the op).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Optional

from dumpscope.core.engines.compare import origin as org
from dumpscope.core.engines.compare import precision as pr
from dumpscope.core.engines.compare import verdict as vd
from dumpscope.core.engines.compare.api_mapping import match_across_frameworks
from dumpscope.core.engines.compare.match import OpRef, match_ops, pair_slots, same_slots
from dumpscope.core.engines.compare import measure_many  # noqa: I001 (module and names)
from dumpscope.core.engines.compare.measure_many import Judged, Measurer, OpJob
from dumpscope.core.engines.compare.metrics import CompareResult, measure_stats
from dumpscope.core.support.gc_pause import gc_paused
from dumpscope.core.layouts.py_stack import source_from_stack
from dumpscope.core.model import INPUT, OUTPUT
from dumpscope.core.query import shown_step
from dumpscope.core.support.row_spool import PrintedRows, RowSpool, plain
from dumpscope.core.graphs.source_frames import first_user_frame

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery, TensorRow
    from dumpscope.core.query.rows import PlaceOp
    from dumpscope.core.query.graph_lookup import GraphLookup

STORAGE_VALUE = "value"  # INTERFACES.md §3: a non-tensor argument kept in its slot
_CHUNK_OPS = 256  # ops prepared (queried, paired, classified) and handed to the measurer at a time
#: ops handed to the measurer and not yet made rows: preparing outruns measuring, and each waiting op
#: holds both sides' tensor records and graph details (a place of 100k ops held them all)
_AHEAD_OPS = 16 * _CHUNK_OPS
#: what compare reads of ``graph_details`` (``graph_lookup.empty_details``) for an op joined to no graph
#: node: asked of the joined ops only, the others share this (read, never changed)
_NO_GRAPH: dict[str, Any] = {"inputs_from": (), "source": ()}
_LITERAL = re.compile(r"^[A-Za-z0-9_]*\(")  # graph literals: F32(1e-05), I64(-1), Bool(1), Tensor(...), (..)


@dataclass(slots=True)
class _Pair:
    gop: "PlaceOp"
    top: "PlaceOp"
    match: str
    g: "TensorRow"
    t: "TensorRow"
    kind: str = "tensor"
    result: Optional[CompareResult] = None
    error: Optional[str] = None  # unreadable tensor
    value: Optional[tuple[Any, Any]] = None  # scalar values (golden, target)
    verdict: str = vd.PASS
    rule: str = ""
    facts: Optional[org.RowFacts] = None  # the walk's judgement of this pair
    shape_note: str = ""  # "shape (a) vs (b)" when the same count of values came in another shape
    loads: bool = False  # its tensors are read (set by ``_classify``)
    #: the measurement as a small block's row the fixed rules pass, no record made (``measure_many.judged``:
    #: the :data:`small_pairs.COLUMNS`, then the ``SmallBlock``); ``result`` stays None
    small: Optional[list] = None


@dataclass(slots=True)
class _Op:
    gop: "PlaceOp"
    top: "PlaceOp"
    match: str
    pairs: list[_Pair] = field(default_factory=list)  # emptied once the op's rows are made
    facts: Optional[org.OpFacts] = None
    n_rows: int = 0
    source: Optional[dict[str, Any]] = None  # the user's source line, for an op with a row that did not pass


def is_parameter(op: "PlaceOp") -> bool:
    """MindSpore ``Parameter.*`` dumps (``PlaceOp.kind``; older indexes: the type)."""
    return op.kind == "parameter" or op.type == "Parameter"


def is_aside(op: "PlaceOp") -> bool:
    """Parameters and constants live beside the ops: compared, never where an error is born."""
    return is_parameter(op) or op.kind == "constant"


def _strip_port(src: str) -> str:
    head, sep, tail = src.rpartition(":")
    return head if sep and tail.isdigit() else src


def produced(src: str) -> bool:
    """Whether a graph input names a producing op (not a Parameter, a Load of one, or a literal)."""
    if not src or src.startswith("param:") or _LITERAL.match(src):
        return False
    return not _strip_port(src).rsplit("/", 1)[-1].startswith("Load-op")


def _value(t: "TensorRow") -> Any:
    return (t.extra or {}).get("value")


def _stats_doc(t: "TensorRow") -> dict[str, Any]:
    doc = dict(t.stats or {})
    doc.setdefault("dtype", t.dtype)
    doc.setdefault("shape", list(t.shape))
    return doc


def _take(p: _Pair, got: Any, th: vd.Thresholds) -> None:
    """A pair's measurement with its fixed rules' verdict (``got``: what ``measure_many.judged`` made of it,
    None for a pair whose tensors were not read: its fixed rules run here, ``_judge_unloaded``).  The walk
    judges what the fixed rules left open."""
    if got is None:
        _judge_unloaded(p, th)
    elif type(got) is list:  # a small block's row the fixed rules pass: read as its columns
        p.small = got
    else:
        r, p.verdict, p.rule = got
        if isinstance(r, str):
            p.error = r
        else:
            p.result = r
            if _stored_floats(p.g.dtype, p.t.dtype):
                r.golden_dtype, r.target_dtype = p.g.dtype, p.t.dtype


@lru_cache(maxsize=256)
def _stored_floats(golden: Optional[str], target: Optional[str]) -> bool:
    """Whether both dtypes the dump records are floats: then the pair is judged at them (a bfloat16 ``.pt``
    decodes to float32: it is judged as bfloat16).  Asked once a pair of names, not once a pair of tensors."""
    return bool(golden and target and pr.unit_roundoff(golden) > 0 and pr.unit_roundoff(target) > 0)


def _side(t: "TensorRow", st: Optional[dict[str, Any]], value: Any) -> dict[str, Any]:
    """One side of a row; ``st``: that side's statistics from the measurement (None: not measured)."""
    if not st:
        st = {}
        if t.stats:
            from dumpscope.core.engines.compare.metrics import stat_value

            st = {k: stat_value(t.stats, k) for k in ("max", "min", "mean", "l2norm")}
    get = st.get
    return _side_of(t, get("max"), get("min"), get("mean"), get("l2norm"), value)


def _side_of(t: "TensorRow", hi: Any, lo: Any, mean: Any, norm: Any, value: Any,
             finite: Optional[bool] = None) -> dict[str, Any]:
    """One side of a row from its statistics (max, min, mean, L2 norm; non-finite ones become null).
    ``finite``: whether all four are finite, when the caller knows (``_all_finite`` otherwise)."""
    if not (_all_finite(hi, lo, mean, norm) if finite is None else finite):
        hi, lo, mean, norm = _num(hi), _num(lo), _num(mean), _num(norm)
    return {"dtype": t.dtype, "shape": list(t.shape), "max": hi, "min": lo, "mean": mean, "l2norm": norm,
            "file": t.path, "value": value}


def _all_finite(*values: Any) -> bool:
    """Whether ``_num`` leaves every value as it is: their exact sum (``math.fsum``: numpy scalars taken as
    Python floats, no numpy warning) is finite (a NaN or ±Inf term makes it NaN, infinite or an error; a
    sum too large for a float only sends the values through ``_num`` one by one; None: a TypeError)."""
    try:
        total = math.fsum(values)
    except (TypeError, ValueError, OverflowError):
        return False
    return total - total == 0.0


def _num(v: Any) -> Any:
    if type(v) is float:
        return v if v - v == 0.0 else None  # NaN/±Inf (v - v is NaN) become null
    return v if not isinstance(v, float) or math.isfinite(v) else None


def _user_frame(details: dict[str, Any], tensors: list["TensorRow"]) -> Optional[dict[str, Any]]:
    """The user's source line nearest the op: the graph's stack (MindSpore .ir, outermost first) or
    the API dump's stack (msprobe/Troubleshooter, innermost first)."""
    frames = [f for f in (details.get("source") or []) if isinstance(f, dict)]
    if not frames:
        stack = next(((t.extra or {}).get("stack") for t in tensors if (t.extra or {}).get("stack")), None)
        if stack:
            frames = source_from_stack(stack)
    return first_user_frame(frames)


def _position(op: "PlaceOp") -> int:
    """Execution index; parameters and constants (none: they did not run) come after every op."""
    return op.exec_index if op.exec_index is not None else 1 << 30


@gc_paused()  # the collector's walks over the growing rows cost as much as the rows (gc_pause)
def compare_dumps(golden: "DumpQuery", target: "DumpQuery", rank: Optional[int] = None,
                  step: Optional[int] = None, rtol: Optional[float] = None, atol: Optional[float] = None,
                  progress: Optional[Callable[[int, int], None]] = None, workers: Optional[int] = None,
                  thresholds: Optional[vd.Thresholds] = None, layer_mapping: Optional[str] = None,
                  api_mapping: Optional[str] = None, target_rank: Optional[int] = None,
                  target_step: Optional[int] = None, with_problems: bool = True,
                  spool_rows: bool = False,
                  row_printer: Optional[Callable[[list[dict[str, Any]]], str]] = None,
                  row_sink: Optional[Callable[[list[dict[str, Any]]], Any]] = None) -> dict[str, Any]:
    """CLI.md ``compare`` document for one rank/step of both dumps.

    MindSpore-vs-PyTorch API dumps (or any pair given ``layer_mapping``/``api_mapping`` files, msprobe's
    formats) are paired by ``api_mapping.match_across_frameworks`` instead of by name.
    ``target_rank``/``target_step``: the target's place when it differs from the golden's (several
    places: ``places.compare_places``).  ``with_problems=False``: ``problems`` left empty (they are the
    trees', not the place's: several places list them once).  ``spool_rows``: the rows are a
    ``row_spool.RowSpool`` (a temporary file, read back in order) instead of a list, so that memory does
    not grow with the pairs (the CLI's ``compare``); with ``row_printer`` too, a ``row_spool.PrintedRows``
    that keeps them as ``row_printer`` prints them (the CLI's ``--json``: copied, not printed again).
    ``row_sink`` (spooled rows): handed the rows as they are made, a block (a list) at a time, before they
    are stored (``--output``'s table, the terminal's cells: ``row_spool.RowSpool``'s ``sink``)."""
    g_rank, g_step = golden.default_place(rank, step)
    t_ranks, t_steps = target.ranks(), target.steps()
    t_rank = g_rank if g_rank in t_ranks or not t_ranks else t_ranks[0]
    t_step = g_step if g_step in t_steps or not t_steps else t_steps[0]
    t_rank = t_rank if target_rank is None else target_rank
    t_step = t_step if target_step is None else target_step
    th = thresholds or vd.Thresholds()
    if rtol is not None or atol is not None:
        th = vd.Thresholds(**{**{k: getattr(th, k) for k in th.__slots__}, "rtol": rtol, "atol": atol})
    if golden.count_ops(g_rank, g_step, kind="all") >= measure_many.POOL_MIN_OPS:
        # forked while this process is small (a shared pool only), the place's readers imported first
        measure_many.prestart(workers, golden.place_storages(g_rank, g_step))
    g_ops = golden.place_ops(g_rank, g_step)  # parameters are compared too (after the ops)
    t_ops = target.place_ops(t_rank, t_step)
    g_by_id = {o.id: o for o in g_ops}
    t_by_id = {o.id: o for o in t_ops}
    match = match_across_frameworks(golden, target, g_ops, t_ops, layer_mapping, api_mapping, _position) or \
        match_ops([OpRef(o.name, o.type, _position(o), o.id) for o in g_ops],
                  [OpRef(o.name, o.type, _position(o), o.id) for o in t_ops])
    g_names = {o.name for o in g_ops}
    g_params = {o.name for o in g_ops if is_parameter(o)}  # what ``_feeder`` may call a Parameter
    joined_to_name = {o.joined: o.name for o in g_ops if o.joined}
    g_graph = golden.graph_lookup()  # the golden's graph details, a chunk of ops at a time
    ops: list[_Op] = []
    unmatched_tensors: list[str] = []
    details: dict[int, dict[str, Any]] = {}
    g_tensors: dict[int, list["TensorRow"]] = {}
    matched = sorted(match.pairs, key=lambda p: p[0].exec_index)
    # ops are prepared a chunk at a time and handed to the measurer; while the pool measures the
    # next chunks, the finished ones are judged and their rows made (origins filled in at the end)
    measurer = Measurer(th, workers, pool=len(matched) >= measure_many.POOL_MIN_OPS)
    walk = org.Walk()
    # the forward calls a backward call's ``saved_from`` names (``_forward_of``: API dumps only)
    walk.forward_calls = {f for o in g_ops if o.producer in _API_PRODUCERS
                          for f in [_forward_of(o, g_names)] if f is not None}
    origins: list[org.Origin] = []
    dtypes: dict[str, dict[str, int]] = {"golden": {}, "target": {}}
    rows: Any = (PrintedRows(row_printer, row_sink) if row_printer is not None else RowSpool(row_sink)) \
        if spool_rows or row_sink is not None else []
    row_at: list[int] = []  # first row of each op
    erred: list[int] = []  # the ops with a row that did not pass (``first_divergence`` looks at no other)
    total_pairs = counted = 0
    # the coarsest precision either run stored a tensor in at this place: what a weight no dumped op
    # produced may differ by (``origin.Walk.u_run``)
    walk.u_run = max((pr.unit_roundoff(d) for d in golden.place_dtypes(g_rank, g_step)
                      | target.place_dtypes(t_rank, t_step)), default=0.0)
    small_output_seen = False

    def finish(wait: bool, keep: Optional[int] = None) -> None:
        nonlocal counted
        for a, b, outcomes in measurer.ready(wait, keep):
            for op, got in zip(ops[a:b], outcomes):
                det, tensors = details.pop(op.gop.id, _NO_GRAPH), g_tensors.pop(op.gop.id)
                op.facts = _facts(op, got, det, joined_to_name, g_names, th, g_graph, g_params)
                origin = walk.judge(op.facts)  # final: the walk never revisits an op it has judged
                origins.append(origin)
                # an origin needs a row in error, so only such ops can be shown with their source line
                if _apply(op, dtypes):
                    op.source = _user_frame(det, tensors)
                    erred.append(len(origins) - 1)
                row_at.append(counted)  # (the rows so far: ``len(rows)``)
                rows.extend(_op_rows(op, origin))
                op.n_rows = len(op.pairs)
                op.pairs = []  # the rows hold what is shown: a big place is not kept twice (tensors, results)
                counted += op.n_rows
            if progress is not None and counted:
                progress(counted, max(total_pairs, counted))

    try:
        for k in range(0, len(matched), _CHUNK_OPS):
            chunk = matched[k:k + _CHUNK_OPS]
            g_chunk = [g_by_id[gref.key] for gref, _, _ in chunk]
            t_chunk = [t_by_id[tref.key] for _, tref, _ in chunk]
            g_all = golden.tensors_of([o.id for o in g_chunk])
            t_all = target.tensors_of([o.id for o in t_chunk])
            # (an op joined to no graph node has none of its details: ``_NO_GRAPH``)
            details.update(g_graph.details_of([o for o in g_chunk if o.joined]))
            new_ops: list[_Op] = []
            for gop, top, (_, _, rule) in zip(g_chunk, t_chunk, chunk):
                gts_list, tts_list = g_all[gop.id], t_all[top.id]
                g_tensors[gop.id] = gts_list
                pairs = same_slots(gts_list, tts_list)
                if pairs is None:
                    keyed, missing = pair_slots({(x.io, x.slot): x for x in gts_list},
                                                {(x.io, x.slot): x for x in tts_list})
                    pairs = [(g, t) for _, g, t in keyed]
                    unmatched_tensors += [f"{gop.name} {io}.{slot}" for io, slot in missing]
                new_ops.append(_Op(gop, top, rule, [_Pair(gop, top, rule, g, t) for g, t in pairs]))
            small_output_seen, jobs = _classify(new_ops, details, small_output_seen)
            ops.extend(new_ops)
            total_pairs += sum(len(op.pairs) for op in new_ops)
            measurer.submit(jobs)
            finish(wait=False, keep=_AHEAD_OPS)  # waits for the oldest beyond that many ops
        finish(wait=True)
        if isinstance(rows, RowSpool):  # (the last block to the sink: it has seen every row on return)
            rows.finish_block()
    finally:
        measurer.close()
    fd = org.first_divergence([op.facts for op in ops], origins, erred)
    fd_row: Optional[dict[str, Any]] = None
    if fd is not None and fd.row < ops[fd.op].n_rows:
        fd_row = rows[row_at[fd.op] + fd.row]
    first = None
    if fd is not None and fd_row is not None:
        first = {k: fd_row[k] for k in ("name", "io", "slot", "step", "rank")}
        first.update(rule=fd.rule, cause=fd.cause, type=fd_row["type"], origin=fd_row["origin"])
        top = t_by_id.get(fd_row["target_op_id"])
        feeders = _target_only_feeders(match.unmatched_target, top, target)
        extra = _target_only_before(match.unmatched_target, top, fd.rule)
        if feeders:
            first["rule"] = f"{fd.rule}; " + ", ".join(f"input.{slot} comes from {name}, which only the target ran"
                                                      for slot, name in feeders)
            first["target_only_before"] = list(dict.fromkeys(name for _, name in feeders))
        elif extra:
            first["rule"] = f"{fd.rule}; {extra}"
            first["target_only_before"] = [r.name for r in match.unmatched_target
                                           if r.exec_index < _position(t_by_id[fd_row["target_op_id"]])][-3:]
    return {
        "rows": rows,
        "first_divergence": first,
        "unmatched_golden": [r.name for r in match.unmatched_golden],
        "unmatched_target": [r.name for r in match.unmatched_target],
        "unmatched_tensors": unmatched_tensors,
        "golden": {"path": golden.root, "rank": g_rank, "step": g_step},
        "target": {"path": target.root, "rank": t_rank, "step": t_step},
        "rules": "see `dumpscope compare --help` (core/engines/compare/verdict.py)",
        "precision": precision_summary(_float_counts(dtypes)),
        "evidence": evidence_of(walk, first),
        "compared": {"ops": len(ops), "tensors": len(rows), "golden_ops": len(g_ops), "target_ops": len(t_ops)},
        "problems": [dict(p, side="golden") for p in golden.problems()]
        + [dict(p, side="target") for p in target.problems()] if with_problems else [],
    }


def _target_only_feeders(unmatched: list[OpRef], top: Optional["PlaceOp"], target: "DumpQuery"
                         ) -> list[tuple[int, str]]:
    """The target-only ops whose outputs the first divergence reads, by the target's own graph: (input slot,
    op name).  A data edge says what made the difference where order can only suggest it (a custom bprop's
    ``Mul`` feeds the gradient that first differs, whatever the golden did instead, dumped or not); without
    a graph (API dumps) nothing is said here and ``_target_only_before`` lists what ran before."""
    if top is None or not unmatched:
        return []
    only = {r.name for r in unmatched}
    inputs_from = target.graph_details(top)["inputs_from"]
    return [(slot, _strip_port(src)) for slot, src in enumerate(inputs_from) if _strip_port(src) in only]


def _target_only_before(unmatched: list[OpRef], top: Optional["PlaceOp"], rule: str) -> str:
    """Where a divergence shows in an input that no dumped golden op explains: the ops the target ran just
    before it that the golden did not (a custom bprop, an extra op, a wrong kernel's helper) are named."""
    if top is None or "already differs" not in rule and "differs and no dumped op" not in rule:
        return ""
    here = _position(top)
    before = [r.name for r in unmatched if r.exec_index < here]
    if not before:
        return ""
    return f"the target ran ops the golden did not before it: {', '.join(before[-3:])}"


def _classify(ops: list[_Op], details: dict[int, dict[str, Any]], small_output_seen: bool
              ) -> tuple[bool, list[OpJob]]:
    """Row kinds: parameter (Parameter dumps), scalar (arguments; constants with no producer), tensor.
    ``small_output_seen``: whether an earlier op had a one-element output (returned updated, so the
    ops can be classified a chunk at a time).  In the same pass over the pairs, values and
    statistics-only pairs are measured here, and each op's job lists the pairs whose tensors are read."""
    jobs: list[OpJob] = []
    for op in ops:
        gop = op.gop
        inputs_from = details.get(gop.id, _NO_GRAPH)["inputs_from"]
        graph = bool(inputs_from)
        parameter, constant = is_parameter(gop), gop.kind == "constant"
        small_output = False
        job: OpJob = []
        for p in op.pairs:
            g, t = p.g, p.t
            value_arg = g.storage == STORAGE_VALUE or t.storage == STORAGE_VALUE
            kind = "tensor"
            if parameter:
                kind = "parameter"
            elif constant:
                if _size(g.shape) <= 1:
                    kind = "scalar"
            elif value_arg:
                kind = "scalar"
            elif g.io == INPUT and _size(g.shape) <= 1 and _size(t.shape) <= 1:
                if graph:
                    src = inputs_from[g.slot] if g.slot < len(inputs_from) else ""
                    if src and not produced(src) and not src.startswith("param:"):
                        kind = "scalar"
                elif not small_output_seen and gop.producer not in _API_PRODUCERS:
                    kind = "scalar"  # no graph: a 1-element input nothing before produced
            p.kind = kind
            if not small_output and g.io == OUTPUT and _size(g.shape) <= 1:
                small_output = True
            if kind == "scalar" and value_arg:
                p.value = (_value(g), _value(t))
            elif g.storage == "none" or t.storage == "none":
                p.result = measure_stats(_stats_doc(g), _stats_doc(t))
            else:
                p.loads = True  # not a value argument, not statistics only: its tensors are read
                job.append((g, t, g.io, kind))
        if small_output:
            small_output_seen = True
        jobs.append(job)
    return small_output_seen, jobs


def _size(shape: tuple[int, ...]) -> int:
    return math.prod(shape)  # (1 for a scalar's empty shape)


def _judge_unloaded(p: _Pair, th: vd.Thresholds) -> None:
    """The fixed rules of a row whose tensors were not read here (a value, a statistics-only pair), as
    ``measure_many.judged`` runs them on the others."""
    if p.error is not None:
        p.verdict, p.rule = vd.ERROR, p.error
    elif p.value is not None:
        p.verdict, p.rule = vd.judge_value(*p.value)
    elif p.result is not None:
        p.verdict, p.rule = vd.fixed_verdict(p.result, vd.Context(th, kind=p.kind)) or (vd.PASS, "")
        p.result.verdict, p.result.rule = p.verdict, p.rule


def _facts(op: _Op, judged: Judged, det: dict[str, Any], joined_to_name: dict[str, str], g_names: set[str],
           th: vd.Thresholds, golden: "GraphLookup", g_params: set[str]) -> org.OpFacts:
    """What the walk judges of an op, its pairs' measurements taken first (``judged``: those of its pairs
    whose tensors were read, in the order ``_classify`` listed them; ``_take``)."""
    inputs_from = det["inputs_from"]
    rows, input_producers = [], {}
    it = iter(judged)
    for p in op.pairs:
        got = next(it) if p.loads else None
        if type(got) is list and not inputs_from:  # (most pairs: a small block's row, no graph to ask: ``_take``
            p.small = got  # and ``_row_facts`` said at once)
            rows.append(_small_row_facts(p, got, True, ""))
            continue
        _take(p, got, th)
        is_produced, source = True, ""
        if inputs_from and p.g.io == INPUT:
            src = inputs_from[p.g.slot] if p.g.slot < len(inputs_from) else ""
            is_produced = produced(src)
            name = joined_to_name.get(_strip_port(src))
            if is_produced and name is not None and name != op.gop.name:
                input_producers[p.g.slot] = name
            if src and not is_produced:  # (``_feeder`` names only such inputs)
                what, fed_by = _feeder(src, is_produced, op.gop, golden, g_params)
                source = f"{what} {fed_by}" if fed_by else ""
        rows.append(_row_facts(p, is_produced, th, source))
    producers = []
    for src in inputs_from:
        name = joined_to_name.get(_strip_port(src), _strip_port(src))
        if name in g_names:
            producers.append(name)
    # inputs the graph gives but the dump does not hold (MindSpore dumps no input of a loop's TensorMove
    # copy of a weight): named where a Parameter or graph input feeds them, for the cause to say
    undumped: dict[int, tuple[str, str]] = {}
    if inputs_from:
        dumped = {p.g.slot for p in op.pairs if p.g.io == INPUT}
        undumped = {slot: feeder for slot, src in enumerate(inputs_from) if slot not in dumped and src
                    for feeder in [_feeder(src, produced(src), op.gop, golden, g_params)] if feeder[1]}
    # (positional: OpFacts' fields in order, name .. undumped)
    return org.OpFacts(op.gop.name, rows, is_aside(op.gop), producers, input_producers,
                       _forward_of(op.gop, g_names), op.gop.type or "", undumped)


def _feeder(src: str, is_produced: bool, gop: "PlaceOp", golden: "GraphLookup", params: set[str]) -> tuple[str, str]:
    """What feeds an input that is no op's output (``Parameter conv2.weight``), when the dump can say.

    A weight reaches its kernel through a ``Load`` of the Parameter (``query.loaded_parameter``).  Only a
    graph parameter the dump holds as a Parameter (``params``: MindSpore writes every network Parameter,
    and the network's inputs, as ``Parameter.{name}``) is named: a kernel graph's other parameters are
    values handed over from another graph or carried by a loop (``Parameter_218``, ``_15370``, ``фx``),
    no Parameter of the network.  MindSpore names the network's own inputs (the data) inputs0, inputs1, …
    Returns (what, name): ("Parameter", "conv2.weight"), ("graph input", "inputs0"), or ("", "")."""
    if not src or is_produced:
        return "", ""
    if "Load-op" in src:
        param = golden.loaded_parameter(gop, _strip_port(src))
        src = f"param:{param}" if param else src
    name = src[len("param:"):] if src.startswith("param:") else ""
    if name not in params:
        return "", ""
    return ("graph input" if re.fullmatch(r"inputs\d+", name) else "Parameter"), name


def _row_facts(p: _Pair, is_produced: bool, th: vd.Thresholds, source: str = "") -> org.RowFacts:
    """What the walk judges of one pair: its error at the stored precision, unless a fixed rule (dtype
    kind, shape, NaN/Inf, argument, ``--rtol/--atol``) or an unreadable tensor already decided it.
    ``source``: what feeds the input when it is no op's output (``_feeder``)."""
    if p.small is not None:
        return _small_row_facts(p, p.small, is_produced, source)
    r = p.result
    if p.error is not None or p.value is not None or r is None:
        return org.RowFacts(p.g.io, p.g.slot, p.verdict, p.kind, is_produced, p.rule, source=source, fixed=True)
    # positional below (RowFacts' fields in order, io .. sig): a keyword call costs twice as much a row
    dt, u = _judged_at(r.golden_dtype, r.target_dtype)
    # (``measure_many.judged`` / ``_judge_unloaded``; a float dtype replaced by the stored one is still
    # a float, which rule 1 lets through)
    verdict, rule = p.verdict, p.rule
    if rule:  # the fixed rules ran where the pair was measured
        if verdict == vd.WARNING and rule.startswith("shape"):
            p.shape_note = rule.split(":")[0]  # the same count in another shape: the values still judged
        else:
            return org.RowFacts(p.g.io, p.g.slot, verdict, p.kind, is_produced, rule, False, None, u, dt, True,
                                source=source)
    err = pr.error_of(r)
    if err is None:
        return org.RowFacts(p.g.io, p.g.slot, verdict, p.kind, is_produced, rule, False, None, u, dt, True,
                            source=source)
    g, t = r.golden_stats or {}, r.target_stats or {}
    return org.RowFacts(p.g.io, p.g.slot, verdict, p.kind, is_produced, rule, False, err, u, dt, False,
                        _identity(r, g, t), (g.get("mean"), g.get("l2norm"), t.get("mean"), t.get("l2norm")),
                        source=source)


def _small_row_facts(p: _Pair, s: list, is_produced: bool, source: str) -> org.RowFacts:
    """``_row_facts`` of a pair measured as a small block's row the fixed rules pass (``_Pair.small``), read
    from the row's columns as from the record ``SmallBlock.results`` would make (its count and size are
    the block's ``n``; its golden max, min, mean and L2 norm columns 6-9, the target's 10-13)."""
    block = s[16]
    g = p.g
    dt, u = _small_judged_at(g.dtype, p.t.dtype, block.golden_dtype, block.target_dtype)
    n = block.n
    err = pr.tensor_error(s[9], s[1], n, s[2], s[14], s[15], s[6], s[7])
    if err is None:
        return org.RowFacts(g.io, g.slot, p.verdict, p.kind, is_produced, p.rule, False, None, u, dt, True,
                            source=source)
    # (``_identity`` and the signature; RowFacts' fields in order, io .. source)
    return org.RowFacts(g.io, g.slot, p.verdict, p.kind, is_produced, p.rule, False, err, u, dt, False,
                        (n, s[6], s[7], s[10], s[11]), (s[8], s[9], s[12], s[13]), None, None, None, False, source)


@lru_cache(maxsize=256)
def _small_judged_at(golden: str, target: str, golden_values: str, target_values: str) -> tuple[str, float]:
    """``_judged_at`` of a small block's row: its stored dtypes where both are floats (``_take``), else its
    values' dtypes (the block's).  One lookup a row."""
    return _judged_at(golden, target) if _stored_floats(golden, target) else _judged_at(golden_values, target_values)


@lru_cache(maxsize=256)
def _judged_at(golden: str, target: str) -> tuple[str, float]:
    """The dtype a pair is judged at and its unit roundoff (``precision.judged_dtype``)."""
    dt = pr.judged_dtype(golden, target)
    return dt, pr.unit_roundoff(dt)


def _identity(r: CompareResult, g: Optional[dict[str, Any]] = None, t: Optional[dict[str, Any]] = None
              ) -> Optional[tuple]:
    """The same tensor seen twice (a producer's output read as its consumer's input, perhaps through a
    view or a cast): the same element count and the same max and min on both sides.  Only max and min:
    they are exact in any dtype and any element order, where a mean or norm is not (msprobe computes a
    bfloat16 tensor's mean in bfloat16; a permuted view sums in another order).  ``g``, ``t``: the
    sides' statistics when the caller has them."""
    if g is None:
        g, t = r.golden_stats or {}, r.target_stats or {}
    assert t is not None
    key = (r.count if r.stat_diffs is None else r.size, g.get("max"), g.get("min"), t.get("max"), t.get("min"))
    return None if key[1] is None and key[2] is None and key[3] is None and key[4] is None else key


def _apply(op: _Op, dtypes: dict[str, dict[str, int]]) -> bool:
    """The walk's verdicts onto the pairs (their rows are made next); the stored dtypes counted by the
    names the index gives (``_float_counts`` keeps the float ones, by canonical name).  Returns whether
    a row did not pass."""
    assert op.facts is not None
    golden, target = dtypes["golden"], dtypes["target"]
    off = False
    for p, f in zip(op.pairs, op.facts.rows):
        p.verdict, p.rule = f.verdict, f.rule
        if p.shape_note:
            if p.verdict == vd.PASS:
                p.verdict, p.rule = vd.WARNING, f"{p.shape_note}: the same values in another shape"
            else:
                p.rule = f"{p.shape_note}; {p.rule}"
        p.facts = f
        if p.verdict != vd.PASS:
            off = True
        if p.kind != "scalar":
            gd, td = p.g.dtype, p.t.dtype
            golden[gd] = golden.get(gd, 0) + 1
            target[td] = target.get(td, 0) + 1
    return off


def _float_counts(raw: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """``_apply``'s counts of the float dtypes only, by canonical name, in the order each name was first
    counted (a raw name's first count comes first in ``raw``, and so does its canonical name's)."""
    out: dict[str, dict[str, int]] = {}
    for side, counts in raw.items():
        side_out = out[side] = {}
        for name, n in counts.items():
            if name and pr.unit_roundoff(name) > 0:
                c = pr.canonical(name)
                side_out[c] = side_out.get(c, 0) + n
    return out


def precision_summary(dtypes: dict[str, dict[str, int]]) -> dict[str, Any]:
    """What each side's float tensors were stored in, said once ("112 of 181 tensors bfloat16")."""
    out: dict[str, Any] = {}
    for side in ("golden", "target"):
        counts = dtypes[side]
        total = sum(counts.values())
        out[side] = dict(sorted(counts.items(), key=lambda kv: -kv[1]))
        coarse = sorted((k for k in counts if pr.unit_roundoff(k) > pr.unit_roundoff("float32")),
                        key=lambda k: -counts[k])
        if total and coarse:
            out[f"{side}_text"] = ", ".join(f"{counts[k]} of {total} tensors {k}" for k in coarse)
        elif total:
            out[f"{side}_text"] = f"{total} tensors " + "/".join(counts)
    return out


def evidence_of(walk: org.Walk, first: Optional[dict[str, Any]]) -> dict[str, Any]:
    """Why the answer is what it is: the largest relative error seen, the precision that explains it and
    the rows nearest the line (each error as a share of what it was allowed; 1.0 is the line)."""
    def near(n: org.Near) -> dict[str, Any]:
        return {"name": n.op, "tensor": n.label, "rel_err": _num(n.rel_err), "allowed": _num(n.allowed),
                "share_of_allowed": _num(round(n.ratio, 4)), "precision": n.dtype, "judgement": n.judgement}
    nearest = sorted(walk.nearest, reverse=True)
    doc: dict[str, Any] = {"nearest": [near(n) for n in nearest],
                           "largest": near(walk.largest) if walk.largest is not None else None,
                           "bit_identical": walk.exact_so_far}
    if first is None:
        if walk.exact_so_far:
            doc["text"] = "no divergence: every compared tensor is bit-identical"
        elif nearest:
            top = nearest[0]
            doc["text"] = (f"no divergence: the nearest to the line is {top.op} {top.label} at "
                           f"{top.ratio:.2g} of what its inputs and {top.dtype or 'its'} rounding allow")
        else:
            doc["text"] = "no divergence: nothing numeric was compared"
    return doc


_API_PRODUCERS = ("msprobe", "troubleshooter")


def _forward_of(op: "PlaceOp", names: set[str]) -> Optional[str]:
    """API dumps: the forward call of a backward call (msprobe ``X.N.backward`` ↔ ``X.N.forward``,
    modules ``M.backward.N`` ↔ ``M.forward.N``, Troubleshooter ``X_N_backward`` ↔ ``X_N_forward``),
    when it was dumped."""
    if op.producer not in _API_PRODUCERS:
        return None
    for back, fwd in ((".backward", ".forward"), ("_backward", "_forward")):
        head, sep, tail = op.name.rpartition(back)  # API X.N.backward, module M.backward.N
        if sep and (not tail or tail.startswith((".", "_"))):
            cand = head + fwd + tail
            return cand if cand in names else None
    return None


def _op_rows(op: _Op, origin: org.Origin) -> list[dict[str, Any]]:
    """The rows of an op the walk has judged (``_row``), what they share taken once."""
    gop, top = op.gop, op.top
    head = (gop.name, shown_step(gop.step), gop.rank, top.name, gop.id, top.id, gop.exec_index, gop.type,
            origin.kind, origin.via)
    source = plain(op.source) if op.source is not None else None
    return [_row(p, head, source) for p in op.pairs]


def _row(p: _Pair, head: tuple, source: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The row of a judged pair of an op the walk has judged (``head``: what its rows share, as
    ``_op_rows`` lists it, with the op's origin; ``source``: the op's user source line, made plain),
    complete as it is made: rows go to the spool, or the output, one op at a time.  Key order as CLI.md
    lists them (``metrics.to_row``'s keys, ``mode`` after the verdict when measured, before it when not).
    The values a dump gives (argument values, source frames, statistics) are made plain, as JSON gives
    them back (``row_spool.plain``): the same row whether it is spooled or listed.  A small block's row
    (``_Pair.small``) is made as from the record ``SmallBlock.results`` would make."""
    name, step, rank, target_name, g_id, t_id, exec_index, op_type, origin_kind, origin_via = head
    s, f = p.small, p.facts
    if s is not None:
        g, t = p.g, p.t
        cos, euc, mab, mrel, r1, r5, gmax, gmin, gmean, gl2, tmax, tmin, tmean, tl2, _msc, _q90, block = s
        # every column is a Python float: their plain sum is finite only when each one is (``_all_finite``;
        # one too large for the sum only sends them through ``_num``, which keeps finite values); a NaN
        # cosine becomes null as ``SmallBlock.results``' None would
        total = cos + euc + mab + mrel + r1 + r5
        if not total - total == 0.0:
            cos, euc, mab, mrel, r1, r5 = _num(cos), _num(euc), _num(mab), _num(mrel), _num(r1), _num(r5)
        one = block.n <= 1  # a one-element tensor's value: its max
        g_total, t_total = gmax + gmin + gmean + gl2, tmax + tmin + tmean + tl2  # (finite as above)
        g_side = _side_of(g, gmax, gmin, gmean, gl2, gmax if one else None, g_total - g_total == 0.0)
        t_side = _side_of(t, tmax, tmin, tmean, tl2, tmax if one else None, t_total - t_total == 0.0)
        assert f is not None  # (``_apply``)
        share = f.share
        return {"name": name, "io": g.io, "slot": g.slot, "step": step, "rank": rank,
                "cosine": cos, "euc_dist": euc, "max_abs_err": mab, "max_rel_err": mrel,
                "one_thousandth_ratio": r1, "five_thousandth_ratio": r5, "verdict": p.verdict, "rule": p.rule,
                "mode": "tensor", "match": p.match, "target_name": target_name, "golden_op_id": g_id,
                "target_op_id": t_id, "exec_index": exec_index, "type": op_type, "kind": p.kind,
                "origin": origin_kind, "origin_via": origin_via, "judgement": f.judgement,
                "rel_err": _num(f.rel_err), "allowed": _num(f.allowed),
                "share_of_allowed": _num(share) if share is not None else None, "precision": f.dtype or None,
                "golden": g_side, "target": t_side, "source": source}
    g, t, r, value = p.g, p.t, p.result, p.value
    row: dict[str, Any]
    if r is not None:
        m = (r.cosine, r.euc_dist, r.max_abs_err, r.max_rel_err, r.one_thousandth_ratio, r.five_thousandth_ratio)
        if not _all_finite(*m):
            m = tuple(map(_num, m))
        g_st, t_st = r.golden_stats, r.target_stats
        if value is not None:
            gval, tval = plain(value[0]), plain(value[1])
        elif r.size <= 1:  # a one-element tensor's value: its max
            gval, tval = plain((g_st or {}).get("max")), plain((t_st or {}).get("max"))
        else:
            gval = tval = None
        row = {"name": name, "io": g.io, "slot": g.slot, "step": step, "rank": rank,
               "cosine": m[0], "euc_dist": m[1], "max_abs_err": m[2], "max_rel_err": m[3],
               "one_thousandth_ratio": m[4], "five_thousandth_ratio": m[5], "verdict": p.verdict, "rule": p.rule,
               "mode": "stats" if r.stat_diffs is not None else "tensor"}
    else:
        g_st = t_st = None
        gval, tval = (plain(value[0]), plain(value[1])) if value is not None else (None, None)
        row = {"name": name, "io": g.io, "slot": g.slot, "step": step, "rank": rank,
               "cosine": None, "euc_dist": None, "max_abs_err": None, "max_rel_err": None,
               "one_thousandth_ratio": None, "five_thousandth_ratio": None,
               "mode": "value" if value is not None else "tensor", "verdict": p.verdict, "rule": p.rule}
    row["match"] = p.match
    row["target_name"] = target_name
    row["golden_op_id"] = g_id
    row["target_op_id"] = t_id
    row["exec_index"] = exec_index
    row["type"] = op_type
    row["kind"] = p.kind
    row["origin"] = origin_kind
    row["origin_via"] = origin_via
    if f is not None:
        share = f.share
        row["judgement"] = f.judgement
        row["rel_err"] = _num(f.rel_err)
        row["allowed"] = _num(f.allowed)
        row["share_of_allowed"] = _num(share) if share is not None else None
        row["precision"] = f.dtype or None
    else:
        row["judgement"] = row["rel_err"] = row["allowed"] = row["share_of_allowed"] = row["precision"] = None
    row["golden"] = _side(g, g_st, gval)
    row["target"] = _side(t, t_st, tval)
    row["source"] = source
    if r is not None and r.stat_diffs is not None:
        row["stat_diffs"] = plain(r.stat_diffs)
        row["stat_rel_errs"] = plain(r.stat_rel_errs)
    return row
