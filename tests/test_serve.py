"""``dumpscope serve``: the explorer behind textual-serve, driven over its websocket on loopback.

The test starts ``dumpscope serve`` on 127.0.0.1 and a free port, connects to ``/ws`` as the
browser page does, and reads the terminal stream until the op tree of the dump shows.  Every wait
is bounded; the server's process group is ended at the end.  Skipped without textual-serve.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dumpscope.tui.cli.entry import main

ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-B]|\x1b[=>78]")


def test_serve_help_documents_port_and_ssh_forwarding(capsys):
    assert main(["serve", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--port" in out and "--host" in out and "127.0.0.1" in out
    assert "ssh -L 8000:localhost:8000" in out


def test_serve_without_textual_serve_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "textual_serve", None)
    monkeypatch.setitem(sys.modules, "textual_serve.server", None)
    assert main(["serve", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "dumpscope[serve]" in err and len(err.strip().splitlines()) == 1


def test_explore_command_quotes_paths():
    from dumpscope.tui.serve import explore_command

    cmd = explore_command("/d/a b;rm -rf x", compare="/t/$(x)")
    assert "'/d/a b;rm -rf x'" in cmd and "'/t/$(x)'" in cmd and cmd.endswith(" dumpscope explore '/d/a b;rm -rf x' --compare '/t/$(x)'")
    assert " -I " in cmd and " -c " in cmd  # isolated: never a dumpscope/ folder of the current folder (test_no_foreign_code)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(args: list[str], tmp_path: Path, tries: int = 3) -> tuple[subprocess.Popen, int]:
    """``dumpscope serve ARGS`` on a free loopback port, listening: (process, port).  Test processes run
    side by side (pytest-xdist), so a port found free may be taken before the server binds it: a server
    that exits at once is started again on another port."""
    env = dict(os.environ, DUMPSCOPE_CACHE_DIR=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    for attempt in range(tries):
        port = _free_port()
        proc = subprocess.Popen([sys.executable, "-I", "-m", "dumpscope", "serve", *args, "--host", "127.0.0.1",
                                 "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                cwd=tmp_path, start_new_session=True)
        try:
            _wait_port(port, proc, timeout=60)
            return proc, port
        except AssertionError as exc:
            stop(proc)
            if "server exited early" not in str(exc) or attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def stop(proc: subprocess.Popen) -> None:
    """End the server's process group (the server and the explorers it started), waiting boundedly."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=15)


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the socket listening on ``port`` (not another test's server that
    took the port first); True where ``/proc`` cannot tell."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f[9])
    if not os.path.isdir(f"/proc/{pid}/fd"):
        return True
    try:
        links = {os.readlink(os.path.join(f"/proc/{pid}/fd", fd)) for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return False
    return any(f"socket:[{inode}]" in links for inode in inodes)


def _wait_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited early: {proc.stdout.read().decode(errors='replace')[-2000:]}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0 and _listens(proc.pid, port):
                return
        time.sleep(0.1)
    raise AssertionError(f"server did not listen on 127.0.0.1:{port} within {timeout} s")


async def _read_screen(port: int, wanted: list[str], timeout: float) -> str:
    import aiohttp

    seen = b""
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/") as page:  # the page the browser loads
            html = await page.text()
            assert page.status == 200 and f"127.0.0.1:{port}/ws" in html
            # the page puts the keyboard in the terminal on load (test_serve_browser.py types into it)
            assert html.count("#terminal textarea") == 1 and html.index("focusTerminal") < html.rindex("</body>")
        async with session.ws_connect(f"http://127.0.0.1:{port}/ws?width=100&height=30") as ws:
            await ws.send_json(["resize", {"width": 100, "height": 30}])
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    msg = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
                except asyncio.TimeoutError:
                    break
                if msg.type == aiohttp.WSMsgType.BINARY:
                    seen += msg.data
                elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                    break
                text = ANSI.sub(b"", seen).decode("utf-8", errors="replace")
                if all(w in text for w in wanted):
                    return text
    return ANSI.sub(b"", seen).decode("utf-8", errors="replace")


def test_served_explorer_shows_the_op_tree_over_the_websocket(tmp_path):
    pytest.importorskip("textual_serve")
    pytest.importorskip("aiohttp")
    from test_tui_support import make_ms_tree

    dump = make_ms_tree(tmp_path / "dump", steps=(0,), inf_op=None)
    from test_no_foreign_code import _plant

    marker = tmp_path / "imported.txt"
    _plant(tmp_path, marker)  # where the server runs: the explorer it starts imports dumpscope, not this
    _plant(dump, marker)
    proc, port = start_serve([str(dump)], tmp_path)
    try:
        text = asyncio.run(_read_screen(port, ["Default/network (6)", "Conv2D-op1", "rank 0"], timeout=90))
    finally:
        stop(proc)
    assert "Conv2D-op1" in text, text[-3000:]
    assert "Default/network (6)" in text and "rank 0" in text  # the op tree, its scope chain and counts
    assert not marker.exists()
