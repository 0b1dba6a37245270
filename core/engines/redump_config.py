"""The re-dump config: chosen op names in the shapes the dump tools read.

One JSON file holds the MindSpore ``common_dump_settings.kernels`` list, the CANN / TF adapter /
torchair ``dump_layer`` string, the ACL ``acl.json`` document (``cann.acl_json``: save it as the file
``aclmdlSetDump`` / ``acl.json`` reads) and the msprobe ``list``, so the user copies the part their
tool reads.  Written by ``compare --export-config`` (the diverging ops), ``ops --export-config`` (the
listed ops) and the explorer (the marked ops) — one writer, so the shape is the same everywhere.

Names are written as the graph writes them: GE matches ``dump_layer`` entries against the op
names of the built graph (``name`` of each ``op`` in ``ge_proto_*_Build.txt``), MindSpore matches
``kernels`` against full names with scope.  ``dump_layer`` is space-separated, so a name holding
whitespace cannot be written there; such names are returned as left out (they stay in the other
two lists).

``acl.json`` takes the names as a JSON list per model (``dump.dump_list: [{model_name, layer: [...]}]``,
CANN's "model dump" configuration), so whitespace is no problem there.  ``model_name`` is the model
folder of a CANN dump tree (``{time}/{device}/{model_name}/{model_id}/{step}``), given per name by a
caller that knows it; a name without one goes in an entry without ``model_name``, which ACL applies
to every model.  ``dump_mode`` is ``all`` (inputs and outputs: a re-dump is for the tensors around the
origin) and ``dump_data`` ``tensor``; ``dump_path`` (required by ACL) is ``dump``, a folder relative
to where the job runs: edit it to taste.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Mapping, Optional

from dumpscope.core.support.tree_paths import tree_holding


class RedumpConfigError(ValueError):
    """The config cannot be written where asked; the message is one line naming the path."""


def redump_config(names: Iterable[str], models: Optional[Mapping[str, str]] = None) -> tuple[dict, list[str]]:
    """The config document for ``names`` (first occurrence order kept) and the names left out of
    ``dump_layer``; ``models``: the CANN model each name was dumped under, where known."""
    unique = list(dict.fromkeys(n for n in names if n))
    layer = [n for n in unique if not any(c.isspace() for c in n)]
    config = {
        "mindspore": {"common_dump_settings": {"dump_mode": 1, "kernels": unique}},
        "cann": {"dump_layer": " ".join(layer), "acl_json": acl_json(unique, models or {})},
        "msprobe": {"list": unique},
    }
    return config, [n for n in unique if n not in set(layer)]


def acl_json(names: list[str], models: Mapping[str, str]) -> dict:
    """The ``acl.json`` model-dump document for ``names``: one ``dump_list`` entry per model (in the
    order its first name comes), names of no known model in one entry without ``model_name``."""
    entries: dict[str, list[str]] = {}
    for n in names:
        entries.setdefault(models.get(n) or "", []).append(n)
    dump_list = [({"model_name": m} if m else {}) | {"layer": layer} for m, layer in entries.items()]
    return {"dump": {"dump_list": dump_list, "dump_path": "dump", "dump_mode": "all", "dump_data": "tensor"}}


def write_redump_config(names: Iterable[str], path: str, dump_roots: Iterable[str] = (),
                        models: Optional[Mapping[str, str]] = None) -> list[str]:
    """Write the config for ``names`` to ``path``; returns the names left out of ``dump_layer``.

    Refuses (RedumpConfigError) a path inside any of ``dump_roots``: nothing is ever written
    inside a dump tree.
    """
    target = os.path.expanduser(path)
    root = tree_holding(target, dump_roots)
    if root is not None:
        raise RedumpConfigError(f"{path}: inside the dump tree {root}; dumpscope never writes there, "
                                "choose a path outside it")
    config, left_out = redump_config(names, models)
    try:
        from dumpscope.core.support.atomic_write import replaced_file

        with replaced_file(target, "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
    except OSError as exc:
        raise RedumpConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return left_out
