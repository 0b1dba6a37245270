"""Damage nobody would notice: writes into a dump tree, a convert that grows mapping.csv, a file
cut short after indexing reported as fine, an npy header numpy would refuse, a scalar that
becomes a vector, a convert that is quadratic in the tensors of one file, a problem list of
100k lines."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from dumpscope.core.formats.npy_header import NpyFormatError, parse_npy_header
from synth.faults import CANN_STEP, write_fault_corpus
from synth.trees import write_mindspore_tree
from dumpscope.tui.cli import listing
from dumpscope.tui.cli.entry import main


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ms(tmp_path) -> Path:
    return write_mindspore_tree(tmp_path / "golden", steps=(0,)).parent


def test_export_config_inside_a_dump_tree_is_refused(ms, tmp_path, capsys):
    target = write_mindspore_tree(tmp_path / "target", steps=(0,), eps=1e-3).parent
    for tree in (ms, target):
        dest = tree / "rank_0" / "redump.json"
        code, out, err = run(["compare", str(ms), str(target), "--export-config", str(dest), "--no-cache"], capsys)
        assert code == 1 and err.count("\n") == 1 and "inside the dump tree" in err, err
        assert not dest.exists()
    ok = tmp_path / "redump.json"
    code, _, err = run(["compare", str(ms), str(target), "--export-config", str(ok), "--no-cache"], capsys)
    assert code == 0, err
    assert "kernels" in json.loads(ok.read_text())["mindspore"]["common_dump_settings"]


def test_convert_twice_gives_the_same_mapping_csv(tmp_path, capsys):
    tree = tmp_path / "corpus"
    write_fault_corpus(tree)
    out = tmp_path / "out"
    assert run(["convert", str(tree), str(out), "--no-cache"], capsys)[0] == 0
    maps = sorted(out.rglob("mapping.csv"))
    assert maps, "the corpus' 250-byte op name needs an alias"
    first = {m: m.read_text() for m in maps}
    assert all(len(t.splitlines()) == len(set(t.splitlines())) for t in first.values())
    assert run(["convert", str(tree), str(out), "--no-cache"], capsys)[0] == 0
    assert {m: m.read_text() for m in sorted(out.rglob("mapping.csv"))} == first


def test_a_file_truncated_after_indexing_becomes_a_problem_and_recovers(ms, tmp_path, capsys):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    code, out, _ = run(["summary", str(ms), "--json", *cache], capsys)
    assert code == 0 and json.loads(out)["problems"] == []
    victim = sorted(ms.rglob("*.npy"))[3]
    data = victim.read_bytes()
    with open(victim, "r+b") as fh:  # in place: the folder's mtime and entry count stay the same
        fh.truncate(len(data) - 8)
    code, out, _ = run(["summary", str(ms), "--json", *cache], capsys)
    problems = json.loads(out)["problems"]
    assert [p["path"] for p in problems] == [str(victim)] and "truncated" in problems[0]["error"]
    code, out, _ = run(["summary", str(ms), *cache], capsys)
    assert "problems: none" not in out and "truncated" in out
    with open(victim, "r+b") as fh:
        fh.write(data)
    code, out, _ = run(["summary", str(ms), "--json", *cache], capsys)
    assert json.loads(out)["problems"] == []


def _npy(header: str) -> bytes:
    head = header.encode("latin1")
    head += b" " * ((-(len(head) + 11)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + b"\0" * 12


def test_npy_header_with_an_extra_key_is_refused_like_numpy_does(tmp_path):
    data = _npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'evil': 1}")
    with pytest.raises(NpyFormatError, match="unexpected key 'evil'"):
        parse_npy_header(data, len(data), "x.npy")
    path = tmp_path / "x.npy"
    path.write_bytes(data)
    with pytest.raises(ValueError):  # numpy agrees
        np.load(path)
    good = _npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }")
    assert parse_npy_header(good, len(good), "y.npy").shape == (3,)


def test_zero_d_tensors_convert_to_zero_d(tmp_path, capsys):
    d = tmp_path / "dump" / "rank_0" / "Net" / "0" / "0"
    d.mkdir(parents=True)
    np.save(d / "Add.Default_Add-op0.0.0.1700000000000001.output.0.DefaultFormat.float32.npy",
            np.array(3.5, np.float32))
    np.save(d / "Add.Default_Add-op0.0.0.1700000000000001.input.0.DefaultFormat.float32.npy",
            np.array([1.0, 2.0], np.float32))
    out = tmp_path / "out"
    assert run(["convert", str(tmp_path / "dump"), str(out), "--no-cache"], capsys)[0] == 0
    got = {p.name.split(".DefaultFormat")[0].rsplit(".", 2)[-2]: np.load(p) for p in out.rglob("*.npy")}
    assert got["output"].shape == () and got["output"] == np.float32(3.5)
    assert got["input"].shape == (2,)


def test_convert_reads_the_header_of_a_3000_input_file_once(tmp_path, capsys, monkeypatch):
    from dumpscope.core.formats import cann_dump
    from synth.cann_writer import SynthTensor, write_dump

    step = tmp_path / "dump" / CANN_STEP
    x = np.arange(4, dtype=np.float32)
    write_dump(step, "ConcatD", "big/concat", 1, 2, 1718260502000000,
               inputs=[SynthTensor(x + i, "float32", "ND") for i in range(3000)],
               outputs=[SynthTensor(x, "float32", "ND")])
    calls = []
    real = cann_dump.read_header
    monkeypatch.setattr(cann_dump, "read_header", lambda *a, **k: calls.append(1) or real(*a, **k))
    out = tmp_path / "out"
    code, text, err = run(["convert", str(tmp_path / "dump"), str(out), "--no-cache"], capsys)
    assert code == 0, err
    assert "wrote 3001 tensors" in text
    assert len(calls) <= 2, f"header decoded {len(calls)} times for one file"
    assert np.array_equal(np.load(next(out.rglob("*.input.2999.npy"))), x + 2999)


def test_human_summary_caps_the_problem_list(tmp_path, capsys):
    step = tmp_path / "dump" / CANN_STEP
    step.mkdir(parents=True)
    for i in range(listing.MAX_PROBLEMS_SHOWN + 70):
        (step / f"Relu.bad_{i}.{i}.2.17182605{i:08d}").write_bytes(b"\x01")
    code, out, _ = run(["summary", str(tmp_path / "dump"), "--no-cache"], capsys)
    assert code == 0
    assert out.count("  ! ") == listing.MAX_PROBLEMS_SHOWN
    assert "… and 70 more; --json for all" in out
    code, out, _ = run(["summary", str(tmp_path / "dump"), "--json", "--no-cache"], capsys)
    assert len(json.loads(out)["problems"]) == listing.MAX_PROBLEMS_SHOWN + 70


def test_an_execution_order_too_long_is_a_named_problem_and_ops_still_answer(ms, capsys, monkeypatch):
    from dumpscope.core.layouts import mindspore as ms_layout

    csv = next(ms.rglob("ms_execution_order_graph_*.csv"))
    n = sum(1 for line in csv.read_text().splitlines() if line.strip()) - 1
    code, out, _ = run(["ops", str(ms), "--json", "--no-cache"], capsys)
    want = sorted(op["name"] for op in json.loads(out)["ops"])
    monkeypatch.setattr(ms_layout, "MAX_EXEC_ORDER_NAMES", n - 1)
    code, out, _ = run(["summary", str(ms), "--json", "--no-cache"], capsys)
    problems = json.loads(out)["problems"]
    assert [p["path"] for p in problems] == [str(csv)] and "too long" in problems[0]["error"]
    code, out, _ = run(["ops", str(ms), "--json", "--no-cache"], capsys)
    assert code == 0 and sorted(op["name"] for op in json.loads(out)["ops"]) == want
