"""The dump index: every tensor record of a tree in one SQLite file in the cache dir.

(Reading folders in worker processes is ``core.index.pool``; the early ops of a cold build are
``core.index.early_ops``: this module walks, stores and finalizes.)

Building walks the tree once (``core.walk``), hands each folder to the layouts, and stores
what they yield, keyed by folder.  A folder whose mtime and entry count are unchanged is
not read again, so reopening an unchanged tree only lists folders, and a tree that grows
while training runs is updated folder by folder.  After any change ``finalize`` rebuilds
the op table: grouping tensors into ops, joining graph nodes and execution order.

Tensor records are stored as units (``core.units``): one row per CANN file (its tensors packed
as JSON), one per tensor otherwise.  A folder's units get consecutive ids, so a changed folder
is deleted by id range, and a unit id is also the id of the op it starts.
"""

from __future__ import annotations

import itertools
import json
import operator
import os
import sqlite3
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from dumpscope.core.errors import IndexCancelled  # noqa: F401  (raised here; callers catch it by this name too)
from dumpscope.core.index.cache import index_path
from dumpscope.core.index.lock import writer_lock
from dumpscope.core.index import freshness, place_dtypes
from dumpscope.core.index.dump_roots import ASIDE_TABLES
from dumpscope.core.index.place_dtypes import PlaceDtypes
from dumpscope.core.index.schema import (
    SCHEMA,
    ANALYSIS_LIMIT,
    OLD_OP_INDEXES,
    OP_INDEXES,
    UNIT_INDEXES,
    create_indexes,
    drop_indexes,
    schema_key,
)
from dumpscope.core.support.gc_pause import gc_paused
from dumpscope.core.layouts import all_layouts
from dumpscope.core.layouts.base import Item
from dumpscope.core.model import (
    ExecOrder,
    GraphFile,
    OverflowEvidence,
    Problem,
)
from dumpscope.core.units import UNIT_COLUMNS, in_execution_order
from dumpscope.core.layouts.walk import Scanned, listing_of, scan_tree
from dumpscope.core.index.pool import (
    _pack_items,
    _Pool,
    scan_listing,
)

if TYPE_CHECKING:
    from dumpscope.core.index.early_ops import _EarlyOps

#: a build still running after this long shows what it has found so far (``update(partial=…)``)
PARTIAL_AFTER_S = 2.0
#: folders with at least this many files are read by the process pool, in chunks
PARALLEL_MIN_FILES = 400

#: KiB of page cache an index keeps once ``lean_cache`` is called
READ_CACHE_KIB = 16_384

@dataclass(slots=True)
class Progress:
    """What the indexer has done so far; handed to the progress callback."""

    dirs: int = 0
    files: int = 0
    records: int = 0
    changed_dirs: int = 0
    phase: str = "walking"
    done: bool = False
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


def _count_files(folder: str) -> int:
    """Files under a folder the walker does not enter (for the summary's file accounting)."""
    n = 0
    for _dirpath, _dirs, files in os.walk(folder):
        n += len(files)
    return n


_NTENSORS = UNIT_COLUMNS.index("ntensors")
_ntensors = operator.itemgetter(_NTENSORS)
_STORAGE = UNIT_COLUMNS.index("storage")
_PATH = UNIT_COLUMNS.index("path")
_INSERT_UNIT = (f"INSERT INTO units(id, op_id, dir_id, {', '.join(UNIT_COLUMNS)}) "
                f"VALUES({', '.join('?' * (len(UNIT_COLUMNS) + 3))})")


class DumpIndex:
    """An open index of one dump tree. Thread-safe for readers via ``cursor()``."""

    def __init__(self, root: str, db_path: str) -> None:
        self.root = os.path.abspath(root)
        self.db_path = db_path
        self._lock = threading.RLock()
        #: plain places finalized early in this build: (rank, step) -> (units, first id, last id, graphs)
        self.early: dict[tuple[int, int], tuple[int, int, int, frozenset]] = {}
        self.early_seq = 0
        self.early_only = False  # True while the ops table holds early ops only (a cold build)
        self._early_ops: Optional[_EarlyOps] = None
        #: one line each: why this index is not the cache file it should be (shown by the CLI / explorer)
        self.warnings: list[str] = []
        # WAL readers never wait for a writer; writers (another dumpscope updating the same tree,
        # best-effort cache writes from worker threads) wait up to the busy timeout
        self.conn = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None, timeout=30.0)
        self.conn.execute("PRAGMA page_size=16384")  # only a new file takes it: fewer, fuller pages for bulk loads
        self.conn.execute("PRAGMA journal_mode=WAL" if db_path != ":memory:" else "PRAGMA journal_mode=MEMORY")
        self.conn.execute("PRAGMA synchronous=OFF")
        self.conn.execute("PRAGMA temp_store=FILE")
        self.conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: bulk loads and index builds stay in memory
        self._ensure_schema()

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        root: str,
        *,
        use_cache: bool = True,
        cache_directory: Optional[Path] = None,
        progress: Optional[Callable[[Progress], None]] = None,
        cancel: Optional[threading.Event] = None,
        update: bool = True,
        workers: Optional[int] = None,
    ) -> "DumpIndex":
        """Open (and bring up to date, ``workers`` processes reading: see ``update``) the index of ``root``.

        Raises ``FileNotFoundError`` / ``NotADirectoryError`` with a one-line message when
        ``root`` is not a folder.
        """
        if not os.path.exists(root):
            raise FileNotFoundError(f"{root}: no such file or directory")
        if not os.path.isdir(root):
            raise NotADirectoryError(f"{root}: not a directory")
        if not use_cache:
            index = cls(root, ":memory:")
            if update:
                index.update(progress=progress, cancel=cancel, workers=workers)
            return index
        from dumpscope.core.index import faults as index_faults

        return index_faults.open_with_fallback(cls, root, index_path(root, cache_directory), progress, cancel,
                                               update, workers)

    def _schema_current(self) -> bool:
        with self._lock:
            cur = self.conn.cursor()
            if not cur.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone():
                return False
            rows = cur.execute("SELECT key, value FROM meta WHERE key IN ('schema', 'root')").fetchall()
            return dict(rows) == {"schema": schema_key(), "root": self.root}

    def _ensure_schema(self) -> None:
        """Create the tables; an index written by another schema version is dropped and rebuilt.
        An index already current is not written to (a reader must not wait for a building writer)."""
        if self._schema_current():
            return
        with writer_lock(self.db_path), self._lock:
            cur = self.conn.cursor()
            version = None
            if cur.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone():
                row = cur.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                version = row[0] if row else None
            if version != schema_key():
                for (table,) in cur.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
                    if not table.startswith("sqlite_"):
                        cur.execute(f'DROP TABLE IF EXISTS "{table}"')
            cur.executescript(SCHEMA)
            self._create_indexes(cur, {**UNIT_INDEXES, **OP_INDEXES})
            cur.execute("INSERT OR REPLACE INTO meta VALUES('schema', ?)", (schema_key(),))
            cur.execute("INSERT OR REPLACE INTO meta VALUES('root', ?)", (self.root,))

    _create_indexes = staticmethod(create_indexes)
    _drop_indexes = staticmethod(drop_indexes)

    def _bulk_load(self, start: bool) -> None:
        """A cold build inserts into an empty units table without its indexes, then builds them."""
        with self._lock:
            cur = self.conn.cursor()
            if start:  # ops are empty too: early ops go in without indexes (finalize builds them)
                self._drop_indexes(cur, {**UNIT_INDEXES, **OP_INDEXES})
            else:
                self._create_indexes(cur, UNIT_INDEXES)

    def analyze(self) -> None:
        """Give the query planner statistics after a build (SQLite keeps none until ANALYZE runs).

        ``analysis_limit`` samples each index instead of reading it whole: ~10 ms at 1M ops.
        """
        with self._lock:
            cur = self.conn.cursor()
            for name in OLD_OP_INDEXES:
                cur.execute(f"DROP INDEX IF EXISTS {name}")
            cur.execute(f"PRAGMA analysis_limit={ANALYSIS_LIMIT}")
            cur.execute("ANALYZE")
            cur.execute("PRAGMA optimize")

    def lean_cache(self) -> None:
        """Shrink this connection's page cache from the build's 64 MiB to ``READ_CACHE_KIB``: for an index
        only read from now on by a command holding much else (``compare``: two indexes and both sides'
        ops); the operating system's page cache still holds the file."""
        with self._lock:
            self.conn.execute(f"PRAGMA cache_size=-{READ_CACHE_KIB}")

    def has_snapshot(self) -> bool:
        """True when a finished index from an earlier open is stored (it may be stale)."""
        return bool(self.query("SELECT 1 FROM meta WHERE key='finalized'"))

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def cursor(self) -> sqlite3.Cursor:
        return self.conn.cursor()

    #: seconds each update may spend looking for files changed in place (None: every file; see
    #: ``core.freshness``; ``summary --recheck`` sets None)
    check_budget_s: Optional[float] = freshness.BUDGET_S
    #: what the last update's check covered (``summary`` reports it)
    freshness: Optional[freshness.Freshness] = None
    _read_ns = 0  # when this update began reading folders: stored as each folder's ``scanned_ns``

    #: called as ``on_damage(index, error)`` when a query fails with ``sqlite3.DatabaseError``; when it
    #: returns True (it put a rebuilt index in place: the explorer's ``_recover_index``) the query runs once more
    on_damage: Optional[Callable[["DumpIndex", BaseException], bool]] = None

    def query(self, sql: str, params: Iterable = ()) -> list[tuple]:
        try:
            with self._lock:
                return self.conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.DatabaseError as exc:
            if self.on_damage is None or not self.on_damage(self, exc):
                raise
        with self._lock:
            return self.conn.execute(sql, tuple(params)).fetchall()

    # -- building ---------------------------------------------------------------------

    def update(self, progress: Optional[Callable[[Progress], None]] = None,
               cancel: Optional[threading.Event] = None, workers: Optional[int] = None,
               partial: Optional[Callable[[Progress], None]] = None) -> Progress:
        """:meth:`_update` holding the index's writer lock: another process building the same index
        finishes first, and this one then finds its work done (``core.index_lock``)."""
        def waiting() -> None:
            if progress is not None:
                progress(Progress(phase="waiting for another dumpscope indexing this tree"))

        # the build's rows are plain tuples and lists without cycles, and the collector's walks over them
        # cost ~4 % of a cold build (100k files; gc_pause).  The switch is process-wide: a build in a
        # background thread shares its process with an app whose objects do make cycles (the explorer),
        # so only a build in the main thread (a command that owns its process) pauses it.
        paused = gc_paused() if threading.current_thread() is threading.main_thread() else nullcontext()
        with paused, writer_lock(self.db_path, cancelled=lambda: cancel is not None and cancel.is_set(),
                                 waiting=waiting):
            return self._update(progress, cancel, workers, partial)

    def _update(self, progress: Optional[Callable[[Progress], None]] = None,
                cancel: Optional[threading.Event] = None, workers: Optional[int] = None,
                partial: Optional[Callable[[Progress], None]] = None) -> Progress:
        """Walk the tree, re-read changed folders, and finalize if anything changed.

        Folders with subfolders are read inline (their layouts may claim subfolders before the
        walker descends); big folders are split into chunks read by a process pool, and small
        leaf folders are batched into pool tasks (``BATCH_FILES``), because header decoding is
        CPU-bound Python and one core cannot keep up with the disk.

        ``partial``: on a long build, the ops found so far are finalized now and then (after
        ~2 s, then each time the records have grown fourfold, so the extra work stays
        below a third of the final pass) and ``partial(progress)`` is called, letting a view show them while the
        walk goes on.  Readers should use their own connection: WAL keeps their snapshot.
        """
        prog = Progress()
        next_partial = (time.monotonic() + PARTIAL_AFTER_S, 1)
        layouts: Optional[list] = None  # imported on the first changed folder: a warm reopen needs none
        with self._lock:
            known = {row[1]: row for row in self.conn.execute(
                "SELECT id, path, mtime_ns, nentries, skips, subdirs FROM dirs")}
        retry = self._changed_problem_dirs()
        # files changed in place since their folder was read: those folders are read again
        self._read_ns = 0  # set when the first folder is about to be read
        stale, self.freshness = freshness.check(self, self.check_budget_s)
        retry |= stale
        seen: set[str] = set()
        skip: set[str] = set()
        changed = False
        last_report = 0.0
        pool = _Pool(workers)
        bulk = not known and not self.query("SELECT 1 FROM units LIMIT 1")
        self.early.clear()
        self.early_seq = 0
        if bulk:
            from dumpscope.core.index.early_ops import _EarlyOps  # a build's (with finalize): a warm reopen needs neither

            self._bulk_load(start=True)
            self._early_ops = _EarlyOps(self)
            self.early_only = not self.query("SELECT 1 FROM ops LIMIT 1")
        elif not self.has_snapshot():  # a build killed half-way (the explorer's child) left them dropped
            self._bulk_load(start=False)
        try:
            retry_ids = set(retry)
            listing_known = {p: (row[2], json.loads(row[5])) for p, row in known.items()
                             if row[5] is not None and row[0] not in retry_ids}
            for scanned in scan_tree(self.root, skip=skip, known=listing_known):
                if cancel is not None and cancel.is_set():
                    raise IndexCancelled()
                path = scanned.dirpath
                seen.add(path)
                prog.dirs += 1
                prog.files += len(scanned.files)
                nentries = len(scanned.files) + len(scanned.subdirs)
                old = known.get(path)
                if old is not None and (scanned.unchanged or (
                        old[2] == scanned.mtime_ns and old[3] == nentries
                        and scanned.problem is None and old[0] not in retry)):
                    for sub in json.loads(old[4] or "[]"):
                        skip.add(os.path.join(path, sub))
                    continue
                changed = True
                prog.changed_dirs += 1
                if not self._read_ns:
                    self._read_ns = freshness.read_start_ns()
                old_id = old[0] if old else None
                if scanned.problem is None and len(scanned.files) >= PARALLEL_MIN_FILES and pool.usable:
                    pool.submit(self.root, scanned, old_id)
                elif scanned.problem is None and scanned.files and not scanned.subdirs and pool.usable:
                    pool.add_small(self.root, scanned, old_id)
                else:
                    listing = listing_of(self.root, scanned)
                    units: list[tuple] = []
                    others: list[Item] = []
                    if scanned.problem is not None:
                        others.append(scanned.problem)
                    else:
                        if layouts is None:
                            layouts = all_layouts()
                        units, others = _pack_items(self._scan_listing(layouts, listing))
                    for sub in listing.skip_subdirs:
                        skip.add(os.path.join(path, sub))
                    self._store_result(prog, scanned, old_id, units, others, sorted(listing.skip_subdirs),
                                       len(listing.claimed))
                for done in pool.finished():
                    self._store_result(prog, *done)
                while pool.over_backlog:  # the walk waits for the storing: memory bounded by the backlog
                    for done in pool.oldest():
                        self._store_result(prog, *done)
                now = time.monotonic()
                if partial is not None and now >= next_partial[0] and prog.records >= next_partial[1]:
                    self._partial_finalize(prog, partial)
                    next_partial = (time.monotonic() + PARTIAL_AFTER_S, prog.records * 4)
                if progress is not None and now - last_report > 0.1:
                    last_report = now
                    progress(prog)
            pool.flush()
            if self._early_ops is not None:  # the walk is over: every folder still to store is known
                self._early_ops.walk_done([job[0].parts for job in pool._pending])
            for done in pool.drain(cancel):
                self._store_result(prog, *done)
                # the pool still reads what the walk handed it (a tree of small folders: all of it), so a
                # long build shows what is stored meanwhile too, not only while the walk goes on
                if partial is not None and time.monotonic() >= next_partial[0] and prog.records >= next_partial[1]:
                    self._partial_finalize(prog, partial)
                    next_partial = (time.monotonic() + PARTIAL_AFTER_S, prog.records * 4)
                if progress is not None and time.monotonic() - last_report > 0.1:
                    last_report = time.monotonic()
                    progress(prog)
        finally:
            pool.close()
            self._early_ops = None
            if bulk:
                self._bulk_load(start=False)
        removed = [row for p, row in known.items() if p not in seen]
        if removed:
            changed = True
            with self._lock:
                cur = self.conn.cursor()
                cur.execute("BEGIN IMMEDIATE")
                for row in removed:
                    self._delete_dir(cur, row[0])
                    cur.execute("DELETE FROM dirs WHERE id=?", (row[0],))
                cur.execute("COMMIT")
        if changed:
            self._remember_problem_files()
        if changed or not self.query("SELECT 1 FROM meta WHERE key='finalized'"):
            prog.phase = "joining"
            if progress is not None:
                progress(prog)
            from dumpscope.core.index import finalize as finalizing  # with the graph parsers: builds only

            finalizing.finalize(self)
            with self._lock:
                self.conn.execute("INSERT OR REPLACE INTO meta VALUES('finalized', '1')")
            self.analyze()
        self.early.clear()
        if self.freshness is not None:
            self.freshness.settle(self, self._read_ns)
        prog.phase = "done"
        prog.done = True
        if progress is not None:
            progress(prog)
        return prog

    def _remember_problem_files(self) -> None:
        """Note size and mtime of every file that could not be read (see ``_changed_problem_dirs``)."""
        sig: dict[str, list] = {}
        for dir_id, path in self.query(
                "SELECT p.dir_id, p.path FROM problems p JOIN dirs d ON d.id = p.dir_id WHERE p.path != d.path"):
            try:
                st = os.stat(path)
                sig[path] = [dir_id, st.st_size, st.st_mtime_ns]
            except OSError:
                sig[path] = [dir_id, -1, -1]
        with self._lock:
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES('problem_files', ?)", (json.dumps(sig),))

    def _changed_problem_dirs(self) -> set[int]:
        """Folders holding an unreadable file that changed since: a file still being written grows
        without touching its folder's mtime or entry count, so its folder must be read again."""
        rows = self.query("SELECT value FROM meta WHERE key='problem_files'")
        out: set[int] = set()
        for path, (dir_id, size, mtime) in (json.loads(rows[0][0]) if rows else {}).items():
            try:
                st = os.stat(path)
                now = (st.st_size, st.st_mtime_ns)
            except OSError:
                now = (-1, -1)
            if now != (size, mtime):
                out.add(dir_id)
        return out

    def _partial_finalize(self, prog: Progress, partial: Callable[[Progress], None]) -> None:
        self._bulk_load(start=False)  # finalize reads by place: the indexes are needed from now on

        phase = prog.phase
        prog.phase = "joining (partial)"
        from dumpscope.core.index import finalize as finalizing

        finalizing.finalize(self)
        prog.phase = phase
        partial(prog)

    def _store_result(self, prog: Progress, scanned: Scanned, old_id: Optional[int], units: list[tuple],
                      others: list[Item], skips: list[str], nclaimed: int) -> None:
        prog.records += sum(map(_ntensors, units))
        nentries = len(scanned.files) + len(scanned.subdirs)
        # a folder listed with a problem keeps no subfolder list, so it is listed again next time
        subdirs = None if scanned.problem is not None else json.dumps(scanned.subdirs)
        # files of subfolders a layout read itself (msprobe's dump_tensor_data) are listed here too
        # entries left out of ``files`` as problems (names not UTF-8, links leaving PATH) are listed
        # entries too: without them the problems outnumber the files and "not recognised" went negative
        left_out = len(scanned.bad_names or ()) + len(scanned.outside_links or ())
        nfiles = (len(scanned.files) + left_out
                  + sum(_count_files(os.path.join(scanned.dirpath, sub)) for sub in skips))
        nclaimed += left_out  # each is claimed by the problem that names it
        first, stored, cols = self._store_dir(scanned.dirpath, scanned.mtime_ns, nentries, nfiles, nclaimed,
                                              skips, units, others, old_id, subdirs)
        if self._early_ops is not None:
            self._early_ops.stored(scanned, first, stored, cols)

    _scan_listing = staticmethod(scan_listing)

    def _delete_dir(self, cur: sqlite3.Cursor, dir_id: int) -> None:
        row = cur.execute("SELECT first_unit, last_unit FROM dirs WHERE id=?", (dir_id,)).fetchone()
        if row is not None and row[0] is not None:  # a folder's units have consecutive ids
            cur.execute("DELETE FROM units WHERE id BETWEEN ? AND ? AND dir_id=?", (row[0], row[1], dir_id))
        for table in ("exec_orders", "graph_files", "problems", "overflow", "files", "dir_dtypes"):
            cur.execute(f"DELETE FROM {table} WHERE dir_id=?", (dir_id,))
        for table in ASIDE_TABLES:  # core.dump_roots
            cur.execute(f"DELETE FROM aside_{table} WHERE dir_id=?", (dir_id,))
        cur.execute("DELETE FROM aside_dirs WHERE dir_id=?", (dir_id,))

    def _next_unit_id(self, cur: sqlite3.Cursor) -> int:
        """Unit ids are never reused (they are op ids too, and views keep op ids across updates)."""
        top = cur.execute("SELECT COALESCE(MAX(id), 0) FROM units").fetchone()[0]
        row = cur.execute("SELECT value FROM meta WHERE key='next_unit'").fetchone()
        return max(top + 1, int(row[0]) if row else 1)

    def _store_dir(self, path: str, mtime_ns: int, nentries: int, nfiles: int, nclaimed: int, skips: list[str],
                   units: list[tuple], others: list[Item], old_id: Optional[int],
                   subdirs: Optional[str] = None) -> tuple[int, list[tuple], list[tuple]]:
        """Replace what is stored for one folder; returns the first unit id, the units as stored and their
        columns (``UNIT_COLUMNS``, in the same order; empty without units)."""
        if units:
            units = in_execution_order(units)  # stable: ties keep the layout's order
        cols = list(zip(*units))  # a column at a time: the rows below are made in C, not per unit in Python
        used = json.dumps(sorted(set(cols[0]) if units else ()))
        with self._lock:
            cur = self.conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            first = self._next_unit_id(cur)
            last = first + len(units) - 1 if units else None
            first_unit = first if units else None
            if old_id is not None:
                self._delete_dir(cur, old_id)
                cur.execute("UPDATE dirs SET mtime_ns=?, nentries=?, skips=?, layouts=?, nfiles=?, nclaimed=?, "
                            "subdirs=?, first_unit=?, last_unit=?, scanned_ns=? WHERE id=?",
                            (mtime_ns, nentries, json.dumps(skips), used, nfiles, nclaimed, subdirs, first_unit,
                             last, self._read_ns, old_id))
                dir_id = old_id
            else:
                cur.execute("INSERT INTO dirs(path, mtime_ns, nentries, skips, layouts, nfiles, nclaimed, subdirs, "
                            "first_unit, last_unit, scanned_ns) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                            (path, mtime_ns, nentries, json.dumps(skips), used, nfiles, nclaimed, subdirs,
                             first_unit, last, self._read_ns))
                dir_id = cur.lastrowid
            files = dict.fromkeys(cols[_PATH] if units else ())
            files.update((it.path if isinstance(it, GraphFile) else it.source, None) for it in others
                         if isinstance(it, (GraphFile, ExecOrder)) and (it.path if isinstance(it, GraphFile)
                                                                       else it.source))
            cur.executemany("INSERT INTO files(dir_id, path) VALUES(?, ?)", zip(itertools.repeat(dir_id), files))
            for it in others:
                if isinstance(it, Problem):
                    cur.execute("INSERT INTO problems VALUES(?,?,?)", (dir_id, it.path, it.error))
                elif isinstance(it, ExecOrder):
                    cur.execute("INSERT INTO exec_orders VALUES(?,?,?,?,?)",
                                (dir_id, it.rank, it.graph, it.source, json.dumps(it.names)))
                elif isinstance(it, GraphFile):
                    cur.execute("INSERT INTO graph_files VALUES(?,?,?,?,?)",
                                (dir_id, it.path, it.kind, it.rank, it.graph))
                elif isinstance(it, PlaceDtypes):
                    cur.execute("INSERT INTO dir_dtypes VALUES(?,?,?,?)",
                                (dir_id, it.rank, it.step, place_dtypes.stored_text(it.names)))
                elif isinstance(it, OverflowEvidence):
                    cur.execute("INSERT INTO overflow VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                                (dir_id, it.path, it.rank, it.step, it.graph, it.task, it.stream, it.status,
                                 it.kind, it.context, it.thread, it.folder or os.path.dirname(it.path)))
            if units:
                if "none" in cols[_STORAGE]:  # finalize merges these with payload units
                    cur.execute("INSERT OR REPLACE INTO meta VALUES('stats_only', '1')")
                ids = range(first, first + len(units))
                cur.executemany(_INSERT_UNIT, zip(ids, ids, itertools.repeat(dir_id), *cols))
                cur.execute("INSERT OR REPLACE INTO meta VALUES('next_unit', ?)", (str(first + len(units)),))
            cur.execute("DELETE FROM meta WHERE key='finalized'")
            cur.execute("COMMIT")
        return first, units, cols
