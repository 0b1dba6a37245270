"""compare on real msprobe 26.2 pairs (torch CPU, tensor and statistics mode) against `msprobe compare` itself.

tests/data/real_msprobe_262_block.tar.gz: the transformer block of the MindSpore pairs in torch, dumped by
msprobe; msprobe_reference.json holds what `msprobe compare` (26.2.0) said about each pair (README inside).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import unpack_data
from dumpscope.core.engines.compare import compare_dumps
from dumpscope.core.query import open_query

PAIRS = ("rerun", "ln_eps", "scale", "nan")
MODES = ("tensor", "statistics")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_msprobe_262_block")


@pytest.fixture(scope="module")
def reference(data) -> dict[str, Any]:
    return json.loads((data / "msprobe_reference.json").read_text())


@pytest.fixture(scope="module")
def docs(data, tmp_path_factory) -> dict[str, dict[str, Any]]:
    cache = tmp_path_factory.mktemp("cache")
    out = {}
    for mode in MODES:
        golden = open_query(str(data / f"golden_{mode}"), cache_directory=cache)
        for pair in PAIRS:
            out[f"{pair}_{mode}"] = compare_dumps(golden, open_query(str(data / f"{pair}_{mode}"),
                                                                     cache_directory=cache))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pair", PAIRS)
def test_first_divergence_is_msprobes_first_error_api(docs, reference, pair, mode):
    key = f"{pair}_{mode}"
    doc, ref = docs[key], reference[key]
    fd = doc["first_divergence"]
    if ref["first_error_api"] is None:  # the bit-identical rerun: msprobe says all pass
        assert ref["results"]["error"] == 0 and fd is None
        assert {r["verdict"] for r in doc["rows"]} == {"pass"}
        return
    assert fd["name"] == ref["first_error_api"]
    # msprobe's first error row is the changed argument ("scalar parameters inconsistent")
    assert ref["first_error_message"] == ["error: The scalar parameters of NPU and Bench are inconsistent."]
    io, slot = re.search(r"\.(input|output)\.(\d+)$", ref["first_error_row"]).groups()
    assert fd["cause"] == "constant" and fd["rule"].startswith(f"{io}.{slot} argument changed: ")
    (arg,) = [r for r in doc["rows"] if (r["name"], r["io"], r["slot"]) == (fd["name"], io, int(slot))]
    assert (arg["kind"], arg["verdict"], arg["mode"]) == ("scalar", "error", "value")


@pytest.mark.parametrize("mode", MODES)
def test_every_msprobe_error_row_is_an_error_here(docs, reference, mode):
    for pair in PAIRS:
        key = f"{pair}_{mode}"
        ours = {(r["name"], r["io"], r["slot"]): r for r in docs[key]["rows"]}
        for name, _messages in reference[key]["error_rows"]:
            m = re.match(r"(.+)\.(input|output)\.(\d+)$", name)
            assert m, name
            row = ours[(m.group(1), m.group(2), int(m.group(3)))]
            assert row["verdict"] == "error", (key, name, row["rule"])


@pytest.mark.parametrize("mode", MODES)
def test_rows_keep_msprobes_slot_positions_including_nulls(docs, reference, mode):
    """Each msprobe row `op.io.N` is our row (op, io, N): a null output keeps its position."""
    doc, ref = docs[f"ln_eps_{mode}"], reference[f"ln_eps_{mode}"]
    assert len(doc["rows"]) == ref["rows"]
    ours = {(r["name"], r["io"], r["slot"]) for r in doc["rows"]}
    plain = [re.match(r"(.+)\.(input|output)\.(\d+)$", n) for n in ref["row_names"]]
    keys = {(m.group(1), m.group(2), int(m.group(3))) for m in plain if m}
    assert len(keys) > 80 and keys <= ours
    # `Tensor.__add__.1.backward` returns (None, grad): the grad is output 1 on both sides
    assert ("Tensor.__add__.1.backward", "output", 1) in ours


def test_near_zero_key_bias_gradient_is_noise(docs):
    """`Tensor.__add__.0.backward` output 1 is kb's gradient, zero up to rounding: pass, whatever the cosine."""
    for pair in ("ln_eps", "scale"):
        (row,) = [r for r in docs[f"{pair}_tensor"]["rows"]
                  if (r["name"], r["io"], r["slot"]) == ("Tensor.__add__.0.backward", "output", 1)]
        assert max(abs(row["golden"]["max"]), abs(row["golden"]["min"])) < 1e-6
        assert row["verdict"] == "pass" and row["judgement"] == "noise", row["rule"]


def test_backward_calls_inherit_through_their_forward_call(docs):
    """`Tensor.__pow__.0.backward` differs while its dumped input does not: it computes from what the
    forward call saved, so its error is inherited, not born (msprobe's input/output checker flags it)."""
    for pair in ("ln_eps", "scale"):
        doc = docs[f"{pair}_tensor"]
        (out,) = [r for r in doc["rows"] if (r["name"], r["io"], r["slot"]) == ("Tensor.__pow__.0.backward",
                                                                                  "output", 0)]
        assert out["verdict"] == "error" and out["origin"] == "inherited"
        assert out["origin_via"] == "saved tensors of Tensor.__pow__.0.forward"
        assert {r["name"] for r in doc["rows"] if r["origin"] in ("born", "constant")} == {
            doc["first_divergence"]["name"]}


def test_rows_carry_source_frames_and_both_sides(docs):
    doc = docs["scale_tensor"]
    fd = doc["first_divergence"]
    row = next(r for r in doc["rows"] if (r["name"], r["io"], r["slot"]) == (fd["name"], fd["io"], fd["slot"]))
    assert row["source"] and row["source"]["file"].endswith("block_msp.py")
    assert "* scale" in row["source"]["code"]
    arg = next(r for r in doc["rows"] if (r["name"], r["io"], r["slot"]) == (fd["name"], "input", 1))
    assert (arg["golden"]["value"], arg["target"]["value"]) == (0.5, 1.0)
    assert arg["golden"]["dtype"] == "float" and row["golden"]["dtype"] == "float32"
