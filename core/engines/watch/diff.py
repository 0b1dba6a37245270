"""Dump-Watch mode: recognise snapshot files and tell after which op a watched output changed.

In watcher mode (FORMATS.md §8.2) GE dumps watched op W's outputs right after W runs (an
ordinary dump, op-name field ``W``) and again after every layer op L (op-name field
``{L}_To_{W}``, sanitised).  W's own dump is the *reference*: W's output as W wrote it.  A
snapshot after L shows W's output memory at that point; if it differs from the reference,
something between W and L (L itself, or an op the watch list did not cover) wrote there.

Snapshots taken after a layer op that ran *before* W show memory W had not written yet; they
are listed (``before_watched: true``) and diffed like the others, but they can never be the
overwrite, so they are not eligible for ``first_change_after``.

Comparison is exact: element bytes must be identical, except that NaN vs NaN (any payload)
counts as unchanged.  So -0.0 vs +0.0 *is* a change (max_abs_diff 0.0): a stray write of
the same value is still a stray write.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence

import numpy as np


@dataclass(slots=True)
class SnapshotDiff:
    """How a snapshot differs from the reference.

    ``max_abs_diff`` is over changed elements whose two values are finite (0.0 if none);
    changes involving NaN/Inf are counted in ``nonfinite_changed``.  When the two arrays
    cannot be compared element-wise (shape mismatch) ``changed`` is True,
    ``changed_elements`` is the snapshot size, ``max_abs_diff`` is ``None`` and ``reason``
    says why.  ``first_changed`` holds up to ``first_n`` changed indices (C order).
    """

    changed: bool
    changed_elements: int
    max_abs_diff: Optional[float]
    first_changed: list[tuple[int, ...]] = field(default_factory=list)
    nonfinite_changed: int = 0
    reason: str = ""


def _flat_chunks(a: np.ndarray, chunk: int) -> Iterator[tuple[int, np.ndarray]]:
    flat = a.reshape(-1) if a.flags.c_contiguous else None
    for start in range(0, a.size, chunk):
        stop = min(a.size, start + chunk)
        yield start, (flat[start:stop] if flat is not None else np.ascontiguousarray(a.flat[start:stop]))


def _bits(c: np.ndarray) -> np.ndarray:
    """An unsigned-integer (or byte-row) view of a contiguous chunk for bitwise equality."""
    size = c.dtype.itemsize
    if size in (1, 2, 4, 8):
        return c.view(f"u{size}")
    return c.view(np.uint8).reshape(c.size, size)


def _values(c: np.ndarray) -> np.ndarray:
    """float64 (complex128 for complex) values of a few selected elements."""
    return c.astype(np.complex128 if c.dtype.kind == "c" else np.float64)


def diff_snapshot(
    reference: np.ndarray, snapshot: np.ndarray, first_n: int = 10, chunk_elems: int = 1 << 22
) -> SnapshotDiff:
    """Exact element diff of ``snapshot`` against ``reference`` (see module docstring).

    Streams in chunks (memory: a chunk's worth of masks).  With different dtypes of the
    same shape, values are compared as float64 instead of bytes and ``reason`` says so.
    """
    reference, snapshot = np.asarray(reference), np.asarray(snapshot)
    if reference.shape != snapshot.shape:
        return SnapshotDiff(
            changed=True, changed_elements=int(snapshot.size), max_abs_diff=None,
            reason=f"shape {tuple(reference.shape)} vs {tuple(snapshot.shape)}",
        )
    same_dtype = reference.dtype == snapshot.dtype
    reason = "" if same_dtype else f"dtype {reference.dtype} vs {snapshot.dtype}: values compared"
    changed = nonfinite = 0
    max_abs = 0.0
    first: list[int] = []
    with np.errstate(all="ignore"):
        for (start, rc), (_, sc) in zip(_flat_chunks(reference, chunk_elems), _flat_chunks(snapshot, chunk_elems)):
            if same_dtype:
                neq = _bits(rc) != _bits(sc)
                if neq.ndim == 2:
                    neq = neq.any(axis=1)
                idx = np.flatnonzero(neq)
                if idx.size == 0:
                    continue
                rv, sv = _values(rc[idx]), _values(sc[idx])
            else:
                rv_all, sv_all = _values(rc), _values(sc)
                idx = np.flatnonzero(~((rv_all == sv_all) | (np.isnan(rv_all) & np.isnan(sv_all))))
                if idx.size == 0:
                    continue
                rv, sv = rv_all[idx], sv_all[idx]
            keep = ~(np.isnan(rv) & np.isnan(sv))  # NaN vs NaN (other payload): unchanged
            idx, rv, sv = idx[keep], rv[keep], sv[keep]
            if idx.size == 0:
                continue
            changed += int(idx.size)
            fin = np.isfinite(rv) & np.isfinite(sv)
            nonfinite += int(idx.size - np.count_nonzero(fin))
            if fin.any():
                max_abs = max(max_abs, float(np.abs(sv[fin] - rv[fin]).max()))
            if len(first) < first_n:
                first.extend(int(start + i) for i in idx[: first_n - len(first)])
    shape = reference.shape
    first_idx = [tuple(int(x) for x in np.unravel_index(i, shape)) for i in first] if shape else [() for _ in first]
    return SnapshotDiff(
        changed=changed > 0, changed_elements=changed, max_abs_diff=max_abs,
        first_changed=first_idx, nonfinite_changed=nonfinite, reason=reason,
    )


@dataclass(slots=True)
class WatchTimeline:
    """One watched op's snapshots in execution order and the first op after which it changed.

    Each snapshot dict has the CLI keys ``after``, ``changed``, ``changed_elements``,
    ``max_abs_diff`` plus ``first_changed``, ``exec_index``, ``before_watched``,
    ``nonfinite_changed`` and ``reason``.
    """

    name: str
    snapshots: list[dict[str, Any]]
    first_change_after: Optional[str]

    def to_dict(self) -> dict[str, Any]:
        """The CLI ``watch`` element: ``{"name", "snapshots", "first_change_after"}``."""
        snaps = []
        for s in self.snapshots:
            d = dict(s)
            d["first_changed"] = [list(i) for i in s["first_changed"]]
            snaps.append(d)
        return {"name": self.name, "snapshots": snaps, "first_change_after": self.first_change_after}


def build_timeline(
    watched_name: str,
    reference: np.ndarray,
    snapshots: Sequence[tuple[str, Optional[int], np.ndarray]],
    watched_exec_index: Optional[int] = None,
    first_n: int = 10,
) -> WatchTimeline:
    """Diff every snapshot ``(after_name, exec_index, array)`` of W against W's own dump.

    ``reference`` is W's own post-execution output.  W's position in execution order is
    ``watched_exec_index``, else the exec index of a snapshot whose ``after`` is W itself;
    if neither is known every other snapshot is eligible.  W's own entry (``after`` = W,
    unchanged) is always in the list — added when the caller did not pass it, ordered by
    its exec index or first when that is unknown.  ``first_change_after`` is the first
    eligible snapshot (exec index after W's) that differs from the reference.
    """
    if watched_exec_index is None:
        for after, idx, _ in snapshots:
            if after == watched_name and idx is not None:
                watched_exec_index = idx
                break
    entries: list[dict[str, Any]] = []
    have_own = False
    for after, idx, arr in snapshots:
        own = after == watched_name
        have_own = have_own or own
        d = diff_snapshot(reference, arr, first_n=first_n)
        before = (
            not own and watched_exec_index is not None and idx is not None and idx < watched_exec_index
        )
        entries.append(_entry(after, idx, d, before))
    if not have_own:
        entries.append(_entry(watched_name, watched_exec_index, SnapshotDiff(False, 0, 0.0), False))

    def order(e: dict[str, Any]) -> float:
        # unknown exec index: W's own entry goes first, any other snapshot last
        if e["exec_index"] is not None:
            return float(e["exec_index"])
        return -math.inf if e["after"] == watched_name else math.inf

    entries.sort(key=order)
    first_change = None
    for e in entries:
        eligible = e["after"] != watched_name and not e["before_watched"]
        if eligible and watched_exec_index is not None and e["exec_index"] is not None:
            eligible = e["exec_index"] > watched_exec_index
        if eligible and e["changed"]:
            first_change = e["after"]
            break
    return WatchTimeline(name=watched_name, snapshots=entries, first_change_after=first_change)


def _entry(after: str, idx: Optional[int], d: SnapshotDiff, before: bool) -> dict[str, Any]:
    return {
        "after": after,
        "exec_index": idx,
        "changed": d.changed,
        "changed_elements": d.changed_elements,
        "max_abs_diff": d.max_abs_diff,
        "first_changed": d.first_changed,
        "nonfinite_changed": d.nonfinite_changed,
        "before_watched": before,
        "reason": d.reason,
    }
