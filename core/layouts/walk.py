"""List every directory of a dump tree once, in parallel, safely.

Directory listing is I/O-bound, so a few threads overlap the ``scandir`` calls.  Symlinked
folders are followed once (a loop is reported, not followed again); unreadable folders
become problems instead of exceptions.

A symlink (to a folder or a file) whose target lies outside PATH is not followed unless asked
(``--follow-links``, which sets ``DUMPSCOPE_FOLLOW_LINKS=1`` for this process and its children):
``rootlink -> /`` indexed the whole machine, and a link to ``/etc/shadow`` or ``/proc/self/mem``
was opened.  Such a link is reported ("not followed: points outside PATH") and counted.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from dumpscope.core.layouts.base import DirListing
from dumpscope.core.model import Problem
from dumpscope.core.support.tree_paths import is_under

#: A folder modified this recently is always listed: coarse mtime clocks (NFS, some FUSE
#: mounts) may not tick between two writes into it.
RECENT_NS = 5_000_000_000

#: a folder listing with no progress for this long is reported and skipped
STALL_S = 60.0

#: folders listed (or being listed) and not yet handed to the consumer, per walker thread
LISTINGS_AHEAD_PER_THREAD = 2

#: the environment variable ``--follow-links`` sets (children inherit it: the explorer's builder, serve)
FOLLOW_LINKS_ENV = "DUMPSCOPE_FOLLOW_LINKS"


def follow_links() -> bool:
    """Whether symlinks that leave PATH are followed (``--follow-links``)."""
    return os.environ.get(FOLLOW_LINKS_ENV, "") == "1"


#: Folders that never hold dump data and can be huge.
SKIP_DIRS = frozenset({".git", "__pycache__", ".svn", ".hg", "node_modules"})


@dataclass(slots=True)
class Scanned:
    """The raw result of listing one directory (``parts``: its names from PATH's context down, see
    ``context_parts``)."""

    dirpath: str
    parts: tuple[str, ...]
    files: list[str]
    subdirs: list[str]
    mtime_ns: int
    problem: Problem | None = None
    identity: tuple[int, int] | None = None
    #: entries whose names are not valid UTF-8 (display-safe spelling), left out of files/subdirs
    bad_names: list[str] | None = None
    #: the folder's mtime matches the index: it was not listed, ``subdirs`` come from the index
    unchanged: bool = False
    #: symlinks whose targets lie outside PATH, not followed (left out of files/subdirs)
    outside_links: list[str] | None = None


def _undecodable(name: str) -> bool:
    """True for a name holding bytes that are not UTF-8 (``os.fsdecode`` surrogate escapes):
    such a name cannot be stored, printed or put in JSON, so it is reported, not indexed."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def display_name(name: str) -> str:
    """A printable spelling of a file name with undecodable bytes (``\\xff`` escapes)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


#: the problem a symlink leaving PATH becomes
OUTSIDE_LINK = "not followed: points outside PATH (--follow-links follows it)"


def names_inside(folder: str, root: str) -> tuple[list[str], list[str]]:
    """``os.listdir(folder)`` split into the names to read and the symlinks whose targets leave
    ``root`` (not followed unless ``--follow-links``): for a layout that lists a subfolder itself
    (msprobe's ``dump_tensor_data``).  Raises ``OSError`` as ``os.listdir`` does."""
    names = os.listdir(folder)
    if follow_links():
        return names, []
    real_root = os.path.realpath(root)
    keep: list[str] = []
    outside: list[str] = []
    for name in names:
        path = os.path.join(folder, name)
        (outside if os.path.islink(path) and not is_under(os.path.realpath(path), real_root) else keep).append(name)
    return keep, outside


def list_folder(dirpath: str, parts: tuple[str, ...], known: Optional[dict[str, tuple[int, list[str]]]] = None,
                real_root: Optional[str] = None) -> Scanned:
    """One folder's listing; ``real_root``: PATH resolved, when links leaving it are not followed."""
    files: list[str] = []
    subdirs: list[str] = []
    bad: list[str] = []
    outside: list[str] = []
    try:
        st = os.stat(dirpath)
        prior = known.get(dirpath) if known else None
        if prior is not None and prior[0] == st.st_mtime_ns and time.time_ns() - st.st_mtime_ns > RECENT_NS:
            # Creating, deleting or renaming an entry always bumps the folder's mtime, so an
            # unchanged mtime means an unchanged listing: one stat instead of a listing.
            return Scanned(dirpath, parts, [], list(prior[1]), st.st_mtime_ns, None, (st.st_dev, st.st_ino),
                           None, True)
        with os.scandir(dirpath) as it:
            for entry in it:
                if _undecodable(entry.name):
                    bad.append(display_name(entry.name))
                    continue
                try:
                    if real_root is not None and entry.is_symlink() and not is_under(os.path.realpath(entry.path), real_root):
                        outside.append(entry.name)
                        continue
                    if entry.is_dir():
                        if entry.name not in SKIP_DIRS:
                            subdirs.append(entry.name)
                    elif entry.is_file():
                        files.append(entry.name)
                except OSError:
                    continue  # a dangling link or an entry that vanished meanwhile
    except PermissionError:
        return Scanned(dirpath, parts, [], [], 0, Problem(dirpath, "folder cannot be read: permission denied"))
    except FileNotFoundError:
        return Scanned(dirpath, parts, [], [], 0, Problem(dirpath, "folder vanished while indexing"))
    except OSError as exc:
        return Scanned(dirpath, parts, [], [], 0, Problem(dirpath, f"folder cannot be read: {exc.strerror or exc}"))
    files.sort()
    subdirs.sort()
    return Scanned(dirpath, parts, files, subdirs, st.st_mtime_ns, None, (st.st_dev, st.st_ino),
                   sorted(bad) if bad else None, outside_links=sorted(outside) if outside else None)


#: names of PATH and of its parents kept in front of every folder's ``parts``
CONTEXT_DEPTH = 5


def context_parts(root: str) -> tuple[str, ...]:
    """PATH's own name and up to four parents: a PATH given at a rank, ``{time}``, step or model
    folder (CLI.md) is read with the folder names that say its rank and step, as from above it."""
    return tuple(Path(os.path.abspath(root)).parts[1:])[-CONTEXT_DEPTH:]


def natural_key(name: str) -> tuple:
    """Sort key putting ``step2`` before ``step10`` and ``rank_9`` before ``rank_10`` (digit runs by value)."""
    return tuple((0, int(t), t) if t.isdigit() else (1, 0, t) for t in _DIGITS.split(name) if t)


_DIGITS = re.compile(r"(\d+)")


def scan_tree(root: str, workers: int = 8, skip: set[str] | None = None,
              known: Optional[dict[str, tuple[int, list[str]]]] = None,
              stall_s: Optional[float] = None, follow: Optional[bool] = None,
              lister: Callable[..., Scanned] = list_folder) -> Iterator[Scanned]:
    """Yield every directory under ``root`` (root first), each exactly once.

    ``known`` maps folders of a previous walk to ``(mtime_ns, subfolders)``; a folder whose
    mtime still matches is not listed again (``Scanned.unchanged``).

    Folders are listed ``workers`` at a time but yielded in a fixed order, breadth first, siblings
    in :func:`natural_key` order: the same tree gives the same order on every run, and the lowest
    rank and step folders come first (a cold build reads them first, so its first partial results
    hold the place the explorer opens on).  A folder's children are only listed after the consumer
    has handled the folder itself, so a layout that consumed a subfolder on its own can add that
    subfolder's path to ``skip`` in time.

    A listing that makes no progress for ``stall_s`` seconds (a hung network mount) is given
    up: the folder becomes a problem and the walk goes on without waiting for its thread.

    ``follow``: follow symlinks that leave ``root`` (default: ``follow_links()``).  ``lister``: what lists
    one folder, called as :func:`list_folder` is (a caller may time or record the listings).
    """
    skip = skip if skip is not None else set()
    real_root = None if (follow_links() if follow is None else follow) else os.path.realpath(root)
    stall = STALL_S if stall_s is None else stall_s
    root = os.path.abspath(root)
    seen: set[tuple[int, int]] = set()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dumpscope-walk")
    try:
        started: dict[Future[Scanned], tuple[str, float]] = {}

        def submit(path: str, parts: tuple[str, ...]) -> Future[Scanned]:
            fut = pool.submit(lister, path, parts, known, real_root)
            started[fut] = (path, time.monotonic())
            return fut

        base = context_parts(root)
        order: deque[Future[Scanned]] = deque([submit(root, base)])
        # folders found, listed once the ones ahead are consumed: a listing the consumer has not taken
        # yet holds every file name (200 sibling step folders listed at once: a million names, ~120 MB)
        waiting: deque[tuple[str, tuple[str, ...]]] = deque()
        ahead = LISTINGS_AHEAD_PER_THREAD * workers
        while order or waiting:
            while waiting and len(order) < ahead:
                path, parts = waiting.popleft()
                if path not in skip:  # (a layout may have claimed it since its parent was listed)
                    order.append(submit(path, parts))
            if not order:
                continue
            head = order[0]
            done, _ = wait([head], timeout=min(stall, 1.0))
            if not done:
                now = time.monotonic()
                running = [f for f in order if f.running()]
                stuck = {f for f in running if now - started[f][1] > stall}
                if stuck and len(stuck) == len(running):  # no listing is making progress
                    for fut in stuck:
                        path = started[fut][0]
                        yield Scanned(path, base + (tuple(os.path.relpath(path, root).split(os.sep))
                                                    if path != root else ()),
                                      [], [], 0, Problem(path, f"listing stalled for over {stall:.0f} s "
                                                               "(network filesystem?): skipped"))
                    order = deque(f for f in order if f not in stuck)
                continue
            order.popleft()
            del started[head]
            res = head.result()
            if res.identity is not None:
                if res.identity in seen:
                    yield Scanned(res.dirpath, res.parts, [], [], 0,
                                  Problem(res.dirpath, "symlink loop: folder already visited, not followed again"))
                    continue
                seen.add(res.identity)
            yield res
            for sub in sorted(res.subdirs, key=natural_key):
                if os.path.join(res.dirpath, sub) in skip:
                    continue
                waiting.append((os.path.join(res.dirpath, sub), res.parts + (sub,)))
    finally:
        # never join a thread stuck in a hung syscall: it ends on its own or with the process
        pool.shutdown(wait=False, cancel_futures=True)


def listing_of(root: str, scanned: Scanned) -> DirListing:
    return DirListing(root=os.path.abspath(root), dirpath=scanned.dirpath, parts=scanned.parts,
                      files=list(scanned.files), subdirs=list(scanned.subdirs),
                      bad_names=list(scanned.bad_names or ()), outside_links=list(scanned.outside_links or ()))
