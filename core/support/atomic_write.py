"""Output files written whole or not at all, and never through a link.

``open(path, "w")`` on an output path that is a hard link to a dump file writes into the dump file
(a realpath check cannot see a hard link: both names are the file), and a ctrl-C half-way leaves a
partial file.  Every output (``compare --output``, ``--export-config``, ``convert``'s ``.npy`` and
``mapping.csv``, the explorer's exports) is written to a temporary file in the destination's folder
and renamed onto the name at the end: the rename replaces the directory entry, so a hard-linked
(or symlinked) dump file keeps its bytes, and an interrupt or an error removes the temporary file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import contextmanager
from typing import IO, Any, Iterator


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: new files get the mode ``open(path, "w")`` would have given them
_MODE = 0o666 & ~_umask()


@contextmanager
def replacing(path: str) -> Iterator[str]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path``, on any
    exception (ctrl-C included) it is removed and the exception goes on."""
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)[:64]
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".part", dir=folder)
    os.close(fd)
    try:
        yield tmp
        try:
            old = os.stat(path)
            mode = stat.S_IMODE(old.st_mode) if stat.S_ISREG(old.st_mode) else _MODE
        except OSError:
            mode = _MODE
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextmanager
def replaced_file(path: str, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """``open(path, mode)`` for writing, through :func:`replacing`."""
    with replacing(path) as tmp:
        with open(tmp, mode, **kwargs) as fh:
            yield fh
