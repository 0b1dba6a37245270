"""``dumpscope convert``: every tensor as ``.npy`` in its logical layout (msaccucmp's job).

Output goes to ``OUTDIR/<folder relative to PATH>/<dump file name>.<io>.<slot>.npy``; float16
stays float16, bfloat16/float8 become exact float32, packed int4 becomes int8.  Names that
would pass the 255-byte file-name limit are written under their all-digit alias with a
``mapping.csv`` beside them.  Nothing is written outside OUTDIR, and OUTDIR may not lie
inside the dump tree (dumpscope never writes into user data).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

import numpy as np

from dumpscope.core.support.atomic_write import replaced_file
from dumpscope.core.support.tree_paths import inside_tree
from dumpscope.core.tensors.load import TensorLoadError, load_tensor

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery

NAME_MAX = 255


@dataclass(slots=True)
class ConvertResult:
    outdir: str
    written: int
    failed: int
    skipped: int = 0  # statistics-only tensors and non-tensor arguments: nothing to write


def _safe_component(name: str) -> str:
    """A single path component: no separators, no '..', no NUL."""
    name = name.replace("/", "_").replace("\\", "_").replace("\x00", "_")
    if name in ("", ".", ".."):
        name = "_" + name
    return name


def _save_streamed(dest: str, ref) -> bool:
    """Write a device-layout tensor as ``.npy`` chunk by chunk (bounded memory); False when the
    tensor is not streamable and must be loaded whole."""
    from dumpscope.core.formats.dtypes import decode, decoded_numpy_dtype
    from dumpscope.core.tensors.load import device_stream

    made = device_stream(ref)
    if made is None:
        return False
    make, shape, stored = made
    out_dtype = decoded_numpy_dtype(stored)
    try:
        with replaced_file(dest, "wb") as fh:  # ctrl-C or a file cut short: no partial file left
            np.lib.format.write_array_header_1_0(fh, {"descr": np.lib.format.dtype_to_descr(out_dtype),
                                                      "fortran_order": False, "shape": tuple(shape)})
            for chunk in make():
                values = decode(chunk.reshape(-1).view(np.uint8), stored, chunk.size)
                fh.write(np.ascontiguousarray(values, dtype=out_dtype).tobytes())
    except ValueError as exc:  # a file cut short: one line naming it
        raise TensorLoadError(str(exc).splitlines()[0]) from None
    return True


def _write_mapping(path: str, pairs: list[tuple[str, str]]) -> None:
    """Rewrite ``mapping.csv`` with the aliases of this run merged into those already there: a
    second ``convert`` (or one ``--op`` after another) never duplicates or drops a line."""
    entries: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                alias, sep, original = line.rstrip("\n").partition(",")
                if sep and alias:
                    entries[alias] = original
    except FileNotFoundError:
        pass
    entries.update(pairs)
    with replaced_file(path, "w", encoding="utf-8") as fh:
        for alias in sorted(entries):
            fh.write(f"{alias},{entries[alias]}\n")


def convert_tree(q: "DumpQuery", outdir: str, op: Optional[str] = None, rank: Optional[int] = None,
                 step: Optional[int] = None, progress: Optional[Callable[[int, int], None]] = None,
                 errors: Optional[list[str]] = None) -> ConvertResult:
    """Convert the tensors of the selected ops; returns counts. Raises ValueError for a bad OUTDIR."""
    root = q.root
    outdir = os.path.abspath(outdir)
    if inside_tree(outdir, root):
        raise ValueError(f"{outdir}: OUTDIR lies inside the dump tree {root}; dumpscope never writes into a "
                         "dump tree, choose another folder")
    if op is not None:  # the op (every run of a loop body), and its Dump-Watch snapshots when it was watched
        found = q.resolve_op(op, rank, step)
        ops = [o for run in q.runs(found) for o in (run, *q.snapshots_of(run))]
    elif rank is not None or step is not None:
        r, s = q.default_place(rank, step)
        ops = [o for o in q.ops(r, s, kind="all", graph_only=True) if o.graph_only != 1]  # watch snapshots too
    else:
        ops = [o for o in q.ops(kind="all", graph_only=True) if o.graph_only != 1]
    every = [t for o in ops for t in q.tensors(o.id)]
    tensors = [t for t in every if t.storage not in ("none", "value")]
    skipped = len(every) - len(tensors)
    os.makedirs(outdir, exist_ok=True)
    written = failed = 0
    mappings: dict[str, list[tuple[str, str]]] = {}
    for i, t in enumerate(tensors):
        rel_dir = os.path.relpath(os.path.dirname(t.path), root)
        parts = [_safe_component(p) for p in rel_dir.split(os.sep) if p not in ("", ".")]
        target_dir = os.path.join(outdir, *parts)
        base = os.path.basename(t.path)
        if base.endswith(".npy"):
            base = base[:-4]
        real = t.extra.get("real_name")
        long_name = f"{_safe_component(real or base)}.{t.io}.{t.slot}.npy"
        name = long_name
        if len(long_name.encode("utf-8")) > NAME_MAX:
            name = f"{_safe_component(base)}.{t.io}.{t.slot}.npy"
            if len(name.encode("utf-8")) > NAME_MAX:
                # a stable all-digit alias (str hash() changes between runs)
                digits = int(hashlib.sha1(long_name.encode("utf-8", "surrogateescape")).hexdigest()[:15], 16)
                name = f"{digits % 10**16:016d}.{t.io}.{t.slot}.npy"
            mappings.setdefault(target_dir, []).append((name, long_name))
        dest = os.path.join(target_dir, name)
        if not inside_tree(dest, outdir):
            failed += 1
            if errors is not None:
                errors.append(f"{t.path}: refusing to write outside OUTDIR ({dest})")
            continue
        try:
            os.makedirs(target_dir, exist_ok=True)
            if _save_streamed(dest, t.ref()):  # a device layout, converted slab by slab
                written += 1
                if progress is not None:
                    progress(i + 1, len(tensors))
                continue
            arr = load_tensor(t.ref())  # packed int4 arrives as int8, bf16/fp8 as exact float32
            # reshape: ascontiguousarray makes a 0-d array 1-d, and a scalar must stay a scalar
            with replaced_file(dest, "wb") as fh:
                np.save(fh, np.ascontiguousarray(arr).reshape(arr.shape), allow_pickle=False)
            written += 1
        except (TensorLoadError, OSError, ValueError) as exc:
            failed += 1
            if errors is not None:
                errors.append(str(exc).splitlines()[0])
        if progress is not None:
            progress(i + 1, len(tensors))
    for target_dir, pairs in mappings.items():
        _write_mapping(os.path.join(target_dir, "mapping.csv"), pairs)
    return ConvertResult(outdir, written, failed, skipped)
