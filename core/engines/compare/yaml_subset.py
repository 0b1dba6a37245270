"""YAML mapping files: PyYAML's safe loader when it is importable, else the small subset msprobe's
mapping files use.

PyYAML is on every msprobe host (msprobe depends on it) and reads what people write: anchors and
aliases, merge keys, multi-line strings, flow mappings.  It is an optional extra here (``yaml``), so
without it ``subset_loads`` reads nested block mappings (``key: value`` / ``key:`` + indented
block), block sequences (``- item``, ``- key: value`` starting a mapping), flow lists of scalars
(``[0, 1, 2]``), scalars (integers, floats, true/false/null, single- or double-quoted strings) and
``#`` comments.  Either way anything unreadable raises ``YamlSubsetError`` naming the line, so a
mapping file is never half-read; PyYAML only ever builds plain data (``safe_load``: no tags that
construct objects).
"""

from __future__ import annotations

import re
from typing import Any

MAX_LINES = 100_000


class YamlSubsetError(ValueError):
    """A mapping file line outside the supported subset."""


def _strip_comment(line: str) -> str:
    out, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            break
        out.append(ch)
    return "".join(out).rstrip()


def scalar(text: str) -> Any:
    s = text.strip()
    if not s:
        return None
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    if s.startswith("[") and s.endswith("]"):
        inner = s[1:-1].strip()
        return [scalar(p) for p in _split_flow(inner)] if inner else []
    if s.startswith(("{", "&", "*", "!", "|", ">")):
        raise YamlSubsetError(f"unsupported YAML value {s[:40]!r}")
    low = s.lower()
    if low in ("null", "~"):
        return None
    if low in ("true", "false"):
        return low == "true"
    if re.fullmatch(r"[-+]?\d+", s):
        return int(s)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", s):
        return float(s)
    return s


def _scalar_at(text: str, lineno: int) -> Any:
    try:
        return scalar(text)
    except YamlSubsetError as exc:
        raise YamlSubsetError(f"line {lineno}: {exc}") from None


def _split_flow(inner: str) -> list[str]:
    parts, cur, quote = [], [], None
    for ch in inner:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            cur.append(ch)
        elif ch == ",":
            parts.append("".join(cur))
            cur = []
        elif ch in "[]{}":
            raise YamlSubsetError("nested flow collections are not supported")
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _key_value(text: str, lineno: int) -> tuple[str, str]:
    m = re.match(r"""^("[^"]*"|'[^']*'|[^:#]+?)\s*:(?:\s+(.*)|\s*$)""", text)
    if not m:
        raise YamlSubsetError(f"line {lineno}: expected 'key: value', got {text[:60]!r}")
    key = m.group(1)
    if key[0] in "\"'":
        key = key[1:-1]
    return key.strip(), (m.group(2) or "").strip()


def _pyyaml() -> Any:
    """The ``yaml`` module, or None when PyYAML is not installed."""
    try:
        import yaml
    except ImportError:
        return None
    return yaml


def loads(text: str) -> Any:
    """Parse a mapping file's ``text`` with PyYAML when importable, else with ``subset_loads``;
    raises ``YamlSubsetError`` (with the line number) on a syntax error or an unsupported construct."""
    yaml = _pyyaml()
    if yaml is None:
        return subset_loads(text)
    if text.count("\n") >= MAX_LINES:
        raise YamlSubsetError(f"more than {MAX_LINES} lines")
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader: plain data only
    except yaml.YAMLError as exc:
        raise YamlSubsetError(_yaml_error(exc)) from None
    except RecursionError:  # thousands of nested levels
        raise YamlSubsetError("nested too deeply") from None


def _yaml_error(exc: Exception) -> str:
    """PyYAML's error as one line: ``line 3: mapping values are not allowed here``."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
    return f"line {mark.line + 1}: {problem}" if mark is not None else str(problem)


def subset_loads(text: str) -> Any:
    """Parse ``text`` with the subset reader; raises ``YamlSubsetError`` (with the line number) on
    anything unsupported."""
    lines: list[tuple[int, int, str]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        if lineno > MAX_LINES:
            raise YamlSubsetError(f"more than {MAX_LINES} lines")
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YamlSubsetError(f"line {lineno}: tab indentation")
        body = _strip_comment(raw)
        if not body.strip() or body.strip() in ("---", "..."):
            continue
        lines.append((lineno, len(body) - len(body.lstrip()), body.strip()))
    if not lines:
        return None
    value, pos = _block(lines, 0, lines[0][1])
    if pos != len(lines):
        raise YamlSubsetError(f"line {lines[pos][0]}: unexpected indentation")
    return value


def _block(lines: list[tuple[int, int, str]], pos: int, indent: int) -> tuple[Any, int]:
    if lines[pos][2].startswith("- ") or lines[pos][2] == "-":
        return _sequence(lines, pos, indent)
    return _mapping(lines, pos, indent)


def _sequence(lines, pos, indent):
    out: list[Any] = []
    while pos < len(lines) and lines[pos][1] == indent and (lines[pos][2].startswith("- ") or lines[pos][2] == "-"):
        lineno, _, text = lines[pos]
        rest = text[1:].strip()
        if not rest:
            if pos + 1 < len(lines) and lines[pos + 1][1] > indent:
                value, pos = _block(lines, pos + 1, lines[pos + 1][1])
            else:
                value, pos = None, pos + 1
            out.append(value)
            continue
        if re.match(r"""^("[^"]*"|'[^']*'|[^:#\[\]"']+?)\s*:(\s|$)""", rest):
            # "- key: value" opens a mapping whose keys sit at the column after "- "
            child = indent + (len(text) - len(rest))
            sub = [(lineno, child, rest)]
            end = pos + 1
            while end < len(lines) and lines[end][1] > indent:
                sub.append(lines[end])
                end += 1
            value, used = _mapping(sub, 0, child)
            if used != len(sub):
                raise YamlSubsetError(f"line {sub[used][0]}: unexpected indentation")
            out.append(value)
            pos = end
            continue
        out.append(_scalar_at(rest, lineno))
        pos += 1
    return out, pos


def _mapping(lines, pos, indent):
    out: dict[str, Any] = {}
    while pos < len(lines) and lines[pos][1] == indent:
        lineno, _, text = lines[pos]
        if text.startswith("- "):
            raise YamlSubsetError(f"line {lineno}: a list item where a key belongs")
        key, rest = _key_value(text, lineno)
        pos += 1
        if rest:
            out[key] = _scalar_at(rest, lineno)
        elif pos < len(lines) and lines[pos][1] > indent:
            out[key], pos = _block(lines, pos, lines[pos][1])
        elif pos < len(lines) and lines[pos][1] == indent and lines[pos][2].startswith("- "):
            out[key], pos = _sequence(lines, pos, indent)  # a list at its key's indentation
        else:
            out[key] = None
    if pos < len(lines) and lines[pos][1] > indent:
        raise YamlSubsetError(f"line {lines[pos][0]}: unexpected indentation")
    return out, pos
