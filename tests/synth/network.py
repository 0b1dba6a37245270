"""A tiny numpy "network" whose ops feed each other, for the synthetic MindSpore / CANN trees.

``simulate_ms_net`` runs conv → BatchNorm → ReLU → MaxPool → Flatten → MatMul → BiasAdd →
Cast(fp16) → Exp → ReduceSum → RealDiv → Cast(bf16) → MatMul → Add and returns every executed
kernel with its real input and output arrays, so the inputs of op k are exactly the outputs of
its producer (and parameters are the arrays the kernels read).  ``overflow=True`` scales the
input so the float16 ``Exp`` overflows (+Inf) and the softmax-style division downstream turns
that into NaN.  Only the BatchNorm output depends on ``eps``.

Everything is deterministic: fixed seeds, float32 arithmetic with float64 accumulation where a
reduction is involved, float16 / bfloat16 rounding done explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from synth.cann_writer import bf16_bits


def bf16_round(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (returned as float32, as MindSpore stores them)."""
    bits = bf16_bits(np.asarray(a, dtype=np.float32)).astype(np.uint32) << 16
    return bits.view(np.float32)


def conv2d_same(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """3x3 'same' convolution, stride 1, NCHW, no bias (float64 accumulation, float32 result)."""
    n, c, h, wd = x.shape
    k = w.shape[-1]
    pad = k // 2
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.stack([xp[:, :, i:i + h, j:j + wd] for i in range(k) for j in range(k)], axis=2)
    wf = w.astype(np.float64).reshape(w.shape[0], c, k * k)
    return np.einsum("nckhw,ock->nohw", cols, wf).astype(np.float32)


def maxpool2(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


@dataclass
class Tensor:
    """One tensor of one kernel: values (as stored), the dtype token MindSpore writes, a source."""

    array: np.ndarray
    dtype: str  # logical dtype, numpy spelling ("float32", "float16", "bfloat16", "bool", "int64")
    producer: Optional[str] = None  # "%node:index" of the producing kernel, or "param:name", or "const"


@dataclass
class Kernel:
    """One executed kernel of the synthetic network."""

    type: str  # kernel type as written in file names ("Conv2D", "BatchNorm", …)
    prim: str  # primitive name as written in the .ir ("Conv2D", "PrimFunc_ReLU", …)
    scope: str  # "Default/conv1-Conv2d"
    name: str  # "Conv2D-op0"
    inputs: list[Tensor]
    outputs: list[Tensor]
    source: list[str] = field(default_factory=list)  # net.py code snippets, outermost first
    lib: list[tuple[str, str]] = field(default_factory=list)  # (mindspore lib frame "file:lines, cols", code)
    attrs: str = ""  # primitive_attrs text for the .ir
    instance: str = ""  # {instance name: …}

    @property
    def fullname(self) -> str:
        return f"{self.scope}/{self.name}"


@dataclass
class NetRun:
    """The kernels of one step plus the parameters and constants they read."""

    kernels: list[Kernel]
    params: dict[str, Tensor]  # name → value ("conv1.weight", "inputs0", …), in .ir parameter order
    constants: list[Tensor]


def net_weights(seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "conv1.weight": (rng.standard_normal((4, 3, 3, 3)) * 0.35).astype(np.float32),
        "bn1.gamma": rng.uniform(0.8, 1.2, 4).astype(np.float32),
        "bn1.beta": (rng.standard_normal(4) * 0.1).astype(np.float32),
        "bn1.moving_mean": (rng.standard_normal(4) * 0.2).astype(np.float32),
        "bn1.moving_variance": rng.uniform(0.02, 0.06, 4).astype(np.float32),
        "fc1.weight": (rng.standard_normal((16, 36)) * 0.06).astype(np.float32),
        "fc1.bias": (rng.standard_normal(16) * 0.1).astype(np.float32),
        "fc2.weight": bf16_round((rng.standard_normal((10, 16)) * 0.3).astype(np.float32)),
        "fc2.bias": bf16_round((rng.standard_normal(10) * 0.1).astype(np.float32)),
    }


def net_input(step: int, overflow: bool, seed: int = 11) -> np.ndarray:
    rng = np.random.default_rng(seed + step)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    return (x * np.float32(6.0)).astype(np.float32) if overflow else x


def simulate_ms_net(step: int = 0, eps: float = 1e-5, overflow: bool = False) -> NetRun:
    """Run the network once (one step) and return every kernel with its tensors."""
    w = net_weights()
    x = net_input(step, overflow)
    p = {"inputs0": Tensor(x, "float32", "param:inputs0")}
    for k, v in w.items():
        p[k] = Tensor(v, "bfloat16" if k.startswith("fc2.") else "float32", f"param:{k}")
    kernels: list[Kernel] = []
    T = Tensor

    def out(k: int, i: int = 0) -> str:
        return f"%{k}:{i}"

    # 0 conv1
    c1 = conv2d_same(x, w["conv1.weight"])
    kernels.append(Kernel("Conv2D", "Conv2D", "Default/conv1-Conv2d", "Conv2D-op0",
                          [p["inputs0"], p["conv1.weight"]], [T(c1, "float32")],
                          ["x = self.relu(self.bn1(self.conv1(x)))"],
                          [("nn/layer/conv.py:372~376, 4~21", "def construct(self, x):"),
                           ("nn/layer/conv.py:373, 17~44", "output = self.conv2d(x, self.weight)")],
                          "kernel_size: (3, 3), mode: I64(1), out_channel: I64(4), pad_mode: \"same\", "
                          "format: \"NCHW\", pad: (1, 1, 1, 1), stride: (1, 1, 1, 1), dilation: (1, 1, 1, 1), "
                          "group: I64(1), groups: I64(1)", "conv2d"))
    # 1 BatchNorm (inference: running statistics)
    sh = (1, 4, 1, 1)
    mean, var = w["bn1.moving_mean"], w["bn1.moving_variance"]
    y = ((c1 - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + np.float32(eps)) * w["bn1.gamma"].reshape(sh)
         + w["bn1.beta"].reshape(sh)).astype(np.float32)
    bn_outs = [T(y, "float32"), T(mean.copy(), "float32"), T(var.copy(), "float32"),
               T(mean.copy(), "float32"), T(var.copy(), "float32")]
    kernels.append(Kernel("BatchNorm", "BatchNorm", "Default/bn1-BatchNorm2d", "BatchNorm-op0",
                          [T(c1, "float32", out(0)), p["bn1.gamma"], p["bn1.beta"], p["bn1.moving_mean"],
                           p["bn1.moving_variance"]], bn_outs,
                          ["x = self.relu(self.bn1(self.conv1(x)))"],
                          [("nn/layer/normalization.py:148~160, 4~43", "def construct(self, x):"),
                           ("nn/layer/normalization.py:157, 19~80",
                            "return self.bn_infer(x, self.gamma, self.beta, self.moving_mean, self.moving_variance)[0]")],
                          f"is_training: Bool(0), epsilon: F32({eps}), momentum: F32(0.1), format: \"NCHW\", "
                          "data_format: \"NCHW\"", "bn_infer"))
    # 2 ReLU
    r1 = np.maximum(y, np.float32(0)).astype(np.float32)
    kernels.append(Kernel("ReLU", "PrimFunc_ReLU", "Default/relu-ReLU", "ReLU-op0",
                          [T(y, "float32", out(1))], [T(r1, "float32")],
                          ["x = self.relu(self.bn1(self.conv1(x)))"],
                          [("nn/layer/activation.py:524~525, 4~31", "def construct(self, input):"),
                           ("nn/layer/activation.py:525, 15~31", "return self.relu(input)")], "", "relu"))
    # 3 MaxPool
    mp = maxpool2(r1)
    kernels.append(Kernel("MaxPool", "MaxPool", "Default/pool-MaxPool2d", "MaxPool-op0",
                          [T(r1, "float32", out(2))], [T(mp, "float32")], ["x = self.flatten(self.pool(x))"],
                          [("nn/layer/pooling.py:590~611, 4~18", "def construct(self, x):"),
                           ("nn/layer/pooling.py:603, 18~34", "out = self.max_pool(x)")],
                          "kernel_size: (1, 1, 2, 2), strides: (1, 1, 2, 2), pad_mode: \"VALID\", format: \"NCHW\"",
                          "max_pool"))
    # 4 Flatten
    fl = mp.reshape(2, 36)
    kernels.append(Kernel("Flatten", "PrimFunc_Flatten", "Default/flatten-Flatten", "Flatten-op0",
                          [T(mp, "float32", out(3))], [T(fl, "float32")], ["x = self.flatten(self.pool(x))"],
                          [("nn/layer/basic.py:635~640, 4~77", "def construct(self, x):"),
                           ("nn/layer/basic.py:640, 15~26",
                            "return ops.flatten(x, start_dim=self.start_dim, end_dim=self.end_dim)")], "", ""))
    # 5 MatMul fc1 (transpose_b) — inputs 2/3 are the Bool transpose flags, as MindSpore 2.x dumps them
    mm = (fl.astype(np.float64) @ w["fc1.weight"].astype(np.float64).T).astype(np.float32)
    kernels.append(Kernel("MatMul", "PrimFunc_MatMul", "Default/fc1-Dense", "MatMul-op0",
                          [T(fl, "float32", out(4)), p["fc1.weight"], T(np.array(False), "bool", "const"),
                           T(np.array(True), "bool", "const")], [T(mm, "float32")],
                          ["x = self.fc1(x)"],
                          [("nn/layer/basic.py:750~764, 4~18", "def construct(self, x):"),
                           ("nn/layer/basic.py:756, 12~40", "x = self.matmul(x, self.weight)")],
                          "transpose_a: Bool(0), transpose_b: Bool(1), dst_type: F32", "matmul"))
    # 6 BiasAdd fc1 (input 2 = data_format Int64)
    ba = (mm + w["fc1.bias"]).astype(np.float32)
    kernels.append(Kernel("BiasAdd", "PrimFunc_BiasAdd", "Default/fc1-Dense", "BiasAdd-op0",
                          [T(mm, "float32", out(5)), p["fc1.bias"], T(np.array(0, dtype=np.int64), "int64", "const")],
                          [T(ba, "float32")], ["x = self.fc1(x)"],
                          [("nn/layer/basic.py:750~764, 4~18", "def construct(self, x):"),
                           ("nn/layer/basic.py:758, 16~44", "x = self.bias_add(x, self.bias)")], "", "bias_add"))
    # 7 Cast → float16
    h = ba.astype(np.float16)
    kernels.append(Kernel("Cast", "Cast", "Default", "Cast-op0", [T(ba, "float32", out(6))], [T(h, "float16")],
                          ["x = ops.cast(x, ms.float16)"], [], "dst_type: F16", "cast"))
    # 8 Exp in float16 (overflows for inputs > 11.09)
    with np.errstate(over="ignore"):
        e = np.exp(h)
    kernels.append(Kernel("Exp", "PrimFunc_Exp", "Default", "Exp-op0", [T(h, "float16", out(7))],
                          [T(e, "float16")], ["e = ops.exp(x)"], [], "", "exp"))
    # 9 ReduceSum (keep_dims) in float16 (axis tuple is a constant input)
    axis = np.array([1], dtype=np.int64)
    with np.errstate(over="ignore"):
        s = e.astype(np.float32).sum(axis=1, keepdims=True).astype(np.float16)
    kernels.append(Kernel("ReduceSum", "PrimFunc_ReduceSum", "Default", "ReduceSum-op0",
                          [T(e, "float16", out(8)), T(axis, "int64", "const")], [T(s, "float16")],
                          ["x = e / e.sum(axis=1, keepdims=True)"], [], "keep_dims: Bool(1), skip_mode: Bool(0)",
                          "reduce_sum"))
    # 10 RealDiv → NaN where exp = +Inf (Inf / Inf), 0 for the rest of an overflowing row
    with np.errstate(invalid="ignore", divide="ignore"):
        d = (e / s).astype(np.float16)
    kernels.append(Kernel("RealDiv", "PrimFunc_RealDiv", "Default", "RealDiv-op0",
                          [T(e, "float16", out(8)), T(s, "float16", out(9))], [T(d, "float16")],
                          ["x = e / e.sum(axis=1, keepdims=True)"], [], "", "div"))
    # 11 Cast → bfloat16 (MindSpore stores bfloat16 tensors as float32 npy)
    b = bf16_round(d.astype(np.float32))
    kernels.append(Kernel("Cast", "Cast", "Default", "Cast-op1", [T(d, "float16", out(10))], [T(b, "bfloat16")],
                          ["x = ops.cast(x, ms.bfloat16)"], [], "dst_type: BF16", "cast"))
    # 12 MatMul fc2 in bfloat16
    with np.errstate(invalid="ignore"):
        m2 = bf16_round((b.astype(np.float64) @ w["fc2.weight"].astype(np.float64).T).astype(np.float32))
    kernels.append(Kernel("MatMul", "PrimFunc_MatMul", "Default/fc2-Dense", "MatMul-op1",
                          [T(b, "bfloat16", out(11)), p["fc2.weight"], T(np.array(False), "bool", "const"),
                           T(np.array(True), "bool", "const")], [T(m2, "bfloat16")], ["return self.fc2(x)"],
                          [("nn/layer/basic.py:750~764, 4~18", "def construct(self, x):"),
                           ("nn/layer/basic.py:756, 12~40", "x = self.matmul(x, self.weight)")],
                          "transpose_a: Bool(0), transpose_b: Bool(1), dst_type: BF16", "matmul"))
    # 13 Add (bias) in bfloat16
    a = bf16_round((m2 + w["fc2.bias"]).astype(np.float32))
    kernels.append(Kernel("Add", "PrimFunc_Add", "Default/fc2-Dense", "Add-op0",
                          [T(m2, "bfloat16", out(12)), p["fc2.bias"]], [T(a, "bfloat16")], ["return self.fc2(x)"],
                          [("nn/layer/basic.py:750~764, 4~18", "def construct(self, x):"),
                           ("nn/layer/basic.py:760, 16~38", "x = self.add(x, self.bias)")], "", "add"))
    constants = [T(axis, "int64", "const"), T(np.array(0, dtype=np.int64), "int64", "const")]
    return NetRun(kernels, p, constants)


def describe(run: NetRun) -> dict[str, Any]:
    """Quick facts used by the generator's self-checks (which kernels hold Inf / NaN)."""
    facts: dict[str, Any] = {}
    for k in run.kernels:
        o = np.asarray(k.outputs[0].array, dtype=np.float64)
        facts[k.fullname] = {"posinf": int(np.isposinf(o).sum()), "nan": int(np.isnan(o).sum())}
    return facts
