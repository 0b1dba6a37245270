"""User key remapping: ``$XDG_CONFIG_HOME/dumpscope/keys.toml`` (or ``keys.json``).

Every binding of the explorer has an id (shown in the help screen).  The file maps ids to
comma-separated keys and is handed to Textual's ``App.set_keymap``::

    # ~/.config/dumpscope/keys.toml
    [keys]
    "dumpscope.search" = "slash,ctrl+f"
    "dumpscope.overflow" = "O"
    "list.down" = "down,j,ctrl+n"

A top-level table without ``[keys]`` works too; ``keys.json`` is ``{"keys": {...}}`` or a flat
object.  A broken file is reported, never fatal.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "dumpscope"


def keymap_file() -> Optional[Path]:
    for name in ("keys.toml", "keys.json"):
        path = config_dir() / name
        if path.is_file():
            return path
    return None


def load_keymap(path: Optional[Path] = None) -> tuple[dict[str, str], Optional[str]]:
    """``(keymap, error)``: the id → keys mapping, and a one-line error when the file is bad."""
    path = path or keymap_file()
    if path is None:
        return {}, None
    try:
        raw = path.read_bytes()
        if path.suffix == ".toml":
            try:
                import tomllib
            except ImportError:  # Python 3.10: the same parser, installed as tomli
                import tomli as tomllib  # type: ignore[no-redef]
            doc = tomllib.loads(raw.decode("utf-8"))
        else:
            doc = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError) as exc:
        return {}, f"{path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    if isinstance(doc, dict) and isinstance(doc.get("keys"), dict):
        doc = doc["keys"]
    if not isinstance(doc, dict):
        return {}, f"{path}: expected a table of binding id = keys"
    keymap: dict[str, str] = {}
    bad: list[str] = []
    for k, v in doc.items():
        if isinstance(v, list):
            v = ",".join(str(x) for x in v)
        if isinstance(k, str) and isinstance(v, str) and v.strip():
            keymap[k] = v
        else:
            bad.append(str(k))
    return keymap, (f"{path}: ignored entries {', '.join(bad)}" if bad else None)
