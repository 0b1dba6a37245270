"""Outputs are written to a temporary file beside them and renamed into place (issue 30): an output
path that is a hard link to a dump file replaces the link, never writes through it; an interrupt
leaves no partial file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from synth.trees import write_mindspore_tree
from dumpscope.tui.cli.entry import main


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ms(tmp_path) -> Path:
    return write_mindspore_tree(tmp_path / "golden", steps=(0,)).parent


def _a_dump_file(tree: Path) -> Path:
    return next(p for p in sorted(tree.rglob("*")) if p.is_file() and p.stat().st_size > 0)


def _linked(tree: Path, out: Path) -> tuple[Path, bytes]:
    """``out`` made a hard link to a dump file of ``tree``; the dump file's bytes."""
    victim = _a_dump_file(tree)
    os.link(victim, out)
    return victim, victim.read_bytes()


@pytest.mark.parametrize("name,extra", [
    ("out.csv", ["--output"]), ("out.json", ["--output"]), ("out.xlsx", ["--output"]),
    ("redump.json", ["--export-config"]),
])
def test_compare_outputs_replace_a_hard_link_to_a_dump_file(ms, tmp_path, capsys, name, extra):
    out = tmp_path / name
    victim, before = _linked(ms, out)
    code, _, err = run(["compare", str(ms), str(ms), *extra, str(out), "--no-cache"], capsys)
    assert code == 0, err
    assert victim.read_bytes() == before  # the dump file is untouched
    assert out.stat().st_ino != victim.stat().st_ino and out.stat().st_size > 0
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_ops_export_config_replaces_a_hard_link(ms, tmp_path, capsys):
    out = tmp_path / "cfg.json"
    victim, before = _linked(ms, out)
    code, _, err = run(["ops", str(ms), "--export-config", str(out), "--no-cache"], capsys)
    assert code == 0, err
    assert victim.read_bytes() == before
    assert "mindspore" in json.loads(out.read_text())


def test_convert_replaces_a_hard_link_and_an_interrupt_leaves_no_part(ms, tmp_path, capsys, monkeypatch):
    outdir = tmp_path / "conv"
    code, _, err = run(["convert", str(ms), str(outdir), "--no-cache"], capsys)
    assert code == 0, err
    npys = sorted(outdir.rglob("*.npy"))
    assert npys
    first = npys[0]
    first.unlink()
    victim, before = _linked(ms, first)
    code, _, err = run(["convert", str(ms), str(outdir), "--no-cache"], capsys)
    assert code == 0, err
    assert victim.read_bytes() == before
    np.load(first)  # a real .npy now, in place of the link

    # ctrl-C half-way through writing a tensor: nothing partial stays behind
    from dumpscope.core.engines import convert as conv

    real_save = np.save

    def interrupted(fh, arr, allow_pickle=False):
        fh.write(b"\x93NUMPY partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "save", interrupted)
    real_stream = conv._save_streamed
    monkeypatch.setattr(conv, "_save_streamed", lambda dest, ref: False)
    out2 = tmp_path / "conv2"
    with pytest.raises(KeyboardInterrupt):
        conv.convert_tree(__import__("dumpscope.core.query", fromlist=["open_query"]).open_query(
            str(ms), use_cache=False), str(out2))
    monkeypatch.setattr(np, "save", real_save)
    monkeypatch.setattr(conv, "_save_streamed", real_stream)
    left = [p for p in out2.rglob("*") if p.is_file()]
    assert left == [], left


def test_ctrl_c_while_a_device_layout_tensor_streams_leaves_no_part(tmp_path, monkeypatch):
    """The streamed path (NC1HWC0 converted chunk by chunk) used to leave ``.npy.part`` behind."""
    from dumpscope.core.tensors import load as tensor_io
    from dumpscope.core.engines.convert import convert_tree
    from dumpscope.core.query import open_query
    from synth.cann_writer import SynthTensor, write_dump

    root = tmp_path / "dump" / "20240101" / "0" / "m" / "1" / "0"
    a = np.random.default_rng(1).standard_normal((2, 20, 6, 6)).astype(np.float32)
    write_dump(root, "Op", "dev", 1, 2, 1718260502000000, outputs=[SynthTensor(a, "float16", "NC1HWC0")])
    real = tensor_io.device_stream

    def stream_then_ctrl_c(ref):
        make, shape, stored = real(ref)

        def chunks():
            yield next(iter(make()))
            raise KeyboardInterrupt

        return chunks, shape, stored

    monkeypatch.setattr(tensor_io, "device_stream", stream_then_ctrl_c)
    out = tmp_path / "conv"
    with pytest.raises(KeyboardInterrupt):
        convert_tree(open_query(str(tmp_path / "dump"), use_cache=False), str(out))
    assert [p for p in out.rglob("*") if p.is_file()] == []
