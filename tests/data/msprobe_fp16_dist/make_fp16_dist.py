"""Make the real msprobe dump kept in tests/data/real_msprobe_fp16_dist.tar.gz: a 2-rank job whose float16
overflow is born on rank 1 at step 2 and reaches rank 0 through an all_reduce.

Run with a python that has torch (CPU) and mindstudio-probe:
    python make_fp16_dist.py OUTDIR
Writes OUTDIR/fp16_dist/step{0,1,2}/rank{0,1}/ (level L1, task statistics) and OUTDIR/fp16_dist.json (the config).
Each rank, each step: h = tanh(x @ w) (float16), y = h * s, then y is summed in float32 and all_reduced.
``s`` is 2.0, except on rank 1 at step 2 where it is 1e5: |h| up to ~1 times 1e5 exceeds float16's 65504, so
torch.mul's output holds +inf/-inf from finite inputs there (born), and the all_reduce hands rank 0 an
infinite sum from finite inputs of its own (received).
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from msprobe.pytorch import PrecisionDebugger

STEPS = 3


def config(out):
    cfg = {"task": "statistics", "dump_path": os.path.join(out, "fp16_dist"), "rank": [], "step": [],
           "level": "L1", "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                         "summary_mode": "statistics"}}
    path = os.path.join(out, "fp16_dist.json")
    with open(path, "w") as fh:
        json.dump(cfg, fh, indent=1)
    return path


def worker(rank, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ.get("MASTER_PORT", "29541")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(rank)
    x = torch.randn(4, 8).half()
    w = (torch.randn(8, 8) * 0.5).half()
    debugger = PrecisionDebugger(config_path=os.path.join(out, "fp16_dist.json"))
    for step in range(STEPS):
        debugger.start()
        with torch.no_grad():
            h = torch.tanh(torch.matmul(x, w))
            s = 1e5 if (rank == 1 and step == 2) else 2.0
            y = torch.mul(h, s)
            total = torch.sum(y.float(), dim=0)
            dist.all_reduce(total)
        debugger.stop()
        debugger.step()
        print(f"rank {rank} step {step}: y finite {bool(torch.isfinite(y).all())}, "
              f"all_reduce finite {bool(torch.isfinite(total).all())}", flush=True)
    dist.destroy_process_group()


def main():
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    config(out)
    mp.spawn(worker, args=(out,), nprocs=2)


if __name__ == "__main__":
    main()
