"""``dumpscope serve``: the same explorer in a web browser, through textual-serve (optional extra).

textual-serve starts one explorer process per browser tab (``dumpscope explore PATH`` in a Python in
isolated mode, ``core.isolated``: a ``dumpscope/`` folder where the server was started is never imported)
and relays its terminal over a websocket: no feature exists only in the browser.  It listens on
127.0.0.1 by default — dumps stay on this machine unless the user forwards the port
(``ssh -L 8000:localhost:8000 HOST``) or chooses another ``--host``.
"""

from __future__ import annotations

import shlex
import sys
from typing import Optional

MISSING = "dumpscope serve needs textual-serve: pip install 'dumpscope[serve]'"


def explore_command(path: str, compare: Optional[str] = None, no_cache: bool = False,
                    cache_dir: Optional[str] = None) -> str:
    """The shell command textual-serve runs for each browser session (quoted: paths may hold anything)."""
    from dumpscope.core.isolated import module_command

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
    server = Server(command, host=host, port=port, title=f"dumpscope {os.path.basename(os.path.abspath(path))}",
                    public_url=public_url)
    server.serve()
