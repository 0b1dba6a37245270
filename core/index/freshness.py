"""Files changed in place after they were indexed (a copy cut short, a file rewritten or grown).

A folder whose mtime and entry count are unchanged is not listed again (that keeps a warm reopen
cheap), but a file truncated, rewritten or grown in place does not touch its folder.  So each
update also looks at the files the index was built from (the ``files`` table: tensor files,
``dump.json``, graphs, execution orders) and compares each one's ctime with the time its folder was
last read (``dirs.scanned_ns``): a file changed since, or gone, sends its folder back to be read
again in the same update, so its records, problems and statistics are those of the file as it is
now.  ctime, not mtime: every write moves it and nobody can set it (``touch -d``/``cp -p`` put an
old mtime back; a future mtime would make a folder look changed forever).

The read time is exact, not a guess with slack: file times come from the kernel's coarse clock,
so :func:`read_start_ns` waits (a few ms, once per update that reads anything) until that clock
has passed the moment the first folder is about to be read; a write before it has an earlier
ctime, a write after it this one or a later one.  A filesystem that keeps times in whole seconds (FAT, some network
mounts) is compared to the second: a file written in the same second is read once more.

One ``stat`` per file costs 3–7 µs here, 0.3–0.7 s for 100,000 files — more than a warm
``summary`` may take.  So an update spends at most :data:`BUDGET_S` on it, starting where the last
one stopped (``meta.fresh_cursor``), and :class:`Freshness` says what it covered: ``summary`` prints
it when the check was partial, and ``summary --recheck`` checks every file.  Other trade-offs: a
change of mode or owner also moves ctime (the folder is read again, same answer); a network mount
whose clock runs behind this machine's can hide a change made in that lag.
"""

from __future__ import annotations

import itertools
import operator
import os
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # pragma: no cover
    from dumpscope.core.index.dump_index import DumpIndex

#: seconds one update may spend on the check (a warm 100k-file ``summary`` must stay near 0.5 s)
BUDGET_S = 0.15
#: CLOCK_REALTIME_COARSE (Linux): the clock the kernel stamps file times with
_COARSE_CLOCK = 5
_BATCH = 2048
#: files of one folder from which the check opens the folder (see ``changed_count``)
_FD_MIN_FILES = 4
_DIR_ID = operator.itemgetter(1)


@dataclass
class Freshness:
    """What one update's check covered: once the update is over (:meth:`settle`), ``files`` counts
    the files the index holds and ``checked`` those known current — looked at by the check, or
    read by this very update (a cold build reads every file, so its check is complete)."""

    files: int = 0
    checked: int = 0
    changed: int = 0  # found changed or gone: their folders were read again
    seconds: float = 0.0
    per_dir: dict[int, int] = field(default_factory=dict, repr=False)  # files looked at, by folder

    @property
    def complete(self) -> bool:
        return self.checked >= self.files

    def as_json(self) -> dict[str, Any]:
        return {"files": self.files, "checked": self.checked, "changed": self.changed, "complete": self.complete}

    def settle(self, index: "DumpIndex", read_ns: int) -> None:
        """Count again after the update: files of folders read now are current, looked at or not."""
        try:
            self.files = index.query("SELECT COUNT(*) FROM files")[0][0]
            read = set() if not read_ns else {d for (d,) in index.query(
                "SELECT id FROM dirs WHERE scanned_ns = ?", (read_ns,))}
            fresh = index.query("SELECT COUNT(*) FROM files f JOIN dirs d ON d.id = f.dir_id WHERE d.scanned_ns = ?",
                                (read_ns,))[0][0] if read_ns else 0
        except sqlite3.OperationalError:
            return
        self.checked = min(self.files, fresh + sum(n for d, n in self.per_dir.items() if d not in read))

    def note(self) -> str:
        """One line for human output when the check was partial (empty when it covered every file)."""
        if self.complete:
            return ""
        return (f"changes in place: {self.checked:,} of {self.files:,} indexed files checked this run "
                f"(time-boxed to {BUDGET_S:g} s; the next runs continue; --recheck checks all)")


def check(index: "DumpIndex", budget_s: Optional[float]) -> tuple[set[int], Freshness]:
    """Folder ids to read again, and what was checked (``budget_s`` None: every file)."""
    t0 = time.monotonic()
    try:
        total = index.query("SELECT COUNT(*) FROM files")[0][0]
    except sqlite3.OperationalError:  # no such table: an index being created
        return set(), Freshness()
    report = Freshness(files=total)
    if not total:
        return set(), report
    read_at: dict[int, int] = {}
    folders: dict[int, str] = {}
    for dir_id, scanned_ns, dir_path in index.query("SELECT id, scanned_ns, path FROM dirs"):
        read_at[dir_id] = scanned_ns
        folders[dir_id] = dir_path
    row = index.query("SELECT value FROM meta WHERE key='fresh_cursor'")
    start = int(row[0][0]) if row else 0
    deadline = None if budget_s is None else t0 + budget_s
    stale: set[int] = set()
    last = start
    for lo, hi in ((start, None), (None, start)):  # from the cursor to the end, then from the start
        cursor = lo if lo is not None else -1
        while True:
            sql = "SELECT id, dir_id, path FROM files WHERE id > ?" + ("" if hi is None else " AND id <= ?") + \
                  " ORDER BY id LIMIT ?"
            rows = index.query(sql, (cursor,) + (() if hi is None else (hi,)) + (_BATCH,))
            # a folder's files have consecutive ids: its run of rows is checked together
            for dir_id, run in itertools.groupby(rows, key=_DIR_ID):
                paths = [r[2] for r in run]
                report.per_dir[dir_id] = report.per_dir.get(dir_id, 0) + len(paths)
                n = changed_count(folders.get(dir_id), paths, read_at.get(dir_id))
                if n:
                    stale.add(dir_id)
                    report.changed += n
            report.checked += len(rows)
            if rows:
                cursor = last = rows[-1][0]
            if len(rows) < _BATCH or (deadline is not None and time.monotonic() > deadline):
                break
        if deadline is not None and time.monotonic() > deadline and report.checked < total:
            break
    report.checked = min(report.checked, total)
    report.seconds = time.monotonic() - t0
    if budget_s is not None and not report.complete:
        try:
            with index._lock:
                index.conn.execute("INSERT OR REPLACE INTO meta VALUES('fresh_cursor', ?)", (str(last),))
        except sqlite3.OperationalError:  # a read-only cache: the next run starts at the same place
            pass
    return stale, report


def read_start_ns() -> int:
    """The time from which a write counts as "after the read".  File times come from the kernel's
    coarse clock, which lags the real time by up to a tick (more on an idle tickless CPU); waiting
    until it has passed the real time of this call makes every earlier write carry an earlier time
    and every later write this one or a later one."""
    start = time.time_ns()
    if not sys.platform.startswith("linux"):
        return start  # file times there come from the fine clock
    deadline = start + 1_000_000_000
    while True:
        try:
            now = time.clock_gettime_ns(_COARSE_CLOCK)
        except OSError:
            return start
        if now >= start:
            return now
        if time.time_ns() > deadline:
            return start
        time.sleep(0.0005)


def changed_count(folder: Optional[str], paths: list[str], read_ns: Optional[int]) -> int:
    """How many of ``paths`` (files of ``folder``, read at ``read_ns``) changed since, or are gone.

    A file in the folder is looked up from the folder's descriptor (``stat(name, dir_fd)``: the kernel
    resolves one name, not the whole path again: 1.9 against 2.7 µs a file here) once the folder has
    :data:`_FD_MIN_FILES` files to check (opening and closing it costs 2.8 µs); a file outside it, or a
    folder that cannot be opened, is looked up by its full path."""
    if not read_ns:  # a folder stored before its read time was kept: read it again once
        return len(paths)
    fd = None
    prefix = os.path.join(folder, "") if folder else ""
    if prefix and len(paths) >= _FD_MIN_FILES and os.stat in os.supports_dir_fd:
        try:
            fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))  # type: ignore[arg-type]
        except OSError:
            fd = None
    cut = len(prefix)
    changed = 0
    try:
        for path in paths:
            try:
                if fd is not None and path.startswith(prefix):
                    ctime = os.stat(path[cut:], dir_fd=fd).st_ctime_ns
                else:
                    ctime = os.stat(path).st_ctime_ns
            except (OSError, ValueError):
                changed += 1  # gone (or no longer readable): the folder's layouts say what happened
                continue
            # changed_since, with its common answer first (a fine-grained time before the read)
            if ctime >= read_ns or (ctime % 1_000_000_000 == 0 and changed_since(ctime, read_ns)):
                changed += 1
    finally:
        if fd is not None:
            os.close(fd)
    return changed


def changed_since(ctime_ns: int, read_ns: int) -> bool:
    """A file with this ctime changed at or after ``read_ns`` (:func:`read_start_ns`); on a filesystem
    keeping whole seconds (FAT: two), a time in the same second counts as changed."""
    if ctime_ns % 1_000_000_000:  # not a whole second: a fine clock (nearly every file)
        return ctime_ns >= read_ns
    for grain in (2_000_000_000, 1_000_000_000):
        if ctime_ns % grain == 0:
            return ctime_ns >= read_ns - read_ns % grain
    return ctime_ns >= read_ns
