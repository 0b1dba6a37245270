"""Op-name spelling shared by every layer, kept import-free so start-up stays fast."""

from __future__ import annotations

import re
from typing import Iterable, Optional

_SANITIZE = str.maketrans({"/": "_", ".": "_", "\\": "_", " ": "_"})


def sanitize_name(name: str) -> str:
    """Spell an op or graph name the way CANN and MindSpore name dump files (``/ . \\ space`` → ``_``).

    The transform is lossy, so names are matched by applying it to both sides.  Names that are
    already file-side spellings (most of the ones asked) are returned as they are, without a copy.
    """
    if "/" in name or "." in name or " " in name or "\\" in name:
        return name.translate(_SANITIZE)
    return name


#: MindSpore's per-graph op counter, the ``-op12`` that ends a kernel's name (``Conv2D-op12``): graphs and
#: dump files number ops differently, so names are matched with and without it, and a name's type is what
#: precedes it.  One pattern for every layer (it was written five times).
OP_COUNTER = re.compile(r"-op(\d+)$")


#: the op-name field of a Dump-Watch snapshot is ``{L}_To_{W}`` (FORMATS.md §8.2); the index splits it
WATCH_SEP = "_To_"


def split_watch_name(file_op_name: str, known_names: Iterable[str]) -> Optional[tuple[str, str]]:
    """Split a snapshot's op-name field ``{L}_To_{W}`` into ``(layer, watched)``, else ``None``.

    ``known_names`` are the op names of the tree (a ``set``/``frozenset`` is used as-is and
    must already be sanitised — pass one when calling per file; any other iterable is
    sanitised here).  Because scoped names may contain ``_To_`` themselves, every ``_To_``
    is tried as the separator:

    * a split where both sides are known names wins (longest watched name if several);
    * otherwise, if ``file_op_name`` is itself a known name, it is an ordinary dump: ``None``;
    * otherwise a split whose watched side is known is accepted (the layer op may not have
      been dumped itself), longest known watched name first;
    * no known watched side: ``None`` (W's own dump always exists in watcher mode).
    """
    if isinstance(known_names, (set, frozenset)):
        known = known_names
    else:
        known = {sanitize_name(n) for n in known_names}
    both: list[tuple[str, str]] = []
    watched_only: list[tuple[str, str]] = []
    i = file_op_name.find(WATCH_SEP)
    while i >= 0:
        layer, watched = file_op_name[:i], file_op_name[i + len(WATCH_SEP):]
        if layer and watched in known:
            (both if layer in known else watched_only).append((layer, watched))
        i = file_op_name.find(WATCH_SEP, i + 1)
    if both:
        return max(both, key=lambda p: len(p[1]))
    if file_op_name in known:
        return None
    if watched_only:
        return max(watched_only, key=lambda p: len(p[1]))
    return None
