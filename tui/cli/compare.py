"""``compare``: a golden dump against a target dump, row by row, and its first divergence."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

from dumpscope.core.inert import inert
from dumpscope.tui.cli import compare_text
from dumpscope.tui.cli.common import CliError, exit_status, open_dump
from dumpscope.tui.cli.options import add_common, add_exit_code, add_format, int_or_all
from dumpscope.tui.cli.output import console, fmt_num, print_json, write_csv


class _RulesEpilogParser(argparse.ArgumentParser):
    """``compare``'s parser: its epilog lists the verdict rules, imported when the help is shown, not
    on every start (the compare package loads its engine; ``overflow`` on a cold tree should not)."""

    def format_help(self) -> str:
        if not getattr(self, "_rules_added", False):
            from dumpscope.core.engines.compare.verdict import RULES_HELP

            self.epilog = (RULES_HELP.rstrip() + "\n\n" + self.epilog) if self.epilog else RULES_HELP
            self._rules_added = True
        return super().format_help()


def add_parsers(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("compare", help="compare a golden dump with a target dump",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.__class__ = _RulesEpilogParser  # the verdict rules, loaded only when this help is shown
    p.add_argument("golden", metavar="GOLDEN")
    p.add_argument("target", metavar="TARGET")
    p.add_argument("--step", type=int_or_all, metavar="S|all", help="step / iteration, or all (default: lowest)")
    p.add_argument("--rank", type=int_or_all, metavar="R|all", help="rank / device, or all (default: lowest)")
    p.add_argument("--golden-step", type=int, metavar="S", help="this step of GOLDEN (with --target-step)")
    p.add_argument("--target-step", type=int, metavar="S2", help="against this step of TARGET (may be PATH itself)")
    p.add_argument("--golden-rank", type=int, metavar="R", help="this rank of GOLDEN (with --target-rank)")
    p.add_argument("--target-rank", type=int, metavar="R2", help="against this rank of TARGET")
    p.add_argument("--rtol", type=float, metavar="X",
                   help="relative tolerance: numpy allclose replaces the default element rules")
    p.add_argument("--atol", type=float, metavar="X",
                   help="absolute tolerance: numpy allclose replaces the default element rules")
    p.add_argument("--export-config", metavar="FILE",
                   help="write the diverging ops as a re-dump op list (MindSpore kernels / CANN dump_layer)")
    p.add_argument("--layer-mapping", metavar="FILE",
                   help="msprobe layer_mapping.yaml: pair MindSpore and PyTorch calls through renamed modules")
    p.add_argument("--api-mapping", metavar="FILE",
                   help="msprobe api_mapping.yaml (ms_api/pt_api entries) on top of the built-in MindSpore-PyTorch pairs")
    p.add_argument("--output", "-o", metavar="FILE",
                   help="also write the results to FILE: .csv / .xlsx with msprobe's compare columns "
                        "(NPU = TARGET, Bench = GOLDEN), .json = the --json document")
    add_exit_code(p, "a divergence is found (a first divergence or a row in error)")
    add_format(p)
    add_common(p)


def cmd_compare(args: argparse.Namespace) -> int:
    golden = open_dump(args.golden, args)
    target = open_dump(args.target, args)
    for q in (golden, target):  # built: read from now on, beside both sides' ops
        q.index.lean_cache()
    out_path = _check_output(args.output, (args.golden, args.target)) if args.output else None
    from dumpscope.core.engines.compare.api_mapping import MappingFileError

    from dumpscope.core.engines.compare.places import PlaceError, compare_places
    from dumpscope.tui.json_text import row_block_text

    # --json: the rows are kept as the document prints them and copied into it (printed once); a table
    # (--output x.csv|.xlsx) is written as the rows are made, their sides filled for the print too (no
    # print shows a side but --json's); with --export-config, from the rows after the compare, as before
    printed = bool(args.json and not args.export_config)
    made = _table_as_made(out_path, golden, target, printed) if out_path and not args.export_config else None
    # the terminal's table: its cells made as the rows are made, not from every row read back (one place:
    # ``--rank/--step all`` compares several, whose table has a place column, made from the rows)
    terminal = (compare_text.TerminalCells() if not args.json and not args.csv and "all" not in (args.rank, args.step)
                else None)
    sinks = [s.add for s in (made, terminal) if s is not None]

    def both(rows: list[dict[str, Any]]) -> None:
        for add in sinks:
            add(rows)

    sink = both if len(sinks) > 1 else (sinks[0] if sinks else None)
    try:
        doc = compare_places(golden, target, rank=args.rank, step=args.step, golden_rank=args.golden_rank,
                             target_rank=args.target_rank, golden_step=args.golden_step,
                             target_step=args.target_step, rtol=args.rtol, atol=args.atol,
                             layer_mapping=args.layer_mapping, api_mapping=args.api_mapping,
                             spool_rows=True,  # read back for each output: memory does not grow with the pairs
                             row_printer=row_block_text if printed else None,
                             row_sink=sink)
    except BaseException as exc:
        if made is not None:
            made.abandon()
        if isinstance(exc, (MappingFileError, PlaceError)):
            raise CliError(str(exc)) from None
        raise
    if out_path and made is None:  # --output x.json, or with --export-config: from the rows now
        _write_compare_output(doc, out_path, golden, target)
    elif made is not None and not args.json:  # (the table in place before the rows are printed, as from the rows)
        _finish_compare_output(made, out_path, doc)
    if args.export_config:
        from dumpscope.core.engines.compare import export_redump_config
        from dumpscope.core.engines.redump_config import RedumpConfigError

        try:
            export_redump_config(doc, args.export_config)
        except RedumpConfigError as exc:
            raise CliError(str(exc)) from None
    if args.json:
        try:
            print_json(doc)
        except BaseException:
            if made is not None:  # a print stopped half-way (a closed pipe) leaves no half table
                made.abandon()
            raise
        if made is not None:
            _finish_compare_output(made, out_path, doc)
        return exit_status(args, _diverged(doc) if args.exit_code else False)
    if args.csv:
        keys = ["name", "io", "slot", "step", "rank", "cosine", "euc_dist", "max_abs_err", "max_rel_err",
                "one_thousandth_ratio", "five_thousandth_ratio", "verdict", "rule", "match", "kind", "origin",
                "target_name", "judgement", "rel_err", "allowed", "precision"] + (
                    ["target_rank", "target_step"] if any("target_step" in r for r in doc["rows"]) else [])
        write_csv(keys, ([r.get(k) for k in keys] for r in doc["rows"]))  # one row at a time
        return exit_status(args, _diverged(doc) if args.exit_code else False)
    places = doc.get("places")
    fd = doc.get("first_divergence") or {}

    def cells(r: dict[str, Any]) -> list[Any]:
        return compare_text.row_cells(r, compare_text.is_first_row(r, fd), bool(places))

    title = "compare (golden vs target), " + ("by step, rank, then execution order" if places else "execution order")
    con = console()
    if len(doc["rows"]) > compare_text.RICH_ROWS:  # a big compare: streamed, not measured whole by rich
        con.print(title, markup=False, highlight=False)
        con.file.flush()
        marked = (terminal.first_rows(fd, doc["rows"]) if terminal is not None and not places
                  and len(terminal) == len(doc["rows"]) else None)
        if marked is not None:  # (the cells made as the rows were: none read back but the first divergence's)
            compare_text.print_rows(enumerate(terminal.cells()),  # type: ignore[union-attr]
                                    lambda kt: ["▶" if kt[0] in marked else "", *kt[1]], False, con.width)
        else:
            compare_text.print_rows(doc["rows"], cells, bool(places), con.width)
        sys.stdout.flush()
    else:
        from rich.table import Table

        t = Table(show_edge=False, title=title)
        for col in ("", *(("place",) if places else ()), "name", "io", "cosine", "max_abs", "max_rel", "verdict",
                    "origin", "rule"):
            t.add_column(col, overflow="fold")
        for r in doc["rows"]:
            t.add_row(*cells(r))
        con.print(t)
    con.print(f"first divergence: {inert(fd.get('name', '-'))} {fd.get('io', '')}.{fd.get('slot', '')} "
              f"({fd.get('cause')}: {inert(fd.get('rule'))})" if fd else "first divergence: none")
    if fd.get("reason"):  # several places diverged in its step: why this one (the collective rule)
        con.print(inert(fd["reason"]), markup=False)
    for line in _precision_lines(doc):
        con.print(line, markup=False, highlight=False)
    if doc["unmatched_golden"] or doc["unmatched_target"]:
        con.print(f"unmatched: {len(doc['unmatched_golden'])} golden, {len(doc['unmatched_target'])} target")
    if not doc["rows"]:
        c = doc.get("compared", {})
        con.print(f"nothing compared: no matched tensors (golden {c.get('golden_ops', 0)} ops, "
                  f"target {c.get('target_ops', 0)} ops)")
    g, tg = doc.get("golden") or {}, doc.get("target") or {}
    if not places and (g.get("rank"), g.get("step")) != (tg.get("rank"), tg.get("step")):
        con.print(f"compared golden rank {g.get('rank')} step {g.get('step')} with target rank {tg.get('rank')} "
                  f"step {tg.get('step')}")
    if places:
        con.print("compared: " + ", ".join(
            f"rank {p['golden']['rank']} step {p['golden']['step']}"
            + ("" if (p["golden"]["rank"], p["golden"]["step"]) == (p["target"]["rank"], p["target"]["step"])
               else f" vs rank {p['target']['rank']} step {p['target']['step']}") + f" ({p['rows']} rows)"
            for p in places))
        for side in ("golden", "target"):
            left = doc["unmatched_places"][side]
            if left:
                con.print(f"only in {side}: " + ", ".join(f"rank {p['rank']} step {p['step']}" for p in left))
    return exit_status(args, _diverged(doc) if args.exit_code else False)


def _precision_lines(doc: dict[str, Any]) -> list[str]:
    """What each side ran in; with no first divergence, the evidence and the rows nearest the line
    (each error as a share of what its inputs and one rounding allow: 1.0 is the line)."""
    prec, ev = doc.get("precision") or {}, doc.get("evidence") or {}
    out = []
    if prec.get("target_text") or prec.get("golden_text"):
        out.append(f"precision: target {inert(prec.get('target_text') or '-')}; "
                   f"golden {inert(prec.get('golden_text') or '-')}")
    if doc.get("first_divergence") or not ev.get("text"):
        return out
    out.append(inert(str(ev["text"])))
    for n in ev.get("nearest") or []:
        out.append(f"  {fmt_num(n.get('share_of_allowed'))} of the line  {inert(str(n.get('name')))} "
                   f"{inert(str(n.get('tensor')))}  rel err {fmt_num(n.get('rel_err'))} / allowed "
                   f"{fmt_num(n.get('allowed'))} at {inert(str(n.get('precision') or '-'))} ({n.get('judgement')})")
    return out


def _diverged(doc: dict[str, Any]) -> bool:
    """A compare found a divergence: its first divergence, or any row in error (read from the spool)."""
    return bool(doc.get("first_divergence")) or any(r.get("verdict") == "error" for r in doc["rows"])


def _check_output(path: str, roots: Sequence[str]) -> str:
    """Refuse before the (possibly long) compare: a bad extension, a dump tree, a missing extra."""
    from dumpscope.core.engines.compare import report as cr

    path = os.path.abspath(os.path.expanduser(path))
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".csv", ".xlsx", ".json"):
        raise CliError(f"--output {path}: unknown output type {ext or '(none)'!r}: use .csv, .xlsx or .json")
    try:
        cr.check_outside(path, roots)
    except cr.ExportError as exc:
        raise CliError(str(exc)) from None
    if not os.path.isdir(os.path.dirname(path)):
        raise CliError(f"--output {path}: no such directory {os.path.dirname(path)}")
    return path


def _write_compare_output(doc: dict[str, Any], path: str, golden, target) -> None:
    """Write ``--output`` from the document: a ``.json``, or a table with ``--export-config`` (its rows left
    as the compare made them, as before); a table is otherwise written as the rows are made
    (``_table_as_made``)."""
    from dumpscope.core.engines.compare import report as cr

    try:
        if path.lower().endswith(".json"):
            from dumpscope.tui.json_text import dump  # json.dumps(clean(doc), indent=1, ensure_ascii=False)

            from dumpscope.core.support.atomic_write import replaced_file

            with replaced_file(path, "w", encoding="utf-8") as fh:
                dump(doc, fh.write)  # in parts, the rows read back one by one
                fh.write("\n")
            n = len(doc.get("rows", []))
        else:
            from dumpscope.core.engines.compare.table_file import write_table

            n = write_table(doc, path, cr.describe_sides(doc, golden, target))
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
    except cr.ExportError as exc:
        raise CliError(str(exc)) from None
    print(f"wrote {n} rows to {inert(path)}", file=sys.stderr)


def _table_as_made(path: str, golden, target, printed: bool = False) -> Any:
    """``--output x.csv|.xlsx``: the table written as the rows are made (``TableAsMade``); None for a
    ``.json`` output (written from the document).  ``printed``: the rows are printed as JSON too (each
    column of floats spelled once for both)."""
    if not path.lower().endswith((".csv", ".xlsx")):
        return None
    from dumpscope.core.engines.compare.report import block_filler, side_filler
    from dumpscope.core.engines.compare.table_file import TableAsMade

    fill, stacks = side_filler(golden, target)
    return TableAsMade(path, block_filler(fill), stacks, printed)


def _finish_compare_output(table: Any, path: str, doc: dict[str, Any]) -> None:
    """The table written as the rows were made (``TableAsMade``): in place, or its error."""
    from dumpscope.core.engines.compare import report as cr

    try:
        n = table.finish(doc)
    except cr.ExportError as exc:
        raise CliError(str(exc)) from None
    print(f"wrote {n} rows to {inert(path)}", file=sys.stderr)
