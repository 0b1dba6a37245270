"""Real msprobe dumps for judging compare at the run's precision: two nets, float32 golden (CPU) against
bfloat16 / float16 autocast targets (CPU), with and without a bug.  Held out: the precision rules were
developed on shared/real_dumps/gpu-msprobe-mixer and never tuned on these.

Nets: ``tiny_gpt`` (one pre-LN transformer block: LayerNorm, causal softmax attention with a -1e9 mask, GELU
MLP, residuals) and ``tiny_cnn`` (conv, BatchNorm, LeakyReLU, max-pool, conv, LeakyReLU, mean, linear).
Targets (the honest answer in brackets):
  fp32_rerun        the same run again: bit-identical [no divergence]
  bf16, fp16        autocast: mixed precision, no bug [no divergence]
  bf16_arg          autocast bf16 + a changed argument: gpt's ln2 eps 1e-5 -> 1e-1, cnn's second LeakyReLU
                    slope 0.01 -> 0.2 [that op, cause constant]
  bf16_kernel, fp32_kernel  a bug with no changed argument: gpt, a wrong attention kernel emulated by an
                    extra in-place op on the attention output projection (``Tensor.mul_`` x1.25, target-only);
                    cnn, one element of conv2's weight set to 3.0 [the op where the difference first shows:
                    gpt the residual add reading the projection; cnn conv2 (its weight input)]
Tensor dumps: steps 0 (tiny_gpt forward only, to keep the files few), statistics dumps: steps 0 and 1
(``fp32_kernel`` in statistics only).
Usage: python make_pairs.py OUTDIR      (torch CPU + mindstudio-probe 26.x; one process per run)
Made with torch 2.14.1 (CPU) and mindstudio-probe 26.2.0.
"""
import json, os, subprocess, sys

OUT = sys.argv[1]
RUNS = {  # name: (autocast dtype or None, bug)
    "fp32": (None, None), "fp32_rerun": (None, None), "bf16": ("bf16", None), "fp16": ("fp16", None),
    "bf16_arg": ("bf16", "arg"), "bf16_kernel": ("bf16", "kernel"), "fp32_kernel": (None, "kernel"),
}


def run(net_name, name, task):
    import torch, torch.nn as nn, torch.nn.functional as F
    from msprobe.pytorch import PrecisionDebugger
    amp, bug = RUNS[name]

    class Block(nn.Module):
        def __init__(s, d=16, heads=2, t=6):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d, eps=1e-1 if bug == "arg" else 1e-5)
            s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            s.fc1, s.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            s.h, s.d = heads, d
            s.register_buffer("mask", torch.triu(torch.full((t, t), -1e9), 1))
        def forward(s, x):
            b, t, d = x.shape
            q, k, v = s.qkv(s.ln1(x)).split(d, -1)
            q, k, v = (z.reshape(b, t, s.h, d // s.h).transpose(1, 2) for z in (q, k, v))
            att = torch.softmax(q @ k.transpose(-1, -2) / (d // s.h) ** 0.5 + s.mask[:t, :t], -1)
            y = s.proj((att @ v).transpose(1, 2).reshape(b, t, d))
            x = x + y
            return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))

    class GPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.blocks = nn.Sequential(Block()); s.head = nn.Linear(16, 5)
        def forward(s, x):
            return s.head(s.blocks(x)).mean(1)

    class CNN(nn.Module):
        def __init__(s):
            super().__init__()
            s.c1, s.bn, s.c2, s.fc = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Conv2d(8, 8, 3, padding=1), nn.Linear(8, 5)
        def forward(s, x):
            x = F.max_pool2d(F.leaky_relu(s.bn(s.c1(x)), 0.01), 2)
            x = F.leaky_relu(s.c2(x), 0.2 if bug == "arg" else 0.01)
            return s.fc(x.mean((2, 3)))

    torch.manual_seed(0)
    model = GPT() if net_name == "tiny_gpt" else CNN()
    if bug == "kernel":
        if net_name == "tiny_gpt":
            def wrong(mod, inp, out):
                with torch.no_grad():
                    out.mul_(1.25)
            model.blocks[0].proj.register_forward_hook(wrong)
        else:
            with torch.no_grad():
                model.c2.weight[3, 2, 1, 1] = 3.0
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 6, 16, generator=g) if net_name == "tiny_gpt" else torch.randn(2, 3, 8, 8, generator=g)
    y = torch.randint(0, 5, (2,), generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = os.path.join(OUT, net_name, task, name)
    cfg = {"task": task, "dump_path": path, "rank": [], "step": [0] if task == "tensor" else [0, 1], "level": "L1",
           "enable_dataloader": False,
           "tensor": {"scope": [], "list": [], "data_mode": ["forward"] if net_name == "tiny_gpt" else ["all"]},
           "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
    os.makedirs(path, exist_ok=True)
    cp = os.path.join(OUT, net_name, task, name + "_config.json")
    json.dump(cfg, open(cp, "w"))
    dbg = PrecisionDebugger(config_path=cp)
    for step in range(2):
        dbg.start(model)
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
        with torch.autocast(device_type="cpu", dtype=dt or torch.bfloat16, enabled=dt is not None):
            out = model(x)
            loss = F.cross_entropy(out.float(), y)
        loss.backward(); opt.step(); opt.zero_grad()
        dbg.stop(); dbg.step()
    print(net_name, name, task, "loss", float(loss), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "one":
        run(*sys.argv[3:6])
        sys.exit(0)
    for net in ("tiny_gpt", "tiny_cnn"):
        for task in ("tensor", "statistics"):
            for name in RUNS:
                if task == "tensor" and name == "fp32_kernel":
                    continue  # kept small: the float32 kernel bug is in the statistics dumps
                r = subprocess.run([sys.executable, __file__, OUT, "one", net, name, task], capture_output=True, text=True)
                print(net, name, task, "rc", r.returncode, r.stdout.strip()[-120:], r.stderr.strip()[-800:] if r.returncode else "")
