"""``dumpscope serve``: the same explorer in a web browser, through textual-serve (optional extra).

textual-serve starts one explorer process per browser tab (``dumpscope explore PATH`` in a Python in
isolated mode, ``core.isolated``: a ``dumpscope/`` folder where the server was started is never imported)
and relays its terminal over a websocket: no feature exists only in the browser.  It listens on
127.0.0.1 by default — dumps stay on this machine unless the user forwards the port
(``ssh -L 8000:localhost:8000 HOST``) or chooses another ``--host``.
"""

from __future__ import annotations

import shlex
from typing import Optional

MISSING = "dumpscope serve needs textual-serve: pip install 'dumpscope[serve]'"


def explore_command(path: str, compare: Optional[str] = None, no_cache: bool = False,
                    cache_dir: Optional[str] = None) -> str:
    """The shell command textual-serve runs for each browser session (quoted: paths may hold anything)."""
    from dumpscope.core.support.isolated import module_command

    parts = [*module_command("dumpscope"), "explore", path]
    if compare:
        parts += ["--compare", compare]
    if no_cache:
        parts.append("--no-cache")
    if cache_dir:
        parts += ["--cache-dir", cache_dir]
    return " ".join(shlex.quote(p) for p in parts)


def serve(path: str, host: str = "127.0.0.1", port: int = 8000, compare: Optional[str] = None,
          no_cache: bool = False, cache_dir: Optional[str] = None, public_url: Optional[str] = None) -> None:
    """Run the web server until Ctrl+C."""
    try:
        from textual_serve.server import Server
    except ImportError:
        raise ImportError(MISSING) from None
    if not 0 < port < 65536:
        raise ValueError(f"--port {port}: not a TCP port (1-65535)")
    import os

    command = explore_command(os.path.abspath(path), os.path.abspath(compare) if compare else None, no_cache,
                              cache_dir)
    server = focusing_server(Server)(command, host=host, port=port,
                                     title=f"dumpscope {os.path.basename(os.path.abspath(path))}",
                                     public_url=public_url)
    server.serve()


#: put the keyboard in the terminal as soon as the page has it (xterm.js reads keys from a hidden
#: textarea): without it keys did nothing until the user clicked into the page.  Tried again until
#: the terminal has drawn its first bytes and holds the focus; a tab brought back re-focuses it.
FOCUS_SCRIPT = """<script>
(function () {
  function focusTerminal() {
    var area = document.querySelector("#terminal textarea");
    if (area && document.activeElement !== area) { area.focus({preventScroll: true}); }
    return area !== null && document.activeElement === area;
  }
  var tries = 0;
  var timer = setInterval(function () {
    var ready = focusTerminal() && document.body.classList.contains("-first-byte");
    if (ready || ++tries > 600) { clearInterval(timer); }
  }, 50);
  window.addEventListener("focus", focusTerminal);
})();
</script>
"""


def with_focus_script(html: str) -> str:
    """The page with ``FOCUS_SCRIPT`` before ``</body>`` (at the end when the page has none)."""
    at = html.rfind("</body>")
    return html + FOCUS_SCRIPT if at < 0 else html[:at] + FOCUS_SCRIPT + html[at:]


def focusing_server(base: type) -> type:
    """textual-serve's ``Server`` whose page focuses the terminal on load (its own page is kept:
    only a script is added, so a newer textual-serve's page still works)."""

    class FocusingServer(base):  # type: ignore[misc, valid-type]
        async def handle_index(self, request):  # type: ignore[no-untyped-def]
            response = await super().handle_index(request)
            if getattr(response, "text", None) and "html" in (response.content_type or ""):
                response.text = with_focus_script(response.text)
            return response

    return FocusingServer
