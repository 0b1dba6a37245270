"""Units: the form in which the index stores tensor records.

A unit is one op run's tensors from one place on disk: every tensor of a CANN dump file
(one file is always one run of one op), or a single tensor for the other layouts (an npy
file, a stats-CSV row, a dump.json entry).  Storing one row per unit, with the tensors packed
as JSON text, instead of one row per tensor halves the rows of a CANN index and keeps the
per-value cost of SQLite off the indexing hot path; ``finalize`` groups units into ops and
``unpack`` gives the tensors back when a view asks for one op.
"""

from __future__ import annotations

import json
import math
import operator
from typing import Any, NamedTuple, Optional

from dumpscope.core.model import TensorRecord

#: unit columns in table order, after ``id, op_id, dir_id`` (the index adds those)
UNIT_COLUMNS = ("producer", "path", "op_type", "op_name", "file_name", "rank", "step", "graph", "task", "stream",
                "ts", "storage", "order_hint", "ntensors", "tensors", "slots", "scope", "nan", "posinf", "neginf")


class UnitRecord(NamedTuple):
    """One unit, ready to store (fields in ``UNIT_COLUMNS`` order).

    ``tensors`` is JSON text: a list of ``[io, slot, dtype, shape, format, device_shape,
    stored_dtype, offset, nbytes, sub_format, stats, extra]``; ``slots`` names them (``i0 i1 o0``)
    so that finalize can tell repeated runs apart without decoding JSON; ``nan``/``posinf``/``neginf``
    sum the known statistics of the outputs (``None`` when no output has statistics).
    """

    producer: str
    path: str
    op_type: str
    op_name: str
    file_name: str
    rank: int
    step: int
    graph: str
    task: Optional[int]
    stream: Optional[int]
    ts: Optional[int]
    storage: str
    order_hint: float
    ntensors: int
    tensors: str
    slots: str
    scope: Optional[str]
    nan: Optional[int]
    posinf: Optional[int]
    neginf: Optional[int]


def execution_key(unit: tuple) -> tuple:
    """How units sort in execution order when nothing better is known (timestamps, then hints and
    names): the order ``finalize`` gives ops of one rank/step.  The index stores each folder's units
    in this order, so a folder's ops are numbered by their ids alone (``plain_places.plain_place``)."""
    ts, hint = unit[10], unit[12]
    return (unit[5], unit[6], unit[7], ts is None, ts or 0, hint is None, hint or 0.0, unit[3])


_PLAIN_KEY = operator.itemgetter(5, 6, 7, 10, 12, 3)
_TS = operator.itemgetter(10)
_PLACE = operator.itemgetter(5, 6, 7)


def in_execution_order(units: list[tuple]) -> list[tuple]:
    """``units`` sorted by ``execution_key`` (stable).  A folder's units nearly always share one rank, step
    and graph and have distinct integer timestamps (a CANN file's): the timestamp alone then decides (no tie
    reaches the hint or the name), and a sort on an int costs a third of one on the six-field key.  Else
    most folders have every timestamp and hint, so a C-level key is tried first; a missing one makes it
    raise and the full key decides."""
    if len(units) > 1:
        ts = list(map(_TS, units))
        if len(set(ts)) == len(ts) and set(map(type, ts)) == {int} and len(set(map(_PLACE, units))) == 1:
            return sorted(units, key=_TS)
    try:
        return sorted(units, key=_PLAIN_KEY)
    except TypeError:  # None against a number: some unit has no timestamp or hint
        return sorted(units, key=execution_key)


def tensor_entry(rec: TensorRecord) -> list:
    """The packed form of one tensor (see ``UnitRecord.tensors``)."""
    return [rec.io, rec.slot, rec.dtype, list(rec.shape), rec.format, list(rec.device_shape),
            rec.stored_dtype or rec.dtype, rec.offset, rec.nbytes, rec.sub_format, rec.stats, rec.extra or None]


def slot_label(io: str, slot: int) -> str:
    return f"{io[:1]}{slot}" if io in ("input", "output") else f"{io}{slot}"


def nonfinite_sums(entries: list[list]) -> tuple[Optional[int], Optional[int], Optional[int]]:
    """Known NaN/+Inf/-Inf counts of the outputs (an op is bad when it *produces* bad values).

    Statistics without counts (msprobe's Max/Min/Mean/Norm) still say *whether* there is one:
    a NaN max or min, a +inf max, a -inf min count as one element each (a lower bound)."""
    known = False
    nan = pos = neg = 0
    for e in entries:
        st = e[10]
        if st and e[0] == "output":
            known = True
            if "nan" in st or "posinf" in st or "neginf" in st:
                nan += int(st.get("nan") or 0)
                pos += int(st.get("posinf") or 0)
                neg += int(st.get("neginf") or 0)
                continue
            hi, lo = st.get("max"), st.get("min")
            if (isinstance(hi, float) and math.isnan(hi)) or (isinstance(lo, float) and math.isnan(lo)):
                nan += 1
            if hi == math.inf:
                pos += 1
            if lo == -math.inf:
                neg += 1
    return (nan, pos, neg) if known else (None, None, None)


#: one encoder for every unit (``json.dumps`` with options builds a new one per call)
_ENCODE = json.JSONEncoder(separators=(",", ":"), default=str).encode


def dumps_entries(entries: list[list]) -> str:
    return _ENCODE(entries)


#: packed tails of single plain tensors (no stats, no extra), by tensor description
_SINGLE: dict[tuple, tuple] = {}
_SINGLE_MAX = 8192


def pack(records: list[TensorRecord]) -> UnitRecord:
    """One unit of ``records`` (all of one op run, from one file); per-file fields come from the first.

    A lone tensor without statistics or extras (an npy file) packs the same way as every other
    tensor of its description, so its JSON is made once per description."""
    first = records[0]
    if len(records) == 1 and first.stats is None and not first.extra:
        r = first
        key = (r.io, r.slot, r.dtype, r.shape, r.format, r.device_shape, r.stored_dtype, r.offset, r.nbytes,
               r.sub_format)
        try:
            tail = _SINGLE.get(key)
        except TypeError:  # a layout gave a list for a shape: unhashable, pack it below
            key, tail = None, None
        if tail is None:
            entries = [tensor_entry(r)]
            tail = (1, dumps_entries(entries), slot_label(r.io, r.slot), None, None, None, None)
            if key is not None:
                if len(_SINGLE) >= _SINGLE_MAX:
                    _SINGLE.clear()
                _SINGLE[key] = tail
        return UnitRecord(r.producer, r.path, r.op_type, r.op_name, r.file_name, r.rank, r.step, r.graph, r.task,
                          r.stream, r.timestamp, r.storage, r.order_hint, *tail)
    entries = [tensor_entry(r) for r in records]
    scope = None
    for r in records:
        s = r.extra.get("scope") if r.extra else None
        if s:
            scope = "/".join(str(x) for x in s) if isinstance(s, (list, tuple)) else str(s)
            break
    nan, pos, neg = nonfinite_sums(entries)
    return UnitRecord(first.producer, first.path, first.op_type, first.op_name, first.file_name, first.rank,
                      first.step, first.graph, first.task, first.stream, first.timestamp, first.storage,
                      min(r.order_hint for r in records), len(entries), dumps_entries(entries),
                      " ".join(slot_label(r.io, r.slot) for r in records), scope, nan, pos, neg)


def unpack(tensors: str) -> list[dict[str, Any]]:
    """The tensors of a stored unit as dicts (``index`` is the position inside the unit)."""
    out = []
    for k, (io, slot, dtype, shape, fmt, dshape, sdt, off, nb, subf, stats, extra) in enumerate(json.loads(tensors)):
        out.append({"index": k, "io": io, "slot": slot, "dtype": dtype, "shape": tuple(shape), "format": fmt,
                    "device_shape": tuple(dshape), "stored_dtype": sdt, "offset": off, "nbytes": nb,
                    "sub_format": subf, "stats": stats, "extra": extra or {}})
    return out
