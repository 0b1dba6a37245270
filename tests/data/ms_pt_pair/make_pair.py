"""A real MindSpore-vs-PyTorch msprobe pair: the same tiny net and weights in both frameworks.

    python make_pair.py ms OUT      (MindSpore 2.10 CPU, pynative + mindstudio-probe 26.2.0)
    python make_pair.py pt OUT      (torch 2.13 CPU + mindstudio-probe 26.2.0)

Level L1, task statistics.  On CPU, MindSpore 2.10 lacks the kernel behind ``mint.norm`` that msprobe's
statistics use; the script gives ``mint.norm`` the same L2 norm from CPU kernels (see run_ms).  The MindSpore side calls cos once more than the PyTorch side (a
warm-up call), so the call counts of one API differ between the two dumps.
"""

import json
import os
import sys

import numpy as np

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 4)).astype(np.float32)
W = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal(3).astype(np.float32)


def config(out):
    cfg = {"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": "L1",
           "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
    path = out + ".json"
    with open(path, "w") as fh:
        json.dump(cfg, fh)
    return path


def run_pt(out):
    import torch
    import torch.nn.functional as F
    from msprobe.pytorch import PrecisionDebugger

    dbg = PrecisionDebugger(config_path=config(out))
    x, w, b = torch.tensor(X), torch.tensor(W), torch.tensor(B)
    dbg.start()
    h = F.relu(F.linear(x, w, b))
    c = torch.cos(h)
    s = torch.mul(torch.add(c, 1.0), 2.0)
    y = F.softmax(s, dim=-1)
    dbg.stop()
    dbg.step()
    print(y.sum())


def run_ms(out):
    import mindspore as ms
    from mindspore import mint
    from msprobe.mindspore import PrecisionDebugger

    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    # MindSpore 2.10's CPU backend has no LinalgVectorNorm kernel, which msprobe's statistics call
    # through mint.norm; give mint.norm the same L2 norm from CPU kernels (sqrt of the sum of squares)
    from mindspore import ops

    mint.norm = lambda t, *a, **k: ops.sqrt(ops.reduce_sum(t * t))
    dbg = PrecisionDebugger(config_path=config(out))
    x, w, b = ms.Tensor(X), ms.Tensor(W), ms.Tensor(B)
    dbg.start()
    h = mint.nn.functional.relu(mint.nn.functional.linear(x, w, b))
    mint.cos(x)  # warm-up call the PyTorch script does not make
    c = mint.cos(h)
    s = mint.mul(mint.add(c, 1.0), 2.0)
    y = mint.nn.functional.softmax(s, dim=-1)
    dbg.stop()
    dbg.step()
    print(y.sum())


if __name__ == "__main__":
    side, out = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    (run_ms if side == "ms" else run_pt)(out)
