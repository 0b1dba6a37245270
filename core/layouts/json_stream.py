"""Read a big JSON object member by member, in bounded memory (msprobe ``dump.json`` and side files).

``json.load`` of a 100 MB ``dump.json`` holds the whole text and every parsed object at once (about
nine times the file).  :class:`JsonObjectReader` reads the text in chunks, finds where each member's
value ends (a small tokenizer that knows strings, escapes and brackets) and parses one value at a
time, so memory follows the largest single value, which :attr:`JsonObjectReader.max_value` caps.

Two kinds of error keep what they can:

* :class:`ValueError` (``BadValue``, ``ValueTooLarge``) for one member: its end was found, the
  member is skipped and the next one can be read;
* :class:`JsonStreamError` for the object's own structure (a missing ``:`` or ``,``, text cut
  short): nothing after it can be read.  ``offset`` is the character where it went wrong.

Values parse exactly as ``json.loads`` parses them (``NaN``/``Infinity`` included): the fast path
is ``JSONDecoder.raw_decode`` on the buffer, the tokenizer only runs for a value that straddles a
chunk boundary or does not parse.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, TextIO

#: characters per read
CHUNK = 1 << 20

_WS = re.compile(r"[ \t\n\r]*")
_STRUCT = re.compile(r'["{}\[\]]')
_STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.S)
_SCALAR = re.compile(r'[^,:}\]\s"{\[]*')


def _mb(n: int) -> str:
    return f"{n / 2 ** 20:.1f} MB" if n >= 2 ** 20 else f"{n:,} characters"


class JsonStreamError(ValueError):
    """The object's structure is broken at ``offset``: nothing after it can be read."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} at character {offset:,}")
        self.offset = offset


class BadValue(ValueError):
    """One member's value is not valid JSON (it was skipped; the next member can be read)."""


class ValueTooLarge(ValueError):
    """One member's value is longer than the cap (it was skipped unread; the next can be read)."""

    def __init__(self, size: int, cap: int, complete: bool = True) -> None:
        more = "" if complete else " or more"
        super().__init__(f"{_mb(size)}{more}, over the {_mb(cap)} limit per entry")
        self.size = size


class JsonObjectReader:
    """Members of the JSON object at the start of ``fh`` (a text file), one at a time.

    Use :meth:`members` for the top level; for a member whose value is itself an object to be
    streamed, call :meth:`value_kind`, then :meth:`members` again (it reads the nested object's
    members and leaves the reader after its closing brace), else :meth:`read_value` or
    :meth:`skip_value`.
    """

    def __init__(self, fh: TextIO, max_value: int, chunk: int = CHUNK) -> None:
        self._fh = fh
        self.max_value = max_value
        self._chunk = chunk
        self._buf = ""
        self._pos = 0
        self._base = 0  # characters dropped before _buf[0]
        self._eof = False
        self._decoder = json.JSONDecoder()
        #: the largest buffer held so far (characters): what the bounded-memory tests check
        self.peak_buffer = 0

    # -- buffer ---------------------------------------------------------------------------------

    @property
    def offset(self) -> int:
        return self._base + self._pos

    def _fill(self, keep_from: int) -> bool:
        """Drop ``_buf[:keep_from]`` and read more; False at end of file."""
        if self._eof:
            return False
        kept = len(self._buf) - keep_from
        more = self._fh.read(max(self._chunk, kept))
        if not more:
            self._eof = True
            return False
        self._base += keep_from
        self._buf = self._buf[keep_from:] + more
        self._pos -= keep_from
        self.peak_buffer = max(self.peak_buffer, len(self._buf))
        return True

    def _skip_ws(self) -> str:
        """Move past whitespace; the next character ("" at end of file)."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill(self._pos):
                return ""

    def _expect(self, chars: str, what: str) -> str:
        c = self._skip_ws()
        if not c or c not in chars:
            found = repr(c) if c else "end of file"
            raise JsonStreamError(f"expected {what}, found {found}", self.offset)
        self._pos += 1
        return c

    # -- members --------------------------------------------------------------------------------

    def members(self) -> Iterator[str]:
        """Keys of the object starting here; after each key, the caller reads or skips its value
        (a value left untouched is skipped).  Ends after the object's closing brace."""
        self._expect("{", "'{'")
        if self._skip_ws() == "}":
            self._pos += 1
            return
        while True:
            self._expect('"', "a member name")
            self._pos -= 1
            try:
                key = self._value(keep=True)
            except (BadValue, ValueTooLarge) as exc:
                raise JsonStreamError(f"unreadable member name ({exc})", self.offset) from None
            self._expect(":", "':'")
            self._skip_ws()
            self._value_start = self.offset
            yield key
            if self.offset == self._value_start:
                self.skip_value()
            if self._expect(",}", "',' or '}'") == "}":
                return

    def value_kind(self) -> str:
        """'object', 'array', 'string', 'number', 'true', 'false', 'null' (or '' at end of file) of the
        value that comes next."""
        c = self._skip_ws()
        return {"{": "object", "[": "array", '"': "string", "t": "true", "f": "false", "n": "null",
                "": ""}.get(c, "number")

    def read_value(self) -> Any:
        """The next value, parsed (``BadValue``/``ValueTooLarge`` when it is skipped instead)."""
        return self._value(keep=True)

    def skip_value(self) -> None:
        """Move past the next value without keeping it (any size, bounded memory)."""
        self._value(keep=False)

    def finish(self) -> None:
        """Only whitespace may follow the top-level object."""
        c = self._skip_ws()
        if c:
            raise JsonStreamError(f"extra data after the object ({c!r})", self.offset)

    # -- one value ------------------------------------------------------------------------------

    def _value(self, keep: bool) -> Any:
        c = self._skip_ws()
        if not c:
            raise JsonStreamError("the file ends where a value should start", self.offset)
        if keep:
            start = self._pos
            try:
                value, end = self._decoder.raw_decode(self._buf, start)
            except ValueError:  # incomplete in this buffer, or malformed: find its end below
                pass
            else:
                # a number or literal that reaches the end of the buffer may go on in the next chunk
                if c in '{["' or self._eof or _SCALAR.match(self._buf, start).end() < len(self._buf):
                    self._pos = end
                    if end - start > self.max_value:
                        raise ValueTooLarge(end - start, self.max_value)
                    return value
        start, end = self._find_end(keep)
        self._pos = end
        if not keep:
            return None
        try:
            return json.loads(self._buf[start:end])
        except ValueError as exc:
            raise BadValue(str(exc).split(":")[0]) from None

    def _find_end(self, keep: bool) -> tuple[int, int]:
        """``(start, end)`` in ``_buf`` of the value at ``_pos``, refilling as needed.  When ``keep``,
        the value stays in the buffer up to ``max_value`` characters; past that (or when not
        ``keep``) the scanned part is dropped as it goes, the value is skipped to its end and
        ``ValueTooLarge`` is raised (when ``keep``)."""
        origin = self._base + self._pos
        i = self._pos
        open_: list[str] = []  # brackets still open; a closer of the other kind also closes what it skips
        in_string = False
        scalar = self._buf[i] not in '{["'
        too_big = False
        while True:
            buf = self._buf
            n = len(buf)
            if scalar:
                j = _SCALAR.match(buf, i).end()
                if j < n:
                    i = j
                    break
                i = j
            elif in_string:
                j = _STRING_BODY.match(buf, i).end()
                if j < n and buf[j] == '"':
                    i, in_string = j + 1, False
                    if not open_:
                        break
                    continue
                i = j  # the buffer ends inside the string (maybe just after a backslash, kept)
            else:
                m = _STRUCT.search(buf, i)
                if m is not None:
                    ch = m.group()
                    i = m.end()
                    if ch == '"':
                        in_string = True
                    elif ch in "{[":
                        open_.append(ch)
                    else:
                        want = "{" if ch == "}" else "["
                        while open_ and open_.pop() != want:
                            pass
                        if not open_:
                            break
                    continue
                i = n
            if keep and self._base + i - origin > self.max_value:
                keep, too_big = False, True
            drop = origin - self._base if keep else i
            if not self._fill(drop):
                if scalar:
                    break
                raise JsonStreamError("the file ends inside a value", self._base + len(self._buf))
            i -= drop
        size = self._base + i - origin
        if too_big or (keep and size > self.max_value):
            self._pos = i
            raise ValueTooLarge(size, self.max_value)
        return origin - self._base, i


def iter_object(fh: TextIO, max_value: int, chunk: int = CHUNK) -> Iterator[tuple[str, Any]]:
    """``(key, value)`` of every member of the top-level object of ``fh``; a member that is too large
    or malformed comes as ``(key, exception)``.  Structural errors raise :class:`JsonStreamError`."""
    reader = JsonObjectReader(fh, max_value, chunk)
    for key in reader.members():
        try:
            yield key, reader.read_value()
        except (BadValue, ValueTooLarge) as exc:
            yield key, exc
    reader.finish()


__all__ = ["BadValue", "CHUNK", "JsonObjectReader", "JsonStreamError", "ValueTooLarge", "iter_object"]
