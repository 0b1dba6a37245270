"""Issue acceptance checks on the committed sample trees (they need no ../shared/)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from dumpscope.core.query import open_query
from dumpscope.core.tensors.load import load_tensor
from conftest import cli_json, SAMPLES


# -- CANN binary trees (issue 3) ------------------------------------------------------------

def test_cann_ops_show_logical_and_device_shapes(capsys):
    ops = cli_json(capsys, "ops", str(SAMPLES / "cann_tf_adapter"))["ops"]
    by_name = {o["name"]: o for o in ops}
    conv = by_name["resnet/conv1/Conv2D"]
    w = [t for t in conv["tensors"] if t["io"] == "input" and t["slot"] == 1][0]
    assert w["format"] == "FRACTAL_Z" and len(w["shape"]) == 4 and w["shape"] != w["device_shape"]
    x = [t for t in conv["tensors"] if t["io"] == "input" and t["slot"] == 0][0]
    assert x["format"] == "NC1HWC0" and len(x["device_shape"]) == 5 and len(x["shape"]) == 4
    # the long-named op (all-digit alias + mapping.csv) and the FFTS+ op are listed under their real names
    assert any(n.endswith("/Mul") and "encoder_block_4" in n for n in by_name)
    assert "resnet/gelu/Gelu" in by_name
    summary = cli_json(capsys, "summary", str(SAMPLES / "cann_tf_adapter"))
    assert summary["steps"] == [0, 1] and summary["problems"] == []


def test_cann_tensor_values_are_the_logical_tensor():
    q = open_query(str(SAMPLES / "cann_tf_adapter"))
    conv = q.resolve_op("resnet/conv1/Conv2D")
    relu = q.resolve_op("resnet/relu1/Relu")
    bias = q.resolve_op("resnet/conv1/BiasAdd")
    out = [t for t in q.tensors(bias.id) if t.io == "output"][0]
    relu_in = [t for t in q.tensors(relu.id) if t.io == "input"][0]
    # the producer's output equals the consumer's input, both decoded from device layouts
    assert np.array_equal(load_tensor(out.ref()), load_tensor(relu_in.ref()))
    w = [t for t in q.tensors(conv.id) if t.io == "input" and t.slot == 1][0]
    assert load_tensor(w.ref()).shape == w.shape


def test_torchair_two_ranks(capsys):
    doc = cli_json(capsys, "summary", str(SAMPLES / "torchair_2rank"))
    assert doc["ranks"] == [0, 1]
    r1 = cli_json(capsys, "ops", str(SAMPLES / "torchair_2rank"), "--rank", "1")["ops"]
    assert r1 and all(o["rank"] == 1 for o in r1)


def test_truncated_cann_file_is_a_named_problem(tmp_path, capsys):
    tree = tmp_path / "t"
    shutil.copytree(SAMPLES / "cann_tf_adapter", tree)
    victim = next(tree.rglob("Relu.*"))
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    doc = cli_json(capsys, "summary", str(tree))
    assert any(p["path"] == str(victim) for p in doc["problems"])
    ops = cli_json(capsys, "ops", str(tree))["ops"]
    assert "resnet/fc/MatMul" in {o["name"] for o in ops}


# -- graphs (issue 4) -------------------------------------------------------------------------

def test_show_matmul_lists_its_graph_neighbourhood(capsys):
    op = cli_json(capsys, "show", str(SAMPLES / "cann_tf_adapter"), "resnet/fc/MatMul")["op"]
    assert any(i.startswith("resnet/flatten/Reshape") for i in op["inputs_from"])
    assert op["control_from"] == ["resnet/conv3d/Conv3D"]
    assert "resnet/fc/Cast" in op["consumers"]
    assert op["attrs"]["_datadump_original_op_names"]
    assert op["graph_file"]["name"] == "ge_default_20240613143502_1"


def test_no_task_node_is_graph_only():
    q = open_query(str(SAMPLES / "cann_tf_adapter"))
    graph_only = [o for o in q.ops(0, 0, graph_only=True) if o.graph_only == 1]
    assert "resnet/flatten/Reshape" in {o.name for o in graph_only}
    assert "resnet/flatten/Reshape" not in {o.name for o in q.ops(0, 0)}


def test_broken_graph_file_is_a_problem_and_the_dump_opens(tmp_path, capsys):
    tree = tmp_path / "t"
    shutil.copytree(SAMPLES / "cann_tf_adapter", tree)
    graph = next(tree.glob("ge_proto_*_Build.txt"))
    graph.write_text("graph { name: \"ge_default_20240613143502_1\" op { name: \"x\" type: \n\x00garbage {{{")
    doc = cli_json(capsys, "summary", str(tree))
    assert doc["ops"] > 0
    assert any(p["path"] == str(graph) for p in doc["problems"])


# -- overflow (issue 5) -----------------------------------------------------------------------

def test_overflow_opdebug_names_exp_first(capsys):
    rows = cli_json(capsys, "overflow", str(SAMPLES / "cann_overflow"), "--step", "1")["ops"]
    first = rows[0]
    assert first["type"] == "Exp" and first["evidence"] == "opdebug" and first["status"] == 32
    assert first["posinf"] > 0


def test_overflow_stats_tree_first_nan_op(capsys):
    rows = cli_json(capsys, "overflow", str(SAMPLES / "stats_only"))["ops"]
    assert rows[0]["type"] == "Sqrt" and rows[0]["evidence"] == "stats" and rows[0]["nan"] > 0


def test_overflow_by_scanning_mindspore_tensors(capsys):
    rows = cli_json(capsys, "overflow", str(SAMPLES / "mindspore_lenet_sync"), "--step", "1")["ops"]
    assert rows[0]["type"] == "Exp" and rows[0]["evidence"] == "tensor" and rows[0]["posinf"] > 0
    assert cli_json(capsys, "overflow", str(SAMPLES / "mindspore_lenet_sync"), "--step", "0")["ops"] == []


def test_bf16_stats_equal_numpy_on_exact_values(capsys):
    q = open_query(str(SAMPLES / "cann_tf_adapter"))
    for op in q.ops(0, 0):
        for t in q.tensors(op.id):
            if t.dtype != "bfloat16" or t.storage != "cann":
                continue
            arr = load_tensor(t.ref()).astype(np.float64)
            st = q.tensor_stats(t, use_cache=False)
            assert st["max"] == arr.max() and st["min"] == arr.min()
            assert st["mean"] == pytest.approx(arr.mean(), rel=1e-12, abs=1e-300)
            return
    pytest.fail("sample has no bfloat16 CANN tensor")


# -- watch and compare (issue 6) --------------------------------------------------------------

def test_watch_names_the_overwriting_op(capsys):
    doc = cli_json(capsys, "watch", str(SAMPLES / "watch"))
    (w,) = doc["watched"]
    assert w["name"] == "bert/attn/Softmax"
    assert w["first_change_after"] == "bert/ffn/Gelu"
    after = {s["after"]: s for s in w["snapshots"]}
    assert after["bert/ffn/MatMul"]["changed"] is False
    assert after["bert/ffn/Gelu"]["changed"] is True and after["bert/ffn/Gelu"]["changed_elements"] == 5


def test_compare_names_batchnorm_as_first_divergence(capsys):
    doc = cli_json(capsys, "compare", str(SAMPLES / "compare_golden"), str(SAMPLES / "compare_target"))
    fd = doc["first_divergence"]
    assert "BatchNorm" in fd["name"] and fd["io"] == "output"
    rows = {(r["name"], r["io"], r["slot"]): r for r in doc["rows"]}
    bn = rows[(fd["name"], "output", fd["slot"])]
    assert bn["verdict"] == "error" and bn["rule"]
    for (name, io, _), r in rows.items():
        if "Conv2D" in name and io == "output":
            assert r["verdict"] == "pass" and r["cosine"] > 0.9999


def test_compare_with_itself_all_pass(capsys):
    doc = cli_json(capsys, "compare", str(SAMPLES / "compare_golden"), str(SAMPLES / "compare_golden"))
    assert doc["rows"] and {r["verdict"] for r in doc["rows"]} == {"pass"}
    assert doc["first_divergence"] is None


# -- API-level dumps (issue 7) ----------------------------------------------------------------

@pytest.mark.parametrize("golden,target,bn", [
    ("msprobe", "msprobe_target", "Functional.batch_norm.0.forward"),
    ("troubleshooter", "troubleshooter_target", "Functional_batch_norm_0_forward"),
])
def test_api_dump_compare_first_divergence(capsys, golden, target, bn):
    doc = cli_json(capsys, "compare", str(SAMPLES / golden), str(SAMPLES / target))
    assert doc["first_divergence"]["name"] == bn and doc["first_divergence"]["io"] == "output"


def test_api_dump_ops_in_call_order_with_stack(capsys):
    ops = cli_json(capsys, "ops", str(SAMPLES / "msprobe"))["ops"]
    names = [o["name"] for o in ops]
    assert names.index("Functional.batch_norm.0.forward") > names.index("Functional.conv2d.0.forward")
    op = cli_json(capsys, "show", str(SAMPLES / "msprobe"), "Functional.batch_norm.0.forward")["op"]
    assert op.get("stack") or op["source"]


def test_stats_of_a_pt_tensor_equal_stored_values(capsys):
    import zipfile

    q = open_query(str(SAMPLES / "msprobe"))
    op = q.resolve_op("Functional.conv2d.0.forward")
    (t,) = [t for t in q.tensors(op.id) if t.io == "output"]
    assert t.storage == "pt"
    # the stored values, read straight from the zip's storage bytes (little-endian float32, contiguous)
    with zipfile.ZipFile(t.path) as zf:
        raw = zf.read([n for n in zf.namelist() if n.endswith("/data/0")][0])
    ref = np.frombuffer(raw, "<f4").astype(np.float64)
    doc = cli_json(capsys, "stats", str(SAMPLES / "msprobe"), "Functional.conv2d.0.forward")
    assert doc["count"] == ref.size and doc["max"] == ref.max() and doc["min"] == ref.min()
    assert doc["mean"] == pytest.approx(ref.mean(), rel=1e-9)
