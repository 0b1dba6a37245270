"""Device-layout tensors read in logical C-order chunks, a bounded slab of the file at a time.

``device_format.to_logical`` needs the whole device array (a 2 GiB NC1HWC0 fp16 tensor peaked at
4.2 GB in ``stats``).  The logical order of the two common device layouts follows their outer
axes, so a chunk of logical rows needs only a slab of the file:

* NC1HWC0 -> NCHW: logical channels ``[k*C0, (k+1)*C0)`` of image ``n`` are the contiguous device
  slab ``x[n, k]`` (H, W, C0) transposed; several slabs (or whole images) make one chunk.
* FRACTAL_NZ -> ND: logical rows ``[j*H0, (j+1)*H0)`` of matrix ``b`` are ``x[b, :, j]``: one
  contiguous piece per W1 block; several row blocks make one chunk.

Chunks are bounded in bytes, not in planes (issue 30: a (1,16,8192,8192) float16 NC1HWC0 tensor is
one C1 plane of 2 GiB, and stats peaked at 4.2 GB).  A plane larger than the chunk is read a band
of pixels at a time, once per C0 channel (logical order puts all of channel 0 first); a FRACTAL_NZ
row block larger than the chunk (one huge fractal row) is read a group of fractals at a time, once
per row of the block.  Reading the same bytes C0 (H0) times from the page cache costs time on those
rare shapes; memory stays about two chunks on every shape.

* NDC1HWC0 -> NCDHW: logical channels ``[k*C0, (k+1)*C0)`` of image ``n`` are the D planes
  ``x[n, :, k]`` (strided in the file): read together when they fit in a chunk.

* FRACTAL_Z (grouped too), FRACTAL_Z_3D, C1HWNCoC0 (weights): their logical order does not follow
  an outer device axis; ``core.formats.weight_chunks`` walks them as strided views, a bounded
  window of the file at a time.

Chunks hold the stored element type (raw bit patterns for bfloat16/float8: callers decode or
hand them to the stats engine, which reads bits).  Anything else returns ``None`` and the caller
loads the tensor whole: other device formats, and a non-default ``target`` layout (NHWC…), whose
transpose moves the channel axis last so a logical row needs every slab of its image.

:func:`device_windows` reads one logical block ``x[a, lo:hi]`` for a slice (the explorer's pane).
"""

from __future__ import annotations

from math import prod
from typing import Callable, Iterable, Iterator, Optional, Sequence

import numpy as np

from dumpscope.core.formats.device_format import logical_candidates, ceil_div, conversion_kind, canonical_format
from dumpscope.core.formats.weight_chunks import weight_chunks, weight_parts, weight_window

#: bytes of device data read per chunk (the converted copy is the same size again)
CHUNK_BYTES = 32 << 20

ChunkMaker = Callable[[], Iterable[np.ndarray]]


class DeviceChunkError(ValueError):
    """The file ends before the device tensor does (a one-line reason)."""


def device_chunks(path: str, offset: int, fmt: str, device_shape: Sequence[int], original_shape: Sequence[int],
                  sdt: np.dtype, target: Optional[str] = None, chunk_bytes: int = CHUNK_BYTES,
                  sub_format: int = 0) -> Optional[tuple[ChunkMaker, tuple[int, ...]]]:
    """``(make_chunks, logical shape)`` for a streamable device layout, else ``None``
    (``sub_format``: a FRACTAL_Z weight's group count, as ``to_logical`` takes it)."""
    dev = tuple(int(d) for d in device_shape)
    orig = tuple(int(d) for d in original_shape)
    if target or any(d < 0 for d in dev + orig) or prod(dev) == 0:
        return None
    kind = conversion_kind(canonical_format(fmt))
    sdt = np.dtype(sdt)
    if kind in ("FRACTAL_Z", "FRACTAL_Z_3D", "C1HWNCoC0"):
        made = weight_parts(kind, dev, orig, int(sub_format) if kind == "FRACTAL_Z" and sub_format else 1)
        if made is None:
            return None  # to_logical names the mismatch
        parts, dims = made
        return (lambda: weight_chunks(path, offset, parts, prod(dev), sdt, chunk_bytes)), orig or dims
    if kind == "NC1HWC0" and len(dev) == 5:
        n, c1, h, w, c0 = dev
        c = c1 * c0
        if orig:
            dims = next((d for d in logical_candidates(orig, "NCHW", "NCHW")
                         if d[0] == n and d[2] == h and d[3] == w and ceil_div(d[1], c0) == c1), None)
            if dims is None:
                return None  # to_logical names the mismatch
            c = dims[1]
        shape = orig or (n, c, h, w)
        return (lambda: _nc1hwc0_chunks(path, offset, dev, c, sdt, chunk_bytes)), shape
    if kind == "NDC1HWC0" and len(dev) == 6:
        n, d, c1, h, w, c0 = dev
        c = c1 * c0
        if orig:
            dims = next((q for q in logical_candidates(orig, "NCDHW", "NCDHW")
                         if q[0] == n and q[2] == d and q[3] == h and q[4] == w and ceil_div(q[1], c0) == c1), None)
            if dims is None:
                return None  # to_logical names the mismatch
            c = dims[1]
        shape = orig or (n, c, d, h, w)
        return (lambda: _ndc1hwc0_chunks(path, offset, dev, c, sdt, chunk_bytes)), shape
    if kind == "FRACTAL_NZ" and len(dev) >= 4:
        *batch, w1, h1, h0, w0 = dev
        b = prod(batch)
        if orig:
            hh, ww = (1, orig[0]) if len(orig) == 1 else (orig[-2], orig[-1])
            ob = prod(orig[:-2]) if len(orig) > 2 else 1
            if ob != b or ceil_div(ww, w0) != w1 or ceil_div(hh, h0) != h1:
                return None
        else:
            hh, ww = h1 * h0, w1 * w0
        shape = orig or tuple(batch) + (hh, ww)
        return (lambda: _nz_chunks(path, offset, (b, w1, h1, h0, w0), hh, ww, sdt, chunk_bytes)), shape
    return None


def _reader(path: str, offset: int, sdt: np.dtype, total: int):
    fh = open(path, "rb")

    def read(start: int, count: int, out: Optional[np.ndarray] = None) -> np.ndarray:
        """``count`` elements from element ``start`` of the device tensor."""
        arr = np.empty(count, sdt) if out is None else out
        fh.seek(offset + start * sdt.itemsize)
        got = fh.readinto(memoryview(arr.reshape(-1).view(np.uint8)))
        if got != count * sdt.itemsize:
            raise DeviceChunkError(f"{path}: truncated: the file ends {start + got // sdt.itemsize} elements "
                                   f"into a device tensor of {total}")
        return arr

    return fh, read


def _whole_units(read: Callable[..., np.ndarray], count: int, unit: int, per: int,
                 convert: Callable[[np.ndarray, int], np.ndarray]) -> Iterator[np.ndarray]:
    """``per`` whole outer units (images, matrices) of ``unit`` stored elements at a time, each run
    through ``convert(stored, units)`` to its logical elements."""
    for u0 in range(0, count, per):
        nb = min(per, count - u0)
        yield convert(read(u0 * unit, nb * unit), nb)


def _nc1hwc0_chunks(path: str, offset: int, dev: tuple[int, ...], c: int, sdt: np.dtype,
                    chunk_bytes: int) -> Iterator[np.ndarray]:
    n, c1, h, w, c0 = dev
    slab = h * w * c0  # one (n, c1) slab
    image = c1 * slab
    fh, read = _reader(path, offset, sdt, n * image)
    with fh:
        if image * sdt.itemsize <= chunk_bytes:  # whole images per chunk
            per = chunk_bytes // max(1, image * sdt.itemsize)
            yield from _whole_units(read, n, image, per, lambda x, nb: x.reshape(nb, c1, h, w, c0).transpose(
                0, 1, 4, 2, 3).reshape(nb, c1 * c0, h, w)[:, :c].reshape(-1))
            return
        if slab * sdt.itemsize > chunk_bytes:  # one plane is bigger than a chunk: bands of pixels
            yield from _nc1hwc0_bands(read, dev, c, sdt, chunk_bytes)
            return
        per = max(1, chunk_bytes // max(1, slab * sdt.itemsize))
        for i in range(n):
            for k0 in range(0, c1, per):
                kb = min(per, c1 - k0)
                x = read(i * image + k0 * slab, kb * slab).reshape(kb, h, w, c0)
                keep = min(c, (k0 + kb) * c0) - k0 * c0
                if keep <= 0:
                    break
                yield x.transpose(0, 3, 1, 2).reshape(kb * c0, h, w)[:keep].reshape(-1)


def _ndc1hwc0_chunks(path: str, offset: int, dev: tuple[int, ...], c: int, sdt: np.dtype,
                     chunk_bytes: int) -> Iterator[np.ndarray]:
    """NDC1HWC0 -> NCDHW: logical channels ``[k*C0, (k+1)*C0)`` of image ``n`` are the D planes
    ``x[n, :, k]`` (H*W pixels of C0 channels, D planes apart in the file).  When the D planes fit
    in a chunk they are read together, else each channel is taken a band of pixels at a time."""
    n, d, c1, h, w, c0 = dev
    pixels = h * w
    plane = pixels * c0
    fh, read = _reader(path, offset, sdt, n * d * c1 * plane)
    with fh:
        together = d * plane * sdt.itemsize <= chunk_bytes
        band = max(1, chunk_bytes // max(1, c0 * sdt.itemsize))  # pixels per read otherwise
        buf = np.empty(d * plane if together else min(band, pixels) * c0, sdt)
        for i in range(n):
            for k in range(c1):
                keep = min(c0, c - k * c0)
                if keep <= 0:
                    break
                if together:
                    x = buf.reshape(d, plane)
                    for dd in range(d):
                        read(((i * d + dd) * c1 + k) * plane, plane, x[dd])
                    yield x.reshape(d, pixels, c0).transpose(2, 0, 1)[:keep].reshape(-1)
                    continue
                for ci in range(keep):
                    for dd in range(d):
                        for p0 in range(0, pixels, band):
                            m = min(band, pixels - p0)
                            x = read(((i * d + dd) * c1 + k) * plane + p0 * c0, m * c0, buf[:m * c0])
                            yield x.reshape(m, c0)[:, ci].copy()


def _nz_chunks(path: str, offset: int, dev: tuple[int, int, int, int, int], hh: int, ww: int, sdt: np.dtype,
               chunk_bytes: int) -> Iterator[np.ndarray]:
    b, w1, h1, h0, w0 = dev
    block = h0 * w0  # one (w1, h1) fractal
    matrix = w1 * h1 * block
    fh, read = _reader(path, offset, sdt, b * matrix)
    with fh:
        if matrix * sdt.itemsize <= chunk_bytes:  # whole matrices per chunk
            per = chunk_bytes // max(1, matrix * sdt.itemsize)
            yield from _whole_units(read, b, matrix, per, lambda x, nb: x.reshape(nb, w1, h1, h0, w0).transpose(
                0, 2, 3, 1, 4).reshape(nb, h1 * h0, w1 * w0)[:, :hh, :ww].reshape(-1))
            return
        if w1 * block * sdt.itemsize > chunk_bytes:  # one row block is bigger than a chunk
            yield from _nz_row_pieces(read, dev, hh, ww, sdt, chunk_bytes)
            return
        rows = max(1, chunk_bytes // max(1, w1 * block * sdt.itemsize))  # row blocks per chunk
        for i in range(b):
            for j0 in range(0, h1, rows):
                jb = min(rows, h1 - j0)
                x = np.empty((w1, jb, h0, w0), sdt)
                for k in range(w1):  # x[i, k, j0:j0+jb] is contiguous in the file
                    read(i * matrix + (k * h1 + j0) * block, jb * block, x[k])
                keep = min(hh, (j0 + jb) * h0) - j0 * h0
                if keep <= 0:
                    break
                yield x.transpose(1, 2, 0, 3).reshape(jb * h0, w1 * w0)[:keep, :ww].reshape(-1)


def _nc1hwc0_bands(read: Callable[..., np.ndarray], dev: tuple[int, ...], c: int, sdt: np.dtype,
                   chunk_bytes: int) -> Iterator[np.ndarray]:
    """NC1HWC0 planes (``x[n, k]``: H*W pixels of C0 channels) bigger than a chunk: for each logical
    channel, bands of whole pixels (at most ``chunk_bytes``) are read and that channel taken out."""
    n, c1, h, w, c0 = dev
    pixels = h * w
    slab = pixels * c0
    band = max(1, chunk_bytes // max(1, c0 * sdt.itemsize))  # pixels per read
    buf = np.empty(min(band, pixels) * c0, sdt)
    for i in range(n):
        for k in range(c1):
            for ci in range(min(c0, c - k * c0)):
                for p0 in range(0, pixels, band):
                    m = min(band, pixels - p0)
                    x = read((i * c1 + k) * slab + p0 * c0, m * c0, buf[:m * c0])
                    yield x.reshape(m, c0)[:, ci].copy()


def _nz_row_pieces(read: Callable[..., np.ndarray], dev: tuple[int, int, int, int, int], hh: int, ww: int,
                   sdt: np.dtype, chunk_bytes: int) -> Iterator[np.ndarray]:
    """FRACTAL_NZ row blocks (``x[b, :, j]``: W1 fractals) bigger than a chunk: each logical row
    is given a group of fractals at a time.  A group is read as one span of the file when its
    fractals of every row block fit in a chunk (``x[b, k0:k1]``), else a fractal at a time."""
    b, w1, h1, h0, w0 = dev
    block = h0 * w0
    matrix = w1 * h1 * block
    span = h1 * block * sdt.itemsize  # the bytes of one fractal column (every row block)
    whole = span <= chunk_bytes
    group = max(1, chunk_bytes // (span if whole else block * sdt.itemsize))
    buf = np.empty(min(group, w1) * (h1 if whole else 1) * block, sdt)
    for i in range(b):
        for j in range(h1):
            for r in range(min(h0, hh - j * h0)):
                for k0 in range(0, w1, group):
                    g = min(group, w1 - k0)
                    if whole:
                        x = read(i * matrix + k0 * h1 * block, g * h1 * block, buf[:g * h1 * block])
                        piece = x.reshape(g, h1, h0, w0)[:, j, r, :]
                    else:
                        x = buf[:g * block].reshape(g, h0, w0)
                        for k in range(g):
                            read(i * matrix + ((k0 + k) * h1 + j) * block, block, x[k].reshape(-1))
                        piece = x[:, r, :]
                    cols = min(g * w0, ww - k0 * w0)
                    if cols > 0:
                        yield piece.reshape(-1)[:cols].copy()


# ----------------------------------------------------------------------------- windows (slices)

#: ``read(a, lo, hi)``: the logical block ``x[a, lo:hi]``, stored element type
WindowReader = Callable[[int, int, int], np.ndarray]


def device_windows(path: str, offset: int, fmt: str, device_shape: Sequence[int], original_shape: Sequence[int],
                   sdt: np.dtype, sub_format: int = 0) -> Optional[tuple[WindowReader, tuple[int, ...], int]]:
    """``(read, logical shape, lead)`` for slicing a device-layout tensor, else ``None``.

    ``read(a, lo, hi)`` returns the logical block ``x[a, lo:hi]`` and reads only the slabs that hold
    it.  ``lead`` is 2 when ``a`` indexes the first logical axis and ``lo:hi`` the second (NC1HWC0 ->
    NCHW: image, channels; batched FRACTAL_NZ: matrix, rows), 1 when there is no axis before the
    blocked one (a 2-D FRACTAL_NZ matrix: ``a`` is 0, ``lo:hi`` are rows, all columns).  Weights
    (FRACTAL_Z, FRACTAL_Z_3D, C1HWNCoC0 -> NCHW / NCDHW): ``a`` is the output channel, ``lo:hi`` the
    input channels; a short original shape (``[N, C]``, ``[C]``) is indexed as its 4-D expansion.
    """
    made = device_chunks(path, offset, fmt, device_shape, original_shape, sdt, sub_format=sub_format)
    if made is None:
        return None
    shape = tuple(made[1])
    dev = tuple(int(d) for d in device_shape)
    sdt = np.dtype(sdt)
    kind = conversion_kind(canonical_format(fmt))
    if kind in ("FRACTAL_Z", "FRACTAL_Z_3D", "C1HWNCoC0"):
        return _weight_windows(path, offset, kind, dev, shape, sdt, sub_format)
    if kind == "NC1HWC0" and len(shape) == 4:
        n, c1, h, w, c0 = dev
        slab = h * w * c0

        def read_nc(a: int, lo: int, hi: int) -> np.ndarray:
            k0, k1 = lo // c0, (hi - 1) // c0 + 1
            fh, read = _reader(path, offset, sdt, n * c1 * slab)
            with fh:
                if (k1 - k0) * slab * sdt.itemsize <= CHUNK_BYTES:
                    x = read((a * c1 + k0) * slab, (k1 - k0) * slab).reshape(k1 - k0, h, w, c0)
                    return x.transpose(0, 3, 1, 2).reshape((k1 - k0) * c0, h, w)[lo - k0 * c0:hi - k0 * c0]
                # planes bigger than a chunk: the block itself, filled a band of pixels at a time
                out = np.empty((hi - lo, h * w), sdt)
                band = max(1, CHUNK_BYTES // (c0 * sdt.itemsize))
                for k in range(k0, k1):
                    c_lo, c_hi = max(lo, k * c0), min(hi, (k + 1) * c0)
                    for p0 in range(0, h * w, band):
                        m = min(band, h * w - p0)
                        x = read((a * c1 + k) * slab + p0 * c0, m * c0).reshape(m, c0)
                        out[c_lo - lo:c_hi - lo, p0:p0 + m] = x[:, c_lo - k * c0:c_hi - k * c0].T
                return out.reshape(hi - lo, h, w)

        return read_nc, shape, 2
    if kind == "FRACTAL_NZ" and len(shape) in (2, 3) and len(dev) == len(shape) + 2:
        *batch, w1, h1, h0, w0 = dev
        ww = shape[-1]
        block = h0 * w0
        matrix = w1 * h1 * block

        def read_nz(a: int, lo: int, hi: int) -> np.ndarray:
            j0, j1 = lo // h0, (hi - 1) // h0 + 1
            x = np.empty((w1, j1 - j0, h0, w0), sdt)
            fh, read = _reader(path, offset, sdt, prod(batch) * matrix)
            with fh:
                for k in range(w1):  # x[a, k, j0:j1] is contiguous in the file
                    read(a * matrix + (k * h1 + j0) * block, (j1 - j0) * block, x[k])
            rows = x.transpose(1, 2, 0, 3).reshape((j1 - j0) * h0, w1 * w0)
            return rows[lo - j0 * h0:hi - j0 * h0, :ww]

        return read_nz, shape, 2 if len(shape) == 3 else 1
    return None


def _weight_windows(path: str, offset: int, kind: str, dev: tuple[int, ...], shape: tuple[int, ...], sdt: np.dtype,
                    sub_format: int) -> Optional[tuple[WindowReader, tuple[int, ...], int]]:
    made = weight_parts(kind, dev, shape, int(sub_format) if kind == "FRACTAL_Z" and sub_format else 1)
    if made is None:
        return None
    parts, dims = made
    rest = prod(dims[2:])
    if len(shape) >= 2 and shape[:2] == dims[:2]:  # x[a, lo:hi] is canon[a, lo:hi], spatial axes reshaped
        lead = 2
    elif len(shape) == 1 and dims[0] == 1 and rest == 1:  # a [C] vector stored as (1, C, 1, 1)
        lead = 1
    else:
        return None

    def read_w(a: int, lo: int, hi: int) -> np.ndarray:
        block = weight_window(path, offset, parts, prod(dev), sdt, CHUNK_BYTES, a, lo, hi)
        return block.reshape((hi - lo,) + shape[2:]) if lead == 2 else block.reshape(hi - lo)

    return read_w, shape, lead
