"""Command palette (ctrl+p): context-aware commands and "jump to op" by name.

Static commands depend on the state (compare only with ``--compare``, steps/ranks of the
open dump); op names are searched with ``q.search`` off the UI thread as the user types.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Callable, Iterator

from textual.command import DiscoveryHit, Hit, Hits, Provider
from dumpscope.tui.explorer import explorer

OP_HITS = 15


class DumpscopeCommands(Provider):
    def _commands(self) -> Iterator[tuple[str, Callable[[], Any], str]]:
        app = explorer(self)
        if app.q is None:
            yield ("Help: list all keys", app.action_help, "?")
            return
        yield ("Open overflow view", app.action_overflow, "ops with overflow / NaN / Inf, origin first")
        yield ("Open watch view", app.action_watch_view, "watched tensors and their snapshots")
        if app.compare_with:
            yield ("Open compare view", app.action_compare, "metrics and verdicts, first divergence")
        yield ("Open problems view", app.action_problems, "files the index could not use")
        yield ("Export triage report", app.action_export, "markdown report of bookmarks and findings")
        yield ("Refresh index", app.action_refresh, "re-walk the tree incrementally")
        yield ("Help: list all keys", app.action_help, "?")
        main = app.main
        yield ("Toggle tree / flat list", main.action_toggle_view, "t")
        yield ("Search ops", main.action_search, "/")
        yield ("Search ops of a source line (@file.py:LINE)", partial(main.action_search, "@"), "/ @")
        if main.current is not None:
            yield (f"Bookmark {main.current.short}", main.action_bookmark, "b")
            yield (f"Mark / unmark {main.current.short} for the re-dump config", main.action_mark, "space")
            yield (f"Graph view of {main.current.short}", main.action_graph, "g")
        if app.marked:
            yield (f"Export the {len(app.marked)} marked ops as a re-dump config", app.action_export, "e")
        for step in app.q.steps(app.rank):
            if step != app.step:
                yield (f"Switch to step {step}", partial(app.set_place, step=step), f"rank {app.rank}")
        for rank in app.q.ranks():
            if rank != app.rank:
                yield (f"Switch to rank {rank}", partial(app.set_place, rank=rank), "")
        screen_cmds = getattr(self.screen, "palette_commands", None)  # the screen the palette was opened on
        if screen_cmds is not None:
            yield from screen_cmds()

    async def discover(self) -> Hits:
        for name, fn, help_text in self._commands():
            yield DiscoveryHit(name, fn, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, fn, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), fn, help=help_text)
        app = explorer(self)
        q = app.q
        if q is None or len(query.strip()) < 2:
            return
        ops = await asyncio.to_thread(q.search, query.strip(), app.rank, app.step, OP_HITS)
        for i, op in enumerate(ops):
            label = f"Jump to op {op.short}"
            yield Hit(0.9 - i * 0.01, matcher.highlight(label) if matcher.match(label) else label,
                      partial(app.open_op, op), help=f"{op.type}  {op.name}")
