"""The contract between the directory walker and the producer layouts.

The walker lists every directory of a tree exactly once (``core.walk``); each layout looks
at one directory listing at a time and yields the records it understands, claiming the
file names it used so that later layouts and the "skipped" report do not see them again.
Layouts read names and at most file headers, never tensor payloads.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Union

from dumpscope.core.model import (
    ExecOrder,
    GraphFile,
    OverflowEvidence,
    Problem,
    TensorRecord,
)
from dumpscope.core.units import UnitRecord

#: what a layout yields; a ``UnitRecord`` is a whole dump file's tensors already packed
Item = Union[TensorRecord, UnitRecord, ExecOrder, GraphFile, Problem, OverflowEvidence]


@dataclass(slots=True)
class DirListing:
    """One directory of the tree: where it is and what it holds.

    ``parts`` are the path components from the user's root down to this directory, so a
    layout can read ranks, steps and graph ids off the path without touching the disk.
    """

    root: str
    dirpath: str
    parts: tuple[str, ...]
    files: list[str]
    subdirs: list[str]
    claimed: set[str] = field(default_factory=set)
    skip_subdirs: set[str] = field(default_factory=set)
    #: entries left out of ``files``/``subdirs`` because their names are not valid UTF-8
    #: (printable spelling); the ``file_names`` layout reports them as problems
    bad_names: list[str] = field(default_factory=list)
    #: symlinks left out because their targets lie outside PATH (``--follow-links`` follows them)
    outside_links: list[str] = field(default_factory=list)

    def path(self, name: str) -> str:
        return os.path.join(self.dirpath, name)

    def unclaimed(self) -> Iterator[str]:
        for name in self.files:
            if name not in self.claimed:
                yield name


class Layout:
    """A producer's layout: how its files are named and where ranks/steps/graphs live."""

    name: str = ""
    #: human description shown by ``summary``
    title: str = ""

    def scan_dir(self, listing: DirListing) -> Iterable[Item]:
        """Yield the items of this directory that this layout understands.

        Implementations add the names they consumed to ``listing.claimed``.
        """
        raise NotImplementedError


_RANK_RES = (
    re.compile(r"^rank_?(\d+)$"),
    re.compile(r"^worldsize\d+_global_rank(\d+)$"),
    re.compile(r"^device_(\d+)$"),
)


def rank_from_parts(parts: tuple[str, ...], default: int = 0) -> int:
    """Read the rank from the deepest ``rank_N``/``rankN``/``worldsize…_global_rankN`` folder."""
    for part in reversed(parts):
        for rx in _RANK_RES:
            m = rx.match(part)
            if m:
                return int(m.group(1))
    return default


def as_int(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None
