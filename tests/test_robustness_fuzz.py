"""Property tests of the integrated path: whatever one file of a tiny tree holds, indexing and the
CLI never raise, every other file's ops stay, and every problem is one line.

Per-module parser fuzzing lives beside each parser (test_cann_dump, test_stats_csv, test_graphs_*);
here the bytes go through walk → layouts → index → finalize → query → CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st

from dumpscope.core.formats.device_format import FORMAT_NAMES, DeviceFormatError, to_logical
from dumpscope.core.formats.cann_names import parse_dump_name, read_mapping_csv
from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.layouts.mindspore import parse_npy_name, read_exec_order, read_mapping
from dumpscope.core.layouts.paths import place_of
from dumpscope.core.query import DumpQuery
from synth.cann_writer import SynthTensor, write_dump
from synth.ge_graph_writer import write_ge_graph
from synth.stats_csv_writer import write_cann_stats_csv
from dumpscope.core.tensors.load import TensorLoadError
from dumpscope.tui.cli.entry import main

FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
INDEX_FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

MODEL = "ge_default_1"
STEP = Path("20240613143502") / "0" / MODEL / "1" / "0"
MS_STEP = Path("ms") / "rank_0" / "Net" / "0" / "0"

#: the files of the template tree that get fuzzed, by kind
TARGETS = {
    "cann_dump": STEP / "Relu.net_relu_Relu.2.2.1700000000000002",
    "cann_nc1hwc0": STEP / "Conv2D.net_conv_Conv2D.1.2.1700000000000001",
    "aliased_dump": STEP / "123456789",
    "mapping_csv": STEP / "mapping.csv",
    "stats_csv": STEP / "Exp.net_exp_Exp.3.2.1700000000000003.csv",
    "ge_graph": Path("ge_proto_00000001_graph_1_Build.txt"),
    "npy": MS_STEP / "Add.Default_Add-op0.0.0.1718262903001118.output.0.DefaultFormat.Float32.npy",
    "exec_order": Path("ms") / "rank_0" / "execution_order" / "ms_execution_order_graph_0.csv",
}


def _build_template(root: Path) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 5, 4, 4)).astype(np.float32)
    d = root / STEP
    write_dump(d, "Conv2D", "net/conv/Conv2D", 1, 2, 1700000000000001,
               inputs=[SynthTensor(x, "float16", "NC1HWC0")], outputs=[SynthTensor(x, "float16", "NC1HWC0")])
    write_dump(d, "Relu", "net/relu/Relu", 2, 2, 1700000000000002, inputs=[SynthTensor(x, "float32")],
               outputs=[SynthTensor(np.maximum(x, 0), "float32")])
    write_dump(d, "Mul", "net/long/Mul", 4, 2, 1700000000000004, inputs=[SynthTensor(x, "float32")],
               outputs=[SynthTensor(x * 2, "float32")], file_name="123456789")
    (d / "mapping.csv").write_text("123456789,Mul.net_long_Mul.4.2.1700000000000004\n")
    write_cann_stats_csv(d, "Exp", "net/exp/Exp", 3, 2, 1700000000000003, inputs=[x], outputs=[np.exp(x)])
    ops = [{"name": "net/conv/Conv2D", "type": "Conv2D", "inputs": []},
           {"name": "net/relu/Relu", "type": "Relu", "inputs": ["net/conv/Conv2D:0"]}]
    write_ge_graph(root, MODEL, ops, index=1, graph_id=1)
    m = root / MS_STEP
    m.mkdir(parents=True)
    np.save(m / TARGETS["npy"].name, np.arange(6, dtype=np.float32).reshape(2, 3))
    np.save(m / "Exp.Default_Exp-op0.0.0.1718262903001119.output.0.DefaultFormat.Float32.npy",
            np.ones(3, np.float32))
    order = root / TARGETS["exec_order"]
    order.parent.mkdir(parents=True)
    order.write_text("NodeExecutionOrder-FullNameWithScope\nDefault/Add-op0\nDefault/Exp-op0\n")


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-template")
    _build_template(root)
    for kind, rel in TARGETS.items():
        assert (root / rel).is_file(), kind
    q = DumpQuery(DumpIndex.open(str(root), use_cache=False))
    assert q.problems() == [], q.problems()
    q.index.close()
    return root


def _files_of_ops(q: DumpQuery) -> set[str]:
    return {t.path for op in q.ops(kind="all") for t in q.tensors(op.id)}


@st.composite
def mutations(draw, size: int):
    """A list of edits of a file of ``size`` bytes: byte flips, a cut, inserted junk, a new prefix."""
    ops = draw(st.lists(st.one_of(
        st.tuples(st.just("set"), st.integers(0, max(size - 1, 0)), st.integers(0, 255)),
        st.tuples(st.just("cut"), st.integers(0, size)),
        st.tuples(st.just("insert"), st.integers(0, size), st.binary(min_size=1, max_size=40)),
        st.tuples(st.just("u64"), st.sampled_from([0, 1, 7, 2 ** 31, 2 ** 63, 2 ** 64 - 1]), st.just(b"")),
        st.tuples(st.just("replace"), st.binary(max_size=200)),
    ), min_size=1, max_size=6))
    return ops


def _apply(data: bytes, edits) -> bytes:
    b = bytearray(data)
    for e in edits:
        if e[0] == "set" and b:
            b[min(e[1], len(b) - 1)] = e[2]
        elif e[0] == "cut":
            del b[e[1]:]
        elif e[0] == "insert":
            b[e[1]:e[1]] = e[2]
        elif e[0] == "u64":
            b[0:8] = e[1].to_bytes(8, "little")
        elif e[0] == "replace":
            b = bytearray(e[1])
    return bytes(b)


def _check_index(root: Path, target: Path, kind: str, good_files: set[str]) -> None:
    q = DumpQuery(DumpIndex.open(str(root), use_cache=False))
    try:
        files = _files_of_ops(q)
        # every other file's ops stay (an alias loses its op only when mapping.csv is what broke)
        spared = {str(target)}
        if kind == "mapping_csv":
            spared.add(str(root / TARGETS["aliased_dump"]))
        missing = {f.replace(str(root), "") for f in good_files - files} - {s.replace(str(root), "") for s in spared}
        assert not missing, missing
        for p in q.problems():
            assert p["error"].strip() and "\n" not in p["error"], p
        # reading any tensor of the fuzzed file fails only with the loader's one-line error
        for op in q.ops(kind="all"):
            for t in q.tensors(op.id):
                if t.path == str(target):
                    try:
                        q.tensor_stats(t, use_cache=False)
                    except TensorLoadError as exc:
                        assert "\n" not in str(exc)
        q.summary()
    finally:
        q.index.close()


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_index_never_raises_whatever_one_file_holds(template, kind):
    base = DumpQuery(DumpIndex.open(str(template), use_cache=False))
    good_rel = {os.path.relpath(f, template) for f in _files_of_ops(base)}
    base.index.close()
    original = (template / TARGETS[kind]).read_bytes()
    with tempfile.TemporaryDirectory(prefix="dumpscope-fuzz-") as tmp:
        root = Path(tmp) / "t"
        shutil.copytree(template, root)  # one working copy; only the target changes per example
        target = root / TARGETS[kind]
        good = {str(root / r) for r in good_rel}

        @INDEX_FUZZ
        @given(edits=mutations(len(original)))
        def check(edits):
            data = _apply(original, edits)
            assume(data != original)
            target.write_bytes(data)
            try:
                _check_index(root, target, kind, good)
            finally:
                target.write_bytes(original)

        check()


_NAME_CHARS = st.characters(codec="utf-8", exclude_characters="/\x00")


@FUZZ
@given(names=st.lists(st.one_of(
    st.text(_NAME_CHARS, min_size=1, max_size=60),
    st.builds(lambda a, b, c: f"{a}.{b}.{c}", st.text(_NAME_CHARS, max_size=12), st.text(_NAME_CHARS, max_size=30),
              st.from_regex(r"\d{1,3}\.\d\.\d{16}(\.\d\.\d\.\d\.\d)?(\.(input|output)\.\d+(\.[A-Za-z0-9_]+){0,3}\.npy)?",
                            fullmatch=True)),
    st.from_regex(r"\d{1,20}(\.npy)?", fullmatch=True),
), min_size=1, max_size=6, unique=True), junk=st.booleans())
def test_cli_survives_any_file_names(tmp_path_factory, capsys, names, junk):
    """Files with arbitrary names (valid dumps or junk) in a CANN step folder: summary/ops/overflow
    exit 0 with valid JSON and nothing on stderr."""
    root = tmp_path_factory.mktemp("names")
    d = root / STEP
    d.mkdir(parents=True)
    x = np.arange(6, dtype=np.float32)
    from synth.cann_writer import encode_dump

    payload = b"\x07" * 30 if junk else encode_dump("net/x", [SynthTensor(x, "float32")], [SynthTensor(x, "float32")], 1)
    written = 0
    for name in names:
        if name in (".", "..") or len(name.encode()) > 250:
            continue
        try:
            (d / name).write_bytes(payload)
            written += 1
        except OSError:
            continue
    assume(written)
    for args in (("summary", "--json"), ("ops", "--json"), ("overflow", "--json")):
        code = main([args[0], str(root), *args[1:], "--no-cache"])
        out, err = capsys.readouterr()
        assert code == 0 and err == "", err
        json.loads(out)
    shutil.rmtree(root, ignore_errors=True)


@settings(max_examples=200, deadline=None)
@given(name=st.text(max_size=120))
def test_name_parsers_never_raise(name):
    for fn in (parse_dump_name, parse_npy_name):
        fn(name)
        fn(name + ".npy")
        fn(name + ".csv")


@settings(max_examples=100, deadline=None)
@given(parts=st.lists(st.one_of(st.text(max_size=20), st.from_regex(r"(rank_|device_|iteration_|step)?\d{1,15}",
                                                                      fullmatch=True),
                                st.sampled_from(["constants", "_", "worldsize8_global_rank3", "Net_graph_1"])),
                      max_size=8))
def test_place_of_never_raises(parts):
    place = place_of(tuple(parts))
    assert isinstance(place.rank, int) and isinstance(place.step, int)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=600))
def test_small_csv_readers_never_raise(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("csv") / "x.csv"
    p.write_bytes(data)
    bad: list[str] = []
    read_mapping_csv(str(p), bad)
    assert all("\n" not in b for b in bad)
    read_mapping(str(p))
    read_exec_order(str(p))


_FORMATS = sorted(set(FORMAT_NAMES.values())) + ["UNKNOWN(77)", "", "nc1hwc0", "FRACTAL_Z_GARBAGE"]


@settings(max_examples=200, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate))
@example(fmt="FRACTAL_NZ", dev=[0, 0, 0, 0], orig=[0], extra=0, sub_format=0, target=None)
@example(fmt="NC1HWC0", dev=[1, -1, 2, 2, 16], orig=[1, 3, 2, 2], extra=0, sub_format=0, target=None)
@example(fmt="FRACTAL_Z", dev=[1, 1, 1, 1], orig=[0, 1, 1, 1], extra=0, sub_format=2, target=None)  # no channels
@given(fmt=st.sampled_from(_FORMATS),
       dev=st.lists(st.integers(-1, 6), max_size=6), orig=st.lists(st.integers(-1, 6), max_size=6),
       extra=st.integers(-3, 40), sub_format=st.integers(-2, 5),
       target=st.sampled_from([None, "NCHW", "NHWC", "HWCN", "NCDHW", "NDHWC", "ND", "XYZ", ""]))
def test_to_logical_raises_only_its_own_error(fmt, dev, orig, extra, sub_format, target):
    n = abs(int(np.prod(dev))) if dev else 1
    data = np.arange(max(n + extra, 0), dtype=np.float32)
    try:
        out = to_logical(data, fmt, dev, orig, sub_format, target)
    except DeviceFormatError as exc:
        assert str(exc).strip() and "\n" not in str(exc)
        return
    assert isinstance(out, np.ndarray)
