"""numpy-style index text (``0, :, 3``, ``..., -1``, ``2:10:2``) → a bounded view of a tensor.

Parsing is strict and never calls ``eval``; the result is cut to ``limit`` values so a slice
of a multi-GB tensor can be printed in a terminal pane.
"""

from __future__ import annotations

import numpy as np

Index = tuple  # of int | slice | Ellipsis | None
DEFAULT_LIMIT = 2048


class SliceError(ValueError):
    """The index text is not a valid numpy basic index for this shape."""


def _int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise SliceError(f"not an integer: {text.strip()!r}") from None


def parse_index(text: str) -> Index:
    """Parse ``"0, :, 3"`` into ``(0, slice(None), 3)``; empty text means the whole tensor."""
    text = text.strip().strip("[]()")
    if not text:
        return ()
    out: list = []
    for raw in text.split(","):
        item = raw.strip()
        if item == "":
            raise SliceError("empty index position")
        if item in ("...", "…"):
            out.append(Ellipsis)
        elif item.lower() in ("none", "newaxis"):
            out.append(None)
        elif ":" in item:
            bits = item.split(":")
            if len(bits) > 3:
                raise SliceError(f"bad slice: {item!r}")
            nums = [(_int(b) if b.strip() else None) for b in bits]
            if len(nums) == 3 and nums[2] == 0:
                raise SliceError("slice step cannot be zero")
            out.append(slice(*nums))
        else:
            out.append(_int(item))
    if sum(1 for x in out if x is Ellipsis) > 1:
        raise SliceError("only one ... allowed")
    return tuple(out)


def apply_index(arr: np.ndarray, index: Index) -> np.ndarray:
    try:
        return arr[index] if index else arr
    except IndexError as exc:
        raise SliceError(str(exc)) from None


def render_slice(arr: np.ndarray, text: str, limit: int = DEFAULT_LIMIT) -> str:
    """The slice as numpy prints it, at most ``limit`` values (a note says when cut)."""
    part = np.asarray(apply_index(arr, parse_index(text)))
    flat = np.asarray(part.flat[:limit]) if part.size > limit else part  # copies only what is shown
    return _render(tuple(part.shape), part.dtype, part.size, flat, limit)


def render_result(res, limit: int = DEFAULT_LIMIT) -> str:
    """A ``core.tensor_slice.SliceResult`` printed as :func:`render_slice` prints the same slice."""
    return _render(res.shape, res.dtype, res.size, res.values, limit)


def _render(shape: tuple, dtype: np.dtype, size: int, values: np.ndarray, limit: int) -> str:
    head = f"shape {list(shape)} {dtype}"
    if size > limit:
        body = np.array2string(values[:limit], threshold=limit + 1, max_line_width=100, precision=6)
        return f"{head}: first {limit} of {size} values (flattened)\n{body}"
    body = np.array2string(values, threshold=limit + 1, max_line_width=100, precision=6)
    return f"{head}\n{body}"
