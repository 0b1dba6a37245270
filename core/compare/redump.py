"""Dump configs that re-dump only the ops a compare flagged."""

from __future__ import annotations

import json
import os
from typing import Any


def export_redump_config(doc: dict[str, Any], path: str) -> str:
    """Write the ops worth re-dumping (error rows, first divergence first) as dump configs.

    One JSON file holding the MindSpore ``kernels`` list, the CANN/torchair ``dump_layer``
    string and the msprobe ``list``, so the user copies the part their tool reads.
    """
    names: list[str] = []
    fd = doc.get("first_divergence")
    if fd:
        names.append(fd["name"])
    for r in doc.get("rows", []):
        if r.get("verdict") == "error" and r["name"] not in names:
            names.append(r["name"])
    config = {
        "mindspore": {"common_dump_settings": {"dump_mode": 1, "kernels": names}},
        "cann": {"dump_layer": " ".join(n.replace("/", "_") for n in names)},
        "msprobe": {"list": names},
    }
    with open(os.path.expanduser(path), "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=1)
    return path
