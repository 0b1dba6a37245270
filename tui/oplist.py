"""The flat execution-order op list: a virtual list fed page by page from SQL.

Rows are fetched with ``q.ops(rank, step, grep, limit, offset)`` in pages of ``PAGE`` and a
few pages are kept, so scrolling a 100k-op list touches only what is on screen.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Iterable, Optional

from textual import work
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
        self.q, self.rank, self.step, self.grep = q, rank, step, grep or None
        self._pages.clear()
        self._count = q.count_ops(rank, step, self.grep)
        self._width_index = max(3, len(str(self._count)))
        cursor = 0
        if select is not None and select.rank == rank and select.step == step:
            cursor = q.op_position(select, self.grep)
        self.reset(cursor)

    def row_count(self) -> int:
        return self._count

    def op_at(self, index: int) -> Optional[OpRow]:
        if self.q is None or not 0 <= index < self._count:
            return None
        page_no = index // PAGE
        page = self._pages.get(page_no)
        if page is None:
            page = self.q.ops(self.rank, self.step, self.grep, limit=PAGE, offset=page_no * PAGE)
            self._pages[page_no] = page
            while len(self._pages) > KEEP_PAGES:
                self._pages.popitem(last=False)
        else:
            self._pages.move_to_end(page_no)
        offset = index - page_no * PAGE
        return page[offset] if offset < len(page) else None

    @property
    def current(self) -> Optional[OpRow]:
        return self.op_at(self.cursor)

    def select_op(self, op: OpRow) -> bool:
        """Move the cursor to ``op``; False when it is not in this list (other step, filtered out)."""
        if self.q is None or op.rank != self.rank or op.step != self.step:
            return False
        pos = self.q.op_position(op, self.grep)
        found = self.op_at(pos)
        if found is None or found.id != op.id:
            return False
        self.cursor = pos
        return True

    def seek(self, op: OpRow, missing: Optional[Callable[[], None]] = None) -> None:
        """Like ``select_op``, but the position and its page are read in the "list seek" worker (two
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
