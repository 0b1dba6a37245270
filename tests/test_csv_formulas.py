"""The CSV formula guard is on every CSV path (issue 30): ``ops/compare/overflow --csv`` on stdout
printed ``=HYPERLINK(…)`` cells raw while ``--output x.csv`` neutralised them."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from dumpscope.core.inert import csv_cell
from synth.cann_writer import SynthTensor, write_dump
from dumpscope.tui.cli.entry import main

FORMULAS = ('=HYPERLINK("http:__evil.example","x")', "@SUM(1+1)", "+cmd|' _C calc'!A0", "-2+3")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("formula") / "dump"
    step = root / "20240101" / "0" / "m" / "1" / "0"
    for i, name in enumerate(FORMULAS):
        a = np.ones((2, 3), np.float32)
        if i == 0:
            a[0, 0] = np.inf
        write_dump(step, "Add", name, i, 2, 1718260502000000 + i, outputs=[SynthTensor(a, "float32", "ND")])
    return root


def _cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text)) for c in row]


@pytest.mark.parametrize("argv", [["ops"], ["overflow"], ["compare", "SELF"]])
def test_csv_on_stdout_runs_no_formula(tree, capsys, argv):
    args = [a if a != "SELF" else str(tree) for a in argv]
    code = main([args[0], str(tree), *args[1:], "--csv", "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 0, err
    cells = _cells(out)
    names = [c for c in cells if any(f in c for f in FORMULAS)]
    assert names, out[:500]
    for c in cells:
        assert c[:1] not in ("=", "+", "@") and not (c[:1] == "-" and not _number(c)), c


def _number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def test_csv_cell_keeps_numbers_and_text():
    assert csv_cell("=1+1") == "'=1+1" and csv_cell("@x") == "'@x" and csv_cell("\uff1dcmd") == "'\uff1dcmd"
    assert csv_cell("-1.5") == "-1.5" and csv_cell(-1.5) == -1.5 and csv_cell(None) == ""
    assert csv_cell("Default/Add-op1") == "Default/Add-op1"


def test_the_explorers_table_export_runs_no_formula():
    from dumpscope.tui.vtable import Column, VTable

    table = VTable([Column("name", "op"), Column("value", "value", 8, ">")])
    table.rows = [{"name": FORMULAS[0], "value": -1.5}, {"name": "@SUM(1)", "value": 2}]
    rows = list(csv.reader(io.StringIO(table.to_csv())))
    assert rows[1] == ["'" + FORMULAS[0], "-1.5"] and rows[2] == ["'@SUM(1)", "2"]
