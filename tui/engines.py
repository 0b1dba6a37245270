"""Guarded access to the analysis engines (overflow, watch, compare).

The views must not crash when an engine module is missing in a partial install or during
development: each getter returns the function, or raises ``EngineMissing`` with a message
the view shows as is.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable


class EngineMissing(RuntimeError):
    """An engine module or function is not available."""


def _engine(module: str, func: str) -> Callable[..., Any]:
    try:
        mod = importlib.import_module(f"dumpscope.core.{module}")
    except ImportError as exc:
        raise EngineMissing(f"{module} engine not available (dumpscope.core.{module}: {exc})") from None
    fn = getattr(mod, func, None)
    if fn is None:
        raise EngineMissing(f"{module} engine not available (no {func} in dumpscope.core.{module})")
    return fn


def find_overflow() -> Callable[..., list[dict[str, Any]]]:
    return _engine("engines.overflow.lookup", "find_overflow")


def overflow_report() -> Callable[..., dict[str, Any]]:
    return _engine("engines.overflow.lookup", "overflow_report")


def watch_report() -> Callable[..., dict[str, Any]]:
    return _engine("engines.watch.report", "watch_report")


def compare_dumps() -> Callable[..., dict[str, Any]]:
    return _engine("engines.compare", "compare_dumps")
