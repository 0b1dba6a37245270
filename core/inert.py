"""Text from a dump made harmless for a terminal (names, paths, attributes, stack text).

A dump is untrusted input: an op name may hold ``ESC ] 52 ;…`` (writes the clipboard), ``ESC [2J``
(repaints the screen), an OSC 8 hyperlink, a newline that forges an output line, or rich markup
(``[/bold]`` raises ``MarkupError``; ``[bold red]x[/]`` prints the wrong name).  Every human output
path shows such text through :func:`inert` (control characters made visible) or
:func:`inert_markup` (the same, and rich/Textual markup escaped).  JSON needs neither: it escapes
by itself (see :func:`json_safe` for the C1 characters it leaves raw).
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls and DEL -> the Unicode "control pictures" (U+2400 block): ESC -> "␛", LF -> "␊", NUL -> "␀".
_TABLE: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20)}
_TABLE[0x7F] = "\u2421"  # ␡
# C1 controls (0x9b is a one-byte CSI on some terminals) -> "\x9b".
_TABLE.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})
# Characters that reorder or break lines where a terminal shows them: bidi overrides/isolates
# ("Trojan source"), line/paragraph separators -> "\u202e".
# Invisible characters (issue 30): zero-width space/joiners, word joiner and invisible operators,
# the byte-order mark, soft hyphen, fillers and separators that show nothing: two names that look
# alike on screen must not be told apart by a character nobody sees.
_INVISIBLE = (0x00AD, 0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180E, *range(0x200B, 0x200E),
              *range(0x2060, 0x2065), 0x3164, 0xFEFF, 0xFFA0, *range(0xFFF9, 0xFFFC))
for _c in (0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A), *_INVISIBLE):
    _TABLE[_c] = f"\\u{_c:04x}"

_INVISIBLE_CLASS = "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200d\u2060-\u2064\u3164\ufeff\uffa0\ufff9-\ufffb"
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069" + _INVISIBLE_CLASS + "]")

# Everything but newline and tab: what a stream of finished human output may not contain.
_STREAM_TABLE = {c: s for c, s in _TABLE.items() if c not in (0x0A, 0x09)}
_STREAM_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                            + _INVISIBLE_CLASS + "]")

# What JSON leaves raw (it escapes C0 itself; C0 outside strings is its own whitespace), and the lone
# surrogates a name from a dump can hold (a JSON "\\ud800" escape): no UTF-8 stream can write them raw.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
                          + _INVISIBLE_CLASS + "]")

# The tag grammar rich and Textual share: "[" then a letter, "#", "/" or "@" up to the next "]".
_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def inert(text: Any) -> str:
    """``text`` as a string with every control character visible (``\\x1b`` -> ``␛``, ``\\n`` -> ``␊``)."""
    s = text if isinstance(text, str) else str(text)
    if _UNSAFE.search(s) is None:
        return s
    return s.translate(_TABLE)


def inert_lines(text: Any) -> str:
    """Like :func:`inert` but keeps newlines and tabs: for finished multi-line output, not for one field."""
    s = text if isinstance(text, str) else str(text)
    if _STREAM_UNSAFE.search(s) is None:
        return s
    return s.translate(_STREAM_TABLE)


def escape_markup(text: str) -> str:
    """Escape rich / Textual markup so ``text`` prints literally (the same rule as ``rich.markup.escape``)."""
    s = _TAG.sub(lambda m: f"{m.group(1)}{m.group(1)}\\{m.group(2)}", text)
    if s.endswith("\\") and not s.endswith("\\\\"):
        s += "\\"
    return s


def inert_markup(text: Any) -> str:
    """:func:`inert`, then markup escaped: safe to put inside a markup string (``f"[bold]{inert_markup(n)}[/]"``)."""
    return escape_markup(inert(text))


#: what a spreadsheet opening a CSV reads as the start of a formula (``=HYPERLINK(…)``, ``+cmd|…``, ``@SUM``)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def csv_text(text: str) -> str:
    """A CSV cell of dump-derived text that no spreadsheet runs: a formula start gets a leading
    ``'`` (numbers such as ``-1.5`` stay numbers).  Every CSV path uses it: ``--csv`` on stdout,
    ``--output x.csv``, the explorer's exports."""
    if text[:1] in _FORMULA_START and not _is_number(text):
        return "'" + text
    return text


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def csv_cell(value: Any) -> Any:
    """``value`` for a CSV row: text made inert (one line) and formula-safe; numbers as they are."""
    if value is None:
        return ""
    if isinstance(value, str):
        return csv_text(inert(value))
    return value


def json_unsafe_in(text: str) -> bool:
    """Whether ``text`` holds a character :func:`json_safe` escapes."""
    return _JSON_UNSAFE.search(text) is not None


def json_safe(doc_text: str) -> str:
    """A JSON document with DEL, C1, bidi controls and lone surrogates written as ``\\uXXXX`` escapes.

    ``json.dumps(..., ensure_ascii=False)`` escapes C0 but leaves the others raw; the escaped form
    decodes to the very same string, so the document stays exact, the terminal stays safe, and the
    text is valid UTF-8 (a raw lone surrogate made ``compare --json`` fail on writing it).
    """
    if doc_text.isascii() and "\x7f" not in doc_text:  # DEL is the one ASCII character of the class;
        return doc_text  # isascii is a flag read: a 60 MB compare document skips a regex pass
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", doc_text)
