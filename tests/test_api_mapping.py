"""MindSpore-vs-PyTorch pairing (core/engines/compare/api_mapping.py) on msprobe's own public test pair, plus the
mapping-file reader.  EXPECTED_BY_MSPROBE is the api mapping msprobe's test_layer_mapping.py asserts for
this pair and tests/data/msprobe_ut_ms_pt.tar.gz (see its README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cli_json, unpack_data
from dumpscope.core.engines.compare.api_mapping import (
    CallInfo,
    MappingFileError,
    cross_match,
    layer_mapped_names,
    load_api_mapping,
    load_layer_mapping,
    mapped_name,
)
from dumpscope.core.engines.compare.match import OpRef
from dumpscope.core.engines.compare.yaml_subset import YamlSubsetError, loads, subset_loads
from dumpscope.tui.cli.entry import main

EXPECTED_BY_MSPROBE = {
    "Tensor.__add__.0.forward": None,
    "Tensor.__bool__.1.forward": None,
    "Tensor.__add__.1.forward": "Tensor.__add__.0.forward",
    "Mint.logical_or.0.forward": "Tensor.__or__.0.forward",
    "Distributed.all_reduce.0.forward": "Distributed.all_reduce.0.forward",
    "Cell.network_with_loss.module.language_model.embedding.word_embeddings.VocabParallelEmbedding.forward.0":
        "Module.module.module.language_model.embedding.word_embeddings.VocabParallelEmbedding.forward.0",
    "Primitive.norm.RmsNorm.0.forward": "NPU.npu_rms_norm.0.forward",
    "Cell.network_with_loss.module.language_model.encoder.layers.0.ParallelTransformerLayer.forward.0":
        "Module.module.module.language_model.encoder.layers.0.ParallelTransformerLayer.forward.0",
    "Cell.network_with_loss.module.language_model.encoder.layers.0.input_norm.FusedRMSNorm.backward.0": None,
    "Cell.network_with_loss.module.language_model.encoder.layers.0.attention.ParallelAttention.forward.0":
        "Module.module.module.language_model.encoder.layers.0.self_attention.ParallelAttention.forward.0",
    "Mint.cos.0.forward": "Torch.cos.0.forward",
    "Functional.flash_attention_score.0.forward": "NPU.npu_fusion_attention.0.forward",
    "Functional.flash_attention_score.0.backward": "NPU.npu_fusion_attention.0.backward",
}


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "msprobe_ut_ms_pt")


def _calls(root: Path, side: str, framework: str):
    rank = root / side / "step0" / "rank0"
    dump = json.loads((rank / "dump.json").read_text())
    stack = json.loads((rank / "stack.json").read_text())
    construct = json.loads((rank / "construct.json").read_text())
    return [(name, CallInfo(framework, construct.get(name) or "", stack.get(name) or [])) for name in dump["data"]]


def test_layer_mapping_pairs_exactly_as_msprobes_own_test(pair):
    got = layer_mapped_names(_calls(pair, "ms", "mindspore"), _calls(pair, "pt", "pytorch"),
                             load_layer_mapping(str(pair / "layer_mapping.yaml")))
    assert got == EXPECTED_BY_MSPROBE


def test_layer_mapping_without_module_tree_pairs_nothing(pair):
    ms = [(n, CallInfo(i.framework, "", i.stack)) for n, i in _calls(pair, "ms", "mindspore")]  # no construct
    got = layer_mapped_names(ms, _calls(pair, "pt", "pytorch"), load_layer_mapping(str(pair / "layer_mapping.yaml")))
    assert set(got) == set(EXPECTED_BY_MSPROBE) and set(got.values()) == {None}


def test_compare_with_layer_mapping_names_both_sides_and_the_rule(capsys, pair):
    doc = cli_json(capsys, "compare", str(pair / "pt"), str(pair / "ms"),
                   "--layer-mapping", str(pair / "layer_mapping.yaml"))
    pairs = {(r["target_name"], r["name"]) for r in doc["rows"]}  # (MindSpore target, PyTorch golden)
    assert pairs == {(ms, pt) for ms, pt in EXPECTED_BY_MSPROBE.items() if pt}
    assert {r["match"] for r in doc["rows"]} == {"layer_mapping"}
    # calls no rule pairs are listed, never forced together
    assert set(doc["unmatched_target"]) == {ms for ms, pt in EXPECTED_BY_MSPROBE.items() if pt is None}
    paired_pt = set(EXPECTED_BY_MSPROBE.values()) - {None}
    pt_names = json.loads((pair / "pt/step0/rank0/dump.json").read_text())["data"]
    assert set(doc["unmatched_golden"]) == set(pt_names) - paired_pt


def test_cross_framework_default_uses_msprobes_builtin_pairs_and_never_forces(capsys, pair):
    doc = cli_json(capsys, "compare", str(pair / "pt"), str(pair / "ms"))
    pairs = {(r["name"], r["target_name"], r["match"]) for r in doc["rows"]}
    assert ("Torch.cos.0.forward", "Mint.cos.0.forward", "api_mapping") in pairs
    assert {m for _, _, m in pairs} <= {"api_mapping", "fuzzy_order"}
    # renamed modules are not paired by order without a layer mapping
    assert not any(n.startswith("Module.") for n, _, _ in pairs)
    assert "Cell.network_with_loss.module.language_model.embedding.word_embeddings.VocabParallelEmbedding" \
           ".forward.0" in doc["unmatched_target"]


def _refs(names, side):
    return [OpRef(n, n.split(".")[1], i, (side, i)) for i, n in enumerate(names)]


def test_fuzzy_order_pairs_calls_of_one_api_when_counts_differ():
    ms = _refs(["Mint.cos.0.forward", "Mint.cos.1.forward", "Functional.dense.0.forward", "Mint.cos.2.forward"], "m")
    pt = _refs(["Torch.cos.0.forward", "Functional.linear.0.forward", "Torch.cos.7.forward"], "p")
    res = cross_match(pt, ms, {}, golden_is_ms=False)
    got = [(g.name, t.name, rule) for g, t, rule in res.pairs]
    assert got == [("Torch.cos.0.forward", "Mint.cos.0.forward", "api_mapping"),
                   ("Torch.cos.7.forward", "Mint.cos.1.forward", "fuzzy_order"),
                   ("Functional.linear.0.forward", "Functional.dense.0.forward", "api_mapping")]
    assert [o.name for o in res.unmatched_target] == ["Mint.cos.2.forward"] and res.unmatched_golden == []


def test_builtin_and_user_api_mapping(tmp_path):
    assert mapped_name("MintFunctional.relu.3.backward") == "Functional.relu.3.backward"
    assert mapped_name("Functional.dense.0.forward") == "Functional.linear.0.forward"
    assert mapped_name("Tensor.__add__.0.forward") == "Tensor.__add__.0.forward"
    f = tmp_path / "api_mapping.yaml"
    f.write_text("# user pairs\n"
                 "- ms_api: Functional.flash_attention_score\n"
                 "  pt_api: NPU.npu_fusion_attention\n"
                 "  ms_args: [0, 1, 2, 3]\n"
                 "  pt_args: [0, 1, 2, 3]\n"
                 "  ms_outputs:\n"
                 "    - 0\n"
                 "  pt_outputs:\n"
                 "    - 0\n")
    user = load_api_mapping(str(f))
    assert user == {"Functional.flash_attention_score": "NPU.npu_fusion_attention"}
    assert mapped_name("Functional.flash_attention_score.2.backward", user) == "NPU.npu_fusion_attention.2.backward"
    ms = _refs(["Functional.flash_attention_score.0.forward"], "m")
    pt = _refs(["NPU.npu_fusion_attention.0.forward"], "p")
    res = cross_match(pt, ms, {}, golden_is_ms=False, api_mapping=user)
    assert [(g.name, t.name, r) for g, t, r in res.pairs] == [
        ("NPU.npu_fusion_attention.0.forward", "Functional.flash_attention_score.0.forward", "api_mapping")]


def test_yaml_subset_and_bad_mapping_files(tmp_path, capsys, pair):
    for read in (loads, subset_loads):  # PyYAML when importable, and the subset reader
        assert read("A:\n  b.c: d  # note\n  'e': \"f(x)\"\nG:\n") == {"A": {"b.c": "d", "e": "f(x)"}, "G": None}
        assert read("- a: 1\n  b: [1, 'x', null]\n- 2\n") == [{"a": 1, "b": [1, "x", None]}, 2]
    with pytest.raises(YamlSubsetError, match="line 2"):
        subset_loads("A:\n  b: {c: d}\n")
    bad = tmp_path / "lm.yaml"
    bad.write_text("TopLayer:\n  - not a mapping\n")
    with pytest.raises(MappingFileError, match="lm.yaml"):
        load_layer_mapping(str(bad))
    code = main(["compare", str(pair / "pt"), str(pair / "ms"), "--layer-mapping", str(bad)])
    err = capsys.readouterr().err
    assert code == 1 and "lm.yaml" in err and len(err.strip().splitlines()) == 1


def test_real_mindspore_vs_pytorch_pair_is_paired_as_msprobe_compare_am_did(capsys, tmp_path_factory):
    import csv

    root = unpack_data(tmp_path_factory, "real_ms_pt_pair")
    with open(root / "msprobe_compare_am.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))

    def op(name: str) -> str:  # "Mint.cos.0.forward.input.0" -> "Mint.cos.0.forward"
        parts = name.split(".")
        cut = max(i for i, p in enumerate(parts) if p in ("input", "output"))
        return ".".join(parts[:cut])

    msprobe_pairs = {(op(r["NPU Name"]), op(r["Bench Name"])) for r in rows if r["Bench Name"] != "N/A"}
    msprobe_unmatched = {op(r["NPU Name"]) for r in rows if r["Bench Name"] == "N/A"}
    assert ("Mint.cos.0.forward", "Torch.cos.0.forward") in msprobe_pairs and msprobe_unmatched == {
        "Mint.cos.1.forward"}
    doc = cli_json(capsys, "compare", str(root / "pt"), str(root / "ms"))
    assert {(r["target_name"], r["name"]) for r in doc["rows"]} == msprobe_pairs
    assert {r["match"] for r in doc["rows"]} == {"api_mapping"}
    assert set(doc["unmatched_target"]) == msprobe_unmatched and doc["unmatched_golden"] == []
    # the same pair, golden and target the other way round
    doc = cli_json(capsys, "compare", str(root / "ms"), str(root / "pt"))
    assert {(r["name"], r["target_name"]) for r in doc["rows"]} == msprobe_pairs


def test_troubleshooter_names_pair_by_call_order_within_their_api():
    torch_side = [OpRef(n, "", i, ("p", i)) for i, n in enumerate(
        ["NN_Conv2d_0_forward", "Functional_relu_0_forward", "NN_Conv2d_1_forward"])]
    ms_side = [OpRef(n, "", i, ("m", i)) for i, n in enumerate(
        ["NN_Conv2d_0_forward", "Functional_relu_0_forward", "Functional_relu_1_forward", "NN_Conv2d_2_forward"])]
    res = cross_match(torch_side, ms_side, {}, golden_is_ms=False)
    assert [(g.name, t.name, r) for g, t, r in res.pairs] == [
        ("NN_Conv2d_0_forward", "NN_Conv2d_0_forward", "api_mapping"),
        ("Functional_relu_0_forward", "Functional_relu_0_forward", "api_mapping"),
        ("NN_Conv2d_1_forward", "NN_Conv2d_2_forward", "fuzzy_order")]
    assert [o.name for o in res.unmatched_target] == ["Functional_relu_1_forward"]
