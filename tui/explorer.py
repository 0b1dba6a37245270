"""What the screens, views and widgets may use of the explorer app, written down: :class:`Explorer`.

The app (``tui.app.DumpscopeApp``) owns the shared state and the slow work; a screen reads that state and
asks for changes through this interface only (``explorer(self)``), never by probing the app with
``getattr`` for attributes that may not exist.  Textual's own App API (``push_screen``, ``notify``,
``call_from_thread``…) stays ``self.app``.  A test checks that the app provides every member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, cast

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from dumpscope.core.query import DumpQuery, OpRow
    from dumpscope.tui.badges import BadgeState
    from dumpscope.tui.main_screen import MainScreen


class Explorer(Protocol):
    # what is open and where
    display_name: str
    compare_with: Optional[str]
    q: Optional["DumpQuery"]
    target_q: Optional["DumpQuery"]
    rank: int
    step: int
    # what the status bar says
    progress: str
    index_error: Optional[str]
    compare_status: str
    # marks on ops, and the engines' results (the report and the views read them)
    badges: "BadgeState"
    bookmarks: dict[int, "OpRow"]
    marked: dict[int, "OpRow"]
    trouble: dict[tuple[int, int], tuple[int, int]]
    overflow_doc: Optional[dict[str, Any]]
    overflow_results: dict[tuple[int, int], list[dict[str, Any]]]
    watch_results: dict[tuple[int, int], dict[str, Any]]
    compare_result: Optional[dict[str, Any]]
    compare_error: Optional[str]
    #: the compare view's sorted tables of the current result (prepared in the compare worker)
    compare_view_cache: dict[Any, Any]

    @property
    def main(self) -> "MainScreen": ...

    def open_op(self, op: "OpRow") -> None: ...

    def set_place(self, rank: Optional[int] = None, step: Optional[int] = None) -> None: ...

    def toggle_bookmark(self, op: "OpRow") -> bool: ...

    def toggle_mark(self, op: "OpRow") -> bool: ...

    def overflow_report(self, q: "DumpQuery", progress: Callable[[int, int], None]) -> dict[str, Any]: ...

    def overflow_scanned(self, doc: dict[str, Any]) -> None: ...

    def forbidden_roots(self) -> list[str]: ...

    def export_directory(self) -> str: ...

    # the views and commands the palette offers (the keys' own actions)
    def action_help(self) -> None: ...

    def action_overflow(self) -> None: ...

    def action_watch_view(self) -> None: ...

    def action_compare(self) -> None: ...

    def action_problems(self) -> None: ...

    def action_export(self) -> None: ...

    def action_refresh(self) -> None: ...


def explorer(node: "DOMNode") -> Explorer:
    """The app behind ``node`` (a screen, view or widget), through the interface it provides."""
    return cast(Explorer, node.app)
