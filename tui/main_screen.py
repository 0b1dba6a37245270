"""The explorer screen: op tree / flat list on the left, op detail and tensor panel on the right.

It appears at once with an "indexing…" placeholder; the app calls ``index_ready`` when the
index is built.  Jumps (links, search, views) go through ``jump_to`` and are remembered in a
history that ``esc`` walks back: to the previous op, or to the view (overflow, compare…) the
jump came from.  Tab cycles the three panes; the focused one is marked by colour and a ``▶``.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual import events, work
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Input, Static, Tree
from textual.worker import get_current_worker

from dumpscope.core.inert import inert
from dumpscope.core.query import DumpQuery, OpRow
from dumpscope.tui.detail import OpDetail
from dumpscope.tui.fit import Bit, fit_bits
from dumpscope.tui.linelist import LineList
from dumpscope.tui.oplist import OpList
from dumpscope.tui.optree import OpTree
from dumpscope.tui.tensor_panel import TensorPanel
from dumpscope.tui.keybar import KeyBar
from dumpscope.tui.explorer import explorer

NARROW = 70
#: seconds the cursor must rest before the detail pane follows it
SHOW_DELAY = 0.04
HISTORY = 200
PANES = ("left", "detail", "tensor")
FOCUS_GLYPH = "▶ "

#: a history entry: the op we left, or the screens to push again to return to a view
Back = Union[OpRow, Callable[[], list[Screen]]]


def unscanned_ops(q: DumpQuery, rank: int, step: int) -> int:
    """Ops of a place whose outputs nobody has counted NaN/Inf in (no Opdebug, statistics or earlier
    scan evidence): an Opdebug run flags every overflow of its place, so such a place counts none."""
    from dumpscope.core.engines.overflow.lookup import places

    found = places(q, rank, step)
    return sum(p["unknown"] for p in found if not p["opdebug"])


def unscanned_text(unscanned: int, count: int) -> str:
    if unscanned >= count:
        return "tensors not scanned: o scans"
    return f"{unscanned:,} ops not scanned: o scans"


class MainScreen(Screen):
    """Tree/list, detail, tensor panel, status bar."""

    BINDINGS = [
        Binding("slash", "search", "Search", tooltip="Search op names and types (fuzzy)", id="dumpscope.search"),
        Binding("n", "next_hit(1)", "Next hit", show=False, tooltip="Next search hit", id="dumpscope.next_hit"),
        Binding("N", "next_hit(-1)", "Prev hit", show=False, tooltip="Previous search hit",
                id="dumpscope.prev_hit"),
        Binding("f", "filter", "Filter", show=False, tooltip="Filter the flat list by name/type (through SQL)",
                id="dumpscope.filter"),
        Binding("t", "toggle_view", "Tree/flat", tooltip="Tree/flat: scope tree or execution-order list",
                id="dumpscope.toggle_view"),
        Binding("b", "bookmark", "Bookmark", show=False, tooltip="Bookmark the current op (for the report)",
                id="dumpscope.bookmark"),
        Binding("left_square_bracket", "slot(-1)", "Prev tensor", show=False, key_display="[",
                tooltip="Previous tensor (input/output slot) in the stats panel", id="dumpscope.prev_slot"),
        Binding("right_square_bracket", "slot(1)", "Next tensor", show=False, key_display="]",
                tooltip="Next tensor (input/output slot) in the stats panel", id="dumpscope.next_slot"),
        Binding("colon", "focus_slice", "Slice", show=False, key_display=":",
                tooltip="Slice: type a numpy index (0, :, 3) for the current tensor", id="dumpscope.slice"),
        Binding("escape", "back", "Back", show=False,
                tooltip="Back: to the view or op you came from (a stack); from an input, back to the list",
                id="dumpscope.back"),
        Binding("space", "mark", "Mark", show=False,
                tooltip="Mark/unmark the current op for the re-dump config (e, .json); in the tree: on an op",
                id="dumpscope.mark"),
        Binding("g", "graph", "Graph",
                tooltip="Graph view: producers and consumers two hops out, as boxes and arrows",
                id="dumpscope.graph"),
        Binding("tab", "cycle_pane(1)", "Next pane", show=False,
                tooltip="Next pane: ops list → detail → tensor (the focused one is marked ▶)",
                id="dumpscope.next_pane"),
        Binding("shift+tab", "cycle_pane(-1)", "Prev pane", show=False, tooltip="Previous pane",
                id="dumpscope.prev_pane"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.history: list[Back] = []
        self.hits: list[OpRow] = []
        self.hit_index = -1
        self.current: Optional[OpRow] = None
        self.mode = "tree"
        self.grep = ""
        self._loaded: dict[str, tuple] = {}
        self._generation = 0
        self._show_timer: Optional[Timer] = None
        self._loading: Optional[int] = None  # the op whose rows the detail worker is reading
        self._then: Optional[Callable[[], None]] = None

    @property
    def q(self) -> Optional[DumpQuery]:
        return explorer(self).q

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield Static("", id="left-title")
                yield Static(Text("indexing…", "italic"), id="placeholder")
                with ContentSwitcher(initial="tree", id="left-switch"):
                    yield OpTree(explorer(self).badges, id="tree")
                    yield OpList(explorer(self).badges, id="flat")
            with Vertical(id="right"):
                yield OpDetail("select an op on the left", id="detail")
                yield TensorPanel(id="tensor")
        yield Static("", id="status")
        yield KeyBar()

    def on_mount(self) -> None:
        self._title()
        self.update_status()
        self.query_one("#tree").focus()
        self._mark_panes()

    # -- panes and focus --------------------------------------------------------------------------

    def pane_of(self, widget) -> Optional[str]:
        node = widget
        while node is not None and node is not self:
            if node.id in ("left", "detail", "tensor"):
                return node.id
            node = node.parent
        return None

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._mark_panes()

    def _mark_panes(self) -> None:
        """The focused pane: accent colour on its title *and* a ``▶`` glyph (NO_COLOR keeps the glyph)."""
        focused = self.pane_of(self.focused) if self.focused is not None else None
        for pane in PANES:
            widget = self.query_one(f"#{pane}")
            widget.set_class(pane == focused, "pane-focused")
        self._title()
        titles = {"detail": "op detail", "tensor": "tensor  [ ] : slice"}
        for pane, title in titles.items():
            self.query_one(f"#{pane}").border_title = (FOCUS_GLYPH if pane == focused else "") + title

    def action_cycle_pane(self, delta: int) -> None:
        current = self.pane_of(self.focused) if self.focused is not None else None
        i = PANES.index(current) if current in PANES else 0
        pane = PANES[(i + delta) % len(PANES)]
        if pane == "left":
            self._focus_left()
        else:
            self.query_one(f"#{pane}").focus()

    def on_resize(self) -> None:
        self.set_class(self.size.width < NARROW, "narrow")
        self.update_status()

    # -- status -------------------------------------------------------------------------------

    def update_status(self) -> None:
        """The status bar; at any width rank, step and the op count are the last pieces to go."""
        app = explorer(self)
        bits: list[Bit] = [(app.display_name, "bold", 6, True)]
        q = self.q
        if q is not None:
            layouts = ",".join(sorted({lay["name"] for lay in self._layouts}))
            if not layouts and self._count:  # graph files without tensors: browsed as their graphs
                bits.append(("graphs only, no tensors", "italic", 2, False))
            else:
                bits.append((layouts or "no dump found", "" if layouts else "bold red", 2 if layouts else 8, False))
            place = (f"rank {app.rank} step {app.step}", "")
            bad = app.trouble.get((app.rank, app.step))
            if bad:
                place = (f"rank {app.rank} step {app.step} ! {bad[0]}", "bold red")
            bits.append((*place, 10, False))
            bits.append((f"{self._count:,} ops", "", 10, False))
            if self._unscanned and not bad and layouts:
                # "0 problems" alone read as "no trouble here" on a dump whose tensors nobody had read yet
                bits.append((unscanned_text(self._unscanned, self._count), "bold", 9, False))
            if self._problems:
                bits.append((f"! {self._problems:,} problems (p)", "bold yellow", 8, False))
            else:
                bits.append(("0 problems", "dim", 1, False))
            if app.bookmarks:
                bits.append((f"★ {len(app.bookmarks)}", "", 4, False))
            if app.marked:
                bits.append((f"✓ {len(app.marked)} marked", "bold", 4, False))
        err = app.index_error
        if err:
            bits.append((f"! {err}", "bold red", 9, True))
        for extra in (app.progress, app.compare_status):
            if extra:
                bits.append((extra, "italic", 7, True))
        width = self.size.width or 80
        text = Text(" ", no_wrap=True, overflow="ellipsis")
        for i, (s, style) in enumerate(fit_bits([(inert(b[0]), *b[1:]) for b in bits], width)):
            if i:
                text.append(" │ ", "dim")
            text.append(s, style)
        self.query_one("#status", Static).update(text)
        if q is None and not err:
            self.query_one("#placeholder", Static).update(Text(app.progress or "indexing…", "italic"))

    _layouts: list = []
    _count = 0
    #: the place read (status count, first op) waiting for the op pane's rows
    _after_pane: Optional[tuple[DumpQuery, int, int, bool]] = None
    _problems = 0
    #: ops of this place with no NaN/Inf evidence yet (tensors not scanned): the status bar says so
    _unscanned = 0

    def place_scanned(self, doc: dict) -> None:
        """An overflow scan's document: the ops it left without evidence at this place (none when it
        covered the place)."""
        app = explorer(self)
        for p in doc.get("scanned", []):
            if (p["rank"], p["step"]) == (app.rank, app.step):
                self._unscanned = p.get("unknown", 0)

    def show_error(self, error: str) -> None:
        self.query_one("#placeholder", Static).update(Text(f"! cannot open the dump: {inert(error)}", "bold red"))
        self.update_status()

    def _title(self) -> None:
        focused = self.focused is not None and self.pane_of(self.focused) == "left"
        mark = Text(FOCUS_GLYPH if focused else "", "bold")
        if self.mode == "flat" and self.grep:
            flat = self.query_one(OpList)
            count = "…" if flat.reading else f"{flat.row_count():,}"  # read in a worker: not known yet
            title = Text.assemble(("filter: ", "bold"), (inert(self.grep), "bold yellow"),
                                  (f" ({count})  f: change", "dim"))
        elif self.mode == "flat":
            title = Text.assemble(("ops · execution order", "bold"), ("  t: tree", "dim"))
        else:
            title = Text.assemble(("ops · scope tree", "bold"), ("  t: flat", "dim"))
        self.query_one("#left-title", Static).update(mark + title)

    # -- loading --------------------------------------------------------------------------------

    def index_ready(self, q: DumpQuery, layouts: list, problems: int, refreshed: bool = False) -> None:
        self._layouts = layouts
        self._problems = problems
        self._loaded.clear()
        # after a refresh, put the cursor back on the op the user had reached in the list (an op
        # only shown by default is not selected: that would open its scope unasked)
        keep = self._pane_current() if refreshed else None
        self.add_class("ready")  # CSS swaps the placeholder for the op pane
        self.place_changed(select=keep)

    def place_changed(self, select: Optional[OpRow] = None) -> None:
        """Rank or step changed (or a refresh): reload the visible op pane."""
        q = self.q
        if q is None:
            return
        app = explorer(self)
        self._loaded.clear()
        self.hits, self.hit_index = [], -1
        # the count and the first op's detail are read once the pane has its rows: on a cold open the
        # ops come first, not behind the detail's file reads and statistics (2 cores, one GIL)
        self._after_pane = (q, app.rank, app.step, select is None)
        self._load_pane(select)

    def _pane_loaded(self) -> None:
        after, self._after_pane = self._after_pane, None
        if after is not None:
            self._read_place(*after)

    def on_op_tree_loaded(self, message: OpTree.Loaded) -> None:
        self._pane_loaded()

    def on_op_list_loaded(self, message: OpList.Loaded) -> None:
        self._title()  # the filter's count: the list has its rows now
        self._pane_loaded()

    @work(thread=True, exclusive=True, group="place", name="place count", exit_on_error=False)
    def _read_place(self, q: DumpQuery, rank: int, step: int, show_first: bool) -> None:
        """The op count of the status bar and the first op (a ``COUNT(*)`` over 100k+ ops: off the UI thread)."""
        try:
            count = q.count_ops(rank, step)
            first = q.ops(rank, step, limit=1) if show_first else []
            unscanned = unscanned_ops(q, rank, step)
        except Exception:  # a damaged index: the panes say so (their own workers), the count stays
            return
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._place_read, q, rank, step, count, first[0] if first else None, show_first,
                                      unscanned)

    def _place_read(self, q: DumpQuery, rank: int, step: int, count: int, first: Optional[OpRow],
                    show_first: bool, unscanned: int = 0) -> None:
        app = explorer(self)
        if q is not self.q or (rank, step) != (app.rank, app.step):
            return  # another place was asked for meanwhile
        self._count = count
        self._unscanned = unscanned
        self.update_status()
        if show_first:
            op = self._pane_current() or first
            if op is not None:
                self.show_op(op)
            else:
                self.query_one(OpDetail).show_message("no ops at this rank/step")
                self.query_one(TensorPanel).clear()

    def _load_pane(self, select: Optional[OpRow] = None) -> None:
        q = self.q
        if q is None:
            return
        app = explorer(self)
        key = (app.rank, app.step, id(q))
        if self.mode == "tree":
            tree = self.query_one(OpTree)
            if self._loaded.get("tree") != key:
                tree.load(q, *key[:2])
                self._loaded["tree"] = key
            if select is not None:
                tree.seek(select)
        else:
            flat = self.query_one(OpList)
            key = key + (self.grep,)  # type: ignore[assignment]
            if self._loaded.get("flat") != key:
                flat.load(q, *key[:2], grep=self.grep, select=select)
                self._loaded["flat"] = key
            elif select is not None:
                flat.seek(select)

    def _pane_current(self) -> Optional[OpRow]:
        return (self.query_one(OpTree) if self.mode == "tree" else self.query_one(OpList)).current

    def badges_changed(self) -> None:
        self.query_one(OpTree).refresh_labels()
        self.query_one(OpList).refresh()
        self.update_status()

    # -- showing ops ----------------------------------------------------------------------------

    def show_op(self, op: OpRow, then: Optional[Callable[[], None]] = None) -> None:
        """Show ``op`` in the detail and tensor panes; its rows are read in the detail's worker and
        the panes drawn when they arrive.  ``then`` runs after that (at once if ``op`` is shown)."""
        if self._show_timer is not None:
            self._show_timer.stop()
            self._show_timer = None
        q = self.q
        if q is None:
            return
        if self.current is not None and self.current.id == op.id:
            if self._loading == op.id:
                self._then = then or self._then
            elif then is not None:
                then()
            return
        self.current = op
        self._loading, self._then = op.id, then
        self.query_one(OpDetail).load(q, op, done=lambda tensors: self._op_shown(q, op, tensors))

    def _op_shown(self, q: DumpQuery, op: OpRow, tensors: list) -> None:
        self._loading = None
        self.query_one(TensorPanel).show(q, tensors)
        then, self._then = self._then, None
        if then is not None:
            then()

    def jump_to(self, op: OpRow, remember: bool = True,
                came_from: Optional[Callable[[], list[Screen]]] = None,
                then: Optional[Callable[[], None]] = None) -> None:
        """Show ``op`` and put the left cursor on it; what we leave goes on the history: the view
        the jump came from (``came_from`` rebuilds it), else the op shown before."""
        if came_from is not None:
            self.history.append(came_from)
        elif remember and self.current is not None and self.current.id != op.id:
            self.history.append(self.current)
        del self.history[:-HISTORY]
        def missing() -> None:
            self.notify(f"{op.short} is not in the {self.mode} view", timeout=2)

        # the cursor follows when the pane's worker has found the row
        (self.query_one(OpTree) if self.mode == "tree" else self.query_one(OpList)).seek(op, missing)
        self.show_op(op, then)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        if isinstance(event.node.data, OpRow):
            self._show_soon(event.node.data)

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        if isinstance(event.node.data, OpRow):
            self.show_op(event.node.data, then=self.query_one(OpDetail).focus_links)

    def on_line_list_highlighted(self, event: LineList.Highlighted) -> None:
        if isinstance(event.list, OpList):
            op = event.list.op_at(event.index)
            if op is not None:
                self._show_soon(op)

    def _show_soon(self, op: OpRow) -> None:
        """Show ``op`` once the cursor rests: holding a key repaints only the list, not the detail."""
        if self._show_timer is not None:
            self._show_timer.stop()
        self._show_timer = self.set_timer(SHOW_DELAY, lambda: self.show_op(op))

    def on_line_list_selected(self, event: LineList.Selected) -> None:
        if isinstance(event.list, OpList):
            op = event.list.op_at(event.index)
            if op is not None:  # the links of this op, once its rows are read
                self.show_op(op, then=self.query_one(OpDetail).focus_links)

    def on_op_detail_link_chosen(self, event: OpDetail.LinkChosen) -> None:
        q, cur = self.q, self.current
        if q is None or cur is None:
            return
        if event.kind == "src":  # a source frame: list the ops made by that line
            self.action_search(f"@{event.name}")
            return
        op = q.find_by_graph_name(event.name, cur.rank, cur.step, cur.graph)
        if op is None:
            self.notify(f"{event.name} was not dumped (parameter, constant or graph-only node)", timeout=3)
            return
        self.jump_to(op, then=self.query_one(OpDetail).focus_links)

    # -- actions --------------------------------------------------------------------------------

    def action_back(self) -> None:
        focused = self.focused
        if isinstance(focused, Input):
            self._focus_left()
            return
        if self.history:
            back = self.history.pop()
            if isinstance(back, OpRow):
                self.jump_to(back, remember=False)
            else:
                for screen in back():
                    self.app.push_screen(screen)
            return
        self._focus_left()

    def _focus_left(self) -> None:
        (self.query_one(OpTree) if self.mode == "tree" else self.query_one(OpList)).focus()

    def action_toggle_view(self) -> None:
        self.mode = "flat" if self.mode == "tree" else "tree"
        self.query_one(ContentSwitcher).current = self.mode
        cur = self.current
        self._load_pane(cur)
        self._title()
        self._focus_left()

    def action_filter(self) -> None:
        from dumpscope.tui.dialogs import FilterScreen

        if self.q is None:
            return

        def done(text: Optional[str]) -> None:
            if text is None:
                return
            self.grep = text
            if self.mode != "flat":
                self.action_toggle_view()
            else:
                self._load_pane(self.current)
            self._title()
            flat = self.query_one(OpList)
            if flat.current is not None:
                self.show_op(flat.current)

        self.app.push_screen(FilterScreen(self.grep), done)

    def action_search(self, initial: str = "") -> None:
        from dumpscope.tui.dialogs import SearchScreen

        if self.q is None:
            self.notify("still indexing…", timeout=2)
            return

        def done(result: Optional[tuple[OpRow, list[OpRow]]]) -> None:
            if result is None:
                return
            op, hits = result
            self.hits = hits
            self.hit_index = next((i for i, h in enumerate(hits) if h.id == op.id), 0)
            self.jump_to(op)

        app = explorer(self)
        self.app.push_screen(SearchScreen(self.q, app.rank, app.step, initial), done)

    def action_next_hit(self, delta: int) -> None:
        if not self.hits:
            self.notify("no search hits: press / to search", timeout=2)
            return
        self.hit_index = (self.hit_index + delta) % len(self.hits)
        self.jump_to(self.hits[self.hit_index])
        self.notify(f"hit {self.hit_index + 1}/{len(self.hits)}", timeout=1)

    def action_bookmark(self) -> None:
        if self.current is None:
            return
        added = explorer(self).toggle_bookmark(self.current)
        self.notify(("bookmarked " if added else "removed bookmark ") + self.current.short, timeout=2)

    def action_mark(self) -> None:
        if self.current is None:
            return
        added = explorer(self).toggle_mark(self.current)
        self.notify(("marked " if added else "unmarked ") + self.current.short
                    + f" ({len(explorer(self).marked)} marked; e: export as .json)", timeout=2)

    def action_graph(self) -> None:
        from dumpscope.tui.view_graph import GraphScreen

        if self.current is None:
            self.notify("no op selected", timeout=2)
            return
        self.app.push_screen(GraphScreen(self.current))

    def action_slot(self, delta: int) -> None:
        self.query_one(TensorPanel).step_slot(delta)

    def action_focus_slice(self) -> None:
        panel = self.query_one(TensorPanel)
        focused = self.focused
        panel.return_focus = focused if focused is not None and not isinstance(focused, Input) else None
        self.query_one("#tp-slice", Input).focus()
