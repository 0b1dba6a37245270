"""Synthetic MindSpore graph-mode (kernel-by-kernel / e2e) dump trees and ``.ir`` text.

Imitates a real MindSpore 2.10 synchronous dump (``/work/shared/real_dumps``)::

    {root}/net.py                                         (the script, as in the real sample)
    {root}/rank_0/.dump_metadata/{data_dump.json, config.json}
    {root}/rank_0/graphs/ms_output_trace_code_graph_0.ir
    {root}/rank_0/execution_order/ms_execution_order_graph_0.csv, ms_global_execution_order_graph_0.csv
    {root}/rank_0/{net}/0/{step}/{type}.{fullname /→_}.0.0.{ts}.{input|output}.{slot}.DefaultFormat.{Dtype}.npy
    {root}/rank_0/{net}/0/{step}/Parameter.{param .→_}.0.0.{ts}.output.0.DefaultFormat.{Dtype}.npy
    {root}/rank_0/{net}/0/constants/Parameter.data-{i}.0.0.{ts}.output.0.DefaultFormat.{Dtype}.npy
    {root}/rank_0/{net}/0/{step}/statistic.csv            (saved_data = statistic)

The dtype token is ``Float32`` / ``BFloat16`` … (``dtype_style="ms210"``, what 2.10 writes) or
``float32`` / ``bfloat16`` … (``"r25"``, the r2.4/2.5 documentation spelling).  bfloat16 tensors
are stored as float32 npy with a ``BFloat16`` dtype token, as MindSpore does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from synth.network import Kernel, NetRun, Tensor
from synth.stats_csv_writer import write_ms_statistic_csv

MS_TYPE = {"float32": "Float32", "float16": "Float16", "bfloat16": "BFloat16", "bool": "Bool",
           "int64": "Int64", "int32": "Int32", "float64": "Float64", "int8": "Int8", "uint8": "UInt8"}

LIB = "/home/ma-user/miniconda3/envs/MindSpore/lib/python3.11/site-packages/mindspore"
NET_PY = '''import numpy as np
import mindspore as ms
from mindspore import nn, ops

ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", jit_config={"jit_level": "O0"})


class Net(nn.Cell):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, pad_mode='same', has_bias=False)
        self.bn1 = nn.BatchNorm2d(4, eps=eps, use_batch_statistics=False)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2, 2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(36, 16)
        self.fc2 = nn.Dense(16, 10, dtype=ms.bfloat16)

    def construct(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.flatten(self.pool(x))
        x = self.fc1(x)
        x = ops.cast(x, ms.float16)
        e = ops.exp(x)
        x = e / e.sum(axis=1, keepdims=True)
        x = ops.cast(x, ms.bfloat16)
        return self.fc2(x)


net = Net(eps={eps})
net.set_train(False)
for step in range(2):
    x = np.random.default_rng(11 + step).standard_normal((2, 3, 6, 6)).astype(np.float32)
    if step == 1:
        x = x * 6  # makes the float16 Exp overflow
    print(step, net(ms.Tensor(x)))
'''


def net_py_text(eps: float) -> str:
    return NET_PY.replace("{eps}", repr(eps))


def file_kernel_name(name: str) -> str:
    """MindSpore ``GetFileKernelName``: ``/ \\ . space`` → ``_``."""
    for ch in "/\\. ":
        name = name.replace(ch, "_")
    return name


def dtype_token(dtype: str, style: str) -> str:
    return MS_TYPE[dtype] if style == "ms210" else dtype


def stored_array(t: Tensor) -> np.ndarray:
    """What MindSpore writes into the npy: bfloat16 as float32, everything else as is."""
    a = np.asarray(t.array)
    if t.dtype == "bfloat16":
        return a.astype(np.float32)
    return a.astype(np.dtype(t.dtype))


class Clock:
    """Deterministic per-file microsecond timestamps (strictly increasing, uneven gaps)."""

    def __init__(self, start: int) -> None:
        self.t = start
        self.i = 0

    def tick(self, big: bool = False) -> int:
        self.i += 1
        self.t += (900 + 37 * (self.i % 7)) if big else (55 + 13 * (self.i % 5))
        return self.t


def _save(path: Path, arr: np.ndarray) -> None:
    with open(path, "wb") as fh:
        np.save(fh, arr, allow_pickle=False)


def npy_name(op_type: str, fullname: str, ts: int, io: str, slot: int, dtype: str, style: str,
             fmt: str = "DefaultFormat") -> str:
    return f"{op_type}.{file_kernel_name(fullname)}.0.0.{ts}.{io}.{slot}.{fmt}.{dtype_token(dtype, style)}.npy"


def write_step(step_dir: Path, run: NetRun, clock: Clock, style: str = "ms210", saved_data: str = "tensor",
               dump_params: bool = True, statistic_categories: Sequence[str] = ("max", "min", "l2norm")) -> list[dict]:
    """Write one iteration folder; returns the statistic rows (also written when saved_data != tensor)."""
    step_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for k in run.kernels:
        clock.tick(big=True)
        for io, tensors in (("input", k.inputs), ("output", k.outputs)):
            for slot, t in enumerate(tensors):
                ts = clock.tick()
                arr = stored_array(t)
                if saved_data in ("tensor", "full"):
                    _save(step_dir / npy_name(k.type, k.fullname, ts, io, slot, t.dtype, style), arr)
                rows.append({"op_type": k.type, "op_name": file_kernel_name(k.fullname), "task": 0, "stream": 0,
                             "timestamp": ts, "io": io, "slot": slot, "array": arr, "dtype": t.dtype})
    if dump_params:
        clock.tick(big=True)
        for name, t in sorted(run.params.items(), key=lambda kv: kv[0]):
            ts = clock.tick()
            arr = stored_array(t)
            if saved_data in ("tensor", "full"):
                _save(step_dir / npy_name("Parameter", name, ts, "output", 0, t.dtype, style), arr)
    if saved_data in ("statistic", "full"):
        write_ms_statistic_csv(step_dir / "statistic.csv", rows, categories=list(statistic_categories))
    return rows


def write_constants(const_dir: Path, run: NetRun, clock: Clock, style: str = "ms210") -> None:
    const_dir.mkdir(parents=True, exist_ok=True)
    for i, t in enumerate(run.constants):
        ts = clock.tick()
        _save(const_dir / npy_name("Parameter", f"data-{i + 1}", ts, "output", 0, t.dtype, style),
              stored_array(t))


def write_exec_order(folder: Path, run: NetRun, graph_id: int, steps: Iterable[int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    names = ["NodeExecutionOrder-FullNameWithScope"] + [k.fullname for k in run.kernels]
    (folder / f"ms_execution_order_graph_{graph_id}.csv").write_text("\n".join(names) + "\n")
    (folder / f"ms_global_execution_order_graph_{graph_id}.csv").write_text(
        "".join(f"{s}\n" for s in steps))


def write_metadata(folder: Path, net_name: str, steps: Sequence[int], dump_path: str, saved_data: str = "tensor",
                   ms_version: str = "2.10.0", statistic_categories: Optional[Sequence[str]] = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    common = {
        "dump_mode": 0,
        "path": dump_path,
        "net_name": net_name,
        "iteration": "|".join(str(s) for s in steps),
        "input_output": 0,
        "kernels": [],
        "support_device": [0, 1, 2, 3, 4, 5, 6, 7],
        "saved_data": saved_data,
    }
    if statistic_categories is not None:
        common["statistic_category"] = list(statistic_categories)
    cfg = {"common_dump_settings": common, "e2e_dump_settings": {"enable": True, "trans_flag": True}}
    (folder / "data_dump.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (folder / "config.json").write_text(json.dumps({"device_target": "Ascend", "ms_version": ms_version},
                                                   separators=(",", ":")))


# ---------------------------------------------------------------------------------------------- .ir


def _ir_type(dtype: str) -> str:
    return MS_TYPE[dtype]


def _shape_txt(shape: Sequence[int], open_: str = "(", close: str = ")") -> str:
    return open_ + ", ".join(str(int(s)) for s in shape) + close


def _host(t: Tensor) -> str:
    a = np.asarray(t.array)
    if t.producer == "const" and a.ndim == 0:
        return f"<{_ir_type(t.dtype)}, NoShape>"
    if t.producer == "const":
        return f"<Tuple[{_ir_type(t.dtype)}*{a.size}], TupleShape({', '.join('NoShape' for _ in range(a.size))})>"
    return f"<Tensor[{_ir_type(t.dtype)}], {_shape_txt(a.shape)}>"


def _device(t: Tensor) -> str:
    a = np.asarray(t.array)
    shape = () if t.producer == "const" else a.shape
    return f"<{_ir_type(t.dtype)}xDefaultFormat[const vector]{_shape_txt(shape, '{', '}')}>"


def _kind(t: Tensor) -> str:
    a = np.asarray(t.array)
    if t.producer == "const":
        return "Scalar" if a.ndim == 0 else "Tuple"
    return "Tensor"


def _const_text(t: Tensor) -> str:
    a = np.asarray(t.array)
    if a.ndim == 0:
        if t.dtype == "bool":
            return f"Bool({int(bool(a))})"
        return f"I64({int(a)})"
    return "(" + ", ".join(str(int(v)) for v in a.reshape(-1)) + ")"


def _source_lines(k: Kernel, net_path: str, net_text: str) -> list[str]:
    lines = net_text.split("\n")
    out: list[str] = []
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("def construct("))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("return "))
    out.append(f"{net_path}:{start + 1}~{end + 1}, 4~{len(lines[end])}/{lines[start]}/")
    for snippet in k.source:
        i = next(j for j, ln in enumerate(lines) if ln.strip() == snippet)
        ln = lines[i]
        col = len(ln) - len(ln.lstrip())
        out.append(f"{net_path}:{i + 1}, {col}~{len(ln)}/{ln}/")
    for loc, code in k.lib:
        indent = "    " if code.startswith("def ") else "        "
        out.append(f"{LIB}/{loc}/{indent}{code}/")
    return ["      # In file " + s for s in out]


def ir_text(run: NetRun, net_path: str, net_text: str, graph_name: str = "kernel_graph0") -> str:
    """A ``ms_output_trace_code_graph_0.ir`` in MindSpore 2.10 style for the kernels of ``run``."""
    params = list(run.params.items())
    para_ref: dict[str, str] = {}
    head: list[str] = []
    for i, (name, t) in enumerate(params, 1):
        a = np.asarray(t.array)
        ref = f"%para{i}_{name}"
        para_ref[name] = ref
        if name.startswith("inputs"):
            head.append(f"{ref}: <Tensor[{_ir_type(t.dtype)}], {_shape_txt(a.shape)}> : {_shape_txt(a.shape, '[', ']')}"
                        f"  :  <{_ir_type(t.dtype)}xDefaultFormat[const vector]{_shape_txt(a.shape, '{', '}')}>"
                        f"  :  IsWeight: false")
        else:
            head.append(f"{ref}: <Ref[Tensor[{_ir_type(t.dtype)}]], {_shape_txt(a.shape)}, ref_key={name}, "
                        f"is_parameter, is_inplace>  :  has_default  :  <UnknownxDefaultFormat[const vector]"
                        f"{_shape_txt(a.shape, '{', '}')}>  :  IsWeight: true")
    body: list[str] = []
    n = 0
    uid = 9400
    loads = 0
    kernel_ref: dict[int, str] = {}  # kernel index → "%k" of its (first) output value
    tuple_out: dict[int, str] = {}  # kernel index → "%k" of the tuple (multi-output kernels)
    cnodes = 0
    for ki, k in enumerate(run.kernels):
        args: list[str] = []
        for t in k.inputs:
            if t.producer and t.producer.startswith("param:"):
                pname = t.producer[6:]
                if pname.startswith("inputs"):
                    args.append(para_ref[pname])
                    continue
                a = np.asarray(t.array)
                body.append(f"  %{n}(equiv_{40 + n}_CNode_{loads}) = Load({para_ref[pname]}, UMonad[U]) "
                            f"cnode_attrs: {{checkpoint: Bool(1), is_dynamic_len: Bool(0)}} "
                            f"cnode_primal_attrs: {{unique_id: \"{uid + 500 + n}\"}}")
                body.append(f"      : (<Ref[Tensor[{_ir_type(t.dtype)}]], {_shape_txt(a.shape)}, ref_key={pname}, "
                            f"is_parameter, is_inplace>, <UMonad, NoShape>) -> "
                            f"(<Tensor[{_ir_type(t.dtype)}], {_shape_txt(a.shape)}>)")
                body.append(f"      # Fullname with scope: (Default/Load-op{loads})")
                args.append(f"%{n}")
                n += 1
                loads += 1
                cnodes += 1
            elif t.producer and t.producer.startswith("%"):
                src, idx = t.producer[1:].split(":")
                si = int(src)
                if si in tuple_out:
                    body.append(f"  %{n}(CNode_{60 + n}) = TupleGetItem({tuple_out[si]}, I64({idx})) "
                                f"cnode_attrs: {{is_dynamic_len: Bool(0)}}")
                    src_k = run.kernels[si]
                    body.append(f"      : ({_tuple_host(src_k)}, <Int64, NoShape>) -> ({_host(src_k.outputs[int(idx)])})")
                    body.append(f"      # Fullname with scope: ({src_k.scope}/TupleGetItem-op{si})")
                    args.append(f"%{n}")
                    n += 1
                    cnodes += 1
                else:
                    args.append(kernel_ref[si])
            else:
                args.append(_const_text(t))
        inst = f" {{instance name: {k.instance}}}" if k.instance else ""
        pattrs = "IsFeatureMapOutput: Bool(1), IsFeatureMapInputList: (0)"
        if k.attrs:
            pattrs += ", " + k.attrs
        uid += 13
        body.append(f"  %{n}(equiv_{n}_{k.name.split('-')[0].lower()}) = {k.prim}({', '.join(args)}){inst} "
                    f"primitive_attrs: {{{pattrs}}} cnode_attrs: {{checkpoint: Bool(1), is_dynamic_len: Bool(0)}} "
                    f"cnode_primal_attrs: {{unique_id: \"{uid}\"}}")
        host_in = ", ".join(_host(t) for t in k.inputs)
        dev_in = ", ".join(_device(t) for t in k.inputs)
        kind_in = ", ".join(_kind(t) for t in k.inputs)
        if len(k.outputs) > 1:
            host_out = _tuple_host(k)
            dev_out = ", ".join(_device(t) for t in k.outputs)
            kind_out = "Tuple"
            tuple_out[ki] = f"%{n}"
        else:
            host_out = _host(k.outputs[0])
            dev_out = _device(k.outputs[0])
            kind_out = "Tensor"
        body.append(f"      : ({host_in}) -> ({host_out})")
        body.append(f"      : ({dev_in}) -> ({dev_out})")
        body.append(f"      : ({kind_in}) -> ({kind_out})")
        body.append(f"      # Fullname with scope: ({k.fullname})")
        body.extend(_source_lines(k, net_path, net_text))
        kernel_ref[ki] = f"%{n}"
        n += 1
        cnodes += 1
    last = run.kernels[-1]
    body.append(f"  Return(%{n - 1})")
    body.append(f"      : ({_host(last.outputs[0])})")
    body.append("      # Fullname with scope: (Default/Return-op0)")
    total_nodes = cnodes + len(params) + 2
    text = [
        f"# IR entry: @{graph_name}",
        "# Total subgraphs: 1",
        "",
        "# Attrs:",
        "enable_zero_copy_in_graph: 1",
        "",
        f"# Total params: {len(params)}",
        "# Params:",
        *head,
        "",
        "Node counting information:",
        f"Total number of nodes: {total_nodes}",
        f"Total number of cnodes: {cnodes + 1}",
        "",
        "subgraph attr:",
        "enable_zero_copy_in_graph: 1",
        f"subgraph instance: {graph_name} : 0x55d3c8a41f20",
        "",
        f"subgraph @{graph_name}() {{",
        *body,
        "}",
        "# Order:",
        f"#   1: @{graph_name}:CNode_{n + 70}{{[0]: ValueNode<Primitive> Return, [1]: equiv_{n - 1}}}",
        "",
        "",
    ]
    return "\n".join(text)


def _tuple_host(k: Kernel) -> str:
    types = {t.dtype for t in k.outputs}
    dt = _ir_type(next(iter(types))) if len(types) == 1 else "Tensor"
    shapes = ", ".join(_shape_txt(np.asarray(t.array).shape) for t in k.outputs)
    return f"<Tuple[Tensor[{dt}]*{len(k.outputs)}], TupleShape({shapes})>"


# ---------------------------------------------------------------------------------------------- tree


def write_ms_tree(root: os.PathLike | str, runs: dict[int, NetRun], *, net_name: str = "Net", rank: int = 0,
                  graph_id: int = 0, style: str = "ms210", saved_data: str = "tensor", eps: float = 1e-5,
                  start_ts: int = 1718262902000000, dump_path: Optional[str] = None,
                  statistic_categories: Sequence[str] = ("max", "min", "l2norm"), constants: bool = True,
                  write_net_py: bool = True, net_dir: Optional[str] = None) -> Path:
    """Write a whole MindSpore dump tree for the given step → run mapping; returns the rank folder."""
    root = Path(root)
    rank_dir = root / f"rank_{rank}"
    steps = sorted(runs)
    first = runs[steps[0]]
    net_dir = net_dir or f"/home/ma-user/work/{root.name}"
    net_path = f"{net_dir}/net.py"
    net_text = net_py_text(eps)
    if write_net_py:
        root.mkdir(parents=True, exist_ok=True)
        (root / "net.py").write_text(net_text)
    write_metadata(rank_dir / ".dump_metadata", net_name, steps, dump_path or f"{net_dir}/dump", saved_data,
                   statistic_categories=statistic_categories if saved_data != "tensor" else None)
    (rank_dir / "graphs").mkdir(parents=True, exist_ok=True)
    (rank_dir / "graphs" / f"ms_output_trace_code_graph_{graph_id}.ir").write_text(
        ir_text(first, net_path, net_text))
    write_exec_order(rank_dir / "execution_order", first, graph_id, steps)
    clock = Clock(start_ts)
    graph_dir = rank_dir / net_name / str(graph_id)
    if constants and saved_data != "statistic":
        write_constants(graph_dir / "constants", first, clock, style)
    for s in steps:
        clock.t = start_ts + 1_000_000 * (s + 1)
        write_step(graph_dir / str(s), runs[s], clock, style, saved_data,
                   dump_params=saved_data != "statistic", statistic_categories=statistic_categories)
    return rank_dir
