"""The ``--json`` document as text: exactly what ``json.dumps(doc, indent=1, ensure_ascii=False)`` prints
with NaN/Inf spelled as strings, in a third of the time.

With ``indent`` the standard library encodes in Python generators, one per nested value; a compare of
two 20,000-file trees prints 40,000 rows (58 MB) and spent seconds there.  This writer appends to one
list, with the C string encoder for strings and ``float.__repr__`` for numbers, and applies the CLI's
cleaning on the way (NaN/±Inf as the strings "nan"/"inf"/"-inf", numpy scalars as Python numbers,
tuples as lists) — the same text, byte for byte, and the same ``TypeError`` for an object JSON cannot
hold.
"""

from __future__ import annotations

import json.encoder
import math
from typing import Any, Callable

_encode_str: Callable[[str], str] = json.encoder.encode_basestring  # the C one when available
_float_repr = float.__repr__
_int_repr = int.__repr__
_INF = float("inf")


def dumps(doc: Any) -> str:
    """``json.dumps(clean(doc), indent=1, ensure_ascii=False)``, faster (see the module docstring)."""
    out: list[str] = []
    _value(doc, out, "\n")
    return "".join(out)


#: pieces gathered before ``dump`` hands them on: a few MB of text, whatever the document's size
_FLUSH_PIECES = 1 << 16


class _Flushing(list):
    """The piece list of ``dump``: a list items are appended to, emptied into ``write`` between the
    items of a list (the rows of a compare) once it holds ``_FLUSH_PIECES``."""

    __slots__ = ("write",)

    def flush(self) -> None:
        if self:
            self.write("".join(self))
            self.clear()


def dump(doc: Any, write: Callable[[str], Any]) -> None:
    """The text of ``dumps(doc)`` handed to ``write`` in parts: a 58 MB compare document never sits in
    memory whole (nor the millions of small pieces it is joined from)."""
    out = _Flushing()
    out.write = write
    _value(doc, out, "\n")
    out.flush()


def _value(v: Any, out: list[str], nl: str) -> None:
    leaf = _leaf(v)
    if leaf is not None:
        out.append(leaf)
    elif isinstance(v, dict):
        _dict(v, out, nl)
    elif isinstance(v, (list, tuple)) or _is_rows(v):  # rows read back from a spool: a list too
        _list(v, out, nl)
    elif hasattr(v, "item") and not isinstance(v, bytes):  # numpy scalars (an array: its text)
        try:
            item = v.item()
        except Exception:
            item = str(v)
        _value(item, out, nl)
    else:
        raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


def _is_rows(v: Any) -> bool:
    from dumpscope.core.support.row_spool import is_rows

    return is_rows(v)


def _leaf(v: Any) -> Any:
    """The text of a string, number, bool or None (the CLI's cleaning applied), else None."""
    t = type(v)
    if t is str:
        return _encode_str(v)
    if t is float:
        return _float_repr(v) if v - v == 0.0 else _nonfinite(v)
    if t is int:
        return _int_repr(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return _encode_str(v)
    if isinstance(v, float):  # before int: the CLI cleans floats (numpy float64 included) first
        return _float_repr(v) if math.isfinite(v) else _nonfinite(v)
    if isinstance(v, int):
        return _int_repr(v)
    return None


def _nonfinite(v: float) -> str:
    return '"nan"' if v != v else ('"inf"' if v > 0 else '"-inf"')


#: ``",\n<indent>\"key\": "`` per indentation and string key: a row's keys repeat 40,000 times
_PREFIXES: dict[str, dict[str, str]] = {}


def _dict(d: dict, out: list[str], nl: str) -> None:
    if not d:
        out.append("{}")
        return
    inner = nl + " "
    prefixes = _PREFIXES.get(inner)
    if prefixes is None:
        prefixes = _PREFIXES[inner] = {}
    append = out.append
    first = True
    for k, v in d.items():
        if type(k) is str:
            prefix = prefixes.get(k)
            if prefix is None:
                prefix = "," + inner + _encode_str(k) + ": "
                if len(prefixes) < 4096:
                    prefixes[k] = prefix
        else:
            prefix = "," + inner + _encode_str(_key_text(k)) + ": "
        if first:
            prefix = "{" + prefix[1:]
            first = False
        t = type(v)
        if t is str:
            append(prefix + _encode_str(v))
        elif t is float and v - v == 0.0:
            append(prefix + _float_repr(v))
        elif t is int:
            append(prefix + _int_repr(v))
        elif v is None:
            append(prefix + "null")
        else:
            append(prefix)
            _value(v, out, inner)
    append(nl + "}")


def _list(items: Any, out: list[str], nl: str) -> None:
    if not items:
        out.append("[]")
        return
    inner = nl + " "
    sep = "[" + inner
    append = out.append
    flushing = type(out) is _Flushing
    for v in items:
        append(sep)
        sep = "," + inner
        t = type(v)
        if t is int:
            append(_int_repr(v))
        elif t is str:
            append(_encode_str(v))
        else:
            _value(v, out, inner)
            if flushing and len(out) >= _FLUSH_PIECES:
                out.flush()  # type: ignore[attr-defined]
    append(nl + "]")


def _key_text(k: Any) -> str:
    return k if isinstance(k, str) else _key(k)


def _key(k: Any) -> str:
    """A non-string key as ``json`` spells it (keys are not cleaned: NaN stays NaN)."""
    if isinstance(k, float):
        if k != k:
            return "NaN"
        if k == _INF:
            return "Infinity"
        if k == -_INF:
            return "-Infinity"
        return _float_repr(k)
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, int):
        return _int_repr(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")
