"""Tensor statistics in bounded memory: the numbers behind ``dumpscope stats`` and the stats pane.

Semantics follow CLI.md: ``min``/``max``/``mean``/``std`` (population, ddof=0)/``l2norm`` are taken
over the *finite* elements (``None`` when there is none); ``count``/``zeros``/``nan``/``posinf``/
``neginf`` count all elements.  Complex tensors are reduced to their magnitude ``|z|`` first (so a
complex NaN/Inf counts as NaN/+Inf of the magnitude); bool and integers are used as numbers.

Two engines, chosen by the element width:

(The record is ``stats_record``; the bucket engine, value tables and edges ``stats_bins``; the float
engine ``stats_float``; forked processes ``stats_procs``; this module chooses and drives them.)

* **Bucket engine** (every type of at most 16 bits: float16, bfloat16, float8, int8/16, uint8/16,
  bool): one ``np.bincount`` of the raw bit patterns per block gives the exact multiset of values;
  every statistic and the histogram are then computed from the 256/65536-entry value table in
  float64.  Exact, cheap, and needs no second pass.
* **Float engine** (32/64-bit floats; ints and complex magnitudes are converted to float64 per
  block): per 128K-element sub-block, ``min``/``max`` of the raw data (a non-finite min or max is
  the only trigger for the masked slow path — clean blocks are never masked or copied), the zero
  count and exponent-field sum from the ``|x|`` bits (one ``min`` of them says whether there is a
  zero to count at all), and float64 shifted sums Σ(x-c), Σ(x-c)² around the running mean — or
  around 0 when that mean is within ~rms/300 of 0, which skips the subtraction — merged with Chan's
  update (a block whose mean is far from the shift is re-centred on its own mean, so no catastrophic
  cancellation when ``|mean| >> std``); ``l2norm² = M2 + n·mean²``.  The histogram needs the finite
  range first, so it is a second pass over the data (re-iterating the chunks).  Blocks (1M
  elements) are reduced independently and merged in block order (Chan's parallel update;
  histogram counts add), so the answer does not depend on who reduced them.  Tensors of
  ``PARALLEL_MIN_ELEMS`` or more use ``stats_workers()`` workers: **forked processes**
  (:mod:`dumpscope.core.tensors.stats_procs`) when the source can be split by element range (a
  C-contiguous array or memmap, a plain file: :class:`~dumpscope.core.tensors.load.FileChunks`) and
  the process is single-threaded (the ``dumpscope`` CLI), else threads (the explorer).  Threads
  scale badly here: two threads making many short numpy calls each burn ~2x the CPU of one (GIL
  hand-offs on this kind of VM), so on 2 cores they were slower than one thread; processes share
  nothing but the page cache.  Each child sends each block's accumulator back as JSON (exact
  floats) and the parent merges them in block order: bit-identical to one thread.

Cost (1 GiB float32 memmap, warm page cache, one core, CPU time against one
``np.add.reduce(x, dtype=float64)`` = 1.0): pass 1 ~1.8 — min/max 0.5 (the first read of the
data), exponent sum and zeros 0.6 (four integer ufuncs), moments 0.8 (widening copy, row sums, row
``vecdot``: BLAS ``ddot`` on 4096-element rows, which stays on the calling thread; the mixed-type
``subtract(x32, c, dtype=float64)`` and ``einsum`` used before were ~2x slower each) — and pass 2
~1.6 (map to bins 0.5, pair keys + ``bincount`` 1.05).  That is ~3x one pass in CPU (session 6,
idle box: 0.26 + 0.25 s against 0.17-0.18 s): the 2x target holds only when two cores divide both
passes — two forked processes do (1.7-1.85x wall, ~2.0x when another job takes a core now and then);
two threads do not (~3x).  float64 data is far worse off (~8.5x in CPU, 4.8x wall with two
processes): its one numpy pass is a plain sum at memory speed (~27 GB/s warm), so even two bare
reads of the data would be 2x and every step here is 8 bytes wide.  The trade-off is kept on
purpose: exact histogram counts for exact edges and float64-accurate moments, bit-identical
whatever the number of workers, rather than a one-pass approximation.
Why there is no one-pass float histogram: exact equal-width edges over ``[min, max]`` cannot be
known before the pass that finds min and max; binning the float bits into coarse buckets during
pass 1 (the fp16 way) would cost more than pass 2 itself — a 65,536-bucket ``bincount`` of the high
16 bits is ~3x one numpy pass, and the buckets that straddle an edge still need another look at the
data.  A min/max pre-pass followed by one fused pass does the same work plus a read.  Three bin
indices per ``bincount`` key (32,768 keys) instead of two measured no faster (building the keys
costs what the shorter ``bincount`` saves).  So the histogram stays exact and costs its pass.

Histogram: ``bins`` equal-width bins over ``[min, max]`` of the finite values.  When the values
span more than :data:`LOG_SPAN` (4 orders of magnitude) — measured as ``max|x|`` over the *typical*
magnitude ``t = 2**(mean floor(log2|x|) + 0.5)`` of the non-zero values (32/64-bit data: read from
the exponent field, so a subnormal counts with the field's minimum, -127/-1023), so that a few tiny values
near zero (every large normal sample has some) do not trigger it — symmetric log bins: a geometric
grid ``g_0 = t²/max|x| … g_k = max|x|`` mirrored around zero, ``[-g_k … -g_0, g_0 … g_k]``; the
centre bin ``[-g_0, g_0)`` holds the zeros and the magnitudes below ``g_0``.  One-sided data gets a
one-sided grid (with a first bin ``[0, g_0)`` when needed).  Bins are half-open ``[e_i, e_{i+1})``
except the last, which includes its right edge; counts are exact for the edges reported.  For
32/64-bit data the equal-width bins are computed in the data's own float type by a monotone map and
the reported inner edges are that map's exact bin limits, i.e. ``linspace(min, max, bins + 1)`` up to
a few ulps (see :class:`_LinearMap`).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Iterable, Iterator, Optional, Union

import numpy as np

from dumpscope.core.tensors.stats_bins import _BUCKET_KINDS, _RAW_FLOATS, _BucketAcc
from dumpscope.core.tensors.stats_float import _FloatAcc, _ordered_map
from dumpscope.core.tensors.stats_record import TensorStats

#: Elements per internal block: big enough to amortise numpy call overhead, small enough to stay
#: in cache (the float64 work buffers are 8 bytes per element).
_BLOCK = 1 << 20

ChunkSource = Union[Iterable[np.ndarray], Callable[[], Iterable[np.ndarray]]]


#: tensors of at least this many elements are reduced by several workers at once (forked processes,
#: else threads); smaller ones are not worth a fork or a thread hand-off
PARALLEL_MIN_ELEMS = 1 << 23


def stats_workers() -> int:
    """Workers (processes, else threads) reducing one big tensor: ``DUMPSCOPE_WORKERS`` if set, else
    the cores (at most 4); 1 reduces it on the calling thread alone."""
    try:
        n = int(os.environ.get("DUMPSCOPE_WORKERS", "0") or 0)
    except ValueError:
        n = 0
    return max(1, n or min(4, os.cpu_count() or 1))


# --------------------------------------------------------------------------------------------
# chunking


def _flat_chunks(array: np.ndarray, chunk_elems: int) -> Iterator[np.ndarray]:
    """C-order 1-D pieces of ``array`` of at most ~chunk_elems elements, copying only one piece."""
    if array.ndim == 0:
        yield array.reshape(1)
        return
    if array.flags.c_contiguous:
        flat = array.reshape(-1)
        for i in range(0, flat.size, chunk_elems):
            yield flat[i : i + chunk_elems]
        return
    row = int(np.prod(array.shape[1:], dtype=np.int64))
    if row > chunk_elems and array.ndim > 1:
        for i in range(array.shape[0]):
            yield from _flat_chunks(array[i], chunk_elems)
        return
    step = max(1, chunk_elems // max(row, 1))
    for i in range(0, array.shape[0], step):
        yield np.ascontiguousarray(array[i : i + step]).reshape(-1)


def _blocks(chunks: Iterable[np.ndarray], block: int) -> Iterator[tuple[np.ndarray, int]]:
    """Split arbitrary chunks into ≤ ``block`` element 1-D pieces with their flat offset."""
    offset = 0
    for chunk in chunks:
        flat = np.asarray(chunk).reshape(-1)
        for i in range(0, flat.size, block):
            piece = flat[i : i + block]
            yield piece, offset + i
        offset += flat.size


def _logical_name(dtype: Any) -> str:
    if dtype is None:
        return ""
    if isinstance(dtype, str):
        return dtype
    return np.dtype(dtype).name


def _bucket_kind(chunk_dtype: np.dtype, logical: str) -> Optional[str]:
    """The value table to use for chunks of ``chunk_dtype`` holding ``logical`` values, if any."""
    width = 2 if logical in ("float16", "bfloat16") else 1
    if logical in _RAW_FLOATS and chunk_dtype.itemsize == width and chunk_dtype.kind in "uiVf":
        return logical  # raw bit patterns (uint16 bf16 bits, uint8 fp8 bits, ml_dtypes arrays)
    name = chunk_dtype.name
    if name in _BUCKET_KINDS:
        return name
    return None


def _run(source: ChunkSource, shape: tuple[int, ...], logical: str, block: int,
         first_bad_n: int, bins: int, read_range: Optional[ReadRange] = None) -> TensorStats:
    first = _iterate(source)
    it = iter(first)
    pieces = _blocks(it, block)
    try:
        head, off0 = next(pieces)
    except StopIteration:
        return TensorStats(count=0, zeros=0, nan=0, posinf=0, neginf=0, dtype=logical, shape=shape)
    kind = _bucket_kind(head.dtype, logical or head.dtype.name)
    if kind is not None:
        acc = _BucketAcc(kind, first_bad_n)
        acc.add(head, off0)
        for piece, off in pieces:
            acc.add(piece, off)
        return acc.finish(bins, shape, logical or kind)
    if head.dtype.kind not in "biufc":
        raise ValueError(f"cannot compute statistics of dtype {head.dtype} (logical {logical!r})")
    workers = stats_workers() if _count(shape) >= PARALLEL_MIN_ELEMS else 1
    gen = _FloatAcc(first_bad_n)
    gen.add(head, off0)
    shift = gen.mean if gen.nfin else None
    shift_rms2 = gen.sumsq / gen.nfin if gen.nfin else 0.0

    def reduce_block(piece: np.ndarray, off: int) -> _FloatAcc:
        acc = _FloatAcc(first_bad_n, shift, shift_rms2)
        acc.add(piece, off)
        return acc

    if (workers > 1 and read_range is not None and off0 == 0 and head.size == block
            and head.dtype.kind == "f" and head.dtype.itemsize in (4, 8) and _forkable()):
        if _count(shape) < PROCESS_MIN_ELEMS:  # a fork costs more than it saves; threads would cost more
            workers = 1
            forked = None
        else:
            forked = _run_forked(read_range, shape, block, gen, reduce_block, bins, workers)
        if forked is not None:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()  # the chunk generator (an open file) is not needed any more
            st, hist = forked
            st.dtype = logical or head.dtype.name
            if hist is not None:
                st.hist_edges = [float(e) for e in hist[0]]
                st.hist_counts = [int(c) for c in hist[1]]
                st.hist_log = hist[2]
            return st

    for acc in _ordered_map(reduce_block, pieces, workers):
        gen.merge(acc)
    st = gen.stats(shape, logical or head.dtype.name)
    if gen.nfin:
        again = _iterate_again(source, first)
        if again is not None:
            edges, counts, log = gen.histogram(_blocks(again, block), bins, workers)
            st.hist_edges = [float(e) for e in edges]
            st.hist_counts = [int(c) for c in counts]
            st.hist_log = log
    return st


#: float32/float64 tensors of at least this many elements are reduced in forked processes where that is
#: possible (smaller ones on the calling thread there): a fork, the children's first touches and their
#: reaping cost ~10-20 ms, which two cores win back from ~24M elements on (1 GiB float32: 268M)
PROCESS_MIN_ELEMS = 1 << 25


def _forkable() -> bool:
    from dumpscope.core.tensors.stats_procs import can_fork

    return can_fork()


#: ``read_range(start, stop)``: elements ``[start, stop)`` of the flat tensor as one 1-D array (a
#: memmap slice, or a read of that part of the file): a source that can be split by element range
ReadRange = Callable[[int, int], np.ndarray]


def _run_forked(read_range: ReadRange, shape: tuple[int, ...], block: int, gen: "_FloatAcc",
                reduce_block: Callable[[np.ndarray, int], "_FloatAcc"], bins: int,
                workers: int) -> Optional[tuple[TensorStats, Optional[tuple[np.ndarray, np.ndarray, bool]]]]:
    """Both passes of the float engine over blocks 1… in forked processes (``gen`` holds block 0);
    None when no process could be forked.  Every block is reduced exactly as on one thread and
    merged here in block order, so the answer is bit-identical to the one-thread answer."""
    from dumpscope.core.tensors.stats_procs import BlockProcs, split_ranges

    n = _count(shape)
    nblocks = -(-n // block)
    plans: dict[int, Any] = {}

    def handler(msg: dict[str, Any], b: int) -> Any:
        start = b * block
        piece = read_range(start, min(n, start + block))
        if msg["pass"] == 1:
            return reduce_block(piece, start).to_plain()
        key = id(msg)
        if key not in plans:  # one plan per phase message (the same object for all its blocks)
            plans.clear()
            plans[key] = (msg, _FloatAcc.from_plain(msg["acc"], gen.bad.limit).hist_plan(int(msg["bins"]))[2])
        return plans[key][1](piece, start).tolist()

    ranges = split_ranges(0, nblocks, workers)
    ranges[0] = (1, ranges[0][1])  # block 0 is done (pass 1) and counted here (pass 2): a block less
    procs = BlockProcs.start(handler, ranges)
    if procs is None:
        return None
    msg1 = {"pass": 1}
    with procs:
        for b, plain in procs.run(msg1):
            try:
                acc = _FloatAcc.from_plain(plain, gen.bad.limit)
            except (TypeError, ValueError, KeyError):  # a garbled result: reduce that block here
                acc = _FloatAcc.from_plain(handler(msg1, b), gen.bad.limit)
            gen.merge(acc)
        st = gen.stats(shape, "")
        if not gen.nfin:
            return st, None
        edges, log, count = gen.hist_plan(bins)
        counts = np.zeros(len(edges) - 1, dtype=np.int64)
        if count is None:
            counts[0] = gen.nfin
            return st, (edges, counts, log)
        counts += count(read_range(0, min(n, block)), 0)
        msg2 = {"pass": 2, "bins": bins, "acc": gen.to_plain()}
        plans[id(msg2)] = (msg2, count)  # this process has the plan already (the children build theirs)
        for b, part in procs.run(msg2):
            try:
                got = np.asarray(part, dtype=np.int64)
                ok = got.shape == counts.shape
            except (TypeError, ValueError, OverflowError):
                ok = False
            counts += got if ok else np.asarray(handler(msg2, b), dtype=np.int64)
        return st, (edges, counts, log)


def _count(shape: tuple[int, ...]) -> int:
    return math.prod(shape) if shape else 1


def _iterate(source: ChunkSource) -> Iterable[np.ndarray]:
    return source() if callable(source) else source


def _iterate_again(source: ChunkSource, first: Iterable[np.ndarray]) -> Optional[Iterable[np.ndarray]]:
    """A fresh pass over the chunks, or None when they were a one-shot iterator."""
    if callable(source):
        return source()
    if iter(first) is first:
        return None
    return first


# --------------------------------------------------------------------------------------------
# public API


def compute_stats(array: np.ndarray, chunk_elems: int = 1 << 22, first_bad_n: int = 10, bins: int = 32,
                  *, dtype: Optional[str] = None) -> TensorStats:
    """Statistics of ``array`` (may be a multi-GB ``np.memmap``) in bounded memory.

    ``dtype`` names the logical dtype when ``array`` holds raw bit patterns, e.g. a uint16 array of
    bfloat16 bits with ``dtype="bfloat16"`` or uint8 float8 bits with ``dtype="float8_e5m2"``;
    ml_dtypes arrays (bfloat16, float8_*) are recognised by their dtype name.  At most about
    ``chunk_elems`` elements are copied at a time (only non-contiguous arrays copy at all).
    Raises ValueError for dtypes that are not numbers (strings, objects, structured).
    """
    arr = np.asanyarray(array)
    shape = tuple(int(d) for d in arr.shape)
    logical = _logical_name(dtype) or arr.dtype.name
    chunk_elems = max(1, int(chunk_elems))
    block = min(chunk_elems, _BLOCK)
    read_range = None
    if arr.flags.c_contiguous and arr.ndim and chunk_elems % block == 0:  # blocks at multiples of block
        flat = arr.reshape(-1)
        read_range = lambda a, b: flat[a:b]  # noqa: E731  (a view: children share the mapping)
    return _run(lambda: _flat_chunks(arr, chunk_elems), shape, logical, block, first_bad_n, bins, read_range)


def compute_stats_chunks(chunks: ChunkSource, shape: tuple[int, ...], dtype: Any,
                         first_bad_n: int = 10, bins: int = 32, chunk_elems: int = 1 << 22) -> TensorStats:
    """Statistics of a tensor delivered as C-order chunks (e.g. decoded piece by piece).

    ``dtype`` is the logical dtype (numpy spelling).  Chunks may be decoded values (float32 from
    bf16, …) or raw bit patterns (uint16 chunks with ``dtype="bfloat16"``).  The generic engine
    (32/64-bit values) builds its histogram in a second pass: pass a callable returning a fresh
    iterable, or a re-iterable (list…); with a one-shot iterator the histogram is left empty.
    A callable that also has ``read_range(start, stop)`` (elements ``[start, stop)`` as one array)
    and ``chunk`` (every chunk but the last has that many elements) can be reduced in forked
    processes (see :mod:`dumpscope.core.tensors.stats_procs`).
    """
    shape = tuple(int(d) for d in shape)
    block = min(max(1, int(chunk_elems)), _BLOCK)
    read_range = getattr(chunks, "read_range", None)  # a source split by element range (a file)
    if read_range is not None and (not getattr(chunks, "chunk", 0) or getattr(chunks, "chunk") % block):
        read_range = None  # its chunks would cut blocks elsewhere than at multiples of block
    return _run(chunks, shape, _logical_name(dtype), block, first_bad_n, bins, read_range)
