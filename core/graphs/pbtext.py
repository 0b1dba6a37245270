"""A fast, tolerant reader of protobuf TEXT format into plain trees.

Why not ``google.protobuf.text_format``: its tokenizer is pure Python and takes minutes on
a 100k-op ``ge_proto_*_Build.txt``; it also stops at the first unknown enum name or field.
GE writes one field per line (C++ ``TextFormat::Print``), so a per-line fast path covers
nearly every line, with a small tokenizer for the rest (one-line messages, ``[a, b]``
lists, ``<…>`` delimiters, several fields on one line).

A message becomes ``dict[str, list]``: every field name maps to the list of its values in
order (scalars: ``str``/``int``/``float``/``bool``; messages: nested dicts).  Enum values
stay names (``"DT_FLOAT"``).  Problems are reported as warnings, never raised.
"""

from __future__ import annotations

import codecs
import re
import warnings
from typing import Any

Tree = dict[str, list[Any]]

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    | (?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?)(?![\w.]))
    | (?P<id>-?[A-Za-z_][\w.]*|\[[\w./]+\])
    | (?P<sym>[{}<>:\[\],;])
    | (?P<bad>\S)
    )""",
    re.X,
)
_INT = re.compile(r"[-+]?\d+")
_LINE = re.compile(
    r"""^[ \t]*(?:
        (?P<close>[}>])
      | (?P<open>[A-Za-z_]\w*|\[[\w./]+\])[ \t]*:?[ \t]*[{<]
      | (?P<key>[A-Za-z_]\w*)[ \t]*:[ \t]*(?:"(?P<str>(?:[^"\\\n]|\\.)*)"|(?P<bare>[-+\w.]+))
    )[ \t\r]*$
    | ^(?P<other>[^\n]*\S[^\n]*)$""",
    re.X | re.M,
)
_MAX_WARNINGS = 20


def unescape(body: str) -> str:
    """Undo C escaping of a text-format string (octal UTF-8 bytes included)."""
    if "\\" not in body:
        return body
    try:
        with warnings.catch_warnings():  # "invalid escape sequence" in odd input is not our problem
            warnings.simplefilter("ignore")
            return codecs.escape_decode(body.encode("utf-8"))[0].decode("utf-8", errors="replace")
    except (ValueError, UnicodeError):
        return body


def parse_scalar(tok: str) -> Any:
    """A bare (unquoted) value: int, float, bool or enum name."""
    if tok[0] in "0123456789-+" and _INT.fullmatch(tok):
        return int(tok)
    low = tok.lower()
    if low in ("true", "t"):
        return True
    if low in ("false", "f"):
        return False
    if low.startswith("0x") or low.startswith("-0x"):
        try:
            return int(tok, 16)
        except ValueError:
            return tok
    try:
        return float(tok.rstrip("fF")) if tok[:1] in "+-.0123456789" else tok
    except ValueError:
        if low.lstrip("-+") in ("inf", "infinity", "nan"):
            return float(low)
        return tok


class TextTreeReader:
    """Builds a tree from protobuf text; see the module docstring."""

    def __init__(self, label: str):
        self.label = label
        self.root: Tree = {}
        self.stack: list[Tree] = [self.root]
        self.warnings: list[str] = []
        self.bad_lines = 0
        self.good_lines = 0

    def warn(self, lineno: int, msg: str) -> None:
        self.bad_lines += 1
        if len(self.warnings) < _MAX_WARNINGS:
            self.warnings.append(f"{self.label}:{lineno}: {msg}")

    def _open(self, key: str) -> None:
        child: Tree = {}
        self.stack[-1].setdefault(key, []).append(child)
        self.stack.append(child)

    def _close(self, lineno: int) -> None:
        if len(self.stack) > 1:
            self.stack.pop()
        else:
            self.warn(lineno, "unbalanced '}'")

    def feed(self, text: str) -> Tree:
        """Parse the whole text; return the root message tree.

        Line numbers (for warnings only) are counted from the previous one looked up, never from the
        start of the text: a file of many one-line messages or stray ``}`` lines stays linear (it was
        quadratic: 80k lines 46 s)."""
        stack = self.stack
        top = stack[-1]
        good = 0
        at, line_at = 0, 1  # a position of the text and its line number

        def lineno(pos: int) -> int:
            nonlocal at, line_at
            line_at += text.count("\n", at, pos)
            at = pos
            return line_at

        for m in _LINE.finditer(text):
            kind = m.lastgroup
            if kind == "str":
                value = m.group("str")
                top.setdefault(m.group("key"), []).append(unescape(value) if "\\" in value else value)
            elif kind == "bare":
                top.setdefault(m.group("key"), []).append(parse_scalar(m.group("bare")))
            elif kind == "open":
                child: Tree = {}
                top.setdefault(m.group("open"), []).append(child)
                stack.append(child)
                top = child
            elif kind == "close":
                if len(stack) > 1:
                    stack.pop()
                    top = stack[-1]
                else:
                    self.warn(lineno(m.start()), "unbalanced '}'")
                    continue
            else:
                line = m.group("other").strip()
                if line[0] != "#":
                    self._tokens(lineno(m.start()), line)
                    top = stack[-1]
                continue
            good += 1
        self.good_lines += good
        if len(stack) > 1:
            self.warn(0, f"text ends inside {len(stack) - 1} open message(s) (truncated file?)")
        return self.root

    def _tokens(self, lineno: int, line: str) -> None:
        """Slow path: tokenize one line and apply it to the open messages."""
        toks: list[tuple[str, str]] = []
        for m in _TOKEN.finditer(line):
            kind = m.lastgroup or "bad"
            if kind == "bad":
                if m.group("bad") == "#":
                    break
                self.warn(lineno, f"unexpected character {m.group('bad')!r}")
                return
            toks.append((kind, m.group(kind)))
        i = 0
        n = len(toks)
        ok = True
        while i < n:
            kind, tok = toks[i]
            if kind == "sym" and tok in "}>":
                self._close(lineno)
                i += 1
            elif kind == "sym" and tok in ",;":
                i += 1
            elif kind == "id":
                nxt = toks[i + 1][1] if i + 1 < n else ""
                if nxt == ":" and i + 2 < n:
                    vkind, val = toks[i + 2]
                    if val in ("{", "<"):
                        self._open(tok)
                        i += 3
                    elif val == "[":
                        i = self._list(tok, toks, i + 3, lineno)
                    elif vkind == "sym":
                        ok = False
                        break
                    else:
                        i = self._value(tok, toks, i + 2)
                elif nxt in ("{", "<"):
                    self._open(tok)
                    i += 2
                else:
                    ok = False
                    break
            else:
                ok = False
                break
        if ok:
            self.good_lines += 1
        else:
            self.warn(lineno, f"cannot read: {line[:60]!r}")

    def _value(self, key: str, toks: list[tuple[str, str]], i: int) -> int:
        kind, tok = toks[i]
        if kind == "str":
            parts = [unescape(tok[1:-1])]
            i += 1
            while i < len(toks) and toks[i][0] == "str":  # adjacent strings concatenate
                parts.append(unescape(toks[i][1][1:-1]))
                i += 1
            self.stack[-1].setdefault(key, []).append("".join(parts))
            return i
        self.stack[-1].setdefault(key, []).append(parse_scalar(tok))
        return i + 1

    def _list(self, key: str, toks: list[tuple[str, str]], i: int, lineno: int) -> int:
        """``key: [v, v]`` — scalars only on one line (messages in lists are not written by GE)."""
        while i < len(toks):
            kind, tok = toks[i]
            if tok == "]":
                return i + 1
            if tok == ",":
                i += 1
                continue
            if kind in ("str", "num", "id"):
                i = self._value(key, toks, i)
                continue
            break
        self.warn(lineno, f"unreadable list for {key!r}")
        return len(toks)


def parse_text_tree(text: str, label: str) -> tuple[Tree, TextTreeReader]:
    """Parse protobuf text into a tree; the reader carries warnings and line counts."""
    reader = TextTreeReader(label)
    return reader.feed(text), reader
