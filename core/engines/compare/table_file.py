"""The compare table written to a file (``.csv`` / ``.xlsx``) from a document's rows given in order.

``compare --json --output x.csv`` read the rows back from the spool, decoded and filled them twice:
once for the table, once for the print (a fifth of the table's cost, issue 33).  ``TableFile`` takes
the rows one by one; ``write_rows`` is the table written on its own (``write_table``).  The cells are
``report.table_rows``'s; the CSV is ``csv.writer``'s (its lines made by lookups where the cells
allow: ``_CsvLines``), the workbook ``xlsx_stream``'s.

``TableAsMade`` writes it as the compare makes the rows (``compare [--json] --output``): with ``--json``
the rows are then kept only as the document prints them, never JSON-encoded into the spool and decoded
again (12.5 + 6.7 us a row, as much as the table's own cells and text); without it (the terminal's print)
they are not read back and filled a second time for the table (the 20k bench: ~0.35 s of 3.6).  The
first divergence is known only once every row exists, so its cells are left to fill (``TableFile``'s
``deferred``: the CSV's part filled as it is copied into the file, the workbook's few slots filled in
their sheet's segments) when the table is finished.
"""

from __future__ import annotations

import bisect
import csv
import math
import os
import re
from itertools import repeat
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from dumpscope.core.engines.compare import report
from dumpscope.core.engines.compare.report import (_FLOATS, COLUMNS, ERROR_FILL, FIRST_KEYS, MAX_SHEET_ROWS,
                                                   WARNING_FILL, ExportError, TableCells, is_first, summary_rows)
from dumpscope.core.engines.compare.table_columns import block_columns, chunk_columns, joined_columns
from dumpscope.core.support.row_columns import FloatSpellings, has_negative_zero


class TableFile:
    """A compare table being written to ``path`` (``kind`` ``.csv`` or ``.xlsx``, by default its
    extension) from a document's rows handed over in order (:meth:`add`): :meth:`close` puts the file
    in place and returns its row count, :meth:`abort` leaves nothing.

    Rows are held a chunk at a time (their stacks looked up together), so an output that reads the
    rows anyway can write the table on the way (``TableAsMade``).  The CSV is ``csv.writer``'s (each
    chunk's lines made by ``_CsvLines``, the same bytes); the workbook ``xlsx_stream``'s, error rows
    red and warning rows yellow, streamed: memory stays flat on a million-row compare.

    ``deferred`` (no ``doc`` yet: ``TableAsMade``): each row's first-divergence cell is a slot, and
    :meth:`close` is given the document: the slots of the first divergence's rows are filled ``yes``.  The
    CSV's rows are written to a temporary part, each slot a NUL byte, and copied into the file through
    ``_SlotFill``; the workbook's slots are written empty (each sheet deflated into the temporary part as it
    is written) and the book is given the few to fill (``XlsxWriter.close``).

    ``printed``: the rows are printed as JSON too, in the same block (``compare --json --output``): a column
    of floats is spelled once for the print and the table (``row_columns.FloatSpellings``), not looked up.
    """

    def __init__(self, doc: Optional[dict[str, Any]], path: str,
                 stacks: Optional[Callable[[dict[str, Any]], Any]] = None, kind: Optional[str] = None,
                 deferred: bool = False, printed: bool = False) -> None:
        from dumpscope.core.support.atomic_write import replacing

        kind = kind or os.path.splitext(path)[1].lower()
        if kind not in (".csv", ".xlsx"):
            raise ExportError(f"{path}: unknown output type {kind or '(none)'!r}: use .csv, .xlsx or .json")
        self.doc, self.path, self.kind = doc, path, kind
        self.rows = 0
        self.deferred = deferred
        if deferred:
            from dumpscope.core.engines.compare.xlsx_stream import SLOT

            self._cells = TableCells(None, stacks, first_slot=_CSV_SLOT if kind == ".csv" else SLOT,
                                     float_texts=_CsvFloats(printed) if kind == ".csv" else None)
        else:
            self._cells = TableCells(doc, stacks, float_texts=_CsvFloats(printed) if kind == ".csv" else None)
        self._prefetch = getattr(stacks, "prefetch", None)
        self._held: list[dict[str, Any]] = []
        self._held_columns: list[Any] = []  # each block's columns held (``add_rows``), None for a row added
        self._replacing: Any = replacing(path)
        self._fh: Any = None
        self._part: Any = None
        try:
            tmp = self._replacing.__enter__()
            if deferred or kind == ".xlsx":  # (the CSV's rows until they are filled; the book's sheets)
                import tempfile

                self._part = tempfile.TemporaryFile(prefix="dumpscope-table-")
            if kind == ".csv":
                # csv.writer writes into a list, encoded a chunk at a time: a text file's write per row
                # (its encoder, its pending buffer) cost ~1 us a row
                self._fh = open(tmp, "wb")
                self._lines: list[str] = []
                self._csv_out = self._part if deferred else self._fh
                self._csv = csv.writer(_Lines(self._lines.append))
                self._csv.writerow(COLUMNS)
                self._put_lines()
                self._csv_lines = _CsvLines(self._lines, self._csv.writerow) if _CSV_FAST else None
            else:
                from dumpscope.core.engines.compare.xlsx_stream import XlsxWriter

                self._fh = open(tmp, "wb")
                # (a row's NPU and Bench Name are its tensor's own: written inline, not shared)
                self._book = XlsxWriter(self._fh, {"error": ERROR_FILL, "warning": WARNING_FILL}, scratch=self._part,
                                        own_texts=_OWN_TEXTS, floats=FloatSpellings(look_up=not printed))
                self._sheets = 0
        except OSError as exc:
            self.abort()
            raise ExportError(f"{path}: {exc.strerror or exc}") from None

    def add(self, row: dict[str, Any]) -> None:
        self._held.append(row)
        self._held_columns.append(None)
        if len(self._held) >= report.CHUNK_ROWS:  # (read here: a test makes chunks small)
            self._write_held()

    def add_rows(self, rows: list[dict[str, Any]]) -> None:
        """``add`` of each of ``rows`` (the chunks may be longer: the same table), a spool's block as it
        is stored: its columns made now, once for its print too (``table_columns.block_columns``)."""
        self._held += rows
        self._held_columns.append(block_columns(rows))
        if len(self._held) >= report.CHUNK_ROWS:
            self._write_held()

    def _write_held(self) -> None:
        chunk, self._held = self._held, []
        held_columns, self._held_columns = self._held_columns, []
        if not chunk:
            return
        if self._prefetch is not None:
            self._prefetch(chunk)
        try:
            if self.kind == ".csv":
                if self._csv_lines is not None:
                    for part, plain in _parts(chunk):
                        got = chunk_columns(self._cells, part, _given(part, chunk, held_columns)) if plain else None
                        if got is not None:  # (made by column, spelled by column)
                            self._lines.append(self._csv_lines.of_columns(got[0], got[2], self._cells.float_texts))
                            self.rows += len(part)
                        else:
                            self.rows += self._csv_lines.add(self._cells.of(part))
                else:
                    self._csv.writerows(self._csv_cells(self._cells.of(chunk)))
                self._put_lines()
            else:
                for part, plain in _parts(chunk):
                    got = chunk_columns(self._cells, part, _given(part, chunk, held_columns)) if plain else None
                    if got is not None:  # (made by column, written as columns)
                        self._put_columns(*got)
                    else:
                        self._put_rows(list(self._cells.of(part)))
        except OSError as exc:
            self.abort()
            raise ExportError(f"{self.path}: {exc.strerror or exc}") from None
        except UnicodeEncodeError as exc:  # (a text of a dump that is not UTF-8: a lone surrogate)
            self.abort()
            raise ExportError(f"{self.path}: a cell cannot be written as UTF-8: {exc.reason}") from None

    def _put_rows(self, made: list[tuple[list[Any], Optional[str]]]) -> None:
        """Table rows ``(cells, fill)`` into the book (written column by column: ``XlsxWriter.rows``)."""
        for i, j in self._sheet_cuts(len(made)):
            self._book.rows(made[i:j] if j - i < len(made) else made)

    def _put_columns(self, cols: list[Any], fills: list[Optional[str]], types: list[Any]) -> None:
        """Table rows given as their columns (``table_columns.chunk_columns``'s) into the book."""
        n = len(fills)
        for i, j in self._sheet_cuts(n):
            if j - i < n:
                self._book.columns([col[i:j] for col in cols], fills[i:j], types)
            else:
                self._book.columns(cols, fills, types)

    def _sheet_cuts(self, n: int) -> Iterator[tuple[int, int]]:
        """The next ``n`` table rows cut where a sheet ends, as ``(from, to)``, counted as written: a new
        sheet is started at the first row and one past each sheet's last (``MAX_SHEET_ROWS``)."""
        i = 0
        while i < n:
            if self.rows % MAX_SHEET_ROWS == 0:
                self._new_sheet()
            take = min(n - i, MAX_SHEET_ROWS - self.rows % MAX_SHEET_ROWS)
            yield i, i + take
            i += take
            self.rows += take

    def _put_lines(self) -> None:
        """The CSV lines written so far, encoded into the file (or the part)."""
        lines = self._lines
        data = "".join(lines).encode("utf-8")
        lines.clear()
        self._csv_out.write(data)

    def _csv_cells(self, made: Iterator[tuple[list[Any], Optional[str]]]) -> Iterator[list[Any]]:
        """The cells as ``csv.writer`` writes them (``_csv_row``), counted."""
        n = 0
        for cells, _ in made:
            n += 1
            yield _csv_row(cells)
        self.rows += n

    def _new_sheet(self) -> None:
        self._sheets += 1
        self._book.sheet("Sheet1" if self._sheets == 1 else f"Sheet{self._sheets}")
        self._book.row(COLUMNS)

    def close(self, doc: Optional[dict[str, Any]] = None) -> int:
        """Write what is held, finish the file and put it in place; the number of data rows.  A deferred
        table is given its document now (its rows are the rows added, in order)."""
        self._write_held()
        if self.deferred:
            self.doc = doc if doc is not None else {}
        try:
            first = self._first_rows() if self.deferred else []
            slots = None
            if self.kind == ".xlsx":
                if self._sheets == 0:
                    self._new_sheet()
                summary = summary_rows(self.doc)
                if summary:  # after msprobe's sheets, so a script reading Sheet1 finds what it always found
                    self._book.sheet("Summary")
                    for line in summary:
                        self._book.row(line)
                slots = self._book.slots if self.deferred else None
                if slots is None or slots == self.rows:
                    # (table row t: its sheet's row t % MAX_SHEET_ROWS + 2, under the sheet's header)
                    self._book.close({(t // MAX_SHEET_ROWS + 1, t % MAX_SHEET_ROWS + 2): "yes" for t in first})
            elif self.deferred:
                fill = _SlotFill(first)
                self._copy_part(fill)
                slots = fill.k
            if slots is not None and slots != self.rows:
                raise ExportError(f"{self.path}: {slots} first-divergence cells for {self.rows} rows (a bug)")
            self._fh.close()
            self._fh = None
            replacing, self._replacing = self._replacing, None
            replacing.__exit__(None, None, None)
        except OSError as exc:
            self.abort()
            raise ExportError(f"{self.path}: {exc.strerror or exc}") from None
        except UnicodeEncodeError as exc:
            self.abort()
            raise ExportError(f"{self.path}: a cell cannot be written as UTF-8: {exc.reason}") from None
        except BaseException:  # (an ExportError, ctrl-C: nothing left behind)
            self.abort()
            raise
        self._close_part()
        return self.rows

    def _first_rows(self) -> list[int]:
        """The table rows (0-based, in order) of the first divergence's rows: those whose key's hash is
        its key's, each checked on the row itself (read back from the document's rows by number)."""
        fd = self.doc.get("first_divergence")
        if not fd:
            return []
        cells = self._cells
        n = len(cells.keys)
        items = [(k, fd[k]) for k in FIRST_KEYS if k in fd]
        try:
            if len(items) < len(FIRST_KEYS):
                raise TypeError  # (a key missing: not the hash of the rows' keys)
            wanted = hash(tuple(v for _, v in items))
            found: Iterable[int] = [i for i, h in enumerate(cells.keys) if h == wanted]
        except TypeError:  # (a key of no hash, which rows of no hash may equal: every row looked at)
            found = range(n)
        rows: Sequence[dict[str, Any]] = self.doc.get("rows", [])
        if len(rows) != n:
            raise ExportError(f"{self.path}: {n} rows written, the document has {len(rows)} (a bug)")
        found = list(found)
        if len(found) > 64:  # read in order, each block of rows once
            want = set(found)
            picked = [i for i, row in enumerate(rows) if i in want and is_first(row, fd)]
        else:
            picked = [i for i in found if is_first(rows[i], fd)]
        return _table_rows(picked, cells.spread)

    def _copy_part(self, fill: "_SlotFill") -> None:
        """The CSV part into the file, its slots filled.  Each row holds one NUL, its slot, unless a
        cell of its own holds a NUL too (never in a compare's rows: their texts are inert): then there
        are more NULs than rows, and the part is copied again, parsed (``_fill_parsed``)."""
        part, out = self._part, self._fh
        part.seek(0)
        while True:
            data = part.read(_COPY_BYTES)
            if not data:
                break
            out.write(fill(data))
        if fill.k != self.rows:
            part.seek(0)
            out.seek(0)
            out.truncate()
            fill.k = 0
            _fill_parsed(part, out.write, fill, self.path)

    def _close_part(self) -> None:
        part, self._part = self._part, None
        if part is not None:
            try:
                part.close()
            except (OSError, ValueError):
                pass

    def abort(self) -> None:
        """Stop: the temporary file is removed, nothing is put in place (again: nothing happens)."""
        if self._fh is not None:
            try:
                book = getattr(self, "_book", None)
                if book is not None:  # (nothing of it is in the file yet)
                    book.discard()
            except (OSError, ValueError):
                pass
            try:
                self._fh.close()
            except OSError:
                pass
            self._fh = None
        self._close_part()
        replacing, self._replacing = self._replacing, None
        if replacing is not None:
            stop = ExportError(f"{self.path}: not written")
            replacing.__exit__(ExportError, stop, None)  # (removes the file; the exception is not raised)


#: the floats a CSV spells otherwise (msprobe's " inf" / " -inf")
_INFS = frozenset((math.inf, -math.inf))
#: a deferred CSV's first-divergence cell until it is filled (``_SlotFill``), and where it sits
_CSV_SLOT = "\x00"
_CSV_SLOT_BYTE = b"\x00"
_FIRST_COLUMN = COLUMNS.index("first_divergence")
#: the workbook's columns of a row's own texts (``XlsxWriter``'s ``own_texts``): a tensor's names
_OWN_TEXTS = (COLUMNS.index("NPU Name"), COLUMNS.index("Bench Name"))
#: bytes of a part copied at a time
_COPY_BYTES = 1 << 20
#: the fewest rows of tensors made by column (``_parts``): fewer cost more by column than by row (even at ~10
#: rows of the 20k noisy compare: a column's fixed costs)
_COLUMN_RUN = 16
#: one CSV field as ``csv.writer`` writes it (quoted when it holds a quote, comma, CR or LF), and what ends it
_CSV_FIELD = re.compile(rb'("(?:[^"]|"")*"|[^,"\r\n]*)(,|\r\n)')


def _given(part: list[dict[str, Any]], chunk: list[dict[str, Any]], held: list[Any]) -> Any:
    """The columns of ``part`` made as its blocks were added, when it is the whole chunk (``_parts``: no
    scalar argument in it) and was added a block at a time."""
    return joined_columns(held) if part is chunk else None


def _parts(chunk: list[dict[str, Any]]) -> Iterator[tuple[list[dict[str, Any]], bool]]:
    """A chunk of the workbook's rows in order, as ``(rows, plain)``: runs of at least ``_COLUMN_RUN`` rows of
    tensors are plain (made by column: ``table_columns``), the rest (a non-tensor argument, made one or more
    table rows by ``TableCells.of``, and short runs between them) not: an API dump's chunk interleaves them."""
    kinds = list(map(dict.get, chunk, repeat("kind")))
    if "scalar" not in kinds:
        yield chunk, True
        return
    start = 0  # the rows not yet given
    run = 0  # where the current run of tensors starts
    for i, kind in enumerate(kinds):
        if kind != "scalar":
            continue
        if i - run >= _COLUMN_RUN:
            if run > start:
                yield chunk[start:run], False
            yield chunk[run:i], True
            start = i
        run = i + 1
    if len(chunk) - run >= _COLUMN_RUN:
        if run > start:
            yield chunk[start:run], False
        yield chunk[run:], True
    elif start < len(chunk):
        yield chunk[start:], False


def _fill_parsed(part: Any, write: Callable[[bytes], Any], fill: "_SlotFill", path: str) -> None:
    """A deferred CSV part copied field by field, its rows' first-divergence fields (each a NUL)
    filled: the slow way, for a part whose cells hold NULs of their own (``TableFile._copy_part``)."""
    buf, pos, column, eof = b"", 0, 0, False
    while True:
        m = _CSV_FIELD.match(buf, pos)
        if m is None:  # (a field cut by the chunk's end: read on)
            if eof:
                if pos != len(buf):
                    raise ExportError(f"{path}: the table's part ends half-way through a row (a bug)")
                return
            more = part.read(_COPY_BYTES)
            buf, pos, eof = buf[pos:] + more, 0, not more
            continue
        field = m.group(1)
        if column == _FIRST_COLUMN and m.group(0) != b"\x00,":  # (the header's field is its name)
            if fill.k or field != b"first_divergence":
                raise ExportError(f"{path}: a row's first-divergence cell is not where it was written (a bug)")
            write(m.group(0))
        elif column == _FIRST_COLUMN:
            write(fill(_CSV_SLOT_BYTE) + b",")
        else:
            write(m.group(0))
        column = 0 if m.group(2) == b"\r\n" else column + 1
        pos = m.end()


class _Lines:
    """What ``csv.writer`` writes into: each line handed to ``write`` (a list's ``append``)."""

    __slots__ = ("write",)

    def __init__(self, write: Callable[[str], Any]) -> None:
        self.write = write


class _CsvLines:
    """``csv.writer``'s lines (its default dialect: ``,``, ``"`` doubled, ``\\r\\n``, minimal quoting) of
    the table's rows, appended to ``lines``, made by lookups: the writer's own work was half the table's
    (8.3 of ~17 us a row on the 20k noisy compare: it scans every character of every cell).

    A row of texts, ints and None only (the CSV's floats are texts already: ``_CsvFloats``) is one
    lookup of its cells' fields (``_CsvFields``: a text quoted if it holds a comma, quote, CR or LF, its
    quotes doubled; an int as ``str``; None empty), joined; only a cell seen for the first time (a
    tensor's name, a new number) takes Python code.  Keys are texts, ints and None only, so no two
    keys of different types are equal (``1``, ``1.0`` and ``True`` would be).  Any other row (a
    float, a bool, a numpy number: msprobe's requires_grad) goes through ``writerow`` as before, its
    ±Inf as `` inf``/`` -inf``.  ``_CSV_FAST`` checks once that ``csv.writer`` spells a sample of
    fields so on this Python; if not, the table is ``csv.writer``'s alone."""

    __slots__ = ("lines", "writerow", "fields")

    def __init__(self, lines: list[str], writerow: Callable[[list[Any]], Any]) -> None:
        self.lines = lines
        self.writerow = writerow
        self.fields = _CsvFields()

    def add(self, made: Iterable[tuple[list[Any], Optional[str]]]) -> int:
        """The lines of ``made``'s rows; their number."""
        fields = self.fields
        field, add, fast = fields.__getitem__, self.lines.append, _FAST_TYPES.issuperset
        n = 0
        for cells, _ in made:
            n += 1
            if fast(map(type, cells)):
                add(",".join(map(field, cells)) + "\r\n")
            else:
                self.writerow(_csv_row(cells))
        if len(fields) >= _CSV_KNOWN_MAX:  # (each tensor's name is new: memory stays bounded)
            fields.clear()
        return n

    def of_columns(self, cols: list[Any], types: list[Optional[type]], floats: "_CsvFloats") -> str:
        """The lines of a chunk's rows given as columns (``table_columns.chunk_columns``, floats as floats),
        each the line ``add`` makes of its row (or ``csv.writer`` of a row ``add`` leaves to it): a float is
        its CSV text (a column of finite ones their ``repr``, ``FloatSpellings``; else ``_CsvFloats``, or
        ``repr`` with ±Inf as `` inf``/`` -inf``: what ``csv.writer`` and ``_csv_row`` make of one in any
        row), a text, int or None its field (``_CsvFields``), a bool its ``str``, anything else the field
        ``csv.writer`` writes of it.  Each column's fields are looked up in
        one C-level ``map``, the lines joined by one ``zip``: no Python code a row."""
        field = self.fields.__getitem__
        fast = _FAST_TYPES.issuperset
        out = []
        for col, kind in zip(cols, types):
            kinds = {kind} if kind is str else set(map(type, col))
            if fast(kinds):
                out.append(list(map(field, col)))
            elif kinds == _FLOATS and (total := sum(col)) - total == 0:  # (finite: a sum past the largest too)
                out.append(floats.spellings.of(col))  # (their repr: remembered, or spelled once with the print's)
            elif kinds == _FLOATS and not (0.0 in col and has_negative_zero(col)):
                out.append(list(map(floats.known.__getitem__, col)))
            else:
                out.append([field(v) if type(v) in _FAST_TYPES else _csv_field(v) for v in col])
        if len(self.fields) >= _CSV_KNOWN_MAX:
            self.fields.clear()
        return "\r\n".join(map(",".join, zip(*out))) + "\r\n"


def _csv_field(v: Any) -> str:
    """What ``csv.writer`` writes of ``v`` in a row (after ``_csv_row``): a float's ``repr`` (±Inf as msprobe's
    `` inf``/`` -inf``), a bool's ``str``, any other value's field as the writer quotes it."""
    if type(v) is float:
        return _csv_float(v)
    if type(v) is bool:
        return str(v)
    got: list[str] = []
    csv.writer(_Lines(got.append)).writerow(_csv_row([v, None]))  # (two fields: an empty one is not quoted)
    return got[0][:-3]


class _CsvFields(dict):
    """A text's, an int's or None's CSV field, made at its first lookup (``__missing__``: a C-level
    lookup for every cell, Python code for a new one only) and remembered."""

    def __missing__(self, v: Any) -> str:
        if v is None:
            f = ""
        elif type(v) is int:
            f = str(v)
        elif _CSV_QUOTE(v):
            f = '"' + v.replace('"', '""') + '"'
        else:
            f = v
        self[v] = f
        return f


def _csv_row(cells: list[Any]) -> list[Any]:
    """A row's cells as ``csv.writer`` is given them: ±Inf as msprobe's `` inf``/`` -inf`` (NaN is
    written ``nan`` and None empty by the writer itself)."""
    try:
        if _INFS.isdisjoint(cells):
            return cells
    except TypeError:  # an unhashable cell (a list): look one by one
        pass
    return [v if not isinstance(v, float) or v - v == 0 or v != v else (" inf" if v > 0 else " -inf") for v in cells]


#: the cell types of a row ``_CsvLines`` makes by lookups
_FAST_TYPES = frozenset((str, int, type(None)))
#: what makes csv.writer quote a field (its default dialect)
_CSV_QUOTE = re.compile('[,"\r\n]').search
#: fields ``_CsvLines`` remembers at most
_CSV_KNOWN_MAX = 1 << 16


def _csv_fast_ok() -> bool:
    """Whether ``_CsvLines`` writes what ``csv.writer`` writes on this Python, on fields of every kind it
    spells itself (quotes, separators, line ends, NUL, spaces, non-ASCII, ints, None, empty)."""
    import io

    rows = [["a", "", None, 0, -12, 10 ** 20, "x,y", 'q"q', '"', "r\rr", "n\nn", "\x00", " s ", "\t",
             "é ≤ 2^-11", "[1, 16, 8, 8]", "'=1", "N/A", "a'b"], ["", None], ['""', ",", "\r\n"]]
    want = io.StringIO(newline="")
    csv.writer(want).writerows(rows)
    got: list[str] = []
    _CsvLines(got, csv.writer(_Lines(got.append)).writerow).add((r, None) for r in rows)
    return "".join(got) == want.getvalue()


class _CsvFloats:
    """The CSV's texts of a list of floats (``repr``, msprobe's `` inf``/`` -inf``, ``nan``), looked up by
    value: most of a compare table's numbers recur (an op's output statistics are the next op's input's,
    identical sides give the same statistics twice, the metrics of equal tensors are 0.0 and 1.0: 56-96 %
    of the float cells of the compares of tests/data), and the shortest ``repr`` of a double costs ten
    lookups (the 20k noisy compare's CSV: 21.5 -> 19 us a row).  -0.0 equals 0.0 as a key: a list
    holding one (``row_columns.has_negative_zero``) is given back as it is, for csv.writer to spell; a NaN
    is never a key.  A chunk's column of finite floats goes through ``spellings``
    (``row_columns.FloatSpellings``, the workbook's too: spelled whole at a new value, or taken from the
    JSON print's)."""

    def __init__(self, printed: bool = False) -> None:
        self.known = _FloatTexts()
        # (a column of finite floats: ``_CsvLines.of_columns``; taken from the JSON print's when ``printed``)
        self.spellings = FloatSpellings(look_up=not printed)

    def __call__(self, values: list[float]) -> list[Any]:
        if 0.0 in values and has_negative_zero(values):
            return values
        return list(map(self.known.__getitem__, values))


def _csv_float(v: float) -> str:
    """A float's CSV text: ``repr`` (``nan`` for a NaN), ±Inf as msprobe's `` inf``/`` -inf`` (``_csv_row``)."""
    return repr(v) if v - v == 0 or v != v else (" inf" if v > 0 else " -inf")


class _FloatTexts(dict):
    """A float's CSV text, made at its first lookup (``__missing__``) and remembered (a NaN is not: it
    equals no key), up to 4096 at a time."""

    def __missing__(self, v: float) -> str:
        text = _csv_float(v)
        if v == v:
            if len(self) >= 4096:
                self.clear()
            self[v] = text
        return text


#: ``_CsvLines`` spells fields as ``csv.writer`` does here (checked once)
_CSV_FAST = _csv_fast_ok()


def _table_rows(picked: list[int], spread: list[tuple[int, int]]) -> list[int]:
    """Row numbers of a compare's rows (in order) as table rows: a row made several table rows (a
    scalar list, ``spread``) moves the later ones down, and is each of its table rows."""
    out: list[int] = []
    j = extra = 0
    for r in picked:
        while j < len(spread) and spread[j][0] < r:
            extra += spread[j][1] - 1
            j += 1
        m = spread[j][1] if j < len(spread) and spread[j][0] == r else 1
        out.extend(range(r + extra, r + extra + m))
    return out


class _SlotFill:
    """Fills the slots of a deferred CSV's part, chunk by chunk in order: the k-th slot (NUL byte) is
    the k-th table row's first-divergence cell, ``yes`` on the rows ``first`` lists, empty elsewhere."""

    def __init__(self, first: list[int]) -> None:
        self.no, self.yes = b"", b"yes"
        self.first = first
        self.last = first[-1] + 1 if first else 0  # the slots from here on are all ``no``
        self.k = 0  # slots filled so far

    def __call__(self, data: bytes) -> bytes:
        k0, first = self.k, self.first
        if k0 >= self.last and len(self.no) != 1:  # past the first divergence: the slots counted by the
            out = data.replace(_CSV_SLOT_BYTE, self.no)  # length the replacing adds (no second pass)
            self.k += (len(out) - len(data)) // (len(self.no) - 1)
            return out
        n = data.count(_CSV_SLOT_BYTE)
        self.k += n
        lo, hi = bisect.bisect_left(first, k0), bisect.bisect_left(first, k0 + n)
        if lo == hi:
            return data.replace(_CSV_SLOT_BYTE, self.no)
        texts = [self.no] * n
        for r in first[lo:hi]:
            texts[r - k0] = self.yes
        pieces = data.split(_CSV_SLOT_BYTE)
        out = [pieces[0]]
        for text, piece in zip(texts, pieces[1:]):
            out.append(text)
            out.append(piece)
        return b"".join(out)


def write_rows(doc: dict[str, Any], rows: Iterable[dict[str, Any]], path: str,
               stacks: Optional[Callable[[dict[str, Any]], Any]], kind: Optional[str] = None) -> int:
    """The table of ``rows`` (``doc``'s) written to ``path`` on its own; the number of data rows."""
    table = TableFile(doc, path, stacks, kind)
    try:
        for row in rows:
            table.add(row)
    except BaseException:
        table.abort()
        raise
    return table.close()


class TableAsMade:
    """``compare [--json] --output x.csv|.xlsx``: the table written as the compare makes its rows (``add``
    is the engine's ``row_sink``), so the rows need only be kept as the document prints them (``--json``),
    or are read back once, for the terminal's print.

    ``add`` (a block of rows) fills the rows' sides (``fill`` of a block, ``report.block_filler`` of
    ``side_filler``'s: the print shows them filled, as the table does) and hands them to a deferred
    ``TableFile``; :meth:`finish` is given the document (its first divergence, its rows to check the first
    divergence's on) and puts the table in place.
    A failure of the table (disk full) does not stop the compare or its print: :meth:`finish` raises
    it.  :meth:`abandon` (the print stopped half-way) leaves nothing.
    """

    def __init__(self, path: str, fill: Callable[[list[dict[str, Any]]], Any],
                 stacks: Optional[Callable[[dict[str, Any]], Any]], printed: bool = False) -> None:
        self.path = path
        self._fill = fill
        self.error: Optional[ExportError] = None
        self._table: Optional[TableFile] = None
        try:
            self._table = TableFile(None, path, stacks, deferred=True, printed=printed)
        except ExportError as exc:
            self.error = exc

    def add(self, rows: list[dict[str, Any]]) -> None:
        """The rows of a block, as the compare hands them (its ``row_sink``)."""
        self._fill(rows)
        table = self._table
        if table is not None:
            try:
                table.add_rows(rows)
            except ExportError as exc:  # (the table has removed its file)
                self._table = None
                self.error = exc

    def finish(self, doc: dict[str, Any]) -> int:
        """The table's row count, once it is in place; its ``ExportError`` if it could not be written."""
        finish_block = getattr(doc.get("rows"), "finish_block", None)
        if finish_block is not None:  # (the spool's last block to ``add``, if it still holds it)
            finish_block()
        table, self._table = self._table, None
        if self.error is not None:
            raise self.error
        assert table is not None
        return table.close(doc)

    def abandon(self) -> None:
        """Stop writing: nothing is put in place (after ``finish``: nothing happens)."""
        table, self._table = self._table, None
        if table is not None:
            table.abort()


def write_csv(doc: dict[str, Any], path: str, stacks: Optional[Callable[[dict[str, Any]], Any]] = None) -> int:
    """Write the msprobe-shaped CSV; returns the number of data rows."""
    return write_rows(doc, doc.get("rows", []), path, stacks, ".csv")


def write_xlsx(doc: dict[str, Any], path: str, stacks: Optional[Callable[[dict[str, Any]], Any]] = None) -> int:
    """Write the msprobe-shaped workbook, error rows red and warning rows yellow; returns the row count.

    Streamed row by row (``xlsx_stream``): memory stays flat on a million-row compare."""
    return write_rows(doc, doc.get("rows", []), path, stacks, ".xlsx")


def write_table(doc: dict[str, Any], path: str, stacks: Optional[Callable[[dict[str, Any]], Any]] = None) -> int:
    """``.csv`` or ``.xlsx`` by the file's extension; returns the number of data rows."""
    return write_rows(doc, doc.get("rows", []), path, stacks)
