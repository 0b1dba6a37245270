"""``trend`` and ``watch``: one tensor across steps, and Dump-Watch snapshots across ops."""

from __future__ import annotations

import argparse
from typing import Any

from dumpscope.core.inert import inert
from dumpscope.tui.cli.common import CliError, check_place, open_dump
from dumpscope.tui.cli.options import add_common, add_format, add_place
from dumpscope.tui.cli.output import bold, console, fmt_num, print_json, write_csv


def add_parsers(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("trend", help="one tensor's statistics at every step (and rank)")
    p.add_argument("path", metavar="PATH")
    p.add_argument("op", metavar="OP")
    p.add_argument("--io", choices=("input", "output"), default="output")
    p.add_argument("--slot", type=int, default=0, metavar="N")
    p.add_argument("--rank", metavar="R|all", help="a rank, or all (default: lowest present)")
    p.add_argument("--run", type=int, metavar="K",
                   help="only the K-th execution in each step of an op that runs several times a step (a loop "
                        "body; 0 = the first); default: every execution, each a point")
    add_format(p)
    add_common(p)

    p = sub.add_parser("watch", help="Dump-Watch snapshots: was a watched tensor overwritten, after which op")
    p.add_argument("path", metavar="PATH")
    add_place(p)
    add_format(p, csv_ok=False)
    add_common(p)


def cmd_trend(args: argparse.Namespace) -> int:
    from dumpscope.core.query import OpLookupError
    from dumpscope.core.engines.trend import POINT_KEYS, TrendSelectorError, marks, point_bad, series, sparkline, trend

    rank: Any = args.rank
    if rank is not None and rank != "all":
        try:
            rank = int(rank)
        except ValueError:
            raise CliError(f"--rank: expected a number or 'all', got {args.rank!r}") from None
    q = open_dump(args.path, args)
    if rank != "all":
        check_place(q, rank, None)
    try:
        doc = trend(q, args.op, io=args.io, slot=args.slot, rank=rank, run=args.run)
    except OpLookupError as exc:
        hint = f"; closest: {', '.join(exc.matches)}" if exc.matches else ""
        raise CliError(f"{exc}{hint}") from None
    except TrendSelectorError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(doc)
        return 0
    keys = ["rank", "step", "run", "exec_index", *POINT_KEYS, "nonfinite"]
    if args.csv:  # a statistic the dump recorded as NaN/Inf is written as such, not left empty
        write_csv(keys, [[(p.get("recorded_nonfinite") or {}).get(k, p.get(k)) for k in keys] for p in doc["points"]])
        return 0
    from rich.table import Table

    con = console()
    runs = any(p.get("run") for p in doc["points"] + doc["problems"])  # a loop body: every execution shown
    t = Table(show_edge=False, title=f"{inert(doc['op'])} {doc['io']}.{doc['slot']} by step")
    for col in ("rank", "step", *(("run",) if runs else ()), "min", "max", "mean", "std", "nan", "+inf", "-inf"):
        t.add_column(col, justify="right")
    for p in doc["points"]:
        recorded = p.get("recorded_nonfinite") or {}  # the dump's own "nan"/"inf" where finite-only keys are null
        t.add_row(str(p["rank"]), "constants" if p["step"] is None else str(p["step"]),
                  *((str(p["run"]),) if runs else ()),
                  *(recorded.get(k) or fmt_num(p.get(k)) for k in ("min", "max", "mean", "std", "nan", "posinf",
                                                                      "neginf")))
    con.print(t)
    for r, k in sorted({(p["rank"], p.get("run", 0)) for p in doc["points"]}):
        pts = [p for p in doc["points"] if p["rank"] == r and p.get("run", 0) == k]
        label = f"rank {r}" + (f" run {k}" if runs else "")
        con.print(f"{label}  max  {sparkline(series(pts, 'max'))}   "
                  f"mean {sparkline(series(pts, 'mean'))}", markup=False)
        if any(point_bad(p) for p in pts):
            con.print(f"{'':{len(label)}}       {marks(pts)}   {'':5}{marks(pts)}   (! = NaN/Inf at that step; "
                      "× = no finite value, · = no data)", markup=False)
    for p in doc["problems"]:
        run = f" run {p['run']}" if runs else ""
        step = "constants" if p["step"] is None else f"step {p['step']}"
        con.print(f"  ! rank {p['rank']} {step}{run}: {inert(p['error'])}", markup=False)
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    from dumpscope.core.engines.watch.report import watch_report

    q = open_dump(args.path, args)
    doc = watch_report(q, rank=args.rank, step=args.step)
    if args.json:
        print_json(doc)
        return 0
    con = console()
    if not doc["watched"]:
        con.print("no Dump-Watch snapshots found")
        return 0
    for w in doc["watched"]:
        head = bold(w["name"])
        head.append(f"  first change after: {inert(w['first_change_after'] or '-')}", style="")
        con.print(head)
        for s in w["snapshots"]:
            mark = "CHANGED" if s["changed"] else "same   "
            con.print(f"  {mark} after {inert(s['after'])}: {s['changed_elements']} elements, max |diff| "
                      f"{fmt_num(s['max_abs_diff'])}")
    return 0
