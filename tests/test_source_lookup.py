"""From a source line to its ops (issue 19): ``ops --source FILE[:LINE]`` on real MindSpore 2.10 dumps.

The expected ops come from the ``.ir`` text itself by a plain line scan (each node block's
``# Fullname with scope`` and its ``# In file`` lines), not from dumpscope's IR parser."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import unpack_data
from dumpscope.core.engines.redump_config import RedumpConfigError, redump_config, write_redump_config
from dumpscope.core.graphs.source_match import SourceSpec, SourceSpecError


def _ops(*args: str) -> list[dict]:
    res = subprocess.run([sys.executable, "-m", "dumpscope", "ops", *args, "--json"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["ops"]


def ir_nodes_at(ir: Path, file_suffix: str, line: int) -> set[str]:
    """Full names of the .ir nodes whose ``# In file`` lines name ``…/file_suffix:line``."""
    hits: set[str] = set()
    name, found = None, False
    frame = re.compile(r"# In file (?:.*/)?" + re.escape(file_suffix) + r"[:(]" + str(line) + r"\b")
    for text in ir.read_text(encoding="utf-8").splitlines():
        s = text.strip()
        if re.match(r"^%\d+\(", s) or s.startswith(("Return(", "subgraph ", "}")):
            if name and found:
                hits.add(name)
            name, found = None, False
        m = re.match(r"# Fullname with scope: \((.*)\)$", s)
        if m:
            name = m.group(1)
        if frame.search(s):
            found = True
    if name and found:
        hits.add(name)
    return hits


@pytest.fixture(scope="module")
def own_dump(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_source") / "real_ms210_source" / "out"


@pytest.mark.parametrize("line", [38, 39, 40, 41, 42])
def test_source_line_lists_exactly_the_ops_the_ir_names(own_dump, line):
    ir = own_dump / "rank_0" / "graphs" / "ms_output_trace_code_graph_0.ir"
    expected = ir_nodes_at(ir, "net.py", line)
    ops = _ops(str(own_dump), "--source", f"net.py:{line}")
    dumped = {o["name"] for o in _ops(str(own_dump))}
    assert {o["name"] for o in ops} == expected & dumped
    assert [o["exec_index"] for o in ops] == sorted(o["exec_index"] for o in ops)


def test_forward_and_backward_ops_of_one_line(own_dump):
    names = [o["name"] for o in _ops(str(own_dump), "--source", "net.py:40")]
    assert any(n.startswith("Gradients/") for n in names)  # backward (Grad_Sin …)
    assert any(n.startswith("Default/") for n in names)  # forward (Sin, Add)
    assert any(n.endswith("/Sin-op0") for n in names) and any("/Grad_Sin/" in n for n in names)


def test_file_without_line_and_suffix_boundaries(own_dump):
    whole = {o["name"] for o in _ops(str(own_dump), "--source", "net.py")}
    by_line = set().union(*({o["name"] for o in _ops(str(own_dump), "--source", f"net.py:{n}")}
                            for n in range(30, 45)))
    assert by_line <= whole and by_line
    assert _ops(str(own_dump), "--source", "et.py:40") == []  # not a file-name boundary
    assert _ops(str(own_dump), "--source", "mkms/net.py:40") == _ops(str(own_dump), "--source", "net.py:40")


def test_lenet_line_17_matches_the_ir(real_lenet_tree):
    ir = real_lenet_tree / "rank_0" / "graphs" / "ms_output_trace_code_graph_0.ir"
    expected = ir_nodes_at(ir, "net.py", 17)
    ops = _ops(str(real_lenet_tree), "--source", "net.py:17")
    assert {o["name"] for o in ops} == expected
    assert len(expected) == 4  # Conv2D, and MaxPoolGrad/ReluGrad/Conv2DBackpropFilter (MindSpore shares ReLU-op0)


def test_source_export_config_in_execution_order(own_dump, tmp_path):
    out = tmp_path / "cfg.json"
    res = subprocess.run([sys.executable, "-m", "dumpscope", "ops", str(own_dump), "--source", "net.py:40",
                          "--export-config", str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    names = [o["name"] for o in _ops(str(own_dump), "--source", "net.py:40")]
    assert json.loads(out.read_text())["mindspore"]["common_dump_settings"]["kernels"] == names


def test_bad_source_spec_is_a_one_line_error(own_dump):
    res = subprocess.run([sys.executable, "-m", "dumpscope", "ops", str(own_dump), "--source", ":12"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "FILE[:LINE]" in res.stderr and len(res.stderr.strip().splitlines()) == 1


# -- small pieces -------------------------------------------------------------------------------


def test_source_spec_parsing_and_matching():
    s = SourceSpec.parse("@net.py:55")
    assert (s.file, s.line) == ("net.py", 55)
    assert s.matches({"file": "/a/b/net.py", "line": 55})
    assert not s.matches({"file": "/a/b/mynet.py", "line": 55})
    assert not s.matches({"file": "/a/b/net.py", "line": 56})
    assert SourceSpec.parse("C:\\w\\net.py:3").matches({"file": "C:\\w\\net.py", "line": 3})
    assert SourceSpec.parse("net.py").matches({"file": "net.py", "line": 1})
    with pytest.raises(SourceSpecError):
        SourceSpec.parse(":5")


def test_redump_config_shape_and_refusal(tmp_path):
    cfg, left_out = redump_config(["a/b", "a/b", "with space", "c"])
    assert cfg == {"mindspore": {"common_dump_settings": {"dump_mode": 1, "kernels": ["a/b", "with space", "c"]}},
                   "cann": {"dump_layer": "a/b c", "acl_json": {"dump": {
                       "dump_list": [{"layer": ["a/b", "with space", "c"]}], "dump_path": "dump", "dump_mode": "all",
                       "dump_data": "tensor"}}},
                   "msprobe": {"list": ["a/b", "with space", "c"]}}
    assert left_out == ["with space"]
    tree = tmp_path / "dump"
    (tree / "sub").mkdir(parents=True)
    with pytest.raises(RedumpConfigError):
        write_redump_config(["x"], str(tree / "sub" / "c.json"), [str(tree)])
    assert not (tree / "sub" / "c.json").exists()
    write_redump_config(["x"], str(tmp_path / "c.json"), [str(tree)])
    assert json.loads((tmp_path / "c.json").read_text())["cann"]["dump_layer"] == "x"


def test_msprobe_stack_lines_are_searched_too(tmp_path_factory):
    """msprobe 26.2 ``stack.json``: the ops listed under stacks naming ``msp_net.py, line 17``."""
    root = unpack_data(tmp_path_factory, "real_api_dumps")
    dump = root / "msp_a"
    stack = json.loads(next(dump.rglob("stack.json")).read_text())
    expected = {n for names, lines in stack.values() for n in names
                if any(re.search(r"msp_net\.py, line 17,", ln) for ln in lines)}
    assert expected
    got = {o["name"] for o in _ops(str(dump), "--source", "msp_net.py:17")}
    assert got == expected
