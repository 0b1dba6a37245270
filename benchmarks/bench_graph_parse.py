"""Benchmark the GE graph text parser on a big synthetic ``ge_proto_*_Build.txt`` (run by hand).

    python benchmarks/bench_graph_parse.py [--ops 50000] [--dir /tmp] [--keep] [--reps 1] [--file PATH]

Generates a realistic ModelDef text in a temp dir with ``tests/synth/ge_graph_writer.py`` (a chain of
fused ops: ~6 attrs each incl. ``_datadump_original_op_names``, 2 data inputs + an occasional control
edge, 2 input descs and 1-2 output descs with ``origin_shape``/``origin_format``/``_datadump_*`` desc
attrs, one ``If`` with a subgraph every 1000 ops), then times ``parse_ge_text`` and prints machine info,
file size, wall time and ops/s.  ``--file`` times an existing file instead.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import tempfile
import time
from typing import Any

import common  # noqa: F401  (puts tests/ on the path for ``synth``)
from dumpscope.core.graphs import parse_ge_text
from synth.ge_graph_writer import write_ge_graph

_TYPES = ["Conv2D", "MatMulV2", "Add", "Relu", "Cast", "TransData", "BatchMatMul", "Softmax", "LayerNorm", "Mul"]
_DTYPES = ["float16", "float32", "bfloat16"]


def _desc(i: int, k: int, name: str = "") -> dict[str, Any]:
    n = 1 + (i + k) % 8
    desc: dict[str, Any] = {
        "dtype": _DTYPES[(i + k) % 3], "shape": [n, 1, 16, 16, 16], "layout": "NC1HWC0",
        "origin_shape": [n, 16, 16, 16], "origin_format": "NCHW",
    }
    if name:
        desc["attrs"] = {"_datadump_origin_name": name, "_datadump_origin_output_index": k,
                         "_datadump_origin_format": "NCHW"}
    return desc


def make_ops(count: int) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """``count`` ops in the root graph (a chain with skip connections) and a few small subgraphs."""
    ops: list[dict[str, Any]] = [{"name": "data", "type": "Data", "inputs": [""], "id": 0,
                                  "outputs": [_desc(0, 0)]}]
    subs: dict[str, list[dict[str, Any]]] = {}
    for i in range(1, count):
        op_type = _TYPES[i % len(_TYPES)]
        name = f"model/layer_{i // 10}/block_{i % 10}/{op_type}_{i}"
        prev = ops[-1]["name"]
        other = ops[max(0, len(ops) - 7)]["name"]
        inputs = [f"{prev}:0", f"{other}:{i % 2 if len(ops[max(0, len(ops) - 7)].get('outputs', [])) > 1 else 0}"]
        if i % 50 == 0:
            inputs.append(f"{ops[len(ops) // 2]['name']}:-1")
        attrs: dict[str, Any] = {
            "_datadump_original_op_names": [name, f"{name}_bias"],
            "_fe_imply_type": 6,
            "_ge_attr_op_kernel_lib_name": "AIcoreEngine",
            "_L1_fusion_sub_graph_no": str(i),
            "strides": [1, 1, 1, 1],
            "alpha": 0.5,
        }
        if i % 97 == 0:
            attrs["_no_task"] = True
        op: dict[str, Any] = {
            "name": name, "type": op_type, "id": i, "stream_id": i % 3, "inputs": inputs, "attrs": attrs,
            "input_descs": [_desc(i, 0), _desc(i, 1)],
            "outputs": [_desc(i, k, name) for k in range(1 + i % 2)],
        }
        if i % 1000 == 0:
            sub = f"then_{i}"
            op["type"], op["subgraphs"] = "If", [sub]
            subs[sub] = [{"name": f"{sub}/arg", "type": "Data", "inputs": [""], "outputs": [_desc(i, 0)]},
                         {"name": f"{sub}/relu", "type": "Relu", "inputs": [f"{sub}/arg:0"],
                          "input_descs": [_desc(i, 0)], "outputs": [_desc(i, 0)]}]
        ops.append(op)
    return ops, subs


def machine_info() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    return (f"python {platform.python_version()} on {platform.system()} {platform.machine()}, "
            f"{os.cpu_count()} CPUs, load avg {' '.join(f'{x:.2f}' for x in load)}, {platform.processor() or ''}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=50_000)
    ap.add_argument("--dir", default=None, help="temp dir parent (default: system temp)")
    ap.add_argument("--keep", action="store_true", help="keep the generated file and print its path")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--file", default=None, help="time this existing ge_proto text file instead")
    args = ap.parse_args()

    print(machine_info())
    tmp = None
    if args.file:
        path = args.file
    else:
        tmp = tempfile.mkdtemp(prefix="dumpscope-bench-", dir=args.dir)
        t0 = time.perf_counter()
        ops, subs = make_ops(args.ops)
        path = write_ge_graph(tmp, "ge_default_20240613143502_1", ops, subs, index=1, graph_id=1)
        print(f"generated {args.ops} ops in {time.perf_counter() - t0:.1f} s")
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))
    print(f"file: {size / 1e6:.1f} MB, {lines:,} lines")

    best = float("inf")
    graphs = []
    for _ in range(max(1, args.reps)):
        warnings: list[str] = []
        t0 = time.perf_counter()
        graphs = parse_ge_text(path, warnings=warnings)
        best = min(best, time.perf_counter() - t0)
    nodes = sum(len(g.nodes) for g in graphs)
    print(f"parse_ge_text: {best:.2f} s (best of {args.reps}), {len(graphs)} graphs, {nodes:,} nodes, "
          f"{nodes / best:,.0f} ops/s, {size / 1e6 / best:.1f} MB/s, warnings: {len(warnings)}")
    t0 = time.perf_counter()
    for g in graphs:
        g.consumers()
    print(f"consumers(): {time.perf_counter() - t0:.2f} s")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak RSS: {rss / (1024 if sys.platform != 'darwin' else 1 << 20):.0f} MB")
    if tmp and not args.keep:
        os.remove(path)
        os.rmdir(tmp)
    elif tmp:
        print(f"kept: {path}")


if __name__ == "__main__":
    main()
