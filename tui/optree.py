"""The scope tree: rank › graph › scope path › op, populated only when a node expands.

Scope counts come from one ``scope_counts`` query; ops of a scope are fetched with
``ops_in_scope`` when that scope is opened, at most ``OPS_PER_NODE`` at a time (a "more"
node loads the next batch).  Chains of single-child scopes are folded into one node so
deep MindSpore scopes fit an 80-column pane.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

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
    """One folded scope node of the trie built from ``scope_counts``."""

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


NodeData = Union[Scope, OpRow, More, KindGroup, None]


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
        """(Re)build the tree; a reload of the same rank/step keeps the scopes the user opened."""
        reopen = self.expanded_scopes() if (self.q is not None and (rank, step) == (self.rank, self.step)) else set()
        self.q, self.rank, self.step = q, rank, step
        self._populated.clear()
        self.clear()
        order_fn = getattr(q, "scope_order", None)  # proposed core API; optional
        roots = build_scopes(q.scope_counts(rank, step), order_fn(rank, step) if order_fn else None,
                             q.bad_scope_counts(rank, step))
        kinds_fn = getattr(q, "kind_counts", None)
        self._kinds = kinds_fn(rank, step) if kinds_fn else {}
        snaps_fn = getattr(q, "snapshot_counts", None)
        self._snapshots = snaps_fn(rank, step) if snaps_fn else {}
        have = {r.graph for r in roots}
        for graph in sorted({g for g, _k in self._kinds} - have, key=_graph_key):
            roots.append(Scope(graph, "", f"graph {graph}" if graph else "graph"))  # parameters only
        total = sum(r.total for r in roots)
        self.root.set_label(Text.assemble((f"rank {rank}", "bold"), f"  step {step}  ", (f"({total:,})", "dim")))
        self.root.data = None
        for scope in roots:
            self._add_scope(self.root, scope)
        self.root.expand()
        self._open_small(AUTO_OPEN_NODES)
        if reopen:
            self._reopen(self.root, reopen)

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
        if node.id in self._populated or self.q is None:
            return
        data = node.data
        if isinstance(data, OpRow) and node.allow_expand:  # a watched op: its Dump-Watch snapshots
            self._populated.add(node.id)
            for snap in self.q.snapshots_of(data):
                label = Text.assemble(("↳ after ", "dim"), snap.watch_after or snap.short)
                node.add_leaf(label, data=snap)
            return
        if not isinstance(data, (Scope, KindGroup)):
            return
        self._populated.add(node.id)
        if isinstance(data, KindGroup):
            self._add_ops(node, data.graph, "", 0, data.kind)
            return
        for child in data.children.values():
            self._add_scope(node, child)
        if data.own:
            self._add_ops(node, data.graph, data.path, 0)
        if data.path == "":  # a graph: its parameters and constants, one collapsed node each
            for kind in ("parameter", "constant"):
                n = self._kinds.get((data.graph, kind), 0)
                if n:
                    group = KindGroup(data.graph, kind, n)
                    node.add(Text.assemble(group.label, (f" ({n:,})", "dim")), data=group, allow_expand=True)

    def _add_ops(self, node: TreeNode[NodeData], graph: str, scope: str, offset: int, kind: str = "op") -> None:
        assert self.q is not None
        ops = self.q.ops_in_scope(self.rank, self.step, graph, scope) if kind == "op" else \
            self.q.ops_of_kind(self.rank, self.step, graph, kind)
        batch = ops[offset:offset + OPS_PER_NODE]
        for op in batch:
            n_snaps = self._snapshots.get((op.graph, sanitize_name(op.file_name))) if self._snapshots else None
            if n_snaps:  # a watched op: its snapshots are its children, not ops of the scope
                label = self._op_label(op)
                label.append(f" ({n_snaps} snapshots)", "dim")
                node.add(label, data=op, allow_expand=True)
            else:
                node.add_leaf(self._op_label(op), data=op)
        rest = len(ops) - offset - len(batch)
        if rest > 0:
            node.add_leaf(Text(f"… {rest:,} more (enter)", "dim italic"),
                          data=More(graph, scope, offset + len(batch), kind))

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        self._populate(event.node)

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        node = event.node
        if isinstance(node.data, More):
            more, parent = node.data, node.parent
            node.remove()
            if parent is not None:
                self._add_ops(parent, more.graph, more.scope, more.offset, more.kind)
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

    def select_op(self, op: OpRow) -> bool:
        """Open the scopes down to ``op`` and put the cursor on it."""
        if self.q is None or op.rank != self.rank or op.step != self.step:
            return False
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
            self._add_ops(node, m.graph, m.scope, m.offset)
