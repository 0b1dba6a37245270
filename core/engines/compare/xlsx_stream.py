"""A streaming .xlsx writer in the standard library (sheet XML written row by row, deflated as it is written).

Why not openpyxl: it builds a cell object per value and serialises it through its XML layer, which
made ``compare --output x.xlsx`` cost 2.15x the CPU of ``--json`` (issue 33).  A chunk of rows (``rows``)
is written column by column: per column one check of its types and one ``map`` of its texts, the chunk
joined at once (the same bytes as row by row, ``row``, which a book's header and summary take); the compare
table hands its chunks over as columns (``columns``: made so by ``table_columns``, no rows made and
transposed back).

It writes what the compare table needs and nothing more: sheets of rows whose cells are numbers,
booleans or text, and one fill per row (msprobe's red error / yellow warning rows).

Text is written as a shared string from its first use (nearly all the table's texts repeat: N/A,
dtypes, verdicts, rules, data names), or inline (``t="inlineStr"``) once the shared table, bounded by
``SHARED_MAX``, is full, and always in the columns of rows' own texts (``own_texts``: the tensor names):
a cell is never a formula, whatever it starts with (the table's text is made inert by ``core.inert``
as well).  Characters XML 1.0 cannot carry (control characters, lone surrogates
from names that are not UTF-8) are written as ``\\xNN``/``\\uNNNN`` escapes, so a cell never breaks
the file.  NaN and ±Inf, which a spreadsheet cannot hold as numbers, are the texts ``nan``/``inf``/
``-inf``.  A float is written as its ``repr``, the shortest text that reads back as the same double: the
number ``--json`` prints and the CSV holds, so a column of them is spelled once for both when the block is
printed too (``row_columns.float_texts``: a compare of real tensors' statistics, every value new, spent ~4 us
a row of its table spelling them again).  msprobe's openpyxl wrote 16 significant digits, which reads back
a neighbouring double for about half of all doubles (a spreadsheet shows 15 either way).  An int is its
digits (beyond 2**53, its double's 16 digits).  Cells carry no reference (``r="C7"``: OOXML
places a cell without one right after the previous one; an empty cell is ``<c/>``): fewer bytes to
make and to deflate.

A text known only once every row is written (compare's first-divergence cell, ``table_file.TableAsMade``)
is a ``SLOT`` cell, written as an empty text (``_SLOT_EMPTY``); ``close`` is given the rows whose slots
are not empty (a few: ``filled``).  Each sheet is deflated into a scratch file as it is written, in
segments that inflate alone (``core.support.zip_writer``): a filled slot's segment is inflated, the slot
found (its row by ``r``, the slot by its spelling) and filled, and the segment deflated again; the others
are copied as they are.  The sheets' XML was written to a temporary file whole and copied through a
filling of every slot into a ``zipfile`` archive before (~0.5 us a row of a compare's table, ~36 MB of XML
for a compare of two 20k trees).
"""

from __future__ import annotations

import math
import re
from itertools import chain, filterfalse, repeat
from numbers import Integral, Real
from typing import IO, Any, Callable, Iterable, Mapping, Optional, Sequence

from dumpscope.core.support.row_columns import FloatSpellings, one_value
from dumpscope.core.support.zip_writer import DeflatedPart, ZipWriter

_MAIN_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
_HEAD = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
_SHEET_HEAD = (_HEAD + f'<worksheet xmlns="{_MAIN_NS}"><sheetData>').encode()
_SHEET_TAIL = b"</sheetData></worksheet>"

#: what XML text cannot hold as is: markup characters, and characters XML 1.0 forbids
_SPECIAL = re.compile("[&<>\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MARKUP = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


class _Slot:
    """The type of ``SLOT``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SLOT"


#: a cell whose text is given when the book is closed (``XlsxWriter.close``'s ``filled``), empty if not
SLOT = _Slot()


def _inline_tail(text: str) -> str:
    """The rest of an inline text cell after ``<c`` and its style (the text of a cell read back is the
    same, inline or shared), the empty text's as every empty text's: a row's own text (``XlsxWriter``'s
    ``own_texts``), and what fills a slot (a slot is written as the empty text)."""
    return _INLINE_TAIL.format(_t(text)) if text else _EMPTY_TAIL


#: texts in the shared table at most (and texts remembered as seen once): memory stays bounded on a
#: million-row table, whose tensor names are all different
SHARED_MAX = 1 << 16


def _escape_char(m: "re.Match[str]") -> str:
    ch = m.group()
    if ch in _MARKUP:
        return _MARKUP[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _column_letters(n: int) -> str:
    """Excel's column name of the 0-based column ``n`` (A … Z, AA …)."""
    out = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        out = chr(65 + r) + out
    return out


class XlsxWriter:
    """Sheets written one after the other into ``fh`` (a binary file, written by :meth:`close`, which
    finishes the book); until then each sheet is deflated into ``scratch`` (a binary temporary file: one
    of its own if not given).

    ``fills`` names the row styles (e.g. ``{"error": "FFFF0000"}``): a row given one of those names
    has every cell, empty ones included, filled solid with that ARGB colour.  ``slots`` counts the
    ``SLOT`` cells written (``close`` finds a row's by their spelling, ``_SLOT_EMPTY``).

    ``own_texts``: the columns (0-based) whose texts are each a row's own (the compare table's NPU and
    Bench Name: one tensor's ``name.io.slot``), written inline (``<is>``), not shared: a text used once
    gains nothing from the shared table and costs an index, a lookup and an entry there.  A plain column
    of them goes into the row's XML as it is given (the 40k-row copies compare's workbook: ~6 % fewer
    instructions for its table, and a file ~10 % smaller).

    ``floats``: how a column of floats is spelled (``FloatSpellings``: looked up by value, or, for rows the
    JSON print spells too, taken from the print).
    """

    def __init__(self, fh: IO[bytes], fills: Optional[dict[str, str]] = None,
                 scratch: Optional[IO[bytes]] = None, own_texts: Iterable[int] = (),
                 floats: Optional[FloatSpellings] = None) -> None:
        self._fh = fh
        self._own_texts = frozenset(own_texts)
        if scratch is None:
            import tempfile

            scratch = tempfile.TemporaryFile(prefix="dumpscope-book-")
            self._own_scratch = True
        else:
            self._own_scratch = False
        self._scratch = scratch
        self._fill_rgb = list((fills or {}).values())
        self._style = {name: k + 1 for k, name in enumerate(fills or {})}  # cellXfs index per fill
        self._sheets: list[str] = []
        self._parts: list[DeflatedPart] = []  # each sheet's XML, deflated
        self._out: Optional[DeflatedPart] = None  # the sheet being written
        self._buf: list[str] = []
        self._buf_first = 0  # the row number of the first row in ``_buf``
        self._row = 0
        self.slots = 0
        self._shared: list[str] = []  # the shared strings' ``<t>`` elements, in their index order
        # shared text -> the rest of its cell (``_Known``); a float's text (``FloatSpellings``)
        self._floats = floats if floats is not None else FloatSpellings()
        self._known = _Known(self._text)
        self._known[""] = _EMPTY_TAIL  # (the empty text: no shared string)

    # -- sheets -----------------------------------------------------------------------------------

    def sheet(self, name: str) -> None:
        """Start a new sheet (the current one is finished)."""
        self._end_sheet()
        self._sheets.append(name)
        self._out = DeflatedPart(self._scratch)
        self._parts.append(self._out)
        self._out.write(_SHEET_HEAD)
        self._row = 0

    def row(self, cells: Iterable[Any], fill: Optional[str] = None) -> None:
        """Append one row; ``None`` is an empty cell (in a filled row, an empty filled cell).  Cell by cell
        (``_row_each``): a book's header, its summary, and a run of rows ``columns`` cannot take."""
        self._row += 1
        if not self._buf:
            self._buf_first = self._row
        self._buf.append(self._row_each(cells if type(cells) is list else list(cells), fill))
        if len(self._buf) >= 256:
            self._flush()

    def rows(self, block: Sequence[tuple[list[Any], Optional[str]]]) -> None:  # (cells: lists)
        """Append rows ``(cells, fill)`` (``row``'s, the same XML), written column by column: the rows
        are split into runs of one fill and width (a compare's table: long runs of one), and each run
        is written by ``_run``; a run of fewer than ``_MIN_RUN`` rows row by row."""
        n = len(block)
        if not n:
            return
        cells, fills = zip(*block)
        width = len(cells[0])
        i = 0
        for j in range(1, n + 1):  # runs of one width, each as its columns (``columns`` splits them by fill)
            if j == n or len(cells[j]) != width:
                self.columns(list(zip(*cells[i:j])), fills[i:j])
                if j < n:
                    i, width = j, len(cells[j])

    def columns(self, cols: Sequence[Sequence[Any]], fills: Sequence[Optional[str]],
                types: Optional[Sequence[Optional[type]]] = None) -> None:
        """Append rows given as their columns (each as long as ``fills``, each row's fill): the rows
        ``rows`` would write of them, the same XML, without making the rows (the compare table's cells
        are made column by column: ``table_columns``).  ``types``: a column's type where the caller
        knows every cell of it is of that type (str, float, int, bool, None's, ``SLOT``'s), else None."""
        n = len(fills)
        if not n:
            return
        fill = fills[0]
        if fills.count(fill) == n:
            self._run(cols, n, fill, types)
            return
        i = 0
        for j in range(1, n + 1):
            if j == n or fills[j] != fill:
                self._run([col[i:j] for col in cols], j - i, fill, types)
                if j < n:
                    i, fill = j, fills[j]

    def _run(self, cols: Sequence[Sequence[Any]], n: int, fill: Optional[str],
             types: Optional[Sequence[Optional[type]]] = None) -> None:
        """``n`` rows of one fill, given as their columns, written column by column: each column's types
        checked once (one ``map`` of ``type``), its texts looked up in one ``map`` (``_known``) and its
        numbers spelled by one (floats: ``FloatSpellings``), or the column folded into the text between
        columns when every row holds one value, and the run joined at once with its row numbers.  New texts
        are shared in the order the rows would share them one by one (row by row, cell by cell:
        ``_share``), so the book's bytes are ``row``'s.  A run with a cell of another type (numpy numbers,
        a column of ints and floats, of texts and numbers), a NaN or ±Inf is written row by row."""
        width = len(cols)
        if n < _MIN_RUN or not width:
            self._each(cols, n, fill)
            return
        if types is None:
            kinds = [_kind_of(set(map(type, col))) for col in cols]
        else:  # (a type known: no look at the column's cells)
            kinds = [_KIND[t] if t is not None else _kind_of(set(map(type, col))) for col, t in zip(cols, types)]
        if None in kinds:
            self._each(cols, n, fill)
            return
        known = self._known
        look, get = known.__getitem__, known.get  # (texts only: numbers are spelled, not looked up)
        floats = self._floats.of
        texts: list[Any] = [None] * width  # a column's texts, or its one text (folded)
        folded = [False] * width
        try:
            for k, kind in enumerate(kinds):
                if kind is _FLOAT:
                    col = cols[k]
                    total = sum(col)  # (a NaN or ±Inf among them, or a sum past the largest double: row by row)
                    if not total - total == 0:
                        raise _NotFinite
                    if one_value(col):
                        texts[k], folded[k] = _float_repr(col[0]), True
                    else:  # (looked up, or spelled once for this table and the block's print: ``FloatSpellings``)
                        texts[k] = floats(col)
                elif kind is _INT:
                    col = cols[k]
                    v = col[0]
                    if col[-1] == v and col.count(v) == n:
                        texts[k], folded[k] = _int_text(v), True
                    elif -_EXACT_INT <= min(col) and max(col) <= _EXACT_INT:
                        texts[k] = list(map(str, col))
                    else:
                        texts[k] = list(map(_int_text, col))
                elif kind is _BOOL:
                    col = cols[k]
                    if col.count(col[0]) == n:
                        texts[k], folded[k] = _BOOL_TEXT[col[0]], True
                    else:
                        texts[k] = list(map(_BOOL_TEXT.__getitem__, col))
        except (_NotFinite, OverflowError):  # (an int too large for a double: row by row, as before)
            self._each(cols, n, fill)
            return
        new: list[int] = []  # the columns of texts not known yet
        first_of: dict[int, int] = {}  # a column given again (NPU and Bench Name: one list) looked up once
        again: list[tuple[int, int]] = []
        own = self._own_texts
        for k, kind in enumerate(kinds):
            if kind is _TEXT:
                col = cols[k]
                j = first_of.setdefault(id(col), k)
                if j != k:
                    again.append((k, j))
                elif k in own:  # (inline: the column itself between its cells' ends when it is plain)
                    if all(col) and _plain(col):
                        kinds[k] = _OWN
                        texts[k] = col
                    else:
                        texts[k] = list(map(_inline_tail, col))
                elif col[-1] == col[0] and col.count(col[0]) == n:
                    folded[k] = True
                    tail = get(col[0])
                    if tail is None:
                        new.append(k)
                    texts[k] = tail
                else:
                    got = list(map(get, col))
                    if not all(got):  # (a tail is never empty: ``all`` finds a None ~2x faster than ``in``)
                        new.append(k)
                    texts[k] = got
        if new:
            inline = self._share(cols[new[0]] if len(new) == 1 else chain.from_iterable(zip(*[cols[k] for k in new])))
            for k in new:
                texts[k] = look(cols[k][0]) if folded[k] else list(map(look, cols[k]))
            for text in inline:  # (the texts left inline are not remembered)
                del known[text]
        for k, j in again:
            texts[k], folded[k], kinds[k] = texts[j], folded[j], kinds[j]
        style = self._style.get(fill) if fill else None
        c = f'<c s="{style}"' if style else "<c"
        # a row's pieces after its number: the text between columns of texts, and those columns' texts
        pieces: list[Any] = []
        lit = '">'  # the text since the last column of texts
        for k, kind in enumerate(kinds):
            if kind is _EMPTY:
                lit += c + "/>"
            elif kind is _SLOTS:
                lit += c + _SLOT_EMPTY
            else:
                before, after = _AROUND[kind]
                if folded[k]:
                    lit += c + before + texts[k] + after
                else:
                    pieces.append(lit + c + before)
                    pieces.append(texts[k])
                    lit = after
        pieces.append(lit + '</row><row r="')  # (the next row's start: the last row's is taken off)
        self.slots += n * kinds.count(_SLOTS)
        start = self._row + 1
        if not self._buf:
            self._buf_first = start
        self._row += n
        # the run's pieces in one list made whole and filled a column of pieces at a time (by slices), row
        # by row: not a zip of the columns, whose chain the join would grow into a list of its own
        w = len(pieces) + 1
        out: list[Any] = [None] * (n * w + 1)
        out[0] = '<row r="'
        out[1::w] = map(str, range(start, start + n))
        for j, piece in enumerate(pieces, 2):
            out[j::w] = [piece] * n if type(piece) is str else piece
        out[-1] = lit + "</row>"
        self._buf.append("".join(out))
        self._flush()

    def _each(self, cols: Sequence[Sequence[Any]], n: int, fill: Optional[str]) -> None:
        """``n`` rows given as their columns written row by row (``row``)."""
        for cells in zip(*cols) if cols else repeat([], n):
            self.row(cells, fill)

    def _share(self, texts: Iterable[str]) -> list[str]:
        """The texts of ``texts`` not known yet put in the shared table, in their order of first use (as
        ``_text`` would one by one), as many as it takes (``SHARED_MAX``); the rest stay inline: their
        tails are put in ``_known`` for the run and given back, for ``_run`` to take out (not remembered:
        memory stays bounded), so a run past a full table is still looked up in C (a 40k-file compare's
        names: half of them past the table)."""
        known, shared = self._known, self._shared
        fresh = list(filterfalse(known.__contains__, dict.fromkeys(texts)))
        k = len(shared)
        room = max(0, SHARED_MAX - k)
        inline: list[str] = []
        if len(fresh) > room:
            fresh, inline = fresh[:room], fresh[room:]
            known.update(zip(inline, map(_INLINE_TAIL.format, _elements(inline))))
        if fresh:
            shared.extend(_elements(fresh))
            known.update(zip(fresh, map(_SHARED_TAIL.format, range(k, k + len(fresh)))))
        return inline

    def _row_each(self, cells: list[Any], fill: Optional[str]) -> str:
        """One row's XML, cell by cell."""
        style = self._style.get(fill) if fill else None
        c = f'<c s="{style}"' if style else "<c"  # cells carry no reference: each is the next column
        empty = c + "/>"
        parts = [f'<row r="{self._row}">']
        add = parts.append
        texts = self._known
        own = self._own_texts
        for k, v in enumerate(cells):
            t = type(v)
            if t is str:
                if k in own:
                    add(c + _inline_tail(v))
                    continue
                tail = texts.get(v)
                add(c + (tail if tail is not None else self._text(v)))
            elif t is float:
                if v - v == 0:  # finite
                    add(f"{c}><v>{_float_repr(v)}</v></c>")
                else:
                    add(c + self._text("nan" if v != v else ("inf" if v > 0 else "-inf")))
            elif v is None:
                add(empty)
            elif v is SLOT:
                add(c + _SLOT_EMPTY)
                self.slots += 1
            elif t is int:
                add(f"{c}><v>{_int_text(v)}</v></c>")
            else:
                add(c + self._other(v))
        add("</row>")
        return "".join(parts)

    def _text(self, text: str) -> str:
        """The rest of a text cell after ``<c …``: a shared string from its first use (a compare's texts
        nearly all repeat: N/A, dtypes, verdicts, rules, and each name twice in its row, its data name in
        the rows of its file's tensors); inline once the shared table is full (``SHARED_MAX``).

        Shared from the first use rather than the second: one ``_text`` per text instead of two, and no
        window of texts seen once to keep (the 20k noisy compare's workbook: ~1 us a row less)."""
        if not text:
            return _EMPTY_TAIL
        element = _t(text)
        shared = self._shared
        if len(shared) >= SHARED_MAX:  # the table is full: the rest stay inline
            return _INLINE_TAIL.format(element)
        k = len(shared)
        shared.append(element)
        tail = self._known[text] = _SHARED_TAIL.format(k)
        return tail

    def _other(self, v: Any) -> str:
        """Cells of the less common types: booleans, numpy numbers, anything else as its text."""
        if isinstance(v, bool) or type(v).__name__ == "bool_":
            return f' t="b"><v>{int(bool(v))}</v></c>'
        if isinstance(v, Integral):
            return f"><v>{_int_text(int(v))}</v></c>"
        if isinstance(v, Real):
            f = float(v)
            if math.isfinite(f):
                return f"><v>{_float_repr(f)}</v></c>"
            return self._text("nan" if math.isnan(f) else ("inf" if f > 0 else "-inf"))
        return self._text(str(v))

    def _flush(self) -> None:
        if self._buf and self._out is not None:
            self._out.write("".join(self._buf).encode("utf-8"), self._buf_first)
        self._buf.clear()

    def _end_sheet(self) -> None:
        if self._out is None:
            return
        self._flush()
        self._out.write(_SHEET_TAIL)
        self._out.finish()
        self._out = None

    def _filled(self, part: DeflatedPart, rows: dict[int, str]) -> dict[int, bytes]:
        """The segments of ``part`` (a sheet) holding the rows ``rows`` (row number: its slot's text), each
        with those slots filled: ``(segment: its new XML)``."""
        by_segment: dict[int, list[int]] = {}
        for r in sorted(rows):
            by_segment.setdefault(part.segment_at(r), []).append(r)
        return {k: self._fill_segment(part.text_of(k), [(r, rows[r]) for r in rs]) for k, rs in by_segment.items()}

    @staticmethod
    def _fill_segment(xml: bytes, rows: list[tuple[int, str]]) -> bytes:
        """``xml`` (whole rows, in order) with the slots of each of ``rows`` (row number, text; in order)
        filled: the row found by its ``r``, its slots by how they are written (``_SLOT_EMPTY``, which no
        other cell's XML holds: a text's ``>`` is escaped)."""
        out: list[bytes] = []
        at = 0
        for r, text in rows:
            start = xml.find(b'<row r="%d">' % r, at)
            end = xml.find(b"</row>", start)
            if start < 0 or end < 0:
                raise ValueError(f"row {r} is not in its segment (a bug)")
            row = xml[start:end]
            if _SLOT_EMPTY_BYTES not in row:
                raise ValueError(f"row {r} has no slot to fill (a bug)")
            out += [xml[at:start], row.replace(_SLOT_EMPTY_BYTES, _inline_tail(text).encode("utf-8"))]
            at = end
        out.append(xml[at:])
        return b"".join(out)

    def discard(self) -> None:
        """Stop without finishing the book (its file is about to be removed)."""
        self._out = None
        if self._own_scratch:
            try:
                self._scratch.close()
            except (OSError, ValueError):
                pass

    # -- the book's parts ---------------------------------------------------------------------------

    def close(self, filled: Optional[Mapping[tuple[int, int], str]] = None) -> None:
        """Finish the last sheet and write the book: the sheets (the slots of the rows ``filled`` names, by
        ``(sheet number, row number)`` from 1, given its text; every other slot stays empty), the workbook,
        its styles, the shared strings and the package's manifests."""
        self._end_sheet()
        if not self._sheets:
            self.sheet("Sheet1")
            self._end_sheet()
        z = ZipWriter(self._fh)
        by_sheet: dict[int, dict[int, str]] = {}
        for (sheet, row), text in (filled or {}).items():
            if text:
                by_sheet.setdefault(sheet, {})[row] = text
        for k, part in enumerate(self._parts, 1):
            rows = by_sheet.get(k)
            z.add_part(f"xl/worksheets/sheet{k}.xml", part, self._filled(part, rows) if rows else None)
        n = len(self._sheets)
        sheets = "".join(f'<sheet name="{_attr(name)}" sheetId="{k}" r:id="rId{k}"/>'
                         for k, name in enumerate(self._sheets, 1))
        z.add("xl/workbook.xml", f'{_HEAD}<workbook xmlns="{_MAIN_NS}" xmlns:r="{_REL_NS}">'
                                 f"<sheets>{sheets}</sheets></workbook>".encode())
        rels = "".join(f'<Relationship Id="rId{k}" Type="{_REL_NS}/worksheet" Target="worksheets/sheet{k}.xml"/>'
                       for k in range(1, n + 1))
        rels += (f'<Relationship Id="rId{n + 1}" Type="{_REL_NS}/styles" Target="styles.xml"/>'
                 f'<Relationship Id="rId{n + 2}" Type="{_REL_NS}/sharedStrings" Target="sharedStrings.xml"/>')
        z.add("xl/_rels/workbook.xml.rels",
              f'{_HEAD}<Relationships xmlns="{_PKG_REL_NS}">{rels}</Relationships>'.encode())
        z.add("xl/styles.xml", self._styles().encode())
        shared = DeflatedPart(self._scratch)  # (up to SHARED_MAX texts: streamed, not joined whole)
        shared.write(f'{_HEAD}<sst xmlns="{_MAIN_NS}" uniqueCount="{len(self._shared)}">'.encode())
        for k in range(0, len(self._shared), 4096):
            shared.write(("<si>" + "</si><si>".join(self._shared[k:k + 4096]) + "</si>").encode("utf-8"))
        shared.write(b"</sst>")
        z.add_part("xl/sharedStrings.xml", shared)
        z.add("_rels/.rels", f'{_HEAD}<Relationships xmlns="{_PKG_REL_NS}"><Relationship Id="rId1" '
                             f'Type="{_REL_NS}/officeDocument" Target="xl/workbook.xml"/></Relationships>'.encode())
        ct = "application/vnd.openxmlformats-officedocument.spreadsheetml"
        overrides = "".join(f'<Override PartName="/xl/worksheets/sheet{k}.xml" ContentType="{ct}.worksheet+xml"/>'
                            for k in range(1, n + 1))
        z.add("[Content_Types].xml", (
            f'{_HEAD}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/xl/workbook.xml" ContentType="{ct}.sheet.main+xml"/>'
            f'<Override PartName="/xl/styles.xml" ContentType="{ct}.styles+xml"/>'
            f'<Override PartName="/xl/sharedStrings.xml" ContentType="{ct}.sharedStrings+xml"/>{overrides}</Types>'
        ).encode())
        z.close()
        self.discard()

    def _styles(self) -> str:
        fills = "".join(f'<fill><patternFill patternType="solid"><fgColor rgb="{_argb(rgb)}"/>'
                        f'<bgColor rgb="{_argb(rgb)}"/></patternFill></fill>' for rgb in self._fill_rgb)
        xfs = "".join(f'<xf numFmtId="0" fontId="0" fillId="{k + 2}" borderId="0" xfId="0" applyFill="1"/>'
                      for k in range(len(self._fill_rgb)))
        return (f'{_HEAD}<styleSheet xmlns="{_MAIN_NS}">'
                '<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts>'
                f'<fills count="{2 + len(self._fill_rgb)}"><fill><patternFill patternType="none"/></fill>'
                f'<fill><patternFill patternType="gray125"/></fill>{fills}</fills>'
                '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
                '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
                f'<cellXfs count="{1 + len(self._fill_rgb)}"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" '
                f'xfId="0"/>{xfs}</cellXfs>'
                '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles></styleSheet>')


def _t(text: str) -> str:
    """``<t>text</t>``, escaped, its edge spaces kept."""
    # (printable text without markup, nearly every cell, is checked in C: the pattern's search is slower)
    if (not text.isprintable() or "&" in text or "<" in text or ">" in text) and _SPECIAL.search(text):
        text = _SPECIAL.sub(_escape_char, text)
    if text[:1].isspace() or text[-1:].isspace():
        return f'<t xml:space="preserve">{text}</t>'
    return f"<t>{text}</t>"


class _NotFinite(Exception):
    """A run's NaN or ±Inf, which a column does not spell (the run is written cell by cell: texts)."""


class _Known(dict):
    """A text's XML after ``<c …``: its shared-string tail (``text``, which remembers it here as long as
    the shared table takes it), made at its first lookup (``__missing__``)."""

    __slots__ = ("text",)

    def __init__(self, text: Callable[[str], str]) -> None:
        super().__init__()
        self.text = text

    def __missing__(self, v: str) -> str:
        return self.text(v)


def _int_text(v: int) -> str:
    """An int's number: its digits to 2**53 (every int a double holds, no exponent below 1e16), else its
    double's 16 significant digits (what a spreadsheet holds of it; OverflowError past the largest)."""
    return str(v) if -_EXACT_INT <= v <= _EXACT_INT else "%.16g" % v


#: a float's number: the shortest text that reads back as the same double (``--json``'s and the CSV's)
_float_repr = float.__repr__
#: a boolean's value
_BOOL_TEXT = {True: "1", False: "0"}
#: a shared text's cell after ``<c …``
_SHARED_TAIL = ' t="s"><v>{}</v></c>'
#: an inline text's cell after ``<c …`` (its ``<t>`` element), and the empty text's
_INLINE_TAIL = ' t="inlineStr"><is>{}</is></c>'
_EMPTY_TAIL = ' t="inlineStr"/>'
#: a slot's cell after ``<c …`` until it is filled: an empty text as well, spelled with a space (XML's same
#: empty element) so that it is found again, and no other cell is
_SLOT_EMPTY = ' t="inlineStr" />'
_SLOT_EMPTY_BYTES = _SLOT_EMPTY.encode()
#: the ASCII characters ``_t`` may change (control characters, markup: more than it does, not fewer) or that
#: may make a text's edge a space
_ASCII_SPECIAL = bytes(range(32)) + b"\x7f&<>"
#: the fewest rows ``XlsxWriter.rows`` writes column by column (fewer: row by row)
_MIN_RUN = 4
#: the kinds of a column (``XlsxWriter._run``): texts, numbers (ints and floats), booleans, empty cells, slots
_TEXT, _INT, _FLOAT, _BOOL, _EMPTY, _SLOTS = "text", "int", "float", "bool", "empty", "slots"
#: (and a column of a row's own texts, all plain: ``_plain``, written inline as they are)
_OWN = "own"
_KIND = {str: _TEXT, float: _FLOAT, int: _INT, bool: _BOOL, type(None): _EMPTY, _Slot: _SLOTS}
#: a column's XML before and after each value's text (after ``<c`` and its style)
_AROUND = {_TEXT: ("", ""), _INT: ("><v>", "</v></c>"), _FLOAT: ("><v>", "</v></c>"),
           _BOOL: (' t="b"><v>', "</v></c>"), _OWN: (' t="inlineStr"><is><t>', "</t></is></c>")}
#: the largest int a double holds exactly, as do all ints nearer 0: their decimal digits (``str``) are also
#: their double's ``%.16g`` (16 digits at most, no exponent below 1e16), what a spreadsheet holds
_EXACT_INT = 1 << 53


def _plain(texts: Sequence[str]) -> bool:
    """Whether ``_t`` of each of ``texts`` (none empty) is the text between ``<t>`` and ``</t>``: none needs
    escaping or keeps an edge space, found by C-level passes over them all: ASCII (a flag), no control
    character nor markup (their bytes deleted, the length kept), none changed by ``strip`` (whose only
    whitespace left is then the space; a text it leaves as it is, it gives back itself)."""
    whole = "".join(texts)
    return (whole.isascii() and len(whole.encode().translate(None, _ASCII_SPECIAL)) == len(whole)
            and list(map(str.strip, texts)) == list(texts))


def _elements(texts: list[str]) -> list[str]:
    """``_t`` of each of ``texts`` (none empty), made by concatenation when they are ``_plain``."""
    if _plain(texts):
        return ["<t>" + text + "</t>" for text in texts]
    return list(map(_t, texts))


def _kind_of(types: set) -> Optional[str]:
    """The kind of a column of these value types; None when it has none (ints and floats together, other
    types: the run is written row by row)."""
    if len(types) == 1:
        return _KIND.get(types.pop())
    return None


def _attr(text: str) -> str:
    return _SPECIAL.sub(_escape_char, text).replace('"', "&quot;")


def _argb(rgb: str) -> str:
    """An ARGB colour as openpyxl stores it (msprobe spelled yellow ``FFFF00``: alpha ``00`` in front)."""
    return rgb if len(rgb) == 8 else "00" + rgb[-6:]
