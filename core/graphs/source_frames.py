"""Source stacks: read one frame from a graph's source comment, and find the user's own frame.

MindSpore ``.ir`` files write a node's call stack as comment lines, outermost first, in the
styles the releases used (FORMATS.md §6):

* ``# In file net.py(34)/        a = self.sub(x, 1)/``                  (r1.x, line in parentheses)
* ``# In file net.py:15/    def construct(self, x):/``                  (r2.0–2.3, ``:line``)
* ``# inlined:In file net.py:55/    x = self.relu(x)/``                 (r2.0–2.2, frames after the first)
* ``# In file net.py:16~18, 12~25/        a = ops.sub(x, 1)/``          (r2.4+, ``:line[~end], col~col``)
* ``# net.py:16, 12~25/        a = ops.sub(x, 1)/``                     (the same location without ``In file``)

A frame is a dict ``{"file", "line", "code", "user"}``; ``user`` is True outside the
framework's own files (MindSpore, PyTorch, msprobe, anything installed in site-packages and
the Python standard library), so views can show the line the user wrote first.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional

_FRAME_RE = re.compile(
    r"^#?\s*(?:inlined\s*:\s*)?(?P<infile>In file\s+)?(?P<file>.+?)"
    r"(?:\((?P<paren>\d+)\)|:(?P<line>\d+)(?:~(?P<end>\d+))?(?:,\s*(?P<col>\d+)~(?P<colend>\d+))?)"
    r"(?:/(?P<code>.*))?$"
)
#: MindSpore appends this to a code text shared by several nodes
_SHARED_SUFFIX = "/<~~"
#: folder names that hold the framework's own sources (never the user's)
_FRAMEWORK_DIRS = frozenset({"mindspore", "torch", "msprobe", "site-packages", "dist-packages", "torch_npu",
                             "troubleshooter", "mindtorch", "tensorflow", "npu_bridge"})
_STDLIB_RE = re.compile(r"(?:^|/)lib(?:64)?/python\d+(?:\.\d+)*/")


def parse_frame(text: str) -> Optional[dict[str, Any]]:
    """One source comment line → a frame dict, or None when the line is not a location.

    The form without ``In file`` is accepted only for a path that looks like a source file,
    so other ``# key: value`` comments are never taken for frames.
    """
    m = _FRAME_RE.match(text.strip())
    if m is None:
        return None
    file = m.group("file").strip()
    if not file:
        return None
    if not m.group("infile") and not (file.endswith(".py") or "/" in file or "\\" in file):
        return None
    code = m.group("code") or ""
    cut = code.find(_SHARED_SUFFIX)
    if cut >= 0:
        code = code[:cut]
    elif code.endswith("/"):
        code = code[:-1]
    line = int(m.group("paren") or m.group("line") or 0)
    return {"file": file, "line": line, "code": code.strip(), "user": is_user_file(file)}


def is_user_file(path: str) -> bool:
    """False for the framework's own files (MindSpore, PyTorch, msprobe, site-packages, stdlib)."""
    norm = path.replace("\\", "/")
    if norm.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return False
    if _STDLIB_RE.search(norm.lower()):
        return False
    parts = [p for p in norm.split("/") if p]
    return not any(p in _FRAMEWORK_DIRS for p in parts[:-1])


def mark_frames(frames: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The frames with ``user`` set (a copy; frames already marked keep their mark)."""
    out = []
    for f in frames:
        g = dict(f)
        if "user" not in g:
            g["user"] = is_user_file(str(g.get("file", "")))
        out.append(g)
    return out


def first_user_frame(frames: Iterable[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The user's frame nearest the op, or None when every frame is the framework's.

    Frames are listed outermost first (``def construct`` … the call … framework internals),
    so this walks from the op outwards and stops at the first line the user wrote: the
    call that made the op (``a = self.act(self.stem(x))``), not the enclosing ``def``.
    """
    for f in reversed(list(frames)):
        user = f.get("user")
        if user is None:
            user = is_user_file(str(f.get("file", "")))
        if user:
            return dict(f, user=True)
    return None
