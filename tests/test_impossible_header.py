"""A header whose shape cannot describe its payload: one named problem, the same line in every command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dumpscope.core.formats import dump_data_pb2 as pb
from dumpscope.core.formats.shapes import element_count, impossible_header
from synth.cann_writer import SynthTensor, write_dump
from dumpscope.tui.cli.entry import main

HUGE = [1 << 32, 1 << 32, 16]  # 2**68 elements: numpy.prod wraps this to 0


def test_counts_are_exact_integers():
    assert element_count(HUGE) == 1 << 68
    assert int(np.prod(HUGE)) == 0  # what the old code computed
    assert element_count(()) == 1 and element_count([3, 0]) == 0
    assert impossible_header([2, 3], "float32", 24) is None
    assert impossible_header(HUGE, "float32", 16) == (f"impossible header: shape {HUGE} of float32 needs "
                                                     f"{(1 << 68) * 4} bytes, the payload holds 16")
    assert "negative" in impossible_header([2, -1], "float16", 100)
    assert impossible_header([3], "int4", 2) is None and impossible_header([5], "int4", 2) is not None


def _bad_tree(root):
    folder = root / "20240101000000" / "0" / "net" / "1" / "0"
    ok = np.arange(4, dtype=np.float32)
    path = write_dump(folder, "Add", "net/add", 1, 0, 1704067200000001,
                      inputs=[SynthTensor(ok, "float32", "ND")], outputs=[SynthTensor(ok, "float32", "ND")])
    # rewrite the output's shape in the header: 2**68 elements over a 16-byte payload
    data = path.read_bytes()
    h = int.from_bytes(data[:8], "little")
    msg = pb.DumpData()
    msg.ParseFromString(data[8:8 + h])
    del msg.output[0].shape.dim[:]
    msg.output[0].shape.dim.extend(HUGE)
    del msg.output[0].original_shape.dim[:]
    msg.output[0].original_shape.dim.extend(HUGE)
    head = msg.SerializeToString()
    path.write_bytes(len(head).to_bytes(8, "little") + head + data[8 + h:])
    return path


def test_the_same_line_in_every_command(tmp_path, capsys):
    path = _bad_tree(tmp_path / "dump")
    root = str(tmp_path / "dump")
    want = f"output.0: impossible header: shape {HUGE} of float32 needs {(1 << 68) * 4} bytes, the payload holds 16"
    assert main(["summary", root, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["problems"] == [{"path": str(path), "error": want}]
    assert doc["ops"] == 1  # the op is listed; its good input stays readable
    assert main(["stats", root, "net/add", "--io", "input", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 4
    lines = []
    for args in (["stats", root, "net/add", "--json"], ["convert", root, str(tmp_path / "out")]):
        code = main(args)
        out, err = capsys.readouterr()
        lines += [ln for ln in err.splitlines() if "impossible header" in ln]
        assert code in (0, 1)
    assert len(lines) == 2
    assert all(ln.endswith(f"{path}: {want}") for ln in lines), lines  # never "count 0", never another story
