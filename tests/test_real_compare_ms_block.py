"""compare on real MindSpore 2.10 pairs where exactly one thing changed (issue 14).

tests/data/real_mindspore_210_block.tar.gz: a small transformer block trained one step on CPU,
dumped by MindSpore's own e2e dump (README and block.py inside).  What changed in each target is
known from its construction; each test fails if the rule that finds it regresses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import unpack_data
from dumpscope.core.engines.compare import compare_dumps
from dumpscope.core.query import open_query

LN1 = "Default/network-Loss/net-Block/ln1-LayerNorm/LayerNorm-op0"
LN2 = "Default/network-Loss/net-Block/ln2-LayerNorm/LayerNorm-op0"
POW = "Default/network-Loss/net-Block/Pow-op0"


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_mindspore_210_block")


@pytest.fixture(scope="module")
def docs(dumps, tmp_path_factory) -> dict[str, dict[str, Any]]:
    cache = tmp_path_factory.mktemp("cache")
    golden = open_query(str(dumps / "golden"), cache_directory=cache)
    return {v: compare_dumps(golden, open_query(str(dumps / v), cache_directory=cache))
            for v in ("rerun", "ln_eps", "scale", "nan")}


def rows_of(doc, name=None, io=None, slot=None):
    return [r for r in doc["rows"] if (name is None or r["name"] == name) and (io is None or r["io"] == io)
            and (slot is None or r["slot"] == slot)]


def origin_ops(doc) -> set[str]:
    return {r["name"] for r in doc["rows"] if r["origin"] in ("born", "constant")}


def test_bit_identical_rerun_has_no_divergence_and_no_error_row(docs):
    doc = docs["rerun"]
    assert doc["first_divergence"] is None
    assert len(doc["rows"]) > 400 and {r["verdict"] for r in doc["rows"]} == {"pass"}
    assert {r["kind"] for r in doc["rows"]} == {"tensor", "scalar", "parameter"}
    assert not doc["unmatched_golden"] and not doc["unmatched_target"]


def test_layernorm_epsilon_names_that_layernorm_with_cause_constant(docs):
    doc = docs["ln_eps"]
    fd = doc["first_divergence"]
    assert (fd["name"], fd["cause"], fd["io"]) == (LN1, "constant", "output")
    assert fd["rule"] == "input.5 argument changed: 1e-05 → 0.5"
    (eps,) = rows_of(doc, LN1, "input", 5)
    assert (eps["kind"], eps["verdict"], eps["rule"]) == ("scalar", "error", "argument changed: 1e-05 → 0.5")
    assert eps["golden"]["value"] == pytest.approx(1e-5) and eps["target"]["value"] == 0.5
    (out,) = rows_of(doc, LN1, "output", 0)
    # cosine alone would pass it: its relative error against float32 rounding is what makes it an error
    assert out["cosine"] > 0.99 and out["verdict"] == "error" and out["judgement"] == "born"
    assert "born here" in out["rule"] and "float32 rounding" in out["rule"]
    assert out["origin"] == "constant"
    (eps2,) = rows_of(doc, LN2, "input", 5)  # the other LayerNorm's epsilon did not change
    assert (eps2["kind"], eps2["verdict"]) == ("scalar", "pass")
    assert origin_ops(doc) == {LN1}
    # the row points at the line the user wrote (from the .ir stack), not at MindSpore's own files
    assert out["source"]["file"].endswith("block.py") and out["source"]["code"] == "h = self.ln1(x)"


def test_scale_before_softmax_names_the_mul_that_applies_it(docs, dumps):
    doc = docs["scale"]
    fd = doc["first_divergence"]
    assert (fd["type"], fd["cause"], fd["rule"]) == ("Mul", "constant", "input.1 argument changed: 0.5 → 1")
    # the graph says this Mul feeds the Softmax
    show = open_query(str(dumps / "golden"), use_cache=False).show_json(
        open_query(str(dumps / "golden"), use_cache=False).resolve_op(fd["name"]))
    assert any("Softmax" in c for c in show["consumers"])
    (row,) = rows_of(doc, fd["name"], "output", 0)
    assert "* scale" in row["source"]["code"]
    # its backward twin multiplies by the same constant: the only other origin
    assert all(r["type"] == "Mul" and r["origin"] == "constant" for r in doc["rows"] if r["name"] in origin_ops(doc))
    assert len(origin_ops(doc)) == 2


def test_nan_producing_pow_is_the_first_divergence(docs):
    doc = docs["nan"]
    fd = doc["first_divergence"]
    assert (fd["name"], fd["cause"]) == (POW, "constant")
    (out,) = rows_of(doc, POW, "output", 0)
    assert out["verdict"] == "error" and out["rule"].startswith("nan only in target")
    (exp,) = rows_of(doc, POW, "input", 1)
    assert exp["rule"] == "argument changed: 2 → 1.5"


def test_parameters_are_compared_but_never_the_first_divergence(docs):
    for v in ("ln_eps", "scale", "nan"):
        doc = docs[v]
        params = [r for r in doc["rows"] if r["kind"] == "parameter"]
        assert params and any(r["verdict"] == "error" for r in params)  # written after the update
        assert all(r["origin"] is None for r in params)
        assert doc["first_divergence"]["type"] != "Parameter"


def test_near_zero_key_bias_gradient_is_noise_not_an_error(docs):
    """kb's gradient is zero up to rounding (~5e-9): its cosine is meaningless, it must pass."""
    for v in ("ln_eps", "scale"):
        tiny = [r for r in docs[v]["rows"] if r["kind"] == "tensor" and r["golden"]["max"] is not None
                and 0 < max(abs(r["golden"]["max"]), abs(r["golden"]["min"])) < 1e-7]
        assert tiny, v
        assert any(r["cosine"] < 0.9 for r in tiny)
        assert all(r["verdict"] == "pass" and r["judgement"] == "noise" for r in tiny), v


def test_rows_carry_golden_and_target_objects_and_origin_for_every_error(docs):
    doc = docs["ln_eps"]
    for r in doc["rows"]:
        for side in ("golden", "target"):
            assert set(r[side]) == {"dtype", "shape", "max", "min", "mean", "l2norm", "file", "value"}
        if r["verdict"] == "error" and r["kind"] != "parameter":
            assert r["origin"] in ("born", "constant", "inherited") or r["io"] == "input"
    inherited = [r for r in doc["rows"] if r["origin"] == "inherited"]
    assert inherited and all(r["name"] != LN1 for r in inherited)


async def test_explorer_compare_view_opens_on_the_first_divergence_and_walks_born_rows(dumps, tmp_path,
                                                                                     monkeypatch):
    from dumpscope.tui.app import DumpscopeApp
    from test_tui_support import screen_text, set_env, settle, wait_ready

    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(dumps / "golden"), compare_with=str(dumps / "scale"), display_name="golden")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_ready(pilot)
        for _ in range(2400):  # the compare runs in a worker; a loaded machine may need a while
            if app.compare_result is not None or app.compare_error:
                break
            await pilot.pause(0.05)
        assert app.compare_result is not None, app.compare_error
        await pilot.press("c")
        await settle(pilot)
        table = app.screen.table
        fd = app.compare_result["first_divergence"]
        cur = table.current
        assert (cur["name"], cur["io"], cur["slot"]) == (fd["name"], fd["io"], fd["slot"])
        assert "const" in screen_text(app) and "(constant)" in screen_text(app)
        seen = []
        for _ in range(6):
            await pilot.press("n")
            await settle(pilot)
            seen.append(table.current)
        assert all(r["verdict"] == "error" and r["origin"] in ("born", "constant") for r in seen)
        assert len({(r["name"], r["io"], r["slot"]) for r in seen}) >= 4  # the born rows, round and round
        await pilot.press("N")
        await settle(pilot)
        assert table.current["origin"] in ("born", "constant")


def test_mindspore_210_vs_27_flatten_view_is_a_shape_warning_not_a_divergence(tmp_path_factory):
    """MindSpore 2.10 dumps a Flatten's output in its input's shape (2,2,4,4), 2.7 flat (2,32): same values
    (tests/data/real_mindspore_train.tar.gz, the same net dumped by both versions)."""
    data = unpack_data(tmp_path_factory, "real_mindspore_train")
    cache = tmp_path_factory.mktemp("cache")
    doc = compare_dumps(open_query(str(data / "ms210_stem"), cache_directory=cache),
                        open_query(str(data / "ms27_stem"), cache_directory=cache))
    (row,) = [r for r in doc["rows"] if r["name"].endswith("Flatten-op0") and r["io"] == "output"]
    assert row["verdict"] == "warning"
    assert row["rule"] == "shape (2,2,4,4) vs (2,32): the same values in another shape"
    assert row["max_abs_err"] < 1e-6 and row["cosine"] > 0.999999  # float32 rounding between versions
    fd = doc["first_divergence"]
    assert fd is None or not fd["name"].endswith("Flatten-op0")
