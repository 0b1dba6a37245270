"""Index cache files that cannot be used: rebuild or fall back to memory, say so once, answer anyway.

The cache is ours, the answer is the user's: a read-only or full cache filesystem, a file that
is not an SQLite database, damaged pages or a build another process never finished must cost
time, never the answer.  A damaged file is discarded and rebuilt once; anything else that stops
the cache file from working builds the index in memory.  Each case leaves one line in
``DumpIndex.warnings`` for the CLI / explorer to show.  "database is locked" met while opening
(several processes opening one new file at once: SQLite skips its busy handler where waiting could
deadlock) is contention, not a broken cache: the open is tried again a few times first.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from dumpscope.core.index_lock import LockTimeout, writer_lock

if TYPE_CHECKING:  # pragma: no cover
    from dumpscope.core.index import DumpIndex

_MAGIC = b"SQLite format 3\x00"
#: opens tried again after "database is locked", and the pause before each
LOCKED_RETRIES = 5
LOCKED_PAUSE_S = 0.2


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
    wal = Path(str(path) + "-wal")
    if size % page or (valid and pages * page > size and not (wal.exists() and wal.stat().st_size)):
        return f"file is {size} bytes, its header promises {pages * page if valid else 'whole pages'}"
    return None


def is_damage(exc: BaseException) -> bool:
    """SQLite's verdict that the file itself is bad (not that it cannot be written or opened)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return True  # an index that contradicts itself (e.g. a build cut short by an older release)
    if isinstance(exc, sqlite3.OperationalError):
        return "malformed" in str(exc) or "not a database" in str(exc)
    return isinstance(exc, sqlite3.DatabaseError)


def discard(path: Path) -> None:
    """Remove an index file and its WAL files (they are only ever ours), holding the writer lock."""
    with writer_lock(str(path)):
        for p in (path, Path(str(path) + "-wal"), Path(str(path) + "-shm")):
            try:
                p.unlink()
            except FileNotFoundError:
                pass


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


def open_with_fallback(cls: type, root: str, path: Path, progress: Any, cancel: Any, update: bool) -> "DumpIndex":
    """Open (and update) the index file ``path`` of ``root``; see the module docstring."""
    from dumpscope.core.index import IndexCancelled

    warnings: list[str] = []
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _in_memory(cls, root, f"cache dir {path.parent} cannot be created ({_why(exc)})", warnings,
                          progress, cancel, update)
    attempt, locked = 0, 0
    while True:
        index = None
        try:
            bad = header_problem(path)
            if bad is not None:
                if attempt:
                    raise sqlite3.DatabaseError(bad)
                discard(path)
                warnings.append(f"index cache {path} was damaged ({bad}): rebuilt")
            index = cls(root, str(path))
            if update:
                index.update(progress=progress, cancel=cancel)
            index.warnings.extend(warnings)
            return index
        except IndexCancelled:
            _close(index)
            raise
        except LockTimeout:
            _close(index)
            return _in_memory(cls, root, f"another dumpscope kept the index cache {path} locked", warnings,
                              progress, cancel, update)
        except (sqlite3.DatabaseError, OSError) as exc:
            _close(index)
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc) and locked < LOCKED_RETRIES:
                locked += 1  # another process holds it for a moment: what is stored already is kept
                time.sleep(LOCKED_PAUSE_S * locked)
                continue
            if attempt == 0 and isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
                try:
                    discard(path)
                except OSError:
                    pass
                else:
                    warnings.append(f"index cache {path} was damaged ({_why(exc)}): rebuilt")
                    attempt = 1
                    continue
            return _in_memory(cls, root, f"index cache {path} is not usable ({_why(exc)})", warnings,
                              progress, cancel, update)


def rebuild_in_memory(cls: type, index: "DumpIndex", exc: BaseException, progress: Any,
                      cancel: Any) -> "DumpIndex":
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
                      cancel, True)


def _in_memory(cls: type, root: str, reason: str, warnings: list[str], progress: Any, cancel: Any,
               update: bool) -> "DumpIndex":
    index = cls(root, ":memory:")
    index.warnings.extend(warnings + [f"{reason}: using an in-memory index"])
    if update:
        index.update(progress=progress, cancel=cancel)
    return index
