"""``dumpscope triage``: one command from a job's dumps to the answer (CLI.md ``triage``).

The parser entry and the handler; the work is ``core.triage`` (the overflow and compare engines)
and the words ``core.triage_report``.  Exit status always: 0 clean, 3 trouble found, 1 an error
(or nothing could be judged), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from dumpscope.tui.cli.common import CliError, open_dump
from dumpscope.tui.cli.options import add_common, int_or_all
from dumpscope.tui.cli.output import console, print_json


def add_parsers(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("triage", help="the answer in one command: what went wrong first, the evidence, the "
                                      "re-dump config (exit 3 when trouble is found)",
                       description="Read the whole job (every rank and step unless narrowed) and report the\n"
                                   "origin of its overflow / NaN (overflow's rules: born there vs received\n"
                                   "through a collective) or, with --golden, its first divergence (compare's\n"
                                   "rules): the evidence, how far it spread, what was read, the re-dump config.\n"
                                   "Exit status: 0 clean, 3 trouble found, 1 error, 2 usage.")
    p.add_argument("path", nargs="?", metavar="PATH", help="the job's dump (the target with --golden)")
    p.add_argument("--golden", metavar="GOLDEN", help="compare PATH against this golden dump (first divergence)")
    p.add_argument("--step", type=int_or_all, default="all", metavar="S|all", help="a step, or all (default)")
    p.add_argument("--rank", type=int_or_all, default="all", metavar="R|all", help="a rank, or all (default)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print one JSON document (what --merge reads)")
    g.add_argument("--md", action="store_true", help="print a Markdown report (the config in a fenced block)")
    p.add_argument("--export-config", metavar="FILE",
                   help="write the re-dump config of the origin and its producers (never inside a dump tree)")
    p.add_argument("--merge", nargs="+", metavar="FILE",
                   help="merge per-host `triage --json` documents into the whole job's answer (no PATH)")
    add_common(p)


def cmd_triage(args: argparse.Namespace) -> int:
    from dumpscope.core.engines.triage import build as tr
    from dumpscope.core.engines.triage.render import markdown, text, write_config

    if args.merge:
        if args.path or args.golden:
            print("dumpscope triage: error: --merge takes documents, not PATH or --golden", file=sys.stderr)
            return 2
        try:
            doc = tr.merge(_read_docs(args.merge, CliError))
        except tr.MergeError as exc:
            raise CliError(str(exc)) from None
        roots = [t.get("path", "") for t in doc["covered"].get("trees", [])]
    else:
        if not args.path:
            print("dumpscope triage: error: PATH is required (or --merge FILE …)", file=sys.stderr)
            return 2
        target = open_dump(args.path, args)
        golden = open_dump(args.golden, args) if args.golden else None
        from dumpscope.core.engines.compare.places import PlaceError

        try:
            doc = _with_bar(lambda tick: tr.triage(target, golden, rank=args.rank, step=args.step, progress=tick),
                            "comparing" if golden is not None else "counting NaN/Inf")
        except (PlaceError, tr.PlaceMissing) as exc:
            raise CliError(str(exc)) from None
        roots = [args.path] + ([args.golden] if args.golden else [])
    if args.export_config:
        from dumpscope.core.engines.redump_config import RedumpConfigError

        try:
            write_config(doc, args.export_config, roots)
        except RedumpConfigError as exc:
            raise CliError(str(exc)) from None
        print(f"wrote the re-dump config of {len(doc['redump_config']['ops'])} op(s) to {args.export_config}",
              file=sys.stderr)
    if args.json:
        print_json(doc)
    elif args.md:
        sys.stdout.write(markdown(doc))
    else:
        import shutil  # here: every command imports this module (the parser), few print triage's text

        width = shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80
        sys.stdout.write(text(doc, min(80, width)))
    if doc["verdict"] == tr.INCOMPLETE:
        print(f"dumpscope: {doc['why']}", file=sys.stderr)
    return tr.exit_status(doc)


def _with_bar(work: Callable[[Any], dict], what: str) -> dict:
    """A progress bar on stderr while tensors are read (a terminal only; scripts get none)."""
    if not sys.stderr.isatty():
        return work(None)
    from rich.progress import BarColumn, Progress, TextColumn

    with Progress(TextColumn(what), BarColumn(), TextColumn("{task.completed}/{task.total}"), transient=True,
                  console=console(stderr=True)) as bar:
        task = bar.add_task(what, total=None)
        return work(lambda done, total: bar.update(task, completed=done, total=total))


def _read_docs(paths: list[str], error: type) -> list[tuple[str, dict]]:
    from dumpscope.core.engines.triage.build import FORMAT

    docs = []
    for p in paths:
        try:
            with open(os.path.expanduser(p), encoding="utf-8") as fh:
                d = json.load(fh)
        except OSError as exc:
            raise error(f"{p}: {exc.strerror or exc}") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise error(f"{p}: not JSON ({str(exc).splitlines()[0]})") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise error(f"{p}: not a dumpscope triage --json document")
        docs.append((p, d))
    return docs
