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
    # exact: json escapes C0 itself, json_text (inert.json_safe) the DEL/C1/bidi characters it leaves raw
    from dumpscope.tui.json_text import dump  # json.dumps of it with NaN/Inf as strings, faster

    if OTHER_DUMPS and isinstance(doc, dict) and "other_dumps" not in doc:
        doc = {**doc, "other_dumps": list(OTHER_DUMPS)}
    # past the InertStream: the text holds nothing it changes (C0 other than newline is escaped by JSON
    # itself, DEL/C1/bidi by json_text, string by string), and its second pass over a 60 MB compare
    # document cost 4 %
    write = raw(sys.stdout).write
    dump(doc, write)  # in parts: a big document is never whole in memory
    write("\n")


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
