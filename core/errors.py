"""One-line problem reasons (every bad file is reported as ``path: reason`` on one line), and the
exceptions every stage shares."""

from __future__ import annotations

import os


def reason(exc: BaseException | str, path: str = "") -> str:
    """The first line of an error, without a leading ``path: `` (``Problem`` names the file itself)."""
    text = str(exc).strip()
    text = text.splitlines()[0] if text else type(exc).__name__
    if path:
        for prefix in (path + ": ", os.path.basename(path) + ": "):
            if text.startswith(prefix):
                return text[len(prefix):]
    return text


class IndexCancelled(Exception):
    """Raised inside a build, a lock wait or a child job when the caller's cancel event is set.

    Here, below every stage, because the lock, the fault handling, the index and the child jobs all
    raise or catch it."""
