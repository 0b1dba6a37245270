"""Layout plans: how compare's one-read loader turns a small CANN tensor's bytes into logical values fast.

The files of a model repeat a few hundred tensor layouts (dtype, device format, shapes).  For each, the
canonical converter (``cann_dump.load_tensor`` / ``device_format.to_logical``) is run once on element
numbers to learn the gather it amounts to (``Plan``), checked bit for bit against its own result; later
tensors of that layout are one ``frombuffer`` and one ``take``.  The header of every file is still
parsed and checked (``cann_groups``): only what it decodes to is kept per layout.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from dumpscope.core.formats.shapes import element_count


#: per (header layout, header length, file size): the file's inputs and outputs as ``Entry``s (tensor,
#: plan key, plan); every file of an op with the same shapes has the same ones (``cann_dump.TensorLayout``),
#: and building them costs what parsing the header does
GROUPS: dict[tuple[int, int, int], tuple[Any, tuple[list, list]]] = {}
GROUPS_MAX = 1024


class Entry:
    """One tensor of a ``cann_groups`` layout: its ``CannTensor``, its plan key and, once known, its plan
    (with the ``PLANS`` it came from): files of the layout share the entry, so the plan is looked up by
    its key (a tuple of tuples, hashed anew each time: a quarter of the plan's use) once per layout."""

    __slots__ = ("tensor", "key", "plan", "plans")

    def __init__(self, tensor: Any) -> None:
        self.tensor, self.key, self.plan, self.plans = tensor, plan_key(tensor), None, None


def cann_groups(path: str, data: bytes) -> tuple[list[Entry], list[Entry]]:
    """``header_from_bytes(path, data)``'s inputs and outputs, each an ``Entry`` (its ``CannTensor``, plan key): the
    header is parsed (and checked) for every file, the tensors built once per layout.  What the
    tensors say is the header's layout, offsets (8 + H on) and truncation (the file's size), nothing
    else, so the key holds exactly those; the layout object is kept with its entry so its id is not
    reused while the entry lives."""
    cann = _CANN or _cann_dump()
    h, lay = cann.layout_from_bytes(path, data)
    key = (id(lay), h, len(data))
    got = GROUPS.get(key)
    if got is not None and got[0] is lay:
        return got[1]
    h, fields = cann.fields_from_bytes(path, data)  # (once a layout: the header object wants the op's name)
    header = cann.build_header(path, len(data), h, fields)
    groups = ([Entry(t) for t in header.inputs], [Entry(t) for t in header.outputs])
    with _PLAN_LOCK:
        if len(GROUPS) >= GROUPS_MAX:
            GROUPS.clear()
        GROUPS[key] = (lay, groups)
    return groups


#: ``formats.cann_dump``, imported at the first CANN file (most commands read no tensor): an import
#: statement in ``cann_groups`` cost 0.5 us of its ~2.2 for each of compare's 40,000 files
_CANN: Any = None


def _cann_dump() -> Any:
    global _CANN
    from dumpscope.core.formats import cann_dump

    _CANN = cann_dump
    return cann_dump


@dataclass(frozen=True, slots=True)
class Plan:
    """How ``cann_dump.load_tensor`` turns one small tensor layout into logical values: read ``count``
    stored ``dtype`` elements, gather them by ``index`` (None: as they are), shape them ``shape``."""

    dtype: np.dtype
    count: int
    shape: tuple[int, ...]
    index: Optional[np.ndarray]
    #: the gather as a transpose, where it is one (``transpose_of``): ``(dims, axes)``
    transpose: Optional[tuple[tuple[int, ...], tuple[int, ...]]] = None
    #: stored bytes; logical elements (the gather may drop padding: fewer than ``count``).  Fields, not
    #: properties: read for each of compare's 80,000 tensors
    nbytes: int = field(init=False)
    size: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nbytes", self.count * self.dtype.itemsize)
        object.__setattr__(self, "size", self.count if self.index is None else self.index.size)


#: plans by tensor layout (dtype, format, device and original shape, sub-format, payload size): the
#: files of a model repeat a few hundred layouts, and the canonical loader's checks and converter
#: calls cost ten times the gather they amount to
PLANS: dict[tuple, Optional[Plan]] = {}
PLANS_MAX = 256
_PLAN_MAX_ELEMS = 1 << 16
_PLAN_LOCK = threading.Lock()
_PLAN_DTYPES = {"float16": "<f2", "float32": "<f4", "float64": "<f8", "int8": "i1", "uint8": "u1", "int16": "<i2",
                "uint16": "<u2", "int32": "<i4", "uint32": "<u4", "int64": "<i8", "uint64": "<u8"}


def plan_key(t) -> tuple:
    return (t.dtype, t.format, t.shape, t.original_shape, t.sub_format, t.size)


def entry_planned(e: Entry, data: bytes) -> Optional[np.ndarray]:
    """The tensor's logical values by its layout's plan (kept on the entry once found), or None (no plan
    yet, or not in ``data``: the canonical loader decodes it and names a truncation)."""
    made = entry_flat(e, data)
    return None if made is None else made[0].reshape(made[1])


def entry_flat(e: Entry, data: bytes) -> Optional[tuple[np.ndarray, tuple[int, ...]]]:
    """``entry_planned``'s values in C order and 1-D (a view of ``data`` where the plan moves nothing),
    with the shape it would give them; None where it gives None."""
    plan = entry_plan(e, data)
    if plan is None:
        return None
    return planned_flat(data, e.tensor.offset, plan), plan.shape


def entry_plan(e: Entry, data: bytes) -> Optional[Plan]:
    """The plan ``entry_flat`` would follow for this tensor of ``data``, or None where it gives None:
    compare's reader keeps ``(data, offset, plan)`` and gathers many tensors of a plan at once."""
    plan = _entry_plan(e)
    if plan is None or e.tensor.offset + plan.nbytes > len(data):
        return None
    return plan


#: ``entry_stored`` keeps a file's own bytes up to this size (a tensor's bytes copied out beyond)
STORED_WHOLE = 16 << 10
#: a CANN tensor undecoded, as ``entry_stored`` gives it: (buffer, offset, plan)
Stored = tuple[Any, int, Plan]


def entry_stored(e: Entry, data: bytes) -> Optional[Stored]:
    """The tensor undecoded where its plan reads it (``entry_plan``), else None: the buffer is the
    file's bytes when the file is small (``STORED_WHOLE``), else a copy of the tensor's, so a kept
    tuple holds little."""
    plan = entry_plan(e, data)
    if plan is None:
        return None
    offset = e.tensor.offset
    if len(data) > STORED_WHOLE:
        return data[offset:offset + plan.nbytes], 0, plan
    return data, offset, plan


def planned_flat(data: Any, offset: int, plan: Plan) -> np.ndarray:
    """The values ``plan`` makes of the tensor at ``offset`` of ``data``, 1-D in C order."""
    flat = np.frombuffer(data, plan.dtype, plan.count, offset)  # (by keyword: 0.35 us more a call)
    return flat if plan.index is None else flat.take(plan.index)


def _entry_plan(e: Entry) -> Optional[Plan]:
    plan = e.plan
    if plan is None or e.plans is not PLANS:  # (a test swaps PLANS for an empty one)
        plan = PLANS.get(e.key)
        if plan is None:
            return None
        e.plan, e.plans = plan, PLANS
    return plan


def learn_plan(t, arr: np.ndarray, data: bytes) -> None:
    key = plan_key(t)
    if key in PLANS:
        return
    try:
        plan = _make_plan(t, arr, data)
    except Exception:  # anything unusual: this layout keeps the canonical path
        plan = None
    with _PLAN_LOCK:
        if len(PLANS) >= PLANS_MAX:
            PLANS.clear()
        PLANS[key] = plan


def _make_plan(t, arr: np.ndarray, data: bytes) -> Optional[Plan]:
    """The plan of ``t``'s layout, from the canonical converter itself: it only moves elements, so run
    on element numbers of the same width it yields the gather index.  Checked against ``arr`` (the
    canonical result from ``data``) bit for bit; None when the dtype is not a plain number or the tensor is big."""
    code = _PLAN_DTYPES.get(t.dtype)
    count = element_count(t.shape)
    if code is None or not 0 < count <= _PLAN_MAX_ELEMS:
        return None
    sdt = np.dtype(code)
    if arr.dtype != sdt or not sdt.isnative:
        return None
    udt = np.dtype(f"<u{sdt.itemsize}")
    number = np.arange(count, dtype=np.int64)
    index = _gather_index(t, number, udt, arr.shape)
    # numbered backwards too: an element the converter made up (a fill) would not follow the numbers
    back = _gather_index(t, count - 1 - number, udt, arr.shape)
    if index is None or back is None or not np.array_equal(back, count - 1 - index):
        return None
    flat_index = index.reshape(-1)
    identity = flat_index.size == count and bool(np.array_equal(flat_index, number))
    plan = Plan(sdt, count, tuple(arr.shape), None if identity else flat_index.astype(np.intp),
                None if identity else transpose_of(flat_index, tuple(t.shape)))
    raw = np.frombuffer(data, dtype=udt, count=count, offset=t.offset)
    mine = raw if plan.index is None else raw.take(plan.index)
    if not np.array_equal(mine, np.ascontiguousarray(arr).reshape(-1).view(udt)):
        return None
    return plan


def transpose_of(index: np.ndarray, dims: tuple[int, ...]) -> Optional[tuple[tuple[int, ...], tuple[int, ...]]]:
    """``(dims, axes)`` when gathering by ``index`` is reading the stored elements as a ``dims`` array
    transposed to ``axes`` in C order (NC1HWC0 whose C is whole C0 blocks, FRACTAL_NZ without padding),
    else None.  Checked element for element, so a transposed copy of the stored values is the gather's
    result (compare copies many tensors so at once, casting as it copies: a third of a ``take``'s time
    and no separate cast pass).  Each stored axis's place is where its coordinate first changes along
    the gather: the later, the slower the axis."""
    if not dims or any(d <= 0 for d in dims) or index.size != element_count(dims) or index.ndim != 1:
        return None
    coords = np.unravel_index(index, dims)
    firsts = []
    for a, c in enumerate(coords):
        moved = np.flatnonzero(c != c[0])
        firsts.append(int(moved[0]) if moved.size else index.size)  # (size-1 axes: slowest, in order)
    axes = tuple(sorted(range(len(dims)), key=lambda a: (-firsts[a], a)))
    want = np.arange(index.size, dtype=np.int64).reshape(dims).transpose(axes).reshape(-1)
    return (tuple(dims), axes) if np.array_equal(want, index) else None


def _gather_index(t, numbers: np.ndarray, udt: np.dtype, shape: tuple) -> Optional[np.ndarray]:
    """Where each logical element of ``t`` comes from, when its stored elements carry ``numbers``:
    the converter run on the numbers one base-256**itemsize digit at a time (two for 1-byte dtypes)."""
    from dumpscope.core.formats.device_format import to_logical

    base = min(1 << (8 * udt.itemsize), 1 << 32)
    index = np.zeros(shape, np.int64)
    mult = 1
    while True:
        probe = ((numbers // mult) % base).astype(udt).reshape(t.shape)
        out = to_logical(probe, t.format, t.shape, t.original_shape, t.sub_format, None)
        if out.shape != shape:
            return None
        index += out.astype(np.int64) * mult
        mult *= base
        if mult >= numbers.size:
            return index
