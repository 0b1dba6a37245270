"""Helpers for the explorer tests: tiny MindSpore-style dump trees and app waiting.

Kept in a module of its own (no tests here) so both ``test_tui.py`` and
``test_tui_snapshots.py`` build exactly the same trees.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import numpy as np

from conftest import SAMPLES

#: the committed MindSpore LeNet sample (sample_dumps/generate.py: deterministic)
SAMPLE_LENET = SAMPLES / "mindspore_lenet_sync"

#: (op_type, full name with scope) in execution order
TINY_OPS = [
    ("Conv2D", "Default/network/backbone/conv1/Conv2D-op1"),
    ("BatchNorm", "Default/network/backbone/bn1/BatchNorm-op2"),
    ("ReLU", "Default/network/backbone/relu/ReLU-op3"),
    ("MatMul", "Default/network/backbone/fc/MatMul-op4"),
    ("Add", "Default/network/backbone/fc/Add-op5"),
    ("SoftmaxCrossEntropyWithLogits", "Default/network/loss/SoftmaxCrossEntropyWithLogits-op6"),
]
INF_OP = "Default/network/backbone/fc/MatMul-op4"
#: downstream of the origin: also non-finite, must be listed after it
INF_DOWNSTREAM = "Default/network/backbone/fc/Add-op5"


def make_ms_tree(root: Path, steps: tuple[int, ...] = (0, 1), inf_op: Optional[str] = INF_OP,
                 ops: list[tuple[str, str]] = TINY_OPS) -> Path:
    """A MindSpore 2.x sync-dump tree (``.npy`` per tensor) with an execution-order CSV.

    Values are deterministic; ``inf_op``'s output (and ``INF_DOWNSTREAM``'s) holds +Inf and a NaN at every step.
    """
    rng = np.random.default_rng(1234)
    dump = root / "dump"
    order = dump / "rank_0" / "execution_order"
    order.mkdir(parents=True, exist_ok=True)
    (order / "ms_execution_order_graph_0.csv").write_text(
        "NodeExecutionOrder-FullNameWithScope\n" + "".join(f"{name}\n" for _, name in ops))
    for step in steps:
        folder = dump / "rank_0" / "Net" / "0" / str(step)
        folder.mkdir(parents=True, exist_ok=True)
        ts = 1700000000000000 + step * 1000
        for i, (op_type, name) in enumerate(ops):
            op_name = name.replace("/", "_")
            for io, slot in (("input", 0), ("output", 0)):
                arr = rng.standard_normal((2, 3, 4)).astype(np.float32)
                if io == "output" and inf_op and name in (inf_op, INF_DOWNSTREAM):
                    arr[0, 1, 2] = np.inf
                    arr[1, 0, 0] = np.nan
                fname = f"{op_type}.{op_name}.0.0.{ts + i * 10 + (slot if io == 'input' else 5):016d}.{io}.{slot}" \
                        f".DefaultFormat.float32.npy"
                np.save(folder / fname, arr)
    return dump


async def wait_ready(pilot, timeout: float = 120.0) -> None:
    """Wait until the index is built (not partial results of a cold build), the first op is shown and
    workers are idle; fails past ``timeout`` seconds by the clock, or when the index failed."""
    app = pilot.app
    await wait_for(pilot, lambda: (app.q is not None and app.index_final) or app.index_error is not None,
                   "the index", timeout)
    assert app.q is not None, f"index not ready: {app.index_error}"
    await settle(pilot)


def record_notes(app, keep: bool = False) -> list:
    """Every notification ``app`` raises from now on, in order (call it before ``run_test``).

    ``app._notifications`` forgets one once its timeout (2-8 s) has passed, so a test reading it after a
    wait saw the note or not depending on the machine's speed.  ``keep``: the toasts stay on screen while
    the test looks (their timeout is an hour; what they say and where they sit are unchanged)."""
    notes: list = []
    add = app._notifications.add

    def record(notification):
        if keep:
            notification.timeout = 3600.0
        notes.append(notification)
        return add(notification)

    app._notifications.add = record
    return notes


async def wait_for(pilot, cond, what: str, limit: float = 60.0) -> None:
    """Wait until ``cond()`` holds, by the clock (a loaded machine makes each pause longer, never the wait
    shorter); past ``limit`` seconds the test fails saying what it waited for."""
    import time

    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, f"still waiting for {what} after {limit:.0f} s"
        await pilot.pause(0.05)


async def wait_ended(app, limit: float = 60.0) -> None:
    """Wait until the app has stopped (``q`` handled and every message queued before the exit with it), by
    the clock: past ``limit`` seconds the test fails.  Not through the pilot: a stopping app has no screen."""
    import asyncio
    import time

    deadline = time.monotonic() + limit
    while app.is_running:
        assert time.monotonic() < deadline, f"the explorer still runs {limit:.0f} s after q"
        await asyncio.sleep(0.02)


async def search_and_open(pilot, text: str) -> None:
    """Type ``/`` and ``text`` in the explorer, then open the first hit, as a user would."""
    await pilot.press("slash", *text)
    await settle(pilot)
    await pilot.press("enter")
    await settle(pilot)


#: how long :func:`settle` waits for the explorer to come to rest before the test fails (a loaded 2-core box
#: with a dozen processes took up to ~10 s for a cold open; nothing here waits for a time, only this long at most)
SETTLE_LIMIT = 90.0


def _still_moving(app) -> str:
    """What the explorer is still doing ('' when at rest): a worker, the detail's cursor-rest timer or its
    rows being read, a callback waiting for the next refresh, or a widget waiting for a layout, a scroll or
    a repaint."""
    from textual.worker import WorkerState

    busy = sorted(w.name or "?" for w in app.workers if w.state in (WorkerState.PENDING, WorkerState.RUNNING))
    if busy:
        return f"workers {busy}"
    screen = app.screen
    if getattr(screen, "_show_timer", None) is not None:
        return "the detail's cursor-rest timer"
    if getattr(screen, "_loading", None) is not None:
        return "the op detail's rows"
    if screen._callbacks:
        return f"{len(screen._callbacks)} callbacks after the refresh"
    waiting = [type(w).__name__ for w in [screen, *screen.walk_children()]
               if w._layout_required or w._repaint_required or w._scroll_required]
    if waiting or screen._dirty_widgets:
        return f"a layout or repaint of {waiting or 'the screen'}"
    return ""


async def settle(pilot, limit: float = SETTLE_LIMIT) -> None:
    """Let messages, timers, thread workers, layouts and repaints finish so the screen is stable: until the
    explorer is seen at rest three times in a row (a result that arrives asks for a layout, the layout for a
    scroll...), each look after the app has processed what was queued.  Fails past ``limit`` seconds, saying
    what still moves; never a fixed number of pauses (a loaded machine needs more of them)."""
    import asyncio
    import time

    from textual.worker import WorkerCancelled

    app = pilot.app
    deadline = time.monotonic() + limit
    await pilot.pause(0.1)  # a cursor that just moved starts the detail's rest timer on the next message
    rest, what = 0, ""
    while rest < 3:
        try:
            await asyncio.wait_for(app.workers.wait_for_complete(), max(0.1, deadline - time.monotonic()))
        except WorkerCancelled:  # an exclusive worker cancelled by a newer one (a second load of a pane)
            pass
        except asyncio.TimeoutError:
            pass  # said below, with the workers' names
        await pilot.pause()
        what = _still_moving(app)
        rest = 0 if what else rest + 1
        if what:
            assert time.monotonic() < deadline, f"the explorer did not come to rest in {limit:.0f} s: {what}"
            if "timer" in what:
                await pilot.pause(0.05)  # a timer fires by the clock: let it


async def help_text(pilot) -> str:
    """Open help (``?``) and page through it as a user would; the text of every page."""
    await pilot.press("question_mark")
    await settle(pilot)
    body = pilot.app.screen.query_one("#help-body")
    seen = ""
    for _ in range(20):
        seen += screen_text(pilot.app)
        body.scroll_page_down(animate=False)
        await pilot.pause()
    return seen


def screen_text(app) -> str:
    """Plain text of the current screen (what a user would read)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens,
                                                       simplify=True))
    return console.export_text()


CHILD_HOOKS = Path(__file__).resolve().parent / "child_hooks.py"


def child_hooks(monkeypatch, *hooks: str) -> None:
    """Start the explorer's child processes (index build, ``o`` scan) through ``tests/child_hooks.py``
    with ``hooks`` applied in them: a monkeypatch of this process does not reach a child."""
    from dumpscope.core.engines import child_jobs

    monkeypatch.setattr(child_jobs, "CHILD_COMMAND", [sys.executable, str(CHILD_HOOKS)])
    monkeypatch.setenv("DUMPSCOPE_TEST_CHILD_HOOKS", ",".join(hooks))


def set_env(monkeypatch, tmp: Path) -> None:
    monkeypatch.setenv("DUMPSCOPE_CACHE_DIR", str(tmp / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp / "config"))
    monkeypatch.chdir(tmp)
    os.makedirs(tmp / "cache", exist_ok=True)
