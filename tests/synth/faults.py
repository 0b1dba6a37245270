"""A corpus of bad input for robustness tests: good dump trees seeded with broken files.

:func:`write_good_trees` writes a small CANN model tree (``cann/``, with its GE graph) and a
MindSpore 2.x npy tree (``ms/``, with ``graphs/*.ir``) below ``root``; :func:`seed_faults`
adds the broken files; :func:`write_fault_corpus` does both.  Everything is deterministic and
written only below ``root``.

The returned mapping is ``{path relative to root: expected reason}``:

* a non-empty value: the path must appear exactly once under ``problems`` and its one-line
  reason must contain this text (case-insensitive);
* ``""``: a *valid* dump file with an awkward name (spaces, unicode, ``%'"``, 250 bytes) that
  must NOT be a problem and must be listed as an op.

The good ops of the seeded tree are exactly the ops of ``write_good_trees`` on a clean folder
plus the awkward-name files.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np

from dumpscope.core.formats.stats_csv import CANN_HEADER
from synth.cann_writer import SynthTensor, encode_dump, write_dump
from synth.opdebug_writer import encode_opdebug_file
from synth.trees import TF_MODEL, TF_TIME, write_cann_tree, write_mindspore_tree

PathLike = Union[str, "os.PathLike[str]"]

#: the CANN step folder (relative to root) that gets the CANN faults
CANN_STEP = Path("cann") / TF_TIME / "0" / TF_MODEL / "1" / "0"
#: the MindSpore step folder and graphs folder
MS_STEP = Path("ms") / "rank_0" / "Net" / "0" / "0"
MS_GRAPHS = Path("ms") / "rank_0" / "graphs"

TS0 = 1718260502900000  # timestamps of fault files (after every good op)


def write_good_trees(root: PathLike) -> Path:
    """The clean trees the corpus is seeded into: ``root/cann`` and ``root/ms``."""
    root = Path(root)
    write_cann_tree(root / "cann", steps=(0,))
    write_mindspore_tree(root / "ms", steps=(0,))
    return root


def _good_dump(op_name: str, ts: int) -> bytes:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return encode_dump(op_name, [SynthTensor(x, "float32", "ND")], [SynthTensor(x * 2, "float32", "ND")], ts)


def _npy_name(op: str, ts: int, io: str = "output") -> str:
    return f"Add.Default_{op}-op0.0.0.{ts}.{io}.0.DefaultFormat.Float32.npy"


def _npy_bytes(header: str, payload: bytes = b"", major: int = 1) -> bytes:
    head = header.encode("latin1")
    pad = (-(len(head) + 11)) % 64
    head = head + b" " * pad + b"\n"
    return b"\x93NUMPY" + bytes([major, 0]) + struct.pack("<H", len(head)) + head + payload


def seed_faults(root: PathLike) -> dict[str, str]:
    """Add the broken (and awkwardly named) files to the trees of :func:`write_good_trees`."""
    root = Path(root)
    rng = np.random.default_rng(1234)
    out: dict[str, str] = {}
    cann = root / CANN_STEP
    ms = root / MS_STEP
    graphs = root / MS_GRAPHS
    cann.mkdir(parents=True, exist_ok=True)

    def put(rel: Path, data: bytes, reason: str) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        out[rel.as_posix()] = reason

    ts = TS0
    good = _good_dump("fault/template", ts)

    # -- CANN binary dump files ---------------------------------------------------------------
    def cname(tag: str) -> str:
        nonlocal ts
        ts += 17
        return f"Relu.fault_{tag}.{900 + len(out)}.2.{ts}"

    put(CANN_STEP / cname("empty"), b"", "too short")
    put(CANN_STEP / cname("seven_bytes"), b"\x01\x02\x03\x04\x05\x06\x07", "too short")
    put(CANN_STEP / cname("header_2pow63"), (1 << 63).to_bytes(8, "little") + good[8:], "header length")
    put(CANN_STEP / cname("header_max"), (2 ** 64 - 1).to_bytes(8, "little") + good[8:], "header length")
    h = int.from_bytes(good[:8], "little")
    put(CANN_STEP / cname("cut_in_header"), good[: 8 + h // 2], "header length")
    # every payload past EOF: a file still being written (header complete, no data yet)
    put(CANN_STEP / cname("still_writing"), good[: 8 + h + 5], "still being written")
    # random bytes: the first 8 give an absurd header length
    put(CANN_STEP / cname("random"), rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(), "header length")
    # a plausible header length followed by bytes that are no protobuf
    junk = b"\xff" * 40
    put(CANN_STEP / cname("bad_protobuf"), len(junk).to_bytes(8, "little") + junk + b"\0" * 64,
        "not a valid DumpData protobuf")
    # nano / TLV container magic
    put(CANN_STEP / cname("nano"), (16).to_bytes(8, "little") + b"\x5a\x5a\x5a\x5a" + b"\0" * 60, "nano")

    # Opdebug status files
    ts += 17
    put(CANN_STEP / f"Opdebug.Node_OpDebug.990.2.{ts}", rng.integers(0, 256, 512, dtype=np.uint8).tobytes(),
        "header length")
    ts += 17
    put(CANN_STEP / f"Opdebug.Node_OpDebug.991.2.{ts}",
        encode_opdebug_file(b"\x01\x00\x00\x00" + rng.integers(0, 256, 300, dtype=np.uint8).tobytes()),
        "expected 2048")
    ts += 17
    put(CANN_STEP / f"Opdebug.Node_OpDebug.992.2.{ts}",
        encode_opdebug_file(b"\x5a\x5a\x5a\x5a" + b"\x07" * 12), "acc_list")

    # an all-digit alias with no mapping.csv entry
    put(CANN_STEP / "77777777777777777", good, "mapping.csv")
    # mapping.csv of the good tree gains garbage lines (the good alias must still resolve)
    mapping = root / CANN_STEP / "mapping.csv"
    text = mapping.read_text() if mapping.exists() else ""
    mapping.write_text("garbage without comma\n" + text + ",,,\n\x00\x01binary\n;;;;\n")
    out[(CANN_STEP / "mapping.csv").as_posix()] = "expected 'alias,original_name'"

    # malformed statistics CSVs (per-op CANN stats names)
    put(CANN_STEP / (cname("csv_missing_columns") + ".csv"), b"Foo,Bar,Baz\n1,2,3\n", "not a stats CSV header")
    row_bad = "input,zero,abc,DT_FLOAT,ND,2x3,x,y,z,many,?,?,?"
    put(CANN_STEP / (cname("csv_wrong_types") + ".csv"), (CANN_HEADER + "\n" + row_bad + "\n" + row_bad + "\n")
        .encode(), "bad slot")
    put(CANN_STEP / (cname("csv_garbage") + ".csv"), rng.integers(0, 256, 700, dtype=np.uint8).tobytes(),
        "stats CSV")
    put(CANN_STEP / (cname("csv_empty") + ".csv"), b"", "empty")

    # a broken GE graph whose graph name matches the model folder (tried before the good one)
    put(Path("cann") / "ge_proto_00000001_graph_1_Build.txt",
        (f'graph {{\n  name: "{TF_MODEL}"\n  op {{\n    name: "x"\n    type: \x00\x01 broken {{{{{{\n').encode(),
        "not a protobuf text graph")

    # awkward but valid names: these are ops, not problems
    odd = [
        ("Add.odd name with spaces.930.2.{ts}", "odd name with spaces"),
        ("Add.ünïcødé_名前_op.931.2.{ts}", "ünïcødé/名前/op"),
        ("Add.pct%s%d%n_quote'_dq\"_op.932.2.{ts}", "pct%s%d%n/quote'/dq\"/op"),
    ]
    for pattern, op_name in odd:
        ts += 17
        fname = pattern.format(ts=ts)
        (root / CANN_STEP / fname).write_bytes(_good_dump(op_name, ts))
        out[(CANN_STEP / fname).as_posix()] = ""
    ts += 17
    long_op = "L" * (250 - len(f"Add..933.2.{ts}"))
    fname = f"Add.{long_op}.933.2.{ts}"
    assert len(fname.encode()) == 250
    (root / CANN_STEP / fname).write_bytes(_good_dump("long/" + long_op, ts))
    out[(CANN_STEP / fname).as_posix()] = ""

    # a symlink loop (a folder pointing at its ancestor)
    loop = root / "cann" / TF_TIME / "0" / "loop"
    try:
        os.symlink(root / "cann" / TF_TIME, loop)
        out[loop.relative_to(root).as_posix()] = "symlink loop"
    except (OSError, NotImplementedError):
        pass

    # -- MindSpore npy ------------------------------------------------------------------------
    ms.mkdir(parents=True, exist_ok=True)
    mts = 1718262903900000

    def mname(tag: str) -> str:
        nonlocal mts
        mts += 13
        return _npy_name(f"fault_{tag}", mts)

    put(MS_STEP / mname("empty"), b"", "bad magic")
    put(MS_STEP / mname("bad_magic"), b"NOTNUMPY" + b"\0" * 120, "bad magic")
    put(MS_STEP / mname("bad_dict"), _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,"),
        "header")
    put(MS_STEP / mname("code_in_header"),
        _npy_bytes("{'descr': __import__('os').system('true'), 'fortran_order': False, 'shape': ()}"), "header")
    put(MS_STEP / mname("neg_shape"), _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3)}"),
        "shape")
    put(MS_STEP / mname("bad_dtype"), _npy_bytes("{'descr': '<q9', 'fortran_order': False, 'shape': (3,)}"),
        "dtype")
    put(MS_STEP / mname("version_9"), _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
                                                 major=9), "version")
    put(MS_STEP / mname("huge_hlen"), b"\x93NUMPY\x02\x00" + struct.pack("<I", 2 ** 31) + b"{" * 64, "too large")
    put(MS_STEP / mname("object"), _npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (2,)}",
                                              b"\x80\x04N." * 4), "object")
    put(MS_STEP / mname("object_struct"),
        _npy_bytes("{'descr': [('a', '<f4'), ('b', '|O')], 'fortran_order': False, 'shape': (2,)}", b"\0" * 32),
        "object")
    put(MS_STEP / mname("truncated"), _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (100, 100)}",
                                                 b"\0" * 1000), "truncated")
    # a header numpy itself refuses (an extra key), and a valid 0-d tensor (a scalar stays a scalar)
    put(MS_STEP / mname("extra_key"),
        _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'evil': 1}", b"\0" * 8),
        "unexpected key")
    put(MS_STEP / mname("scalar_0d"), _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
                                                 b"\0\0\x60\x40"), "")
    # a broken .ir for graph 0 that sorts before the good one
    put(MS_GRAPHS / "kernel_graph_0.ir", b"\x00\xff garbage %1 = (((( \n" * 3 + bytes(range(256)), "not a MindSpore")
    put(MS_GRAPHS / "hwopt_graph_0.ir", b"# IR entry\n%1 = ((((\n}}}}\nsubgraph @@@\n", "no MindSpore IR nodes")

    # names that are not valid UTF-8 (a file, and a folder holding a valid dump)
    try:
        bad_file = os.path.join(os.fsencode(root / CANN_STEP), b"Relu.net_\xff\xfe_latin1.940.2.%d" % (ts + 1))
        with open(bad_file, "wb") as fh:
            fh.write(good)
        out[(CANN_STEP / "Relu.net_\\xff\\xfe_latin1.940.2.{}".format(ts + 1)).as_posix()] = "not valid UTF-8"
        bad_dir = os.path.join(os.fsencode(root / "ms" / "rank_0" / "Net" / "0"), b"7\xe9")
        os.mkdir(bad_dir)
        with open(os.path.join(bad_dir, os.fsencode(_npy_name("in_bad_dir", mts + 1))), "wb") as fh:
            fh.write(_npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", b"\0" * 8))
        out[(Path("ms") / "rank_0" / "Net" / "0" / "7\\xe9").as_posix()] = "not valid UTF-8"
    except (OSError, UnicodeError):  # a filesystem that insists on UTF-8 names
        pass
    return out


#: op names that attack a terminal or a markup parser: OSC 52 (clipboard), a screen clear, an OSC 8
#: hyperlink, a window title, rich markup that raises (``[/bold]``) or restyles (``[bold red]x[/]``),
#: a one-byte C1 CSI, a bidi override and a newline that forges an output line.
HOSTILE_NAMES = (
    "clip\x1b]52;c;aGFja2Vk\x07[/bold]op",
    "[bold red]x[/]\x1b[2J\x1b[Hcls",
    "link\x1b]8;;http://evil.example/\x1b\\here\x1b]8;;\x1b\\[link=http://evil.example/]L[/link]",
    "title\x1b]0;pwned\x07\x9b31m\u202egnp.exe\nproblems: none\u200b\u200c\u200d\u2060\ufeffzw",
)
#: an op type (file-name field) that is hostile too
HOSTILE_TYPE = "Ty\x1b[31mpe[red]"
#: a file with a hostile name that is not a dump (a named problem)
HOSTILE_BAD_FILE = "Relu.bad\x1b]52;c;eA==\x07[red]x[_red].1.2.1718260509999999"


def write_hostile_tree(root: PathLike) -> Path:
    """A small CANN step folder whose names attack the terminal (:data:`HOSTILE_NAMES`).

    Op 1 has a NaN and an Inf (``overflow`` finds it by scanning); op 3 watches op 2 (a Dump-Watch
    snapshot ``{layer}_To_{watched}`` that changed); one file with a hostile name is garbage (a
    problem ``summary`` lists).  Returns the step folder.
    """
    step = Path(root) / CANN_STEP
    n0, n1, n2, n3 = HOSTILE_NAMES
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    bad = x.copy()
    bad[0, 0, 0], bad[1, 2, 3] = np.nan, np.inf
    t = lambda a: [SynthTensor(a, "float32", "ND")]  # noqa: E731
    ts = TS0
    write_dump(step, HOSTILE_TYPE, n0, 10, 2, ts, inputs=t(x), outputs=t(x + 1))
    write_dump(step, "Mul", n1, 11, 2, ts + 10, inputs=t(x + 1), outputs=t(bad))
    write_dump(step, "Softmax", n2, 12, 2, ts + 20, outputs=t(x))
    write_dump(step, "Gelu", n3, 13, 2, ts + 30, outputs=t(x * 3))
    changed = x.copy()
    changed[0, 0, :2] = -1
    write_dump(step, "Softmax", f"{n3}_To_{n2}", 13, 2, ts + 31, outputs=t(changed))
    (step / HOSTILE_BAD_FILE).write_bytes(b"\x01\x02\x03")
    return step


# -- msprobe dump.json at scale and malformed (issue 20: streamed, capped per entry) ---------------

def _msprobe_tensor(rng: "np.random.Generator", shape: list[int], requires_grad: bool) -> dict:
    v = rng.standard_normal(4)
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": float(v.max()),
            "Min": float(v.min()), "Mean": float(v.mean()), "Norm": float(abs(v).sum()),
            "requires_grad": requires_grad}


def msprobe_entries(n: int, seed: int = 7):
    """``n`` (name, entry) pairs as msprobe 26 writes them in a ``mix`` statistics dump: Functional
    and Tensor API calls inside Linear modules, each module's ``parameters_grad`` written just before
    its ``backward`` (as the real tool orders them)."""
    rng = np.random.default_rng(seed)
    k = 0
    while k < n:
        m = k // 6
        i = 2 + m % 5
        x = _msprobe_tensor(rng, [i, 64], False)
        w = _msprobe_tensor(rng, [128, 64], True)
        b = _msprobe_tensor(rng, [128], True)
        y = _msprobe_tensor(rng, [i, 128], True)
        group = [
            (f"Module.layers.{m}.Linear.forward.0", {"input_args": [x], "input_kwargs": {}, "output": [y]}),
            (f"Functional.linear.{m}.forward", {"input_args": [x, w, b], "input_kwargs": {}, "output": [y]}),
            (f"Tensor.add.{m}.forward", {"input_args": [y, {"type": "float", "value": 1.0}],
                                         "input_kwargs": {"alpha": {"type": "int", "value": 1}}, "output": [y]}),
            (f"Functional.linear.{m}.backward", {"input": [y], "output": [x, w, b]}),
            (f"Module.layers.{m}.Linear.parameters_grad.0", {"weight": [w], "bias": [b]}),
            (f"Module.layers.{m}.Linear.backward.0", {"input": [y], "output": [x]}),
        ]
        for name, entry in group[:n - k]:
            yield name, entry
        k += len(group)


def write_msprobe_json(path: PathLike, *, entries: int = 0, min_bytes: int = 0, indent: Optional[int] = 1,
                       head: Optional[dict] = None, extra_data: Sequence[tuple[str, str]] = ()) -> int:
    """Write an msprobe-style ``dump.json`` one entry at a time (the writer's own memory stays small).

    Entries come from :func:`msprobe_entries` until both ``entries`` and ``min_bytes`` are reached;
    ``extra_data`` adds raw ``(key, json text)`` members to ``data`` (malformed ones too).  Returns the
    number of entries written from :func:`msprobe_entries`.
    """
    head = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None} \
        if head is None else head
    sep = "\n" + " " * (indent or 0) if indent else ""
    written = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("{" + "".join(f"{sep}{json.dumps(k)}: {json.dumps(v)}," for k, v in head.items())
                 + f'{sep}"data": {{')
        first = True
        for key, text in extra_data:
            fh.write(("" if first else ",") + f"{sep}{json.dumps(key)}: {text}")
            first = False
        gen = msprobe_entries(1 << 62)
        while written < entries or fh.tell() < min_bytes:
            key, entry = next(gen)
            fh.write(("" if first else ",") + f"{sep}{json.dumps(key)}: "
                     + json.dumps(entry, indent=indent).replace("\n", sep if indent else ""))
            first = False
            written += 1
        fh.write(sep + "}" + ("\n" if indent else "") + "}\n")
    return written


# -- files changed in place after indexing (issue 20: change detection) ----------------------------

def rewrite_in_place(path: PathLike, data: bytes, keep_mtime: bool = True) -> None:
    """Overwrite ``path`` through its open file (same inode, the folder's mtime and entry count do
    not move) and, with ``keep_mtime``, put its old mtime back as ``cp -p`` or a careful tool would:
    only ctime still tells that it changed."""
    st = os.stat(path)
    with open(path, "r+b") as fh:
        fh.write(data)
        fh.truncate(len(data))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def write_fault_corpus(root: PathLike) -> dict[str, str]:
    """A good CANN tree and MindSpore tree below ``root``, seeded with every fault of :func:`seed_faults`."""
    write_good_trees(root)
    return seed_faults(root)


__all__ = ["CANN_STEP", "HOSTILE_BAD_FILE", "HOSTILE_NAMES", "HOSTILE_TYPE", "MS_GRAPHS", "MS_STEP", "msprobe_entries", "rewrite_in_place", "seed_faults",
           "write_fault_corpus", "write_good_trees", "write_hostile_tree", "write_msprobe_json"]
