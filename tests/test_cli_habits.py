"""The command line behaves like the Python CLIs users know: -V, help CMD, examples, completion, progress."""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dumpscope import __version__
from dumpscope.tui.cli.common import IndexProgress
from dumpscope.tui.cli.entry import main
from dumpscope.tui.cli.parser import build_parser


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flags(capsys, flag):
    code, out, _ = run(capsys, flag)
    assert code == 0 and out.strip() == f"dumpscope {__version__}"


def test_version_is_in_top_level_help(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "-V, --version" in out and "dumpscope help COMMAND" in out


def test_help_command_shows_that_commands_help(capsys):
    code, out, _ = run(capsys, "help", "compare")
    assert code == 0 and out.startswith("usage: dumpscope compare") and "--output" in out
    code, out, _ = run(capsys, "help")
    assert code == 0 and out.startswith("usage: dumpscope [-h] [-V]")
    code, _, err = run(capsys, "help", "nonsense")
    assert code == 1 and "no command 'nonsense'" in err


def test_every_subcommand_has_an_example_in_its_help(capsys):
    for name in subcommands():
        code, out, _ = run(capsys, name, "--help")
        assert code == 0
        assert "example:\n  dumpscope " in out, f"`dumpscope {name} --help` has no example (tui/cli/parser.py EXAMPLES)"


# -- completion ---------------------------------------------------------------------------------

def test_completion_scripts_cover_every_subcommand_and_option(capsys):
    from dumpscope.tui.cli.completion import commands

    _, cmds = commands(build_parser())
    for shell in ("bash", "zsh", "fish"):
        code, out, _ = run(capsys, "completion", shell)
        assert code == 0
        for c in cmds:
            assert c.name in out, (shell, c.name)
            for o in c.options:
                assert o.flags[-1].lstrip("-") in out, (shell, c.name, o.flags)


BASH = shutil.which("bash")


def _bash_complete(script: str, words: list[str]) -> list[str]:
    words_sh = " ".join(f"'{w}'" for w in words)
    prog = (f"source {script}\nCOMP_WORDS=({words_sh}); COMP_CWORD={len(words) - 1}; _dumpscope\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n')
    res = subprocess.run([BASH, "--norc", "--noprofile", "-c", prog], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return [w for w in res.stdout.splitlines() if w]


@pytest.mark.skipif(BASH is None, reason="no bash")
def test_bash_completion_completes_commands_options_and_choices(tmp_path, capsys):
    assert main(["completion", "bash"]) == 0
    script = tmp_path / "dumpscope.bash"
    script.write_text(capsys.readouterr().out)
    assert _bash_complete(str(script), ["dumpscope", "comp"]) == ["compare", "completion"]
    assert _bash_complete(str(script), ["dumpscope", "stats", "d", "op", "--io", ""]) == ["input", "output"]
    assert _bash_complete(str(script), ["dumpscope", "compare", "a", "b", "--out"]) == ["--output"]
    assert _bash_complete(str(script), ["dumpscope", "completion", "f"]) == ["fish"]
    (tmp_path / "zdumps").mkdir()
    assert _bash_complete(str(script), ["dumpscope", "summary", str(tmp_path / "zdu")]) == [str(tmp_path / "zdumps")]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_parse(tmp_path, capsys, shell):
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} not installed")
    assert main(["completion", shell]) == 0
    script = tmp_path / f"dumpscope.{shell}"
    script.write_text(capsys.readouterr().out)
    res = subprocess.run([exe, "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr


# -- the cold-index progress line ------------------------------------------------------------------

class TTY(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture()
def small_tree(tmp_path, monkeypatch):
    from test_tui_support import make_ms_tree

    monkeypatch.setenv("DUMPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    return make_ms_tree(tmp_path / "t", steps=(0,), inf_op=None)


def _summary(monkeypatch, tree: Path, out_tty: bool, err_tty: bool, *extra: str) -> tuple[str, str]:
    out, err = TTY(out_tty), TTY(err_tty)
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(IndexProgress, "DELAY_S", 0.0)  # the tiny tree builds faster than the real delay
    assert main(["summary", str(tree), "--no-cache", *extra]) == 0
    return out.getvalue(), err.getvalue()


def test_progress_line_on_a_terminal_and_erased_after(small_tree, monkeypatch):
    _, err = _summary(monkeypatch, small_tree, True, True)
    assert f"indexing {small_tree}:" in err and "files" in err
    assert err.endswith("\r\x1b[K")  # the line is gone before the answer prints


def test_no_progress_line_when_stderr_is_not_a_terminal(small_tree, monkeypatch):
    _, err = _summary(monkeypatch, small_tree, True, False)
    assert err == ""


def test_json_to_a_pipe_stays_silent(small_tree, monkeypatch):
    out, err = _summary(monkeypatch, small_tree, False, True, "--json")
    assert err == "" and out.lstrip().startswith("{")


def test_warm_reopen_shows_nothing_before_the_delay(small_tree, monkeypatch):
    progress = IndexProgress("p")
    err = TTY(True)
    monkeypatch.setattr(sys, "stderr", err)

    class P:
        done, phase, files, records, elapsed = False, "walking", 10, 10, 0.1

    progress(P())
    P.done = True
    progress(P())
    assert err.getvalue() == ""


def test_fish_completes_from_the_generated_script(tmp_path, capsys):
    exe = shutil.which("fish")
    if exe is None:
        pytest.skip("fish not installed")
    assert main(["completion", "fish"]) == 0
    script = tmp_path / "dumpscope.fish"
    script.write_text(capsys.readouterr().out)

    def complete(line: str) -> list[str]:
        res = subprocess.run([exe, "--no-config", "-c", f"source {script}; complete -C '{line}'"],
                             capture_output=True, text=True, timeout=30)
        assert res.returncode == 0, res.stderr
        return [w.split("\t")[0] for w in res.stdout.splitlines()]

    assert complete("dumpscope comp") == ["compare", "completion"]
    assert complete("dumpscope stats a b --io ") == ["input", "output"]
    assert complete("dumpscope compare a b --out") == ["--output"]
