"""The re-dump config: chosen op names in the shapes the dump tools read.

One JSON file holds the MindSpore ``common_dump_settings.kernels`` list, the CANN / TF adapter /
torchair ``dump_layer`` string and the msprobe ``list``, so the user copies the part their tool
reads.  Written by ``compare --export-config`` (the diverging ops), ``ops --export-config`` (the
listed ops) and the explorer (the marked ops) — one writer, so the shape is the same everywhere.

Names are written as the graph writes them: GE matches ``dump_layer`` entries against the op
names of the built graph (``name`` of each ``op`` in ``ge_proto_*_Build.txt``), MindSpore matches
``kernels`` against full names with scope.  ``dump_layer`` is space-separated, so a name holding
whitespace cannot be written there; such names are returned as left out (they stay in the other
two lists).
"""

from __future__ import annotations

import json
import os
from typing import Iterable

from dumpscope.core.support.tree_paths import tree_holding


class RedumpConfigError(ValueError):
    """The config cannot be written where asked; the message is one line naming the path."""


def redump_config(names: Iterable[str]) -> tuple[dict, list[str]]:
    """The config document for ``names`` (first occurrence order kept) and the names left out of
    ``dump_layer``."""
    unique = list(dict.fromkeys(n for n in names if n))
    layer = [n for n in unique if not any(c.isspace() for c in n)]
    config = {
        "mindspore": {"common_dump_settings": {"dump_mode": 1, "kernels": unique}},
        "cann": {"dump_layer": " ".join(layer)},
        "msprobe": {"list": unique},
    }
    return config, [n for n in unique if n not in set(layer)]


def write_redump_config(names: Iterable[str], path: str, dump_roots: Iterable[str] = ()) -> list[str]:
    """Write the config for ``names`` to ``path``; returns the names left out of ``dump_layer``.

    Refuses (RedumpConfigError) a path inside any of ``dump_roots``: nothing is ever written
    inside a dump tree.
    """
    target = os.path.expanduser(path)
    root = tree_holding(target, dump_roots)
    if root is not None:
        raise RedumpConfigError(f"{path}: inside the dump tree {root}; dumpscope never writes there, "
                                "choose a path outside it")
    config, left_out = redump_config(names)
    try:
        from dumpscope.core.support.atomic_write import replaced_file

        with replaced_file(target, "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
    except OSError as exc:
        raise RedumpConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return left_out
