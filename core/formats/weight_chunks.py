"""Weight device layouts (FRACTAL_Z, FRACTAL_Z_3D, C1HWNCoC0) read in logical C-order chunks, a
bounded window of the file at a time (issue 30: they were loaded whole for stats, convert, slices).

Their logical order does not follow an outer device axis: logical NCHW puts the output channel N
outermost, while the device keeps it inside each (C1, H, W) block (FRACTAL_Z ``x[c1, h, w, n, c0]``;
FRACTAL_Z_3D ``x[d, c1, h, w, n, c0]``; C1HWNCoC0 ``x[c1, h, w, n, c0, c0]``, the diagonal holding
the values).  So every logical row is a strided walk over the whole file.  Each layout is written
here as that walk: the logical tensor is ``V[n, c1, c0, *spatial]`` (channel ``c = c1*C0 + c0``),
element ``base + n*sn + c1*s1 + c0*s0 + Σ spatial·strides`` of the device buffer, of which channels
``[off, off + keep)`` are kept (C is padded to whole C0 blocks; a grouped FRACTAL_Z puts each
group's channels ``e*Cin`` into its block, so ``off`` need not be 0).

A chunk is a box of ``V`` in C order (whole rows, else whole C0 blocks of one row, else channels,
else spatial rows) of at most ``chunk_bytes`` (padding included).  A box is filled from windows of
the file of at most ``chunk_bytes``: split along its largest stride until a window holds it.  A
window whose needed elements are dense enough is read (``readinto``); a sparse one (one row of many:
``N`` elements apart) is memory-mapped for that copy only and unmapped after, so the page faults touch
only what is needed and the mapping never outlives a window (the callers check the file's size
first; a file cut short by another process while a window of it is mapped would end this one, the
risk the explorer's memory-mapped plain slices already take).  Memory stays about three chunks (the box,
its kept channels, one window) on every shape; the cost is a pass over the file per chunk of rows
(a 2 GiB weight of large rows: about 64 passes from the page cache), the price of logical order
from a transposed layout.

Chunks hold the stored element type (raw bits for bfloat16/float8), as ``device_chunks`` gives them.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from itertools import product
from math import prod
from typing import Iterator, Optional

import numpy as np

from dumpscope.core.formats.device_format import (ceil_div, fit_c1hwncoc0, fit_fractal_z, fit_fractal_z_3d,
                                                  grouped_fz_params)

#: a window is read whole when at least this share of its bytes is needed (else memory-mapped)
DENSE = 1 / 8
#: windows this small are read whole whatever their density (a map costs more than the read)
SMALL_WINDOW = 1 << 20


class WeightChunkError(ValueError):
    """The file ends before the device tensor does (a one-line reason; ``device_chunks`` raises the
    same for the other layouts)."""


@dataclass(frozen=True)
class Part:
    """Logical rows ``[row0, row0 + rows)`` as the strided view ``V[n, c1, c0, *spatial]`` of the
    device buffer (element units); channels ``[off, off + keep)`` of ``c1n * c0`` are kept."""

    row0: int
    rows: int
    base: int
    sn: int
    s1: int
    s0: int
    c0: int
    off: int
    keep: int
    spatial: tuple[int, ...]
    sstrides: tuple[int, ...]

    @property
    def c1n(self) -> int:
        return ceil_div(self.off + self.keep, self.c0)

    def shape(self) -> tuple[int, ...]:
        return (self.rows, self.c1n, self.c0) + self.spatial

    def strides(self) -> tuple[int, ...]:
        return (self.sn, self.s1, self.s0) + self.sstrides


def weight_parts(kind: str, dev: tuple[int, ...], orig: tuple[int, ...],
                 groups: int = 1) -> Optional[tuple[list[Part], tuple[int, ...]]]:
    """The parts of a weight layout and its canonical logical dims (NCHW / NCDHW), or None when the
    shapes do not fit (``to_logical`` names the mismatch) or the layout is not one of these."""
    if kind == "FRACTAL_Z" and len(dev) == 4 and orig:
        c1hw, n1, n0, c0 = dev
        if groups > 1:
            return _grouped_fz(dev, orig, groups)
        dims = fit_fractal_z(orig, "NCHW", dev)
        if dims is None:
            return None
        n, c, h, w = dims
        blk = n1 * n0 * c0
        return [Part(0, n, 0, c0, h * w * blk, 1, c0, 0, c, (h, w), (w * blk, blk))], dims
    if kind == "FRACTAL_Z_3D" and len(dev) == 4 and orig:
        dc1hw, n1, n0, c0 = dev
        dims = fit_fractal_z_3d(orig, "NCDHW", dev)
        if dims is None:
            return None
        n, c, d, h, w = dims
        c1 = dc1hw // (d * h * w)
        blk = n1 * n0 * c0
        return [Part(0, n, 0, c0, h * w * blk, 1, c0, 0, c, (d, h, w), (c1 * h * w * blk, w * blk, blk))], dims
    if kind == "C1HWNCoC0" and len(dev) == 6 and dev[4] == dev[5]:
        c1, h, w, nn, _, c0 = dev
        dims = fit_c1hwncoc0(orig, "NCHW", dev)
        if dims is None:
            return None
        sq = c0 * c0
        return [Part(0, nn, 0, sq, h * w * nn * sq, c0 + 1, c0, 0, dims[1], (h, w), (w * nn * sq, nn * sq))], dims
    return None


def _grouped_fz(dev: tuple[int, ...], orig: tuple[int, ...], groups: int):
    """A grouped FRACTAL_Z: one part per group (its ``Cout`` rows), GE's block-diagonal packing of
    ``e_mult`` groups per cube (``device_format.grouped_fz_params``)."""
    from dumpscope.core.formats.device_format import logical_candidates

    n, c, h, w = logical_candidates(orig, "NCHW", "NCHW")[0]
    c0, n0 = dev[3], dev[2]
    if n % groups or h * w == 0:
        return None
    cout = n // groups
    e_mult, cin_opt, cout_opt, g_blocks = grouped_fz_params(cout, c, groups, c0, n0)
    c1 = cin_opt // c0
    if tuple(dev) != (g_blocks * c1 * h * w, cout_opt // n0, n0, c0):
        return None
    blk = cout_opt * c0
    s1 = h * w * blk
    parts = []
    for g in range(groups):
        e = g % e_mult
        first = e * c  # the group's first channel in its cube
        base = (g // e_mult) * c1 * s1 + (first // c0) * s1 + e * cout * c0
        parts.append(Part(g * cout, cout, base, c0, s1, 1, c0, first % c0, c, (h, w), (w * blk, blk)))
    return parts, (n, c, h, w)


# -- reading a box of V ------------------------------------------------------------------------------

class Source:
    """The device tensor's file: boxes of it filled from bounded windows."""

    def __init__(self, path: str, offset: int, sdt: np.dtype, total: int, window_bytes: int) -> None:
        self.path, self.offset, self.sdt, self.total = path, offset, np.dtype(sdt), total
        self.window = max(1, window_bytes // self.sdt.itemsize)  # elements
        self.fh = open(path, "rb")

    def close(self) -> None:
        self.fh.close()

    def fill(self, out: np.ndarray, base: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
        """``out[...] = buffer[base + Σ i·strides]`` over ``shape``, one window at a time."""
        if 0 in shape:
            return
        span = 1 + sum((e - 1) * s for e, s in zip(shape, strides))
        if span <= self.window:
            self._leaf(out, base, span, shape, strides)
            return
        ax = max((i for i, e in enumerate(shape) if e > 1), key=lambda i: strides[i])
        rest = span - (shape[ax] - 1) * strides[ax]
        group = max(1, (self.window - rest) // strides[ax] + 1) if rest <= self.window else 1
        for i0 in range(0, shape[ax], group):
            g = min(group, shape[ax] - i0)
            sub = shape[:ax] + (g,) + shape[ax + 1:]
            index = (slice(None),) * ax + (slice(i0, i0 + g),)
            self.fill(out[index], base + i0 * strides[ax], sub, strides)

    def _leaf(self, out: np.ndarray, base: int, span: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
        isz = self.sdt.itemsize
        if base + span > self.total:
            raise WeightChunkError(f"{self.path}: device tensor of {self.total} elements: element {base + span - 1} "
                                   "lies past its end")
        bstrides = tuple(s * isz for s in strides)
        need = prod(shape)
        if span * isz <= SMALL_WINDOW or need >= span * DENSE:
            buf = np.empty(span, self.sdt)
            self.fh.seek(self.offset + base * isz)
            got = self.fh.readinto(memoryview(buf.view(np.uint8)))
            if got != span * isz:
                raise WeightChunkError(f"{self.path}: truncated: the file ends {base + got // isz} elements into a "
                                       f"device tensor of {self.total}")
            out[...] = np.lib.stride_tricks.as_strided(buf, shape=shape, strides=bstrides)
            return
        start = self.offset + base * isz
        aligned = start - start % mmap.ALLOCATIONGRANULARITY
        mm = mmap.mmap(self.fh.fileno(), start - aligned + span * isz, offset=aligned, access=mmap.ACCESS_READ)
        try:
            view = np.ndarray(shape, self.sdt, buffer=mm, offset=start - aligned, strides=bstrides)
            out[...] = view
            del view
        finally:
            mm.close()


# -- chunks in logical order --------------------------------------------------------------------------

def part_chunks(src: Source, part: Part, chunk_elems: int) -> Iterator[np.ndarray]:
    """The part's logical elements in C order, boxes of at most ``chunk_elems`` (padding included)."""
    shape, strides = part.shape(), part.strides()
    k = next(i for i in range(len(shape)) if prod(shape[i + 1:]) <= chunk_elems)
    inner = prod(shape[k + 1:])
    g = max(1, chunk_elems // inner)
    lo_keep, hi_keep, c0 = part.off, part.off + part.keep, part.c0
    for prefix in product(*(range(d) for d in shape[:k])):
        if k >= 3 and not lo_keep <= prefix[1] * c0 + prefix[2] < hi_keep:
            continue  # a padding channel
        for lo in range(0, shape[k], g):
            hi = min(lo + g, shape[k])
            if k == 2:  # channels lo:hi of C0 block prefix[1]
                lo, hi = max(lo, lo_keep - prefix[1] * c0), min(hi, hi_keep - prefix[1] * c0)
                if lo >= hi:
                    continue
            box = (hi - lo,) + shape[k + 1:]
            base = part.base + sum(i * s for i, s in zip(prefix, strides)) + lo * strides[k]
            out = np.empty(box, src.sdt)
            src.fill(out, base, box, strides[k:])
            if k == 0:  # whole rows: (rows, C1, C0, S) -> the kept channels
                out = out.reshape(hi - lo, part.c1n * c0, -1)[:, lo_keep:hi_keep]
            elif k == 1:  # whole C0 blocks lo:hi of one row
                a, b = max(lo_keep, lo * c0), min(hi_keep, hi * c0)
                if a >= b:
                    continue
                out = out.reshape((hi - lo) * c0, -1)[a - lo * c0:b - lo * c0]
            yield np.ascontiguousarray(out).reshape(-1)


def weight_chunks(path: str, offset: int, parts: list[Part], total: int, sdt: np.dtype,
                  chunk_bytes: int) -> Iterator[np.ndarray]:
    """Every part's chunks, in row order (the parts are consecutive rows)."""
    src = Source(path, offset, sdt, total, chunk_bytes)
    try:
        elems = max(1, chunk_bytes // src.sdt.itemsize)
        for part in parts:
            yield from part_chunks(src, part, elems)
    finally:
        src.close()


def weight_window(path: str, offset: int, parts: list[Part], total: int, sdt: np.dtype, chunk_bytes: int,
                  a: int, lo: int, hi: int) -> np.ndarray:
    """The logical block ``x[a, lo:hi]`` (row ``a``, channels ``lo:hi``, every spatial element), read
    one C0 block at a time so that no padding channel is read."""
    part = next(p for p in parts if p.row0 <= a < p.row0 + p.rows)
    src = Source(path, offset, sdt, total, chunk_bytes)
    try:
        out = np.empty((hi - lo,) + part.spatial, src.sdt)
        strides = part.strides()
        c0 = part.c0
        at = lo
        while at < hi:
            m = part.off + at  # position in the part's padded channels
            k, j = divmod(m, c0)
            take = min(c0 - j, hi - at)
            base = part.base + (a - part.row0) * part.sn + k * part.s1 + j * part.s0
            src.fill(out[at - lo:at - lo + take], base, (take,) + part.spatial, (strides[2],) + strides[3:])
            at += take
        return out
    finally:
        src.close()

