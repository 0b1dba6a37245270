"""The scope tree: rank › graph › scope path › op, populated only when a node expands.

Scope counts come from one ``scope_facts`` query (with each scope's first execution index and
bad ops); ops of a scope are fetched with ``ops_in_scope`` when that scope is opened, at most
``OPS_PER_NODE`` at a time (a "more" node loads the next batch).  Chains of single-child scopes
are folded into one node so deep MindSpore scopes fit an 80-column pane.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode
from textual.worker import get_current_worker

from dumpscope.core.inert import inert
from dumpscope.core.names import sanitize_name
from dumpscope.core.query import DumpQuery, OpRow
from dumpscope.tui.badges import BadgeState

OPS_PER_NODE = 500
#: scopes are opened on load while the tree has fewer nodes than this
AUTO_OPEN_NODES = 40

_PART_STYLE = {"linelist--bad": "bold red", "linelist--ok": "green", "linelist--warn": "yellow",
               "linelist--mark": "bold magenta", "linelist--dim": "dim"}


@dataclass
class Scope:
    """One folded scope node of the trie built from ``scope_facts``."""

    graph: str
    path: str  # full scope path ("" = graph level)
    label: str
    own: int = 0  # ops directly in this scope
    total: int = 0
    first: int = 1 << 62  # first execution index inside (children are listed in execution order)
    bad: int = 0  # ops inside with overflow status or non-finite outputs
    children: dict[str, "Scope"] = field(default_factory=dict)


@dataclass
class More:
    graph: str
    scope: str
    offset: int
    kind: str = "op"


@dataclass
class KindGroup:
    """The parameters (or constants) of one graph: one collapsed node beside its scopes."""

    graph: str
    kind: str  # "parameter" | "constant"
    count: int

    @property
    def label(self) -> str:
        return f"{self.kind}s"


@dataclass
class Loading:
    """The "loading…" leaf of a scope whose ops the "tree scope" worker is reading."""

    key: tuple[str, str, str]


NodeData = Union[Scope, OpRow, More, KindGroup, Loading, None]


def open_plan(roots: list[Scope], budget: int, reopen: set[tuple[str, str]] = frozenset()) -> list[Scope]:
    """The scopes with ops of their own that a load opens at once: breadth-first while the tree stays
    under ``budget`` nodes (as ``OpTree._open_small``), and those the user had open (``reopen``)."""
    out: list[Scope] = []
    queue = list(roots)
    shown = len(queue)
    while queue:
        scope = queue.pop(0)
        cost = len(scope.children) + min(scope.own, OPS_PER_NODE)
        if shown + cost > budget and shown > 1:
            break
        if scope.own:
            out.append(scope)
        shown += cost
        queue.extend(scope.children.values())
    if reopen:
        def walk(scope: Scope) -> None:
            for child in scope.children.values():
                if (child.graph, child.path) in reopen:
                    if child.own and all(child is not o for o in out):
                        out.append(child)
                    walk(child)
        for root in roots:
            walk(root)
    return out


def build_scopes(counts: dict[tuple[str, str], int],
                 order: Optional[dict[tuple[str, str], int]] = None,
                 bad: Optional[dict[tuple[str, str], int]] = None) -> list[Scope]:
    """Graph roots of the scope trie, with single-child chains folded (``a/b/c`` one node).

    ``order`` (first execution index per scope) sorts children in execution order; without
    it they are sorted by name.
    """
    graphs: dict[str, Scope] = {}
    order = order or {}
    bad = bad or {}
    for (graph, scope), n in counts.items():
        first = order.get((graph, scope))
        first = (1 << 62) if first is None else first
        nbad = bad.get((graph, scope), 0)
        node = graphs.get(graph)
        if node is None:
            node = graphs[graph] = Scope(graph, "", f"graph {graph}" if graph else "graph")
        node.total += n
        node.bad += nbad
        if first < node.first:
            node.first = first
        for part in scope.split("/") if scope else ():
            if not part:
                continue
            child = node.children.get(part)
            if child is None:  # a Scope made only for a new part (a cold open builds ~100k of these)
                child = node.children[part] = Scope(graph, f"{node.path}/{part}" if node.path else part, part)
            node = child
            node.total += n
            node.bad += nbad
            if first < node.first:
                node.first = first
        node.own += n
    for root in graphs.values():
        _sort(root)
        _fold(root)
    return [graphs[g] for g in sorted(graphs, key=_graph_key)]


def _graph_key(g: str) -> tuple[int, str]:
    return (0, f"{int(g):012d}") if g.isdigit() else (1, g)


def _sort(node: Scope) -> None:
    node.children = dict(sorted(node.children.items(), key=lambda kv: (kv[1].first, kv[0])))
    for child in node.children.values():
        _sort(child)


def _fold(node: Scope) -> None:
    for key, child in list(node.children.items()):
        while child.own == 0 and len(child.children) == 1:
            (only,) = child.children.values()
            only.label = f"{child.label}/{only.label}"
            child = only
        node.children[key] = child
        _fold(child)


class OpTree(Tree[NodeData]):
    """Lazy scope tree of one rank/step."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open", show=False, id="tree.select"),
        Binding("space", "toggle_node", "Expand / mark", show=False,
                tooltip="Expand or collapse a scope; on an op: mark it for the re-dump config", id="tree.toggle"),
        Binding("right,l", "expand_here", "Expand", show=False, id="tree.expand"),
        Binding("left,h", "collapse_here", "Collapse", show=False, id="tree.collapse"),
        Binding("k", "cursor_up", "Up", show=False, id="tree.up"),
        Binding("j", "cursor_down", "Down", show=False, id="tree.down"),
    ]

    def __init__(self, badges: BadgeState, **kwargs) -> None:
        super().__init__("ops", **kwargs)
        self.badges = badges
        self.auto_expand = True
        self.guide_depth = 2
        self.q: Optional[DumpQuery] = None
        self.rank = 0
        self.step = 0
        self._populated: set[int] = set()
        self._kinds: dict[tuple[str, str], int] = {}
        self._snapshots: dict[tuple[str, str], int] = {}
        self._generation = 0
        self.reading = False
        #: rows read ahead (by a load or a seek) for scopes not opened yet, taken when they open
        self._rows: dict[tuple[str, str, str], list[OpRow]] = {}
        #: every opened scope's rows, for its "… more" node
        self._scope_rows: dict[tuple[str, str, str], list[OpRow]] = {}
        self._after_load: Optional[Callable[[], None]] = None

    # -- building ---------------------------------------------------------------------

    def expanded_scopes(self) -> set[tuple[str, str]]:
        """(graph, scope path) of every open scope node, to reopen them after a reload."""
        out: set[tuple[str, str]] = set()

        def walk(node: TreeNode[NodeData]) -> None:
            for child in node.children:
                if isinstance(child.data, Scope) and child.is_expanded:
                    out.add((child.data.graph, child.data.path))
                    walk(child)

        walk(self.root)
        return out

    def load(self, q: DumpQuery, rank: int, step: int) -> None:
        """(Re)build the tree; a reload of the same rank/step keeps the scopes the user opened.  The scope
        counts and the ops of the scopes opened at once are read in the "tree load" worker."""
        reopen = self.expanded_scopes() if (self.q is not None and (rank, step) == (self.rank, self.step)) else set()
        self.q, self.rank, self.step = q, rank, step
        self._generation += 1
        self._after_load = None
        self.reading = True
        self._load(q, rank, step, reopen, self._generation)

    @work(thread=True, exclusive=True, group="tree-load", name="tree load", exit_on_error=False)
    def _load(self, q: DumpQuery, rank: int, step: int, reopen: set[tuple[str, str]], generation: int) -> None:
        try:
            roots = build_scopes(*q.scope_facts(rank, step))
            kinds = q.kind_counts(rank, step)
            snapshots = q.snapshot_counts(rank, step)
            rows = {}
            for scope in open_plan(roots, AUTO_OPEN_NODES, reopen):
                if get_current_worker().is_cancelled:
                    return
                rows[(scope.graph, scope.path, "op")] = q.ops_in_scope(rank, step, scope.graph, scope.path)
            error = None
        except Exception as exc:  # a damaged index: the tree says so, the app keeps running
            roots, kinds, snapshots, rows = [], {}, {}, {}
            error = f"! cannot read the scopes: {type(exc).__name__}"
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._loaded, generation, rank, step, roots, kinds, snapshots, rows, reopen,
                                      error)

    def _loaded(self, generation: int, rank: int, step: int, roots: list[Scope], kinds: dict, snapshots: dict,
                rows: dict, reopen: set[tuple[str, str]], error: Optional[str]) -> None:
        if generation != self._generation:
            return  # another place was asked for meanwhile
        self.reading = False
        self._populated.clear()
        self._rows = dict(rows)
        self._scope_rows = dict(rows)
        self.clear()
        self._kinds, self._snapshots = kinds, snapshots
        have = {r.graph for r in roots}
        for graph in sorted({g for g, _k in self._kinds} - have, key=_graph_key):
            roots.append(Scope(graph, "", f"graph {graph}" if graph else "graph"))  # parameters only
        total = sum(r.total for r in roots)
        self.root.set_label(Text.assemble((f"rank {rank}", "bold"), f"  step {step}  ", (f"({total:,})", "dim")))
        self.root.data = None
        for scope in roots:
            self._add_scope(self.root, scope)
        if error:
            self.root.add_leaf(Text(error, "bold red"))
        self.root.expand()
        self._open_small(AUTO_OPEN_NODES)
        if reopen:
            self._reopen(self.root, reopen)
        after, self._after_load = self._after_load, None
        if after is not None:
            after()
        self.post_message(self.Loaded(self))

    class Loaded(Message):
        """The tree shows its scopes after a ``load``."""

        def __init__(self, sender: "OpTree") -> None:
            super().__init__()
            self.tree = sender

    def _reopen(self, node: TreeNode[NodeData], wanted: set[tuple[str, str]]) -> None:
        for child in list(node.children):
            data = child.data
            if isinstance(data, Scope) and (data.graph, data.path) in wanted:
                self._populate(child)
                child.expand()
                self._reopen(child, wanted)

    def _open_small(self, budget: int) -> None:
        """Open scopes breadth-first while the tree stays small: tiny dumps show their ops at once."""
        queue = list(self.root.children)
        shown = len(queue)
        while queue:
            node = queue.pop(0)
            data = node.data
            if not isinstance(data, Scope):
                continue
            cost = len(data.children) + min(data.own, OPS_PER_NODE)
            if shown + cost > budget and shown > 1:
                break
            self._populate(node)
            node.expand()
            shown += cost
            queue.extend(node.children)

    def _add_scope(self, parent: TreeNode[NodeData], scope: Scope) -> TreeNode[NodeData]:
        # a scope holding bad ops says so with a glyph and a count, not by colour alone
        label = Text.assemble(("! ", _PART_STYLE["linelist--bad"]) if scope.bad else "", inert(scope.label),
                              (f" ({scope.total:,})", "dim"), (f" {scope.bad} bad", "red") if scope.bad else "")
        return parent.add(label, data=scope, allow_expand=True)

    def _op_label(self, op: OpRow) -> Text:
        text = Text()
        for glyph, cls in self.badges.parts(op):
            if glyph != " ":  # compact: the tree pane is narrow
                text.append(glyph, _PART_STYLE.get(cls or "", ""))
        if text.plain:
            text.append(" ")
        text.append(inert(op.short), "dim" if op.graph_only else "")
        if op.type and op.type not in op.short:
            text.append(f" {inert(op.type)}", "dim")
        return text

    def _populate(self, node: TreeNode[NodeData]) -> None:
        """Add a node's children: its sub-scopes at once (known from the counts), its ops from rows read
        earlier or, when not read yet, in the "tree scope" worker ("loading…" until they come)."""
        if node.id in self._populated or self.q is None:
            return
        data = node.data
        if isinstance(data, OpRow) and node.allow_expand:  # a watched op: its Dump-Watch snapshots
            self._populated.add(node.id)
            self._rows_for(node, ("snapshots", str(data.id), ""))
            return
        if not isinstance(data, (Scope, KindGroup)):
            return
        self._populated.add(node.id)
        if isinstance(data, KindGroup):
            self._rows_for(node, (data.graph, "", data.kind))
            return
        for child in data.children.values():
            self._add_scope(node, child)
        if data.own:
            self._rows_for(node, (data.graph, data.path, "op"))
        if data.path == "":  # a graph: its parameters and constants, one collapsed node each
            for kind in ("parameter", "constant"):
                n = self._kinds.get((data.graph, kind), 0)
                if n:
                    group = KindGroup(data.graph, kind, n)
                    node.add(Text.assemble(group.label, (f" ({n:,})", "dim")), data=group, allow_expand=True)

    def _rows_for(self, node: TreeNode[NodeData], key: tuple[str, str, str]) -> None:
        rows = self._rows.pop(key, None)
        if rows is not None:
            self._fill(node, key, rows)
            return
        placeholder = node.add_leaf(Text("loading…", "dim italic"), data=Loading(key))
        self._fetch(self.q, self.rank, self.step, key, node.id, self._generation, placeholder)

    @work(thread=True, group="tree-scope", name="tree scope", exit_on_error=False)
    def _fetch(self, q: DumpQuery, rank: int, step: int, key: tuple[str, str, str], node_id: int, generation: int,
               placeholder: TreeNode[NodeData]) -> None:
        """The ops of one scope (or kind, or a watched op's snapshots).  Not exclusive: every scope the
        user opens gets its rows; a result for a tree reloaded since is dropped."""
        graph, scope, kind = key
        try:
            if graph == "snapshots":
                op = q.op_by_id(int(scope))
                rows = q.snapshots_of(op) if op is not None else []
            elif kind == "op":
                rows = q.ops_in_scope(rank, step, graph, scope)
            else:
                rows = q.ops_of_kind(rank, step, graph, kind)
        except Exception:  # a damaged index: the scope shows no ops, the app keeps running
            rows = []
        self.app.call_from_thread(self._fetched, generation, key, placeholder, rows)

    def _fetched(self, generation: int, key: tuple[str, str, str], placeholder: TreeNode[NodeData],
                 rows: list[OpRow]) -> None:
        if generation != self._generation or placeholder.tree is not self or placeholder.parent is None:
            return  # the tree was reloaded, or the rows were filled in already (a jump read them)
        node = placeholder.parent
        self._fill(node, key, rows, before=placeholder)
        placeholder.remove()

    def _fill(self, node: TreeNode[NodeData], key: tuple[str, str, str], rows: list[OpRow],
              before: Optional[TreeNode[NodeData]] = None) -> None:
        self._scope_rows[key] = rows
        if key[0] == "snapshots":
            for snap in rows:
                label = Text.assemble(("↳ after ", "dim"), snap.watch_after or snap.short)
                node.add_leaf(label, data=snap, before=before)
            return
        if before is None:  # ops go before a graph's parameter/constant groups
            before = next((c for c in node.children if isinstance(c.data, KindGroup)), None)
        self._add_ops(node, key, 0, before)

    def _add_ops(self, node: TreeNode[NodeData], key: tuple[str, str, str], offset: int,
                 before: Optional[TreeNode[NodeData]] = None) -> None:
        ops = self._scope_rows.get(key, [])
        batch = ops[offset:offset + OPS_PER_NODE]
        for op in batch:
            n_snaps = self._snapshots.get((op.graph, sanitize_name(op.file_name))) if self._snapshots else None
            if n_snaps:  # a watched op: its snapshots are its children, not ops of the scope
                label = self._op_label(op)
                label.append(f" ({n_snaps} snapshots)", "dim")
                node.add(label, data=op, allow_expand=True, before=before)
            else:
                node.add_leaf(self._op_label(op), data=op, before=before)
        rest = len(ops) - offset - len(batch)
        if rest > 0:
            node.add_leaf(Text(f"… {rest:,} more (enter)", "dim italic"),
                          data=More(key[0], key[1], offset + len(batch), key[2]), before=before)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        self._populate(event.node)

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        node = event.node
        if isinstance(node.data, More):
            more, parent = node.data, node.parent
            node.remove()
            if parent is not None:  # the scope's rows were read when it opened
                self._add_ops(parent, (more.graph, more.scope, more.kind), more.offset)
            event.stop()

    def action_toggle_node(self) -> None:
        node = self.cursor_node
        if node is not None and isinstance(node.data, OpRow):  # an op has nothing to expand: mark it
            self.screen.action_mark()  # type: ignore[attr-defined]
            return
        super().action_toggle_node()

    def action_expand_here(self) -> None:
        node = self.cursor_node
        if node is not None and node.allow_expand:
            self._populate(node)
            node.expand()

    def action_collapse_here(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.is_expanded and node.allow_expand:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)

    # -- queries ------------------------------------------------------------------------

    @property
    def current(self) -> Optional[OpRow]:
        node = self.cursor_node
        return node.data if node is not None and isinstance(node.data, OpRow) else None

    def refresh_labels(self) -> None:
        """Redraw op labels after badges changed (only populated nodes exist)."""

        def walk(node: TreeNode[NodeData]) -> None:
            for child in node.children:
                if isinstance(child.data, OpRow):
                    child.set_label(self._op_label(child.data))
                walk(child)

        walk(self.root)

    def seek(self, op: OpRow, missing: Optional[Callable[[], None]] = None) -> None:
        """Open the scopes down to ``op`` and put the cursor on it; the ops of its scope are read in the
        "tree seek" worker first (a newer seek wins); ``missing()`` when ``op`` is not in this tree."""
        if self.q is None or op.rank != self.rank or op.step != self.step:
            if missing is not None:
                missing()
            return
        if self.reading:  # the scopes are still read: seek once they are here
            self._after_load = lambda: self.seek(op, missing)
            return
        self._wanted = op.id
        self._seek(self.q, op, self._generation, missing)

    @work(thread=True, exclusive=True, group="tree-seek", name="tree seek", exit_on_error=False)
    def _seek(self, q: DumpQuery, op: OpRow, generation: int, missing: Optional[Callable[[], None]]) -> None:
        key = (op.graph, op.scope, "op")
        try:
            rows = self._scope_rows.get(key)
            rows = q.ops_in_scope(op.rank, op.step, op.graph, op.scope) if rows is None else rows
        except Exception:  # a damaged index: the op is shown, only the tree cursor stays
            rows = []
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._seeked, generation, op, key, rows, missing)

    def _seeked(self, generation: int, op: OpRow, key: tuple[str, str, str], rows: list[OpRow],
                missing: Optional[Callable[[], None]]) -> None:
        if generation != self._generation or getattr(self, "_wanted", None) != op.id:
            return  # the tree was reloaded or another op was asked for meanwhile
        self._rows.setdefault(key, rows)
        if not self._select(op, key, rows) and missing is not None:
            missing()

    def _select(self, op: OpRow, key: tuple[str, str, str], rows: list[OpRow]) -> bool:
        node: TreeNode[NodeData] = self.root
        graph_node = next((c for c in node.children if isinstance(c.data, Scope) and c.data.graph == op.graph), None)
        if graph_node is None:
            return False
        node = graph_node
        while True:
            self._populate(node)
            node.expand()
            data = node.data
            assert isinstance(data, Scope)
            if data.path == op.scope:
                break
            nxt = None
            for c in node.children:
                if isinstance(c.data, Scope) and (op.scope == c.data.path or op.scope.startswith(c.data.path + "/")):
                    nxt = c
                    break
            if nxt is None:
                return False
            node = nxt
        pending = next((c for c in node.children if isinstance(c.data, Loading) and c.data.key == key), None)
        if pending is not None:  # its rows are still read by the "tree scope" worker: these are the same
            self._fill(node, key, rows, before=pending)
            pending.remove()
        while True:
            for c in node.children:
                if isinstance(c.data, OpRow) and c.data.id == op.id:
                    self._tree_lines  # rebuild lines now so the new node has a line number
                    self.move_cursor(c)
                    self.scroll_to_node(c, animate=False)
                    return True
            more = next((c for c in node.children if isinstance(c.data, More)), None)
            if more is None:
                return False
            m = more.data
            assert isinstance(m, More)
            more.remove()
            self._add_ops(node, (m.graph, m.scope, m.kind), m.offset)
