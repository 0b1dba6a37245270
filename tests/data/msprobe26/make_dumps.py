"""Make the real msprobe 26.2 dumps kept in tests/data/real_msprobe26.tar.gz.

Run with a python that has torch (CPU) and mindstudio-probe 26.2.0:
    python make_dumps.py OUTDIR
Writes, each under OUTDIR/<name>/ (config next to it as <name>.json):
  l0_tensor     level L0  task tensor      1 training step (modules fwd/bwd + parameters_grad)
  l1_tensor     level L1  task tensor      1 training step (APIs fwd/bwd)
  mix_tensor    level mix task tensor      1 training step
  mix_stats     level mix task statistics  2 training steps
  nan_stats     level L1  task statistics  forward only; torch.sqrt of a negative tensor goes NaN,
                                           torch.exp of a large one goes +inf later
  dist_stats    level mix task statistics  2 ranks, torch.distributed gloo on localhost, all_reduce
"""

import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from msprobe.pytorch import PrecisionDebugger


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 6)
        self.norm = nn.LayerNorm(6)
        self.fc2 = nn.Linear(6, 3, bias=False)
        self.scale = nn.Parameter(torch.ones(6))

    def forward(self, x):
        h = self.norm(self.fc1(x))                       # modules with weight/bias parameters
        h = F.dropout(h, p=0.0, training=False)          # float + bool kwargs
        h = F.layer_norm(h, (6,), None, self.scale)      # a null in the middle of input_args
        h = torch.add(h, 1.0, alpha=2)                   # scalar arg + kwarg
        h = F.gelu(h, approximate="tanh")                # string kwarg
        values, _ = torch.max(h, dim=1, keepdim=True)    # tuple output
        return self.fc2(F.relu(h - 0.5 * values))


def config(out, name, task, level):
    cfg = {"task": task, "dump_path": os.path.join(out, name), "rank": [], "step": [], "level": level,
           task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
    path = os.path.join(out, name + ".json")
    with open(path, "w") as fh:
        json.dump(cfg, fh, indent=1)
    return path


def train(out, name, task, level, steps=1):
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(2, 4)
    target = torch.randn(2, 3)
    debugger = PrecisionDebugger(config_path=config(out, name, task, level))
    for _ in range(steps):
        debugger.start(model=net)
        loss = F.mse_loss(net(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        debugger.stop()
        debugger.step()


def nan_run(out):
    torch.manual_seed(0)
    x = torch.randn(2, 4)
    debugger = PrecisionDebugger(config_path=config(out, "nan_stats", "statistics", "L1"))
    debugger.start()
    with torch.no_grad():
        a = torch.add(x, 1.0)            # finite
        b = torch.mul(a, 2.0)            # finite
        c = torch.sqrt(b - 10.0)         # all negative -> NaN (the origin)
        d = torch.exp(x * 200.0)         # +inf where x > ~0.44
        e = torch.add(c, d)
    debugger.stop()
    debugger.step()
    print("nan run:", e)


def dist_worker(rank, out):
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ.get("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(rank)
    net = Net()
    x = torch.randn(2, 4)
    debugger = PrecisionDebugger(config_path=os.path.join(out, "dist_stats.json"))
    debugger.start(model=net)
    y = net(x)
    dist.all_reduce(y)
    y.sum().backward()
    debugger.stop()
    debugger.step()
    dist.destroy_process_group()


def main():
    out = os.path.abspath(sys.argv[1])
    which = sys.argv[2:] or ["l0_tensor", "l1_tensor", "mix_tensor", "mix_stats", "nan_stats", "dist_stats"]
    os.makedirs(out, exist_ok=True)
    if len(which) > 1:  # PrecisionDebugger is a per-process singleton: one process per run
        import subprocess

        for name in which:
            subprocess.run([sys.executable, os.path.abspath(__file__), out, name], check=True)
        return
    name = which[0]
    if name == "nan_stats":
        nan_run(out)
    elif name == "dist_stats":
        import torch.multiprocessing as mp

        config(out, "dist_stats", "statistics", "mix")
        mp.spawn(dist_worker, args=(out,), nprocs=2)
    else:
        level, task = name.split("_")
        train(out, name, "statistics" if task == "stats" else "tensor", "mix" if level == "mix" else level.upper(),
              steps=2 if name == "mix_stats" else 1)


if __name__ == "__main__":
    main()
