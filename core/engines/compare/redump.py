"""Dump configs that re-dump only the ops a compare flagged (written by ``core.redump_config``,
the one writer shared with ``ops --export-config`` and the explorer's marked ops)."""

from __future__ import annotations

from typing import Any


def export_redump_config(doc: dict[str, Any], path: str) -> str:
    """Write the ops worth re-dumping (error rows, first divergence first) as dump configs:
    the MindSpore ``kernels`` list, the CANN/torchair ``dump_layer`` string and the msprobe
    ``list`` in one JSON file; never inside either compared dump tree."""
    from dumpscope.core.engines.redump_config import write_redump_config

    names: list[str] = []
    fd = doc.get("first_divergence")
    if fd:
        names.append(fd["name"])
    for r in doc.get("rows", []):
        if r.get("verdict") == "error" and r["name"] not in names:
            names.append(r["name"])
    roots = [(doc.get(side) or {}).get("path", "") for side in ("golden", "target")]
    write_redump_config(names, path, roots)
    return path
