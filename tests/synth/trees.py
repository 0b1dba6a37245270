"""Build whole synthetic dump trees into a given folder (samples, test fixtures, benchmarks).

Every function is deterministic (fixed seeds, fixed timestamps) and writes only below ``root``.
Values come from small numpy computations so inputs of an op equal its producer's outputs.

* :func:`write_mindspore_tree`   MindSpore 2.x sync dump (npy, .ir, execution_order, constants)
* :func:`write_mindspore_stats_tree`  the same with ``saved_data: statistic`` (statistic.csv)
* :func:`write_cann_tree`        TF-adapter CANN model tree + ``ge_proto_*_Build.txt``
* :func:`write_torchair_tree`    torchair GE-mode ``worldsize{W}_global_rank{R}`` trees
* :func:`write_cann_overflow_tree`  CANN tree with Opdebug files (old and new layout)
* :func:`write_cann_stats_tree`  CANN ``dump_data=stats`` per-op CSV tree
* :func:`write_watch_tree`       Dump-Watch ``{L}_To_{W}`` snapshots
* :func:`write_msprobe_pair` / :func:`write_troubleshooter_pair`  API-level trees
* :func:`write_big_cann_tree`, :func:`write_big_mindspore_tree`  large trees for benchmarks
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from synth import ms_writer
from synth.cann_writer import SynthTensor, file_name_of, header_template, stamp_dump, write_dump
from synth.ge_graph_writer import write_ge_graph
from synth.network import bf16_round, conv2d_same, simulate_ms_net
from synth.opdebug_writer import (
    encode_opdebug_payload_new,
    encode_opdebug_payload_old,
    write_opdebug_file,
)
from synth.stats_csv_writer import write_cann_stats_csv

PathLike = "str | os.PathLike[str]"

# ------------------------------------------------------------------------------------- MindSpore


def write_mindspore_tree(root, steps: Sequence[int] = (0,), eps: float = 1e-5, overflow_exp: bool = False,
                         overflow_steps: Sequence[int] = (), style: str = "ms210", net_name: str = "Net",
                         start_ts: int = 1718262902000000, constants: bool = True) -> Path:
    """MindSpore sync dump of the small conv/BN/…/Exp/… net.

    ``overflow_exp`` makes the float16 ``Exp`` overflow in every step; ``overflow_steps`` only in
    those steps.  ``style="ms210"`` writes ``Float32``-style dtype tokens, ``"r25"`` ``float32``.
    Returns the ``rank_0`` folder.
    """
    runs = {s: simulate_ms_net(s, eps=eps, overflow=overflow_exp or s in overflow_steps) for s in steps}
    return ms_writer.write_ms_tree(root, runs, net_name=net_name, style=style, eps=eps, start_ts=start_ts,
                                   constants=constants)


STAT_CATEGORIES = ("max", "min", "avg", "nan count", "negative inf count", "positive inf count", "l2norm")


def write_mindspore_stats_tree(root, steps: Sequence[int] = (0, 1), overflow_steps: Sequence[int] = (1,),
                               categories: Sequence[str] = STAT_CATEGORIES,
                               start_ts: int = 1718266502000000) -> Path:
    """MindSpore ``saved_data: statistic`` tree: one ``statistic.csv`` per iteration (r2.4+ style,
    trailing commas), plus ``graphs/``, ``execution_order/`` and ``.dump_metadata/``."""
    runs = {s: simulate_ms_net(s, overflow=s in overflow_steps) for s in steps}
    return ms_writer.write_ms_tree(root, runs, saved_data="statistic", statistic_categories=categories,
                                   style="r25", start_ts=start_ts, constants=False)


# ------------------------------------------------------------------------------------- CANN helpers


def _alias(file_name: str) -> str:
    """A deterministic ``std::hash``-like all-digit alias for a too-long file name."""
    return str(int.from_bytes(hashlib.sha256(file_name.encode()).digest()[:8], "little"))


def _desc(arr: np.ndarray, dtype: str, fmt: str, device_shape: Sequence[int],
          origin_format: Optional[str] = None) -> dict[str, Any]:
    shape = list(np.shape(arr))
    if origin_format is None:
        origin_format = {4: "NCHW", 5: "NCDHW"}.get(len(shape), "ND")
    return {"dtype": dtype, "shape": list(device_shape), "layout": fmt, "origin_shape": shape,
            "origin_format": origin_format}


class CannOp:
    """One dumped op of a synthetic CANN graph: its tensors, graph inputs, file-name details."""

    def __init__(self, name: str, op_type: str, inputs: list[tuple[SynthTensor, str]],
                 outputs: list[SynthTensor], attrs: Optional[dict] = None, control: Sequence[str] = (),
                 ffts: str = "", no_task: bool = False, stream: int = 2) -> None:
        self.name, self.type = name, op_type
        self.inputs = inputs  # (tensor, "producer:idx")
        self.outputs = outputs
        self.attrs = dict(attrs or {})
        self.control = list(control)
        self.ffts = ffts
        self.no_task = no_task
        self.stream = stream


def _device_shape(t: SynthTensor) -> tuple[int, ...]:
    from synth.cann_writer import device_bytes

    return device_bytes(t)[1]


def _graph_ops(ops: list[CannOp], data: dict[str, SynthTensor], consts: dict[str, SynthTensor]) -> list[dict]:
    specs: list[dict] = []
    nid = 0
    for name, t in list(data.items()) + list(consts.items()):
        specs.append({"name": name, "type": "Data" if name in data else "Const", "id": nid,
                      "outputs": [_desc(t.array, t.dtype, t.format, _device_shape(t))]})
        nid += 1
    for op in ops:
        attrs = dict(op.attrs)
        if op.no_task:
            attrs["_no_task"] = True
        specs.append({
            "name": op.name, "type": op.type, "id": nid, "stream_id": op.stream,
            "inputs": [src for _, src in op.inputs] + [f"{c}:-1" for c in op.control],
            "attrs": attrs,
            "input_descs": [_desc(t.array, t.dtype, t.format, _device_shape(t)) for t, _ in op.inputs],
            "outputs": [_desc(t.array, t.dtype, t.format, _device_shape(t)) for t in op.outputs],
        })
        nid += 1
    last = ops[-1]
    specs.append({"name": "NetOutput", "type": "NetOutput", "id": nid, "inputs": [f"{last.name}:0"],
                  "input_descs": [_desc(last.outputs[0].array, last.outputs[0].dtype, last.outputs[0].format,
                                        _device_shape(last.outputs[0]))]})
    return specs


def _write_cann_step(folder: Path, ops: list[CannOp], first_task: int, ts0: int,
                     long_names: bool = True, outputs_only: bool = False) -> dict[str, tuple[int, int, int]]:
    """Write one ``{data_index}`` folder; returns op name → (task, stream, ts) of the dumped ops."""
    folder.mkdir(parents=True, exist_ok=True)
    placed: dict[str, tuple[int, int, int]] = {}
    mapping: list[str] = []
    task, ts = first_task, ts0
    for op in ops:
        if op.no_task:
            continue
        ts += 731
        file_name = f"{file_name_of(op.type)}.{file_name_of(op.name)}.{task}.{op.stream}.{ts}{op.ffts}"
        alias = None
        if long_names and len(file_name) > 255:
            alias = _alias(file_name)
            mapping.append(f"{alias},{file_name}")
        write_dump(folder, op.type, op.name, task, op.stream, ts,
                   inputs=[] if outputs_only else [t for t, _ in op.inputs], outputs=op.outputs,
                   suffix=op.ffts, file_name=alias)
        placed[op.name] = (task, op.stream, ts)
        task += 1
    if mapping:
        (folder / "mapping.csv").write_text("\n".join(mapping) + "\n")
    return placed


LONG_SCOPE = "/".join(f"encoder_block_{i}_multi_head_self_attention_projection" for i in range(5))


def _tf_net(step: int) -> tuple[list[CannOp], dict[str, SynthTensor], dict[str, SynthTensor]]:
    """The small TF-adapter network (float16 conv → … → fp8 cast), values computed in numpy."""
    rng = np.random.default_rng(100)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float16)
    b = (rng.standard_normal(4) * 0.1).astype(np.float16)
    w3 = (rng.standard_normal((2, 2, 1, 3, 3)) * 0.3).astype(np.float16)
    fw = (rng.standard_normal((144, 10)) * 0.1).astype(np.float16)
    fb = (rng.standard_normal(10) * 0.1).astype(np.float32)
    xr = np.random.default_rng(200 + step)
    x = xr.standard_normal((1, 3, 6, 6)).astype(np.float16)
    vol = xr.standard_normal((1, 2, 2, 4, 4)).astype(np.float16)
    label = np.array([3], dtype=np.int32)

    conv = conv2d_same(x.astype(np.float32), w.astype(np.float32)).astype(np.float16)
    bias = (conv + b.reshape(1, 4, 1, 1)).astype(np.float16)
    relu = np.maximum(bias, np.float16(0))
    c3 = np.stack([conv2d_same(vol[:, :, d].astype(np.float32), w3[:, :, 0].astype(np.float32))
                   for d in range(2)], axis=2).astype(np.float16)
    flat = relu.reshape(1, 144)
    mm = (flat.astype(np.float32) @ fw.astype(np.float32) + fb).astype(np.float16)
    cast_bf = bf16_round(mm.astype(np.float32))
    gelu = bf16_round((0.5 * cast_bf * (1 + np.tanh(0.7978845608 * (cast_bf + 0.044715 * cast_bf ** 3))))
                      .astype(np.float32))
    mul = bf16_round((gelu * np.float32(2.0)).astype(np.float32))
    argmax = np.argmax(mul, axis=1).astype(np.int32)
    equal = argmax == label
    fp8 = mul.astype(np.float32)  # the fp8 encoder rounds to float8_e4m3fn

    S = SynthTensor
    data = {"input_x": S(x, "float16", "NC1HWC0"), "input_vol": S(vol, "float16", "NDC1HWC0"),
            "label": S(label, "int32", "ND")}
    consts = {"resnet/conv1/weights": S(w, "float16", "FRACTAL_Z"), "resnet/conv1/bias": S(b, "float16", "ND"),
              "resnet/conv3d/filter": S(w3, "float16", "FRACTAL_Z_3D"),
              "resnet/fc/weights": S(fw, "float16", "FRACTAL_NZ"), "resnet/fc/bias": S(fb, "float32", "ND"),
              "resnet/argmax/dimension": S(np.array(1, dtype=np.int32), "int32", "ND")}
    long_name = f"resnet/{LONG_SCOPE}/Mul"
    ops = [
        CannOp("resnet/conv1/Conv2D", "Conv2D",
               [(S(x, "float16", "NC1HWC0"), "input_x:0"), (S(w, "float16", "FRACTAL_Z"), "resnet/conv1/weights:0")],
               [S(conv, "float16", "NC1HWC0")]),
        CannOp("resnet/conv1/BiasAdd", "BiasAdd",
               [(S(conv, "float16", "NC1HWC0"), "resnet/conv1/Conv2D:0"), (S(b, "float16", "ND"), "resnet/conv1/bias:0")],
               [S(bias, "float16", "NC1HWC0")]),
        CannOp("resnet/relu1/Relu", "Relu", [(S(bias, "float16", "NC1HWC0"), "resnet/conv1/BiasAdd:0")],
               [S(relu, "float16", "NC1HWC0")]),
        CannOp("resnet/conv3d/Conv3D", "Conv3D",
               [(S(vol, "float16", "NDC1HWC0"), "input_vol:0"), (S(w3, "float16", "FRACTAL_Z_3D"), "resnet/conv3d/filter:0")],
               [S(c3, "float16", "NDC1HWC0")]),
        CannOp("resnet/flatten/Reshape", "Reshape", [(S(relu, "float16", "ND"), "resnet/relu1/Relu:0")],
               [S(flat, "float16", "ND")], no_task=True),
        CannOp("resnet/fc/MatMul", "MatMulV2",
               [(S(flat, "float16", "FRACTAL_NZ"), "resnet/flatten/Reshape:0"),
                (S(fw, "float16", "FRACTAL_NZ"), "resnet/fc/weights:0"), (S(fb, "float32", "ND"), "resnet/fc/bias:0")],
               [S(mm, "float16", "FRACTAL_NZ", original_op="resnet/fc/MatMul")],
               attrs={"_datadump_original_op_names": ["resnet/fc/MatMul", "resnet/fc/BiasAdd"],
                      "transpose_x1": False, "transpose_x2": False},
               control=["resnet/conv3d/Conv3D"]),
        CannOp("resnet/fc/Cast", "Cast", [(S(mm, "float16", "ND"), "resnet/fc/MatMul:0")],
               [S(cast_bf, "bfloat16", "ND")], attrs={"dst_type": 27}),
        CannOp("resnet/gelu/Gelu", "Gelu", [(S(cast_bf, "bfloat16", "ND"), "resnet/fc/Cast:0")],
               [S(gelu, "bfloat16", "ND")], ffts=".4.1.0.0"),
        CannOp(long_name, "Mul", [(S(gelu, "bfloat16", "ND"), "resnet/gelu/Gelu:0")], [S(mul, "bfloat16", "ND")]),
        CannOp("resnet/argmax/ArgMaxV2", "ArgMaxV2",
               [(S(mul, "bfloat16", "ND"), f"{long_name}:0"),
                (S(np.array(1, dtype=np.int32), "int32", "ND"), "resnet/argmax/dimension:0")],
               [S(argmax, "int32", "ND")]),
        CannOp("resnet/equal/Equal", "Equal",
               [(S(argmax, "int32", "ND"), "resnet/argmax/ArgMaxV2:0"), (S(label, "int32", "ND"), "label:0")],
               [S(equal, "bool", "ND")]),
        CannOp("resnet/fp8/Cast", "Cast", [(S(mul, "bfloat16", "ND"), f"{long_name}:0")],
               [S(fp8, "float8_e4m3fn", "ND")], attrs={"dst_type": 35}),
    ]
    return ops, data, consts


TF_TIME = "20240613143502"
TF_MODEL = f"ge_default_{TF_TIME}_1"


def write_cann_tree(root, steps: Sequence[int] = (0, 1), graph_in_subfolder: bool = False) -> Path:
    """TF-adapter CANN tree ``{root}/{time}/0/{model}/1/{step}/`` plus ``ge_proto_00000123_graph_1_Build.txt``.

    Formats NC1HWC0 / FRACTAL_Z / FRACTAL_NZ / NDC1HWC0 / FRACTAL_Z_3D / ND; dtypes float16,
    bfloat16, float32, int32, bool, float8_e4m3fn; a long op name stored under an all-digit alias
    (``mapping.csv``); an FFTS+ 9-field name (Gelu); a ``_no_task`` Reshape (no file).
    Returns the model folder.
    """
    root = Path(root)
    model_dir = root / TF_TIME / "0" / TF_MODEL / "1"
    for s in steps:
        ops, _, _ = _tf_net(s)
        _write_cann_step(model_dir / str(s), ops, first_task=2, ts0=1718260502000000 + s * 1_000_000)
    ops, data, consts = _tf_net(steps[0])
    gdir = root / "graphs" if graph_in_subfolder else root
    write_ge_graph(gdir, TF_MODEL, _graph_ops(ops, data, consts), index=123, graph_id=1)
    return model_dir


# ------------------------------------------------------------------------------------- torchair


TA_TIME = "20241121145738"
TA_MODEL = f"ge_default_{TA_TIME}_1"


def write_torchair_tree(root, world_size: int = 2, step: int = 0) -> list[Path]:
    """torchair GE-mode dumps ``worldsize{W}_global_rank{R}/{time}/{R}/{model}/1/{step}/`` per rank,
    each with its own ``ge_proto_00000001_graph_1_Build.txt``.  The HcomAllReduce output is the
    true sum over ranks, so it is identical on every rank."""
    root = Path(root)
    rng = np.random.default_rng(300)
    w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float16)
    xs = [np.random.default_rng(400 + r).standard_normal((4, 8)).astype(np.float16) for r in range(world_size)]
    mms = [(x.astype(np.float32) @ w.astype(np.float32)).astype(np.float16) for x in xs]
    adds = [(m + np.float16(0.5)).astype(np.float16) for m in mms]
    red = np.sum([a.astype(np.float32) for a in adds], axis=0).astype(np.float16)
    out: list[Path] = []
    S = SynthTensor
    for r in range(world_size):
        ops = [
            CannOp("MatMul", "MatMulV2", [(S(xs[r], "float16", "ND"), "arg0_1:0"), (S(w, "float16", "ND"), "arg1_1:0")],
                   [S(mms[r], "float16", "ND")], stream=0),
            CannOp("Add", "Add", [(S(mms[r], "float16", "ND"), "MatMul:0"),
                                  (S(np.array(0.5, np.float16), "float16", "ND"), "Const_1:0")],
                   [S(adds[r], "float16", "ND")], stream=0),
            CannOp("HcomAllReduce", "HcomAllReduce", [(S(adds[r], "float16", "ND"), "Add:0")],
                   [S(red, "float16", "ND")], attrs={"reduction": "sum", "group": "hccl_world_group"}, stream=1),
            CannOp("Relu", "Relu", [(S(red, "float16", "ND"), "HcomAllReduce:0")],
                   [S(np.maximum(red, np.float16(0)), "float16", "ND")], stream=0),
        ]
        rank_root = root / f"worldsize{world_size}_global_rank{r}"
        folder = rank_root / TA_TIME / str(r) / TA_MODEL / "1" / str(step)
        _write_cann_step(folder, ops, first_task=10, ts0=1732172258000000 + r * 1000)
        data = {"arg0_1": S(xs[r], "float16", "ND"), "arg1_1": S(w, "float16", "ND")}
        consts = {"Const_1": S(np.array(0.5, np.float16), "float16", "ND")}
        write_ge_graph(rank_root, TA_MODEL, _graph_ops(ops, data, consts), index=1, graph_id=1)
        out.append(folder)
    return out


# ------------------------------------------------------------------------------------- overflow


OV_TIME = "20240613150000"
OV_MODEL = f"ge_default_{OV_TIME}_1"


def _overflow_net(step: int) -> list[CannOp]:
    rng = np.random.default_rng(500)
    w = (rng.standard_normal((8, 8)) * 0.4).astype(np.float16)
    x = np.random.default_rng(600 + step).standard_normal((2, 8)).astype(np.float16)
    if step == 1:
        x = (x * np.float16(12)).astype(np.float16)  # large enough for exp() to overflow in float16
    scale = np.float32(30000.0 if step == 2 else 0.5)  # step 2: the Mul overflows instead
    mm = (x.astype(np.float32) @ w.astype(np.float32)).astype(np.float16)
    with np.errstate(over="ignore"):
        e = np.exp(mm)
        s = (e.astype(np.float32) * scale).astype(np.float16)
        add = (s + np.float16(1000.0)).astype(np.float16)
    S = SynthTensor
    return [
        CannOp("model/dense/MatMul", "MatMulV2", [(S(x, "float16", "ND"), "x:0"), (S(w, "float16", "ND"), "w:0")],
               [S(mm, "float16", "ND")]),
        CannOp("model/act/Exp", "Exp", [(S(mm, "float16", "ND"), "model/dense/MatMul:0")], [S(e, "float16", "ND")]),
        CannOp("model/scale/Mul", "Mul", [(S(e, "float16", "ND"), "model/act/Exp:0")], [S(s, "float16", "ND")]),
        CannOp("model/shift/Add", "Add", [(S(s, "float16", "ND"), "model/scale/Mul:0")], [S(add, "float16", "ND")]),
    ]


def write_cann_overflow_tree(root, steps: Sequence[int] = (0, 1, 2)) -> Path:
    """CANN overflow tree: step 0 clean; step 1 has an old-layout (2048-byte) Opdebug whose AI Core
    section names the Exp's task/stream with status 0x20 (the Exp output holds +Inf, Mul and Add
    inherit it); step 2 has a new-layout (0x5A5A5A5A) Opdebug whose AIV entry names the Mul
    (multiplying by 30000 overflows float16; Exp is finite there).  Returns the model folder."""
    root = Path(root)
    model_dir = root / OV_TIME / "0" / OV_MODEL / "1"
    for s in steps:
        ops = _overflow_net(s)
        folder = model_dir / str(s)
        placed = _write_cann_step(folder, ops, first_task=20, ts0=1718262000000000 + s * 1_000_000)
        if s == 1:
            task, stream, ts = placed["model/act/Exp"]
            payload = encode_opdebug_payload_old(
                aicore={"model_id": 1, "stream_id": stream, "task_id": task, "task_type": 0,
                        "pc_start": 0x124080A1E000, "para_base": 0x1240C0012200, "kernel_code": 0x124080A1E000,
                        "block_idx": 1, "status": 0x20})
            write_opdebug_file(str(folder / f"Opdebug.Node_OpDebug.{task + 40}.{stream}.{ts + 3}"), payload,
                               dump_time=ts + 3)
        if s == 2:
            task, stream, ts = placed["model/scale/Mul"]
            payload = encode_opdebug_payload_new([{
                "acc_type": "AIV", "model_id": 1, "stream_id": stream, "task_id": task, "task_type": 0,
                "context_id": 65535, "thread_id": 65535, "pc_start": 0x12C0C0A00000, "para_base": 0x12C0C0100000,
                "core_id": 3, "block_id": 0, "status": 0x20}])
            write_opdebug_file(str(folder / f"Opdebug.Node_OpDebug.{task + 40}.{stream}.{ts + 3}"), payload,
                               dump_time=ts + 3)
    S = SynthTensor
    rng = np.random.default_rng(500)
    w = (rng.standard_normal((8, 8)) * 0.4).astype(np.float16)
    data = {"x": S(np.zeros((2, 8), np.float16), "float16", "ND")}
    consts = {"w": S(w, "float16", "ND")}
    write_ge_graph(root, OV_MODEL, _graph_ops(_overflow_net(0), data, consts), index=7, graph_id=1)
    return model_dir


# ------------------------------------------------------------------------------------- stats only


ST_TIME = "20240613160000"
ST_MODEL = f"ge_default_{ST_TIME}_1"


def write_cann_stats_tree(root, step: int = 0) -> Path:
    """CANN ``dump_data=stats`` tree of per-op CSVs; ``Sqrt`` is the first op with NaN (negative
    input), the ``Add`` after it inherits the NaN.  Returns the step folder."""
    root = Path(root)
    folder = root / ST_TIME / "0" / ST_MODEL / "1" / str(step)
    rng = np.random.default_rng(700)
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float16)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float16)
    conv = conv2d_same(x.astype(np.float32), w.astype(np.float32)).astype(np.float16)
    relu = np.maximum(conv, np.float16(0))
    sub = (conv - np.float16(0.25)).astype(np.float16)
    with np.errstate(invalid="ignore"):
        sq = np.sqrt(sub)
    add = (sq + relu).astype(np.float16)
    mean = add.astype(np.float32).mean(axis=(2, 3)).astype(np.float32)
    ops = [
        ("Conv2D", "net/conv1/Conv2D", [(x, "float16", "NC1HWC0"), (w, "float16", "FRACTAL_Z")], [(conv, "float16", "NC1HWC0")]),
        ("Relu", "net/relu/Relu", [(conv, "float16", "NC1HWC0")], [(relu, "float16", "NC1HWC0")]),
        ("Sub", "net/centre/Sub", [(conv, "float16", "NC1HWC0")], [(sub, "float16", "NC1HWC0")]),
        ("Sqrt", "net/norm/Sqrt", [(sub, "float16", "NC1HWC0")], [(sq, "float16", "NC1HWC0")]),
        ("Add", "net/merge/Add", [(sq, "float16", "NC1HWC0"), (relu, "float16", "NC1HWC0")], [(add, "float16", "NC1HWC0")]),
        ("ReduceMeanD", "net/pool/ReduceMean", [(add, "float16", "NC1HWC0")], [(mean, "float32", "ND")]),
    ]
    ts = 1718266000000000 + step * 1_000_000
    for task, (op_type, name, ins, outs) in enumerate(ops, start=3):
        ts += 517
        write_cann_stats_csv(folder, op_type, name, task, 2, ts, inputs=ins, outputs=outs)
    return folder


# ------------------------------------------------------------------------------------- Dump Watch


WA_TIME = "20240613170000"
WA_MODEL = f"ge_default_{WA_TIME}_1"
WATCHED = "bert/attn/Softmax"
LAYER_A = "bert/ffn/MatMul"
LAYER_B = "bert/ffn/Gelu"


def write_watch_tree(root, step: int = 0, n_changed: int = 5) -> Path:
    """Dump-Watch tree: watched op C (Softmax) runs first, then layer ops A (MatMul) and B (Gelu).
    ``SoftmaxV2.{A}_To_{C}.…`` equals C's own output; B overwrites exactly ``n_changed`` elements of
    C's output, visible in ``SoftmaxV2.{B}_To_{C}.…``.  Returns the step folder."""
    root = Path(root)
    folder = root / WA_TIME / "0" / WA_MODEL / "1" / str(step)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(800)
    logits = rng.standard_normal((2, 8)).astype(np.float16)
    ex = np.exp(logits.astype(np.float32))
    c_out = (ex / ex.sum(axis=1, keepdims=True)).astype(np.float16)
    a_in = rng.standard_normal((2, 8)).astype(np.float16)
    wa = (rng.standard_normal((8, 8)) * 0.3).astype(np.float16)
    a_out = (a_in.astype(np.float32) @ wa.astype(np.float32)).astype(np.float16)
    g = a_out.astype(np.float32)
    b_out = (0.5 * g * (1 + np.tanh(0.7978845608 * (g + 0.044715 * g ** 3)))).astype(np.float16)
    after_b = c_out.copy().reshape(-1)
    idx = np.array([1, 4, 6, 9, 13])[:n_changed]
    after_b[idx] = b_out.reshape(-1)[idx]  # B writes into C's memory (a memory-reuse bug)
    after_b = after_b.reshape(c_out.shape)
    S = SynthTensor
    tc, ta, tb, stream = 31, 32, 33, 2
    ts = 1718269200000000 + step * 1_000_000
    files = [  # (op_type, op_name in header, task, ts, output)
        ("SoftmaxV2", WATCHED, tc, ts + 100, c_out),
        ("MatMulV2", LAYER_A, ta, ts + 900, a_out),
        ("SoftmaxV2", f"{LAYER_A}_To_{WATCHED}", ta, ts + 905, c_out),
        ("Gelu", LAYER_B, tb, ts + 1700, b_out),
        ("SoftmaxV2", f"{LAYER_B}_To_{WATCHED}", tb, ts + 1705, after_b),
    ]
    for op_type, name, task, t, arr in files:
        write_dump(folder, op_type, name, task, stream, t, outputs=[S(arr, "float16", "ND")])
    # the graph (no _To_ nodes: those exist only in dump file names)
    ops = [
        CannOp(WATCHED, "SoftmaxV2", [(S(logits, "float16", "ND"), "logits:0")], [S(c_out, "float16", "ND")]),
        CannOp(LAYER_A, "MatMulV2", [(S(a_in, "float16", "ND"), "hidden:0"), (S(wa, "float16", "ND"), "bert/ffn/w:0")],
               [S(a_out, "float16", "ND")]),
        CannOp(LAYER_B, "Gelu", [(S(a_out, "float16", "ND"), f"{LAYER_A}:0")], [S(b_out, "float16", "ND")]),
    ]
    data = {"logits": S(logits, "float16", "ND"), "hidden": S(a_in, "float16", "ND")}
    write_ge_graph(root, WA_MODEL, _graph_ops(ops, data, {"bert/ffn/w": S(wa, "float16", "ND")}), index=9,
                   graph_id=1)
    (root / "acl.json").write_text(json.dumps({"dump": {
        "dump_list": [{"layer": [LAYER_A, LAYER_B], "watcher_nodes": [WATCHED]}],
        "dump_path": "/home/user/watch", "dump_mode": "output", "dump_scene": "watcher"}}, indent=2) + "\n")
    return folder


# ------------------------------------------------------------------------------------- API level


def _fix_dump_json(rank_dir: str, fake_root: str) -> None:
    """The writer records its own absolute output path in ``dump_data_dir``; pin it for byte-identical output."""
    path = os.path.join(rank_dir, "dump.json")
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    if doc.get("dump_data_dir"):
        doc["dump_data_dir"] = fake_root + "/" + os.path.relpath(doc["dump_data_dir"], os.path.dirname(
            os.path.dirname(rank_dir))).replace(os.sep, "/")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)


def write_msprobe_tree(root, eps: float = 1e-5) -> str:
    from synth.api_dump_writer import simulate_small_net, write_msprobe_tree as _w

    # the conv output is stored as a torch .pt (read by the restricted reader), the rest as npy
    rank_dir = _w(str(root), simulate_small_net(eps=eps), framework="pytorch", task="tensor", step=0, rank=0,
                  pt_names=("Functional.conv2d.0.forward.output.0",))
    _fix_dump_json(rank_dir, f"/home/user/dump/{Path(root).name}")
    return rank_dir


def write_troubleshooter_tree(root, eps: float = 1e-5) -> str:
    from synth.api_dump_writer import simulate_small_net, write_troubleshooter_tree as _w

    return _w(str(root), simulate_small_net(eps=eps), framework="torch", rank=0)


# ------------------------------------------------------------------------------------- benchmarks


_BIG_TYPES = ("Conv2D", "BNInferD", "Relu", "MatMulV2", "Add", "Mul", "Cast", "SoftmaxV2", "LayerNorm", "Gelu")


def write_big_cann_tree(root, n_files: int, ops_per_step: int = 5000, seed: int = 0) -> Path:
    """``n_files`` small CANN dump files with realistic names under one model, ``ops_per_step`` per
    ``{data_index}`` folder.  Headers are templated per op type (op name and dump time appended
    as protobuf fields), so 100 000 files take seconds.  Returns the model folder."""
    root = Path(root)
    model_dir = root / "20240101000000" / "0" / "ge_default_20240101000000_1" / "1"
    rng = np.random.default_rng(seed)
    templates: dict[str, tuple[bytes, bytes]] = {}
    for t in _BIG_TYPES:
        a = rng.standard_normal((1, 16, 2, 2)).astype(np.float16)
        templates[t] = header_template([SynthTensor(a, "float16", "NC1HWC0")], [SynthTensor(a, "float16", "NC1HWC0")])
    ts = 1704067200000000
    for i in range(n_files):
        step, k = divmod(i, ops_per_step)
        folder = model_dir / str(step)
        if k == 0:
            folder.mkdir(parents=True, exist_ok=True)
        op_type = _BIG_TYPES[k % len(_BIG_TYPES)]
        layer = k // len(_BIG_TYPES)
        name = f"model/encoder/layer_{layer}/{op_type.lower()}_{k % 3}/{op_type}"
        ts += 37 + (k % 11)
        fname = f"{op_type}.{file_name_of(name)}.{k + 1}.{k % 4}.{ts}"
        with open(folder / fname, "wb") as fh:
            fh.write(stamp_dump(templates[op_type], name, ts))
    return model_dir


def write_big_mindspore_tree(root, n_ops: int, steps: Sequence[int] = (0,), with_ir: bool = True) -> Path:
    """A MindSpore 2.10-style tree with ``n_ops`` kernels per step (one input and one output npy
    each, tiny float32 tensors), the matching execution-order CSV and (``with_ir``) a lean .ir.
    Returns the ``rank_0`` folder."""
    root = Path(root)
    rank_dir = root / "rank_0"
    import io

    buf = io.BytesIO()
    np.save(buf, np.arange(6, dtype=np.float32).reshape(2, 3))
    npy = buf.getvalue()
    types = ("MatMul", "Add", "ReLU", "Mul", "Cast", "Softmax", "LayerNorm", "Conv2D")
    names = []
    for k in range(n_ops):
        t = types[k % len(types)]
        names.append((t, f"Default/network-Net/layers-CellList/{k // len(types)}-Block/{t.lower()}-{t}/{t}-op{k}"))
    order = rank_dir / "execution_order"
    order.mkdir(parents=True, exist_ok=True)
    (order / "ms_execution_order_graph_0.csv").write_text(
        "NodeExecutionOrder-FullNameWithScope\n" + "".join(n + "\n" for _, n in names))
    (order / "ms_global_execution_order_graph_0.csv").write_text("".join(f"{s}\n" for s in steps))
    ms_writer.write_metadata(rank_dir / ".dump_metadata", "Net", steps, "/home/user/big")
    if with_ir:
        (rank_dir / "graphs").mkdir(parents=True, exist_ok=True)
        lines = ["# IR entry: @kernel_graph0", "# Total subgraphs: 1", "", "# Total params: 1", "# Params:",
                 "%para1_x: <Tensor[Float32], (2, 3)> : [2, 3]", "", "subgraph @kernel_graph0() {"]
        prev = "%para1_x"
        for k, (t, n) in enumerate(names):
            lines.append(f"  %{k}(CNode_{k}) = PrimFunc_{t}({prev}) cnode_attrs: {{is_dynamic_len: Bool(0)}}")
            lines.append("      : (<Tensor[Float32], (2, 3)>) -> (<Tensor[Float32], (2, 3)>)")
            lines.append(f"      # Fullname with scope: ({n})")
            prev = f"%{k}"
        lines += [f"  Return({prev})", "}", ""]
        (rank_dir / "graphs" / "ms_output_trace_code_graph_0.ir").write_text("\n".join(lines))
    for s in steps:
        folder = rank_dir / "Net" / "0" / str(s)
        folder.mkdir(parents=True, exist_ok=True)
        ts = 1718262902000000 + s * 10_000_000
        for t, n in names:
            fk = ms_writer.file_kernel_name(n)
            for io_kind in ("input", "output"):
                ts += 41
                with open(folder / f"{t}.{fk}.0.0.{ts}.{io_kind}.0.DefaultFormat.Float32.npy", "wb") as fh:
                    fh.write(npy)
    return rank_dir
