"""The human compare table of a big compare, streamed as plain fixed-width text.

rich's ``Table`` measures every cell of every row before it prints the first line, and holds them all:
the 20,000 rows of two 10k-file trees took 11 s of a 13.7 s ``dumpscope compare`` (``--json``: 2.3 s), and
memory grew with the rows.  Past ``RICH_ROWS`` rows the same columns are printed here instead, a chunk
of rows at a time as they are read: column widths fixed from the terminal's width, long texts folded onto
the next lines (as the rich table folds them), every text from a dump made inert.  Smaller compares keep
the rich table.
"""

from __future__ import annotations

import re
import sys
from array import array
from itertools import islice, repeat
from typing import Any, Callable, Iterable, Optional

from dumpscope.core.inert import _UNSAFE, inert
from dumpscope.core.support.row_spool import PrintedRows, plain
from dumpscope.tui.cli.output import fmt_num

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
    """``text`` cut into lines of at most ``width`` cells (rich's fold), each padded to ``width``: by slices
    when every character is one cell wide (ASCII, and ``≤``, ``✓``, … in the rules and verdicts: rich's
    fold, character by character in Python, then gives the same lines)."""
    if text.isascii() or _narrow(text):
        if len(text) <= width:
            return [text.ljust(width)]
        return [text[i:i + width].ljust(width) for i in range(0, len(text), width)]
    from rich.cells import cell_len, chop_cells  # here: a --json compare imports this module and never folds

    lines = chop_cells(text, width) or [""]
    return [line + " " * (width - cell_len(line)) for line in lines]


def _narrow(text: str) -> bool:
    """Whether every character of ``text`` takes one cell (rich's measure of each, remembered)."""
    for ch in set(text):
        if ch > "\x7f":
            size = _CELLS.get(ch)
            if size is None:
                from rich.cells import get_character_cell_size

                if len(_CELLS) >= 4096:
                    _CELLS.clear()
                size = _CELLS[ch] = get_character_cell_size(ch)
            if size != 1:
                return False
        elif ch < " " or ch == "\x7f":  # (a control character: rich's measure, as before)
            return False
    return True


#: non-ASCII characters' cell widths, as rich measures them
_CELLS: dict[str, int] = {}


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
    first, rule last); returns how many were printed.  Written a few hundred lines at a time.

    A chunk of rows is laid out column by column: a column's cells that fit on one line are padded by one
    ``map`` (the name's when they are plain ASCII: ``inert`` leaves them as they are) or looked up (every
    other column's texts repeat: markers, io, numbers, verdicts with their glyph, origins, rules), and a
    row of one-line cells is one join; a row with a cell to fold gets its pieces under it (``_folded_row``).
    Folded cells are remembered by text and width (bounded): the verdicts' glyphs took rich's cell
    measure on every row (~2/3 of the print)."""
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
    name_w = widths[name_at]
    blanks = [" " * w for w in widths]  # a row's next lines: its cells of one line left blank
    before = _SEP.join(blanks[:name_at]) + _SEP  # a name's next lines: the blank cells before it
    known: dict[tuple[str, int], list[str]] = {}  # a cell's folded lines by (text, width): bounded
    one: dict[tuple[str, int], Optional[str]] = {}  # its one line padded, None when it folds: bounded
    under: dict[str, list[str]] = {}  # a rule's lines under its row: bounded
    it = iter(rows)
    while True:
        chunk = list(islice(it, _CHUNK_ROWS))
        if not chunk:
            break
        texts = list(map(cells_of, chunk))
        cols = list(zip(*texts))
        plain_names, names = _padded_names(cols[name_at], name_w)
        padded = [names if k == name_at else _padded(cols[k], w, one, known) for k, w in enumerate(widths)]
        for cells, row_texts in zip(zip(*padded), texts):
            if None not in cells:
                out.append(_SEP.join(cells).rstrip())
            elif (cells.count(None) == 1 and cells[name_at] is None
                  and (plain_names or (row_texts[name_at].isascii() and row_texts[name_at].isprintable()))):
                # (only the name folds, plain ASCII: its first piece in the row's line, the others under it)
                name = row_texts[name_at]
                cells = list(cells)
                cells[name_at] = name[:name_w]
                out.append(_SEP.join(cells).rstrip())
                out += [before + name[i:i + name_w].rstrip() for i in range(name_w, len(name), name_w)]
            else:
                out += _folded_row(cells, row_texts, widths, name_at, known, blanks)
            if below and row_texts[-1]:
                rule = row_texts[-1]
                lines = under.get(rule)
                if lines is None:
                    folded = _known_fold(known, rule, rule_width)
                    lines = [_line(["", "  " + part]) for part in folded]
                    if len(under) >= _KNOWN_FOLDS:
                        under.clear()
                    under[rule] = lines
                out += lines
        n += len(chunk)
        if len(out) >= _LINES_A_WRITE:
            write("\n".join(out) + "\n")
            out.clear()
    if out:
        write("\n".join(out) + "\n")
    return n


def _folded_row(cells: tuple[Optional[str], ...], texts: list[str], widths: list[int], name_at: int,
                known: dict[tuple[str, int], list[str]], blanks: list[str]) -> list[str]:
    """The lines of a row with cells to fold (None in ``cells``, the others padded on one line): each of those
    made inert and folded (remembered, but for the name's), their pieces under the row's first line."""
    folded = [(k, _fold(inert(texts[k]), widths[k]) if k == name_at
               else _known_fold(known, texts[k], widths[k]))
              for k, cell in enumerate(cells) if cell is None]
    first = list(cells)
    for k, lines in folded:
        first[k] = lines[0]
    out = [_SEP.join(first).rstrip()]
    for i in range(1, max(len(lines) for _, lines in folded)):
        line = blanks.copy()
        for k, lines in folded:
            if i < len(lines):
                line[k] = lines[i]
        out.append(_SEP.join(line).rstrip())
    return out


def _padded_names(names: tuple[str, ...], width: int) -> tuple[bool, list[Optional[str]]]:
    """``(plain, padded)``: whether the names are all plain ASCII (``inert`` leaves them, a fold is slices of
    ``width``: checked on them joined, in C), and each name padded to ``width`` where it is plain and fits,
    else None (folded)."""
    joined = "".join(names)
    if joined.isascii() and len(joined.encode().translate(None, _CONTROL)) == len(joined):
        if max(map(len, names)) <= width:
            return True, list(map(str.ljust, names, repeat(width)))
        return True, [name.ljust(width) if len(name) <= width else None for name in names]
    # (ASCII ``isprintable``: no control character, the only ASCII ``inert`` changes)
    return False, [name.ljust(width) if len(name) <= width and name.isascii() and name.isprintable() else None
                   for name in names]


def _padded(texts: tuple[str, ...], width: int, one: dict[tuple[str, int], Optional[str]],
            known: dict[tuple[str, int], list[str]]) -> list[Optional[str]]:
    """Each text's one line padded to ``width`` (``_fold(inert(text), width)`` of one line), None where it
    folds onto more: looked up by (text, width) in ``one``, made for a text not seen."""
    keys = list(zip(texts, repeat(width)))
    got = list(map(one.get, keys))
    if None in got:
        for i, key in enumerate(keys):
            if got[i] is None:
                if key in one:  # (seen earlier in this column: None, it folds)
                    got[i] = one[key]
                    continue
                lines = _known_fold(known, *key)
                if len(one) >= _KNOWN_FOLDS:
                    one.clear()
                got[i] = one[key] = lines[0] if len(lines) == 1 else None
    return got


#: rows laid out together by ``print_rows``
_CHUNK_ROWS = 256
#: the ASCII characters ``inert`` changes
_CONTROL = bytes(range(32)) + b"\x7f"


def _known_fold(known: dict[tuple[str, int], list[str]], text: str, width: int) -> list[str]:
    """``_fold(inert(text), width)``, looked up in ``known`` or made and remembered there (at most
    ``_KNOWN_FOLDS`` at a time)."""
    lines = known.get((text, width))
    if lines is None:
        lines = _fold(inert(text), width)
        if len(known) >= _KNOWN_FOLDS:
            known.clear()
        known[(text, width)] = lines
    return lines


#: cells remembered folded by ``print_rows`` at a time
_KNOWN_FOLDS = 4096


def _line(cells: list[str]) -> str:
    return _SEP.join(cells).rstrip()


#: a verdict's cell: its glyph, then the word (meaning never by colour or glyph alone)
GLYPHS = {"pass": "✓", "warning": "~", "error": "✗"}


def row_cells(r: dict[str, Any], first: bool, places: bool) -> list[str]:
    """A compare row's texts in the table's columns: marker, [place], name, io.slot, cosine, max_abs,
    max_rel, verdict, origin, rule (the name and the rule made inert; ``print_rows`` makes every cell so)."""
    name = r["name"] if r.get("target_name") in (None, r["name"]) else f"{r['name']} ↔ {r['target_name']}"
    where = [f"r{r['rank']} s{r['step']}" + (f"→r{r['target_rank']} s{r['target_step']}"
                                              if "target_step" in r else "")] if places else []
    return ["▶" if first else "", *where, inert(name), f"{r['io']}.{r['slot']}", fmt_num(r["cosine"]),
            fmt_num(r["max_abs_err"]), fmt_num(r["max_rel_err"]),
            f"{GLYPHS.get(r['verdict'], '?')} {r['verdict']}", r.get("origin") or "", inert(r["rule"])]


def is_first_row(r: dict[str, Any], fd: dict[str, Any]) -> bool:
    """Whether row ``r`` is the first divergence's (``fd``: the document's; its name, io, slot, step, rank)."""
    return bool(fd) and r["name"] == fd.get("name") and r["io"] == fd.get("io") and r["slot"] == fd.get("slot") \
        and r.get("step") == fd.get("step") and r.get("rank") == fd.get("rank")


class TerminalCells:
    """The terminal table's cells of a one-place compare's rows, made as the compare makes them (``add``, a
    ``row_sink``) and kept in a temporary file, so the print reads them back instead of decoding every stored
    row (~6 us a row of ~2.4 KB of JSON) and making its cells then.

    A block of rows (``row_spool.PrintedRows``'s) is made column by column, every text inert (the separators
    it is stored with are control characters, which ``inert`` shows as symbols; ``print_rows`` makes every
    cell inert anyway: the same table).  A row's values are taken as the stored row gives them back
    (``row_spool.plain``: numpy scalars as numbers, tuples as lists).  The marker is not made here: the first
    divergence is known at the end; ``first_rows`` finds its rows by their key's hash, each checked on the
    stored row itself (``is_first_row``)."""

    def __init__(self) -> None:
        self.keys = array("q")  # each row's hash of (name, io, slot, step, rank)
        self.odd: list[int] = []  # the rows whose key has no hash (checked one by one)
        self.failed = False  # a row it could not make cells of: the print makes them from the rows
        self._store = PrintedRows(self._block_text)

    def add(self, rows: list[dict[str, Any]]) -> None:
        """The rows of a block, as the compare hands them (a ``row_sink``)."""
        if self.failed:
            return
        try:
            self._store.extend(rows)
        except Exception:  # (never the compare's failure: the print falls back to the rows)
            self.failed = True

    def __len__(self) -> int:
        return len(self._store)

    def _block_text(self, rows: list[dict[str, Any]]) -> str:
        get = dict.get
        cols = [list(map(get, rows, repeat(k))) for k in _CELL_KEYS]
        cols = [col if _PLAIN.issuperset(map(type, col)) else list(map(plain, col)) for col in cols]
        names, target_names, ios, slots, cosines, abs_errs, rel_errs, verdicts, origins, rules, steps, ranks = cols
        start = len(self.keys)
        for k, key in enumerate(zip(names, ios, slots, steps, ranks)):
            try:
                self.keys.append(hash(key))
            except TypeError:  # (a list slot: no hash)
                self.keys.append(0)
                self.odd.append(start + k)
        shown = [n if t in (None, n) else f"{n} ↔ {t}" for n, t in zip(names, target_names)]
        numbers = [list(map(format, col, repeat(".6g"))) if _FLOATS.issuperset(map(type, col))
                   else list(map(fmt_num, col)) for col in (cosines, abs_errs, rel_errs)]
        texts = [shown, list(map("{}.{}".format, ios, slots)), *numbers,
                 [f"{GLYPHS.get(v, '?')} {v}" for v in verdicts], [o or "" for o in origins], rules]
        text = _COLUMN_END.join(map(_CELL_END.join, texts))
        if (_has_unsafe(text) or text.count(_CELL_END) != len(texts) * (len(rows) - 1)
                or text.count(_COLUMN_END) != len(texts) - 1):  # (a text to make inert, the separators too)
            text = _COLUMN_END.join(_CELL_END.join(map(inert, col)) for col in texts)
        return text

    def _finish(self) -> bool:
        """The open block made (its rows' cells and keys); False when a row could not be (``failed``)."""
        if not self.failed:
            try:
                self._store.finish_block()
            except Exception:
                self.failed = True
        return not self.failed

    def cells(self) -> Iterable[list[str]]:
        """Each row's texts in order, as ``row_cells`` makes them with no marker and no place."""
        for block in self._store.printed_blocks():
            yield from map(list, zip(*(col.split(_CELL_END) for col in block.split(_COLUMN_END))))

    def first_rows(self, fd: dict[str, Any], rows: Any) -> Optional[set[int]]:
        """The positions of the rows ``is_first_row`` marks, each checked on the document's row (read back by
        number): those whose key's hash is the first divergence's, and those whose key has none (a list slot;
        the only ones a key of no hash can equal, tuples being lists as stored).  None when a row could not
        be made (``failed``): the caller prints from the rows."""
        if not self._finish():
            return None
        if not fd:
            return set()
        try:
            want = hash((fd.get("name"), fd.get("io"), fd.get("slot"), fd.get("step"), fd.get("rank")))
        except TypeError:
            found = self.odd
        else:
            found = [k for k, h in enumerate(self.keys) if h == want] + self.odd
        return {k for k in found if is_first_row(rows[k], fd)}


#: the row keys ``TerminalCells`` makes a row's cells of
_CELL_KEYS = ("name", "target_name", "io", "slot", "cosine", "max_abs_err", "max_rel_err", "verdict", "origin",
              "rule", "step", "rank")
_PLAIN = frozenset((str, int, float, bool, type(None)))
_FLOATS = frozenset((float,))
#: what ends a cell and a column in a stored block (control characters: no inert text holds one)
_CELL_END, _COLUMN_END = "\x1f", "\x1e"
#: what ``inert`` changes, but for those two
_has_unsafe = re.compile(_UNSAFE.pattern.replace("\x00-\x1f", "\x00-\x1d")).search
