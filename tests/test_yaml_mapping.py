"""Mapping files through PyYAML (issue 34): anchors, merge keys and multi-line strings, as people write
them, read the way msprobe reads them; without PyYAML the subset reader refuses them with one line naming
the file, never half-read.  The pair is msprobe's own public test pair (tests/data/msprobe_ut_ms_pt.tar.gz)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml  # noqa: F401  (the test extra's PyYAML, which loads() uses: this file fails to import without it)

from conftest import cli_json, unpack_data
from dumpscope.core.engines.compare.api_mapping import MappingFileError, load_api_mapping, load_layer_mapping
from dumpscope.core.engines.compare.yaml_subset import YamlSubsetError, loads, subset_loads
from dumpscope.tui.cli.entry import main

#: msprobe's layer_mapping.yaml for the pair, rewritten with what PyYAML reads and the subset does not:
#: an anchor, a merge key, an alias, a folded and a literal multi-line string
ANCHORED_LAYERS = """\
# the embedding's children, shared
embedding_children: &embedding
  logical_or: __or__

TopLayer:
  network_with_loss: module

VocabParallelEmbedding:
  <<: *embedding
  reduce_from_mp_region.all_reduce: >-
    all_reduce

ParallelTransformerLayer:
  attention: "self_attention"

ParallelAttention:
  flash_attention_score: |-
    core_attention_flash.npu_fusion_attention

FusedRMSNorm:
  RmsNorm: npu_rms_norm
"""


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "msprobe_ut_ms_pt")


def test_anchors_and_multi_line_strings_read_as_the_plain_file(pair, tmp_path):
    f = tmp_path / "layer_mapping.yaml"
    f.write_text(ANCHORED_LAYERS)
    plain = load_layer_mapping(str(pair / "layer_mapping.yaml"))
    got = load_layer_mapping(str(f))
    assert got.pop("embedding_children") == {"logical_or": "__or__"}  # the anchor's own block is a class too
    assert got == plain
    assert got["VocabParallelEmbedding"] == {"logical_or": "__or__", "reduce_from_mp_region.all_reduce": "all_reduce"}


def test_compare_with_the_anchored_file_pairs_as_with_the_plain_one(pair, tmp_path, capsys):
    f = tmp_path / "layer_mapping.yaml"
    f.write_text(ANCHORED_LAYERS)
    plain = cli_json(capsys, "compare", str(pair / "pt"), str(pair / "ms"),
                     "--layer-mapping", str(pair / "layer_mapping.yaml"))
    anchored = cli_json(capsys, "compare", str(pair / "pt"), str(pair / "ms"), "--layer-mapping", str(f))
    assert [(r["target_name"], r["name"], r["match"]) for r in anchored["rows"]] == \
        [(r["target_name"], r["name"], r["match"]) for r in plain["rows"]] and plain["rows"]


def test_the_real_file_reads_the_same_through_either_reader(pair):
    text = (pair / "layer_mapping.yaml").read_text()
    assert loads(text) == subset_loads(text) and loads(text)


def test_api_mapping_with_an_alias_and_a_flow_mapping(tmp_path):
    f = tmp_path / "api_mapping.yaml"
    f.write_text("- &fa {ms_api: Functional.flash_attention_score, pt_api: NPU.npu_fusion_attention,\n"
                 "        ms_args: [0, 1, 2, 3], pt_args: [0, 1, 2, 3]}\n"
                 "- ms_api: Mint.cos\n"
                 "  pt_api: >\n"
                 "    Torch.cos\n")
    assert load_api_mapping(str(f)) == {"Functional.flash_attention_score": "NPU.npu_fusion_attention",
                                        "Mint.cos": "Torch.cos\n"}


def test_without_pyyaml_the_subset_refuses_an_anchor_in_one_line(pair, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "yaml", None)  # PyYAML not installed: ``import yaml`` raises ImportError
    f = tmp_path / "layer_mapping.yaml"
    f.write_text(ANCHORED_LAYERS)
    with pytest.raises(MappingFileError, match=r"layer_mapping.yaml: line 2: unsupported YAML value '&embedding'"):
        load_layer_mapping(str(f))
    code = main(["compare", str(pair / "pt"), str(pair / "ms"), "--layer-mapping", str(f)])
    err = capsys.readouterr().err
    assert code == 1 and "layer_mapping.yaml" in err and len(err.strip().splitlines()) == 1


def test_pyyaml_errors_name_the_line_and_build_no_objects(tmp_path, capsys, pair):
    with pytest.raises(YamlSubsetError, match=r"^line 2: "):
        loads("A:\n  b: c: d\n")
    with pytest.raises(YamlSubsetError, match="python/object"):
        loads("A: !!python/object/apply:os.getcwd []\n")
    bad = tmp_path / "lm.yaml"
    bad.write_text("TopLayer:\n  network_with_loss: [module\n")
    code = main(["compare", str(pair / "pt"), str(pair / "ms"), "--layer-mapping", str(bad)])
    err = capsys.readouterr().err
    assert code == 1 and "lm.yaml: line 3" in err and len(err.strip().splitlines()) == 1
