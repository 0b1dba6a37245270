"""The compare table written to a file (``.csv`` / ``.xlsx``) from a document's rows given in order.

``compare --json --output x.csv`` read the rows back from the spool, decoded and filled them twice:
once for the table, once for the print (a fifth of the table's cost, issue 33).  ``TableFile`` takes
the rows one by one, so ``TableAlongside`` can write the table from the pass the print makes anyway;
``write_rows`` is the table written on its own (``write_table``).  The cells are
``report.table_rows``'s; the CSV is ``csv.writer``'s, the workbook ``xlsx_stream``'s.
"""

from __future__ import annotations

import csv
import math
import os
from typing import Any, Callable, Iterable, Iterator, Optional

from dumpscope.core.engines.compare import report
from dumpscope.core.engines.compare.report import (COLUMNS, ERROR_FILL, MAX_SHEET_ROWS, WARNING_FILL, ExportError,
                                                   TableCells, summary_rows)
from dumpscope.core.support.row_spool import MappedRows


class TableFile:
    """A compare table being written to ``path`` (``kind`` ``.csv`` or ``.xlsx``, by default its
    extension) from a document's rows handed over in order (:meth:`add`): :meth:`close` puts the file
    in place and returns its row count, :meth:`abort` leaves nothing.

    Rows are held a chunk at a time (their stacks looked up together), so an output that reads the
    rows anyway can write the table on the way (``TableAlongside``).  The CSV is ``csv.writer``'s
    (``writerows`` on each chunk); the workbook ``xlsx_stream``'s, error rows red and warning rows
    yellow, streamed: memory stays flat on a million-row compare.
    """

    def __init__(self, doc: dict[str, Any], path: str, stacks: Optional[Callable[[dict[str, Any]], Any]] = None,
                 kind: Optional[str] = None) -> None:
        from dumpscope.core.support.atomic_write import replacing

        kind = kind or os.path.splitext(path)[1].lower()
        if kind not in (".csv", ".xlsx"):
            raise ExportError(f"{path}: unknown output type {kind or '(none)'!r}: use .csv, .xlsx or .json")
        self.doc, self.path, self.kind = doc, path, kind
        self.rows = 0
        self._cells = TableCells(doc, stacks)
        self._prefetch = getattr(stacks, "prefetch", None)
        self._held: list[dict[str, Any]] = []
        self._replacing: Any = replacing(path)
        self._fh: Any = None
        try:
            tmp = self._replacing.__enter__()
            if kind == ".csv":
                self._fh = open(tmp, "w", encoding="utf-8", newline="")
                self._csv = csv.writer(self._fh)
                self._csv.writerow(COLUMNS)
            else:
                from dumpscope.core.engines.compare.xlsx_stream import XlsxWriter

                self._fh = open(tmp, "wb")
                self._book = XlsxWriter(self._fh, {"error": ERROR_FILL, "warning": WARNING_FILL})
                self._sheets = 0
        except OSError as exc:
            self.abort()
            raise ExportError(f"{path}: {exc.strerror or exc}") from None

    def add(self, row: dict[str, Any]) -> None:
        self._held.append(row)
        if len(self._held) >= report.CHUNK_ROWS:  # (read here: a test makes chunks small)
            self._write_held()

    def _write_held(self) -> None:
        chunk, self._held = self._held, []
        if not chunk:
            return
        if self._prefetch is not None:
            self._prefetch(chunk)
        try:
            if self.kind == ".csv":
                self._csv.writerows(self._csv_cells(self._cells.of(chunk)))
            else:
                book, rows = self._book, self.rows
                for cells, verdict in self._cells.of(chunk):
                    if rows % MAX_SHEET_ROWS == 0:  # the first row, and one past each sheet's last
                        self._new_sheet()
                    book.row(cells, verdict)
                    rows += 1
                    self.rows = rows
        except OSError as exc:
            self.abort()
            raise ExportError(f"{self.path}: {exc.strerror or exc}") from None

    def _csv_cells(self, made: Iterator[tuple[list[Any], Optional[str]]]) -> Iterator[list[Any]]:
        """The cells as the CSV writes them: ``csv.writer`` writes None as an empty cell and NaN as
        ``nan`` itself; ±Inf become msprobe's `` inf``/`` -inf`` (a row without one is passed as it is)."""
        n = 0
        for cells, _ in made:
            n += 1
            try:
                if _INFS.isdisjoint(cells):
                    yield cells
                    continue
            except TypeError:  # an unhashable cell (a list): look one by one
                pass
            yield [v if not isinstance(v, float) or v - v == 0 or v != v else (" inf" if v > 0 else " -inf")
                   for v in cells]
        self.rows += n

    def _new_sheet(self) -> None:
        self._sheets += 1
        self._book.sheet("Sheet1" if self._sheets == 1 else f"Sheet{self._sheets}")
        self._book.row(COLUMNS)

    def close(self) -> int:
        """Write what is held, finish the file and put it in place; the number of data rows."""
        self._write_held()
        try:
            if self.kind == ".xlsx":
                if self._sheets == 0:
                    self._new_sheet()
                summary = summary_rows(self.doc)
                if summary:  # after msprobe's sheets, so a script reading Sheet1 finds what it always found
                    self._book.sheet("Summary")
                    for line in summary:
                        self._book.row(line)
                self._book.close()
            self._fh.close()
            self._fh = None
            replacing, self._replacing = self._replacing, None
            replacing.__exit__(None, None, None)
        except OSError as exc:
            self.abort()
            raise ExportError(f"{self.path}: {exc.strerror or exc}") from None
        return self.rows

    def abort(self) -> None:
        """Stop: the temporary file is removed, nothing is put in place (again: nothing happens)."""
        if self._fh is not None:
            try:
                book = getattr(self, "_book", None)
                if book is not None:  # finished into the file about to go: no zip left to finish at exit
                    book.close()
            except (OSError, ValueError):
                pass
            try:
                self._fh.close()
            except OSError:
                pass
            self._fh = None
        replacing, self._replacing = self._replacing, None
        if replacing is not None:
            stop = ExportError(f"{self.path}: not written")
            replacing.__exit__(ExportError, stop, None)  # (removes the file; the exception is not raised)


#: the floats a CSV spells otherwise (msprobe's " inf" / " -inf")
_INFS = frozenset((math.inf, -math.inf))


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


class TableAlongside(MappedRows):
    """A document's ``rows`` while its table is written from them by the next output that reads them
    all (the ``--json`` print): the rows are read back from the spool, decoded and filled once for
    both, not once each (reading them was a fifth of the table's cost, issue 33).

    The first pass over the rows that reaches their end writes the table; a pass left half-way (an
    ``any``) writes nothing and leaves nothing.  A failure of the table (disk full) does not stop the
    pass: :meth:`finish` raises it.  :meth:`finish` writes the table on its own when no pass did.
    """

    def __init__(self, doc: dict[str, Any], path: str, stacks: Optional[Callable[[dict[str, Any]], Any]]) -> None:
        super().__init__(doc.get("rows", []), _same)
        self.doc, self.path, self.stacks = doc, path, stacks
        self.written: Optional[int] = None
        self.error: Optional[ExportError] = None
        self._table: Optional[TableFile] = None  # the table of the pass under way

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.written is not None or self.error is not None or self._table is not None:
            return iter(self.rows)  # (written, failed, or a pass under way writes it)
        return self._writing()

    def _writing(self) -> Iterator[dict[str, Any]]:
        try:
            self._table = TableFile(self.doc, self.path, self.stacks)
        except ExportError as exc:
            self.error = exc
            yield from self.rows
            return
        try:
            for row in self.rows:
                if self._table is not None:
                    try:
                        self._table.add(row)
                    except ExportError as exc:
                        self.abandon()  # (the table has removed its file: no harm done twice)
                        self.error = exc
                yield row
            done, self._table = self._table, None
            if done is not None:
                try:
                    self.written = done.close()
                except ExportError as exc:
                    self.error = exc
        finally:
            self.abandon()  # the pass stopped half-way (or failed): no half table

    def abandon(self) -> None:
        """A pass under way stops writing, and its file is removed (after a complete pass: nothing)."""
        table, self._table = self._table, None
        if table is not None:
            table.abort()

    def finish(self) -> int:
        """The table's row count, once it is in place (written now if no pass wrote it); its
        ``ExportError`` if it could not be written."""
        if self.error is not None:
            raise self.error
        if self.written is None:
            self.written = write_rows(self.doc, self.rows, self.path, self.stacks)
        return self.written


def _same(row: dict[str, Any]) -> dict[str, Any]:
    return row


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
