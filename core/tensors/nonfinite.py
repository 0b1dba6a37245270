"""Count NaN / +Inf / -Inf of a tensor, and where the first one is: the overflow scan's kernel.

Nothing else is computed (no histogram, no moments): an overflow scan only needs to know whether
an output went non-finite.  Each tensor's bytes are read once, in chunks (bounded memory), as raw
bit patterns where that is cheaper than decoding (float16, bfloat16, float8).  Integer and bool
tensors cannot hold NaN/Inf and are not read at all.  A device-layout tensor (NC1HWC0, FRACTAL_NZ…)
is counted on its stored buffer first: its logical elements are a subset, so a clean buffer is a
clean tensor; only a buffer with non-finite values is decoded to count the logical elements
exactly (padding may hold garbage) and to give the first bad logical index.

``scan_batch`` is the process-pool entry: plain tuples in, plain tuples out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from dumpscope.core.formats.shapes import element_count
from dumpscope.core.formats.npy_header import read_array_header

CHUNK_ELEMS = 1 << 22

#: stored dtypes counted from their bit patterns: (unsigned view, exponent mask, mantissa mask, sign bit)
_BITS: dict[str, tuple[Any, int, int, int]] = {
    "float16": (np.uint16, 0x7C00, 0x03FF, 0x8000),
    "bfloat16": (np.uint16, 0x7F80, 0x007F, 0x8000),
    "float8_e5m2": (np.uint8, 0x7C, 0x03, 0x80),
}
_NATIVE = {"float32": np.dtype("<f4"), "float64": np.dtype("<f8")}
#: float types that cannot be counted from bits here: decoded, then counted
_NO_SPECIALS = {"float6_e3m2fn", "float6_e2m3fn", "float4_e2m1fn", "float4_e1m2", "hifloat4_scale"}


@dataclass(slots=True)
class Count:
    """Non-finite counts of one tensor; ``first_bad``: flat index of the first one in the logical tensor."""

    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    first_bad: Optional[int] = None

    @property
    def bad(self) -> int:
        return self.nan + self.posinf + self.neginf

    def add(self, other: "Count", offset: int = 0) -> None:
        if self.first_bad is None and other.first_bad is not None:
            self.first_bad = other.first_bad + offset
        self.nan += other.nan
        self.posinf += other.posinf
        self.neginf += other.neginf


def may_hold_nonfinite(dtype: str) -> bool:
    """Only floating types (and complex) can hold NaN/Inf."""
    d = (dtype or "").lower()
    return (d.startswith(("float", "bfloat", "hifloat", "complex")) or d in ("half", "double")) \
        and d not in _NO_SPECIALS


def count_block(block: np.ndarray, stored: str) -> Count:
    """Counts of one block of stored values (``stored``: the stored dtype name)."""
    bits = _BITS.get(stored)
    if bits is not None:
        _view, exp, man, sign = bits
        special = (block & exp) == exp
        if not special.any():
            return Count()
        nanm = special & ((block & man) != 0)
        infm = special & ~nanm
        neg = int(np.count_nonzero(infm & ((block & sign) != 0)))
        first = int(np.argmax(special))
        return Count(int(np.count_nonzero(nanm)), int(np.count_nonzero(infm)) - neg, neg, first)
    if stored == "float8_e4m3fn":  # no Inf; NaN is S.1111.111
        nanm = (block & 0x7F) == 0x7F
        n = int(np.count_nonzero(nanm))
        return Count(n, 0, 0, int(np.argmax(nanm)) if n else None)
    if stored == "float8_e8m0fnu":  # no Inf; NaN is 0xFF
        nanm = block == 0xFF
        n = int(np.count_nonzero(nanm))
        return Count(n, 0, 0, int(np.argmax(nanm)) if n else None)
    # native floats, and decoded values of anything ("decoded")
    fin = np.isfinite(block)
    if fin.all():
        return Count()
    bad = ~fin
    nan = int(np.count_nonzero(np.isnan(block)))
    pos = int(np.count_nonzero(np.isposinf(block.real if np.iscomplexobj(block) else block)))
    return Count(nan, pos, int(np.count_nonzero(bad)) - nan - pos, int(np.argmax(bad)))


def _stored_numpy(stored: str) -> Optional[np.dtype]:
    bits = _BITS.get(stored)
    if bits is not None:
        return np.dtype(bits[0])
    if stored in ("float8_e4m3fn", "float8_e8m0fnu"):
        return np.dtype(np.uint8)
    return _NATIVE.get(stored)


def count_region(fh, offset: int, count: int, stored: str, path: str) -> Optional[Count]:
    """Counts of ``count`` stored elements at ``offset`` of an open file; None when ``stored`` is not
    countable from its bytes here (the caller decodes it)."""
    sdt = _stored_numpy(stored)
    if sdt is None:
        return None
    out = Count()
    fh.seek(offset)
    done = 0
    while done < count:
        n = min(CHUNK_ELEMS, count - done)
        buf = fh.read(n * sdt.itemsize)
        if len(buf) != n * sdt.itemsize:
            raise ValueError(f"{path}: truncated: file ended {done + len(buf) // sdt.itemsize} elements into a "
                             f"tensor of {count}")
        out.add(count_block(np.frombuffer(buf, dtype=sdt), stored), done)
        done += n
    return out


#: one tensor to count: (io, slot, dtype, shape, format, device_shape, stored_dtype, offset, nbytes, sub_format,
#: extra) — the packed unit entry without its statistics
TensorJob = tuple
#: one file: (unit id, path, storage, [TensorJob, ...])
UnitJob = tuple
#: (unit id, [(io, slot, nan, posinf, neginf, first_bad), ...], error or None)
UnitResult = tuple


def _ref(path: str, storage: str, t: TensorJob):
    from dumpscope.core.tensors.load import TensorRef

    io, slot, dtype, shape, fmt, dshape, sdt, off, nb, subf, extra = t
    return TensorRef(path=path, storage=storage, io=io, slot=slot, dtype=dtype, stored_dtype=sdt,
                     shape=tuple(shape), format=fmt, device_shape=tuple(dshape), offset=off, nbytes=nb,
                     sub_format=subf, extra=extra or {})


def _decoded(path: str, storage: str, t: TensorJob) -> Count:
    """Counts of the logical tensor's decoded values, chunk by chunk where its storage streams
    (``load.value_chunks``: device layouts, plain files), so a 2 GiB weight is never held whole."""
    from dumpscope.core.tensors.load import value_chunks

    make, _shape, vdt = value_chunks(_ref(path, storage, t))
    out = Count()
    if vdt.kind not in "fc":
        return out
    done = 0
    for chunk in make():
        flat = np.asarray(chunk).reshape(-1)
        out.add(count_block(flat, "decoded"), done)
        done += flat.size
    return out


def _cann_one(fh, path: str, t: TensorJob) -> Count:
    from dumpscope.core.formats.device_format import PLAIN_FORMATS

    _io, _slot, dtype, shape, fmt, dshape, sdt, off, nb, _subf, _extra = t
    stored = sdt or dtype
    npd = _stored_numpy(stored)
    if npd is None:
        return _decoded(path, "cann", t)
    c = count_region(fh, off, nb // npd.itemsize, stored, path)
    assert c is not None
    if c.bad and fmt and fmt not in PLAIN_FORMATS:  # padding may hold garbage: count the logical tensor
        return _decoded(path, "cann", t)
    return c


def _npy_one(path: str, t: TensorJob) -> Count:
    with open(path, "rb") as fh:
        header = read_array_header(fh)
        if header is None:
            return _decoded(path, "npy", t)
        shape, fortran, sdt = header
        if sdt.kind not in "fc":
            from dumpscope.core.formats.dtypes import npy_words

            if npy_words(t[2], sdt) is not None:  # integer words its name says are bfloat16/float8 bits
                return _decoded(path, "npy", t)
            return Count()
        if sdt.names is not None or sdt.subdtype is not None or sdt.byteorder == ">" or sdt.kind == "c":
            return _decoded(path, "npy", t)
        count = element_count(shape)
        have = os.fstat(fh.fileno()).st_size - fh.tell()
        if have > count * sdt.itemsize:  # the header does not describe the payload (npy_header.NpyHeader.oversized)
            raise ValueError(f"{path}: payload of {have} bytes, header says {sdt.name} {list(shape)} which needs "
                             f"{count * sdt.itemsize}: the header does not describe the data, not decoded")
        c = count_region(fh, fh.tell(), count, sdt.name, path)
        if c is None or (c.bad and fortran):
            return _decoded(path, "npy", t)
        return c


def _raw_one(path: str, t: TensorJob) -> Count:
    _io, _slot, dtype, shape, _fmt, _dshape, sdt, off, _nb, _subf, _extra = t
    stored = sdt or dtype
    if _stored_numpy(stored) is None:
        return _decoded(path, "raw", t)
    count = element_count(shape)
    from dumpscope.core.tensors.load import check_raw_size

    check_raw_size(_ref(path, "raw", t), os.path.getsize(path))  # never counted as a dtype it does not hold
    with open(path, "rb") as fh:
        c = count_region(fh, off, count, stored, path)
    assert c is not None
    return c


def count_unit(job: UnitJob) -> UnitResult:
    """Counts of the listed tensors of one file, the file opened once; an unreadable file is an error
    line naming it (never an exception)."""
    uid, path, storage, tensors = job
    out: list[tuple] = []
    try:
        if storage == "cann":
            with open(path, "rb") as fh:
                for t in tensors:
                    c = _cann_one(fh, path, t) if may_hold_nonfinite(t[6] or t[2]) else Count()
                    out.append((t[0], t[1], c.nan, c.posinf, c.neginf, c.first_bad))
        else:
            for t in tensors:
                if not may_hold_nonfinite(t[6] or t[2]):
                    c = Count()
                elif storage == "npy":
                    c = _npy_one(path, t)
                elif storage == "raw":
                    c = _raw_one(path, t)
                else:
                    c = _decoded(path, storage, t)
                out.append((t[0], t[1], c.nan, c.posinf, c.neginf, c.first_bad))
    except MemoryError:
        return uid, out, f"{path}: tensor too large to load into memory"
    except Exception as exc:  # every reader error becomes one line naming the file
        text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        if path not in text and os.path.basename(path) not in text:
            text = f"{path}: {text}"
        return uid, out, text
    return uid, out, None


def scan_batch(jobs: list[UnitJob]) -> list[UnitResult]:
    """Process-pool entry: count a batch of files."""
    return [count_unit(j) for j in jobs]
