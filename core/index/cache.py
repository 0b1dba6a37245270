"""Where dumpscope keeps its index files: never inside the dump tree.

``$DUMPSCOPE_CACHE_DIR`` wins, then ``$XDG_CACHE_HOME/dumpscope``, then ``~/.cache/dumpscope``.
"""

from __future__ import annotations

import os
from pathlib import Path

try:  # CPython's own SHA-1: the same digests as hashlib's, without loading OpenSSL (~2.5 ms of every command)
    from _sha1 import sha1
except ImportError:  # another interpreter
    from hashlib import sha1


def cache_dir() -> Path:
    env = os.environ.get("DUMPSCOPE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "dumpscope"


def index_path(root: str, directory: Path | None = None) -> Path:
    """The index file of one dump tree, named after a hash of its absolute path (and of
    ``--follow-links``: a tree read through its outside links is another index)."""
    from dumpscope.core.layouts.walk import follow_links

    root = os.path.realpath(root)
    key = root + ("\0follow-links" if follow_links() else "")
    digest = sha1(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = os.path.basename(root.rstrip(os.sep)) or "root"
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40]
    return (directory or cache_dir()) / f"{safe}-{digest}.sqlite"
