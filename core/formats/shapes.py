"""Element counts and payload sizes in exact integers, and the one named problem of an impossible header.

A dump header's shape is data from disk: its product can pass 2**63 (``numpy.prod`` then
wraps around, to 0 for ``[2**32, 2**32]``).  Every count and size here is a Python int, so
the indexer, ``stats``, ``convert`` and ``compare`` agree on what a header promises, and a
header whose shape cannot fit its payload is the same one-line problem in all of them.
"""

from __future__ import annotations

from math import prod
from typing import Iterable, Optional


def element_count(shape: Iterable[int]) -> int:
    """Elements of a tensor of ``shape`` (a scalar, shape ``()``, has one); exact at any size."""
    dims = [int(d) for d in shape]
    return prod(dims) if dims else 1


def payload_bytes(dtype_bits: int, count: int) -> int:
    """Bytes that ``count`` elements of ``dtype_bits`` bits take (packed types round up)."""
    return (dtype_bits * count + 7) // 8


def impossible_header(shape: Iterable[int], dtype: str, payload: int) -> Optional[str]:
    """Why a header's shape cannot describe a payload of ``payload`` bytes, or None when it can.

    Negative dimensions and shapes needing more bytes than the payload holds are impossible;
    the text is the same wherever the header is read.
    """
    from dumpscope.core.formats.dtypes import DtypeError, itemsize_bits

    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        return f"impossible header: shape {dims} has a negative dimension"
    try:
        bits = itemsize_bits(dtype)
    except DtypeError:
        return None  # no fixed element size: nothing to check here
    need = payload_bytes(bits, element_count(dims))
    if need > payload:
        return (f"impossible header: shape {dims} of {dtype} needs {need} bytes, "
                f"the payload holds {payload}")
    return None
