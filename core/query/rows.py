"""The index's op and tensor rows as records: their column lists, and the decoding every query shares.

Here, apart from the questions (``dump_query``, ``overflow``), because each question module builds on them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional

from dumpscope.core.layouts.paths import CONSTANTS_STEP
from dumpscope.core.names import sanitize_name

if TYPE_CHECKING:  # numpy is only imported when tensor data is actually read
    from dumpscope.core.tensors.load import TensorRef

OP_COLS = ("id, rank, step, graph, name, file_name, type, scope, exec_index, producer, joined, join_rule, "
           "graph_only, nan, posinf, neginf, status, evidence, folder, task, stream, first_ts, watch_of, watch_after, kind, "
           "join_note")
#: ``--kind`` choices: an op-table row is an executed op, a parameter or a constant (``op_groups.op_kind``)
KINDS = ("op", "parameter", "constant", "all")
#: one rank/step, constants included (they belong to no step)
AT_STEP = "(step=? OR (step=-1 AND kind='constant'))"
U_COLS = "id, op_id, path, storage, producer, ts, tensors"


@dataclass(slots=True)
class OpRow:
    id: int
    rank: int
    step: int
    graph: str
    name: str
    file_name: str
    type: str
    scope: str
    exec_index: Optional[int]
    producer: str
    joined: Optional[str]
    join_rule: Optional[str]
    graph_only: int
    nan: Optional[int]
    posinf: Optional[int]
    neginf: Optional[int]
    status: Optional[int]
    evidence: Optional[str]
    folder: str
    task: Optional[int]
    stream: Optional[int]
    first_ts: Optional[int]
    watch_of: Optional[str] = None
    watch_after: Optional[str] = None
    kind: str = "op"  # "op" | "parameter" | "constant"
    join_note: Optional[str] = None  # why the op kept its file-side name (shown with a "?")

    @property
    def short(self) -> str:
        """The last name segment; for a file-side name placed under its scope, what follows the scope."""
        if "/" not in self.name and self.scope:
            prefix = sanitize_name(self.scope) + "_"
            if self.name.startswith(prefix) and len(self.name) > len(prefix):
                return self.name[len(prefix):]
        return self.name.rsplit("/", 1)[-1]

    @property
    def bad(self) -> bool:
        """Non-finite values or an overflow status are known for this op."""
        return bool(self.status) or bool(self.nan) or bool(self.posinf) or bool(self.neginf)


#: the ``ops`` columns of ``PlaceOp``, in its fields' order
PLACE_OP_COLS = "id, rank, step, graph, name, type, exec_index, producer, joined, join_rule, kind"


@dataclass(slots=True)
class PlaceOp:
    """An op as ``compare`` reads a whole place of them (``DumpQuery.place_ops``): the fields it and what it
    calls read (matching: name, type, exec_index, producer; the graph lookups: rank, graph, joined,
    join_rule; the rows: id, step; kind).  ``OpRow``'s other fifteen columns (paths, scope, counts,
    timestamps) are not read: half the SQLite column reads of a place's ops (~30 of ~60 ms at 20k ops).
    Any other field is an AttributeError, never a wrong value."""

    id: int
    rank: int
    step: int
    graph: str
    name: str
    type: str
    exec_index: Optional[int]
    producer: str
    joined: Optional[str]
    join_rule: Optional[str]
    kind: str


@dataclass(slots=True)
class TensorRow:
    id: int
    op_id: int
    io: str
    slot: int
    dtype: str
    shape: tuple[int, ...]
    format: str
    device_shape: tuple[int, ...]
    path: str
    storage: str
    stored_dtype: str
    offset: int
    nbytes: int
    sub_format: int
    producer: str
    stats: Optional[dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)
    ts: Optional[int] = None

    def ref(self) -> "TensorRef":
        from dumpscope.core.tensors.load import TensorRef

        # (positional, TensorRef's fields in order: compare makes one a tensor it measures)
        return TensorRef(self.path, self.storage, self.io, self.slot, self.dtype, self.stored_dtype, self.shape,
                         self.format, self.device_shape, self.offset, self.nbytes, self.sub_format, self.extra)

    @property
    def label(self) -> str:
        return f"{self.io}.{self.slot}"


def op_row(row: tuple) -> OpRow:
    return OpRow(*row)


#: ``OP_COLS`` holding few distinct strings in a place: graph, type, producer, join_rule, evidence, folder, kind
FEW_VALUED = (3, 6, 9, 11, 17, 18, 24)


def op_rows(rows: Iterable[tuple]) -> list[OpRow]:
    """OpRows of many rows, each few-valued string one shared object (SQLite returns a new one per row):
    ~400 bytes less an op, which ``compare`` holding both sides of a 100k-op place (~200 MB) notices.
    The row is taken apart in the comprehension (no list copy and loop a row: 12 against 7 ms at 20k ops)."""
    seen: dict[Any, Any] = {}
    s = seen.setdefault  # (None, the usual value of join_rule and evidence, is its own key)
    return [OpRow(i, rank, step, s(graph, graph), name, file_name, s(typ, typ), scope, exec_index, s(prod, prod),
                  joined, s(rule, rule), graph_only, nan, posinf, neginf, status, s(evidence, evidence),
                  s(folder, folder), task, stream, first_ts, watch_of, watch_after, s(kind, kind), note)
            for (i, rank, step, graph, name, file_name, typ, scope, exec_index, prod, joined, rule, graph_only, nan,
                 posinf, neginf, status, evidence, folder, task, stream, first_ts, watch_of, watch_after, kind,
                 note) in rows]


def place_op_rows(rows: Iterable[tuple]) -> list[PlaceOp]:
    """PlaceOps of many ``PLACE_OP_COLS`` rows, each few-valued string one shared object (``op_rows``)."""
    seen: dict[Any, Any] = {}
    s = seen.setdefault
    return [PlaceOp(i, rank, step, s(graph, graph), name, s(typ, typ), exec_index, s(prod, prod), joined,
                    s(rule, rule), s(kind, kind))
            for (i, rank, step, graph, name, typ, exec_index, prod, joined, rule, kind) in rows]


def tensors_of_unit(row: tuple) -> list[TensorRow]:
    """The tensors packed in one stored unit; a tensor's id is ``unit id << 16 | position``."""
    return unit_tensors(row, json.loads(row[6]))


#: one object for each equal string and shape of the tensors read (dtype, format, io, storage, a shape …):
#: JSON and SQLite make a new one per tensor.  Shared, they take less memory, each hash is computed once
#: (an interned dtype keys many dicts and caches downstream), and ``compare`` pickles its jobs to the pool
#: in 28 against 69 ms (pickle writes a repeated object as a reference to the first: 9.9 against 14.3 MB
#: for the 20k-op pair; the workers unpickle in half the time).  Compare of that pair, warm: ~0.15 s less
#: CPU in the main process with the sharing than without.  Cleared when full: values are immutable.
_SHARED: dict[Any, Any] = {}
_SHARED_MAX = 1 << 14  # a model has a few hundred distinct shapes; at most a few MB held


#: a unit's packed text -> its entries as ``add_unit_tensors`` takes them, for texts whose every tensor has
#: no statistics and no extras (nothing mutable: a CANN file, a plain npy file).  Such units repeat their text
#: (the CANN indexer gives every file of one tensor layout the same one: 44 texts in the 20k-file bench tree;
#: MindSpore's npy units 9-37 % distinct in tests/data's real dumps), so ``tensors_of`` decodes each once;
#: statistics (msprobe, most units distinct) are decoded per unit as before.  Cleared when full.
_PLAIN_TEXTS: dict[str, list[tuple]] = {}
_PLAIN_TEXTS_MAX = 4096
#: the longest text kept (a unit of a few tens of tensors; a CANN file of two is ~250): with the count, what is
#: kept stays a few tens of MB whatever a unit holds
_PLAIN_TEXT_CHARS = 4096


def entry_forms(entries: list[list]) -> list[tuple]:
    """A unit's decoded entries as ``add_unit_tensors`` takes them: shapes as tuples, equal strings and shapes
    one object (``_SHARED``)."""
    if len(_SHARED) > _SHARED_MAX:
        _SHARED.clear()
    s = _SHARED.setdefault
    out = []
    for io, slot, dtype, shape, fmt, dshape, sdt, off, nb, subf, stats, extra in entries:
        shape = tuple(shape)
        dshape = tuple(dshape)
        out.append((s(io, io), slot, s(dtype, dtype), s(shape, shape), s(fmt, fmt), s(dshape, dshape), s(sdt, sdt),
                    off, nb, subf, stats, extra))
    return out


def unit_tensors(row: tuple, entries: list) -> list[TensorRow]:
    """``tensors_of_unit`` of a unit whose packed tensors are already decoded (``units.UnitRecord.tensors``'
    lists)."""
    out: dict[int, list[TensorRow]] = {row[1]: []}
    add_unit_tensors(out, [row], [entry_forms(entries)])
    return out[row[1]]


def add_units_of_texts(out: dict[int, list[TensorRow]], rows: list[tuple]) -> None:
    """``add_unit_tensors`` of units as the index gives them (``U_COLS``): a text met before without
    statistics or extras is not decoded again (``_PLAIN_TEXTS``), the others are decoded as one JSON document
    (the decoder's per-call cost once, not per unit).  Raises ``ValueError`` where a text is not JSON."""
    memo = _PLAIN_TEXTS
    texts = [row[6] for row in rows]
    forms: list[Any] = list(map(memo.get, texts))
    if None in forms:
        todo = [k for k, f in enumerate(forms) if f is None]
        decoded = json.loads("[" + ",".join([texts[k] for k in todo]) + "]")
        if len(decoded) != len(todo):
            raise ValueError("a unit's packed tensors are not one JSON list")
        if len(memo) + len(todo) > _PLAIN_TEXTS_MAX:
            memo.clear()
        for k, entries in zip(todo, decoded):
            forms[k] = form = entry_forms(entries)
            if len(texts[k]) <= _PLAIN_TEXT_CHARS and all(e[10] is None and not e[11] for e in form):
                memo[texts[k]] = form
    add_unit_tensors(out, rows, forms)


def add_unit_tensors(out: dict[int, list[TensorRow]], rows: list[tuple], forms: list[list[tuple]]) -> None:
    """The tensors of many units (``rows``, their entries in ``forms``: ``entry_forms``) added to their ops'
    lists in ``out``: one loop, not a call and a list a unit (compare reads every unit of a place this way).
    A tensor's extras are its own dict (an entry's may be shared by units of one text)."""
    if len(_SHARED) > _SHARED_MAX:
        _SHARED.clear()
    s = _SHARED.setdefault
    for (uid, op_id, path, storage, producer, ts, _packed), entries in zip(rows, forms):
        storage = s(storage, storage)
        producer = s(producer, producer)
        add = out[op_id].append
        uid <<= 16
        for k, (io, slot, dtype, shape, fmt, dshape, sdt, off, nb, subf, stats, extra) in enumerate(entries):
            add(TensorRow(uid | k, op_id, io, slot, dtype, shape, fmt, dshape, path, storage, sdt, off, nb, subf,
                          producer, stats, extra or {}, ts))


def slot_key(t: TensorRow) -> tuple[bool, int]:
    """An op's tensors are listed inputs first, each by slot (other kinds after the inputs, by slot)."""
    return t.io != "input", t.slot


def in_slot_order(tensors: list[TensorRow]) -> bool:
    """Whether ``tensors`` are already in ``slot_key`` order (a stable sort would leave them as they are)."""
    prev = slot_key(tensors[0])
    for t in tensors[1:]:
        key = (t.io != "input", t.slot)
        if key < prev:
            return False
        prev = key
    return True


class OpLookupError(LookupError):
    """An OP argument matched no op or several; ``matches`` holds the closest names."""

    def __init__(self, message: str, matches: list[str]) -> None:
        super().__init__(message)
        self.matches = matches



def shown_step(step: int) -> Optional[int]:
    """The step as users see it: MindSpore's ``constants/`` folder is in no step (None, JSON null), never
    the -1 the index files it under (``layouts.paths.CONSTANTS_STEP``)."""
    return None if step == CONSTANTS_STEP else step



def chunks(items: list, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def like_pattern(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


