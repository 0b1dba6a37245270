"""The re-dump config's ``acl.json`` part (issue 31): CANN's model dump reads ``dump.dump_list``, a list of
``{model_name, layer: [op names]}`` (CANN ``aclmdlSetDump`` / acl.json reference), beside the ``dump_layer``
string the TF adapter reads; and triage's verdict when nothing could be judged."""

from __future__ import annotations

import json

import numpy as np

from dumpscope.core.engines.redump_config import redump_config
from dumpscope.tui.cli.entry import main
from synth.job_tree import write_cann_stats_job


def test_acl_json_lists_layers_per_model_in_first_seen_order():
    names = ["m1/conv1", "m2/relu", "m1/with space", "loose", "m1/conv1"]
    models = {"m1/conv1": "resnet", "m1/with space": "resnet", "m2/relu": "head"}
    cfg, left_out = redump_config(names, models)
    dump = cfg["cann"]["acl_json"]["dump"]
    assert dump["dump_list"] == [{"model_name": "resnet", "layer": ["m1/conv1", "m1/with space"]},
                                 {"model_name": "head", "layer": ["m2/relu"]},
                                 {"layer": ["loose"]}]  # no model known: ACL applies it to every model
    assert (dump["dump_path"], dump["dump_mode"], dump["dump_data"]) == ("dump", "all", "tensor")
    assert cfg["cann"]["dump_layer"] == "m1/conv1 m2/relu loose" and left_out == ["m1/with space"]


def test_triage_of_a_cann_job_names_its_model_in_acl_json(capsys, tmp_path):
    a = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float16)
    root = write_cann_stats_job(tmp_path / "job", 2, 2, 3, a, nan_at=(1, 1, 1), nan_index=(0, 3))
    out = tmp_path / "redump.json"
    code = main(["triage", str(root), "--json", "--cache-dir", str(tmp_path / "c"), "--export-config", str(out)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 3 and doc["verdict"] == "overflow"
    origin = doc["origin"]
    # the file-side name: a stats job has no graph
    assert (origin["name"], origin["rank"], origin["step"]) == ("model_layer_1_Mul", 1, 1)
    rc = doc["redump_config"]
    assert rc["tool"] == "cann"
    entry = rc["config"]["cann"]["acl_json"]["dump"]["dump_list"][0]
    assert entry == {"model_name": "ge_default_20240801000000_1", "layer": rc["ops"]}
    assert entry["layer"][0] == origin["name"]
    written = json.loads(out.read_text())  # --export-config writes the same document
    assert written["cann"]["acl_json"] == rc["config"]["cann"]["acl_json"]


def test_nothing_to_judge_is_incomplete_and_exits_1(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    code = main(["triage", str(tmp_path / "empty"), "--json", "--cache-dir", str(tmp_path / "c")])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 1 and doc["verdict"] == "incomplete" and doc["origin"] is None
    assert "nothing could be judged" in doc["why"] and "nothing could be judged" in captured.err
