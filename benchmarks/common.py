"""Shared helpers of the benchmarks: work dir, synthetic big trees, machine info, JSON results.

Trees are generated under the benchmark work dir (``--workdir``, default ``/tmp/dumpscope-bench``)
and reused between runs: a ``.complete`` marker is written last, so an interrupted generation is
redone.  Never point the work dir into the repository.

CANN tree (``cann_tree(workdir, n)``)::

    {workdir}/cann{n}/dump/20240101120000/0/ge_default_20240101120000_1/1/{step}/
        {type}.{scope_with_underscores}.{task}.{stream}.{16-digit ts}

≤ 5,000 files per step folder; each file is a real DumpData image (u64 header length, protobuf
header, payloads) of 2-8 KB.  One image is encoded per distinct (type, shape) with
``tests/synth/cann_writer.encode_dump``; each copy gets its own ``dump_time`` and ``op_name``
appended as protobuf fields (last field wins), so headers are valid and distinct.

MindSpore tree (``ms_tree(workdir, n_ops)``): ``{workdir}/ms{n}/dump/rank_0/Net/0/0/`` with one input
and one output ``.npy`` per op, named
``{type}.{name}.0.0.{ts}.{input|output}.{slot}.DefaultFormat.float32.npy`` (a few KB each), plus
the execution-order CSV.
"""

from __future__ import annotations

import io
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

DEFAULT_WORKDIR = os.path.join(os.environ.get("TMPDIR", "/tmp"), "dumpscope-bench")
REPO = Path(__file__).resolve().parent.parent
# the writers of synthetic dumps live with the tests (tests/synth), imported as ``synth``
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))
FILES_PER_FOLDER = 5000

_TYPES = ("Conv2D", "BNInferD", "Relu", "MatMulV2", "Add", "Mul", "Cast", "SoftmaxV2", "LayerNorm", "Gelu",
          "TransData", "BatchMatMul")
# (logical NCHW shape) -> fp16 NC1HWC0 payloads of 1-4 KB per tensor
_SHAPES = ((1, 16, 8, 8), (1, 32, 4, 8), (2, 16, 8, 8), (1, 64, 4, 4), (1, 16, 16, 8))


def check_workdir(workdir: str) -> Path:
    p = Path(workdir).resolve()
    if p == REPO or REPO in p.parents:
        raise SystemExit(f"refusing to write benchmark trees into the repository: {p}")
    p.mkdir(parents=True, exist_ok=True)
    return p


def _cann_templates(seed: int = 0, noisy: bool = False) -> list[tuple[str, tuple[bytes, bytes]]]:
    """One (type, header template) per op type.  ``noisy``: the same values with a quarter of the elements
    one float16 step away (another kernel's rounding), so no pair of a compare is bit-identical."""
    from synth.cann_writer import SynthTensor, header_template

    rng = np.random.default_rng(seed)
    out = []
    for i, op_type in enumerate(_TYPES):
        shape = _SHAPES[i % len(_SHAPES)]
        a = rng.standard_normal(shape).astype(np.float16)
        if noisy:
            step = np.where(np.arange(a.size).reshape(shape) % 4 == 1, np.float16(np.inf), -np.float16(np.inf))
            a = np.where(np.arange(a.size).reshape(shape) % 2 == 1, np.nextafter(a, step), a).astype(np.float16)
        out.append((op_type, header_template([SynthTensor(a, "float16", "NC1HWC0")],
                                             [SynthTensor(a, "float16", "NC1HWC0")])))
    return out


def write_cann_tree(dump: Path, n_files: int, per_folder: int = FILES_PER_FOLDER, log: bool = True,
                    noisy: bool = False, distinct: bool = False) -> Path:
    """``n_files`` CANN dump files under ``dump`` (see module doc; ``noisy``: ``_cann_templates``).  Returns
    ``dump``.  ``distinct``: every file's tensors hold two values of their own (``_distinct``), so no two
    files share a statistic, as a real job's tensors do not (the templates alone repeat a few hundred)."""
    from synth.cann_writer import file_name_of, stamp_dump

    templates = _cann_templates(noisy=noisy)
    model = dump / "20240101120000" / "0" / "ge_default_20240101120000_1" / "1"
    ts = 1704110400000000
    t0 = time.perf_counter()
    folder = model
    for i in range(n_files):
        step, k = divmod(i, per_folder)
        if k == 0:
            folder = model / str(step)
            folder.mkdir(parents=True, exist_ok=True)
            if log and step and step % 20 == 0:
                print(f"  generated {i:,} files ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
        op_type, template = templates[k % len(templates)]
        layer = k // len(templates)
        name = f"bert/encoder/layer_{layer // 12}/block_{layer % 12}/{op_type.lower()}_{k % 3}/{op_type}"
        ts += 37 + (k % 11)
        fname = f"{op_type}.{file_name_of(name)}.{k + 1}.{k % 4}.{ts:016d}"
        with open(folder / fname, "wb") as fh:
            fh.write(stamp_dump(_distinct(template, i) if distinct else template, name, ts))
    return dump


def _distinct(template: tuple[bytes, bytes], i: int) -> tuple[bytes, bytes]:
    """``template`` with the first two float16 elements of each of its two tensors (equal halves of the
    payload: one input, one output) set from ``i`` (a pair of values per file up to 262,144 files): the
    same elements on both sides of a compare, so a noisy side still differs by its noise only."""
    head, payload = template
    data = bytearray(payload)
    values = np.array([(i % 2048) / 256 - 4, (i // 2048) / 16 - 4], dtype=np.float16).tobytes()
    half = len(data) // 2
    for at in (0, half):
        data[at:at + 4] = values
    return head, bytes(data)


def npy_bytes(arr: np.ndarray) -> bytes:
    """``arr`` as the bytes of a .npy file."""
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def write_ms_tree(dump: Path, n_ops: int, per_scope: int = 100) -> Path:
    """``n_ops`` MindSpore kernels (one input + one output .npy each, 1-4 KB) + execution order."""
    rank = dump / "rank_0"
    folder = rank / "Net" / "0" / "0"
    folder.mkdir(parents=True, exist_ok=True)
    order = rank / "execution_order"
    order.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    payloads = [npy_bytes(rng.standard_normal(n).astype(np.float32)) for n in (256, 512, 1024)]
    types = ("MatMul", "Add", "ReLU", "Mul", "Cast", "Softmax", "LayerNorm", "Conv2D")
    names = []
    ts = 1718262902000000
    for k in range(n_ops):
        t = types[k % len(types)]
        name = f"Default/network-Net/layers-CellList/{k // per_scope}-Block/{t.lower()}-{t}/{t}-op{k}"
        names.append(name)
        fk = name.replace("/", "_")
        for io_kind in ("input", "output"):
            ts += 41
            with open(folder / f"{t}.{fk}.0.0.{ts:016d}.{io_kind}.0.DefaultFormat.float32.npy", "wb") as fh:
                fh.write(payloads[k % len(payloads)])
    (order / "ms_execution_order_graph_0.csv").write_text(
        "NodeExecutionOrder-FullNameWithScope\n" + "".join(n + "\n" for n in names))
    return dump


def _cached_tree(root: Path, what: str, write, n: int) -> Path:
    """``root/dump`` written by ``write(dump, n)`` once and reused; ``.complete`` marks a finished run."""
    dump = root / "dump"
    marker = root / ".complete"
    if not marker.exists():
        if dump.exists():
            import shutil
            shutil.rmtree(dump)
        t0 = time.perf_counter()
        write(dump, n)
        marker.write_text(json.dumps({"n": n, "seconds": time.perf_counter() - t0}))
        print(f"generated {what} of {n:,} in {time.perf_counter() - t0:.1f}s: {dump}", file=sys.stderr)
    return dump


def cann_tree(workdir: str, n_files: int) -> Path:
    """The (reused) CANN tree of ``n_files`` files under the work dir."""
    return _cached_tree(check_workdir(workdir) / f"cann{n_files}", "CANN tree, files", write_cann_tree, n_files)


def cann_place_tree(workdir: str, n_files: int) -> Path:
    """The (reused) CANN tree of ``n_files`` files in ONE step folder: a single place of 2 x ``n_files``
    tensor pairs for ``compare`` (one input and one output per file)."""
    return _cached_tree(check_workdir(workdir) / f"cannplace{n_files}", "one-place CANN tree, files",
                        lambda dump, n: write_cann_tree(dump, n, per_folder=n), n_files)


def ms_tree(workdir: str, n_ops: int) -> Path:
    """The (reused) MindSpore npy tree of ``n_ops`` kernels under the work dir."""
    return _cached_tree(check_workdir(workdir) / f"msnpy{n_ops}", "MindSpore tree, ops", write_ms_tree, n_ops)


# ------------------------------------------------------------------------------------------ results


def emit(metric: str, value: Any, unit: str = "", baseline: Any = None, ratio: Optional[float] = None,
         target: str = "", met: Optional[bool] = None, note: str = "") -> dict:
    """Print one result as a JSON line (prefixed ``RESULT ``) and return it."""
    rec = {"metric": metric, "value": value, "unit": unit, "baseline": baseline, "ratio": ratio,
           "target": target, "met": met, "note": note}
    print("RESULT " + json.dumps(rec), flush=True)
    return rec


def parse_results(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("RESULT "):
            try:
                out.append(json.loads(line[7:]))
            except ValueError:
                pass
    return out


def bytecode_env(workdir: str = DEFAULT_WORKDIR, env: Optional[dict] = None) -> dict:
    """``env`` (default: ours) with byte-code caching on, kept under the work dir (not the repo).

    An installed dumpscope has .pyc files; with ``PYTHONDONTWRITEBYTECODE=1`` (set on some dev
    machines and sandboxes) every fresh interpreter recompiles every module, which would be
    charged to start-up figures (warm reopen, summary, TUI first paint)."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(workdir) / "pycache"))
    return env


def fresh_cache_env(cache: Path) -> dict:
    env = bytecode_env(str(Path(cache).parent))
    env["DUMPSCOPE_CACHE_DIR"] = str(cache)
    return env


def drop_index(dump: Path, cache: Path) -> None:
    from dumpscope.core.index.cache import index_path

    p = index_path(str(dump), cache)
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(str(p) + suffix)
        except OSError:
            pass


def best_time(fn: Callable[[], Any], reps: int) -> float:
    """Best wall time of ``fn()`` over ``reps`` runs (best-of, to shed noise from other load)."""
    best = float("inf")
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def time_subprocess(code: str, env: Optional[dict] = None, reps: int = 5) -> float:
    """Best wall time of ``python -c code`` over ``reps`` runs."""
    return best_time(lambda: subprocess.run([sys.executable, "-c", code], check=True, env=env,
                                            stdout=subprocess.DEVNULL), reps)


# ------------------------------------------------------------------------------------------ machine


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    ram = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    try:
        aff = len(os.sched_getaffinity(0))
    except AttributeError:
        aff = os.cpu_count()
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": aff,
            "ram_gb": round(ram / 2**30, 1) if ram else None, "load_avg": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform()}


def print_machine() -> dict:
    info = machine_info()
    print("machine: " + json.dumps(info), flush=True)
    return info
