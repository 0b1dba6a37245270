"""A real MindSpore 2.0.0 CPU e2e dump (tests/data/real_ms20_block.tar.gz, see its README): scope-less file
names, ``# inlined:In file`` source frames, Parameters and constants beside the ops.  Every expectation is
read off what MindSpore wrote (execution-order CSV, .ir, npy files via numpy), not typed in."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, unpack_data


@pytest.fixture(scope="module")
def dump(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms20_block") / "dump"


def exec_order(dump: Path) -> list[str]:
    lines = (dump / "rank_0" / "execution_order" / "ms_execution_order_graph_0.csv").read_text().split()
    return lines[1:]


def step_files(dump: Path) -> list[Path]:
    return sorted((dump / "rank_0" / "Net" / "0" / "0").iterdir())


def test_ops_are_the_execution_order_with_graph_side_names(capsys, dump):
    ops = cli_json(capsys, "ops", str(dump))["ops"]
    assert [o["name"] for o in ops] == exec_order(dump)
    # Parameter.{name}.{task}.{stream}.{ts}.output.{slot}.{format}.npy -> one parameter per distinct name
    params = {p.name.rsplit(".", 7)[0] for p in step_files(dump) if p.name.startswith("Parameter.")}
    listed = cli_json(capsys, "ops", str(dump), "--kind", "parameter")["ops"]
    assert len(listed) == len(params) and all(o["exec_index"] is None for o in listed)
    summary = cli_json(capsys, "summary", str(dump))
    assert summary["ops"] == len(exec_order(dump)) and summary["parameters"] == len(params)


def test_show_reaches_the_users_line_through_inlined_frames(capsys, dump):
    ir = (dump / "rank_0" / "graphs" / "ms_output_trace_code_graph_0.ir").read_text()
    assert "# inlined:In file" in ir  # the 2.0 style this test is about
    sqrt = next(n for n in exec_order(dump) if "/Sqrt-" in n)
    block = ir[ir.index(f"(Default/{sqrt.split('/')[-1]})"):]
    user_file, user_line = re.search(r"# In file (\S+?net\.py):(\d+)/", block).groups()
    doc = cli_json(capsys, "show", str(dump), sqrt)["op"]
    frame = doc["user_frame"]
    assert frame["file"].endswith("net.py") and frame["line"] == int(user_line)
    assert any("math_func.py" in f["file"] for f in doc["source"])  # the inlined frame is read too
    assert [f for f in doc["source"] if f.get("user")][0]["line"] == int(user_line)


def test_overflow_names_the_first_op_whose_output_numpy_finds_nan(capsys, dump):
    first = None
    for name in exec_order(dump):
        short = name.split("/")[-1]
        outs = [p for p in step_files(dump) if p.name.split(".")[1] == short and ".output." in p.name]
        if any(not np.isfinite(np.load(p)).all() for p in outs):
            first = name
            break
    assert first is not None
    doc = cli_json(capsys, "overflow", str(dump))
    assert doc["ops"][0]["name"] == first


def test_compare_rows_of_constants_show_no_pseudo_step(capsys, dump):
    """MindSpore files its constants under step -1 internally; compare's rows say step null, never -1."""
    doc = cli_json(capsys, "compare", str(dump), str(dump))
    steps = {r["step"] for r in doc["rows"]}
    assert -1 not in steps and None in steps and 0 in steps
