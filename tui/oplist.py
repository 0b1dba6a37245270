"""The flat execution-order op list: a virtual list fed page by page from SQL.

Rows are fetched with ``q.ops(rank, step, grep, limit, offset)`` in pages of ``PAGE`` and a
few pages are kept, so scrolling a 100k-op list touches only what is on screen.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Iterable, Optional

from textual import work
from textual.message import Message
from textual.worker import get_current_worker

from dumpscope.core.inert import inert
from dumpscope.core.query import DumpQuery, OpRow
from dumpscope.tui.badges import BadgeState
from dumpscope.tui.fit import middle
from dumpscope.tui.linelist import LineList, Part

PAGE = 256
KEEP_PAGES = 8


class OpList(LineList):
    """Ops of one rank/step in execution order, optionally filtered (``grep``, through SQL)."""

    empty_text = "no ops"

    def __init__(self, badges: BadgeState, **kwargs) -> None:
        super().__init__(**kwargs)
        self.badges = badges
        self.q: Optional[DumpQuery] = None
        self.rank = 0
        self.step = 0
        self.grep: Optional[str] = None
        self._count = 0
        self._pages: OrderedDict[int, list[OpRow]] = OrderedDict()
        self._width_index = 5

    def load(self, q: DumpQuery, rank: int, step: int, grep: Optional[str] = None,
             select: Optional[OpRow] = None) -> None:
        """Show the ops of ``rank``/``step`` (``grep``): their count, the row of ``select`` and its page
        are read in the "list load" worker (a ``COUNT(*)`` over 100k+ ops: never on the UI thread)."""
        self.q, self.rank, self.step, self.grep = q, rank, step, grep or None
        self._pages.clear()
        self._after_load = None
        self._count = 0
        self._loading = True
        self.empty_text = "loading…"
        self.reset(0)
        self._load(q, rank, step, self.grep, select)

    def _key(self) -> tuple:
        return (id(self.q), self.rank, self.step, self.grep)

    @work(thread=True, exclusive=True, group="list-load", name="list load", exit_on_error=False)
    def _load(self, q: DumpQuery, rank: int, step: int, grep: Optional[str], select: Optional[OpRow]) -> None:
        try:
            count = q.count_ops(rank, step, grep)
            cursor = q.op_position(select, grep) if select is not None and (select.rank, select.step) == (rank, step) \
                else 0
            cursor = max(0, min(cursor, count - 1))
            page_no = cursor // PAGE
            pages = {page_no: q.ops(rank, step, grep, limit=PAGE, offset=page_no * PAGE)} if count else {}
        except Exception as exc:  # a damaged index: the list says so, the app keeps running
            count, cursor, pages = 0, 0, {}
            error: Optional[str] = f"! cannot list the ops: {type(exc).__name__}"
        else:
            error = None
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._loaded, (id(q), rank, step, grep), count, cursor, pages, error)

    def _loaded(self, key: tuple, count: int, cursor: int, pages: dict[int, list[OpRow]],
                error: Optional[str]) -> None:
        if key != self._key():
            return  # another place or filter was asked for meanwhile
        self._loading = False
        self._count = count
        self._width_index = max(3, len(str(count)))
        self._pages.update(pages)
        self.empty_text = error or type(self).empty_text
        self.reset(cursor)
        after, self._after_load = getattr(self, "_after_load", None), None
        if after is not None:
            after()
        self.post_message(self.Loaded(self))

    class Loaded(Message):
        """The list has its rows (count and first page) after a ``load``."""

        def __init__(self, sender: "OpList") -> None:
            super().__init__()
            self.list = sender

    @property
    def reading(self) -> bool:
        """True from a ``load`` until its rows are here (not Textual's ``loading``: that hides the widget)."""
        return getattr(self, "_loading", False)

    def row_count(self) -> int:
        return self._count

    def op_at(self, index: int) -> Optional[OpRow]:
        """The op on row ``index``, or None while its page is read (in the "list page" worker)."""
        if self.q is None or not 0 <= index < self._count:
            return None
        page_no = index // PAGE
        page = self._pages.get(page_no)
        if page is None:
            self._want_pages()
            return None
        self._pages.move_to_end(page_no)
        offset = index - page_no * PAGE
        return page[offset] if offset < len(page) else None

    def _window_pages(self) -> list[int]:
        """Pages of the rows on screen and of the cursor, and the next/previous page when the cursor or the
        screen is within half a page of them (scrolling on finds its rows already read)."""
        if not self._count:
            return []
        top = round(self.scroll_y)
        rows = self.page_rows
        lo = max(0, min(top, self.cursor) - PAGE // 2)
        hi = min(self._count - 1, max(top + rows, self.cursor) + PAGE // 2)
        return list(range(lo // PAGE, hi // PAGE + 1))

    def _want_pages(self) -> None:
        missing = tuple(p for p in self._window_pages() if p not in self._pages)
        if missing and missing != getattr(self, "_fetching", None) and self.q is not None:
            self._fetching = missing
            self._fetch(self.q, self.rank, self.step, self.grep, missing)

    @work(thread=True, exclusive=True, group="list-page", name="list page", exit_on_error=False)
    def _fetch(self, q: DumpQuery, rank: int, step: int, grep: Optional[str], pages: tuple[int, ...]) -> None:
        got: dict[int, list[OpRow]] = {}
        for page_no in pages:
            if get_current_worker().is_cancelled:
                return
            try:
                got[page_no] = q.ops(rank, step, grep, limit=PAGE, offset=page_no * PAGE)
            except Exception:  # a damaged index: the rows stay "…", the app keeps running
                got[page_no] = []
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._fetched, (id(q), rank, step, grep), got)

    def _fetched(self, key: tuple, got: dict[int, list[OpRow]]) -> None:
        if getattr(self, "_fetching", None) == tuple(got):
            self._fetching = None
        if key != self._key():
            return
        self._pages.update(got)
        while len(self._pages) > KEEP_PAGES:
            self._pages.popitem(last=False)
        self.refresh()
        if self.cursor // PAGE in got:  # the cursor's op was not known when it moved there: say it now
            self.post_message(self.Highlighted(self, self.cursor))

    def render_lines(self, crop):
        lines = super().render_lines(crop)
        self._want_pages()  # read ahead of the cursor (nothing when the pages are here)
        return lines

    @property
    def current(self) -> Optional[OpRow]:
        return self.op_at(self.cursor)

    def seek(self, op: OpRow, missing: Optional[Callable[[], None]] = None) -> None:
        """Move the cursor to ``op``: its position and page are read in the "list seek" worker (two
        queries over up to 100k+ ops: a jump never waits on them); ``missing()`` when ``op`` is not here."""
        if self.q is None or op.rank != self.rank or op.step != self.step:
            if missing is not None:
                missing()
            return
        self._seek(self.q, op, self.grep, missing)

    @work(thread=True, exclusive=True, group="list-seek", name="list seek", exit_on_error=False)
    def _seek(self, q: DumpQuery, op: OpRow, grep: Optional[str], missing: Optional[Callable[[], None]]) -> None:
        try:
            pos = q.op_position(op, grep)
            page_no = pos // PAGE
            page = q.ops(op.rank, op.step, grep, limit=PAGE, offset=page_no * PAGE)
        except Exception:  # a damaged index: the op is shown, only the list cursor stays
            page_no, pos, page = 0, -1, []
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._seeked, q, grep, op, pos, page_no, page, missing)

    def _seeked(self, q: DumpQuery, grep: Optional[str], op: OpRow, pos: int, page_no: int, page: list[OpRow],
                missing: Optional[Callable[[], None]]) -> None:
        if q is not self.q or grep != self.grep or (op.rank, op.step) != (self.rank, self.step):
            return  # the list was reloaded meanwhile
        if self.reading:  # the reload's count is not here yet: seek again once it is
            self._after_load = lambda: self.seek(op, missing)
            return
        offset = pos - page_no * PAGE
        found = page[offset] if 0 <= offset < len(page) else None
        if found is None or found.id != op.id:
            if missing is not None:
                missing()
            return
        self._pages[page_no] = page
        while len(self._pages) > KEEP_PAGES:
            self._pages.popitem(last=False)
        self.cursor = pos

    def row_parts(self, index: int) -> Iterable[Part]:
        op = self.op_at(index)
        if op is None:
            return [("…", "linelist--muted")]
        idx = "" if op.exec_index is None else str(op.exec_index)
        name_class = "linelist--dim" if op.graph_only else None
        parts: list[Part] = [(idx.rjust(self._width_index) + " ", "linelist--muted")]
        parts += self.badges.parts(op)
        # the scope tells two ``AddN-op1`` apart: the full name, cut in the middle (block and leaf kept)
        room = self.scrollable_content_region.width - sum(len(t) for t, _ in parts) - 1
        name = middle(op.name, max(len(op.short), room))
        scope, _, leaf = name.rpartition("/")
        parts.append((" ", None))
        if scope:
            parts.append((inert(scope) + "/", "linelist--muted" if not op.graph_only else "linelist--dim"))
        parts.append((inert(leaf), name_class))
        if room - len(name) >= len(op.type) + 2:
            parts.append(("  " + inert(op.type), "linelist--muted"))
        return parts
