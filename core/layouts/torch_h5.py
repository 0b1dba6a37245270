"""PyTorch 1.5 NPU overflow dumps (``torch.utils.dumper``) stored as ``.h5`` files (seed 003).

The seed only shows that groups are addressed as ``/{op}/{seqid}/`` (``h5copy -s
"/op1/seqid/"``).  Assumed below that group: ``input``/``output`` groups holding one
dataset per slot (``/{op}/{seqid}/output/0``).  Anything deeper or shallower still yields a
record: the first path component is the op, a numeric second one its seqid, an
``input``/``output`` component (else "output") the io, and a numeric last component the
slot (else the dataset's position in its group).  ``op_name`` is ``{op}.{seqid}`` and
``order_hint`` the seqid, the call order of the dumper.

h5py is optional (``dumpscope[h5]``); without it each ``.h5`` file becomes one Problem.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator

import numpy as np

from dumpscope.core.layouts.base import DirListing, Item, Layout, rank_from_parts
from dumpscope.core.model import INPUT, OUTPUT, STORAGE_H5, Problem, TensorRecord

PRODUCER = "torch_h5"
H5_EXTS = (".h5", ".hdf5")
NEEDS_H5PY = "reading .h5 dumps needs h5py (pip install 'dumpscope[h5]')"


def _h5py() -> Any:
    """Import h5py lazily (None when absent; tests put a stand-in, or None, in ``sys.modules``)."""
    try:
        import h5py  # type: ignore[import-not-found]
    except ImportError:
        return None
    return h5py


class TorchH5Layout(Layout):
    name = "torch_h5"
    title = "PyTorch 1.5 NPU overflow dump (.h5, needs h5py)"

    def scan_dir(self, listing: DirListing) -> Iterable[Item]:
        files = [f for f in listing.unclaimed() if f.lower().endswith(H5_EXTS)]
        if not files:
            return
        h5py = _h5py()
        for fname in files:
            listing.claimed.add(fname)
            path = listing.path(fname)
            if h5py is None:
                yield Problem(path, f"{fname}: {NEEDS_H5PY}")
                continue
            try:
                yield from _scan_file(h5py, path, rank_from_parts(listing.parts))
            except Exception as exc:  # h5py raises OSError/KeyError/ValueError on bad files
                yield Problem(path, f"{fname}: unreadable .h5 ({str(exc).splitlines()[0][:100]})")


def _datasets(h5py: Any, group: Any, prefix: str = "") -> Iterator[tuple[str, Any, int]]:
    """(path, dataset, position in its group) for every dataset below ``group``."""
    for pos, key in enumerate(group.keys()):
        obj = group.get(key)
        path = f"{prefix}/{key}"
        if isinstance(obj, h5py.Dataset):
            yield path, obj, pos
        elif isinstance(obj, h5py.Group):
            yield from _datasets(h5py, obj, path)


def _record_fields(ds_path: str, pos: int) -> tuple[str, str, str, int, float]:
    """(op_type, op_name, io, slot, order) from a dataset path like ``/add/3/output/0``."""
    parts = [p for p in ds_path.split("/") if p]
    op = parts[0] if len(parts) > 1 else "h5"
    seq = parts[1] if len(parts) > 2 and parts[1].isdigit() else ""
    io = INPUT if "input" in parts[1:] else OUTPUT
    slot = int(parts[-1]) if parts[-1].isdigit() and len(parts) > 1 else pos
    order = float(seq) if seq else 0.0
    return op, f"{op}.{seq}" if seq else op, io, slot, order


def _scan_file(h5py: Any, path: str, rank: int) -> Iterator[Item]:
    with h5py.File(path, "r") as fh:
        for ds_path, ds, pos in _datasets(h5py, fh):
            op_type, op_name, io, slot, order = _record_fields(ds_path, pos)
            dt = ds.dtype
            if dt.hasobject or dt.kind in "OSUV":
                yield Problem(path, f"{ds_path}: dataset of {dt} is not a numeric tensor")
                continue
            yield TensorRecord(
                producer=PRODUCER, path=path, op_type=op_type, op_name=op_name,
                file_name=op_name.replace("/", "_"), io=io, slot=slot, dtype=dt.name,
                shape=tuple(int(d) for d in ds.shape), rank=rank, graph="",
                storage=STORAGE_H5, nbytes=int(ds.size) * dt.itemsize, order_hint=order,
                extra={"dataset": ds_path, "framework": "pytorch"},
            )


def load_dataset(path: str, dataset: str) -> np.ndarray:
    """Read one dataset of an ``.h5`` file (needs h5py)."""
    h5py = _h5py()
    name = os.path.basename(path)
    if h5py is None:
        raise RuntimeError(f"{name}: {NEEDS_H5PY}")
    try:
        with h5py.File(path, "r") as fh:
            return np.asarray(fh[dataset][()])
    except (OSError, KeyError, ValueError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"{name}: cannot read {dataset or '(no dataset)'} ({reason})") from None


#: elements read from a dataset at a time (whole rows)
CHUNK_ELEMENTS = 1 << 22


def dataset_chunks(path: str, dataset: str):
    """``(make_chunks, shape, dtype)`` reading a numeric dataset a block of rows at a time (h5py
    reads only those rows, compressed or chunked), else None: compare and stats stay bounded."""
    h5py = _h5py()
    if h5py is None:
        return None
    try:
        with h5py.File(path, "r") as fh:
            ds = fh[dataset]
            shape, dtype = tuple(int(d) for d in ds.shape), np.dtype(ds.dtype)
    except (OSError, KeyError, ValueError, TypeError):
        return None  # load_dataset names the problem
    if dtype.kind not in "biufc" or dtype.names is not None or not shape:
        return None
    rows = max(1, CHUNK_ELEMENTS // max(1, int(np.prod(shape[1:], dtype=np.int64))))

    def make():
        with h5py.File(path, "r") as fh:
            ds = fh[dataset]
            for r in range(0, shape[0], rows):
                yield np.ascontiguousarray(ds[r:r + rows]).reshape(-1)
            if shape[0] == 0:
                yield np.zeros(0, dtype)

    return make, shape, dtype


def load_tensor(rec: TensorRecord) -> np.ndarray:
    """Read ``extra["dataset"]`` of ``rec.path`` (needs h5py)."""
    return load_dataset(rec.path, rec.extra.get("dataset", ""))
