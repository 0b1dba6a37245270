"""The shape of tui/ (issue 32), checked on its source: no import cycle between its modules (imports inside
functions count: they run too), no SQL text (views and commands call query methods), no screen probing the app
with ``getattr`` (they use ``tui.explorer.Explorer``, which the app provides), no module over 800 lines."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TUI = Path(__file__).resolve().parent.parent / "tui"


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(TUI.rglob("*.py")):
        rel = p.relative_to(TUI).with_suffix("")
        parts = [x for x in rel.parts if x != "__init__"]
        out[".".join(["dumpscope", "tui", *parts])] = p
    return out


def _runtime_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:`` (never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in mods else base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in mods and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_in_tui():
    mods = _modules()
    graph = {m: _imports(m, p, mods) for m, p in mods.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET|CREATE\s+(TABLE|INDEX))\b",
                 re.IGNORECASE | re.DOTALL)


def test_no_sql_in_tui():
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                found.append(f"{name}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany"):
                found.append(f"{name}:{node.lineno} .{node.attr}")
    assert found == []


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


def test_no_tui_module_over_800_lines():
    long = {name: n for name, p in _modules().items() if (n := len(p.read_text().splitlines())) > 800}
    assert long == {}
