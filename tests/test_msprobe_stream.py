"""msprobe ``dump.json`` is read entry by entry (issue 20): the same records as a whole-file parse on
every real dump, bounded buffers on a big file, and a named problem for what cannot be read."""

from __future__ import annotations

import dataclasses
import io
import json
import os
from pathlib import Path

import pytest

from conftest import unpack_data
from dumpscope.core.layouts import json_stream, msprobe
from dumpscope.core.layouts.base import DirListing
from dumpscope.core.layouts.json_stream import JsonObjectReader, JsonStreamError, ValueTooLarge, iter_object
from dumpscope.core.layouts.msprobe import MsprobeLayout
from dumpscope.core.model import ExecOrder, Problem, TensorRecord
from synth.faults import msprobe_entries, write_msprobe_json

#: real dumps written by msprobe itself (tests/data/*/README.md)
REAL = ["real_msprobe26", "real_msprobe_262_block", "msprobe_ut_ms_pt", "real_api_dumps", "real_ms_pt_pair"]


def _dump_dirs(root: Path) -> list[str]:
    return sorted(dirpath for dirpath, _d, files in os.walk(root) if "dump.json" in files)


def _listing(root: Path, dirpath: str) -> DirListing:
    parts = tuple(os.path.relpath(dirpath, root).split(os.sep))
    files = sorted(f for f in os.listdir(dirpath) if os.path.isfile(os.path.join(dirpath, f)))
    subdirs = sorted(d for d in os.listdir(dirpath) if os.path.isdir(os.path.join(dirpath, d)))
    return DirListing(str(root), dirpath, parts, files, subdirs)


def _canon(items) -> list[str]:
    return [type(i).__name__ + json.dumps(dataclasses.asdict(i), sort_keys=True, default=str) for i in items]


def _whole_file(root: Path, dirpath: str) -> list:
    """The reference: ``json.load`` of the whole file, its ``data`` fed to the same record builder."""
    listing = _listing(root, dirpath)
    path = listing.path("dump.json")
    with open(path, encoding="utf-8") as fh:
        meta = json.load(fh)
    data = meta.pop("data")
    return list(msprobe._scan_dump(listing, path, meta, iter(data.items())))


@pytest.mark.parametrize("name", REAL)
def test_streamed_records_equal_the_whole_file_parse_on_real_dumps(tmp_path_factory, monkeypatch, name):
    root = unpack_data(tmp_path_factory, name)
    dirs = [d for d in _dump_dirs(root) if '"task"' in Path(d, "dump.json").read_text()[:2000]]
    assert dirs, f"{name}: no msprobe dump.json"
    for chunk in (json_stream.CHUNK, 61, 7):  # 7 characters: every value straddles reads
        monkeypatch.setattr(JsonObjectReader.__init__, "__defaults__", (chunk,))
        for d in dirs:
            got = list(MsprobeLayout().scan_dir(_listing(root, d)))
            assert [i for i in got if isinstance(i, TensorRecord)], d
            assert _canon(got) == _canon(_whole_file(root, d)), (d, chunk)


def test_reader_holds_one_entry_not_the_file(tmp_path):
    path = tmp_path / "dump.json"
    n = write_msprobe_json(path, entries=600)
    size = path.stat().st_size
    with open(path, encoding="utf-8") as fh:
        reader = JsonObjectReader(fh, max_value=1 << 20, chunk=4096)
        got = {}
        for key in reader.members():
            if key == "data":
                got = {k: reader.read_value() for k in reader.members()}
            else:
                reader.read_value()
        reader.finish()
    assert len(got) == n == 600
    assert got == json.loads(path.read_text())["data"]
    # the largest buffer is a chunk plus one entry, not the file (500+ KB)
    biggest = max(len(json.dumps(e, indent=1)) for _, e in msprobe_entries(600))
    assert reader.peak_buffer <= 2 * 4096 + 2 * biggest < size / 20


def test_oversized_entry_is_a_named_problem_and_the_rest_is_read(tmp_path, monkeypatch):
    rank = tmp_path / "step0" / "rank0"
    rank.mkdir(parents=True)
    big = json.dumps({"input_args": [{"type": "str", "value": "x" * 50_000}], "output": []})
    write_msprobe_json(rank / "dump.json", entries=12, extra_data=[("Functional.huge.0.forward", big)])
    monkeypatch.setattr(msprobe, "MAX_ENTRY_BYTES", 20_000)
    items = list(MsprobeLayout().scan_dir(_listing(tmp_path, str(rank))))
    problems = [p.error for p in items if isinstance(p, Problem)]
    assert any("Functional.huge.0.forward" in e and "limit per entry" in e for e in problems), problems
    order = [i for i in items if isinstance(i, ExecOrder)][0]
    assert "Functional.huge.0.forward" not in order.names
    assert len(order.names) == 10  # 12 entries, two of them parameters_grad merged into their backward


def test_broken_json_keeps_the_entries_before_it_and_says_where(tmp_path):
    rank = tmp_path / "step0" / "rank0"
    rank.mkdir(parents=True)
    write_msprobe_json(rank / "dump.json", entries=6, indent=None)
    text = (rank / "dump.json").read_text()
    cut = text.index('"Tensor.add.0.forward"')
    (rank / "dump.json").write_text(text[:cut + 30])  # cut inside an entry (msprobe killed mid-write)
    items = list(MsprobeLayout().scan_dir(_listing(tmp_path, str(rank))))
    errors = [p.error for p in items if isinstance(p, Problem)]
    assert any("broken JSON" in e and "the 2 entries before it were read" in e for e in errors), errors
    order = [i for i in items if isinstance(i, ExecOrder)][0]
    assert order.names == ["Module.layers.0.Linear.forward.0", "Functional.linear.0.forward"]


def test_malformed_entry_is_skipped_by_name_and_duplicates_are_named(tmp_path):
    rank = tmp_path / "step0" / "rank0"
    rank.mkdir(parents=True)
    write_msprobe_json(rank / "dump.json", entries=3, extra_data=[
        ("Functional.bad.0.forward", '{"input_args": [1, 2,}'),
        ("Functional.twice.0.forward", '{"input_args": [], "output": [{"type": "int", "value": 1}]}'),
        ("Functional.twice.0.forward", '{"input_args": [], "output": [{"type": "int", "value": 2}]}')])
    items = list(MsprobeLayout().scan_dir(_listing(tmp_path, str(rank))))
    errors = [p.error for p in items if isinstance(p, Problem)]
    assert any("Functional.bad.0.forward" in e and "skipped" in e for e in errors), errors
    assert any("Functional.twice.0.forward" in e and "twice" in e for e in errors), errors
    recs = [r for r in items if isinstance(r, TensorRecord) and r.op_name == "Functional.twice.0.forward"]
    assert [r.extra["value"] for r in recs] == [1]
    assert len({r.op_name for r in items if isinstance(r, TensorRecord)}) == 4


def test_fields_after_data_and_no_framework_field(tmp_path):
    """``data`` before the other fields, no ``framework``: the top level is read first, then ``data``."""
    rank = tmp_path / "step0" / "rank0"
    rank.mkdir(parents=True)
    entries = dict(msprobe_entries(4))
    (rank / "dump.json").write_text(json.dumps({"data": entries, "task": "statistics", "level": "mix"}))
    items = list(MsprobeLayout().scan_dir(_listing(tmp_path, str(rank))))
    recs = [r for r in items if isinstance(r, TensorRecord)]
    assert recs and {r.extra["framework"] for r in recs} == {"pytorch"}  # told by "torch.Tensor"
    assert [i for i in items if isinstance(i, ExecOrder)][0].names == list(entries)


def test_side_files_are_streamed_and_a_broken_one_is_named(tmp_path):
    rank = tmp_path / "step0" / "rank0"
    rank.mkdir(parents=True)
    write_msprobe_json(rank / "dump.json", entries=6)
    stack = {"0": [["Functional.linear.0.forward", "Tensor.add.0.forward"], ["File a.py, line 1"]]}
    (rank / "stack.json").write_text(json.dumps(stack)[:-1] + ', "1": [[')  # cut short
    (rank / "construct.json").write_text(json.dumps({"Functional.linear.0.forward": "Module.layers.0.Linear"
                                                                                      ".forward.0"}))
    items = list(MsprobeLayout().scan_dir(_listing(tmp_path, str(rank))))
    errors = [p.error for p in items if isinstance(p, Problem)]
    assert any(e.startswith("stack.json: unreadable") and "the 1 entries before it are used" in e
               for e in errors), errors
    first = {}
    for r in items:
        if isinstance(r, TensorRecord):
            first.setdefault(r.op_name, r)
    assert first["Functional.linear.0.forward"].extra["stack"] == ["File a.py, line 1"]
    assert first["Functional.linear.0.forward"].extra["scope"] == ["Module.layers.0.Linear.forward.0"]


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_reader_matches_json_loads_across_chunk_boundaries(chunk):
    doc = {"a": [1, -2.5e-07, 1e300, True, None, "q\"\\u00e9\\", float("nan"), float("-inf")],
           "b\"\\": {"x": {"y": [[], {}, "[{"]}}, "c": 12345678901234567890, "d": "", "e": False}
    text = json.dumps(doc, indent=1)
    got = dict(iter_object(io.StringIO(text), 1 << 20, chunk))
    assert json.dumps(got) == json.dumps(json.loads(text))
    r = JsonObjectReader(io.StringIO(text), 1 << 20, chunk)
    kinds = []
    for _key in r.members():
        kinds.append(r.value_kind())
        r.skip_value()
    assert kinds == ["array", "object", "number", "string", "false"]


def test_reader_structural_errors_and_caps():
    for bad in ['{"a": 1 "b": 2}', '{"a": 1,', '{"a": [1,2', '[1]', '{"a": 1} x', '', '{"a" 1}']:
        with pytest.raises(JsonStreamError):
            list(iter_object(io.StringIO(bad), 100, 2))
    got = dict(iter_object(io.StringIO('{"a": "' + "z" * 500 + '", "b": {"x": [1,}, "c": 5}'), 100, 3))
    assert isinstance(got["a"], ValueTooLarge) and isinstance(got["b"], ValueError) and got["c"] == 5
