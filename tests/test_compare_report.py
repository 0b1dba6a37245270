"""``compare --output``: msprobe's compare table (columns, order, values, xlsx highlights).

The oracle is msprobe itself: ``tests/data/msprobe_compare/`` holds the CSV that mindstudio-probe
26.2.0 wrote for the same two real dumps (``real_api_dumps``: msp_b = target/NPU, msp_a = golden/Bench).
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA, unpack_data
from dumpscope.core.engines.compare import report as cr
from dumpscope.core.engines.compare import table_file
from dumpscope.tui.cli.entry import main

MSPROBE_CSV = DATA / "msprobe_compare" / "compare_result_msp_b_vs_msp_a.csv"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_api_dumps")


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def run(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def ours(dumps, tmp_path_factory) -> tuple[list[str], list[dict[str, str]], dict]:
    out = tmp_path_factory.mktemp("out")
    assert main(["compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "--no-cache", "-o", str(out / "r.csv")]) == 0
    assert main(["compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "--no-cache", "-o", str(out / "r.json")]) == 0
    header, rows = read_csv(out / "r.csv")
    return header, rows, json.loads((out / "r.json").read_text())


def test_header_is_msprobes_then_ours(ours):
    header, _, _ = ours
    msprobe_header, _ = read_csv(MSPROBE_CSV)
    assert header[:len(msprobe_header)] == msprobe_header == cr.MSPROBE_COLUMNS
    assert header[len(msprobe_header):] == cr.EXTRA_COLUMNS


def _num(text: str) -> float:
    return float(text.strip())


def _same(ours: str, theirs: str) -> bool:
    try:
        return math.isclose(_num(ours), _num(theirs), rel_tol=1e-6, abs_tol=1e-9)
    except ValueError:  # "unsupported", "N/A", "True"/"False"
        return ours == theirs


def test_values_agree_with_msprobe_on_every_row_it_wrote(ours):
    _, rows, doc = ours
    _, theirs = read_csv(MSPROBE_CSV)
    by_name = {r["NPU Name"]: r for r in theirs}
    # the same rows: every tensor, and every non-tensor argument (a list one row per item, input.3.0 …)
    assert [r["NPU Name"] for r in rows] == [m["NPU Name"] for m in theirs]
    assert "Functional.conv2d.0.forward.input.3.1" in by_name and len(rows) > len(doc["rows"])
    for r in rows:
        m = by_name[r["NPU Name"]]
        assert r["Bench Name"] == m["Bench Name"]
        assert r["NPU Tensor Shape"] == m["NPU Tensor Shape"] and r["Bench Tensor Shape"] == m["Bench Tensor Shape"]
        # msprobe writes torch's dtype spelling and a Python class for an argument; we numpy's / JSON's
        assert m["NPU Dtype"] in (f"torch.{r['NPU Dtype']}", f"<class '{r['NPU Dtype']}'>"), r["NPU Name"]
        assert r["Data_name"] == m["Data_name"]
        for col in ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                    "Five Thousandths Err Ratio", "NPU max", "NPU min", "NPU mean", "NPU l2norm",
                    "Bench max", "Bench min", "Bench mean", "Bench l2norm"):
            assert _same(r[col], m[col]), (r["NPU Name"], col, r[col], m[col])
        # msprobe puts the stack on an API's first row only
        assert (r["NPU_Stack_Info"] == "N/A") == (m["NPU_Stack_Info"] == "N/A"), r["NPU Name"]
    # NPU is the target (eps 1e-1: smaller batch-norm output), Bench the golden side
    bn = next(r for r in rows if r["NPU Name"] == "Functional.batch_norm.0.forward.output.0")
    assert _num(bn["NPU max"]) < _num(bn["Bench max"])
    eps = next(r for r in rows if r["NPU Name"] == "Functional.batch_norm.0.forward.input.7")
    assert (eps["NPU max"], eps["Bench max"], eps["Result"]) == ("0.1", "1e-05", "error")  # as msprobe: error


def test_result_is_our_verdict_and_err_message_our_rule(ours):
    _, rows, doc = ours
    by_tensor = {f"{d['name']}.{d['io']}.{d['slot']}": d for d in doc["rows"]}
    for r in rows:  # a list argument's items carry the argument's verdict and rule
        d = by_tensor[r["Bench Name"] if r["Bench Name"] in by_tensor else r["Bench Name"].rsplit(".", 1)[0]]
        assert (r["Result"], r["Err_message"]) == (d["verdict"], d["rule"])
    assert {r["Result"] for r in rows} >= {"pass", "error"}
    fd = doc["first_divergence"]
    marked = [r for r in rows if r["first_divergence"] == "yes"]
    assert len(marked) == 1 and marked[0]["Bench Name"] == f"{fd['name']}.{fd['io']}.{fd['slot']}"


def test_json_output_is_the_json_document(dumps, ours, capsys):
    _, _, written = ours
    code, out, _ = run(capsys, "compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "--no-cache", "--json")
    assert code == 0 and json.loads(out) == written


def test_output_never_inside_a_dump_tree(dumps, capsys):
    target = dumps / "msp_b" / "r.csv"
    code, _, err = run(capsys, "compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "--no-cache", "-o", str(target))
    assert code == 1 and "inside the dump tree" in err and len(err.strip().splitlines()) == 1
    assert not target.exists()


def test_unknown_extension_is_refused(dumps, tmp_path, capsys):
    code, _, err = run(capsys, "compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "-o", str(tmp_path / "r.txt"))
    assert code == 1 and ".csv, .xlsx or .json" in err and not (tmp_path / "r.txt").exists()


def test_xlsx_is_written_without_openpyxl(dumps, tmp_path, capsys, monkeypatch):
    """The workbook is written with the standard library (core.engines.compare.xlsx_stream): openpyxl is
    only needed here to read it back."""
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "openpyxl", None)  # import openpyxl -> ImportError
        code, _, err = run(capsys, "compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "-o",
                           str(tmp_path / "r.xlsx"))
    assert code == 0, err
    openpyxl = pytest.importorskip("openpyxl")
    ws = openpyxl.load_workbook(tmp_path / "r.xlsx")["Sheet1"]
    assert [c.value for c in ws[1]] == cr.COLUMNS and ws.max_row > 1


# -- the writer on documents made by hand ----------------------------------------------------------

def _row(name, verdict, **kw):
    row = {"name": name, "io": "output", "slot": 0, "step": 0, "rank": 0, "cosine": 0.5, "euc_dist": 1.0,
           "max_abs_err": 2.0, "max_rel_err": float("inf"), "one_thousandth_ratio": 0.1, "five_thousandth_ratio": 0.2,
           "verdict": verdict, "rule": f"rule of {name}"}
    row.update(kw)
    return row


DOC = {"rows": [
    _row("A", "pass", golden={"dtype": "float16", "shape": [2, 3], "max": 1.5, "min": -1.0, "mean": 0.25,
                              "l2norm": 3.0, "file": "/g/A.npy"},
         target={"dtype": "bfloat16", "shape": [2, 3], "max": 2.5, "min": -2.0, "mean": 0.5, "l2norm": 4.0,
                 "file": "/t/A.npy"}, target_name="A_t"),
    _row("B", "warning"),
    _row("C", "error", kind="scalar", cosine=None, euc_dist=None, max_abs_err=None, max_rel_err=None,
         one_thousandth_ratio=None, five_thousandth_ratio=None, golden={"dtype": "float", "value": 1e-5},
         target={"dtype": "float", "value": 0.1}),
    _row("=HYPERLINK(\"x\")\x1b[31m", "error"),
], "first_divergence": {"name": "B", "io": "output", "slot": 0, "step": 0}}


def test_side_objects_map_npu_to_target_and_bench_to_golden(tmp_path):
    out = tmp_path / "t.csv"
    assert table_file.write_csv(DOC, str(out)) == 4
    _, rows = read_csv(out)
    a = rows[0]
    assert (a["NPU Name"], a["Bench Name"]) == ("A_t.output.0", "A.output.0")
    assert (a["NPU Dtype"], a["Bench Dtype"]) == ("bfloat16", "float16")
    assert (a["NPU max"], a["Bench max"], a["NPU l2norm"], a["Bench l2norm"]) == ("2.5", "1.5", "4.0", "3.0")
    assert a["NPU Tensor Shape"] == "[2, 3]" and a["Data_name"] == "['A.npy', 'A.npy']"
    assert a["MaxRelativeErr"] == " inf"  # as msprobe writes it for spreadsheets
    b = rows[1]  # no side objects: unknown, not invented
    assert b["NPU Dtype"] == b["NPU max"] == b["Data_name"] == "N/A" and b["first_divergence"] == "yes"
    c = rows[2]  # a scalar argument, as msprobe shows one
    assert c["Cosine"] == c["MaxAbsErr"] == "unsupported" and c["Data_name"] == "['-1', '-1']"
    assert (c["NPU max"], c["Bench max"]) == ("0.1", "1e-05") and c["Result"] == "error"


def test_dump_names_cannot_become_formulas_or_escapes(tmp_path):
    out = tmp_path / "t.csv"
    table_file.write_csv(DOC, str(out))
    text = out.read_text()
    assert "\x1b" not in text
    _, rows = read_csv(out)
    assert rows[3]["Bench Name"].startswith("'=")


def test_xlsx_rows_highlighted_as_msprobe_did(tmp_path):
    import openpyxl

    out = tmp_path / "t.xlsx"
    assert table_file.write_xlsx(DOC, str(out)) == 4
    wb = openpyxl.load_workbook(out)
    assert wb.sheetnames == ["Sheet1"]
    ws = wb["Sheet1"]
    assert [c.value for c in ws[1]] == cr.COLUMNS
    fills = []
    for row in ws.iter_rows(min_row=2):
        kinds = {(c.fill.fill_type, c.fill.fgColor.rgb) for c in row}
        assert len(kinds) == 1  # the whole row, as msprobe filled it
        fills.append(kinds.pop())
    assert fills == [(None, "00000000"), ("solid", "00FFFF00"), ("solid", "FFFF0000"), ("solid", "FFFF0000")]
    result_col = cr.COLUMNS.index("Result") + 1
    assert [ws.cell(row=i, column=result_col).value for i in range(2, 6)] == ["pass", "warning", "error", "error"]
    assert ws.cell(row=2, column=cr.COLUMNS.index("NPU max") + 1).value == 2.5  # numbers stay numbers
    assert ws.cell(row=2, column=cr.COLUMNS.index("MaxRelativeErr") + 1).value == "inf"


def test_xlsx_from_the_cli_matches_the_csv(dumps, ours, tmp_path):
    import openpyxl

    out = tmp_path / "r.xlsx"
    assert main(["compare", str(dumps / "msp_a"), str(dumps / "msp_b"), "-o", str(out)]) == 0
    header, rows, _ = ours
    ws = openpyxl.load_workbook(out).active
    assert [c.value for c in ws[1]] == header
    got = [[c.value for c in r] for r in ws.iter_rows(min_row=2)]
    assert len(got) == len(rows)
    col = header.index("Cosine")
    tensors = [i for i, r in enumerate(rows) if r["kind"] == "tensor"]
    assert tensors and np.allclose([got[i][col] for i in tensors], [float(rows[i]["Cosine"]) for i in tensors])
    assert all(g[col] == r["Cosine"] for g, r in zip(got, rows) if r["kind"] != "tensor")  # "unsupported"
    red = [r[0].fill.fgColor.rgb == "FFFF0000" for r in ws.iter_rows(min_row=2)]
    assert red == [r["Result"] == "error" for r in rows] and any(red)


# -- the explorer's compare export ----------------------------------------------------------------

async def test_explorer_exports_the_compare_table(tmp_path, monkeypatch):
    from test_tui_support import make_ms_tree, set_env, settle, wait_ready
    from dumpscope.tui.app import DumpscopeApp

    set_env(monkeypatch, tmp_path)
    golden = make_ms_tree(tmp_path / "golden", steps=(0,), inf_op=None)
    target = make_ms_tree(tmp_path / "target", steps=(0,), inf_op=None)
    f = next((target / "rank_0" / "Net" / "0" / "0").glob("ReLU.*output.0*.npy"))
    np.save(f, np.load(f) * 3 + 1)
    app = DumpscopeApp(str(golden), compare_with=str(target), display_name="golden")
    out = tmp_path / "cmp.csv"
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        for _ in range(200):
            if app.compare_result is not None or app.compare_error:
                break
            await pilot.pause(0.05)
        assert app.compare_result is not None, app.compare_error
        await pilot.press("c")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        app.screen.query_one("#export-path").value = str(out)
        await pilot.press("enter")
        await settle(pilot)
    header, rows = read_csv(out)
    assert header == cr.COLUMNS and len(rows) == len(app.compare_result["rows"])
    relu = [r for r in rows if "ReLU-op3" in r["Bench Name"] and r["io"] == "output"]
    assert relu and relu[0]["Result"] != "pass" and relu[0]["NPU Dtype"] == "float32"
    assert relu[0]["NPU Name"].endswith(".output.0") and relu[0]["NPU Tensor Shape"].startswith("[")
