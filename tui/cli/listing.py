"""``summary``, ``ops``, ``show``, ``stats``: what was found, the ops of a place, one op, one tensor."""

from __future__ import annotations

import argparse
import json
import sys

from dumpscope.core.inert import inert, inert_lines
from dumpscope.tui.cli.common import CliError, check_place, lookup, open_dump
from dumpscope.tui.cli.options import add_common, add_format, add_place, add_run
from dumpscope.tui.cli.output import bold, console, fmt_num, print_json, write_csv


#: human ``summary`` lists this many problems, then says how many more ``--json`` holds
MAX_PROBLEMS_SHOWN = 50


def add_parsers(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("summary", help="what was found under PATH")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--recheck", action="store_true",
                   help="look at every indexed file for changes in place (each run otherwise spends at most "
                        "0.15 s on it and continues where the last one stopped; the output says how far it got)")
    add_format(p, csv_ok=False)
    add_common(p)

    p = sub.add_parser("ops", help="ops in execution order")
    p.add_argument("path", metavar="PATH")
    add_place(p)
    p.add_argument("--grep", metavar="TEXT", help="only ops whose name or type contains TEXT")
    p.add_argument("--kind", choices=("op", "parameter", "constant", "all"), default="op",
                   help="what to list: executed ops (default), parameters, constants, or all of them")
    p.add_argument("--source", metavar="FILE[:LINE]",
                   help="only ops whose source stack holds FILE (matched by suffix) at LINE, forward and backward")
    p.add_argument("--export-config", metavar="FILE",
                   help="write the listed ops as a re-dump config (CANN dump_layer, MindSpore kernels, msprobe list)")
    add_format(p)
    add_common(p)

    p = sub.add_parser("show", help="everything known about one op")
    p.add_argument("path", metavar="PATH")
    p.add_argument("op", metavar="OP")
    p.add_argument("--graph", action="store_true",
                   help="also the producers and consumers two hops out (the explorer's g view)")
    add_run(p)
    add_place(p)
    add_format(p, csv_ok=False)
    add_common(p)

    p = sub.add_parser("stats", help="statistics of one tensor of an op")
    p.add_argument("path", metavar="PATH")
    p.add_argument("op", metavar="OP")
    p.add_argument("--io", choices=("input", "output"), default="output")
    p.add_argument("--slot", type=int, default=0, metavar="N")
    add_run(p)
    add_place(p)
    add_format(p, csv_ok=False)
    add_common(p)


def cmd_summary(args: argparse.Namespace) -> int:
    from dumpscope.core.index.dump_index import DumpIndex

    budget = DumpIndex.check_budget_s
    if args.recheck:
        DumpIndex.check_budget_s = None
    try:
        q = open_dump(args.path, args)
    finally:
        DumpIndex.check_budget_s = budget
    doc = q.summary()
    if args.json:
        print_json(doc)
        return 0
    from rich.table import Table

    con = console()
    con.print(bold(doc['path']))
    t = Table(title="layouts", show_edge=False)
    t.add_column("layout")
    t.add_column("files", justify="right")
    t.add_column("root")
    for lay in doc["layouts"]:
        t.add_row(inert(lay["name"]), str(lay["files"]),
                  inert(lay["root"]) + ("  (set aside: another dump of the same places)" if lay.get("set_aside") else ""))
    con.print(t)
    con.print(f"ranks: {doc['ranks']}   steps: {doc['steps']}   graphs: {doc['graphs']}")
    con.print(f"ops: {doc['ops']}   parameters: {doc['parameters']}   constants: {doc['constants']}   "
              f"tensors: {doc['tensors']}   files: {doc['files']} "
              f"(not recognised: {doc['skipped_files']})")
    acc = doc.get("accounting") or {}
    con.print("files: " + ", ".join(f"{acc[k]} {k.replace('_', ' ')}" for k in
                                     ("tensor", "stats", "graph", "order", "overflow", "metadata", "problem",
                                      "not_recognised", "other_dump") if acc.get(k)))
    for g in doc["graph_files"]:
        if g.get("joined", True) or g.get("listed"):
            how = "joined to the dump" if g.get("joined", True) else "listed as ops (no tensors)"
            con.print(f"graph {inert(repr(g['graph']))} (rank {g['rank']}): {inert(g['name'])} from "
                      f"{inert(g['file'])}  [{how}]")
        else:
            why = g.get("error") or g.get("note") or "joins no dumped graph"
            con.print(f"graph file {inert(g['file'])}: {inert(g.get('name') or '?')} not joined ({inert(why)})")
    if doc["problems"]:
        problems = doc["problems"]
        con.print(bold(f"problems ({len(problems):,}):"))
        # one line per problem, all in one print: 100k problems print in a second, not a minute
        con.print("\n".join(f"  ! {inert(p['path'])}: {inert(p['error'])}" for p in problems[:MAX_PROBLEMS_SHOWN]))
        if len(problems) > MAX_PROBLEMS_SHOWN:
            con.print(f"  … and {len(problems) - MAX_PROBLEMS_SHOWN:,} more; --json for all")
    else:
        con.print("problems: none")
    if q.index.freshness is not None and q.index.freshness.note():
        con.print(q.index.freshness.note())
    return 0


def cmd_ops(args: argparse.Namespace) -> int:
    from dumpscope.core.query import shown_step

    spec = None
    if args.source:
        from dumpscope.core.graphs.source_match import SourceSpec, SourceSpecError

        try:
            spec = SourceSpec.parse(args.source)
        except SourceSpecError as exc:
            raise CliError(f"--source {exc}") from None
    q = open_dump(args.path, args)
    check_place(q, args.rank, args.step)
    rank, step = q.default_place(args.rank, args.step)
    kind = getattr(args, "kind", "op")
    ops = q.ops(rank, step, grep=args.grep, kind=kind) if spec is None else \
        q.ops_at_source(spec, rank, step, grep=args.grep, kind=kind)
    if args.export_config:
        _export_config(q, [op.name for op in ops], args.export_config)
    if args.json:
        print_json({"ops": [q.op_json(op) for op in ops]})
        return 0
    if args.csv:
        rows = []
        for op in ops:
            for t in q.tensors(op.id):
                rows.append([op.exec_index, op.name, op.type, op.rank, shown_step(op.step), op.graph, t.io, t.slot,
                             t.dtype,
                             "x".join(map(str, t.shape)), t.format, "x".join(map(str, t.device_shape)), t.path,
                             op.kind])
        write_csv(["exec_index", "name", "type", "rank", "step", "graph", "io", "slot", "dtype", "shape",
                    "format", "device_shape", "file", "kind"], rows)
        return 0
    from rich.table import Table

    noun = {"op": "ops", "parameter": "parameters", "constant": "constants"}.get(kind, "ops, parameters, constants")
    what = f" at {spec}" if spec is not None else ""
    t = Table(show_edge=False, title=f"rank {rank} step {step}: {len(ops)} {noun}{what}")
    several_graphs = len({op.graph for op in ops}) > 1
    for col in ("#", "type", "name", *(("graph",) if several_graphs else ()), "outputs"):
        t.add_column(col, overflow="fold")
    for op in ops:
        outs = [x for x in q.tensors(op.id) if x.io == "output"]
        desc = ", ".join(f"{x.dtype}{list(x.shape)}" + (f" {x.format}" if x.format not in ("ND", "DefaultFormat")
                                                       else "") for x in outs[:3])
        badge = " !" if op.bad else ""
        t.add_row("-" if op.exec_index is None else str(op.exec_index), inert(op.type), inert(op.name) + badge,
                  *((inert(op.graph),) if several_graphs else ()), inert(desc))
    console().print(t)
    return 0


def _export_config(q, names: list[str], path: str) -> None:
    """Write ``names`` as the re-dump config (never inside the dump tree); the note goes to stderr."""
    from dumpscope.core.engines.redump_config import RedumpConfigError, write_redump_config

    try:
        left_out = write_redump_config(names, path, [q.root])
    except RedumpConfigError as exc:
        raise CliError(str(exc)) from None
    note = f"; {len(left_out)} names hold spaces and are not in dump_layer" if left_out else ""
    print(f"wrote the re-dump config of {len(dict.fromkeys(names))} ops to {path}{note}", file=sys.stderr)


def cmd_show(args: argparse.Namespace) -> int:
    q = open_dump(args.path, args)
    op = lookup(q, args.op, args.rank, args.step, args.run)
    doc = q.show_json(op)
    nb = None
    if args.graph:
        from dumpscope.core.engines.neighbourhood import neighbourhood

        nb = neighbourhood(q, op)
        doc["neighbourhood"] = None if nb is None else {
            str(lv): [{"name": n.name, "type": n.type, "links": n.links, "listed": n.op_id is not None}
                      for n in nodes] for lv, nodes in sorted(nb.levels.items())}
    if args.json:
        print_json({"op": doc})
        return 0
    con = console()
    head = bold(doc["name"])
    head.append(f"  ({inert(doc['type'])})", style="")
    con.print(head)
    where = f"exec {doc['exec_index']}" if doc.get("kind", "op") == "op" else f"{inert(doc['kind'])} (not executed)"
    step = "no step (constants)" if doc["step"] is None else f"step {doc['step']}"
    con.print(f"rank {doc['rank']}  {step}  graph {inert(doc['graph'])}  {where}  "
              f"file name {inert(doc['file_name'])}")
    if len(doc.get("runs", [])) > 1:
        con.print(f"run {doc['run']} of {len(doc['runs'])} in this step (--run K): "
                  + ", ".join(f"{r['run']} exec {r['exec_index']}" for r in doc["runs"]))
    for note in doc.get("dtype_notes", []):
        con.print(f"note: {inert(note)}")
    if doc.get("join_note"):
        con.print(f"? graph name unknown: {inert(doc['join_note'])}; kept the file-side name, "
                  f"placed under scope {inert(doc.get('scope') or '(top)')}")
    for t in doc["tensors"]:
        plain = t["format"] in ("ND", "DefaultFormat", "")
        dev = f"  device {t['format']} {t['device_shape']}" if t["device_shape"] and (
            t["device_shape"] != t["shape"] or not plain) else ""
        arg = f"{t['arg']} " if t.get("arg") is not None else ""
        if t.get("storage") == "value":  # a non-tensor argument (msprobe): its value, not a file
            con.print(f"  {t['io']:6} {t['slot']}: {inert(arg)}= {inert(json.dumps(t.get('value'), default=str))}"
                      f"  ({inert(t['dtype'])})")
            continue
        grad = "  (parameter gradient)" if t.get("parameters_grad") else ""
        con.print(f"  {t['io']:6} {t['slot']}: {inert(arg)}{inert(t['dtype'])} {t['shape']}{inert(dev)}{grad}  "
                  f"{inert(t['file'])}")
    for io, key in (("input", "input_descs"), ("output", "output_descs")):
        for slot, d in enumerate(doc.get(key) or []):
            dev = f"  device {d.get('format', '')} {d.get('device_shape')}" if d.get("device_shape") not in (
                None, d.get("shape")) or d.get("format") not in (None, "", "ND", "DefaultFormat") else ""
            con.print(f"  {io:6} {slot}: {inert(str(d.get('dtype') or '?'))} {d.get('shape')}{inert(dev)}  (graph)")
    for key in ("inputs_from", "control_from", "consumers"):
        if doc[key]:
            con.print(f"{key}: " + ", ".join(inert(x) for x in doc[key]))
    if doc.get("original_op_names"):
        con.print("fused from (_datadump_original_op_names): " + ", ".join(inert(x) for x in doc["original_op_names"]))
    if doc["attrs"]:
        con.print("attrs:")
        for k, v in list(doc["attrs"].items())[:60]:
            con.print(f"  {inert(k)}: {inert(v)}")
    if doc["source"]:
        user = doc.get("user_frame")
        if user:
            con.print(f"your code: {inert(user['file'])}:{inert(user['line'])}  "
                      f"{inert(str(user.get('code') or '').strip())}")
        con.print("source (outermost first; > your code):")
        for s in doc["source"]:
            mark = ">" if s.get("user") else " "
            con.print(f" {mark}{inert(s['file'])}:{inert(s['line'])}  {inert(str(s.get('code') or '').strip())}")
    if not doc["source"]:
        for line in doc.get("stack", []) or []:
            con.print(f"  {inert(line)}")
    if doc.get("graph_file"):
        con.print(f"graph: {inert(doc['graph_file']['name'])} ({inert(doc['graph_file']['file'])})")
    if args.graph:
        from dumpscope.core.engines.neighbourhood import draw

        con.print(inert_lines("\n".join(draw(nb, con.width or 80, nb.center).lines)) if nb is not None
                  else "no graph describes this op")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from dumpscope.core.tensors.load import TensorLoadError

    q = open_dump(args.path, args)
    op = lookup(q, args.op, args.rank, args.step, args.run)
    tensors = [t for t in q.tensors(op.id) if t.io == args.io and t.slot == args.slot]
    if not tensors:
        have = ", ".join(t.label for t in q.tensors(op.id)) or "none"
        raise CliError(f"{op.name}: no {args.io} {args.slot} (tensors: {have})")
    t = tensors[0]
    try:
        st = q.tensor_stats(t)
    except TensorLoadError as exc:
        raise CliError(str(exc)) from None
    doc = {"op": op.name, "io": t.io, "slot": t.slot, "step": op.step, "rank": op.rank, "dtype": t.dtype,
           "shape": list(t.shape), "run": q.run_of(op)[0], "exec_index": op.exec_index}
    doc.update(st)
    if args.json:
        print_json(doc)
        return 0
    con = console()
    con.print(f"{inert(op.name)} {t.io}.{t.slot}  {inert(t.dtype)} {list(t.shape)}")
    for k in ("count", "min", "max", "mean", "std", "l2norm", "zeros", "nan", "posinf", "neginf"):
        con.print(f"  {k:7} {fmt_num(doc.get(k))}")
    if doc.get("first_bad"):
        con.print(f"  first non-finite at {doc['first_bad'][:5]}")
    if doc.get("recorded_nonfinite"):
        con.print("  the dump recorded " + ", ".join(f"{k} {v}" for k, v in doc["recorded_nonfinite"].items()))
    return 0
