"""Fitting text into narrow terminals without losing its meaning.

``middle`` shortens a scoped name in the middle, keeping the op itself and its enclosing block
(and the first block when that fits too): ``Default/…/bn1-BatchNorm2d/BatchNorm-op2``,
``…/fc1-Dense/MatMul-op0``.
``fit_bits`` drops and shortens status-bar pieces by priority, so rank, step and the op count
are the last things to go.
"""

from __future__ import annotations

from typing import Sequence


def middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells: kept whole when it fits, else cut in the middle."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width == 1:
        return "…"
    parts = text.split("/")
    if len(parts) > 2:
        head, leaf = parts[0], parts[-1]
        for lead in (head + "/…/", "…/"):  # with the first block if an enclosing one fits too
            tail, blocks = leaf, 0
            for i in range(len(parts) - 2, 0, -1):  # enclosing blocks, innermost first, while they fit
                longer = parts[i] + "/" + tail
                if len(lead) + len(longer) > width:
                    break
                tail, blocks = longer, blocks + 1
            if blocks:
                return lead + tail
    if len(parts) > 1 and width >= 8:  # the op alone, cut in its middle when even that is too long
        return "…/" + middle(parts[-1], width - 2)
    left = (width - 1) // 2
    return text[:left] + "…" + text[len(text) - (width - 1 - left):]


#: a status-bar piece: text, style, priority (lower goes first when space runs out), may shorten
Bit = tuple[str, str, int, bool]


def fit_bits(bits: Sequence[Bit], width: int, sep: int = 3, pad: int = 1) -> list[tuple[str, str]]:
    """Pieces that fit in ``width`` cells joined by ``sep``-wide separators: the lowest priority is
    dropped first, shortenable pieces (``middle``) are cut before anything important goes."""
    kept = list(bits)

    def total() -> int:
        return pad + sum(len(b[0]) for b in kept) + sep * max(0, len(kept) - 1)

    while total() > width and kept:
        over = total() - width
        short = [b for b in kept if b[3] and len(b[0]) > 8]
        if short:
            b = min(short, key=lambda x: x[2])
            i = kept.index(b)
            kept[i] = (middle(b[0], max(8, len(b[0]) - over)), b[1], b[2], False)
            continue
        lowest = min(kept, key=lambda x: x[2])
        kept.remove(lowest)
    return [(b[0], b[1]) for b in kept]
