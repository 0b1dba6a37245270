"""The options several commands share: where the index lives, which place, which output form."""

from __future__ import annotations

import argparse


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-cache", action="store_true", help="do not read or write the index cache")
    p.add_argument("--cache-dir", metavar="DIR", help="where index files go (default: XDG cache dir)")
    p.add_argument("--follow-links", action="store_true",
                   help="follow symlinks whose targets lie outside PATH (default: listed as problems, not read)")


def add_place(p: argparse.ArgumentParser) -> None:
    p.add_argument("--step", type=int, metavar="S", help="step / iteration (default: lowest present)")
    p.add_argument("--rank", type=int, metavar="R", help="rank / device (default: lowest present)")


def add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=int, metavar="K",
                   help="which execution of an op that ran several times in the step (a loop body): "
                        "0 = the first (default); `show` lists them")


def add_format(p: argparse.ArgumentParser, csv_ok: bool = True) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print one JSON document")
    if csv_ok:
        g.add_argument("--csv", action="store_true", help="print CSV")


def add_exit_code(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--exit-code", action="store_true",
                   help=f"exit 3 when {what}, 0 when none (1 error, 2 usage), as `triage` always does")


def int_or_all(text: str):
    if text == "all":
        return "all"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'all', got {text!r}") from None
