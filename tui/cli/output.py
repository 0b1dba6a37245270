"""How every headless answer is written: inert text, one JSON document, CSV without formulas.

Text from a dump never reaches the terminal raw: :class:`InertStream` is the choke point for
plain writes and :func:`console` for rich renderables.
"""

from __future__ import annotations

import csv
import os
import sys
from typing import Any, Iterable, Sequence

from dumpscope.core.inert import csv_cell, inert, inert_lines

#: dumps set aside under the opened PATHs (core.dump_roots): every JSON document of the command lists them
OTHER_DUMPS: list[dict] = []


def print_json(doc: Any) -> None:
    # exact: json escapes C0 itself, json_text (inert.json_safe) the DEL/C1/bidi characters and lone
    # surrogates it leaves raw
    from dumpscope.tui.json_text import dump  # json.dumps of it with NaN/Inf as strings, faster

    if OTHER_DUMPS and isinstance(doc, dict) and "other_dumps" not in doc:
        doc = {**doc, "other_dumps": list(OTHER_DUMPS)}
    # past the InertStream: the text holds nothing it changes (C0 other than newline is escaped by JSON
    # itself, DEL/C1/bidi by json_text, string by string), and its second pass over a 60 MB compare
    # document cost 4 %
    stream = raw(sys.stdout)
    binary = utf8_buffer(stream)
    if binary is None:
        write = stream.write
        dump(doc, write)  # in parts: a big document is never whole in memory
        write("\n")
        return
    stream.flush()  # what was written as text comes first

    def write_text(text: str) -> None:
        # (json_text escapes lone surrogates: "backslashreplace" could only write one as the same escape)
        binary.write(text.encode("utf-8", "backslashreplace"))

    # compare's rows are stored printed in UTF-8 (row_spool.PrintedRows): copied as they are, not decoded
    # and encoded again (0.1 s CPU of a compare of two 20k trees)
    dump(doc, write_text, binary.write)
    binary.write(b"\n")


def utf8_buffer(stream: Any) -> Any:
    """The byte stream under a text stream that writes UTF-8 as it is given (its ``buffer``), else None
    (another encoding, or a system whose text streams write newlines as "\\r\\n")."""
    import codecs
    import os

    binary = getattr(stream, "buffer", None)
    encoding = getattr(stream, "encoding", None)
    if binary is None or not isinstance(encoding, str) or not hasattr(binary, "write") or os.linesep != "\n":
        return None
    try:
        return binary if codecs.lookup(encoding).name == "utf-8" else None
    except LookupError:
        return None


class InertStream:
    """The one choke point of human output: text written through it has every control character
    except newline and tab made visible, whatever command wrote it (text from a dump never
    reaches the terminal raw).  ``raw`` is the real stream, for rich consoles that add their own
    escape sequences (they make their text inert segment by segment, see :func:`console`)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(inert_lines(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def raw(stream: Any) -> Any:
    return stream.raw if isinstance(stream, InertStream) else stream


class InertRender:
    """Renders a renderable and makes the text of every segment inert (rich's own styles still apply)."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Any, options: Any):
        from rich.segment import Segment

        for seg in console.render(self.renderable, options):
            yield seg if seg.control else Segment(inert_lines(seg.text), seg.style)


class InertHook:
    def process_renderables(self, renderables: list) -> list:
        return [InertRender(r) for r in renderables]


def console(stderr: bool = False):
    """The console every human answer prints through: markup off (a ``[/bold]`` in a name is text,
    not a tag) and every segment inert, so a command that forgets :func:`inert` stays safe."""
    from rich.console import Console

    stream = raw(sys.stderr if stderr else sys.stdout)
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 160
    con = Console(file=stream, highlight=False, soft_wrap=True, width=width, markup=False, emoji=False)
    con.push_render_hook(InertHook())
    return con


def bold(text: Any):
    from rich.text import Text

    return Text(inert(text), style="bold")


def write_csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(header)
    for row in rows:  # dump-derived text: inert for the terminal, and no formula for a spreadsheet
        w.writerow([csv_cell(v) for v in row])


def fmt_num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)
