"""The ``dumpscope`` entry point (the console script and ``python -m dumpscope``): argv → parser → the
command's handler, with every failure turned into one line on stderr and an exit status (CLI.md).

Errors are one line on stderr and exit code 1; usage errors exit 2.  ``--json`` prints
exactly one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Optional, Sequence

from dumpscope.core.inert import inert
from dumpscope.core.support import process_settings
from dumpscope.tui.cli import common, compare, convert, explore, listing, output, overflow, triage, watch
from dumpscope.tui.cli.parser import COMMANDS, build_parser, cmd_help


def _cmd_completion(args: argparse.Namespace) -> int:
    from dumpscope.tui.cli.completion import cmd_completion  # imported by its own command only

    return cmd_completion(args)


#: the handler of each subcommand (a test swaps one for a careless command)
HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "triage": triage.cmd_triage, "summary": listing.cmd_summary, "ops": listing.cmd_ops, "show": listing.cmd_show,
    "stats": listing.cmd_stats, "convert": convert.cmd_convert, "overflow": overflow.cmd_overflow,
    "watch": watch.cmd_watch, "trend": watch.cmd_trend, "compare": compare.cmd_compare,
    "explore": explore.cmd_explore, "serve": explore.cmd_serve, "completion": _cmd_completion,
    "help": cmd_help,
}


def script() -> int:
    """The console script and ``python -m dumpscope``: a process that ends with its command, so it takes
    the process-wide settings (``process_settings.one_shot``) that a caller of :func:`main` in a
    longer-lived process (a test run) should not.  No module imported here at start imports numpy."""
    process_settings.one_shot()
    return main()


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "-V", "--version")):
        argv = ["explore", *argv]
    parser = build_parser(argv[0] if argv[0] in COMMANDS else None)  # -h/-V: the whole command line
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    from dumpscope.core.layouts.walk import FOLLOW_LINKS_ENV

    before = os.environ.get(FOLLOW_LINKS_ENV)
    if getattr(args, "follow_links", False):  # for this process and the children it starts (builder, serve)
        os.environ[FOLLOW_LINKS_ENV] = "1"
    try:
        return _main(args)
    finally:
        if before is None:
            os.environ.pop(FOLLOW_LINKS_ENV, None)
        else:
            os.environ[FOLLOW_LINKS_ENV] = before


def _main(args: argparse.Namespace) -> int:
    if args.command in ("explore", "serve"):  # the explorer owns the terminal (and makes its text inert itself)
        return _run(args)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = output.InertStream(out), output.InertStream(err)
    try:
        return _run(args)
    finally:
        sys.stdout, sys.stderr = out, err


def _run(args: argparse.Namespace) -> int:
    import sqlite3

    common.OPENED.clear()
    output.OTHER_DUMPS.clear()
    try:
        try:
            return HANDLERS[args.command](args)
        except sqlite3.DatabaseError as exc:
            # damaged pages that opening could not see: discard those index files and answer from fresh ones
            from pathlib import Path

            from dumpscope.core.index.faults import discard, is_damage

            files = [p for p in common.OPENED if p != ":memory:"]
            if not files or not is_damage(exc):
                raise
            for p in files:
                discard(Path(p))
                print(f"dumpscope: warning: index cache {inert(p)} was damaged ({inert(exc)}): rebuilt",
                      file=sys.stderr)
            common.OPENED.clear()
            output.OTHER_DUMPS.clear()
            return HANDLERS[args.command](args)
    except common.CliError as exc:
        print(f"dumpscope: {inert(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dumpscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # never a traceback for the user; DUMPSCOPE_DEBUG=1 shows it
        if os.environ.get("DUMPSCOPE_DEBUG"):
            raise
        text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        print(f"dumpscope: internal error: {type(exc).__name__}: {inert(text)} (DUMPSCOPE_DEBUG=1 shows the traceback)",
              file=sys.stderr)
        return 1
