"""What every command that reads a dump does first: open it (the index), check the place asked for,
find the op named; and the one error type the entry point turns into a line on stderr."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

from dumpscope.core.inert import inert
from dumpscope.tui.cli.output import OTHER_DUMPS, raw


#: index files opened by the running command (discarded and rebuilt if they turn out damaged)
OPENED: list[str] = []


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 1."""


class IndexProgress:
    """One line on stderr while an index is built, so a cold 100k-file tree is not 20 s of silence.

    Only on a terminal, only once the build has taken a moment (a warm reopen shows nothing), and
    never when ``--json`` output goes to a pipe (scripts).  The line is erased when the build ends.
    """

    DELAY_S = 0.5

    def __init__(self, path: str) -> None:
        self.path = path
        self.shown = False

    @staticmethod
    def wanted(args: argparse.Namespace) -> bool:
        if not sys.stderr.isatty():
            return False
        return not (getattr(args, "json", False) and not sys.stdout.isatty())

    def __call__(self, prog) -> None:
        elapsed = float(getattr(prog, "elapsed", 0.0))
        if prog.done:
            if self.shown:
                err = raw(sys.stderr)  # our own erase sequence: past the inert stream
                err.write("\r\x1b[K")
                err.flush()
            return
        if elapsed < self.DELAY_S:
            return
        err = raw(sys.stderr)
        err.write(f"\r\x1b[Kindexing {inert(self.path)}: {prog.phase}, {prog.files:,} files, "
                  f"{prog.records:,} records, {elapsed:.0f} s")
        err.flush()
        self.shown = True


def open_dump(path: str, args: argparse.Namespace):
    from dumpscope.core.query import open_query

    kwargs: dict[str, Any] = {"use_cache": not getattr(args, "no_cache", False)}
    if IndexProgress.wanted(args):
        kwargs["progress"] = IndexProgress(path)
    if getattr(args, "cache_dir", None):
        from pathlib import Path

        kwargs["cache_directory"] = Path(args.cache_dir)
    try:
        q = open_query(path, **kwargs)
    except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
        raise CliError(str(exc)) from None
    OPENED.append(q.index.db_path)
    for w in q.index.warnings:  # the cache could not be used: the answer comes from memory
        print(f"dumpscope: warning: {inert(w)}", file=sys.stderr)
    for other in q.other_dumps():  # never a silent answer: a dump of the same places was not read
        print(f"dumpscope: note: {inert(other['message'])}", file=sys.stderr)
        OTHER_DUMPS.append(other)
    return q



def values_text(vals: list[int]) -> str:
    """"0..99" for a run of numbers, else the numbers (the first 20)."""
    if not vals:
        return "none"
    if len(vals) > 2 and vals == list(range(vals[0], vals[-1] + 1)):
        return f"{vals[0]}..{vals[-1]}"
    return ", ".join(map(str, vals[:20])) + (f", … ({len(vals)} in all)" if len(vals) > 20 else "")


def check_place(q, rank: Optional[int], step: Optional[int]) -> None:
    """A ``--rank``/``--step`` the dump does not have is an error naming what it has, never an empty answer
    (MindSpore's constants are in no step: ``-1`` is not one)."""
    ranks = q.ranks()
    if rank is not None and rank not in ranks:
        raise CliError(f"--rank {rank}: not in this dump (ranks: {values_text(ranks)})")
    if step is not None and (step < 0 or not any(q.has_place(r, step)
                                                 for r in ([rank] if rank is not None else ranks))):
        where = f" at rank {rank}" if rank is not None else ""
        raise CliError(f"--step {step}: not in this dump{where} (steps: {values_text(q.steps(rank))})")


def lookup(q, text: str, rank: Optional[int], step: Optional[int], run: Optional[int] = None):
    from dumpscope.core.query import OpLookupError

    check_place(q, rank, step)
    try:
        return q.resolve_op(text, rank, step, run=run)
    except OpLookupError as exc:
        hint = f"; closest: {', '.join(exc.matches)}" if exc.matches else ""
        raise CliError(f"{exc}{hint}") from None


def exit_status(args: argparse.Namespace, trouble: bool, known: bool = True) -> int:
    """``--exit-code``: 3 when trouble was found (a CI job gates on it), 1 when nothing could be looked at,
    else 0."""
    if not getattr(args, "exit_code", False):
        return 0
    return 3 if trouble else 0 if known else 1
