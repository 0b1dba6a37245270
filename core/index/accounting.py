"""What became of every file under PATH, and where each layout's tree starts (``summary``).

Every file the walk listed is exactly one of: read as tensor data, statistics, a graph, an
execution order, overflow evidence, metadata a layout consumed (``.dump_metadata``,
``mapping.csv``, the global execution order …), a named problem, not recognised, or part of
another dump of the same places that was set aside (``core.dump_roots``).  The
counts come from the index's tables and add up to the number of files listed.
"""

from __future__ import annotations

import itertools
import operator
import os
from typing import TYPE_CHECKING, Iterable, Optional

if TYPE_CHECKING:
    from dumpscope.core.index.dump_index import DumpIndex

from dumpscope.core.index.dump_roots import TREE_LEVEL as _TREE_LEVEL


def tree_root(dirs: Iterable[str], fallback: str) -> str:
    """The folder a layout's tree starts in: above the first rank / time / step level of the
    folders its files lie in (MindSpore's dump path above ``rank_0``, CANN's above ``{time}``)."""
    dirs = list(dirs)
    if not dirs:
        return fallback
    common = os.path.commonpath(dirs)
    parts = common.split(os.sep)
    base = len(fallback.rstrip(os.sep).split(os.sep)) if common.startswith(fallback) else 1
    for i in range(base, len(parts)):
        if _TREE_LEVEL.match(parts[i]):
            return os.sep.join(parts[:i]) or os.sep
    return common


def layout_roots(index: "DumpIndex") -> dict[str, str]:
    """Each producer's tree root, from the folders of its files and of the graphs and orders beside them."""
    by_producer: dict[str, list[str]] = {}
    for producer, lo, hi in index.query(
            "SELECT u.producer, MIN(d.path), MAX(d.path) FROM (SELECT DISTINCT producer, dir_id FROM units) u "
            "JOIN dirs d ON d.id = u.dir_id GROUP BY u.producer"):
        by_producer[producer] = [lo, hi]  # sorted paths: the first and last share the common prefix of all
    return {p: tree_root(dirs, index.root) for p, dirs in by_producer.items()}


#: unit storages that hold no tensor data (statistics only, a value): their files count as statistics
_NO_TENSOR = frozenset(("none", "value"))
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
#: paths ``all_own`` joins at a time
_AT_ONCE = 4096


def file_kinds(rows: list[tuple]) -> dict[str, bool]:
    """Each file of a folder's units (``rows`` of ``(path, storage, …)``, in id order): whether it holds
    tensor data (else statistics or values only).  A folder whose every unit holds data is answered at
    once; no column of the rows is copied (a folder may hold a million units)."""
    if _NO_TENSOR.isdisjoint(map(_SECOND, rows)):  # (a CANN or npy folder)
        return dict.fromkeys(map(_FIRST, rows), True)
    kinds: dict[str, bool] = {}
    for path, storage, *_rest in rows:
        kinds[path] = kinds.get(path, False) or storage not in _NO_TENSOR
    return kinds


def all_own(paths: Iterable[str], inside: str) -> bool:
    """Whether every one of ``paths`` is a file right inside the folder ``inside`` (ending in the separator):
    it starts with ``inside`` and names something after it with no further separator.  Checked on the
    paths joined by NUL, which no path holds: a folder's files in a few C-level scans, 4,096 at a time
    (the joined text stays small whatever the folder holds)."""
    marker, seps, it = "\0" + inside, inside.count(os.sep), iter(paths)
    while True:
        part = list(itertools.islice(it, _AT_ONCE))
        if not part:
            return True
        joined = "\0".join(("", *part, ""))
        n = len(part)
        if joined.count(marker) != n or joined.count(os.sep) != n * seps or (marker + "\0") in joined:
            return False


def file_accounting(index: "DumpIndex", by_producer: Optional[dict[str, int]] = None) -> dict[str, int]:
    """Counts per fate of every listed file; ``files`` is their sum.

    Unit files are counted a folder at a time (a folder's units have consecutive ids): a million-file
    tree never has its million paths in memory at once (issue 21: RSS <= 500 MB at 1M files).
    ``by_producer``, when given, is filled with the files each producer's units come from (what
    ``DumpQuery.layouts`` lists), counted in the same pass over the units."""
    listed, claimed, aside = index.query(
        "SELECT COALESCE(SUM(nfiles), 0), COALESCE(SUM(CASE WHEN a.dir_id IS NULL THEN nclaimed END), 0), "
        "COALESCE(SUM(CASE WHEN a.dir_id IS NOT NULL THEN nfiles END), 0) "
        "FROM dirs d LEFT JOIN aside_dirs a ON a.dir_id = d.id")[0]
    walked = {p for (p,) in index.query("SELECT path FROM dirs")}
    # the few files that are not units: graphs, execution orders, overflow evidence, problems
    graph_paths = [p for (p,) in index.query("SELECT DISTINCT path FROM graph_files")]
    order_paths = [p for (p,) in index.query("SELECT DISTINCT source FROM exec_orders")]
    overflow_paths = [p for (p,) in index.query("SELECT DISTINCT path FROM overflow")]
    # a problem names a file (or a folder, which is no file of the count)
    problem_paths = [p for (p,) in index.query(
        "SELECT DISTINCT p.path FROM problems p LEFT JOIN dirs d ON d.path = p.path WHERE d.id IS NULL")]
    special = set(graph_paths) | set(order_paths) | set(overflow_paths) | set(problem_paths)
    seen: set[str] = set()  # unit files that are special too, or lie outside their folder
    elsewhere: set[tuple[str, str]] = set()  # (producer, file) of files outside their folder
    tensor = stats = 0
    for dir_id, folder, first, last in index.query(
            "SELECT id, path, first_unit, last_unit FROM dirs WHERE first_unit IS NOT NULL"):
        rows = index.query("SELECT path, storage, producer FROM units WHERE id BETWEEN ? AND ? AND dir_id = ?",
                           (first, last, dir_id))
        kinds = file_kinds(rows)
        inside = folder.rstrip(os.sep) + os.sep
        cut = len(inside)

        def own(path: str) -> bool:  # a file of the folder itself (the common case): no os.path.dirname
            return path.startswith(inside) and os.sep not in path[cut:] and bool(path[cut:])

        every_own = all_own(kinds, inside)
        if by_producer is not None:  # a file of this folder is no other folder's unit: counted here
            producers = {r[2] for r in rows}
            if len(producers) == 1:
                (producer,) = producers
                mine = [True] * len(kinds) if every_own else [own(p) for p in kinds]
                by_producer[producer] = by_producer.get(producer, 0) + sum(mine)
                elsewhere.update((producer, p) for p, m in zip(kinds, mine) if not m)
            else:
                for producer, path in dict.fromkeys((r[2], r[0]) for r in rows):
                    if own(path):
                        by_producer[producer] = by_producer.get(producer, 0) + 1
                    else:
                        elsewhere.add((producer, path))
        if every_own and special.isdisjoint(kinds):  # no file to look at one by one: counted at once
            with_tensor = sum(kinds.values())
            tensor += with_tensor
            stats += len(kinds) - with_tensor
            continue
        for path, has_tensor in kinds.items():
            if path in special or not own(path) and os.path.dirname(path) not in walked:
                if path in seen:  # read from a subfolder by more than one folder's layout: once
                    continue
                seen.add(path)
            tensor += has_tensor
            stats += not has_tensor

    def count(paths: list[str]) -> int:
        fresh = {p for p in paths if p not in seen}
        seen.update(fresh)
        return len(fresh)

    graph = count(graph_paths)
    order = count(order_paths)
    overflow = count(overflow_paths)
    problem = count(problem_paths)
    # files read from a subfolder the walker left to its layout (listed with its parent, claimed by use)
    claimed += sum(1 for p in seen if os.path.dirname(p) not in walked)
    metadata = claimed - tensor - stats - graph - order - overflow - problem
    unclaimed_problems = max(0, -metadata)  # a bad file no layout claimed: a problem, not "not recognised"
    out = {"tensor": tensor, "stats": stats, "graph": graph, "order": order, "overflow": overflow,
           "metadata": max(0, metadata), "problem": problem,
           "not_recognised": listed - aside - claimed - unclaimed_problems,
           # every file of another dump of the same rank/step places, set aside (core.dump_roots)
           "other_dump": aside}
    out["files"] = listed
    if by_producer is not None:
        for producer, _path in elsewhere:
            by_producer[producer] = by_producer.get(producer, 0) + 1
    return out
