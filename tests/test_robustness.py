"""Robustness: bad input, growing trees and huge tensors never break the explorer or touch the data.

The fault corpus (``tests/synth/faults.py``) seeds a good CANN tree and a good MindSpore tree with
broken files; every guarantee here is checked against it through the real CLI (``main``), and a
few through a subprocess so nothing but our own one-line messages can reach stderr.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO
from dumpscope.core.formats.device_format import FORMAT_CODE_OF
from dumpscope.core.formats.dtypes import PROTO_CODE_OF
from dumpscope.core.formats import dump_data_pb2 as pb
from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.layouts import cann as cann_layout
from dumpscope.core.query import DumpQuery, open_query
from synth.cann_writer import SynthTensor, encode_dump, write_dump
from synth.faults import write_fault_corpus, write_good_trees
from dumpscope.tui.cli.entry import main

MODEL = ("20240613143502", "0", "ge_default_1", "1")


def digest(root) -> str:
    """Names (as bytes: some are not UTF-8), sizes, mtimes and modes of everything under root."""
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(os.fsencode(root)):
        dirs.sort()
        for name in sorted(files) + sorted(dirs):
            st = os.lstat(os.path.join(dirpath, name))
            h.update(b"%s/%s|%d|%d|%d\n" % (dirpath, name, st.st_size, st.st_mtime_ns, st.st_mode))
    return h.hexdigest()


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(root, expected) of the seeded corpus, plus the op keys of the same trees before seeding."""
    clean = tmp_path_factory.mktemp("clean")
    write_good_trees(clean)
    q = DumpQuery(DumpIndex.open(str(clean), use_cache=False))
    good = {_op_key(q.op_json(op), clean) for op in q.ops(kind="all")}
    q.index.close()
    root = tmp_path_factory.mktemp("corpus")
    expected = write_fault_corpus(root)
    return root, expected, good


def _op_key(op: dict, root) -> tuple:
    tensors = tuple(sorted((t["io"], t["slot"], t["dtype"], tuple(t["shape"]),
                            os.path.relpath(t["file"], root)) for t in op["tensors"]))
    return (op["rank"], op["step"], op["graph"], op["name"], op["type"], tensors)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    return code, out, err


def one_line_error(code: int, err: str) -> str:
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dumpscope: ") and "internal error" not in lines[0], lines[0]
    return lines[0]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("DUMPSCOPE_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "dumpscope", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


# -- the corpus: good ops stay, each bad file is one problem -----------------------------------


def test_corpus_still_lists_every_good_op(corpus, capsys):
    root, expected, good = corpus
    # the default step, with MindSpore's constants (in no step: listed with every step, step null)
    code, out, err = run(capsys, "ops", root, "--json", "--step", "0", "--kind", "all")
    assert code == 0, err
    ops = json.loads(out)["ops"]
    assert {op["step"] for op in ops} == {0, None}
    assert {op["kind"] for op in ops if op["step"] is None} == {"constant"}
    got = {_op_key(op, root) for op in ops}
    assert good <= got, sorted(good - got)[:3]
    # the only extra ops are the valid files with awkward names, each listed
    odd = {p for p, reason in expected.items() if reason == ""}
    extra_files = {os.path.relpath(t["file"], root) for op in ops if _op_key(op, root) not in good
                   for t in op["tensors"]}
    assert extra_files == odd
    # a bad file never contributes a tensor
    bad = {p for p, reason in expected.items() if reason}
    assert not {os.path.relpath(t["file"], root) for op in ops for t in op["tensors"]} & bad


def test_every_bad_file_is_named_once_with_a_one_line_reason(corpus, capsys):
    root, expected, _ = corpus
    code, out, err = run(capsys, "summary", root, "--json")
    assert code == 0, err
    problems = json.loads(out)["problems"]
    by_path: dict[str, list[str]] = {}
    for p in problems:
        by_path.setdefault(os.path.relpath(p["path"], root), []).append(p["error"])
    bad = {p: reason for p, reason in expected.items() if reason}
    assert set(by_path) == set(bad), (set(by_path) ^ set(bad))
    for path, reasons in by_path.items():
        assert len(reasons) == 1, (path, reasons)
        reason = reasons[0]
        assert reason.strip() and "\n" not in reason and "\r" not in reason, (path, reason)
        assert bad[path].lower() in reason.lower(), (path, reason)
        assert "Traceback" not in reason
    # human output too: one "!" line per problem
    code, out, err = run(capsys, "summary", root)
    assert code == 0, err
    assert sum(1 for line in out.splitlines() if line.startswith("  ! ")) == len(problems)


def test_commands_on_the_corpus_never_print_a_traceback(corpus, capsys, tmp_path):
    root, _, _ = corpus
    before = digest(root)
    for args in (("ops", root, "--csv"), ("ops", root), ("overflow", root, "--json"), ("overflow", root, "--scan", "all"),
                 ("watch", root, "--json"), ("show", root, "resnet/conv1/Conv2D", "--json"),
                 ("stats", root, "resnet/relu1/Relu", "--json"), ("compare", root, root, "--json")):
        code, out, err = run(capsys, *args)
        assert code == 0, (args, err)
    code, out, err = run(capsys, "convert", root, tmp_path / "out")
    assert code == 0, err
    assert out.startswith("wrote ")
    assert digest(root) == before


def test_subprocess_stderr_holds_only_our_lines(corpus, tmp_path):
    root, expected, _ = corpus
    res = cli("summary", root, "--json", "--no-cache")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert json.loads(res.stdout)["problems"]
    res = cli("stats", root, "resnet/fault_still_writing", "--no-cache")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("dumpscope: ")
    res = cli("ops", tmp_path / "missing", "--json")
    assert res.returncode == 1 and res.stdout == "" and len(res.stderr.strip().splitlines()) == 1


# -- ops whose files go bad after indexing -------------------------------------------------------


def _small_cann(root: Path) -> Path:
    d = root.joinpath(*MODEL, "0")
    x = np.arange(6 * 1024, dtype=np.float32).reshape(6, 1024)
    write_dump(d, "Relu", "net/a/Relu", 1, 2, 1700000000000001, inputs=[SynthTensor(x, "float32")],
               outputs=[SynthTensor(x, "float32")])
    write_dump(d, "Conv2D", "net/b/Conv2D", 2, 2, 1700000000000002,
               inputs=[SynthTensor(x.reshape(1, 6, 32, 32), "float16", "NC1HWC0")],
               outputs=[SynthTensor(x.reshape(1, 6, 32, 32), "float16", "NC1HWC0")])
    return d


def _ms_npy(d: Path, name: str, arr: np.ndarray, ts: int) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"Add.Default_{name}-op0.0.0.{ts}.output.0.DefaultFormat.Float32.npy"
    np.save(p, arr)
    return p


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage", "delete"])
def test_stats_and_show_on_an_op_whose_file_went_bad_exit_1_with_one_line(tmp_path, capsys, damage):
    tree = tmp_path / "tree"
    d = _small_cann(tree)
    code, out, err = run(capsys, "ops", tree, "--json")  # indexed into the cache
    assert code == 0 and len(json.loads(out)["ops"]) == 2
    for f in d.iterdir():
        if damage == "truncate":
            os.truncate(f, f.stat().st_size // 2)
        elif damage == "empty":
            os.truncate(f, 0)
        elif damage == "garbage":
            f.write_bytes(b"\xff" * f.stat().st_size)
        else:
            f.unlink()
    for op in ("net/a/Relu", "net/b/Conv2D"):
        code, out, err = run(capsys, "stats", tree, op, "--json")
        if code == 0:  # the index was refreshed first and the op is gone: that is fine too
            pytest.fail(f"stats on a damaged file succeeded: {out[:200]}")
        line = one_line_error(code, err)
        assert out == ""
        assert "Relu" in line or "Conv2D" in line or "net/" in line


def test_stats_and_show_of_a_bad_files_op_exit_1_with_one_line(corpus, capsys):
    root, _, _ = corpus
    for cmd in ("stats", "show"):
        for op in ("fault_still_writing", "fault_bad_protobuf", "Default/fault_object-op0",
                   "Default/fault_truncated-op0"):
            code, out, err = run(capsys, cmd, root, op)
            line = one_line_error(code, err)
            assert out == "" and op.split("/")[-1] in line


def test_stats_on_npy_that_became_an_object_array_refuses_without_unpickling(tmp_path, capsys, monkeypatch):
    d = tmp_path / "rank_0" / "Net" / "0" / "0"
    p = _ms_npy(d, "obj", np.arange(4, dtype=np.float32), 1718262903001118)
    code, _, err = run(capsys, "ops", tmp_path, "--json")
    assert code == 0, err
    np.save(p, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)  # the user's file, not ours
    calls = []
    real_load = np.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("allow_pickle", False))
        assert kwargs.get("allow_pickle", False) is False
        return real_load(*args, **kwargs)

    monkeypatch.setattr(np, "load", spy)
    for cmd in (("stats", tmp_path, "Default/obj-op0"),):
        code, out, err = run(capsys, *cmd)
        line = one_line_error(code, err)
        # the file changed in place since it was indexed: it is read again (core.freshness) and is now
        # a named problem, so the op is gone; either way nothing is unpickled
        assert "object" in line or "pickle" in line or "no op named 'Default/obj-op0'" in line
    code, out, err = run(capsys, "summary", tmp_path, "--json")
    assert [(p["path"], "pickle" in p["error"]) for p in json.loads(out)["problems"]] == [(str(p), True)]
    assert all(c is False for c in calls)
    code, out, err = run(capsys, "convert", tmp_path, tmp_path.parent / (tmp_path.name + "-out"))
    assert code == 0 and ("1 failed" in out or "wrote 0 tensors" in out)


# -- read-only, missing paths, OUTDIR containment ------------------------------------------------


def test_missing_path_exits_1_with_one_line_for_every_command(tmp_path, capsys):
    missing = tmp_path / "no" / "such"
    for args in (("summary", missing), ("ops", missing), ("show", missing, "x"), ("stats", missing, "x"),
                 ("convert", missing, tmp_path / "out"), ("overflow", missing), ("watch", missing),
                 ("compare", missing, tmp_path), ("compare", tmp_path, missing), (missing,)):
        code, out, err = run(capsys, *args)
        line = one_line_error(code, err)
        assert "such" in line and out == ""
    assert not (tmp_path / "out").exists()


def _raw_dump(op_name: str, ts: int) -> bytes:
    x = np.arange(6, dtype=np.float32)
    return encode_dump(op_name, [SynthTensor(x, "float32")], [SynthTensor(x + 1, "float32")], ts)


def test_convert_never_writes_outside_outdir_whatever_the_names(tmp_path, capsys):
    tree = tmp_path / "work" / "tree"
    d = tree.joinpath(*MODEL, "0")
    d.mkdir(parents=True)
    evil_names = ["../../../../../escaped", "/abs/escaped", "..", ".", "a/../../b", "\\..\\..\\win", "x\x00y"]
    ts = 1700000000000001
    for i, name in enumerate(evil_names):
        (d / f"Relu.op{i}.{i + 1}.2.{ts + i}").write_bytes(_raw_dump(name, ts + i))
    # file-name fields that are path-like after splitting on '.' and a mapping.csv pointing outside
    (d / f"Relu.__.20.2.{ts + 20}").write_bytes(_raw_dump("../up", ts + 20))
    (d / "111").write_bytes(_raw_dump("aliased", ts + 30))
    (d / "222").write_bytes(_raw_dump("aliased2", ts + 31))
    (d / "333").write_bytes(_raw_dump("aliased3", ts + 32))
    (d / "mapping.csv").write_text(f"111,../../../../../../tmp_escape/Relu.x.30.2.{ts + 30}\n"
                                   f"222,/etc/Relu.y.31.2.{ts + 31}\n"
                                   f"333,..\\..\\Relu.z.32.2.{ts + 32}\n")
    outside_before = {p for p in (tmp_path).rglob("*")}
    before = digest(tree)
    out = tmp_path / "work" / "out"
    code, stdout, err = run(capsys, "convert", tree, out)
    assert code == 0, err
    assert digest(tree) == before
    written = [p for p in tmp_path.rglob("*") if p not in outside_before]
    assert written, "nothing converted"
    for p in written:
        assert p.resolve().is_relative_to(out.resolve()), p
    npys = [p for p in out.rglob("*.npy")]
    assert len(npys) == 2 * (len(evil_names) + 3)
    q = open_query(str(tree))  # the alias whose mapping is no dump name is a problem, not an op
    assert [p["path"] for p in q.problems()] == [str(d / "333")]
    for p in npys:
        assert np.load(p, allow_pickle=False).shape == (6,)
    assert not Path("/abs").exists() and not Path("/tmp_escape").exists()


def test_no_unpickling_anywhere_in_the_source():
    """No pickle/torch loaders, and every np.load passes allow_pickle=False (checked on the AST)."""
    banned_modules = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "torch", "shelve", "marshal"}
    bad: list[str] = []
    files = [p for sub in ("core", "tui") for p in (REPO / sub).rglob("*.py")]
    assert len(files) > 20
    for path in files:
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(REPO)
        if "allow_pickle=True" in text.replace(" ", "") and "synth" not in rel.parts:
            bad.append(f"{rel}: allow_pickle=True")
        tree = ast.parse(text, str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                bad += [f"{rel}:{node.lineno}: import {a.name}" for a in node.names
                        if a.name.split(".")[0] in banned_modules]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in banned_modules:
                bad.append(f"{rel}:{node.lineno}: from {node.module} import")
            elif isinstance(node, ast.Call):
                f = node.func
                dotted = ast.unparse(f)
                if dotted.split(".")[0] in banned_modules and dotted.rsplit(".", 1)[-1] in ("load", "loads",
                                                                                           "Unpickler"):
                    bad.append(f"{rel}:{node.lineno}: {dotted}()")
                if dotted in ("eval", "exec"):
                    bad.append(f"{rel}:{node.lineno}: {dotted}()")
                for kw in node.keywords:
                    if kw.arg == "allow_pickle" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                        if "synth" not in rel.parts:
                            bad.append(f"{rel}:{node.lineno}: allow_pickle={ast.unparse(kw.value)}")
                if dotted in ("np.load", "numpy.load") and "synth" not in rel.parts and not any(
                        kw.arg == "allow_pickle" for kw in node.keywords):
                    bad.append(f"{rel}:{node.lineno}: np.load without allow_pickle=False")
    assert not bad, bad


# -- huge tensors: bounded memory --------------------------------------------------------------

_RSS_PROBE = textwrap.dedent("""
    import json, resource, sys
    from dumpscope.tui.cli.entry import main
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    import io, contextlib
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["stats", sys.argv[1], sys.argv[2], "--json", "--no-cache"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"code": code, "grow_kb": peak - base, "stats": json.loads(buf.getvalue()) if code == 0 else None}))
""")

BIG_ELEMS = 268_435_456  # float64: 2 GiB of payload


def _sparse_ok(folder: Path, size: int) -> bool:
    try:
        if shutil.disk_usage(folder).free < 1 << 30:
            return False
        probe = folder / "sparse-probe"
        with open(probe, "wb") as fh:
            fh.truncate(size)
        ok = probe.stat().st_blocks * 512 < (64 << 20)
        probe.unlink()
        return ok
    except OSError:
        return False


def _big_cann(d: Path) -> Path:
    msg = pb.DumpData()
    msg.version, msg.dump_time, msg.op_name = "2.0", 1, "big/Relu"
    o = msg.output.add()
    o.data_type, o.format = PROTO_CODE_OF["float64"], FORMAT_CODE_OF["ND"]
    o.shape.dim.extend([BIG_ELEMS])
    o.original_shape.dim.extend([BIG_ELEMS])
    o.size = 8 * BIG_ELEMS
    h = msg.SerializeToString()
    d.mkdir(parents=True, exist_ok=True)
    p = d / "Relu.big_Relu.1.2.1700000000000001"
    with open(p, "wb") as fh:
        fh.write(len(h).to_bytes(8, "little") + h)
        fh.truncate(8 + len(h) + 8 * BIG_ELEMS)  # a hole: costs no disk
    return p


def _big_npy(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / "Relu.Default_big-op0.0.0.1718262903001118.output.0.DefaultFormat.Float64.npy"
    hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d,), }" % BIG_ELEMS
    hdr += " " * ((-(len(hdr) + 11)) % 64) + "\n"
    with open(p, "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode())
        fh.truncate(10 + len(hdr) + 8 * BIG_ELEMS)
    return p


def test_stats_of_multi_gb_tensors_stays_in_bounded_memory(tmp_path):
    """A 2 GiB CANN payload and a 2 GiB .npy (sparse files), each in its own process, at once."""
    if not _sparse_ok(tmp_path, 8 * BIG_ELEMS):
        pytest.skip("no sparse files or too little space here")
    _big_cann(tmp_path.joinpath("cann", *MODEL, "0"))
    _big_npy(tmp_path / "npy" / "rank_0" / "Net" / "0" / "0")
    procs = [subprocess.Popen([sys.executable, "-c", _RSS_PROBE, str(tmp_path / tree), op], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for tree, op in (("cann", "big/Relu"), ("npy", "Default/big-op0"))]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
        doc = json.loads(out.strip().splitlines()[-1])
        assert doc["code"] == 0
        assert doc["stats"]["count"] == BIG_ELEMS and doc["stats"]["zeros"] == BIG_ELEMS
        assert doc["stats"]["dtype"] == "float64"
        assert doc["grow_kb"] < 200 * 1024, f"peak RSS grew by {doc['grow_kb'] / 1024:.0f} MB"


# -- growing trees -------------------------------------------------------------------------------


def test_file_growing_while_it_is_indexed_gives_one_consistent_answer(tmp_path, monkeypatch):
    d = tmp_path.joinpath(*MODEL, "0")
    d.mkdir(parents=True)
    full = _raw_dump("net/grow", 1700000000000001)
    p = d / "Relu.net_grow.1.2.1700000000000001"
    p.write_bytes(full[:20])  # listed while only a few header bytes exist
    real = cann_layout.read_prefix_header
    grown = []

    def read_header_after_growth(path, *a, **kw):
        if os.fspath(path) == str(p) and not grown:
            with open(p, "ab") as fh:  # the writer finishes between listing and reading
                fh.write(full[20:])
            grown.append(True)
        return real(path, *a, **kw)

    monkeypatch.setattr(cann_layout, "read_prefix_header", read_header_after_growth)
    q = DumpQuery(DumpIndex.open(str(tmp_path), use_cache=False))
    assert grown
    ops = q.ops()
    assert [o.name for o in ops] == ["net/grow"]
    assert sorted((t.io, t.slot) for t in q.tensors(ops[0].id)) == [("input", 0), ("output", 0)]
    assert q.problems() == []
    assert q.tensor_stats(q.tensors(ops[0].id)[1])["count"] == 6


@pytest.mark.parametrize("cut", [0, 5, 30, "payload"])
def test_a_half_written_file_becomes_an_op_once_complete(tmp_path, cut):
    """A file listed while still being written is a problem; completed, ``update()`` makes it an op.

    Appending to a file changes neither its folder's mtime nor its entry count, so the index
    must look again at folders holding files it could not read.
    """
    d = _small_cann(tmp_path)
    full = _raw_dump("net/grow", 1700000000000009)
    p = d / "Relu.net_grow.9.2.1700000000000009"
    n = len(full) - 10 if cut == "payload" else cut
    p.write_bytes(full[:n])
    q = DumpQuery(DumpIndex.open(str(tmp_path), use_cache=False))
    assert [pr["path"] for pr in q.problems()] == [str(p)]
    assert "net/grow" not in {o.name for o in q.ops()} or cut == "payload"
    with open(p, "ab") as fh:
        fh.write(full[n:])
    q.index.update()
    assert q.problems() == []
    grow = [o for o in q.ops() if o.name == "net/grow"]
    assert len(grow) == 1
    assert sorted((t.io, t.slot) for t in q.tensors(grow[0].id)) == [("input", 0), ("output", 0)]


def test_new_step_folders_are_picked_up_incrementally(tmp_path):
    model = tmp_path.joinpath(*MODEL)
    x = np.ones((2, 3), np.float32)
    write_dump(model / "0", "Relu", "net/relu", 1, 2, 1700000000000001, [SynthTensor(x, "float32")],
               [SynthTensor(x, "float32")])
    q = open_query(str(tmp_path))
    assert q.steps() == [0]
    for step in (1, 2):
        write_dump(model / str(step), "Relu", "net/relu", 1, 2, 1700000000000001 + step * 1000,
                   [SynthTensor(x * step, "float32")], [SynthTensor(x * step, "float32")])
        write_dump(model / str(step), "Exp", "net/exp", 2, 2, 1700000000000002 + step * 1000,
                   [SynthTensor(x, "float32")], [SynthTensor(np.exp(x), "float32")])
        prog = q.index.update()
        assert prog.changed_dirs == 2  # the new step folder and its parent, nothing else re-read
        assert q.steps() == list(range(step + 1))
        assert q.count_ops(0, step) == 2 and q.count_ops(0, 0) == 1
    assert q.index.update().changed_dirs == 0
    # a cached reopen sees the same
    q2 = open_query(str(tmp_path))
    assert q2.steps() == [0, 1, 2] and q2.index.update().changed_dirs == 0


def test_a_new_bad_file_between_updates_is_a_problem_and_good_ops_stay(tmp_path):
    d = _small_cann(tmp_path)
    q = open_query(str(tmp_path))
    assert q.count_ops() == 2
    (d / "Relu.net_late.7.2.1700000000000007").write_bytes(b"\x00" * 3)
    q.index.update()
    assert q.count_ops() == 2
    assert [pr["path"] for pr in q.problems()] == [str(d / "Relu.net_late.7.2.1700000000000007")]
    # a bad file that stays as it is costs nothing on the next update
    assert q.index.update().changed_dirs == 0


# -- a half-readable graph must not hide the good one ----------------------------------------------


def test_partial_ge_graph_is_a_problem_and_the_good_graph_still_joins(tmp_path, capsys):
    """A truncated GE graph text that names the model parses partially (the parser is tolerant);
    it must be reported, and a complete graph of the same model must win."""
    from synth.trees import TF_MODEL, write_cann_tree

    write_cann_tree(tmp_path, steps=(0,))
    good = (tmp_path / "ge_proto_00000123_graph_1_Build.txt").read_text()
    broken = tmp_path / "ge_proto_00000002_graph_1_Build.txt"
    broken.write_text(good[: len(good) // 3])
    assert TF_MODEL in broken.read_text()
    q = DumpQuery(DumpIndex.open(str(tmp_path), use_cache=False))
    probs = [p for p in q.problems() if p["path"] == str(broken)]
    assert len(probs) == 1 and "\n" not in probs[0]["error"]
    code, out, err = run(capsys, "show", tmp_path, "resnet/conv1/BiasAdd", "--json", "--no-cache")
    assert code == 0, err
    assert "resnet/conv1/Conv2D:0" in json.loads(out)["op"]["inputs_from"]
