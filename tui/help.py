"""Help screen: every key of every screen, with its binding id (for ``keys.toml`` remapping).

Built from the ``BINDINGS`` of the classes themselves with the user's keymap applied, so
the help can never drift from the real keys.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from dumpscope.tui.keybar import KeyBar


def _sections(everywhere: Sequence[Binding]) -> list[tuple[str, list[Binding]]]:
    """``everywhere``: the app's own bindings, handed in by the app (this module never imports it)."""
    from dumpscope.tui.compare_diff import CompareDiffScreen
    from dumpscope.tui.detail import OpDetail
    from dumpscope.tui.dialogs import SearchScreen
    from dumpscope.tui.keylist import KeyOptionList
    from dumpscope.tui.linelist import LineList
    from dumpscope.tui.main_screen import MainScreen
    from dumpscope.tui.optree import OpTree
    from dumpscope.tui.table_view import TableView
    from dumpscope.tui.view_compare import CompareScreen
    from dumpscope.tui.view_graph import GraphScreen
    from dumpscope.tui.vtable import VTable

    return [
        ("Everywhere", [b for b in everywhere if isinstance(b, Binding)]),
        ("Explorer", list(MainScreen.BINDINGS)),  # type: ignore[arg-type]
        ("Lists and tables", list(LineList.BINDINGS)),  # type: ignore[arg-type]
        ("Scope tree", list(OpTree.BINDINGS)),  # type: ignore[arg-type]
        ("Search dialog", list(SearchScreen.BINDINGS)),  # type: ignore[arg-type]
        ("Overflow / compare / watch / problems views", list(TableView.BINDINGS)),  # type: ignore[arg-type]
        ("Tables in those views", list(VTable.BINDINGS)),  # type: ignore[arg-type]
        ("Compare view", list(CompareScreen.BINDINGS)),  # type: ignore[arg-type]
        ("Compare diff (enter on a compare row)", list(CompareDiffScreen.BINDINGS)),  # type: ignore[arg-type]
        ("Op detail pane (tab to it)", list(OpDetail.BINDINGS)),  # type: ignore[arg-type]
        ("Step/rank pickers and the detail's links", list(KeyOptionList.BINDINGS)),  # type: ignore[arg-type]
        ("Graph view (g)", list(GraphScreen.BINDINGS)),  # type: ignore[arg-type]
    ]


def describe(b: Binding) -> str:
    """What a key does, in words: the tooltip, else the description, else the action made readable
    (``cursor_down`` -> "Cursor down"), never a raw action name."""
    if b.tooltip or b.description:
        return b.tooltip or b.description
    name = b.action.split("(", 1)[0].rsplit(".", 1)[-1].replace("_", " ").strip()
    return name[:1].upper() + name[1:]


class HelpScreen(Screen):
    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "Close help", id="help.close")]

    def __init__(self, everywhere: Sequence[Binding] = (), keymap: Optional[Mapping[str, str]] = None) -> None:
        """``everywhere``: the app's bindings; ``keymap``: the user's remapping (binding id → keys)."""
        super().__init__()
        self.everywhere = list(everywhere)
        self.keymap = dict(keymap or {})

    def compose(self) -> ComposeResult:
        yield Static(Text("dumpscope — keys", "bold"), id="view-title")
        with VerticalScroll(id="help-body"):
            yield Static(self._table(), id="help-keys")
            yield Static(self._footer_text(), id="help-config")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def _keys(self, b: Binding) -> str:
        keys = self.keymap.get(b.id, b.key) if b.id else b.key
        if b.key_display and keys == b.key:
            first = b.key_display
            rest = [k.strip() for k in keys.split(",")][1:]
        else:
            parts = [k.strip() for k in keys.split(",")]
            first, rest = parts[0], parts[1:]
            first = self.app.get_key_display(Binding(first, ""))
        return ", ".join([first] + [self.app.get_key_display(Binding(k, "")) for k in rest])

    def _table(self) -> Group:
        parts = []
        for title, bindings in _sections(self.everywhere):
            parts.append(Text(title, "bold underline"))
            table = Table(box=None, show_header=False, padding=(0, 1), expand=True)
            table.add_column("key", style="bold cyan", no_wrap=True, width=12)
            table.add_column("what", ratio=1)
            table.add_column("id", style="dim", no_wrap=True)
            for b in bindings:
                table.add_row(self._keys(b), describe(b), b.id or "")
            parts.append(table)
        return Group(*parts)

    def _footer_text(self) -> Text:
        return Text.assemble(
            ("\nBadges: ", "bold"), "! overflow/NaN/Inf  ✓ ~ ✗ compare verdict  W watched tensor changed  "
            "★ bookmark  · graph-only node (dim)  ? no graph-side name (show says why)\n",
            ("Opening: ", "bold"), "on the overflow origin `dumpscope triage` names, from the evidence already "
            "known (Opdebug, statistics, an earlier o or `dumpscope overflow`; a rank that only received NaN through "
            "a collective is not the origin), else the lowest rank/step; with --compare, on the whole job's first "
            "divergence, its row selected in the compare view (c); `--rank`/`--step` choose the place. If that "
            "place has trouble, the cursor is on its first bad op and the detail says why (↳ born / inherited / "
            "received).\n",
            ("Remap keys: ", "bold"), "$XDG_CONFIG_HOME/dumpscope/keys.toml (default ~/.config; or keys.json), e.g.\n",
            ('  [keys]\n  "dumpscope.search" = "slash,ctrl+f"\n', "dim"))

    def action_close(self) -> None:
        self.app.pop_screen()
