"""The ``dumpscope`` command line's parser: one subcommand per family module, in the order ``--help`` lists
them, each with an example at the end of its help."""

from __future__ import annotations

import argparse
from typing import Optional

from dumpscope.tui.cli import compare, convert, explore, listing, overflow, triage, watch
from dumpscope.tui.cli.common import CliError

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


#: the commands each family adds (``None`` in :func:`build_parser`: all of them, in ``--help``'s order)
_FAMILIES = (
    (("explore",), explore.add_explore_parser),
    (("triage",), triage.add_parsers),
    (("summary", "ops", "show", "stats"), listing.add_parsers),
    (("convert",), convert.add_parsers),
    (("overflow",), overflow.add_parsers),
    (("trend", "watch"), watch.add_parsers),
    (("compare",), compare.add_parsers),
    (("serve",), explore.add_serve_parser),
)


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole command line, or, with ``command``, the top level and that command's family only: a
    process runs one command, and argparse makes a help formatter (a terminal-size call) and gettext
    look-ups for every option it adds: ~3 ms of every command for the thirteen it does not run.  The
    parsers are made by the same calls either way, so the command's options, help and errors are the same."""
    from dumpscope import __version__

    parser = argparse.ArgumentParser(
        prog="dumpscope",
        description="Explore Ascend NPU operator dumps (MindSpore, CANN/TF adapter/ACL/torchair, msprobe, "
                    "Troubleshooter) in the terminal. Run `dumpscope PATH` to open the explorer.",
        epilog="`dumpscope help COMMAND` (or `dumpscope COMMAND --help`) shows a command's options and an example.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"dumpscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for names, add in _FAMILIES:
        if command is None or command in names:
            add(sub)
    if command in (None, "completion"):
        p = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)",
                           description="Print a completion script generated from this command line.\n"
                                       "  bash: source <(dumpscope completion bash)   (e.g. in ~/.bashrc)\n"
                                       "  zsh:  dumpscope completion zsh > ~/.zfunc/_dumpscope  (a folder in $fpath)\n"
                                       "  fish: dumpscope completion fish > ~/.config/fish/completions/dumpscope.fish")
        p.add_argument("shell", choices=("bash", "zsh", "fish"))
    if command in (None, "help"):
        p = sub.add_parser("help", help="show the help of a command")
        p.add_argument("topic", nargs="?", metavar="COMMAND")
    add_examples(sub)
    return parser


def add_examples(sub: "argparse._SubParsersAction") -> None:
    for name, p in sub.choices.items():
        if name in EXAMPLES:  # after any epilog the command has (compare's rules)
            p.epilog = ((p.epilog.rstrip() + "\n\n") if p.epilog else "") + "example:\n  " + EXAMPLES[name]
            p.formatter_class = argparse.RawDescriptionHelpFormatter


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

