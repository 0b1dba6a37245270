"""The index's process pool: folders read by worker processes, their records handed back in order.

Header decoding is CPU-bound Python, so one core cannot keep up with the disk: big folders are
split into chunks and small leaf folders are gathered into batches, each read by a worker with
every layout, and the results of a folder are handed to the storing process (``DumpIndex``)
together, in the order the walk queued them.  Kept apart from the index so each has one job.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional

from dumpscope.core.errors import IndexCancelled
from dumpscope.core.index import place_dtypes
from dumpscope.core.layouts import all_layouts
from dumpscope.core.layouts.base import DirListing, Item
from dumpscope.core.layouts.walk import Scanned
from dumpscope.core.model import Problem, TensorRecord
from dumpscope.core.support import gc_pause
from dumpscope.core.units import UnitRecord, pack

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



def _pack_items(items: Iterable[Item]) -> tuple[list[tuple], list[Item | place_dtypes.PlaceDtypes]]:
    """Units as plain row tuples (cheap to pickle and to store), and every other item, with the dtypes of
    each place's units (``place_dtypes.PlaceDtypes``: the index stores them per folder).

    A ``UnitRecord`` (a whole CANN file) is one unit; any other tensor record is a unit of its own.
    """
    units: list[tuple] = []
    others: list[Item | place_dtypes.PlaceDtypes] = []
    packed: set[tuple[int, int, str]] = set()  # distinct (rank, step, tensors): see ``place_dtypes``
    lone: set[tuple[int, int, object]] = set()
    for it in items:
        if isinstance(it, UnitRecord):
            units.append(tuple(it))
            packed.add((it.rank, it.step, it.tensors))
        elif isinstance(it, TensorRecord):
            units.append(tuple(pack([it])))
            lone.add((it.rank, it.step, it.dtype))
        else:
            others.append(it)
    if units:
        others.extend(place_dtypes.records(packed, lone))
    return units, others


def scan_listing(layouts, listing: DirListing) -> Iterator[Item]:
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


def _scan_chunk(root: str, scanned: Scanned, files: list[str],
                first: bool = True) -> tuple[list[tuple], list[Item], int]:
    """Process-pool entry: read one chunk of a big folder with every layout.

    Folder-wide findings (names that are not UTF-8) are reported by the first chunk only.
    """
    listing = DirListing(root=root, dirpath=scanned.dirpath, parts=scanned.parts, files=files,
                         subdirs=list(scanned.subdirs),
                         bad_names=list(scanned.bad_names or ()) if first else [],
                         outside_links=list(scanned.outside_links or ()) if first else [])
    units, others = _pack_items(scan_listing(all_layouts(), listing))
    return units, others, len(listing.claimed)


def _scan_batch(root: str, folders: list[Scanned]) -> list[tuple[list[tuple], list[Item], int]]:
    """Process-pool entry: read several small folders (none has subfolders), each as a whole."""
    return [_scan_chunk(root, scanned, scanned.files) for scanned in folders]


def _worker_start() -> None:
    """Pool workers yield the CPU to the process storing their results: it is the one the build waits on.

    A forked worker's collector leaves alone what it inherited (every imported module, ~0.1M objects:
    each full collection walked them again, 15-20 ms, several per worker; freezing splices lists, it
    touches no object) and collects cycles of its own as usual, even when it was forked while the
    parent had the collector paused (``gc_pause``)."""
    try:
        os.nice(5)
    except (AttributeError, OSError):
        pass
    gc.freeze()
    gc.enable()


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
    if method == "fork":
        gc_pause.before_fork()
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
        shared = ["mapping.csv"] if "mapping.csv" in files else []  # (a name is listed once)
        # (the walk lists names sorted and once each: a chunk is a slice, unless the shared file joins it)
        chunks = [sorted(dict.fromkeys(files[i:i + CHUNK_FILES] + shared)) if shared else files[i:i + CHUNK_FILES]
                  for i in range(0, len(files), CHUNK_FILES)]
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
