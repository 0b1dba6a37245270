"""Real dumps written by Troubleshooter 1.0.18 and msprobe 26.2 (PyTorch on CPU), see tests/data/."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, unpack_data



@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_api_dumps")


@pytest.mark.parametrize("tree,names", [
    ("ts_a", ["NN_Conv2d_0_forward", "NN_BatchNorm2d_0_forward", "NN_ReLU_0_forward", "Torch_flatten_0_forward",
              "NN_Linear_0_forward"]),
    ("msp_a", ["Functional.conv2d.0.forward", "Functional.batch_norm.0.forward", "Torch.relu.0.forward",
               "Functional.linear.0.forward"]),
    ("msp_s", ["Functional.conv2d.0.forward", "Functional.batch_norm.0.forward", "Torch.relu.0.forward",
               "Functional.linear.0.forward"]),
])
def test_apis_in_call_order_with_shapes_and_dtypes(capsys, dumps, tree, names):
    doc = cli_json(capsys, "summary", str(dumps / tree))
    assert doc["problems"] == [] and doc["ranks"] == [0]
    ops = cli_json(capsys, "ops", str(dumps / tree))["ops"]
    assert [o["name"] for o in ops] == names
    bn_out = [t for t in ops[1]["tensors"] if t["io"] == "output"][0]
    assert bn_out["shape"] == [2, 4, 6, 6] and bn_out["dtype"] == "float32"


@pytest.mark.parametrize("tree,op", [("ts_a", "NN_BatchNorm2d_0_forward"),
                                     ("msp_a", "Functional.batch_norm.0.forward")])
def test_stack_lines_in_detail(capsys, dumps, tree, op):
    doc = cli_json(capsys, "show", str(dumps / tree), op)["op"]
    stack = doc.get("stack") or []
    assert any("_net.py" in line for line in stack)
    # the same frames as the contract's ``source``, the script's own line marked as the user's
    from dumpscope.core.graphs.source_frames import first_user_frame

    user = first_user_frame(doc["source"])
    assert user and user["file"].endswith("_net.py") and user["line"] > 0 and user["code"]


def test_stats_of_a_pt_tensor_equal_the_stored_values(capsys, dumps):
    doc = cli_json(capsys, "stats", str(dumps / "msp_a"), "Functional.conv2d.0.forward")
    pt = next((dumps / "msp_a").rglob("Functional.conv2d.0.forward.output.0.pt"))
    with zipfile.ZipFile(pt) as zf:
        raw = zf.read([n for n in zf.namelist() if "/data/" in n][0])
    ref = np.frombuffer(raw, "<f4").astype(np.float64)
    assert doc["count"] == ref.size == 2 * 4 * 6 * 6
    assert doc["max"] == ref.max() and doc["min"] == ref.min()
    assert doc["mean"] == pytest.approx(ref.mean(), rel=1e-9)
    # msprobe's own statistics agree
    dump = json.loads(next((dumps / "msp_a").rglob("dump.json")).read_text())
    out = dump["data"]["Functional.conv2d.0.forward"]["output"][0]
    assert out["Max"] == pytest.approx(doc["max"]) and out["Min"] == pytest.approx(doc["min"])


@pytest.mark.parametrize("golden,target,bn", [("ts_a", "ts_b", "NN_BatchNorm2d_0_forward"),
                                              ("msp_a", "msp_b", "Functional.batch_norm.0.forward")])
def test_changed_batchnorm_eps_is_the_first_divergence(capsys, dumps, golden, target, bn):
    doc = cli_json(capsys, "compare", str(dumps / golden), str(dumps / target))
    fd = doc["first_divergence"]
    assert fd["name"] == bn and fd["io"] == "output"
    conv = [r for r in doc["rows"] if "onv2" in r["name"] and r["io"] == "output"]
    assert conv and all(r["verdict"] == "pass" for r in conv)


def test_statistics_only_dump_is_explorable(capsys, dumps):
    doc = cli_json(capsys, "stats", str(dumps / "msp_s"), "Functional.batch_norm.0.forward")
    assert doc["max"] is not None and doc["min"] is not None
