"""Several dumps under one PATH: which one answers for a rank/step, which are set aside.

A folder often holds more than one run (``golden/`` and ``target/``, a run per day, two
framework versions).  Their files name the same ranks and steps, so grouping by (rank, step)
alone would merge two runs into one place: twice the ops, and an execution order that
depends on which folder was stored first.  Each dump is therefore recognised by its root
(the folder above its first rank / ``{time}`` / step level, as ``summary`` shows it), and
when two roots hold the same (rank, step), the root first in path order is indexed and every
other root that shares a place with it is set aside whole: its rows move to the ``aside_*``
tables, its files are counted as ``other_dump`` in the accounting, and one problem line names
both roots (a place here is (rank, step, graph), see ``decide``).  Roots that share no place (hosts holding different ranks, runs of later steps)
stay one job.  The decision depends only on the stored folders, never on the order they were
read in, and is taken again by every finalize (a root set aside returns once the clash is gone).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Optional

if TYPE_CHECKING:
    from dumpscope.core.index.dump_index import DumpIndex

#: folder names where a dump tree's own structure begins (FORMATS.md §5.1, §8.1, §9)
TREE_LEVEL = re.compile(r"^(?:rank_?\d+|\d{14}|worldsize\d+_global_rank\d+|step_?\d+|device_\d+|proc\d+)$")

#: per-folder tables whose rows a set-aside folder moves to ``aside_<table>``
ASIDE_TABLES = ("units", "exec_orders", "graph_files", "problems", "overflow", "dir_dtypes")


def _levels_below(dirpath: str, index_root: str) -> tuple[list[str], Optional[int]]:
    """The folders of ``dirpath`` below PATH, and the position of the first rank / time / step level
    among them (None: no such level, or ``dirpath`` is not below PATH)."""
    if not _under(dirpath, index_root) or dirpath == index_root:
        return [], None
    rel = dirpath[len(index_root.rstrip(os.sep)) + 1:].split(os.sep)
    return rel, next((i for i, part in enumerate(rel) if TREE_LEVEL.match(part)), None)


def dump_root(dirpath: str, index_root: str) -> str:
    """The folder above the first rank / time / step level below PATH (PATH itself when none)."""
    rel, level = _levels_below(dirpath, index_root)
    return os.path.join(index_root, *rel[:level]) if level else index_root


def roots_of(unit_dirs: list[str], index_root: str) -> dict[str, str]:
    """The dump root of each folder holding units.

    A folder below a rank / time / step level: ``dump_root``.  A folder without one (msprobe or
    Troubleshooter dumps kept as ``golden/`` and ``target/``, MindSpore statistics in a plain folder)
    belongs to the root of a structured dump above it when there is one (a ``graphs/`` folder beside
    ``rank_0/``), else to the highest folder holding units above it or itself: two such dumps side
    by side are two roots, a dump's own subfolders (tensor data beside ``dump.json``) stay in it."""
    out: dict[str, str] = {}
    plain: list[str] = []
    for path in unit_dirs:
        if _levels_below(path, index_root)[1] is not None:
            out[path] = dump_root(path, index_root)
        else:
            plain.append(path)
    structured = sorted(set(out.values()), key=len, reverse=True)
    by_length = sorted(plain, key=len)
    for path in plain:
        owner = _owner(path, structured)
        if owner is None:
            owner = next(p for p in by_length if _under(path, p))
        out[path] = owner
    return out


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass(slots=True)
class OtherDump:
    """A dump root set aside: it holds places of an earlier root (``kept``)."""

    root: str
    kept: str
    places: list[tuple[int, int]]  # the shared (rank, step), sorted
    dir_ids: list[int] = field(default_factory=list)

    def message(self, index_root: str) -> str:
        rank, step = self.places[0]
        more = f" (and {len(self.places) - 1} more rank/step places)" if len(self.places) > 1 else ""
        return (f"another dump of rank {rank} step {step}{more} under PATH: {self.root} (set aside; the same "
                f"places are read from {self.kept}): open it on its own")

    def as_json(self, index_root: str) -> dict:
        return {"root": self.root, "kept": self.kept,
                "places": [{"rank": r, "step": s} for r, s in self.places],
                "message": self.message(index_root)}


def decide(roots_places: dict[str, set[tuple]]) -> dict[str, tuple[str, list[tuple]]]:
    """Roots in path order: a root sharing a place with a root kept before it is set aside.

    A place is (rank, step, graph): what the op table groups by.  Two runs of one job share
    them; a CANN tree and a MindSpore tree beside it (other graph names) do not, and stay
    together as before.  Returns ``{aside root: (the kept root it clashes with first, the
    shared places)}``."""
    owner: dict[tuple, str] = {}
    aside: dict[str, tuple[str, list[tuple]]] = {}
    for root in sorted(roots_places):
        places = roots_places[root]
        shared = sorted(p for p in places if p in owner)
        if shared:
            kept = min((owner[p] for p in shared))
            aside[root] = (kept, shared)
            continue
        for p in places:
            owner[p] = root
    return aside


def _owner(path: str, roots: list[str]) -> str | None:
    """The deepest root holding ``path`` (roots sorted by length, longest first)."""
    for root in roots:
        if _under(path, root):
            return root
    return None


def separate(index: "DumpIndex") -> list[OtherDump]:
    """Set aside the dump roots that repeat an earlier root's places (see the module docstring),
    bring back the ones that no longer do, and remember the result (``meta.other_dumps``)."""
    unit_dirs = index.query("SELECT id, path FROM dirs WHERE first_unit IS NOT NULL")
    root_of_path = roots_of([p for _d, p in unit_dirs], index.root)
    root_of_dir = {d: root_of_path[p] for d, p in unit_dirs}
    current = {d for (d,) in index.query("SELECT dir_id FROM aside_dirs")}
    others: list[OtherDump] = []
    if len(set(root_of_dir.values())) > 1:
        roots_places: dict[str, set[tuple]] = {r: set() for r in root_of_dir.values()}
        for table in ("units", "aside_units"):
            for d, rank, step, graph in index.query(f"SELECT DISTINCT dir_id, rank, step, graph FROM {table}"):
                if d in root_of_dir:
                    roots_places[root_of_dir[d]].add((rank, step, graph))
        aside = decide(roots_places)
        if aside:
            by_depth = sorted(roots_places, key=len, reverse=True)
            found = {root: OtherDump(root, kept, sorted({(r, s) for r, s, _g in shared}))
                     for root, (kept, shared) in aside.items()}
            for d, p in index.query("SELECT id, path FROM dirs"):
                owner = _owner(p, by_depth)
                if owner in found:
                    found[owner].dir_ids.append(d)
            others = [found[r] for r in sorted(found)]
    wanted = {d for o in others for d in o.dir_ids}
    _move(index, sorted(wanted - current), to_aside=True)
    _move(index, sorted(current - wanted), to_aside=False)
    doc = json.dumps([{"root": o.root, "kept": o.kept, "places": o.places} for o in others])
    with index._lock:
        index.conn.execute("INSERT OR REPLACE INTO meta VALUES('other_dumps', ?)", (doc,))
    return others


def _move(index: "DumpIndex", dir_ids: list[int], to_aside: bool) -> None:
    if not dir_ids:
        return
    with index._lock:
        cur = index.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        cur.execute("CREATE TEMP TABLE IF NOT EXISTS moving(dir_id INTEGER PRIMARY KEY)")
        cur.execute("DELETE FROM temp.moving")
        cur.executemany("INSERT INTO temp.moving VALUES(?)", [(d,) for d in dir_ids])
        for table in ASIDE_TABLES:
            src, dst = (table, f"aside_{table}") if to_aside else (f"aside_{table}", table)
            cur.execute(f"INSERT INTO {dst} SELECT * FROM {src} WHERE dir_id IN (SELECT dir_id FROM temp.moving)")
            cur.execute(f"DELETE FROM {src} WHERE dir_id IN (SELECT dir_id FROM temp.moving)")
        if to_aside:
            cur.execute("INSERT OR IGNORE INTO aside_dirs SELECT dir_id FROM temp.moving")
        else:
            cur.execute("UPDATE units SET op_id=id WHERE dir_id IN (SELECT dir_id FROM temp.moving)")
            cur.execute("DELETE FROM aside_dirs WHERE dir_id IN (SELECT dir_id FROM temp.moving)")
        cur.execute("DELETE FROM meta WHERE key='finalized'")
        cur.execute("COMMIT")


def other_dumps(index: "DumpIndex") -> list[OtherDump]:
    """The roots set aside by the last finalize, with their file counts left to the accounting."""
    rows = index.query("SELECT value FROM meta WHERE key='other_dumps'")
    return [OtherDump(o["root"], o["kept"], [tuple(p) for p in o["places"]]) for o in
            (json.loads(rows[0][0]) if rows else [])]


def aside_layouts(index: "DumpIndex") -> Iterable[dict]:
    """``summary.layouts`` entries of the roots set aside: producer, root and file count."""
    for o in other_dumps(index):
        for producer, files in index.query(
                "SELECT producer, COUNT(DISTINCT path) FROM aside_units WHERE dir_id IN "
                "(SELECT a.dir_id FROM aside_dirs a JOIN dirs d ON d.id = a.dir_id "
                "WHERE d.path = ? OR substr(d.path, 1, ?) = ?) GROUP BY producer ORDER BY producer",
                (o.root, len(o.root) + 1, o.root.rstrip(os.sep) + os.sep)):
            yield {"name": producer, "root": o.root, "files": files, "set_aside": True, "kept": o.kept}
