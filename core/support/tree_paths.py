"""The one rule behind "nothing is ever written inside a dump tree": whether a path lies at or under a
tree, links resolved.  Every writer (index cache, export, convert, re-dump config, screenshots) and the
walk's link check ask it here, so none can spell it differently."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional


def is_under(real: str, real_root: str) -> bool:
    """Whether the resolved path ``real`` is ``real_root`` or lies below it (both already
    ``os.path.realpath``-ed: the walk resolves its root once, not per entry)."""
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def inside_tree(path: Path | str, root: Path | str) -> bool:
    """Whether ``path`` (existing or not) lies at or under the tree ``root``, links resolved: a cache
    folder, an export or an OUTDIR there (``--cache-dir PATH/.cache``, ``$HOME`` inside the tree in a
    container, a link pointing into it) would write inside the dump tree."""
    return is_under(os.path.realpath(path), os.path.realpath(root))


def tree_holding(path: Path | str, roots: Iterable[str]) -> Optional[str]:
    """The first of ``roots`` (empty ones skipped) that ``path`` lies inside, else None."""
    return next((root for root in roots if root and inside_tree(path, root)), None)
