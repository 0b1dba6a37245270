"""Python call stacks as msprobe and Troubleshooter write them, turned into ``show.source`` frames.

Both tools store ``traceback``-style lines, innermost call first::

    "File /path/net.py, line 17, in forward, \\n x = torch.relu(self.bn(self.conv(x)))"

A frame is ``{"file", "line", "code", "func", "user"}`` (the contract's ``source`` keys plus the
function and whether the file is the user's own rather than the framework's).  A line that
does not have this shape is kept whole as ``code`` with ``line`` 0, so nothing is dropped.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from dumpscope.core.graphs.source_frames import is_user_file

_LINE_RE = re.compile(r"^\s*File\s+\"?(?P<file>.+?)\"?,\s*line\s+(?P<line>\d+)(?:,\s*in\s+(?P<func>.*?))?"
                      r"\s*(?:,\s*\n|,?\s*$|\n)(?P<code>.*)$", re.S)


def parse_stack_line(text: Any) -> dict[str, Any]:
    """One stack line → a frame (unparsable lines keep their text as ``code``)."""
    s = str(text)
    m = _LINE_RE.match(s)
    if not m:
        return {"file": "", "line": 0, "code": s.strip(), "func": "", "user": False}
    file = m.group("file").strip()
    return {"file": file, "line": int(m.group("line")), "code": m.group("code").strip(),
            "func": (m.group("func") or "").strip(), "user": is_user_file(file)}


def frames_from_stack(lines: Iterable[Any]) -> list[dict[str, Any]]:
    """Stack lines (innermost first, as the tools write them) → frames in the same order."""
    return [parse_stack_line(line) for line in lines]


def source_from_stack(lines: Iterable[Any]) -> list[dict[str, Any]]:
    """Stack lines → ``show.source`` frames, outermost first like every other ``source`` (MindSpore
    ``.ir`` frames), so ``source_frames.first_user_frame`` finds the user's line nearest the call."""
    return list(reversed(frames_from_stack(lines)))
