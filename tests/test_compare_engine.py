"""compare.engine: graph producers, row kinds, the CLI's rules and output, on the real MindSpore BatchNorm pair."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import unpack_data
from dumpscope.core.engines.compare import engine
from dumpscope.core.engines.compare.engine import produced
from dumpscope.tui.cli.entry import main

BN = "Default/bn-BatchNorm2d/BatchNorm-op0"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    return unpack_data(tmp_path_factory, "real_mindspore_210_bn")


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("src,want", [
    ("Default/conv1-Conv2d/Conv2D-op0:0", True),
    ("Default/network-Loss/net-Block/qkv-Dense/Reshape-op0", True),
    ("param:inputs0", False),
    ("Default/network-Loss/net-Block/ln1-LayerNorm/Load-op0:0", False),
    ("F32(1e-05)", False), ("I64(-1)", False), ("Bool(1)", False), ("(I64(1), I64(2))", False),
    ("Tensor(shape=[], dtype=Float32, value=0.5)", False), ("", False),
])
def test_graph_inputs_with_a_producer(src, want):
    assert produced(src) is want


def test_help_lists_the_default_rules(capsys):
    code, out, _ = run(capsys, "compare", "--help")
    assert code == 0
    for text in ("ParametersErr", "judged at the precision each tensor was stored in", "born", "inherited",
                 "first divergence:"):
        assert text in out


def test_human_output_names_origin_and_cause(capsys, dumps, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the table's columns in full, whatever width another test left
    code, out, _ = run(capsys, "compare", str(dumps / "golden"), str(dumps / "target"))
    assert code == 0
    assert f"first divergence: {BN} output.0 (constant: input.6 argument changed: 1e-05 → 0.1)" in out
    assert "origin" in out and "constant" in out and "inherited" in out


def test_csv_keeps_the_old_columns_and_adds_kind_and_origin(capsys, dumps):
    code, out, _ = run(capsys, "compare", str(dumps / "golden"), str(dumps / "target"), "--csv")
    head = out.splitlines()[0].split(",")
    assert head[:14] == ["name", "io", "slot", "step", "rank", "cosine", "euc_dist", "max_abs_err", "max_rel_err",
                         "one_thousandth_ratio", "five_thousandth_ratio", "verdict", "rule", "match"]
    assert "kind" in head and "origin" in head


def test_rtol_atol_replace_the_element_rules_but_not_the_argument_rule(capsys, dumps):
    code, out, _ = run(capsys, "compare", str(dumps / "golden"), str(dumps / "target"), "--rtol", "1000",
                       "--json")
    doc = json.loads(out)
    rows = {(r["name"], r["io"], r["slot"]): r for r in doc["rows"]}
    assert rows[(BN, "output", 0)]["verdict"] == "pass"
    assert rows[(BN, "output", 0)]["rule"].startswith("pass (allclose")
    assert rows[(BN, "input", 6)]["rule"] == "argument changed: 1e-05 → 0.1"  # values are never a tolerance matter
    assert doc["first_divergence"]["name"] == BN and doc["first_divergence"]["cause"] == "constant"


def test_json_keys_of_cli_md(capsys, dumps):
    code, out, _ = run(capsys, "compare", str(dumps / "golden"), str(dumps / "target"), "--json")
    doc = json.loads(out)
    assert {"rows", "first_divergence", "unmatched_golden", "unmatched_target"} <= set(doc)
    assert {"name", "io", "slot", "step", "cause", "rule"} <= set(doc["first_divergence"])
    for r in doc["rows"]:
        assert {"name", "io", "slot", "step", "rank", "cosine", "euc_dist", "max_abs_err", "max_rel_err",
                "one_thousandth_ratio", "five_thousandth_ratio", "verdict", "rule", "kind", "origin", "target_name",
                "golden", "target"} <= set(r)
        assert r["kind"] in ("tensor", "scalar", "parameter")
        assert r["origin"] in ("born", "inherited", "constant", None)
    assert doc["compared"]["tensors"] == len(doc["rows"]) and doc["problems"] == []


def test_nothing_compared_is_said(capsys, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    code, out, _ = run(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == 0 and "nothing compared: no matched tensors (golden 0 ops, target 0 ops)" in out


@pytest.mark.parametrize("name,producer,want", [
    ("Tensor.__pow__.0.backward", "msprobe", "Tensor.__pow__.0.forward"),
    ("Module.conv1.Conv2d.backward.0", "msprobe", "Module.conv1.Conv2d.forward.0"),
    ("NN_Linear_0_backward", "troubleshooter", "NN_Linear_0_forward"),
    ("Functional.linear.0.forward", "msprobe", None),
    ("Gradients/Default/MatMul-op0", "mindspore", None),
    ("Tensor.__add__.7.backward", "msprobe", None),  # its forward call was not dumped
])
def test_backward_calls_find_their_forward_call(name, producer, want):
    from types import SimpleNamespace

    from dumpscope.core.engines.compare.engine import _forward_of

    names = {"Tensor.__pow__.0.forward", "Module.conv1.Conv2d.forward.0", "NN_Linear_0_forward",
             "Functional.linear.0.forward"}
    assert _forward_of(SimpleNamespace(name=name, producer=producer), names) == want


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10),
                                 st.floats(width=32).map(np.float32), st.just(1e308)), min_size=1, max_size=6))
def test_the_all_finite_shortcut_only_skips_values_num_leaves_as_they_are(values):
    """``_all_finite`` lets a row's numbers skip ``_num``: only when ``_num`` would change none of them."""
    if engine._all_finite(*values):
        assert all(engine._num(v) is v for v in values)
    if all(type(v) is float and abs(v) < 1e300 for v in values):  # (no NaN, no sum too large for a float)
        assert engine._all_finite(*values)
