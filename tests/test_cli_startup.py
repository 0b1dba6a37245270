"""Start-up of a one-shot command: a warm command imports no index-build module and no graph parser,
and the parser it builds (its own command's family) is the same parser as the whole command line's."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from conftest import SAMPLES

from dumpscope.tui.cli.parser import COMMANDS, build_parser

#: modules a command needs only when it builds an index (finalize and the graph parsers it calls), or
#: when it is the completion command
BUILD_ONLY = ("dumpscope.core.index.finalize", "dumpscope.core.index.early_ops", "dumpscope.core.index.graph_join",
              "dumpscope.core.graphs.ge_text", "dumpscope.core.graphs.ms_ir", "dumpscope.core.graphs.pbtext",
              "dumpscope.tui.cli.completion")

_PROBE = r"""
import json, sys
from dumpscope.tui.cli import entry
out, argv = sys.argv[1], sys.argv[2:]
code = entry.main(argv)
with open(out, "w") as fh:
    json.dump([code, sorted(m for m in sys.modules if m.startswith("dumpscope."))], fh)
"""


def _run(tmp_path, *argv: str) -> tuple[str, set[str]]:
    """(stdout, dumpscope modules imported) of ``dumpscope ARGV`` in a process of its own."""
    env = dict(os.environ, DUMPSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    out = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(out), *argv], env=env, capture_output=True, text=True,
                          timeout=120)
    code, modules = json.loads(out.read_text())
    assert code == 0, proc.stderr
    return proc.stdout, set(modules)


def test_a_warm_command_imports_no_build_module(tmp_path):
    tree = str(SAMPLES / "cann_tf_adapter")  # a GE graph beside the dump: the build parses it
    cold, built_with = _run(tmp_path, "summary", tree, "--json")
    assert {"dumpscope.core.index.finalize", "dumpscope.core.graphs.ge_text"} <= built_with  # imported when needed
    warm, modules = _run(tmp_path, "summary", tree, "--json")
    assert warm == cold
    assert not modules & set(BUILD_ONLY)
    _, modules = _run(tmp_path, "ops", tree, "--json")
    assert not modules & set(BUILD_ONLY)
    golden, target = str(SAMPLES / "compare_golden"), str(SAMPLES / "compare_target")
    _run(tmp_path, "summary", golden, "--json")
    _run(tmp_path, "summary", target, "--json")
    _, modules = _run(tmp_path, "compare", golden, target, "--json")
    assert "dumpscope.core.engines.compare.engine" in modules
    assert not modules & set(BUILD_ONLY)


def _described(parser: argparse.ArgumentParser) -> tuple:
    return parser.prog, parser.format_help(), [(a.dest, tuple(a.option_strings), a.default, a.nargs, a.choices)
                                               for a in parser._actions]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_a_commands_parser_is_its_part_of_the_whole_command_line():
    whole = _subcommands(build_parser())
    assert sorted(whole) == sorted(COMMANDS)
    for command in COMMANDS:
        own = _subcommands(build_parser(command))
        assert command in own and set(own) <= set(whole)
        assert _described(own[command]) == _described(whole[command]), command
