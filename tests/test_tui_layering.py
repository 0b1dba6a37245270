"""The shape of tui/ (issue 32), checked on its source: no screen probes the app with ``getattr`` (they use
``tui.explorer.Explorer``, which the app provides).  Import cycles, SQL and module sizes are checked for core and
tui together in test_layering.py."""

from __future__ import annotations

import ast
from pathlib import Path

TUI = Path(__file__).resolve().parent.parent / "tui"


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(TUI.rglob("*.py")):
        rel = p.relative_to(TUI).with_suffix("")
        parts = [x for x in rel.parts if x != "__init__"]
        out[".".join(["dumpscope", "tui", *parts])] = p
    return out


def test_no_screen_probes_the_app_with_getattr():
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                    and node.args and ast.unparse(node.args[0]) in ("app", "self.app", "self._app"):
                found.append(f"{name}:{node.lineno}")
    assert found == []


def test_the_app_provides_the_explorer_interface(tmp_path):
    from dumpscope.tui.app import DumpscopeApp
    from dumpscope.tui.explorer import Explorer

    app = DumpscopeApp(str(tmp_path))
    state = set(Explorer.__annotations__)  # set by the app's __init__
    calls = {n for n, v in vars(Explorer).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    assert state and calls
    assert sorted(n for n in state if n not in vars(app) and not hasattr(DumpscopeApp, n)) == []
    assert sorted(n for n in calls if not hasattr(DumpscopeApp, n)) == []
