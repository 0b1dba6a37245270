"""Both sides of one compare row, side by side: the golden op's detail beside the target's."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Static

from dumpscope.core.inert import inert
from dumpscope.tui.badges import VERDICT_GLYPH
from dumpscope.tui.compare_rows import both_names, metric
from dumpscope.tui.detail import OpDetail
from dumpscope.tui.keybar import KeyBar
from dumpscope.tui.explorer import explorer


class CompareDetailScreen(Screen):
    """Both sides' op detail side by side."""

    BINDINGS = [Binding("escape", "close", "Back", id="view.close")]
    AUTO_FOCUS = "#golden-detail"

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__()
        self.row = row

    def compose(self) -> ComposeResult:
        r = self.row
        head = Text.assemble((VERDICT_GLYPH.get(str(r.get("verdict")), "?") + " ", "bold"),
                             (f"{inert(both_names(r))} {r.get('io')}.{r.get('slot')}", "bold"),
                             (f"  cosine {metric('cosine', 6)(r)}  max abs {metric('max_abs_err')(r)}  "
                              f"rule {inert(r.get('rule'))}", "dim"),
                             (f"  origin {r.get('origin')}" + (f" via {inert(r.get('origin_via'))}" if r.get("origin_via")
                                                                else "") if r.get("origin") else "", "dim"))
        yield Static(head, id="view-title")
        with Horizontal(id="side-by-side"):
            with Vertical():
                yield Static(Text("golden", "bold green"))
                yield OpDetail("golden op not in the index", id="golden-detail")
            with Vertical():
                yield Static(Text("target", "bold yellow"))
                yield OpDetail("target op not in the index", id="target-detail")
        yield KeyBar()

    def on_mount(self) -> None:
        app = explorer(self)
        for q, key, wid in ((app.q, "golden_op_id", "#golden-detail"),
                            (app.target_q, "target_op_id", "#target-detail")):
            op_id = self.row.get(key)
            op = q.op_by_id(op_id) if (q is not None and op_id is not None) else None
            detail = self.query_one(wid, OpDetail)
            detail.can_focus = True  # tab switches sides, arrows scroll
            if op is not None:
                detail.load(q, op, badges=None if key == "target_op_id" else "app")

    def on_op_detail_link_chosen(self, event: OpDetail.LinkChosen) -> None:
        event.stop()
        self.notify("links are followed in the explorer (esc, then enter on the op)", timeout=2)

    def action_close(self) -> None:
        self.app.pop_screen()
