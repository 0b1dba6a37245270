"""Op-name spelling shared by every layer, kept import-free so start-up stays fast."""

from __future__ import annotations

_SANITIZE = str.maketrans({"/": "_", ".": "_", "\\": "_", " ": "_"})


def sanitize_name(name: str) -> str:
    """Spell an op or graph name the way CANN and MindSpore name dump files (``/ . \\ space`` → ``_``).

    The transform is lossy, so names are matched by applying it to both sides.  Names that are
    already file-side spellings (most of the ones asked) are returned as they are, without a copy.
    """
    if "/" in name or "." in name or " " in name or "\\" in name:
        return name.translate(_SANITIZE)
    return name
