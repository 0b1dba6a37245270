"""The ``dumpscope`` command line: the explorer, and every answer headless (CLI.md).

Errors are one line on stderr and exit code 1; usage errors exit 2.  ``--json`` prints
exactly one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from typing import Any, Callable, Iterable, Optional, Sequence

from dumpscope.core.inert import csv_cell, inert, inert_lines, json_safe

COMMANDS = ("triage", "summary", "ops", "show", "stats", "convert", "overflow", "watch", "compare", "trend",
            "explore", "help", "serve", "completion")

#: one example per subcommand, shown at the end of its --help (a subcommand without one fails a test)
EXAMPLES = {
    "explore": "dumpscope ./dump                      # or: dumpscope explore golden/ --compare target/",
    "triage": "dumpscope triage ./dump                  # or: dumpscope triage target/ --golden golden/ --md",
    "summary": "dumpscope summary /data/dump --json",
    "ops": "dumpscope ops ./dump --step 1 --grep Conv2D --csv > ops.csv",
    "show": "dumpscope show ./dump Default/network-WithLossCell/_backbone-LeNet/conv1-Conv2d/Conv2D-op0",
    "stats": "dumpscope stats ./dump Conv2D-op0 --io input --slot 1",
    "convert": "dumpscope convert ./dump ./npy --op Conv2D-op0",
    "overflow": "dumpscope overflow ./dump --csv",
    "watch": "dumpscope watch ./dump --json",
    "trend": "dumpscope trend ./dump Default/network/fc/MatMul-op4 --io output --rank all",
    "compare": "dumpscope compare golden/ target/ --output result.xlsx   # msprobe's columns; NPU = target",
    "serve": "dumpscope serve ./dump --port 8000   # then, on your laptop: ssh -L 8000:localhost:8000 HOST\n"
             "                                       # and open http://localhost:8000",
    "completion": "dumpscope completion bash > ~/.local/share/bash-completion/completions/dumpscope",
    "help": "dumpscope help compare",
}


#: human ``summary`` lists this many problems, then says how many more ``--json`` holds
MAX_PROBLEMS_SHOWN = 50


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 1."""


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-cache", action="store_true", help="do not read or write the index cache")
    p.add_argument("--cache-dir", metavar="DIR", help="where index files go (default: XDG cache dir)")
    p.add_argument("--follow-links", action="store_true",
                   help="follow symlinks whose targets lie outside PATH (default: listed as problems, not read)")


def _add_place(p: argparse.ArgumentParser) -> None:
    p.add_argument("--step", type=int, metavar="S", help="step / iteration (default: lowest present)")
    p.add_argument("--rank", type=int, metavar="R", help="rank / device (default: lowest present)")


def _add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=int, metavar="K",
                   help="which execution of an op that ran several times in the step (a loop body): "
                        "0 = the first (default); `show` lists them")


def _add_format(p: argparse.ArgumentParser, csv_ok: bool = True) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print one JSON document")
    if csv_ok:
        g.add_argument("--csv", action="store_true", help="print CSV")


def _add_exit_code(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--exit-code", action="store_true",
                   help=f"exit 3 when {what}, 0 when none (1 error, 2 usage), as `triage` always does")


class _RulesEpilogParser(argparse.ArgumentParser):
    """``compare``'s parser: its epilog lists the verdict rules, imported when the help is shown, not
    on every start (the compare package loads its engine; ``overflow`` on a cold tree should not)."""

    def format_help(self) -> str:
        if not getattr(self, "_rules_added", False):
            from dumpscope.core.engines.compare.verdict import RULES_HELP

            self.epilog = (RULES_HELP.rstrip() + "\n\n" + self.epilog) if self.epilog else RULES_HELP
            self._rules_added = True
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    from dumpscope import __version__

    parser = argparse.ArgumentParser(
        prog="dumpscope",
        description="Explore Ascend NPU operator dumps (MindSpore, CANN/TF adapter/ACL/torchair, msprobe, "
                    "Troubleshooter) in the terminal. Run `dumpscope PATH` to open the explorer.",
        epilog="`dumpscope help COMMAND` (or `dumpscope COMMAND --help`) shows a command's options and an example.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"dumpscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("explore", help="open the explorer (the default command)")
    p.add_argument("path", nargs="?", default=".", metavar="PATH")
    p.add_argument("--compare", metavar="TARGET", help="compare PATH (golden) with TARGET in the explorer")
    p.add_argument("--watch", action="store_true", help="pick up new files while the explorer is open")
    p.add_argument("--export-dir", metavar="DIR",
                   help="where screenshots (ctrl+s) and exports go (default: the working directory)")
    p.add_argument("--step", type=int, metavar="S", help="open on this step (default: the first with overflow "
                   "evidence, else the lowest); the cursor lands on its first bad op if it has one")
    p.add_argument("--rank", type=int, metavar="R", help="open on this rank (default: as --step)")
    _add_common(p)

    from dumpscope.tui.cli_triage import add_parser as add_triage

    add_triage(sub, _add_common, _int_or_all)

    p = sub.add_parser("summary", help="what was found under PATH")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--recheck", action="store_true",
                   help="look at every indexed file for changes in place (each run otherwise spends at most "
                        "0.15 s on it and continues where the last one stopped; the output says how far it got)")
    _add_format(p, csv_ok=False)
    _add_common(p)

    p = sub.add_parser("ops", help="ops in execution order")
    p.add_argument("path", metavar="PATH")
    _add_place(p)
    p.add_argument("--grep", metavar="TEXT", help="only ops whose name or type contains TEXT")
    p.add_argument("--kind", choices=("op", "parameter", "constant", "all"), default="op",
                   help="what to list: executed ops (default), parameters, constants, or all of them")
    p.add_argument("--source", metavar="FILE[:LINE]",
                   help="only ops whose source stack holds FILE (matched by suffix) at LINE, forward and backward")
    p.add_argument("--export-config", metavar="FILE",
                   help="write the listed ops as a re-dump config (CANN dump_layer, MindSpore kernels, msprobe list)")
    _add_format(p)
    _add_common(p)

    p = sub.add_parser("show", help="everything known about one op")
    p.add_argument("path", metavar="PATH")
    p.add_argument("op", metavar="OP")
    p.add_argument("--graph", action="store_true",
                   help="also the producers and consumers two hops out (the explorer's g view)")
    _add_run(p)
    _add_place(p)
    _add_format(p, csv_ok=False)
    _add_common(p)

    p = sub.add_parser("stats", help="statistics of one tensor of an op")
    p.add_argument("path", metavar="PATH")
    p.add_argument("op", metavar="OP")
    p.add_argument("--io", choices=("input", "output"), default="output")
    p.add_argument("--slot", type=int, default=0, metavar="N")
    _add_run(p)
    _add_place(p)
    _add_format(p, csv_ok=False)
    _add_common(p)

    p = sub.add_parser("convert", help="write every tensor as .npy in its logical layout")
    p.add_argument("path", metavar="PATH")
    p.add_argument("outdir", metavar="OUTDIR")
    p.add_argument("--op", metavar="OP", help="only this op")
    _add_place(p)
    _add_common(p)

    p = sub.add_parser("overflow", help="ops with overflow / NaN / Inf evidence, first = origin")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--step", type=int, metavar="S", help="only this step (default: every step)")
    p.add_argument("--rank", type=int, metavar="R", help="only this rank (default: every rank)")
    p.add_argument("--scan", choices=("auto", "all", "none"), default="auto",
                   help="scan tensor data for Inf/NaN (auto: when no Opdebug/stats evidence exists)")
    _add_exit_code(p, "an op with overflow / NaN / Inf evidence is found")
    _add_format(p)
    _add_common(p)

    p = sub.add_parser("trend", help="one tensor's statistics at every step (and rank)")
    p.add_argument("path", metavar="PATH")
    p.add_argument("op", metavar="OP")
    p.add_argument("--io", choices=("input", "output"), default="output")
    p.add_argument("--slot", type=int, default=0, metavar="N")
    p.add_argument("--rank", metavar="R|all", help="a rank, or all (default: lowest present)")
    p.add_argument("--run", type=int, metavar="K",
                   help="only the K-th execution in each step of an op that runs several times a step (a loop "
                        "body; 0 = the first); default: every execution, each a point")
    _add_format(p)
    _add_common(p)

    p = sub.add_parser("watch", help="Dump-Watch snapshots: was a watched tensor overwritten, after which op")
    p.add_argument("path", metavar="PATH")
    _add_place(p)
    _add_format(p, csv_ok=False)
    _add_common(p)

    p = sub.add_parser("compare", help="compare a golden dump with a target dump",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.__class__ = _RulesEpilogParser  # the verdict rules, loaded only when this help is shown
    p.add_argument("golden", metavar="GOLDEN")
    p.add_argument("target", metavar="TARGET")
    p.add_argument("--step", type=_int_or_all, metavar="S|all", help="step / iteration, or all (default: lowest)")
    p.add_argument("--rank", type=_int_or_all, metavar="R|all", help="rank / device, or all (default: lowest)")
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
                        "(NPU = TARGET, Bench = GOLDEN; .xlsx needs dumpscope[xlsx]), .json = the --json document")
    _add_exit_code(p, "a divergence is found (a first divergence or a row in error)")
    _add_format(p)
    _add_common(p)

    p = sub.add_parser("serve", help="the explorer in a web browser (needs dumpscope[serve])",
                       description="Serve the same explorer to a web browser with textual-serve.\n"
                                   "It listens on 127.0.0.1 (this machine only) unless --host says otherwise.\n"
                                   "On a remote machine, forward the port from your laptop:\n"
                                   "    ssh -L 8000:localhost:8000 HOST\n"
                                   "then open http://localhost:8000 in the laptop's browser.")
    p.add_argument("path", nargs="?", default=".", metavar="PATH")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; 0.0.0.0 exposes the dumps to your network)")
    p.add_argument("--port", type=int, default=8000, metavar="P",
                   help="port (default 8000); forward the same port number: ssh -L 8000:localhost:8000 HOST")
    p.add_argument("--public-url", metavar="URL",
                   help="the address the browser uses, when it is not http://HOST:PORT (a proxy, another port)")
    p.add_argument("--compare", metavar="TARGET", help="compare PATH (golden) with TARGET in the explorer")
    _add_common(p)

    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)",
                       description="Print a completion script generated from this command line.\n"
                                   "  bash: source <(dumpscope completion bash)   (e.g. in ~/.bashrc)\n"
                                   "  zsh:  dumpscope completion zsh > ~/.zfunc/_dumpscope  (a folder in $fpath)\n"
                                   "  fish: dumpscope completion fish > ~/.config/fish/completions/dumpscope.fish")
    p.add_argument("shell", choices=("bash", "zsh", "fish"))

    p = sub.add_parser("help", help="show the help of a command")
    p.add_argument("topic", nargs="?", metavar="COMMAND")
    _add_examples(sub)
    return parser


def _add_examples(sub: "argparse._SubParsersAction") -> None:
    for name, p in sub.choices.items():
        if name in EXAMPLES:  # after any epilog the command has (compare's rules)
            p.epilog = ((p.epilog.rstrip() + "\n\n") if p.epilog else "") + "example:\n  " + EXAMPLES[name]
            p.formatter_class = argparse.RawDescriptionHelpFormatter


# -- helpers --------------------------------------------------------------------------------


class _IndexProgress:
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
                err = _raw(sys.stderr)  # our own erase sequence: past the inert stream
                err.write("\r\x1b[K")
                err.flush()
            return
        if elapsed < self.DELAY_S:
            return
        err = _raw(sys.stderr)
        err.write(f"\r\x1b[Kindexing {inert(self.path)}: {prog.phase}, {prog.files:,} files, "
                  f"{prog.records:,} records, {elapsed:.0f} s")
        err.flush()
        self.shown = True


def _int_or_all(text: str):
    if text == "all":
        return "all"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'all', got {text!r}") from None


def _open(path: str, args: argparse.Namespace):
    from dumpscope.core.query import open_query

    kwargs: dict[str, Any] = {"use_cache": not getattr(args, "no_cache", False)}
    if _IndexProgress.wanted(args):
        kwargs["progress"] = _IndexProgress(path)
    if getattr(args, "cache_dir", None):
        from pathlib import Path

        kwargs["cache_directory"] = Path(args.cache_dir)
    try:
        q = open_query(path, **kwargs)
    except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
        raise CliError(str(exc)) from None
    _OPENED.append(q.index.db_path)
    for w in q.index.warnings:  # the cache could not be used: the answer comes from memory
        print(f"dumpscope: warning: {inert(w)}", file=sys.stderr)
    for other in q.other_dumps():  # never a silent answer: a dump of the same places was not read
        print(f"dumpscope: note: {inert(other['message'])}", file=sys.stderr)
        _OTHER_DUMPS.append(other)
    return q


#: index files opened by the running command (discarded and rebuilt if they turn out damaged)
_OPENED: list[str] = []
#: dumps set aside under the opened PATHs (core.dump_roots): every JSON document of the command lists them
_OTHER_DUMPS: list[dict] = []


def _print_json(doc: Any) -> None:
    # exact: json escapes C0 itself, json_safe the DEL/C1/bidi characters it leaves raw
    from dumpscope.tui.json_text import dump  # json.dumps(_clean(doc), indent=1, ensure_ascii=False), faster

    if _OTHER_DUMPS and isinstance(doc, dict) and "other_dumps" not in doc:
        doc = {**doc, "other_dumps": list(_OTHER_DUMPS)}
    write = sys.stdout.write
    dump(doc, lambda text: write(json_safe(text)))  # in parts: a big document is never whole in memory
    write("\n")


def _clean(value: Any) -> Any:
    """JSON has no NaN/Infinity: spell them as strings so the document stays valid."""
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return _clean(value.item())
        except Exception:
            return str(value)
    return value


class _InertStream:
    """The one choke point of human output: text written through it has every control character
    except newline and tab made visible, whatever command wrote it (text from a dump never
    reaches the terminal raw).  ``raw`` is the real stream, for rich consoles that add their own
    escape sequences (they make their text inert segment by segment, see :func:`_console`)."""

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


def _raw(stream: Any) -> Any:
    return stream.raw if isinstance(stream, _InertStream) else stream


class _InertRender:
    """Renders a renderable and makes the text of every segment inert (rich's own styles still apply)."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Any, options: Any):
        from rich.segment import Segment

        for seg in console.render(self.renderable, options):
            yield seg if seg.control else Segment(inert_lines(seg.text), seg.style)


class _InertHook:
    def process_renderables(self, renderables: list) -> list:
        return [_InertRender(r) for r in renderables]


def _console(stderr: bool = False):
    """The console every human answer prints through: markup off (a ``[/bold]`` in a name is text,
    not a tag) and every segment inert, so a command that forgets :func:`inert` stays safe."""
    from rich.console import Console

    stream = _raw(sys.stderr if stderr else sys.stdout)
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 160
    con = Console(file=stream, highlight=False, soft_wrap=True, width=width, markup=False, emoji=False)
    con.push_render_hook(_InertHook())
    return con


def _bold(text: Any):
    from rich.text import Text

    return Text(inert(text), style="bold")


def _write_csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(header)
    for row in rows:  # dump-derived text: inert for the terminal, and no formula for a spreadsheet
        w.writerow([csv_cell(v) for v in row])


def _fmt_num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _values(vals: list[int]) -> str:
    """"0..99" for a run of numbers, else the numbers (the first 20)."""
    if not vals:
        return "none"
    if len(vals) > 2 and vals == list(range(vals[0], vals[-1] + 1)):
        return f"{vals[0]}..{vals[-1]}"
    return ", ".join(map(str, vals[:20])) + (f", … ({len(vals)} in all)" if len(vals) > 20 else "")


def _check_place(q, rank: Optional[int], step: Optional[int]) -> None:
    """A ``--rank``/``--step`` the dump does not have is an error naming what it has, never an empty answer
    (MindSpore's constants are in no step: ``-1`` is not one)."""
    ranks = q.ranks()
    if rank is not None and rank not in ranks:
        raise CliError(f"--rank {rank}: not in this dump (ranks: {_values(ranks)})")
    if step is not None and (step < 0 or not any(  # an index seek per rank; the steps are listed only when absent
            q.index.query("SELECT 1 FROM ops WHERE rank=? AND step=? LIMIT 1", (r, step))
            for r in ([rank] if rank is not None else ranks))):
        where = f" at rank {rank}" if rank is not None else ""
        raise CliError(f"--step {step}: not in this dump{where} (steps: {_values(q.steps(rank))})")


def _lookup(q, text: str, rank: Optional[int], step: Optional[int], run: Optional[int] = None):
    from dumpscope.core.query import OpLookupError

    _check_place(q, rank, step)
    try:
        return q.resolve_op(text, rank, step, run=run)
    except OpLookupError as exc:
        hint = f"; closest: {', '.join(exc.matches)}" if exc.matches else ""
        raise CliError(f"{exc}{hint}") from None


# -- commands ---------------------------------------------------------------------------------


def cmd_summary(args: argparse.Namespace) -> int:
    from dumpscope.core.index.dump_index import DumpIndex

    budget = DumpIndex.check_budget_s
    if args.recheck:
        DumpIndex.check_budget_s = None
    try:
        q = _open(args.path, args)
    finally:
        DumpIndex.check_budget_s = budget
    doc = q.summary()
    if args.json:
        _print_json(doc)
        return 0
    from rich.table import Table

    con = _console()
    con.print(_bold(doc['path']))
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
        con.print(_bold(f"problems ({len(problems):,}):"))
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
    q = _open(args.path, args)
    _check_place(q, args.rank, args.step)
    rank, step = q.default_place(args.rank, args.step)
    kind = getattr(args, "kind", "op")
    ops = q.ops(rank, step, grep=args.grep, kind=kind) if spec is None else \
        q.ops_at_source(spec, rank, step, grep=args.grep, kind=kind)
    if args.export_config:
        _export_config(q, [op.name for op in ops], args.export_config)
    if args.json:
        _print_json({"ops": [q.op_json(op) for op in ops]})
        return 0
    if args.csv:
        rows = []
        for op in ops:
            for t in q.tensors(op.id):
                rows.append([op.exec_index, op.name, op.type, op.rank, shown_step(op.step), op.graph, t.io, t.slot,
                             t.dtype,
                             "x".join(map(str, t.shape)), t.format, "x".join(map(str, t.device_shape)), t.path,
                             op.kind])
        _write_csv(["exec_index", "name", "type", "rank", "step", "graph", "io", "slot", "dtype", "shape",
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
    _console().print(t)
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
    q = _open(args.path, args)
    op = _lookup(q, args.op, args.rank, args.step, args.run)
    doc = q.show_json(op)
    nb = None
    if args.graph:
        from dumpscope.core.engines.neighbourhood import neighbourhood

        nb = neighbourhood(q, op)
        doc["neighbourhood"] = None if nb is None else {
            str(lv): [{"name": n.name, "type": n.type, "links": n.links, "listed": n.op_id is not None}
                      for n in nodes] for lv, nodes in sorted(nb.levels.items())}
    if args.json:
        _print_json({"op": doc})
        return 0
    con = _console()
    head = _bold(doc["name"])
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

    q = _open(args.path, args)
    op = _lookup(q, args.op, args.rank, args.step, args.run)
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
        _print_json(doc)
        return 0
    con = _console()
    con.print(f"{inert(op.name)} {t.io}.{t.slot}  {inert(t.dtype)} {list(t.shape)}")
    for k in ("count", "min", "max", "mean", "std", "l2norm", "zeros", "nan", "posinf", "neginf"):
        con.print(f"  {k:7} {_fmt_num(doc.get(k))}")
    if doc.get("first_bad"):
        con.print(f"  first non-finite at {doc['first_bad'][:5]}")
    if doc.get("recorded_nonfinite"):
        con.print("  the dump recorded " + ", ".join(f"{k} {v}" for k, v in doc["recorded_nonfinite"].items()))
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from dumpscope.core.engines.convert import convert_tree

    q = _open(args.path, args)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    errors: list[str] = []
    with Progress(TextColumn("converting"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeRemainingColumn(), transient=True, disable=not sys.stderr.isatty(),
                  console=_console(stderr=True)) as bar:
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

    q = _open(args.path, args)
    _check_place(q, args.rank, args.step)
    if not sys.stderr.isatty():  # no bar to draw: rich's progress machinery is not even imported
        doc = overflow_report(q, rank=args.rank, step=args.step, scan=args.scan)
    else:
        from rich.progress import BarColumn, Progress, TextColumn

        with Progress(TextColumn("counting NaN/Inf"), BarColumn(), TextColumn("{task.completed}/{task.total} files"),
                      transient=True, console=_console(stderr=True)) as bar:
            task = bar.add_task("scan", total=None)

            def tick(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            doc = overflow_report(q, rank=args.rank, step=args.step, scan=args.scan, progress=tick)
    rows = doc["ops"]
    if args.exit_code and not rows and not doc["scanned"]:  # nothing looked at: not "clean" (exit 1, as triage)
        print("dumpscope: nothing was scanned: whether anything overflowed is not known", file=sys.stderr)
    if args.json:
        _print_json(doc)
        return _exit(args, bool(rows), known=bool(rows or doc["scanned"]))
    if args.csv:
        keys = ["exec_index", "name", "type", "rank", "step", "evidence", "status", "nan", "posinf", "neginf"]
        _write_csv(keys, [[r.get(k) for k in keys] for r in rows])
        return _exit(args, bool(rows), known=bool(rows or doc["scanned"]))
    con = _console()
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
        return _exit(args, bool(rows), known=bool(rows or doc["scanned"]))
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
    return _exit(args, bool(rows), known=bool(rows or doc["scanned"]))


def cmd_trend(args: argparse.Namespace) -> int:
    from dumpscope.core.query import OpLookupError
    from dumpscope.core.engines.trend import POINT_KEYS, TrendSelectorError, marks, point_bad, series, sparkline, trend

    rank: Any = args.rank
    if rank is not None and rank != "all":
        try:
            rank = int(rank)
        except ValueError:
            raise CliError(f"--rank: expected a number or 'all', got {args.rank!r}") from None
    q = _open(args.path, args)
    if rank != "all":
        _check_place(q, rank, None)
    try:
        doc = trend(q, args.op, io=args.io, slot=args.slot, rank=rank, run=args.run)
    except OpLookupError as exc:
        hint = f"; closest: {', '.join(exc.matches)}" if exc.matches else ""
        raise CliError(f"{exc}{hint}") from None
    except TrendSelectorError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        _print_json(doc)
        return 0
    keys = ["rank", "step", "run", "exec_index", *POINT_KEYS, "nonfinite"]
    if args.csv:  # a statistic the dump recorded as NaN/Inf is written as such, not left empty
        _write_csv(keys, [[(p.get("recorded_nonfinite") or {}).get(k, p.get(k)) for k in keys] for p in doc["points"]])
        return 0
    from rich.table import Table

    con = _console()
    runs = any(p.get("run") for p in doc["points"] + doc["problems"])  # a loop body: every execution shown
    t = Table(show_edge=False, title=f"{inert(doc['op'])} {doc['io']}.{doc['slot']} by step")
    for col in ("rank", "step", *(("run",) if runs else ()), "min", "max", "mean", "std", "nan", "+inf", "-inf"):
        t.add_column(col, justify="right")
    for p in doc["points"]:
        recorded = p.get("recorded_nonfinite") or {}  # the dump's own "nan"/"inf" where finite-only keys are null
        t.add_row(str(p["rank"]), "constants" if p["step"] is None else str(p["step"]),
                  *((str(p["run"]),) if runs else ()),
                  *(recorded.get(k) or _fmt_num(p.get(k)) for k in ("min", "max", "mean", "std", "nan", "posinf",
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

    q = _open(args.path, args)
    doc = watch_report(q, rank=args.rank, step=args.step)
    if args.json:
        _print_json(doc)
        return 0
    con = _console()
    if not doc["watched"]:
        con.print("no Dump-Watch snapshots found")
        return 0
    for w in doc["watched"]:
        head = _bold(w["name"])
        head.append(f"  first change after: {inert(w['first_change_after'] or '-')}", style="")
        con.print(head)
        for s in w["snapshots"]:
            mark = "CHANGED" if s["changed"] else "same   "
            con.print(f"  {mark} after {inert(s['after'])}: {s['changed_elements']} elements, max |diff| "
                      f"{_fmt_num(s['max_abs_diff'])}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from dumpscope.core.engines.compare import compare_dumps

    golden = _open(args.golden, args)
    target = _open(args.target, args)
    for q in (golden, target):  # built: read from now on, beside both sides' ops
        q.index.lean_cache()
    out_path = _check_output(args.output, (args.golden, args.target)) if args.output else None
    from dumpscope.core.engines.compare.api_mapping import MappingFileError

    from dumpscope.core.engines.compare.places import PlaceError, compare_places

    try:
        doc = compare_places(golden, target, rank=args.rank, step=args.step, golden_rank=args.golden_rank,
                             target_rank=args.target_rank, golden_step=args.golden_step,
                             target_step=args.target_step, rtol=args.rtol, atol=args.atol,
                             layer_mapping=args.layer_mapping, api_mapping=args.api_mapping,
                             spool_rows=True)  # read back for each output: memory does not grow with the pairs
    except (MappingFileError, PlaceError) as exc:
        raise CliError(str(exc)) from None
    if out_path:
        _write_compare_output(doc, out_path, golden, target)
    if args.export_config:
        from dumpscope.core.engines.compare import export_redump_config
        from dumpscope.core.engines.redump_config import RedumpConfigError

        try:
            export_redump_config(doc, args.export_config)
        except RedumpConfigError as exc:
            raise CliError(str(exc)) from None
    if args.json:
        _print_json(doc)
        return _exit(args, _diverged(doc) if args.exit_code else False)
    keys = ["name", "io", "slot", "step", "rank", "cosine", "euc_dist", "max_abs_err", "max_rel_err",
            "one_thousandth_ratio", "five_thousandth_ratio", "verdict", "rule", "match", "kind", "origin",
            "target_name", "judgement", "rel_err", "allowed", "precision"] + (["target_rank", "target_step"] if any("target_step" in r for r in doc["rows"]) else [])
    if args.csv:
        _write_csv(keys, ([r.get(k) for k in keys] for r in doc["rows"]))  # one row at a time
        return _exit(args, _diverged(doc) if args.exit_code else False)
    from rich.table import Table

    places = doc.get("places")
    t = Table(show_edge=False, title="compare (golden vs target), " +
              ("by step, rank, then execution order" if places else "execution order"))
    for col in ("", *(("place",) if places else ()), "name", "io", "cosine", "max_abs", "max_rel", "verdict",
                "origin", "rule"):
        t.add_column(col, overflow="fold")
    fd = doc.get("first_divergence") or {}
    glyph = {"pass": "✓", "warning": "~", "error": "✗"}
    for r in doc["rows"]:
        first = fd and r["name"] == fd.get("name") and r["io"] == fd.get("io") and r["slot"] == fd.get("slot") \
            and r.get("step") == fd.get("step") and r.get("rank") == fd.get("rank")
        name = r["name"] if r.get("target_name") in (None, r["name"]) else f"{r['name']} ↔ {r['target_name']}"
        where = [f"r{r['rank']} s{r['step']}" + (f"→r{r['target_rank']} s{r['target_step']}"
                                                  if "target_step" in r else "")] if places else []
        t.add_row("▶" if first else "", *where, inert(name), f"{r['io']}.{r['slot']}", _fmt_num(r["cosine"]),
                  _fmt_num(r["max_abs_err"]), _fmt_num(r["max_rel_err"]),
                  f"{glyph.get(r['verdict'], '?')} {r['verdict']}", r.get("origin") or "", inert(r["rule"]))
    con = _console()
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
    return _exit(args, _diverged(doc) if args.exit_code else False)


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
        out.append(f"  {_fmt_num(n.get('share_of_allowed'))} of the line  {inert(str(n.get('name')))} "
                   f"{inert(str(n.get('tensor')))}  rel err {_fmt_num(n.get('rel_err'))} / allowed "
                   f"{_fmt_num(n.get('allowed'))} at {inert(str(n.get('precision') or '-'))} ({n.get('judgement')})")
    return out


def _exit(args: argparse.Namespace, trouble: bool, known: bool = True) -> int:
    """``--exit-code``: 3 when trouble was found (a CI job gates on it), 1 when nothing could be looked at,
    else 0."""
    if not getattr(args, "exit_code", False):
        return 0
    return 3 if trouble else 0 if known else 1


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
    if ext == ".xlsx" and not cr.xlsx_available():
        raise CliError(cr.XLSX_MISSING)
    try:
        cr.check_outside(path, roots)
    except cr.ExportError as exc:
        raise CliError(str(exc)) from None
    if not os.path.isdir(os.path.dirname(path)):
        raise CliError(f"--output {path}: no such directory {os.path.dirname(path)}")
    return path


def _write_compare_output(doc: dict[str, Any], path: str, golden, target) -> None:
    from dumpscope.core.engines.compare import report as cr

    try:
        if path.lower().endswith(".json"):
            from dumpscope.tui.json_text import dump  # json.dumps(_clean(doc), indent=1, ensure_ascii=False)

            from dumpscope.core.support.atomic_write import replaced_file

            with replaced_file(path, "w", encoding="utf-8") as fh:
                dump(doc, fh.write)  # in parts, the rows read back one by one
                fh.write("\n")
            n = len(doc.get("rows", []))
        else:
            n = cr.write_table(doc, path, cr.describe_sides(doc, golden, target))
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None
    except cr.ExportError as exc:
        raise CliError(str(exc)) from None
    print(f"wrote {n} rows to {inert(path)}", file=sys.stderr)


def cmd_explore(args: argparse.Namespace) -> int:
    if not os.path.exists(args.path):
        raise CliError(f"{args.path}: no such file or directory")
    if not os.path.isdir(args.path):
        raise CliError(f"{args.path}: not a directory")
    if args.compare and not os.path.isdir(args.compare):
        raise CliError(f"{args.compare}: no such directory")
    if args.export_dir and not os.path.isdir(args.export_dir):
        raise CliError(f"{args.export_dir}: --export-dir is not a directory")
    from dumpscope.core.engines.child_jobs import prestart_build

    early = prestart_build(args.path, not args.no_cache, args.cache_dir)  # a cold build starts before Textual
    try:
        from dumpscope.tui.app import DumpscopeApp

        app = DumpscopeApp(args.path, compare_with=args.compare, use_cache=not args.no_cache, watch=args.watch,
                           cache_dir=args.cache_dir, export_dir=args.export_dir, early_build=early,
                           rank=args.rank, step=args.step)
        app.run()
    finally:
        if early is not None:
            early.kill()
    return app.return_code or 0


def cmd_serve(args: argparse.Namespace) -> int:
    from dumpscope.tui.serve import serve

    if not os.path.isdir(args.path):
        raise CliError(f"{args.path}: no such directory")
    if args.compare and not os.path.isdir(args.compare):
        raise CliError(f"{args.compare}: no such directory")
    try:
        serve(args.path, host=args.host, port=args.port, compare=args.compare, no_cache=args.no_cache,
              cache_dir=args.cache_dir, public_url=args.public_url)
    except (ImportError, OSError, ValueError) as exc:
        raise CliError(str(exc)) from None
    return 0


def cmd_completion(args: argparse.Namespace) -> int:
    from dumpscope.tui.completion import script

    sys.stdout.write(script(args.shell, build_parser()))
    return 0


def cmd_triage(args: argparse.Namespace) -> int:
    from dumpscope.tui.cli_triage import cmd_triage as run

    return run(args)


def cmd_help(args: argparse.Namespace) -> int:
    parser = build_parser()
    if not args.topic:
        parser.print_help()
        return 0
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if args.topic not in sub.choices:
        raise CliError(f"no command {args.topic!r}; commands: {', '.join(sub.choices)}")
    sub.choices[args.topic].print_help()
    return 0


_HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "triage": cmd_triage, "summary": cmd_summary, "ops": cmd_ops, "show": cmd_show, "stats": cmd_stats,
    "convert": cmd_convert,
    "overflow": cmd_overflow, "watch": cmd_watch, "trend": cmd_trend, "compare": cmd_compare, "explore": cmd_explore,
    "serve": cmd_serve, "completion": cmd_completion, "help": cmd_help,
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "-V", "--version")):
        argv = ["explore", *argv]
    parser = build_parser()
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
    sys.stdout, sys.stderr = _InertStream(out), _InertStream(err)
    try:
        return _run(args)
    finally:
        sys.stdout, sys.stderr = out, err


def _run(args: argparse.Namespace) -> int:
    import sqlite3

    _OPENED.clear()
    _OTHER_DUMPS.clear()
    try:
        try:
            return _HANDLERS[args.command](args)
        except sqlite3.DatabaseError as exc:
            # damaged pages that opening could not see: discard those index files and answer from fresh ones
            from pathlib import Path

            from dumpscope.core.index.faults import discard, is_damage

            files = [p for p in _OPENED if p != ":memory:"]
            if not files or not is_damage(exc):
                raise
            for p in files:
                discard(Path(p))
                print(f"dumpscope: warning: index cache {inert(p)} was damaged ({inert(exc)}): rebuilt",
                      file=sys.stderr)
            _OPENED.clear()
            _OTHER_DUMPS.clear()
            return _HANDLERS[args.command](args)
    except CliError as exc:
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
