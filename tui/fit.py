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


def _floor(text: str) -> int:
    """How short a shortenable piece gets before anything else is dropped: its last path part
    (``…/mindspore_lenet_sync``; the dump's name is what tells two windows apart), at most 30 cells."""
    leaf = text.rstrip("/").rsplit("/", 1)[-1]
    return min(len(text), max(8, min(30, len(leaf) + (2 if len(leaf) < len(text) else 0))))


def fit_bits(bits: Sequence[Bit], width: int, sep: int = 3, pad: int = 1) -> list[tuple[str, str]]:
    """Pieces that fit in ``width`` cells joined by ``sep``-wide separators.

    Shortenable pieces (``middle``) are cut first, down to their floor (a path: its last part);
    when that is not enough the lowest priority goes, and what room is left goes back to the cut
    pieces.  Below their floor they are cut only when the pieces left all matter more."""
    kept = list(bits)

    def total(items: Sequence[Bit], at_floor: bool) -> int:
        lengths = [(_floor(b[0]) if at_floor and b[3] else len(b[0])) for b in items]
        return pad + sum(lengths) + sep * max(0, len(items) - 1)

    while kept and total(kept, True) > width:
        lowest = min(kept, key=lambda x: x[2])
        if lowest[3] and all(b[3] or b[2] > lowest[2] for b in kept) and len(lowest[0]) > 8:
            break  # only more important pieces besides it: cut it below its floor instead
        kept.remove(lowest)
    while kept and total(kept, False) > width:
        over = total(kept, False) - width
        short = [b for b in kept if b[3] and len(b[0]) > _floor(b[0])] or \
                [b for b in kept if b[3] and len(b[0]) > 8]
        if not short:
            kept.remove(min(kept, key=lambda x: x[2]))
            continue
        b = min(short, key=lambda x: x[2])
        floor = _floor(b[0]) if len(b[0]) > _floor(b[0]) else 8
        i = kept.index(b)
        kept[i] = (middle(b[0], max(floor, len(b[0]) - over)), b[1], b[2], b[3])
        if len(kept[i][0]) >= len(b[0]):  # middle could not cut it further
            kept[i] = (kept[i][0], b[1], b[2], False)
    return [(b[0], b[1]) for b in kept]
