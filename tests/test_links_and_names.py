"""Symlinks leaving PATH are not followed unless asked (``--follow-links``), and are listed as
problems; file names that are not UTF-8 are counted so that the accounting adds up (issue 30)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import cli_json
from dumpscope.tui.cli.entry import main
from synth.trees import write_mindspore_tree

pytestmark = pytest.mark.skipif(os.name != "posix", reason="symlinks and byte file names")

PARTS = ("tensor", "stats", "graph", "order", "overflow", "metadata", "problem", "not_recognised", "other_dump")


def _adds_up(acc: dict) -> None:
    assert all(acc[k] >= 0 for k in PARTS), acc
    assert sum(acc[k] for k in PARTS) == acc["files"], acc


def step_of(tree: Path) -> Path:
    return tree / "rank_0" / "Net" / "0" / "0"


@pytest.fixture
def linked(tmp_path) -> tuple[Path, Path]:
    """A MindSpore tree holding links out of it (a folder of tensors, a secret file) and one in it."""
    tree = write_mindspore_tree(tmp_path / "golden", steps=(0,)).parent
    outside = tmp_path / "elsewhere"
    write_mindspore_tree(outside / "other", steps=(5,))
    (tmp_path / "secret.txt").write_text("not yours")
    step = step_of(tree)
    os.symlink(outside, tree / "rootlink")
    os.symlink(tmp_path / "secret.txt", step / "shadow.npy")
    os.symlink(step, tree / "inside_link")  # inside PATH: followed as before (a loop, reported once)
    return tree, tmp_path


def test_links_leaving_path_are_problems_not_followed(linked, capsys, monkeypatch):
    tree, tmp = linked
    opened: list[str] = []
    real_open = open

    def watching_open(file, *a, **kw):
        opened.append(os.fspath(file) if not isinstance(file, int) else "")
        return real_open(file, *a, **kw)

    monkeypatch.setattr("builtins.open", watching_open)
    doc = cli_json(capsys, "summary", str(tree), "--no-cache")
    monkeypatch.setattr("builtins.open", real_open)
    problems = {p["path"]: p["error"] for p in doc["problems"]}
    for name in (str(tree / "rootlink"), next(p for p in problems if p.endswith("shadow.npy"))):
        assert problems[name].startswith("not followed: points outside PATH"), problems
    assert not any("elsewhere" in p or "secret" in p for p in opened)
    assert not any(str(tmp / "elsewhere") in p for p in problems)
    _adds_up(doc["accounting"])
    assert doc["accounting"]["problem"] == 2  # the two links; the metadata and the rest as without them
    os.unlink(tree / "rootlink")
    os.unlink(step_of(tree) / "shadow.npy")
    bare = cli_json(capsys, "summary", str(tree), "--no-cache")["accounting"]
    os.symlink(tmp / "elsewhere", tree / "rootlink")
    os.symlink(tmp / "secret.txt", step_of(tree) / "shadow.npy")
    assert {k: v for k, v in doc["accounting"].items() if k not in ("problem", "files")} == \
        {k: v for k, v in bare.items() if k not in ("problem", "files")}
    plain = cli_json(capsys, "summary", str(tree), "--no-cache", "--follow-links")
    assert plain["files"] > doc["files"]  # the other tree, read through the link when asked
    assert not any(p["error"].startswith("not followed") for p in plain["problems"])


def test_the_cache_of_a_followed_tree_is_another_index(linked, capsys, tmp_path):
    tree, _ = linked
    cache = tmp_path / "cache"
    one = cli_json(capsys, "summary", str(tree), "--cache-dir", str(cache))
    two = cli_json(capsys, "summary", str(tree), "--cache-dir", str(cache), "--follow-links")
    again = cli_json(capsys, "summary", str(tree), "--cache-dir", str(cache))
    assert two["files"] > one["files"] == again["files"]


def test_names_that_are_not_utf8_keep_the_accounting_whole(tmp_path, capsys):
    tree = write_mindspore_tree(tmp_path / "golden", steps=(0,)).parent
    bare = cli_json(capsys, "summary", str(tree), "--no-cache")["accounting"]
    few = tmp_path / "few"
    few.mkdir()
    (few / "notes.txt").write_text("x")
    for folder in (os.fsencode(str(tree)), os.fsencode(str(few))):
        for raw in (b"a\xff.npy", b"b\xfe.bin", b"c\xfd"):
            with open(os.path.join(folder, raw), "wb") as fh:
                fh.write(b"x")
    doc = cli_json(capsys, "summary", str(tree), "--no-cache")
    _adds_up(doc["accounting"])
    assert sum(1 for p in doc["problems"] if "not valid UTF-8" in p["error"]) == 3
    assert doc["accounting"] == dict(bare, problem=bare["problem"] + 3, files=bare["files"] + 3)
    # the case: one file and three bad names ("files: 3 (not recognised: -2)")
    small = cli_json(capsys, "summary", str(few), "--no-cache")["accounting"]
    _adds_up(small)
    assert (small["files"], small["problem"], small["not_recognised"]) == (4, 3, 1)
    code = main(["summary", str(few), "--no-cache"])
    out = capsys.readouterr().out
    assert code == 0 and "not recognised: -" not in out


def test_a_tensor_file_of_a_real_msprobe_dump_linked_from_outside_is_not_opened(tmp_path_factory, tmp_path, capsys,
                                                                                  monkeypatch):
    """msprobe 26 (torch) tensor dump: one ``dump_tensor_data`` file replaced by a link out of PATH
    (the layout lists that folder itself)."""
    from conftest import unpack_data

    tree = unpack_data(tmp_path_factory, "real_msprobe26") / "l1_tensor"
    data = next(tree.rglob("dump_tensor_data"))
    victim = data / "Functional.dropout.0.forward.input.0.pt"
    secret = tmp_path / "secret.pt"
    secret.write_bytes(victim.read_bytes())
    victim.unlink()
    os.symlink(secret, victim)
    opened: list[str] = []
    real_open = open

    def watching_open(file, *a, **kw):
        opened.append(os.fspath(file) if not isinstance(file, int) else "")
        return real_open(file, *a, **kw)

    monkeypatch.setattr("builtins.open", watching_open)
    doc = cli_json(capsys, "summary", str(tree), "--no-cache")
    monkeypatch.setattr("builtins.open", real_open)
    assert {p["path"]: p["error"] for p in doc["problems"]}.get(str(victim), "").startswith(
        "not followed: points outside PATH"), doc["problems"]
    assert not any("secret" in p for p in opened) and str(victim) not in opened
    _adds_up(doc["accounting"])
    followed = cli_json(capsys, "summary", str(tree), "--no-cache", "--follow-links")
    assert not any(p["error"].startswith("not followed") for p in followed["problems"])
