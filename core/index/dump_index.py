"""The dump index: every tensor record of a tree in one SQLite file in the cache dir.

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

import collections
import dataclasses
import itertools
import json
import operator
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from dumpscope.core.errors import IndexCancelled  # noqa: F401  (raised here; callers catch it by this name too)
from dumpscope.core.index.cache import index_path
from dumpscope.core.index.lock import writer_lock
from dumpscope.core.index import finalize as finalizing
from dumpscope.core.index import freshness
from dumpscope.core.index.schema import (  # noqa: F401  (SCHEMA_VERSION, the index sets: re-exported)
    SCHEMA,
    ANALYSIS_LIMIT,
    OLD_OP_INDEXES,
    OP_INDEXES,
    SCHEMA_VERSION,
    UNIT_INDEXES,
    create_indexes,
    drop_indexes,
    schema_key,
)
from dumpscope.core.layouts import all_layouts
from dumpscope.core.layouts.base import DirListing, Item
from dumpscope.core.model import (
    ExecOrder,
    GraphFile,
    OverflowEvidence,
    Problem,
    TensorRecord,
)
from dumpscope.core.units import UNIT_COLUMNS, UnitRecord, in_execution_order, pack
from dumpscope.core.layouts.walk import Scanned, listing_of, scan_tree

#: a build still running after this long shows what it has found so far (``update(partial=…)``)
PARTIAL_AFTER_S = 2.0
#: folders with at least this many files are read by the process pool, in chunks
PARALLEL_MIN_FILES = 400
CHUNK_FILES = 1000
#: smaller folders without subfolders are read by the pool too, many per task, about this many
#: files a task (a job of 64 ranks x 4 steps has 256 folders of ~50 files: one task each would
#: cost more in round trips than the reading itself)
BATCH_FILES = 400
#: files handed to the pool and not yet stored: the walk waits for the oldest folder beyond this many
#: (times the workers), so memory follows this backlog, not the tree (a million-file walk outruns the
#: storing process; every queued folder keeps its file names and, once read, its records).  High
#: enough that a 100k-file tree never waits: its early ops need the walk over before the storing is
#: (a place is finalized early only once no other folder can add to it)
BACKLOG_FILES_PER_WORKER = 50_000
#: pool tasks (chunks of ``CHUNK_FILES``, batches of ``BATCH_FILES``) handed to the workers and not yet
#: stored, per worker: the rest of the backlog waits as file names.  Reading outruns storing, so
#: without it the results of the whole backlog (a 1M-file build: ~100 MB of records) sat in the pool's
#: finished futures; a few tasks ahead keep every worker busy all the same
TASKS_AHEAD_PER_WORKER = 4

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


def _pack_items(items: Iterable[Item]) -> tuple[list[tuple], list[Item]]:
    """Units as plain row tuples (cheap to pickle and to store), and every other item.

    A ``UnitRecord`` (a whole CANN file) is one unit; any other tensor record is a unit of its own.
    """
    units: list[tuple] = []
    others: list[Item] = []
    for it in items:
        if isinstance(it, UnitRecord):
            units.append(tuple(it))
        elif isinstance(it, TensorRecord):
            units.append(tuple(pack([it])))
        else:
            others.append(it)
    return units, others


def _scan_chunk(root: str, scanned: Scanned, files: list[str],
                first: bool = True) -> tuple[list[tuple], list[Item], int]:
    """Process-pool entry: read one chunk of a big folder with every layout.

    Folder-wide findings (names that are not UTF-8) are reported by the first chunk only.
    """
    listing = DirListing(root=root, dirpath=scanned.dirpath, parts=scanned.parts, files=files,
                         subdirs=list(scanned.subdirs),
                         bad_names=list(scanned.bad_names or ()) if first else [],
                         outside_links=list(scanned.outside_links or ()) if first else [])
    units, others = _pack_items(DumpIndex._scan_listing(all_layouts(), listing))
    return units, others, len(listing.claimed)


def _scan_batch(root: str, folders: list[Scanned]) -> list[tuple[list[tuple], list[Item], int]]:
    """Process-pool entry: read several small folders (none has subfolders), each as a whole."""
    return [_scan_chunk(root, scanned, scanned.files) for scanned in folders]


def _worker_start() -> None:
    """Pool workers yield the CPU to the process storing their results: it is the one the build waits on."""
    try:
        os.nice(5)
    except (AttributeError, OSError):
        pass


def pool_size(workers: Optional[int] = None) -> int:
    """Processes in a pool: ``workers``, else ``DUMPSCOPE_WORKERS``, else the cores (at most 4)."""
    return workers if workers is not None else int(os.environ.get("DUMPSCOPE_WORKERS", "0") or 0) or \
        min(4, os.cpu_count() or 1)


def _new_pool(workers: int):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # fork: workers start in milliseconds and inherit the imported layouts; they only read
    # files and return plain records, so the walker threads of the parent do not matter
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(max_workers=workers, initializer=_worker_start,
                               mp_context=multiprocessing.get_context(method))


def process_pool(workers: Optional[int] = None):
    """A process pool like the index's (same size, same start method, workers niced), or None where
    none is wanted (``workers`` 1: the explorer passes it for work in its own threads, forking a running
    Textual app is not safe) or can be used (one core)."""
    n = pool_size(workers)
    if n <= 1:
        return None
    try:
        return _new_pool(n)
    except Exception:
        return None


class _Pool:
    """A lazily started process pool reading big folders in chunks and small ones in batches.

    Results of one folder are stored together once all its chunks are back.  Small folders
    without subfolders (``add_small``) are gathered until a batch holds ``BATCH_FILES`` files and
    then read by one task; a last batch smaller than that is read inline when no pool runs yet,
    so a small tree never starts one.  Every folder is read the same way whichever route it
    takes (each layout sees the folder whole), so the stored index is the same.  Where no
    process can be started (restricted sandboxes, odd stdio under a TUI) or a worker dies,
    the chunk is read inline instead: the pool only ever makes indexing faster.
    """

    def __init__(self, workers: Optional[int]) -> None:
        n = pool_size(workers)
        self.workers = n
        # workers=1, no pool: the explorer passes it for work in its own threads (forking a process
        # that runs a Textual app, threads and a terminal driver, is not safe)
        self.usable = n > 1
        self._pool = None
        self._root = ""
        self._pending: list[tuple[Scanned, Optional[int], list[tuple[Any, list[str]]]]] = []
        self._batch: Optional[_Batch] = None
        self.backlog = 0  # files of the folders in ``_pending``
        self._unsent: "collections.deque[_PoolTask]" = collections.deque()  # in the order they were made
        self.in_flight = 0  # tasks handed to the workers whose results are not stored yet

    @property
    def over_backlog(self) -> bool:
        return self.backlog > BACKLOG_FILES_PER_WORKER * max(1, self.workers)

    def _executor(self):
        if self._pool is None:
            all_layouts()  # import every layout before forking: children must not import under a lock
            self._pool = _new_pool(self.workers)
        return self._pool

    def _inline(self, scanned: Scanned, files: list[str], first: bool = True) -> "_Done":
        return _Done(_scan_chunk(self._root, scanned, files, first))

    def add_small(self, root: str, scanned: Scanned, old_id: Optional[int]) -> None:
        """Queue a folder without subfolders (no layout can claim one, so the walk needs no answer
        from it before going on) for a batch."""
        self._root = root
        if self._batch is None:
            self._batch = _Batch()
        part = _BatchPart(self._batch, len(self._batch.folders))
        self._batch.folders.append(scanned)
        self._batch.files += len(scanned.files)
        self._pending.append((scanned, old_id, [(part, scanned.files)]))
        self.backlog += len(scanned.files)
        if self._batch.files >= BATCH_FILES:
            self.flush()

    def flush(self) -> None:
        """Start the batch being gathered: in the pool when it is full or a pool runs already, else inline."""
        batch, self._batch = self._batch, None
        if batch is None:
            return
        if self.usable and (batch.files >= BATCH_FILES or self._pool is not None):
            batch.future = self._task(len(batch.folders), _scan_batch, self._root, batch.folders)
            return
        batch.future = _Done([_scan_chunk(self._root, s, s.files) for s in batch.folders])

    def submit(self, root: str, scanned: Scanned, old_id: Optional[int]) -> None:
        self._root = root
        files = scanned.files
        shared = [f for f in files if f in ("mapping.csv",)]
        # (the walk lists names sorted: dict.fromkeys keeps that order, so the sort is one linear pass)
        chunks = [sorted(dict.fromkeys(files[i:i + CHUNK_FILES] + shared)) for i in range(0, len(files), CHUNK_FILES)]
        jobs: list[tuple[Any, list[str]]] = []
        # each chunk carries its own file names: the folder's full list is not sent with every chunk
        light = dataclasses.replace(scanned, files=[])
        for n, chunk in enumerate(chunks):
            fut: Any = self._task(1, _scan_chunk, root, light, chunk, n == 0) if self.usable else None
            jobs.append((fut if fut is not None else self._inline(scanned, chunk, n == 0), chunk))
        self._pending.append((scanned, old_id, jobs))
        self.backlog += len(files)

    def _task(self, parts: int, fn: Callable, *args: Any) -> "_PoolTask":
        """A pool task, handed to the workers once fewer than ``TASKS_AHEAD_PER_WORKER`` per worker
        are out (``pump``), or when its result is asked for."""
        task = _PoolTask(self, parts, fn, args)
        self._unsent.append(task)
        self.pump()
        return task

    def pump(self) -> None:
        """Hand queued tasks to the workers, oldest first, up to the window."""
        while self._unsent and self.in_flight < TASKS_AHEAD_PER_WORKER * max(1, self.workers):
            self._send(self._unsent.popleft())

    def _send(self, task: "_PoolTask") -> None:
        self.in_flight += 1
        if self.usable:
            try:
                task.future = self._executor().submit(task.fn, *task.args)
                return
            except Exception:  # no process can be started here: read inline from now on
                self._give_up()
        try:
            task.future = _Done(task.fn(*task.args))
        except Exception as exc:  # as a worker failing: ``_collect`` reads the folders inline
            task.future = _Failed(exc)

    def _send_upto(self, task: "_PoolTask") -> None:
        """``task`` is waited for: it, and every task queued before it, goes now."""
        while task.future is None and self._unsent:
            self._send(self._unsent.popleft())
        self.pump()

    def _stored(self, task: Any) -> None:
        """A folder's share of ``task`` is stored: a task whose every share is counts out of the window."""
        if isinstance(task, _BatchPart):
            task = task.batch.future
        if isinstance(task, _PoolTask) and task.future is not None:
            task.parts -= 1
            if task.parts == 0:
                self.in_flight -= 1

    def _give_up(self) -> None:
        self.usable = False
        if self._pool is not None:
            try:
                self._pool.shutdown(wait=False, cancel_futures=True)
            except Exception:
                pass
            self._pool = None

    def _collect(self, block: bool) -> list[tuple]:
        """Results of the folders at the head of the queue that are all back, in the order they were
        queued (checking only the head keeps this cheap with thousands of small folders queued)."""
        out = []
        keep: list = []
        for k, (scanned, old_id, jobs) in enumerate(self._pending):
            if not (block or all(f.done() for f, _ in jobs)):
                keep = self._pending[k:]
                break
            units: list[tuple] = []
            others: list[Item] = []
            claimed = 0
            for f, chunk in jobs:
                try:
                    chunk_units, chunk_others, n = f.result()
                except Exception:  # the worker died or never started: read the chunk here
                    self._give_up()
                    chunk_units, chunk_others, n = self._inline(scanned, chunk).result()
                units.extend(chunk_units)
                others.extend(chunk_others)
                claimed += n
            if len(jobs) > 1:
                others = _dedupe_problems(others)
            out.append((scanned, old_id, units, others, [], claimed))
            self.backlog -= len(scanned.files)
            for f, _chunk in jobs:
                self._stored(f)
        self._pending = keep
        self.pump()
        return out

    def oldest(self) -> list[tuple]:
        """Wait for the oldest queued folder (starting the batch being gathered if it is in it) and
        return the results of the folders at the head that are back."""
        if not self._pending:
            return []
        for f, _chunk in self._pending[0][2]:
            if isinstance(f, _BatchPart) and f.batch.future is None:
                self.flush()
            f.exception()
        return self._collect(block=False)

    def finished(self) -> list[tuple]:
        return self._collect(block=False) if self._pending else []

    def drain(self, cancel: Optional[threading.Event] = None) -> Iterable[tuple]:
        self.flush()
        while self._pending:
            if cancel is not None and cancel.is_set():
                raise IndexCancelled()
            head = self._pending[:1]
            for f, _chunk in head[0][2]:
                f.exception()
            yield from self._collect(block=False)

    def close(self) -> None:
        self._give_up()


def _count_files(folder: str) -> int:
    """Files under a folder the walker does not enter (for the summary's file accounting)."""
    n = 0
    for _dirpath, _dirs, files in os.walk(folder):
        n += len(files)
    return n


def _dedupe_problems(items: list[Item]) -> list[Item]:
    """Chunks share folder-wide files (``mapping.csv``): report each problem once."""
    seen: set[tuple[str, str]] = set()
    out: list[Item] = []
    for it in items:
        if isinstance(it, Problem):
            key = (it.path, it.error)
            if key in seen:
                continue
            seen.add(key)
        out.append(it)
    return out


class _EarlyOps:
    """Cold builds: ops of a plain CANN place are made as soon as its folder is stored.

    After the walk, a place no pending folder maps to (by its path) and that no other folder
    touched is finalized right away by ``finalize.finalize_early``, while the pool still reads
    other folders; the last ``finalize`` keeps those ops only if the place's units are still
    the same and still plain (no graph or execution order found for it since), else redoes it.
    """

    def __init__(self, index: "DumpIndex") -> None:
        self.index = index
        self.touched: set[tuple[int, int]] = set()
        #: plain places stored by one folder so far, waiting for the walk: (first id, last id, graphs)
        self.waiting: dict[tuple[int, int], tuple[int, int, frozenset]] = {}
        self.pending: Optional[dict[tuple[int, int], int]] = None  # known once the walk is over

    def walk_done(self, pending_parts: list[tuple[str, ...]]) -> None:
        from dumpscope.core.layouts.paths import place_of

        self.pending = {}
        for parts in pending_parts:
            key = _place_key(place_of(parts))
            self.pending[key] = self.pending.get(key, 0) + 1
        self._make()

    def stored(self, scanned: Scanned, first: int, units: list[tuple]) -> None:
        from dumpscope.core.layouts.paths import CONSTANTS_STEP, place_of

        groups = _spans(list(map(_RANK_STEP, units)))  # stored sorted by rank, step: a place is one id range
        if self.pending is not None:
            key = _place_key(place_of(scanned.parts))
            if key in self.pending:
                self.pending[key] -= 1
        plain = set(finalizing.PLAIN_PRODUCERS)
        for place, (lo, hi) in groups.items():
            if place in self.touched:  # a second folder for this place: the last finalize decides
                self.waiting.pop(place, None)
                continue
            self.touched.add(place)
            chunk = units[lo:hi]
            cols = list(zip(*chunk))  # a column at a time: the checks run in C, not per unit in Python
            storages = set(cols[_STORAGE])
            if place[1] == CONSTANTS_STEP or not set(cols[0]) <= plain or _any_holds(cols[4], "_To_") \
                    or "Parameter" in cols[2] or _repeats(cols[7], cols[3]) or \
                    ("none" in storages and len(storages) > 1):
                # not plain (see finalize._plain_place), or statistics the last finalize may merge
                # into payload records: the last finalize decides
                continue
            self.waiting[place] = (first + lo, first + hi - 1, frozenset(cols[7]))
        self._make()

    def _make(self) -> None:
        """Finalize the waiting places no pending folder maps to (once the walk is over)."""
        if self.pending is None or not self.waiting:
            return
        if not self.index.early_only:  # a (partial) finalize has run: it owns the ops table now
            self.waiting.clear()
            return
        if self.index.query("SELECT 1 FROM graph_files UNION ALL SELECT 1 FROM exec_orders LIMIT 1"):
            self.waiting.clear()  # something to join: every place goes through the last finalize
            return
        for place in [p for p in self.waiting if self.pending.get(p, 0) <= 0]:
            lo, hi, graphs = self.waiting.pop(place)
            finalizing.finalize_early(self.index, place, lo, hi, graphs)


def _spans(keys: list) -> dict[Any, list[int]]:
    """``[first index, last index + 1]`` of each key of ``keys``; searched in C when there are few
    distinct keys (a folder is almost always one place), else in one pass."""
    distinct = dict.fromkeys(keys)
    if len(distinct) <= 8:
        back = keys[::-1]
        return {key: [keys.index(key), len(keys) - back.index(key)] for key in distinct}
    spans: dict[Any, list[int]] = {}
    for k, key in enumerate(keys):
        span = spans.get(key)
        if span is None:
            spans[key] = [k, k + 1]
        else:
            span[1] = k + 1
    return spans


def _repeats(graphs: tuple, names: tuple) -> bool:
    """Does a (graph, name) pair occur twice?  One graph (the common case): the names alone."""
    if len(set(graphs)) == 1:
        return len(set(names)) != len(names)
    return len(set(zip(graphs, names))) != len(names)


def _any_holds(texts: tuple, part: str) -> bool:
    """Does any of ``texts`` (None allowed) contain ``part``?  One join and one search, not a loop."""
    try:
        return part in "\n".join(texts)
    except TypeError:  # a None among them
        return any(part in t for t in texts if t)


def _place_key(place) -> tuple[int, int]:
    return (place.rank, place.step)


class _Done:
    """An already-computed result that quacks like a finished future."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def done(self) -> bool:
        return True

    def result(self):
        return self._value

    def exception(self):
        return None


class _PoolTask:
    """A task for the pool's workers, quacking like its future: not done until ``_Pool.pump`` has
    handed it over; asking for its result hands it (and the tasks queued before it) over at once."""

    __slots__ = ("pool", "parts", "fn", "args", "future")

    def __init__(self, pool: "_Pool", parts: int, fn: Callable, args: tuple) -> None:
        self.pool = pool
        self.parts = parts  # folders whose results it holds (a batch: several)
        self.fn = fn
        self.args = args
        self.future: Any = None

    def done(self) -> bool:
        return self.future is not None and self.future.done()

    def result(self):
        self.pool._send_upto(self)
        return self.future.result()

    def exception(self):
        self.pool._send_upto(self)
        return self.future.exception()


class _Failed(_Done):
    """A task that failed where it was run, quacking like a failed future."""

    def result(self):
        raise self._value

    def exception(self):
        return self._value


@dataclass(slots=True)
class _Batch:
    """Small folders gathered for one pool task; ``future`` is set once the batch is started."""

    folders: list[Scanned] = field(default_factory=list)
    files: int = 0
    future: Any = None


class _BatchPart:
    """One folder's share of a batch, quacking like a future (not done until the batch is started)."""

    def __init__(self, batch: _Batch, k: int) -> None:
        self.batch = batch
        self.k = k

    def done(self) -> bool:
        return self.batch.future is not None and self.batch.future.done()

    def result(self):
        return self.batch.future.result()[self.k]

    def exception(self):
        return self.batch.future.exception()


_NTENSORS = UNIT_COLUMNS.index("ntensors")
_STORAGE = UNIT_COLUMNS.index("storage")
_RANK_STEP = operator.itemgetter(UNIT_COLUMNS.index("rank"), UNIT_COLUMNS.index("step"))
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

        with writer_lock(self.db_path, cancelled=lambda: cancel is not None and cancel.is_set(), waiting=waiting):
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
        finalizing.finalize(self)
        prog.phase = phase
        partial(prog)

    def _store_result(self, prog: Progress, scanned: Scanned, old_id: Optional[int], units: list[tuple],
                      others: list[Item], skips: list[str], nclaimed: int) -> None:
        prog.records += sum(u[_NTENSORS] for u in units)
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
        first, stored = self._store_dir(scanned.dirpath, scanned.mtime_ns, nentries, nfiles, nclaimed,
                                        skips, units, others, old_id, subdirs)
        if self._early_ops is not None:
            self._early_ops.stored(scanned, first, stored)

    @staticmethod
    def _scan_listing(layouts, listing: DirListing) -> Iterator[Item]:
        """Every layout's items, as they come (packed one by one: a big msprobe ``dump.json`` is
        never held as records)."""
        for layout in layouts:
            try:
                for item in layout.scan_dir(listing):
                    if type(item) is TensorRecord and not item.producer:
                        item.producer = layout.name
                    yield item
            except Exception as exc:  # a layout bug must not take the whole index down
                yield Problem(listing.dirpath, f"{layout.name} layout failed: {type(exc).__name__}: {exc}")

    def _delete_dir(self, cur: sqlite3.Cursor, dir_id: int) -> None:
        row = cur.execute("SELECT first_unit, last_unit FROM dirs WHERE id=?", (dir_id,)).fetchone()
        if row is not None and row[0] is not None:  # a folder's units have consecutive ids
            cur.execute("DELETE FROM units WHERE id BETWEEN ? AND ? AND dir_id=?", (row[0], row[1], dir_id))
        for table in ("exec_orders", "graph_files", "problems", "overflow", "files"):
            cur.execute(f"DELETE FROM {table} WHERE dir_id=?", (dir_id,))
        for table in ("units", "exec_orders", "graph_files", "problems", "overflow"):  # core.dump_roots
            cur.execute(f"DELETE FROM aside_{table} WHERE dir_id=?", (dir_id,))
        cur.execute("DELETE FROM aside_dirs WHERE dir_id=?", (dir_id,))

    def _next_unit_id(self, cur: sqlite3.Cursor) -> int:
        """Unit ids are never reused (they are op ids too, and views keep op ids across updates)."""
        top = cur.execute("SELECT COALESCE(MAX(id), 0) FROM units").fetchone()[0]
        row = cur.execute("SELECT value FROM meta WHERE key='next_unit'").fetchone()
        return max(top + 1, int(row[0]) if row else 1)

    def _store_dir(self, path: str, mtime_ns: int, nentries: int, nfiles: int, nclaimed: int, skips: list[str],
                   units: list[tuple], others: list[Item], old_id: Optional[int],
                   subdirs: Optional[str] = None) -> tuple[int, list[tuple]]:
        """Replace what is stored for one folder; returns the first unit id and the units as stored."""
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
        return first, units
