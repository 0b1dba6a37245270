"""The key bar at the bottom of every screen: Textual's ``Footer`` drawn as one line of text.

``Footer`` mounts a widget per key and composes them again whenever the bindings change, which
they do each time a screen is shown: about half of the UI thread's work for ``c`` and for Enter on
a compare row (~60 ms of 120 at 100k ops) went to styling those widgets.  This bar looks the same
(the footer's colours, ``key description`` pairs, the palette key on the right after a rule) but is
one widget that only repaints; a click on a key presses it, like the footer.
"""

from __future__ import annotations

from typing import Optional

from rich.style import Style
from rich.text import Text
from textual import events
from textual.widget import Widget


class KeyBar(Widget, can_focus=False):
    """One line: the screen's shown bindings, the command palette key at the right edge."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"keybar--key", "keybar--description", "keybar--disabled", "keybar--rule"}
    DEFAULT_CSS = """
    KeyBar { dock: bottom; height: 1; color: $footer-foreground; background: $footer-background; }
    KeyBar > .keybar--key { color: $footer-key-foreground; background: $footer-key-background; text-style: bold; }
    KeyBar > .keybar--description { color: $footer-description-foreground;
                                    background: $footer-description-background; }
    KeyBar > .keybar--disabled { text-style: dim; }
    KeyBar > .keybar--rule { color: $foreground 20%; }
    """

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        #: (first cell, last cell + 1, key) of every key drawn, for clicks
        self._spans: list[tuple[int, int, str]] = []

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen) -> None:
        if self.is_attached and screen is self.screen:
            self.refresh()

    def _keys(self) -> tuple[list[tuple[str, str, str, bool]], Optional[tuple[str, str, str, bool]]]:
        """(key, key shown, description, enabled) of the shown bindings (one per action, first
        binding wins, as the footer does) and of the palette key."""
        app = self.app
        active = self.screen.active_bindings
        keys: list[tuple[str, str, str, bool]] = []
        seen: set[str] = set()
        for _node, binding, enabled, _tooltip in active.values():
            if binding.show and binding.action not in seen:
                seen.add(binding.action)
                keys.append((binding.key, app.get_key_display(binding), binding.description, enabled))
        palette = None
        if app.ENABLE_COMMAND_PALETTE and app.COMMAND_PALETTE_BINDING in active:
            _node, binding, enabled, _tooltip = active[app.COMMAND_PALETTE_BINDING]
            palette = (binding.key, app.get_key_display(binding), binding.description, enabled)
        return keys, palette

    def render(self) -> Text:
        key_style = self.get_component_rich_style("keybar--key", partial=True)
        desc_style = self.get_component_rich_style("keybar--description", partial=True)
        dim = self.get_component_rich_style("keybar--disabled", partial=True)
        width = self.size.width
        keys, palette = self._keys()
        right = Text(no_wrap=True, overflow="crop")
        if palette is not None:  # as the footer draws it: a rule where the key's left pad would be
            _key, shown, description, enabled = palette
            extra = dim if not enabled else None
            rule = self.background_colors[1] + self.get_component_styles("keybar--rule").color  # a 20 % tint
            right.append("▏", Style(color=rule.rich_color))
            right.append(shown, key_style + extra if extra else key_style)
            right.append(f" {description}", desc_style + extra if extra else desc_style)
            right.append(" ")
        room = max(0, width - right.cell_len)
        text = Text(no_wrap=True, overflow="crop")
        spans: list[tuple[int, int, str]] = []
        for entry in keys:
            start = text.cell_len
            if start >= room:
                break
            self._pair(text, entry, key_style, desc_style, dim)
            spans.append((start, min(room, text.cell_len), entry[0]))
        text.truncate(room, pad=True)
        if palette is not None:
            spans.append((room, width, palette[0]))
        self._spans = spans
        return text + right

    @staticmethod
    def _pair(text: Text, entry: tuple[str, str, str, bool], key_style, desc_style, dim) -> None:
        _key, shown, description, enabled = entry
        extra = dim if not enabled else None
        text.append(f" {shown} ", key_style + extra if extra else key_style)
        if description:
            text.append(f"{description} ", desc_style + extra if extra else desc_style)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        for start, end, key in self._spans:
            if start <= event.x < end:
                self.app.simulate_key(key)  # a disabled key's action is refused by the app, as typed
                return
