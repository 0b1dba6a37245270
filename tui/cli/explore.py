"""``explore`` (the default command) and ``serve``: the explorer in the terminal or a browser."""

from __future__ import annotations

import argparse
import os

from dumpscope.tui.cli.common import CliError
from dumpscope.tui.cli.options import add_common


def add_explore_parser(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("explore", help="open the explorer (the default command)")
    p.add_argument("path", nargs="?", default=".", metavar="PATH")
    p.add_argument("--compare", metavar="TARGET", help="compare PATH (golden) with TARGET in the explorer")
    p.add_argument("--watch", action="store_true", help="pick up new files while the explorer is open")
    p.add_argument("--export-dir", metavar="DIR",
                   help="where screenshots (ctrl+s) and exports go (default: the working directory)")
    p.add_argument("--step", type=int, metavar="S", help="open on this step (default: the first with overflow "
                   "evidence, else the lowest); the cursor lands on its first bad op if it has one")
    p.add_argument("--rank", type=int, metavar="R", help="open on this rank (default: as --step)")
    add_common(p)


def add_serve_parser(sub: "argparse._SubParsersAction") -> None:
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
    add_common(p)


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
