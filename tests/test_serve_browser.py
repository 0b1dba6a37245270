"""``dumpscope serve`` in a real browser (issue 34): headless Chromium through playwright opens the page,
types ``?`` without clicking anywhere, and the explorer answers with its help screen.

The terminal is drawn on a canvas, so the screen is read where the browser reads it: the frames the
page receives over its websocket.  Skipped cleanly without playwright (``pip install
'dumpscope[browser]'``) or without a Chromium (``apt install chromium``, ``playwright install
chromium``, or ``$DUMPSCOPE_CHROMIUM`` naming one); every wait is bounded and the server's process
group is ended at the end.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from test_serve import ANSI, start_serve, stop

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dumpscope[browser])")
pytest.importorskip("textual_serve")


def _chromium() -> str | None:
    """A Chromium on this machine, or None (then playwright's own download, if any, is tried)."""
    named = os.environ.get("DUMPSCOPE_CHROMIUM")
    if named:
        return named
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _launch(p):
    try:
        return p.chromium.launch(executable_path=_chromium(), headless=True,
                                 args=["--no-sandbox", "--disable-gpu"])
    except playwright_api.Error as exc:
        if "Executable doesn't exist" in str(exc) or "executable" in str(exc).lower() and _chromium() is None:
            pytest.skip(f"no Chromium for playwright here: {str(exc).splitlines()[0]}")
        raise


def _text(frames: list[bytes]) -> str:
    return ANSI.sub(b"", b"".join(frames)).decode("utf-8", errors="replace")


def _wait_for(frames: list[bytes], words: list[str], timeout: float, page) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = _text(frames)
        if all(w in text for w in words):
            return text
        page.wait_for_timeout(100)
    return _text(frames)


def test_a_key_typed_without_a_click_reaches_the_explorer(tmp_path):
    from test_tui_support import make_ms_tree

    dump = make_ms_tree(tmp_path / "dump", steps=(0,), inf_op=None)
    proc, port = start_serve([str(dump)], tmp_path)
    try:
        with playwright_api.sync_playwright() as p:
            browser = _launch(p)
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 800})
                frames: list[bytes] = []

                def on_socket(ws) -> None:
                    ws.on("framereceived", lambda data: frames.append(data if isinstance(data, bytes)
                                                                      else data.encode()))

                page.on("websocket", on_socket)
                page.goto(f"http://127.0.0.1:{port}/", wait_until="load")
                text = _wait_for(frames, ["Conv2D-op1", "rank 0"], 90, page)
                assert "Conv2D-op1" in text, text[-2000:]  # the explorer is drawn: now a key, no click
                focused = page.evaluate("document.activeElement && document.activeElement.tagName")
                assert focused == "TEXTAREA", f"the terminal does not hold the keyboard ({focused})"
                before = len(frames)
                page.keyboard.press("?")
                text = _text(frames[before:])
                deadline = time.monotonic() + 30
                while "dumpscope — keys" not in text and time.monotonic() < deadline:
                    page.wait_for_timeout(100)
                    text = _text(frames[before:])
                assert "dumpscope — keys" in text, f"? typed without a click did not open the help: {text[-2000:]}"
            finally:
                browser.close()
    finally:
        stop(proc)
