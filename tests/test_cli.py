"""The command line contract (CLI.md): names, JSON keys, exit codes, read-only behaviour."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from synth.cann_writer import SynthTensor, write_dump
from dumpscope.tui.cli.entry import main
from test_index import digest, make_tree

MODEL_DIR = ("20240613143502", "0", "ge_default_1", "1")


def cann_tree(root):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 5, 3, 3)).astype(np.float32)
    d = root.joinpath(*MODEL_DIR, "0")
    write_dump(d, "Conv2D", "net/conv1/Conv2D", 1, 2, 1700000000000001,
               inputs=[SynthTensor(x, "float16", "NC1HWC0"), SynthTensor(w, "float16", "FRACTAL_Z")],
               outputs=[SynthTensor(x[:, :3], "float16", "NC1HWC0")])
    write_dump(d, "Exp", "net/exp/Exp", 2, 2, 1700000000000002, inputs=[SynthTensor(x, "float32", "ND")],
               outputs=[SynthTensor(np.where(x > 1, np.inf, x).astype(np.float32), "float32", "ND")])
    return x, w


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_summary_json_keys(tmp_path, capsys):
    make_tree(tmp_path, steps=(0, 1))
    code, out, _ = run(capsys, "summary", str(tmp_path), "--json")
    assert code == 0
    doc = json.loads(out)
    for key in ("path", "layouts", "ranks", "steps", "graphs", "ops", "tensors", "problems"):
        assert key in doc
    assert doc["steps"] == [0, 1] and doc["ranks"] == [0] and doc["ops"] == 4
    assert {"name", "root", "files"} <= set(doc["layouts"][0])


def test_ops_json_and_csv(tmp_path, capsys):
    cann_tree(tmp_path)
    code, out, _ = run(capsys, "ops", str(tmp_path), "--json")
    assert code == 0
    ops = json.loads(out)["ops"]
    assert [o["name"] for o in ops] == ["net/conv1/Conv2D", "net/exp/Exp"]
    conv = ops[0]
    assert {"name", "file_name", "type", "rank", "step", "graph", "exec_index", "tensors"} <= set(conv)
    w = [t for t in conv["tensors"] if t["io"] == "input" and t["slot"] == 1][0]
    assert w["format"] == "FRACTAL_Z" and w["shape"] == [3, 5, 3, 3] and w["dtype"] == "float16"
    assert w["device_shape"] == [9, 1, 16, 16]
    code, out, _ = run(capsys, "ops", str(tmp_path), "--csv", "--grep", "exp")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["name"] for r in rows} == {"net/exp/Exp"} and len(rows) == 2


def test_stats_of_device_format_tensor_equal_numpy(tmp_path, capsys):
    x, w = cann_tree(tmp_path)
    code, out, _ = run(capsys, "stats", str(tmp_path), "net/conv1/Conv2D", "--io", "input", "--slot", "1", "--json")
    assert code == 0
    doc = json.loads(out)
    ref = w.astype(np.float16).astype(np.float64)
    assert doc["count"] == ref.size and doc["shape"] == [3, 5, 3, 3]
    assert doc["max"] == ref.max() and doc["min"] == ref.min()
    assert doc["mean"] == pytest.approx(ref.mean(), rel=1e-12)


def test_overflow_finds_the_inf_op(tmp_path, capsys):
    cann_tree(tmp_path)
    code, out, _ = run(capsys, "overflow", str(tmp_path), "--json")
    assert code == 0
    rows = json.loads(out)["ops"]
    assert rows[0]["name"] == "net/exp/Exp" and rows[0]["evidence"] == "tensor" and rows[0]["posinf"] > 0


def test_convert_writes_logical_npy_and_leaves_the_tree_alone(tmp_path, capsys):
    tree = tmp_path / "tree"
    x, w = cann_tree(tree)
    before = digest(tree)
    out = tmp_path / "out"
    code, _, err = run(capsys, "convert", str(tree), str(out))
    assert code == 0, err
    assert digest(tree) == before
    conv_file = next(tree.joinpath(*MODEL_DIR, "0").glob("Conv2D.*")).name
    got = np.load(out.joinpath(*MODEL_DIR, "0", f"{conv_file}.input.1.npy"))
    assert got.dtype == np.float16 and np.array_equal(got, w.astype(np.float16))
    act = np.load(out.joinpath(*MODEL_DIR, "0", f"{conv_file}.input.0.npy"))
    assert act.shape == (2, 5, 4, 4) and np.array_equal(act, x.astype(np.float16))


def test_convert_refuses_outdir_inside_the_tree(tmp_path, capsys):
    cann_tree(tmp_path)
    before = digest(tmp_path)
    code, _, err = run(capsys, "convert", str(tmp_path), str(tmp_path / "converted"))
    assert code == 1 and "inside the dump tree" in err
    assert digest(tmp_path) == before


def test_errors_are_one_line_exit_1_and_usage_exit_2(tmp_path, capsys):
    code, _, err = run(capsys, "summary", str(tmp_path / "missing"))
    assert code == 1 and len(err.strip().splitlines()) == 1 and "missing" in err
    code, _, err = run(capsys, "stats", str(tmp_path))
    assert code == 2
    make_tree(tmp_path)
    code, _, err = run(capsys, "stats", str(tmp_path), "Default/Add-op0", "--io", "output", "--slot", "7")
    assert code == 1 and "no output 7" in err


def test_compare_with_itself_is_all_pass(tmp_path, capsys):
    make_tree(tmp_path, steps=(0,))
    code, out, _ = run(capsys, "compare", str(tmp_path), str(tmp_path), "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["rows"] and all(r["verdict"] == "pass" for r in doc["rows"])
    assert doc["first_divergence"] is None
    for key in ("name", "io", "slot", "step", "rank", "cosine", "euc_dist", "max_abs_err", "max_rel_err",
                "one_thousandth_ratio", "five_thousandth_ratio", "verdict", "rule"):
        assert key in doc["rows"][0]


def test_python_m_dumpscope_runs(tmp_path):
    make_tree(tmp_path)
    res = subprocess.run([sys.executable, "-m", "dumpscope", "ops", str(tmp_path), "--json"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0 and json.loads(res.stdout)["ops"]
