"""The human compare table of a big compare, streamed as plain fixed-width text.

rich's ``Table`` measures every cell of every row before it prints the first line, and holds them all:
the 20,000 rows of two 10k-file trees took 11 s of a 13.7 s ``dumpscope compare`` (``--json``: 2.3 s), and
memory grew with the rows.  Past ``RICH_ROWS`` rows the same columns are printed here instead, a row as
it is read: column widths fixed from the terminal's width, long texts folded onto the next lines (as the
rich table folds them), every text from a dump made inert.  Smaller compares keep the rich table.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterable, Optional

from dumpscope.core.inert import inert

#: up to this many rows the rich table is printed (it sizes its columns to what they hold)
RICH_ROWS = 2000

#: the columns of fixed width: (header, width); name and rule share what the terminal leaves
_FIXED = (("io", 8), ("cosine", 8), ("max_abs", 11), ("max_rel", 11), ("verdict", 9), ("origin", 8))
_PLACE_WIDTH = 13
_SEP = " "
#: narrower terminals print a row's rule on a line of its own under the row (80x24 stays readable)
_RULE_BELOW_UNDER = 110
_LINES_A_WRITE = 512


def _fold(text: str, width: int) -> list[str]:
    """``text`` cut into lines of at most ``width`` cells (rich's fold), each padded to ``width``."""
    if text.isascii():
        if len(text) <= width:
            return [text.ljust(width)]
        return [text[i:i + width].ljust(width) for i in range(0, len(text), width)]
    from rich.cells import cell_len, chop_cells  # here: a --json compare imports this module and never folds

    lines = chop_cells(text, width) or [""]
    return [line + " " * (width - cell_len(line)) for line in lines]


def column_widths(total: int, places: bool) -> list[int]:
    """Widths of the marker, [place], name, the fixed columns and (on a wide terminal) rule for a terminal
    ``total`` cells wide: name gets what the others leave (3/5 of it beside a rule), never under 16."""
    rule_below = total < _RULE_BELOW_UNDER
    fixed = sum(w for _, w in _FIXED) + (_PLACE_WIDTH if places else 0)
    n_cols = 2 + len(_FIXED) + (1 if places else 0) + (0 if rule_below else 1)
    free = max(16 if rule_below else 32, total - 1 - fixed - len(_SEP) * (n_cols - 1))
    if rule_below:
        return [1, *([_PLACE_WIDTH] if places else []), free, *(w for _, w in _FIXED)]
    name = free * 3 // 5
    return [1, *([_PLACE_WIDTH] if places else []), name, *(w for _, w in _FIXED), free - name]


def print_rows(rows: Iterable[dict[str, Any]], cells_of: Callable[[dict[str, Any]], list[str]], places: bool,
               width: int, write: Optional[Callable[[str], Any]] = None) -> int:
    """Print ``rows`` as a fixed-width table (``cells_of(row)``: the row's texts in column order, marker
    first, rule last); returns how many were printed.  Written a few hundred lines at a time."""
    write = write or sys.stdout.write
    widths = column_widths(width, places)
    below = len(widths) == (1 if places else 0) + 2 + len(_FIXED)  # no rule column: the rule goes under
    header = ["", *(["place"] if places else []), "name", *(h for h, _ in _FIXED), *([] if below else ["rule"])]
    write(_line([h.ljust(w) for h, w in zip(header, widths)]) + "\n")
    write(_SEP.join("─" * w for w in widths) + "\n")
    rule_width = max(16, width - 5)
    out: list[str] = []
    n = 0
    name_at = 2 if places else 1
    known: dict[tuple[str, int], list[str]] = {}  # a cell's folded lines by (text, width): bounded
    for row in rows:
        texts = cells_of(row)
        # (every cell but the name repeats: markers, io, numbers, verdicts with their glyph, origins, rules;
        # one dict lookup instead of inert + fold, whose glyphs took rich's cell measure: ~2/3 of the print)
        folded = [known.get((text, w)) or _known_fold(known, text, w) if k != name_at else _fold(inert(text), w)
                  for k, (text, w) in enumerate(zip(texts, widths))]
        height = max(map(len, folded))
        for k in range(height):
            out.append(_line([cell[k] if k < len(cell) else " " * w for cell, w in zip(folded, widths)]))
        if below and texts[-1]:
            rule = texts[-1]
            out.extend(_line(["", "  " + part])
                       for part in known.get((rule, rule_width)) or _known_fold(known, rule, rule_width))
        n += 1
        if len(out) >= _LINES_A_WRITE:
            write("\n".join(out) + "\n")
            out.clear()
    if out:
        write("\n".join(out) + "\n")
    return n


def _known_fold(known: dict[tuple[str, int], list[str]], text: str, width: int) -> list[str]:
    """``_fold(inert(text), width)``, remembered in ``known`` (at most ``_KNOWN_FOLDS`` at a time)."""
    lines = _fold(inert(text), width)
    if len(known) >= _KNOWN_FOLDS:
        known.clear()
    known[(text, width)] = lines
    return lines


#: cells remembered folded by ``print_rows`` at a time
_KNOWN_FOLDS = 4096


def _line(cells: list[str]) -> str:
    return _SEP.join(cells).rstrip()
