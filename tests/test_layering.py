"""The pipeline's layering, enforced (issue 32): read from the source, so a lazy import inside a
function counts as much as one at the top of a module.

Layers, low to high: the records (``model``, ``units``, ``errors``, ``names``, ``inert``) and
``support`` → ``formats`` → ``graphs`` → ``layouts`` → ``index`` → ``tensors`` → ``query`` → ``engines``.
A core module imports only its own layer or lower ones; core never imports the explorer (``tui``),
Textual or Rich; no module imports the private names of another package's modules; SQL is written in
the index and query layers only; and no import cycle runs through core or tui.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Optional

REPO = Path(__file__).resolve().parents[1]
#: the source folders and the packages they are installed as (pyproject.toml's package-dir)
PACKAGES = {"core": "dumpscope.core", "tui": "dumpscope.tui"}
#: core's first-level names, layer by layer, lowest first
LAYERS: tuple[tuple[str, ...], ...] = (
    ("model", "units", "errors", "names", "inert", "support"),
    ("formats",),
    ("graphs",),
    ("layouts",),
    ("index",),
    ("tensors",),
    ("query",),
    ("engines",),
)
FOREIGN_UI = ("textual", "rich")


def _modules(root: Path = REPO) -> dict[str, tuple[Path, bool]]:
    """Every module of core and tui: name → (file, is a package's ``__init__``)."""
    out: dict[str, tuple[Path, bool]] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            out[".".join([package, *parts])] = (path, is_pkg)
    return out


def _imports(name: str, path: Path, is_pkg: bool, known: set[str]) -> Iterator[tuple[str, str, int, bool]]:
    """``(imported module, imported name or "", line, typing only)`` of every import in the file, lazy
    ones included, plus string constants naming a module (``importlib`` tables); ``typing only``: under
    ``if TYPE_CHECKING:`` (never run: it counts for the layers, not for cycles)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    typing_only = {id(sub) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for stmt in node.body for sub in ast.walk(stmt)}
    for node in ast.walk(tree):
        hint = id(node) in typing_only
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, "", node.lineno, hint
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here[:len(here) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub, "", node.lineno, hint) if sub in known else (base, alias.name, node.lineno, hint)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known:
            yield node.value, "", node.lineno, hint


def _graph(root: Path = REPO) -> tuple[dict[str, set[str]], dict[str, list[tuple[str, str, int, bool]]]]:
    """The runtime import edges between core and tui modules, and every import of each module."""
    mods = _modules(root)
    known = set(mods)
    edges: dict[str, set[str]] = {}
    raw: dict[str, list[tuple[str, str, int, bool]]] = {}
    for name, (path, is_pkg) in mods.items():
        raw[name] = [imp for imp in _imports(name, path, is_pkg, known) if imp[0] != name]
        edges[name] = {target for target, _, _, hint in raw[name] if target in known and not hint}
    return edges, raw


def _layer(module: str) -> Optional[int]:
    parts = module.split(".")
    if parts[:2] != ["dumpscope", "core"]:
        return None
    if len(parts) == 2:
        return 0  # the package itself (empty)
    return next(i for i, names in enumerate(LAYERS) if parts[2] in names)


def _cycles(edges: dict[str, set[str]], within: str) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself) that hold
    a module whose name starts with ``within`` (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if (len(comp) > 1 or v in edges.get(v, ())) and any(m.startswith(within) for m in comp):
                    out.append(sorted(comp))
    return out


def layer_violations(root: Path = REPO) -> list[str]:
    edges, raw = _graph(root)
    bad = []
    for module, imports in sorted(raw.items()):
        mine = _layer(module)
        if mine is None:
            continue
        for target, _name, line, _hint in imports:
            top = target.split(".")[0]
            if top in FOREIGN_UI or target.startswith("dumpscope.tui"):
                bad.append(f"{module}:{line} imports {target} (core never imports the explorer, Textual or Rich)")
                continue
            theirs = _layer(target)
            if theirs is not None and theirs > mine:
                bad.append(f"{module}:{line} ({'/'.join(LAYERS[mine])}) imports {target} "
                           f"({'/'.join(LAYERS[theirs])}, a higher layer)")
    return bad


def _package(module: str, mods: dict[str, tuple[Path, bool]]) -> str:
    return module if mods.get(module, (None, False))[1] else module.rpartition(".")[0]


def private_imports(root: Path = REPO) -> list[str]:
    """Private names (``_x``) a core module imports from another package's module.  Sibling modules of
    one package (one job split over files: ``tensors.stats`` and ``stats_float``) may share theirs."""
    mods = _modules(root)
    _edges, raw = _graph(root)
    return [f"{module}:{line} imports {name} from {target}" for module, imports in sorted(raw.items())
            if module.startswith("dumpscope.core") for target, name, line, _hint in imports
            if target.startswith("dumpscope") and name.startswith("_") and not name.startswith("__")
            and _package(target, mods) != _package(module, mods)]


#: SQL statements as they are written in a string (a keyword pair, so prose such as "select from" in a
#: docstring is not taken for one)
_SQL = re.compile(r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+(?:OR\s+\w+\s+)?INTO\b|\bCREATE\s+(?:TABLE|INDEX)\b|"
                  r"\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b|\bPRAGMA\s+\w+|\bBEGIN\s+IMMEDIATE\b")
#: the layers that write SQL: the index (its tables) and the query layer (its questions)
SQL_HOMES = ("dumpscope.core.index", "dumpscope.core.query")


def sql_outside(root: Path = REPO) -> list[str]:
    """String constants holding SQL, and uses of an index's connection or ``query``, outside the index
    and query layers (engines and views ask query methods)."""
    bad = []
    for module, (path, _is_pkg) in sorted(_modules(root).items()):
        if module.startswith(SQL_HOMES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SQL.search(node.value):
                bad.append(f"{module}:{node.lineno} SQL text {node.value[:40]!r}")
            elif isinstance(node, ast.JoinedStr) and _SQL.search(ast.unparse(node)):
                bad.append(f"{module}:{node.lineno} SQL text {ast.unparse(node)[:40]!r}")
            elif isinstance(node, ast.Attribute) and node.attr in ("conn", "query", "execute", "executemany") \
                    and isinstance(node.value, ast.Attribute) and node.value.attr == "index":
                bad.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    return bad


def import_cycles(root: Path = REPO) -> list[list[str]]:
    """Every runtime import cycle among the modules of core and tui (lazy imports counted)."""
    edges, _raw = _graph(root)
    return _cycles(edges, "dumpscope.")


def test_every_core_module_has_a_layer():
    for module in _modules():
        if module.startswith("dumpscope.core."):
            assert module.split(".")[2] in {n for names in LAYERS for n in names}, module


def test_core_imports_only_its_own_or_lower_layers():
    assert layer_violations() == []


def test_no_module_imports_another_packages_private_names():
    assert private_imports() == []


def test_sql_is_written_only_in_the_index_and_query_layers():
    assert sql_outside() == []


def test_no_import_cycle_in_core_or_tui():
    assert import_cycles() == []


def test_no_module_of_core_or_tui_is_over_800_lines():
    """One job per module (issue 32): a module past 800 lines has grown a second job."""
    long = {m: n for m, (p, _pkg) in _modules(REPO).items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800}
    assert long == {}


def test_a_package_edge_is_followed_to_the_module_it_names():
    """``from pkg import mod`` is an edge to ``pkg.mod``; ``from pkg import name`` to ``pkg``."""
    edges, _ = _graph()
    assert "dumpscope.core.index.dump_index" in edges["dumpscope.core.query.dump_query"]
    assert "dumpscope.core.layouts.msprobe" in edges["dumpscope.core.layouts"]  # importlib's table


def _mutated(tmp_path: Path, rel: str, extra: str) -> Path:
    """A copy of core and tui with ``extra`` appended to the file ``rel`` (a deliberate violation)."""
    for folder in PACKAGES:
        dest = tmp_path / folder
        for path in (REPO / folder).rglob("*.py"):
            target = dest / path.relative_to(REPO / folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    with open(tmp_path / rel, "a", encoding="utf-8") as fh:
        fh.write(extra)
    return tmp_path


def test_each_check_fails_on_a_deliberate_violation(tmp_path_factory):
    """The checks are not vacuous: a lazy upward import, a lazy Rich import, a private name, a lazy cycle
    and an engine's SQL, each planted in a copy of the tree, are each reported."""
    upward = _mutated(tmp_path_factory.mktemp("up"), "core/index/accounting.py",
                      "\n\ndef _late():\n    from dumpscope.core.engines.trend import POINT_KEYS\n    return POINT_KEYS\n")
    assert any("index.accounting" in v and "engines.trend" in v for v in layer_violations(upward))
    ui = _mutated(tmp_path_factory.mktemp("ui"), "core/engines/trend.py",
                  "\n\ndef _paint():\n    import rich.text\n    return rich.text\n")
    assert any("engines.trend" in v and "rich.text" in v for v in layer_violations(ui))
    private = _mutated(tmp_path_factory.mktemp("private"), "core/engines/trend.py",
                       "\n\ndef _peek():\n    from dumpscope.core.query.rows import _nothing\n    return _nothing\n")
    assert private_imports(private) != []
    cycle = _mutated(tmp_path_factory.mktemp("cycle"), "core/index/lock.py",
                     "\n\ndef _late():\n    from dumpscope.core.index import dump_index\n    return dump_index\n")
    assert any({"dumpscope.core.index.dump_index", "dumpscope.core.index.lock"} <= set(c) for c in import_cycles(cycle))
    sql = _mutated(tmp_path_factory.mktemp("sql"), "core/engines/trend.py",
                   "\n\ndef _count(q):\n    return q.index.query(f\"SELECT COUNT(*) FROM ops WHERE rank={1}\")\n")
    found = [v for v in sql_outside(sql) if "engines.trend" in v]
    assert any("SQL text" in v for v in found) and any("q.index.query" in v for v in found)


def test_importing_core_loads_no_textual_or_rich(tmp_path):
    """A library user (a notebook, a script) gets the query API and every engine without the explorer's
    toolkit: every core module is imported in a fresh interpreter and none of Textual or Rich is loaded."""
    modules = sorted(m for m in _modules() if m.startswith("dumpscope.core"))
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FOREIGN_UI!r}))\n"
    )
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the installed package, as a user's interpreter finds it
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout

