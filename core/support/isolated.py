"""Command lines that run one of dumpscope's modules in a fresh Python that imports only dumpscope.

``python -m dumpscope…`` puts the current folder first on the import path: started from inside a
dump tree (or beside a clone named ``dumpscope/``), a folder ``dumpscope/`` there would be
imported instead of the installed package, and its ``__init__.py`` run.  The children the explorer
and ``serve`` start run in isolated mode (``-I``: no current folder, no script folder, no
``PYTHON*`` variables, no user site) with the import path of this process handed over explicitly,
less the entries that stand for the current folder.  That path is where this process found
dumpscope and its dependencies (a ``--user`` install, ``PYTHONPATH``, a virtual environment), so
the child imports the same code, and nothing else, on every platform Python runs on.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional

# Run by the child as ``python -I -c BOOT PATHS MODULE ARGS...``: the import path, the site folders
# whose ``.pth`` files (editable installs) isolated mode skipped, then the module as ``-m`` would.
_BOOT = (
    "import sys, json, site, runpy\n"
    "paths, sites = json.loads(sys.argv[1])\n"
    "sys.path[:] = paths\n"
    "for d in sites: site.addsitedir(d)\n"
    "mod = sys.argv[2]\n"
    "del sys.argv[1:3]\n"
    "runpy.run_module(mod, run_name='__main__', alter_sys=True)\n"
)


def _same_dir(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def import_path(cwd: Optional[str] = None) -> tuple[list[str], list[str]]:
    """``(sys.path, site folders)`` for a child: this process's import path less ``''`` and the
    current folder — unless that folder is where this very process imported dumpscope from (a
    checkout run in place: the child must find the same code, and it is no stranger's code)."""
    cwd = os.getcwd() if cwd is None else cwd
    import dumpscope

    ours = {os.path.dirname(os.path.abspath(p)) for p in getattr(dumpscope, "__path__", [])}
    paths: list[str] = []
    for entry in sys.path:
        if entry in ("", "."):
            continue
        if _same_dir(entry, cwd) and not any(_same_dir(entry, o) for o in ours):
            continue
        if entry not in paths:
            paths.append(os.path.abspath(entry))
    sites: list[str] = []
    try:
        import site

        if site.ENABLE_USER_SITE:
            user = site.getusersitepackages()
            if user in sys.path:  # isolated mode skips it, and with it its .pth files
                sites.append(user)
    except Exception:  # pragma: no cover (a Python without a usable site module)
        pass
    return paths, sites


def module_command(module: str, cwd: Optional[str] = None) -> list[str]:
    """``[python, -I, -c, BOOT, PATHS, module]``: append the module's arguments."""
    paths, sites = import_path(cwd)
    # isolated mode ignores PYTHONUTF8: keep this process's UTF-8 mode, or file names would decode
    # differently in the child than here
    utf8 = ["-X", "utf8"] if sys.flags.utf8_mode else []
    return [sys.executable, "-I", *utf8, "-c", _BOOT, json.dumps([paths, sites]), module]
