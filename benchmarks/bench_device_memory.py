"""Peak RSS of ``dumpscope stats`` and ``compare`` on 2 GiB device-layout fp16 tensors (run by hand).

    python benchmarks/bench_device_memory.py [--gib 2] [--workdir /tmp/dumpscope-bench]

Writes CANN dump files, each holding one float16 output of ``--gib`` GiB, three shapes per device
format (issue 30: chunks follow bytes, not planes): NC1HWC0 with many planes (N=1, C=4096 -> C1=256,
C0=16, H=W=512), with one C1 plane of the whole tensor (1, 16, 8192, 8192) and with four big planes
(4, 16, 4096, 4096); FRACTAL_NZ as a square 32768 x 32768 matrix, as one fractal row (16 x 2^26:
one row block of 2 GiB) and as one fractal column (2^26 x 16); the weight layouts (logical order
across the whole file: ``core/formats/weight_chunks.py``) FRACTAL_Z as a square 3x3 conv weight, as 16
output channels of 2^26 input channels (one row of 128 MB) and as 2^26 output channels of 16 (one
(C1,H,W) block of 2 GiB), FRACTAL_Z_3D as a square 3x3x3 weight, as 16 rows and as one D-H-W block, and
C1HWNCoC0 (16x its logical size on device) as a 3x3 weight, as one pixel of 2^22 N and as one row of
2^26 channels.  The payload is
written sparse (``truncate``: zeros on disk cost nothing; RSS is what is measured, and the
values do not change the work).  Each ``stats`` runs in a fresh subprocess on an in-memory index
and reports its own ``ru_maxrss``; the baseline is the same child after importing the CLI only.
``compare`` of the tree with itself streams both sides of each pair.
Targets (issue 20): stats <= 600 MB, compare <= 1.2 GB peak RSS.  Also: the explorer's slice of the
NC1HWC0 tensor (``core.tensor_slice``), and ``compare`` of an msprobe tree holding one ``--pt-gib``
GiB float32 ``.pt`` with itself (storages read off the zip in chunks).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

_CHILD = r"""
import json, resource, sys, io, contextlib
from dumpscope.tui.cli import entry as cli
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if sys.argv[1] == "compare":
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["compare", sys.argv[2], sys.argv[2], "--json", "--no-cache"])
    rows = json.loads(out.getvalue())["rows"] if code == 0 else []
    doc = {"count": len(rows), "shape": [r["verdict"] for r in rows]}
elif sys.argv[1] == "slice":  # the explorer's tensor pane: one slice of the op's first output
    from dumpscope.core.query import open_query
    from dumpscope.core.tensors.slicing import tensor_slice
    from dumpscope.tui.slicing import parse_index
    q = open_query(sys.argv[2], use_cache=False)
    op = next(o for o in q.ops() if sys.argv[3] in o.name)
    t = [t for t in q.tensors(op.id) if t.io == "output"][0]
    res = tensor_slice(t.ref(), parse_index(sys.argv[4]))
    code, doc = 0, {"count": res.size, "shape": [res.how] + list(res.shape)}
elif sys.argv[1] != "import-only":
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["stats", sys.argv[1], sys.argv[2], "--json", "--no-cache"])
    doc = json.loads(out.getvalue()) if code == 0 else {}
else:
    code, doc = 0, {}
print(json.dumps({"base_kb": base, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "code": code,
                  "count": doc.get("count"), "shape": doc.get("shape")}))
"""


def _write(step: Path, name: str, fmt: str, device_shape: tuple[int, ...], original: tuple[int, ...]) -> None:
    """A CANN dump file with one float16 output whose payload is a sparse run of zeros."""
    from synth.cann_writer import write_sparse_dump

    path = step / f"Op.{name}.1.2.1718260502000000"
    if path.exists() and path.stat().st_size > 0:
        return
    step.mkdir(parents=True, exist_ok=True)
    write_sparse_dump(path, name, fmt, device_shape, original)


def _write_pt_tree(root: Path, gib: float) -> Path:
    """An msprobe tensor dump whose one API output is a ``gib`` GiB float32 ``.pt`` (zeros, streamed to disk)."""
    import zipfile

    from synth.api_dump_writer import rebuild_tensor_pickle

    rank = root / "step0" / "rank0"
    data = rank / "dump_tensor_data"
    name = "Functional.linear.0.forward"
    pt = data / f"{name}.output.0.pt"
    n = int(gib * (1 << 30)) // 4
    if not (root / ".complete").exists():
        data.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(pt, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr("archive/data.pkl", rebuild_tensor_pickle("FloatStorage", "0", n, 0, (n,), (1,)))
            zf.writestr("archive/byteorder", "little")
            with zf.open("archive/data/0", "w", force_zip64=True) as fh:
                block = bytes(64 << 20)
                left = n * 4
                while left:
                    fh.write(block[:min(left, len(block))])
                    left -= min(left, len(block))
        entry = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [n], "Max": 0.0, "Min": 0.0,
                 "Mean": 0.0, "Norm": 0.0, "requires_grad": False, "data_name": pt.name}
        (rank / "dump.json").write_text(json.dumps({"task": "tensor", "level": "L1", "framework": "pytorch",
                                                    "dump_data_dir": str(data), "data": {
                                                        name: {"input_args": [], "input_kwargs": {},
                                                               "output": [entry]}}}))
        (root / ".complete").write_text("ok")
    return root


def _child(*args: str) -> dict:
    env = dict(os.environ, DUMPSCOPE_WORKERS="1")
    res = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, env=env, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--pt-gib", type=float, default=1.0)
    ap.add_argument("--only-new", action="store_true", help="only the slice and .pt rows (issue 20, session 4)")
    ap.add_argument("--only-weights", action="store_true",
                    help="only the FRACTAL_Z / FRACTAL_Z_3D / C1HWNCoC0 rows (issue 30, session 8)")
    ap.add_argument("--workdir", default=common.DEFAULT_WORKDIR)
    args = ap.parse_args()
    common.print_machine()
    work = common.check_workdir(args.workdir)
    elems = int(args.gib * (1 << 30)) // 2
    hw = 512
    c = max(16, elems // (hw * hw) // 16 * 16)
    side = int(elems ** 0.5) // 16 * 16
    plane = int((elems // 16) ** 0.5)  # one C1 plane of the whole tensor
    four = int((elems // 64) ** 0.5)
    long = elems // 16 // 16 * 16  # one fractal row / column
    step = work / f"device{args.gib:g}" / "dump" / "20240101" / "0" / "m" / "1" / "0"
    cases = [  # (op, format, device shape, logical shape, what it stresses)
        ("nc1hwc0", "NC1HWC0", (1, c // 16, hw, hw, 16), (1, c, hw, hw), "many planes"),
        ("nc1hwc0plane", "NC1HWC0", (1, 1, plane, plane, 16), (1, 16, plane, plane), "one C1 plane"),
        ("nc1hwc0four", "NC1HWC0", (4, 1, four, four, 16), (4, 16, four, four), "four big planes"),
        ("nz", "FRACTAL_NZ", (side // 16, side // 16, 16, 16), (side, side), "square"),
        ("nzrow", "FRACTAL_NZ", (long // 16, 1, 16, 16), (16, long), "one fractal row"),
        ("nzcol", "FRACTAL_NZ", (1, long // 16, 16, 16), (long, 16), "one fractal column"),
    ]
    sq = int((elems // 9) ** 0.5) // 16 * 16  # square 3x3 conv weight
    sq3 = int((elems // 27) ** 0.5) // 16 * 16  # square 3x3x3 weight
    wide = elems // 16 // 16 * 16  # 16 rows of this many channels / this many rows of 16
    cn_n = elems // 256 // (64 * 9) // 16 * 16  # C1HWNCoC0: 64 C1 blocks of 3x3 pixels of N
    weights = [
        ("fz", "FRACTAL_Z", (sq // 16 * 9, sq // 16, 16, 16), (sq, sq, 3, 3), "square 3x3 weight"),
        ("fzrow", "FRACTAL_Z", (wide // 16, 1, 16, 16), (16, wide, 1, 1), "16 rows of 128 MB"),
        ("fzblock", "FRACTAL_Z", (1, wide // 16, 16, 16), (wide, 16, 1, 1), "one (C1,H,W) block"),
        ("fz3d", "FRACTAL_Z_3D", (sq3 // 16 * 27, sq3 // 16, 16, 16), (sq3, sq3, 3, 3, 3), "square 3x3x3"),
        ("fz3drow", "FRACTAL_Z_3D", (wide // 16, 1, 16, 16), (16, wide // 64, 4, 4, 4), "16 rows"),
        ("fz3dblock", "FRACTAL_Z_3D", (1, wide // 16, 16, 16), (wide, 16, 1, 1, 1), "one D-H-W block"),
        ("cn", "C1HWNCoC0", (64, 3, 3, cn_n, 16, 16), (cn_n, 1024, 3, 3), "3x3 weight"),
        ("cnpix", "C1HWNCoC0", (1, 1, 1, elems // 256, 16, 16), (elems // 256, 16, 1, 1), "one pixel of N"),
        ("cnrow", "C1HWNCoC0", (elems // 256, 1, 1, 1, 16, 16), (1, elems // 16, 1, 1), "one row"),
    ]
    cases = weights if args.only_weights else cases + weights
    for op, fmt, dev, orig, _ in cases:
        _write(step, op, fmt, dev, orig)
    base = _child("import-only")["base_kb"]
    for op, fmt, _, orig, what in (() if args.only_new else cases):
        r = _child(str(step.parents[4]), op)
        mb = r["peak_kb"] / 1024
        count = f"{r['count']:,} elements" if r.get("count") is not None else f"stats failed, exit {r['code']}"
        common.emit(f"stats peak RSS, {args.gib:g} GiB {fmt} float16 {orig} ({what}; {count})",
                    round(mb), "MB", baseline=round(base / 1024), target="<= 600 MB",
                    met=mb <= 600 and r["code"] == 0)
    if not args.only_new:  # the tree compared with itself: both tensors of each pair streamed at once
        r = _child("compare", str(step.parents[4]))
        mb = r["peak_kb"] / 1024
        common.emit(f"compare with itself peak RSS, the {args.gib:g} GiB float16 tensors of the tree "
                    f"({r['count']} rows: {', '.join(r['shape'] or [])})", round(mb), "MB",
                    baseline=round(base / 1024), target="<= 1200 MB", met=mb <= 1200 and r["code"] == 0)
    if args.only_weights:
        return
    # the explorer's tensor pane: a slice of the 2 GiB NC1HWC0 tensor reads the slabs it covers
    for index in ("0, 5", "0, :, 7, 9"):
        r = _child("slice", str(step.parents[4]), "nc1hwc0", index)
        mb = r["peak_kb"] / 1024
        common.emit(f"tensor pane slice [{index}] peak RSS, {args.gib:g} GiB NC1HWC0 float16 "
                    f"({r['shape'][0]}, result {r['shape'][1:]})", round(mb), "MB", baseline=round(base / 1024),
                    target="<= 600 MB (bounded)", met=mb <= 600 and r["code"] == 0)
    # compare of a .pt tree with itself: both storages read off the zip a chunk at a time
    pt = _write_pt_tree(work / f"pt{args.pt_gib:g}", args.pt_gib)
    r = _child("compare", str(pt))
    mb = r["peak_kb"] / 1024
    common.emit(f"compare with itself peak RSS, msprobe tree with one {args.pt_gib:g} GiB float32 .pt "
                f"({r['count']} rows: {', '.join(r['shape'] or [])})", round(mb), "MB", baseline=round(base / 1024),
                target=f"bounded (<= 600 MB; whole loads: {2 * args.pt_gib * 1024:.0f} MB+)",
                met=mb <= 600 and r["code"] == 0)


if __name__ == "__main__":
    main()
