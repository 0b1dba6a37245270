"""Data files that changed in place after they were indexed (a copy cut short, a file rewritten).

A folder whose mtime and entry count are unchanged is not read again (that keeps a warm reopen
cheap), but a file truncated or shrunk in place does not touch its folder.  ``truncated_files``
compares each indexed data file's size with the end of its last tensor, so ``summary`` and the
problems view never report "none" for a file that can no longer be read.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from dumpscope.core.index import DumpIndex

#: storages whose tensors sit at (offset, nbytes) inside the file the unit names
_STORAGES = ("cann", "npy", "raw")


def truncated_files(index: "DumpIndex") -> list[tuple[str, str]]:
    """``(path, error)`` for every indexed data file now shorter than its tensors need (or gone)."""
    where = f"WHERE u.storage IN ({','.join('?' * len(_STORAGES))})"
    try:
        rows = index.query(
            "SELECT u.path, MAX(CAST(json_extract(t.value, '$[7]') AS INTEGER) + "
            "CAST(json_extract(t.value, '$[8]') AS INTEGER)) FROM units u, json_each(u.tensors) t "
            f"{where} GROUP BY u.path", _STORAGES)
    except sqlite3.OperationalError:  # SQLite's JSON refuses the NaN statistics of some dumps
        ends: dict[str, int] = {}
        for path, tensors in index.query(f"SELECT u.path, u.tensors FROM units u {where}", _STORAGES):
            end = max((int(t[7]) + int(t[8]) for t in json.loads(tensors)), default=None)
            if end is not None:
                ends[path] = max(end, ends.get(path, end))
        rows = list(ends.items())
    out: list[tuple[str, str]] = []
    for path, end in rows:
        if end is None:
            continue
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            out.append((path, "file removed after it was indexed"))
            continue
        except OSError as exc:
            out.append((path, f"cannot stat: {exc.strerror or exc}"))
            continue
        if size < end:
            out.append((path, f"truncated after it was indexed: {size} bytes, its tensors end at byte {end}"))
    return out
