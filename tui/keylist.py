"""An ``OptionList`` that also moves with ``j``/``k`` (the step/rank pickers, the detail's links).

Every other list of the explorer (op tree, flat list, tables, graph view) takes ``j``/``k``; a
focused list that ignored them made the keys mean something in one list and nothing in the next.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import OptionList


class KeyOptionList(OptionList):
    BINDINGS = [
        Binding("k", "cursor_up", "Up", show=False, id="options.up"),
        Binding("j", "cursor_down", "Down", show=False, id="options.down"),
    ]
