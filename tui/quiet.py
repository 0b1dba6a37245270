"""Updating a Static without laying the whole screen out again when its size stays the same.

``Static.update`` asks Textual for a layout of the whole screen (~10 ms at 120x40 on a 2-core box),
and a size that changes during that layout asks for a second one.  The op detail and the tensor
panel update after every cursor move, three layouts per op, and a key pressed meanwhile waited for
them (``down`` p95 62 ms at 100k ops, target 50).  Here the new content's height is measured first:
a layout is asked for only when the widget would change size.
"""

from __future__ import annotations

from textual.visual import VisualType
from textual.widgets import Static


def update_static(widget: Static, content: VisualType = "") -> bool:
    """``widget.update(content)``; True when a layout was needed (the widget's height changes)."""
    styles = widget.styles
    width = widget.content_region.width
    if (not widget.is_mounted or not widget.display or width <= 0 or widget.size.height <= 0
            or (styles.width is not None and styles.width.is_auto)):
        widget.update(content)  # not laid out yet, hidden, or as wide as its text: let Textual decide
        return True
    widget.update(content, layout=False)
    if styles.height is not None and not styles.height.is_auto:
        return False  # a fixed or fractional height does not follow the content
    height = widget.get_content_height(widget.container_size, widget.app.size, width)
    if height != widget.content_region.height:
        widget.refresh(layout=True)
        return True
    return False
