"""``convert``: every tensor as ``.npy`` in its logical layout."""

from __future__ import annotations

import argparse
import sys

from dumpscope.core.inert import inert
from dumpscope.tui.cli.common import CliError, open_dump
from dumpscope.tui.cli.options import add_common, add_place
from dumpscope.tui.cli.output import console


def add_parsers(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("convert", help="write every tensor as .npy in its logical layout")
    p.add_argument("path", metavar="PATH")
    p.add_argument("outdir", metavar="OUTDIR")
    p.add_argument("--op", metavar="OP", help="only this op")
    add_place(p)
    add_common(p)


def cmd_convert(args: argparse.Namespace) -> int:
    from dumpscope.core.engines.convert import convert_tree

    q = open_dump(args.path, args)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    errors: list[str] = []
    with Progress(TextColumn("converting"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeRemainingColumn(), transient=True, disable=not sys.stderr.isatty(),
                  console=console(stderr=True)) as bar:
        task = bar.add_task("convert", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        try:
            result = convert_tree(q, args.outdir, op=args.op, rank=args.rank, step=args.step, progress=tick,
                                  errors=errors)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    for e in errors:
        print(f"warning: {inert(e)}", file=sys.stderr)
    print(f"wrote {result.written} tensors to {inert(result.outdir)}" +
          (f" ({len(errors)} failed)" if errors else "") +
          (f"; skipped {result.skipped} without tensor data (statistics only or non-tensor arguments)"
           if result.skipped else ""))
    return 0
