"""``FILE[:LINE]``: which source frames a user means when asking for the ops of a code line.

``net.py:55`` names the frames whose file ends with ``net.py`` — at a path separator, so it is
not ``mynet.py`` — and whose line is 55; without ``:LINE`` every line of that file matches.
``resnet/net.py:55`` narrows the file by more of its path.  A leading ``@`` (the explorer's
search syntax) is accepted.  Frames are ``show.source`` dicts (``{"file", "line", "code"}``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Optional

_SPEC = re.compile(r"^@?(?P<file>.+?)(?::(?P<line>\d+))?$")


class SourceSpecError(ValueError):
    """Not a ``FILE[:LINE]`` text; the message is one line."""


def _norm(path: str) -> str:
    return path.replace("\\", "/")


@dataclass(frozen=True, slots=True)
class SourceSpec:
    file: str  # a path suffix, ``/`` separators
    line: Optional[int] = None

    @classmethod
    def parse(cls, text: str) -> "SourceSpec":
        m = _SPEC.match(text.strip())
        if not m or not m.group("file").strip(" /") or m.group("file").startswith(":"):
            raise SourceSpecError(f"{text!r}: expected FILE[:LINE], e.g. net.py:55")
        return cls(_norm(m.group("file").strip()), int(m.group("line")) if m.group("line") else None)

    def __str__(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def matches_file(self, path: str) -> bool:
        path = _norm(path)
        if not path.endswith(self.file):
            return False
        cut = len(path) - len(self.file)
        return cut == 0 or path[cut - 1] == "/" or self.file.startswith("/")

    def matches(self, frame: Any) -> bool:
        """One frame (a ``{"file", "line"}`` dict) is this file and line."""
        if not isinstance(frame, dict):
            return False
        if self.line is not None:
            try:
                if int(frame.get("line", -1)) != self.line:
                    return False
            except (TypeError, ValueError):
                return False
        return self.matches_file(str(frame.get("file", "")))

    def in_stack(self, frames: Iterable[Any]) -> bool:
        return any(self.matches(f) for f in frames)

    @property
    def needle(self) -> str:
        """A text every matching frame's JSON holds (the file's base name): a cheap SQL prefilter."""
        return self.file.rsplit("/", 1)[-1]

