"""``overflow``: the ops with overflow / NaN / Inf evidence, the first being where it starts."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dumpscope.core.inert import inert
from dumpscope.tui.cli.common import check_place, exit_status, open_dump
from dumpscope.tui.cli.options import add_common, add_exit_code, add_format
from dumpscope.tui.cli.output import console, print_json, write_csv


def add_parsers(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("overflow", help="ops with overflow / NaN / Inf evidence, first = origin")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--step", type=int, metavar="S", help="only this step (default: every step)")
    p.add_argument("--rank", type=int, metavar="R", help="only this rank (default: every rank)")
    p.add_argument("--scan", choices=("auto", "all", "none"), default="auto",
                   help="scan tensor data for Inf/NaN (auto: when no Opdebug/stats evidence exists)")
    add_exit_code(p, "an op with overflow / NaN / Inf evidence is found")
    add_format(p)
    add_common(p)


def _places_text(places: list[dict[str, Any]]) -> str:
    """"rank 0-1 × step 0-3 (8 places)" or the list when it is not a full grid."""
    ranks = sorted({p["rank"] for p in places})
    steps = sorted({p["step"] for p in places})

    def span(v: list[int]) -> str:
        return f"{v[0]}..{v[-1]}" if len(v) > 1 and v == list(range(v[0], v[-1] + 1)) else ",".join(map(str, v))
    if len(ranks) * len(steps) == len(places):
        return f"rank {span(ranks)} × step {span(steps)} ({len(places)} place{'s' if len(places) != 1 else ''})"
    return ", ".join(f"rank {p['rank']} step {p['step']}" for p in places)


def cmd_overflow(args: argparse.Namespace) -> int:
    from dumpscope.core.engines.overflow.lookup import overflow_report

    q = open_dump(args.path, args)
    check_place(q, args.rank, args.step)
    if not sys.stderr.isatty():  # no bar to draw: rich's progress machinery is not even imported
        doc = overflow_report(q, rank=args.rank, step=args.step, scan=args.scan)
    else:
        from rich.progress import BarColumn, Progress, TextColumn

        with Progress(TextColumn("counting NaN/Inf"), BarColumn(), TextColumn("{task.completed}/{task.total} files"),
                      transient=True, console=console(stderr=True)) as bar:
            task = bar.add_task("scan", total=None)

            def tick(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            doc = overflow_report(q, rank=args.rank, step=args.step, scan=args.scan, progress=tick)
    rows = doc["ops"]
    if args.exit_code and not rows and not doc["scanned"]:  # nothing looked at: not "clean" (exit 1, as triage)
        print("dumpscope: nothing was scanned: whether anything overflowed is not known", file=sys.stderr)
    if args.json:
        print_json(doc)
        return exit_status(args, bool(rows), known=bool(rows or doc["scanned"]))
    if args.csv:
        keys = ["exec_index", "name", "type", "rank", "step", "evidence", "status", "nan", "posinf", "neginf"]
        write_csv(keys, [[r.get(k) for k in keys] for r in rows])
        return exit_status(args, bool(rows), known=bool(rows or doc["scanned"]))
    con = console()
    scanned = doc["scanned"]
    if scanned:
        kinds: dict[str, int] = {}
        for p in scanned:
            kinds[p["evidence"]] = kinds.get(p["evidence"], 0) + 1
        unknown = sum(p["unknown"] for p in scanned)
        con.print(f"scanned {_places_text(scanned)}: evidence "
                  + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
                  + (f"; {unknown} ops without readable outputs" if unknown else ""), markup=False)
    if doc["not_scanned"]:
        con.print(f"not looked at (no Opdebug or statistics evidence, tensors not scanned): "
                  f"{_places_text(doc['not_scanned'])}", markup=False)
    for p in doc["problems"]:
        con.print(f"  ! {inert(p['path'])}: {inert(p['error'])}", markup=False)
    if not rows:
        con.print("no overflow, NaN or Inf found in what was scanned" if scanned else
                  "nothing was scanned: whether anything overflowed is not known", markup=False)
        return exit_status(args, bool(rows), known=bool(rows or doc["scanned"]))
    from rich.table import Table

    t = Table(show_edge=False, title="overflow evidence by step, then execution order (first = where it starts)")
    for col in ("", "rank", "step", "#", "type", "name", "evidence", "status", "nan", "+inf", "-inf"):
        t.add_column(col)
    for i, r in enumerate(rows):
        t.add_row("▶" if i == 0 else "", str(r["rank"]), str(r["step"]), str(r["exec_index"]), inert(r["type"]),
                  inert(r["name"]), r["evidence"],
                  "-" if r["status"] is None else f"{r['status']} ({', '.join(r.get('status_words', []))})",
                  str(r["nan"]), str(r["posinf"]), str(r["neginf"]))
    con.print(t)
    for f in doc["first_bad"]:
        con.print(f"rank {f['rank']}: first bad op {inert(f['name'])} (step {f['step']}, exec {f['exec_index']})"
                  f" — {inert(f['reason'])}", markup=False)
    if doc["origin"] and len(doc["first_bad"]) > 1:
        con.print(inert(doc["origin"]["reason"]), markup=False)
    return exit_status(args, bool(rows), known=bool(rows or doc["scanned"]))
