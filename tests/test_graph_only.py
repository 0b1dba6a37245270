"""Graphs without dumps (issue 19): real GE graph dumps from CANN's own test data alone in a folder,
a MindSpore ``graphs/`` folder alone, graphs beside unrelated dumps, broken graph files, and the
re-dump config written from the listed ops.

Expected values come from the graph text itself (simple line scans written here), never from
dumpscope's parsers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLES, unpack_data
from dumpscope.core.query import open_query

FUSED = "conv1conv1_relu"


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dumpscope", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def _json(*args: str) -> dict:
    res = _run(*args, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def ge_graphs(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ge_graphs") / "real_ge_graphs"


def _text_graphs(path: Path) -> list[tuple[str, list[tuple[str, str, list[str]]]]]:
    """(graph name, [(op name, type, inputs)]) per ``graph {`` of a GE proto text, by line scan."""
    graphs: list[tuple[str, list]] = []
    op = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line == "graph {":
            graphs.append(("", []))
        elif line.startswith("  name: ") and graphs and not graphs[-1][0]:
            graphs[-1] = (line[len('  name: "'):-1], graphs[-1][1])
        elif line == "  op {":
            op = ["", "", []]
            graphs[-1][1].append(op)
        elif op is not None and line.startswith("    name: ") and not op[0]:
            op[0] = line[len('    name: "'):-1]
        elif op is not None and line.startswith("    type: ") and not op[1]:
            op[1] = line[len('    type: "'):-1]
        elif op is not None and line.startswith("    input: "):
            op[2].append(line[len('    input: "'):-1])
    return [(name, [tuple(o) for o in ops]) for name, ops in graphs]


def test_a_folder_of_real_ge_graphs_lists_every_graph_and_node(ge_graphs):
    doc = _json("summary", str(ge_graphs))
    protos = sorted(ge_graphs.rglob("ge_proto_*.txt"))
    assert len(protos) == 4
    expected = {(g, p.name) for p in protos for g, _ in _text_graphs(p)}
    listed = {(g["graph"], Path(g["file"]).name) for g in doc["graph_files"] if g.get("listed")}
    assert listed == expected
    assert set(doc["graphs"]) == {g for g, _ in expected}
    # the ONNX views describe graphs already listed from the proto text: still reported, not dropped
    onnx = [g for g in doc["graph_files"] if g["kind"] == "ge_onnx"]
    assert len(onnx) == 2 and all(not g["joined"] and "same graph as" in g["note"] for g in onnx)
    assert doc["problems"] == []
    nodes = {(g, o[0], o[1]) for p in protos for g, ops in _text_graphs(p) for o in ops}
    assert doc["ops"] == len(nodes) == 6 + 18 + 170 + 5

    ops = _json("ops", str(ge_graphs))["ops"]
    assert {(o["graph"], o["name"], o["type"]) for o in ops} == nodes
    assert [o["exec_index"] for o in ops] == list(range(len(ops)))
    # topological: a node comes after the producers of its data and control inputs (same graph)
    where = {(o["graph"], o["name"]): o["exec_index"] for o in ops}
    for p in protos:
        for g, graph_ops in _text_graphs(p):
            for name, _type, inputs in graph_ops:
                for src in inputs:
                    producer = src.rsplit(":", 1)[0]
                    if src and (g, producer) in where:
                        assert where[(g, producer)] < where[(g, name)], (g, name, src)


def test_show_a_fused_conv2d_gives_inputs_and_original_op_names(ge_graphs):
    text = (ge_graphs / "complie_path" / "ge_proto_00000062_Build.txt").read_text(encoding="utf-8", errors="replace")
    block = text[text.index(f'    name: "{FUSED}"'):]
    block = block[: block.index("\n  }\n")]
    inputs = re.findall(r'^    input: "(.*)"$', block, re.M)
    original = re.search(r'key: "_datadump_original_op_names"\n(.*?)val_type', block, re.S).group(1)
    original_names = re.findall(r's: "(.*)"', original)
    assert original_names == ["conv1", "bn_conv1", "scale_conv1", "conv1_relu"]

    op = _json("show", str(ge_graphs), FUSED)["op"]
    assert op["type"] == "Conv2D"
    assert op["inputs_from"] == [i for i in inputs if i and not i.endswith(":-1")]
    assert op["original_op_names"] == original_names
    assert op["attrs"]["_datadump_original_op_names"] == original_names
    assert op["consumers"] == ["pool1"]
    # the kernel binary is not poured onto the terminal
    assert op["attrs"]["_tbe_kernel_buffer"].startswith("<binary data")
    assert [d["shape"] for d in op["output_descs"]] == [[1, 64, 112, 112]]
    human = _run("show", str(ge_graphs), FUSED)
    assert human.returncode == 0 and "conv1, bn_conv1, scale_conv1, conv1_relu" in human.stdout
    assert "\x1b" not in human.stdout and "\x00" not in human.stdout


def test_grep_then_export_config_puts_the_fused_name_in_dump_layer(ge_graphs, tmp_path):
    out = tmp_path / "f.json"
    res = _run("ops", str(ge_graphs), "--grep", "conv1", "--export-config", str(out), "--json")
    assert res.returncode == 0, res.stderr
    listed = [o["name"] for o in json.loads(res.stdout)["ops"]]
    assert FUSED in listed
    cfg = json.loads(out.read_text())
    assert cfg["cann"]["dump_layer"].split(" ") == listed
    assert cfg["mindspore"]["common_dump_settings"]["kernels"] == listed
    assert cfg["msprobe"]["list"] == listed
    # never inside the dump tree
    inside = ge_graphs / "f.json"
    res = _run("ops", str(ge_graphs), "--grep", "conv1", "--export-config", str(inside))
    assert res.returncode == 1 and "inside the dump tree" in res.stderr and not inside.exists()


def test_a_graph_beside_an_unrelated_dump_is_listed_and_a_broken_one_is_a_problem(ge_graphs, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(SAMPLES / "mindspore_lenet_sync", tree)
    shutil.copy(ge_graphs / "complie_path_train" / "ge_proto_00056_Build.txt", tree)
    (tree / "ge_proto_00057_Build.txt").write_text("graph {\n  name: \"x\"\n  op {\n    name: \x00\x01 garbage\n")
    doc = _json("summary", str(tree))
    assert doc["ops"] > 0  # the dump itself is still there
    entry = next(g for g in doc["graph_files"] if g["file"].endswith("ge_proto_00056_Build.txt"))
    assert entry["joined"] is False and entry["name"] == "ge_default_20200909152235_1" and entry["nodes"] == 5
    broken = next(g for g in doc["graph_files"] if g["file"].endswith("ge_proto_00057_Build.txt"))
    assert broken["joined"] is False and broken["error"]
    assert any(p["path"].endswith("ge_proto_00057_Build.txt") for p in doc["problems"])
    # the graph's nodes are not mixed into the dump's ops
    names = {o["name"] for o in _json("ops", str(tree))["ops"]}
    assert not names & {"data", "Node_Output"}


def test_a_mindspore_graphs_folder_alone_is_browsable(real_lenet_tree, tmp_path):
    tree = tmp_path / "ms"
    shutil.copytree(real_lenet_tree / "rank_0" / "graphs", tree / "rank_0" / "graphs")
    ir = (tree / "rank_0" / "graphs" / "ms_output_trace_code_graph_0.ir").read_text(encoding="utf-8")
    fullnames = re.findall(r"# Fullname with scope: \((.*)\)", ir)
    doc = _json("summary", str(tree))
    assert doc["graphs"] == ["0"] and doc["problems"] == []
    pb = next(g for g in doc["graph_files"] if g["file"].endswith(".pb"))
    assert pb["joined"] is False and "ir beside it" in pb["note"]
    ops = _json("ops", str(tree))["ops"]
    names = [o["name"] for o in ops]
    assert set(fullnames) <= set(names)
    assert [o["exec_index"] for o in ops] == list(range(len(ops)))
    # parameters are listed apart (--kind parameter), like a dump's Parameter files
    params = {o["name"] for o in _json("ops", str(tree), "--kind", "parameter")["ops"]}
    declared = set(re.findall(r"^%para\d+_(\S+?)\s*:", ir, re.M))
    assert declared and declared <= params and not params & set(names)
    op = _json("show", str(tree), "Default/network-WithLossCell/_backbone-LeNet/conv1-Conv2d/Conv2D-op0")["op"]
    assert any(s["file"].endswith("net.py") and s["line"] == 17 for s in op["source"])
    assert op["consumers"]


def test_graph_only_index_in_the_query_api(ge_graphs):
    q = open_query(str(ge_graphs))
    op = q.resolve_op(FUSED)
    assert op.producer == "graph" and q.tensors(op.id) == []
    details = q.graph_details(op)
    assert details["graph"]["name"] == "ResNet-50_0"


def test_show_graph_two_hops_from_the_graph_text(ge_graphs):
    """``show --graph``: levels -2..+2 are the producers/consumers found by walking the text's inputs."""
    graphs = _text_graphs(ge_graphs / "complie_path" / "ge_proto_00000062_Build.txt")
    ops = {name: [i.rsplit(":", 1)[0] for i in inputs if i] for name, _t, inputs in graphs[0][1]}
    consumers: dict[str, list[str]] = {}
    for name, inputs in ops.items():
        for src in inputs:
            consumers.setdefault(src, []).append(name)
    up1 = set(ops[FUSED])
    up2 = {p for n in up1 for p in ops.get(n, [])} - up1 - {FUSED}
    down1 = set(consumers.get(FUSED, []))
    down2 = {c for n in down1 for c in consumers.get(n, [])} - down1 - {FUSED}
    nb = _json("show", str(ge_graphs), FUSED, "--graph")["op"]["neighbourhood"]
    got = {lv: {n["name"] for n in nodes} for lv, nodes in nb.items()}
    assert got == {"-2": up2, "-1": up1, "0": {FUSED}, "1": down1, "2": down2}
    assert all(n["links"] == [FUSED] for n in nb["-1"] + nb["1"])
    text = _run("show", str(ge_graphs), FUSED, "--graph").stdout
    assert "▶ Conv2D" in text and "← conv1conv1_relu" in text


def test_a_mindspore_pb_alone_reads_like_its_ir(real_lenet_tree, tmp_path):
    """MindSpore 2.10 wrote both files of the LeNet graph: the .pb alone gives the same nodes, edges
    and (for forward ops) the same source frames as the .ir; and ``--source`` works on it."""
    from dumpscope.core.graphs import load_graph_file

    graphs = real_lenet_tree / "rank_0" / "graphs"
    ir = load_graph_file(graphs / "ms_output_trace_code_graph_0.ir")[0]
    tree = tmp_path / "pbonly" / "rank_0" / "graphs"
    tree.mkdir(parents=True)
    shutil.copy(graphs / "ms_output_trace_code_graph_0.pb", tree)
    doc = _json("summary", str(tmp_path / "pbonly"))
    assert doc["problems"] == [] and doc["graphs"] == ["0"]
    pb = load_graph_file(tree / "ms_output_trace_code_graph_0.pb")[0]
    real = {n for n, x in ir.nodes.items() if x.type not in ("Parameter", "Return")}
    assert real <= set(pb.nodes)

    def refs(node):
        return [i for i in node.inputs if "/" in i or i.startswith("param:")]

    for name in real:
        assert pb.nodes[name].type == ir.nodes[name].type
        assert refs(pb.nodes[name]) == refs(ir.nodes[name]), name
        if name.startswith("Default/network"):
            assert [(s.file, s.line) for s in pb.nodes[name].source] == \
                   [(s.file, s.line) for s in ir.nodes[name].source], name
    ops = _json("ops", str(tmp_path / "pbonly"), "--source", "net.py:18")["ops"]
    assert {o["name"] for o in ops} >= {"Default/network-WithLossCell/_backbone-LeNet/conv2-Conv2d/Conv2D-op0"}


def test_a_dump_with_only_the_pb_still_joins_its_graph(real_lenet_copy):
    """MindSpore dump whose ``graphs/`` holds only the ``.pb``: ops still get graph names, edges, source."""
    (real_lenet_copy / "rank_0" / "graphs" / "ms_output_trace_code_graph_0.ir").unlink()
    op = _json("show", str(real_lenet_copy), "Default/network-WithLossCell/_backbone-LeNet/conv1-Conv2d/Conv2D-op0")["op"]
    assert op["graph_file"]["file"].endswith(".pb") and op["consumers"]
    assert any(s["file"].endswith("net.py") and s["line"] == 17 for s in op["source"])


def test_real_atc_json_and_doc_excerpt_under_any_name(tmp_path):
    """``atc --mode=1`` JSON (real, CANN 5.1) under the name the user chose, and the CANN doc's real
    ``ge_proto`` excerpt, alone in a folder: both graphs and all their ops are listed."""
    from conftest import shared

    samples = shared("real_samples")
    shutil.copy(samples / "atc_om_model_sub_model.json", tmp_path / "my_model.json")
    shutil.copy(samples / "ge_proto_Build_excerpt_from_cann_doc.txt", tmp_path / "ge_proto_00292_Build.txt")
    model = json.loads((samples / "atc_om_model_sub_model.json").read_text())
    expected = {(g["name"], op["name"], op.get("type", "")) for g in model["graph"] for op in g.get("op", [])}
    expected.add(("ge_default_20240613143502_1", "atomic_addr_clean0_71", "AtomicAddrClean"))
    doc = _json("summary", str(tmp_path))
    assert doc["problems"] == [] and doc["ops"] == len(expected)
    assert {(o["graph"], o["name"], o["type"]) for o in _json("ops", str(tmp_path))["ops"]} == expected
    human = _run("summary", str(tmp_path)).stdout
    assert "listed as ops (no tensors)" in human and "my_model.json" in human
