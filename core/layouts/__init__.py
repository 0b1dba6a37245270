"""Producer layouts, in the order they get to claim a folder's files.

API-level layouts go first because they consume whole subfolders (``dump_tensor_data``,
``*_api_dump``); the MindSpore npy/bin names come before the generic CANN binary names.
"""

from __future__ import annotations

import importlib

from dumpscope.core.layouts.base import DirListing, Item, Layout

_LAYOUTS = (
    ("dumpscope.core.layouts.msprobe", "MsprobeLayout"),
    ("dumpscope.core.layouts.troubleshooter", "TroubleshooterLayout"),
    ("dumpscope.core.layouts.mindspore", "MindSporeLayout"),
    ("dumpscope.core.layouts.stats_tree", "StatsCsvLayout"),
    ("dumpscope.core.layouts.cann", "CannLayout"),
    ("dumpscope.core.layouts.graphfiles", "GraphFilesLayout"),
    ("dumpscope.core.layouts.torch_h5", "TorchH5Layout"),
    ("dumpscope.core.layouts.names", "BadNamesLayout"),
)


def all_layouts() -> list[Layout]:
    """One fresh instance of every layout, in claiming order."""
    out: list[Layout] = []
    for module, cls in _LAYOUTS:
        out.append(getattr(importlib.import_module(module), cls)())
    return out


__all__ = ["DirListing", "Item", "Layout", "all_layouts"]
