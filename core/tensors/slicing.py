"""A slice of one tensor, reading only the part of the file it needs (the explorer's tensor pane).

``load_tensor`` reads a whole tensor, and a 2 GiB NC1HWC0 tensor converted whole peaks at twice
that; a slice such as ``0, 5`` needs one slab.  :func:`tensor_slice` computes the slice in its own
C order, one block of the tensor's two outer logical axes at a time (at most :data:`BLOCK_BYTES`
of logical data), and stops once ``limit`` values are known (the pane prints no more):

* device layouts NC1HWC0 (logical NCHW), FRACTAL_NZ (logical 2-D or 3-D) and the weights FRACTAL_Z,
  FRACTAL_Z_3D, C1HWNCoC0 (logical NCHW / NCDHW): blocks come from
  ``core.formats.device_chunks.device_windows``, which reads only the slabs holding them;
* plain layouts (``.npy`` in C order, raw files, plain-format CANN payloads of plain numbers): the
  payload is memory-mapped and numpy indexes it, touching only the pages the slice covers;
* everything else (``.pt``, ``.h5``, packed int4/int2, other device formats, Fortran-order
  ``.npy``) is loaded whole, as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from math import prod
from typing import Any, Callable, Optional

import numpy as np

from dumpscope.core.model import STORAGE_CANN, STORAGE_NPY, STORAGE_RAW
from dumpscope.core.tensors.load import (TensorLoadError, TensorRef, BITS_DTYPES, cann_tensor, load_error, payload_dtype,
                                      load_tensor, npy_words_dtype)

#: logical bytes of one block read for a slice
BLOCK_BYTES = 32 << 20


@dataclass
class SliceResult:
    """The slice ``shape``/``dtype``/``size``; ``values`` is the whole slice when ``size <= limit``,
    else its first ``limit`` values in C order (flattened)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    size: int
    values: np.ndarray
    how: str  # "windows", "mapped" or "whole": how much of the file was read


def tensor_slice(ref: TensorRef, index: tuple, limit: int = 2048) -> SliceResult:
    """``x[index]`` (numpy basic indexing: ints, slices, ``...``, ``None``) of the tensor ``ref``.
    Raises ``IndexError`` for an index numpy would refuse, ``TensorLoadError`` for a file that
    cannot be read."""
    windows = _device_windows(ref)
    if windows is not None:
        return _by_windows(*windows, index, limit)
    mapped = _mapped(ref)
    if mapped is not None:
        raw, bits = mapped
        return _result(raw[index] if index else raw, limit, "mapped", bits)
    arr = load_tensor(ref)
    return _result(arr[index] if index else arr, limit, "whole")


def _result(part: Any, limit: int, how: str, bits: Optional[str] = None) -> SliceResult:
    """Copy out (and decode, for raw bfloat16/float8 bits) no more than ``limit`` values of ``part``."""
    part = np.asarray(part)
    if part.size > limit:
        values = np.array(part.reshape(-1)[:limit] if part.flags.c_contiguous else part.flat[:limit])
    else:
        values = np.array(part)
    if bits is not None:
        values = _decode(values, bits)
    return SliceResult(tuple(part.shape), values.dtype, int(part.size), values, how)


# -- plain payloads: a memory map ------------------------------------------------------------------

def _mapped(ref: TensorRef) -> Optional[tuple[np.ndarray, Optional[str]]]:
    """The tensor's payload as a read-only memory map (see :func:`_map`), else None."""
    from dumpscope.core.formats.device_format import PLAIN_FORMATS

    try:
        if ref.storage == STORAGE_NPY:
            from dumpscope.core.formats.npy_header import read_array_header, read_npy_header

            head = read_npy_header(ref.path)
            if head.fortran_order or head.truncated or head.oversized:
                return None
            with open(ref.path, "rb") as fh:
                header = read_array_header(fh)
            if header is None:
                return None
            shape, _fortran, sdt = header
            bits = npy_words_dtype(ref, sdt)
            if bits is not None:  # bfloat16/float8 bit patterns stored as integer words
                return _map(ref.path, head.data_offset, shape, bits, ref.dtype)
            if sdt.hasobject or sdt.kind not in "biufc" or sdt.names is not None or sdt.subdtype is not None:
                return None
            return _map(ref.path, head.data_offset, shape, sdt, sdt.name)
        if ref.storage == STORAGE_RAW:
            stored = ref.stored_dtype or ref.dtype
            sdt = payload_dtype(stored)
            if sdt is None:
                return None
            from dumpscope.core.tensors.load import check_raw_size

            check_raw_size(ref, os.path.getsize(ref.path))
            return _map(ref.path, ref.offset, ref.shape, sdt, stored)
        if ref.storage == STORAGE_CANN and (not ref.format or ref.format in PLAIN_FORMATS):
            t = cann_tensor(ref)
            sdt = payload_dtype(t.dtype)
            if sdt is None or t.size < prod(ref.shape) * sdt.itemsize:
                return None
            return _map(ref.path, t.offset, ref.shape, sdt, t.dtype)
    except TensorLoadError:
        raise
    except Exception as exc:
        raise load_error(ref, exc) from None
    return None


def _map(path: str, offset: int, shape: tuple[int, ...], sdt: np.dtype, dtype: str) -> tuple[np.ndarray, Optional[str]]:
    """A read-only memory map of the payload, and the dtype its bits decode from (None: plain numbers)."""
    need = prod(shape) * sdt.itemsize
    if os.path.getsize(path) < offset + need:
        raise TensorLoadError(f"{path}: truncated: the payload ends past the end of the file")
    raw = np.zeros(shape, sdt) if need == 0 else np.memmap(path, dtype=sdt, mode="r", offset=offset,
                                                            shape=tuple(shape))
    return raw, (dtype if dtype in BITS_DTYPES else None)


def _decode(bits: np.ndarray, dtype: str) -> np.ndarray:
    from dumpscope.core.formats.dtypes import decode

    return decode(bits.reshape(-1).view(np.uint8), dtype, bits.size).reshape(bits.shape)


# -- device layouts: windows -----------------------------------------------------------------------

def _device_windows(ref: TensorRef):
    from dumpscope.core.formats.device_chunks import device_windows
    from dumpscope.core.formats.device_format import PLAIN_FORMATS

    if ref.storage != STORAGE_CANN or not ref.format or ref.format in PLAIN_FORMATS:
        return None
    try:
        t = cann_tensor(ref)
        sdt = payload_dtype(t.dtype)
        if sdt is None or t.size < prod(t.shape) * sdt.itemsize:
            return None
        if os.path.getsize(ref.path) < t.offset + prod(t.shape) * sdt.itemsize:
            raise TensorLoadError(f"{ref.path}: truncated: payload of {ref.io} {ref.slot} ends past the end of file")
        made = device_windows(ref.path, t.offset, t.format, t.shape, t.original_shape, sdt, t.sub_format)
    except TensorLoadError:
        raise
    except Exception as exc:
        raise load_error(ref, exc) from None
    if made is None or tuple(made[1]) != tuple(ref.shape):
        return None
    read, shape, lead = made
    if t.dtype in BITS_DTYPES:
        from dumpscope.core.formats.dtypes import decoded_numpy_dtype

        return read, shape, lead, (lambda x: _decode(np.ascontiguousarray(x), t.dtype)), \
            decoded_numpy_dtype(t.dtype), ref
    return read, shape, lead, (lambda x: x), sdt, ref


def _by_windows(read: Callable[[int, int, int], np.ndarray], shape: tuple[int, ...], lead: int,
                decode: Callable[[np.ndarray], np.ndarray], vdt: np.dtype, ref: TensorRef, index: tuple,
                limit: int) -> SliceResult:
    vshape = shape if lead == 2 else (1,) + shape
    index = index if lead == 2 else (0,) + index
    # the result's shape, and numpy's own IndexError for a bad index, from a view that holds no data
    probe = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=vshape, strides=(0,) * len(vshape))
    out_shape = tuple(probe[index].shape)
    items = _per_axis(index, vshape)
    first, second, rest = items[0], items[1], (slice(None),) + tuple(items[2:])
    sel0 = [first] if isinstance(first, int) else list(range(*first.indices(vshape[0])))
    sel1 = [second] if isinstance(second, int) else list(range(*second.indices(vshape[1])))
    span = max(1, BLOCK_BYTES // max(1, prod(vshape[2:]) * vdt.itemsize))
    total = prod(out_shape)
    pieces: list[np.ndarray] = []
    have = 0
    try:
        for a in sel0:
            for k in range(0, len(sel1), span):
                run = sel1[k:k + span]
                lo, hi = min(run), max(run) + 1
                if hi - lo > 4 * span:  # a long stride: each index read on its own
                    block = np.concatenate([decode(read(a, i, i + 1)) for i in run])
                else:
                    block = decode(read(a, lo, hi))[np.asarray(run) - lo]
                piece = np.ascontiguousarray(block[rest]).reshape(-1)
                pieces.append(piece)
                have += piece.size
                if have >= limit and total > limit:
                    break
            if have >= limit and total > limit:
                break
    except TensorLoadError:
        raise
    except (OSError, ValueError) as exc:
        raise load_error(ref, exc) from None
    values = np.concatenate(pieces) if pieces else np.zeros(0, vdt)
    values = values[:limit] if total > limit else values.reshape(out_shape)
    return SliceResult(out_shape, values.dtype, total, values, "windows")


def _per_axis(index: tuple, shape: tuple[int, ...]) -> list:
    """One non-negative int or a slice per axis: ``...`` expanded, ``None`` dropped (it only adds a
    length-1 axis, which the result's shape already has), missing trailing axes whole."""
    items = [i for i in index if i is not None]
    if any(i is Ellipsis for i in items):
        at = items.index(Ellipsis)
        items = items[:at] + [slice(None)] * (len(shape) - len(items) + 1) + items[at + 1:]
    items += [slice(None)] * (len(shape) - len(items))
    return [int(i) % n if not isinstance(i, slice) else i for i, n in zip(items, shape)]
