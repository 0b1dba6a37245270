"""Every command over a dump whose names attack the terminal (escape sequences, rich markup, C1,
bidi, newlines): human output and CSV show each name literally and inert, JSON keeps it exact.

The run covers every subcommand the parser knows: a new command without a line in ``RUNS`` fails
here, so no new output path goes unguarded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dumpscope.core.inert import escape_markup, inert, inert_lines, inert_markup, json_safe
from synth.faults import HOSTILE_BAD_FILE, HOSTILE_NAMES, HOSTILE_TYPE, write_hostile_tree
from dumpscope.tui.cli import entry, output, parser

#: what must never reach a terminal raw: controls, bidi, and invisible characters (issue 30)
RAW = {chr(c) for c in (*range(0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0), 0x202E,
                        0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD)}

OVERFLOW_OP = HOSTILE_NAMES[1]
WATCHED, LAYER = HOSTILE_NAMES[2], HOSTILE_NAMES[3]


def hostile_runs(tree: Path, out: Path) -> dict[str, list[tuple[list[str], list[str]]]]:
    """Per command: (argv, names its human output must show)."""
    t = str(tree)
    all_names = list(HOSTILE_NAMES)
    return {
        "triage": [(["triage", t], [OVERFLOW_OP]), (["triage", t, "--md"], [OVERFLOW_OP]),
                   (["triage", t, "--golden", t], [])],
        "summary": [(["summary", t], [HOSTILE_BAD_FILE])],
        "ops": [(["ops", t], all_names + [HOSTILE_TYPE]), (["ops", t, "--csv"], all_names + [HOSTILE_TYPE])],
        "show": [(["show", t, n], [n]) for n in HOSTILE_NAMES],
        "stats": [(["stats", t, n], [n]) for n in HOSTILE_NAMES],
        "convert": [(["convert", t, str(out / "conv")], [])],
        "overflow": [(["overflow", t], [OVERFLOW_OP]), (["overflow", t, "--csv"], [OVERFLOW_OP])],
        "watch": [(["watch", t], [WATCHED, LAYER])],
        "trend": [(["trend", t, n], [n]) for n in HOSTILE_NAMES] + [(["trend", t, OVERFLOW_OP, "--csv"], [])],
        "compare": [(["compare", t, t], all_names), (["compare", t, t, "--csv"], all_names),
                    (["compare", t, t, "--output", str(out / "cmp.csv")], all_names)],
        "explore": [],  # the explorer: tests/test_inert_tui.py
        "serve": [],  # the same explorer behind textual-serve: tests/test_serve.py
        "completion": [(["completion", "bash"], [])],
        "help": [(["help"], []), (["help", "compare"], [])],
    }


def shown(name: str) -> str:
    """The visible form a name must take in human output and CSV."""
    return inert(name)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    write_hostile_tree(root / "dump")
    return root / "dump"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = entry.main(argv + (["--no-cache"] if argv[0] not in ("help", "completion") else []))
    out, err = capsys.readouterr()
    return code, out, err


def assert_inert(text: str, what: str) -> None:
    bad = sorted({repr(c) for c in text if c in RAW})
    assert not bad, f"{what}: raw control characters in the output: {bad}"


def test_every_command_has_a_hostile_run(tree, tmp_path):
    assert set(hostile_runs(tree, tmp_path)) == set(parser.COMMANDS), \
        "a new command needs a line in hostile_runs (its human output must be checked for raw escapes)"


@pytest.mark.parametrize("command", [c for c in parser.COMMANDS if c != "explore"])
def test_human_output_shows_hostile_names_inert(command, tree, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    for argv, names in hostile_runs(tree, tmp_path)[command]:
        code, out, err = run(argv, capsys)
        trouble = argv[0] == "triage" and "--golden" not in argv  # triage exits 3 when it finds trouble
        assert code == (3 if trouble else 0), f"{argv[0]} exit {code}: {err}"
        assert_inert(out, " ".join(argv[:1] + argv[2:]))
        assert_inert(err, "stderr")
        assert "MarkupError" not in err
        for name in names:
            assert shown(name) in out, f"{argv[0]}: {name!r} not shown literally"


@pytest.mark.parametrize("argv_fn", [
    lambda t: ["summary", t], lambda t: ["ops", t], lambda t: ["overflow", t], lambda t: ["watch", t],
    lambda t: ["compare", t, t], lambda t: ["triage", t], lambda t: ["show", t, HOSTILE_NAMES[3]], lambda t: ["stats", t, HOSTILE_NAMES[1]],
])
def test_json_keeps_names_exact(argv_fn, tree, capsys):
    code, out, err = run(argv_fn(str(tree)) + ["--json"], capsys)
    assert code == (3 if argv_fn("")[0] == "triage" else 0), err
    assert_inert(out, "json")  # escaped by JSON itself (C0) or json_safe (C1, bidi)
    text = json.dumps(json.loads(out), ensure_ascii=False)
    assert any(json.dumps(n, ensure_ascii=False)[1:-1] in text for n in HOSTILE_NAMES + (HOSTILE_BAD_FILE,))


def test_json_lists_every_hostile_name_exactly(tree, capsys):
    code, out, _ = run(["ops", str(tree), "--json"], capsys)
    assert code == 0
    names = {op["name"] for op in json.loads(out)["ops"]}
    assert set(HOSTILE_NAMES) <= names


def test_error_line_naming_a_hostile_op_is_inert(tree, capsys):
    code, out, err = run(["show", str(tree), "no such op \x1b]52;c;eA==\x07[/bold]"], capsys)
    assert code == 1
    assert_inert(err, "error line")
    assert err.count("\n") == 1 and "␛]52" in err


def test_a_command_that_forgets_inert_is_still_guarded(tree, capsys, monkeypatch):
    """The choke points: a handler printing raw dump text (plain print, rich markup string, table)
    still shows it inert, and markup in it is text, not a tag."""
    def careless(args):
        from rich.table import Table

        print(f"plain {HOSTILE_NAMES[0]}")
        con = output.console()
        con.print(f"console {HOSTILE_NAMES[1]}")
        t = Table()
        t.add_column("name")
        t.add_row(HOSTILE_NAMES[2])
        con.print(t)
        return 0

    monkeypatch.setitem(entry.HANDLERS, "summary", careless)
    code, out, err = run(["summary", str(tree)], capsys)
    assert code == 0, err
    assert_inert(out, "careless command")
    assert "[/bold]op" in out and "[bold red]x[/]" in out


# -- the sanitiser itself -----------------------------------------------------------------------


def test_inert_makes_controls_visible_and_keeps_text():
    assert inert("a\x1b[2Jb") == "a␛[2Jb"
    assert inert("x\x07\x00\x7f\n\t") == "x␇␀␡␊␉"
    assert inert("c\x9b31m") == "c\\x9b31m"
    assert inert("\u202egnp.exe") == "\\u202egnp.exe"
    assert inert("a\u200bb\u200c\u200d\u2060\ufeff") == "a\\u200bb\\u200c\\u200d\\u2060\\ufeff"
    assert inert("e\u0301 👍🏽") == "e\u0301 👍🏽"  # combining marks and visible emoji stay
    assert inert("ünïcødé 名前 [ok] %s") == "ünïcødé 名前 [ok] %s"
    assert inert(12) == "12"
    assert inert_lines("a\n\tb\x1b") == "a\n\tb␛"


def test_inert_markup_escapes_tags_for_rich_and_textual():
    from rich.console import Console
    from rich.markup import escape as rich_escape
    from textual.markup import escape as textual_escape

    for name in (*HOSTILE_NAMES, "[/bold]", "[bold red]x[/]", "tail\\", "a\\[b]", "[1, 2]", "[@click=x]y"):
        assert escape_markup(name) == rich_escape(name) == textual_escape(name)
        con = Console(width=400, record=True, file=open("/dev/null", "w"))
        con.print(f"[bold]{inert_markup(name)}[/bold]")
        assert con.export_text().rstrip("\n") == inert(name)


def test_json_safe_is_exact():
    doc = json.dumps({"n": "a\x9b\x85\u202e\u2028b\x1b"}, ensure_ascii=False)
    safe = json_safe(doc)
    assert json.loads(safe) == json.loads(doc)
    assert not RAW & set(safe) and "\u2028" not in safe
    ascii_doc = '{"n": "a\x7fb"}'  # all ASCII with a raw DEL (json_text leaves it raw): still escaped
    assert json_safe(ascii_doc) == ascii_doc.replace("\x7f", "\\u007f") and json.loads(json_safe(ascii_doc)) == {"n": "a\x7fb"}
