"""Index cache files that cannot be used: rebuild or fall back to memory, say so once, answer anyway.

The cache is ours, the answer is the user's: a read-only or full cache filesystem, a file that
is not an SQLite database, damaged pages or a build another process never finished must cost
time, never the answer.  A damaged file is discarded and rebuilt once; anything else that stops
the cache file from working builds the index in memory.  Each case leaves one line in
``DumpIndex.warnings`` for the CLI / explorer to show.  "database is locked" met while opening
(several processes opening one new file at once: SQLite skips its busy handler where waiting could
deadlock) is contention, not a broken cache: the open is tried again a few times first.

A verdict of damage never races a writer (issue 30: a checker reading the size, the header and
the ``-wal`` of a file another process was closing called a good index damaged, and the explorer
deleted the index its builder had just written).  Nothing is discarded while another writer holds
the index's writer lock (a build of it is alive), and the file is looked at again under the lock,
twice, with its size and times unchanged in between, before it goes.  Damage a query meets after
the open (``discard`` without a check of its own) is looked at again under the lock when another
writer held it or changed the file meanwhile: a sound file is kept.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from dumpscope.core.errors import IndexCancelled
from dumpscope.core.index.lock import LockTimeout, writer_lock

if TYPE_CHECKING:  # pragma: no cover
    from dumpscope.core.index.dump_index import DumpIndex

_MAGIC = b"SQLite format 3\x00"
#: opens tried again after "database is locked", and the pause before each
LOCKED_RETRIES = 5
LOCKED_PAUSE_S = 0.2
#: pause between the two looks at a header that seems damaged (under the writer lock)
LOOK_AGAIN_S = 0.02


def header_problem(path: Path) -> Optional[str]:
    """A cheap look at an index file before SQLite trusts it: the magic, and a size that holds
    the pages its header promises (a file cut short by a full disk or a crash)."""
    try:
        size = path.stat().st_size
        if size == 0:
            return None
        with open(path, "rb") as fh:
            head = fh.read(100)
    except FileNotFoundError:
        return None
    except OSError:
        return None  # unreadable: opening it says why, and falls back
    if len(head) < 100 or not head.startswith(_MAGIC):
        return "not an SQLite file"
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        return "bad page size in its header"
    pages = int.from_bytes(head[28:32], "big")
    valid = head[24:28] == head[92:96]
    try:  # (one look: a writer's close removes the WAL at any moment, between an exists and a stat too)
        wal_size = Path(str(path) + "-wal").stat().st_size
    except OSError:
        wal_size = 0
    if size % page or (valid and pages * page > size and not wal_size):
        return f"file is {size} bytes, its header promises {pages * page if valid else 'whole pages'}"
    return None


def _state(path: Path) -> tuple:
    """What a writer changes: the file's and its WAL's size, mtime and inode (None: missing)."""
    out: list = []
    for p in (path, Path(str(path) + "-wal")):
        try:
            st = p.stat()
            out.append((st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def settled_problem(path: Path) -> Optional[str]:
    """``header_problem``, believed only when the file stood still while it was read: a look taken
    while a process checkpoints or closes it (file growing, WAL going away) is no verdict."""
    before = _state(path)
    bad = header_problem(path)
    if bad is None or _state(path) != before:
        return None
    return bad


def is_damage(exc: BaseException) -> bool:
    """SQLite's verdict that the file itself is bad (not that it cannot be written or opened)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return True  # an index that contradicts itself (e.g. a build cut short by an older release)
    if isinstance(exc, sqlite3.OperationalError):
        return "malformed" in str(exc) or "not a database" in str(exc)
    return isinstance(exc, sqlite3.DatabaseError)


def discard(path: Path, still_bad: Optional[Callable[[], bool]] = None, wait_s: Optional[float] = None) -> bool:
    """Remove an index file and its WAL files (they are only ever ours), holding the writer lock.

    ``still_bad()``, asked under the lock, must confirm the damage (the file may have been fixed by
    the writer that held the lock); ``wait_s``: how long another writer may hold the lock (0: a
    build alive now means no discard).  Without ``still_bad`` (damage a query met after the open),
    a file that another writer held or changed while this one waited for the lock is looked at
    again under it, and kept when SQLite finds it sound (``_sound``): the other process may have
    just rebuilt it.  True: removed."""
    seen = _state(path)
    waited: list[bool] = []
    try:
        with writer_lock(str(path), waiting=lambda: waited.append(True), wait_s=wait_s):
            if still_bad is not None and not still_bad():
                return False
            if still_bad is None and (waited or _state(path) != seen) and _sound(path):
                return False
            for p in (path, Path(str(path) + "-wal"), Path(str(path) + "-shm")):
                try:
                    p.unlink()
                except FileNotFoundError:
                    pass
            return True
    except LockTimeout:
        return False


def _sound(path: Path) -> bool:
    """The file at ``path`` now passes SQLite's ``quick_check`` (a header and b-trees that hold
    together).  Asked only under the writer lock, after another writer was seen, so its cost (one
    read of the file) is paid on the rare path where a rebuilt index would otherwise be thrown away."""
    if not path.exists() or settled_problem(path) is not None:
        return False
    try:
        con = sqlite3.connect(str(path), timeout=1.0)
        try:
            rows = con.execute("PRAGMA quick_check(1)").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return rows == [("ok",)]


def _confirmed_header_problem(path: Path) -> Callable[[], bool]:
    def still_bad() -> bool:
        first = settled_problem(path)
        if first is None:
            return False
        time.sleep(LOOK_AGAIN_S)  # a closing reader may checkpoint without the lock: look twice
        return settled_problem(path) is not None

    return still_bad


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return (str(exc).strip() or type(exc).__name__).splitlines()[0]


def _close(index: Any) -> None:
    if index is not None:
        try:
            index.close()
        except Exception:
            pass


def open_with_fallback(cls: type, root: str, path: Path, progress: Any, cancel: Any, update: bool,
                       workers: Optional[int] = None) -> "DumpIndex":
    """Open (and update, with ``workers`` processes) the index file ``path`` of ``root``; see the module
    docstring."""
    from dumpscope.core.support.tree_paths import inside_tree

    warnings: list[str] = []
    if inside_tree(path.parent, root):  # never written inside the dump tree (nor the folder made there)
        return _in_memory(cls, root, f"cache dir {path.parent} lies inside the dump tree {root}", warnings,
                          progress, cancel, update, workers)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _in_memory(cls, root, f"cache dir {path.parent} cannot be created ({_why(exc)})", warnings,
                          progress, cancel, update, workers)
    attempt, locked = 0, 0
    while True:
        index = None
        try:
            bad = settled_problem(path)
            if bad is not None:
                if attempt:
                    raise sqlite3.DatabaseError(bad)
                # a build alive (lock held) or a file sound on a second look: opened as it is, and
                # SQLite's own verdict (below) decides
                if discard(path, _confirmed_header_problem(path), wait_s=0):
                    warnings.append(f"index cache {path} was damaged ({bad}): rebuilt")
            index = cls(root, str(path))
            if update:
                index.update(progress=progress, cancel=cancel, workers=workers)
            index.warnings.extend(warnings)
            return index
        except IndexCancelled:
            _close(index)
            raise
        except LockTimeout:
            _close(index)
            return _in_memory(cls, root, f"another dumpscope kept the index cache {path} locked", warnings,
                              progress, cancel, update, workers)
        except (sqlite3.DatabaseError, OSError) as exc:
            _close(index)
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc) and locked < LOCKED_RETRIES:
                locked += 1  # another process holds it for a moment: what is stored already is kept
                time.sleep(LOCKED_PAUSE_S * locked)
                continue
            if attempt == 0 and isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
                try:
                    gone = discard(path, wait_s=0)  # never while a build of it is alive
                except OSError:
                    pass
                else:
                    if gone:
                        warnings.append(f"index cache {path} was damaged ({_why(exc)}): rebuilt")
                        attempt = 1
                        continue
                    if locked < LOCKED_RETRIES:  # its writer may be mid-way: look again once it is done
                        locked += 1
                        time.sleep(LOCKED_PAUSE_S * locked)
                        continue
            return _in_memory(cls, root, f"index cache {path} is not usable ({_why(exc)})", warnings,
                              progress, cancel, update, workers)


def rebuild_in_memory(cls: type, index: "DumpIndex", exc: BaseException, progress: Any,
                      cancel: Any, workers: Optional[int] = None) -> "DumpIndex":
    """An update of a cache file failed half-way (disk full, damaged pages): discard a damaged file
    and answer from an index built in memory."""
    path = Path(index.db_path)
    _close(index)
    if is_damage(exc):
        try:
            discard(path)
        except OSError:
            pass
    return _in_memory(cls, index.root, f"index cache {path} failed ({_why(exc)})", list(index.warnings), progress,
                      cancel, True, workers)


def _in_memory(cls: type, root: str, reason: str, warnings: list[str], progress: Any, cancel: Any,
               update: bool, workers: Optional[int] = None) -> "DumpIndex":
    index = cls(root, ":memory:")
    index.warnings.extend(warnings + [f"{reason}: using an in-memory index"])
    if update:
        index.update(progress=progress, cancel=cancel, workers=workers)
    return index
