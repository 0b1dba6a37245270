"""Real msprobe 26.2 dumps (torch CPU, L0/L1/mix, tensor/statistics, 2 gloo ranks, a NaN run), see
tests/data/msprobe26/README.md.  Every expectation is read from msprobe's own dump.json / .pt files."""

from __future__ import annotations

import json
import math
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, unpack_data
from dumpscope.tui.cli.entry import main

RUNS = ["l0_tensor", "l1_tensor", "mix_tensor", "mix_stats", "nan_stats", "dist_stats"]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_msprobe26")


def _is_tensor(item) -> bool:
    return isinstance(item, dict) and str(item.get("type", "")).endswith("Tensor")


def _tensor_items(value):
    if isinstance(value, list):
        for v in value:
            yield from _tensor_items(v)
    elif isinstance(value, dict) and not _is_tensor(value) and "type" not in value:
        for v in value.values():
            yield from _tensor_items(v)
    elif _is_tensor(value):
        yield value


def _places(root: Path):
    """(step, rank, dump.json) of every dump.json of a run."""
    for path in sorted(root.rglob("dump.json")):
        step = int(path.parent.parent.name[len("step"):])
        rank_dir = path.parent.name
        rank = int(rank_dir[4:] or 0) if rank_dir.startswith("rank") else 0
        yield step, rank, json.loads(path.read_text())


@pytest.mark.parametrize("run", RUNS)
def test_tensor_counts_per_step_equal_dump_json(capsys, dumps, run):
    places = list(_places(dumps / run))
    assert places
    doc = cli_json(capsys, "summary", str(dumps / run))
    assert doc["problems"] == []
    for step, rank, dump in places:
        expected = sum(1 for entry in dump["data"].values() for _ in _tensor_items(entry))
        ops = cli_json(capsys, "ops", str(dumps / run), "--step", str(step), "--rank", str(rank))["ops"]
        tensors = [t for o in ops for t in o["tensors"] if t["storage"] != "value"]
        assert len(tensors) == expected, (step, rank)
    assert doc["tensors"] == sum(sum(1 for e in d["data"].values() for _ in _tensor_items(e))
                                 for _s, _r, d in places)


def test_parameter_gradients_are_outputs_of_the_module_backward(capsys, dumps):
    _s, _r, dump = next(_places(dumps / "mix_tensor"))
    grads = dump["data"]["Module.norm.LayerNorm.parameters_grad.0"]
    doc = cli_json(capsys, "show", str(dumps / "mix_tensor"), "Module.norm.LayerNorm.backward.0")["op"]
    own_outputs = len(list(_tensor_items(dump["data"]["Module.norm.LayerNorm.backward.0"]["output"])))
    outs = [t for t in doc["tensors"] if t["io"] == "output"]
    named = {t["arg"]: t for t in outs if t.get("parameters_grad")}
    assert set(named) == set(grads) == {"weight", "bias"}
    assert sorted(t["slot"] for t in named.values()) == [own_outputs, own_outputs + 1]
    for name, t in named.items():
        assert t["shape"] == grads[name][0]["shape"] == [6]
        assert t["file"].endswith(grads[name][0]["data_name"])
    # the values are msprobe's: its own Max of the weight gradient
    st = cli_json(capsys, "stats", str(dumps / "mix_tensor"), "Module.norm.LayerNorm.backward.0",
                  "--io", "output", "--slot", str(named["weight"]["slot"]))
    assert st["max"] == pytest.approx(grads["weight"][0]["Max"], rel=1e-6)
    assert st["source"] == "tensor"


def test_non_tensor_arguments_keep_their_slots_and_names(capsys, dumps):
    _s, _r, dump = next(_places(dumps / "l1_tensor"))
    entry = dump["data"]["Functional.layer_norm.1.forward"]
    assert entry["input_args"][2] is None  # F.layer_norm(h, (6,), None, self.scale)
    doc = cli_json(capsys, "show", str(dumps / "l1_tensor"), "Functional.layer_norm.1.forward")["op"]
    ins = [t for t in doc["tensors"] if t["io"] == "input"]
    assert [(t["slot"], t["storage"] == "value", t["dtype"]) for t in ins] == [
        (0, False, "float32"), (1, True, "list"), (2, True, "none"), (3, False, "float32")]
    assert ins[1]["value"] == [6] and ins[2]["value"] is None
    assert ins[3]["shape"] == entry["input_args"][3]["shape"]
    add = cli_json(capsys, "show", str(dumps / "l1_tensor"), "Torch.add.0.forward")["op"]
    kw = {t["arg"]: t for t in add["tensors"] if t.get("arg")}
    assert kw["alpha"]["value"] == dump["data"]["Torch.add.0.forward"]["input_kwargs"]["alpha"]["value"] == 2
    assert [t["value"] for t in add["tensors"] if t["io"] == "input" and t.get("pos") == "1"] == [1.0]
    gelu = cli_json(capsys, "show", str(dumps / "l1_tensor"), "Functional.gelu.0.forward")["op"]
    assert [(t["arg"], t["dtype"], t["value"]) for t in gelu["tensors"] if t.get("arg")] == [
        ("approximate", "str", "tanh")]
    # a value has no statistics: a clear one-line error, not a crash
    code = main(["stats", str(dumps / "l1_tensor"), "Functional.layer_norm.1.forward", "--io", "input", "--slot", "2"])
    err = capsys.readouterr().err
    assert code == 1 and "non-tensor argument" in err


def test_statistics_only_tensors_report_dtype_and_shape(capsys, dumps):
    _s, _r, dump = next(_places(dumps / "mix_stats"))
    item = dump["data"]["Functional.linear.0.forward"]["output"][0]
    st = cli_json(capsys, "stats", str(dumps / "mix_stats"), "Functional.linear.0.forward")
    assert st["source"] == "stats"
    assert st["dtype"] == "float32" and st["shape"] == item["shape"] == [2, 6]
    assert st["count"] == 12
    assert st["max"] == item["Max"] and st["l2norm"] == item["Norm"]


def test_nan_statistics_run_gives_the_nan_api_first(capsys, dumps):
    _s, _r, dump = next(_places(dumps / "nan_stats"))
    # what msprobe itself wrote: the first API whose output Max is not finite, inputs finite
    bad = [name for name, e in dump["data"].items() if not math.isfinite(e["output"][0]["Max"])]
    assert bad[0] == "Torch.sqrt.0.forward"
    rows = cli_json(capsys, "overflow", str(dumps / "nan_stats"))["ops"]
    assert [r["name"] for r in rows] == bad
    assert rows[0]["evidence"] == "stats" and rows[0]["nan"] >= 1
    exp = next(r for r in rows if r["name"] == "Torch.exp.0.forward")
    assert exp["posinf"] >= 1 and exp["nan"] == 0
    # stats keeps min/max finite-only (null) and says what msprobe recorded
    st = cli_json(capsys, "stats", str(dumps / "nan_stats"), "Torch.exp.0.forward")
    assert st["max"] is None and st["recorded_nonfinite"] == {"max": "inf", "mean": "inf", "l2norm": "inf"}


def test_show_has_the_runs_own_source_lines(capsys, dumps):
    from dumpscope.core.graphs.source_frames import first_user_frame

    doc = cli_json(capsys, "show", str(dumps / "l1_tensor"), "Functional.gelu.0.forward")["op"]
    user = first_user_frame(doc["source"])  # the user's line nearest the call (frames outermost first)
    assert user and user["file"].endswith("make_dumps.py")
    assert "F.gelu(h, approximate=\"tanh\")" in user["code"]
    assert "<module>" in doc["stack"][-1] and doc["source"][0]["func"] == "<module>"
    assert all(not f["user"] for f in doc["source"] if "site-packages" in f["file"])


def test_two_gloo_ranks_and_two_steps(capsys, dumps):
    doc = cli_json(capsys, "summary", str(dumps / "dist_stats"))
    assert doc["ranks"] == [0, 1]
    ops = cli_json(capsys, "ops", str(dumps / "dist_stats"), "--rank", "1", "--grep", "all_reduce")["ops"]
    assert [o["name"] for o in ops] == ["Distributed.all_reduce.0.forward"]
    assert cli_json(capsys, "summary", str(dumps / "mix_stats"))["steps"] == [0, 1]


def test_pt_gradient_payload_equals_msprobe_statistics(capsys, dumps):
    pt = next((dumps / "l0_tensor").rglob("Module.fc1.Linear.parameters_grad.0.weight.pt"))
    with zipfile.ZipFile(pt) as zf:
        raw = zf.read([n for n in zf.namelist() if "/data/" in n][0])
    ref = np.frombuffer(raw, "<f4").astype(np.float64)
    doc = cli_json(capsys, "show", str(dumps / "l0_tensor"), "Module.fc1.Linear.backward.0")["op"]
    slot = next(t["slot"] for t in doc["tensors"] if t.get("arg") == "weight")
    st = cli_json(capsys, "stats", str(dumps / "l0_tensor"), "Module.fc1.Linear.backward.0", "--io", "output",
                  "--slot", str(slot))
    assert st["count"] == ref.size == 24
    assert st["max"] == pytest.approx(ref.max()) and st["l2norm"] == pytest.approx(np.linalg.norm(ref))


def test_broken_dump_json_is_one_named_problem_and_the_other_step_stays(capsys, dumps, tmp_path):
    tree = tmp_path / "mix_stats"
    shutil.copytree(dumps / "mix_stats", tree)
    broken = next(tree.glob("step1/*/dump.json"))
    doc = json.loads(broken.read_text())
    doc["data"] = list(doc["data"].values())  # a list where an object belongs
    broken.write_text(json.dumps(doc))
    summary = cli_json(capsys, "summary", str(tree))
    assert len(summary["problems"]) == 1
    problem = summary["problems"][0]
    assert problem["path"].endswith("dump.json") and "step1" in problem["path"] and "'data'" in problem["error"]
    assert summary["steps"] == [0]
    ops = cli_json(capsys, "ops", str(tree), "--step", "0")["ops"]
    assert len(ops) > 30


def test_malformed_fields_are_named_and_the_rest_of_the_file_stays(capsys, dumps, tmp_path):
    tree = tmp_path / "l1"
    shutil.copytree(dumps / "l1_tensor", tree)
    path = next(tree.rglob("dump.json"))
    doc = json.loads(path.read_text())
    data = doc["data"]
    data["Functional.relu.0.forward"]["input_args"] = "oops"
    data["Functional.gelu.0.forward"]["output"][0]["shape"] = "2x6"
    data["Torch.max.0.forward"] = 7
    path.write_text(json.dumps(doc))
    summary = cli_json(capsys, "summary", str(tree))
    errors = [p["error"] for p in summary["problems"]]
    assert any("Functional.relu.0.forward" in e and "input_args" in e for e in errors)
    assert any("Functional.gelu.0.forward" in e and "shape" in e for e in errors)
    assert any("Torch.max.0.forward" in e for e in errors)
    names = [o["name"] for o in cli_json(capsys, "ops", str(tree))["ops"]]
    assert "Torch.max.0.forward" not in names
    assert {"Functional.relu.0.forward", "Functional.gelu.0.forward", "Functional.linear.0.forward"} <= set(names)
    gelu = cli_json(capsys, "show", str(tree), "Functional.gelu.0.forward")["op"]
    assert [t["slot"] for t in gelu["tensors"] if t["io"] == "output"] == [0]  # kept, shape unknown


def test_convert_writes_the_tensors_and_says_what_it_skipped(capsys, dumps, tmp_path):
    code = main(["convert", str(dumps / "l1_tensor"), str(tmp_path / "out"), "--op", "Functional.layer_norm.1.forward"])
    out = capsys.readouterr().out
    assert code == 0 and "wrote 3 tensors" in out and "skipped 2" in out
    assert len(list((tmp_path / "out").rglob("*.npy"))) == 3
