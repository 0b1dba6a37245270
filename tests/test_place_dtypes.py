"""A place's tensor dtypes (``DumpQuery.place_dtypes``, compare's precision) come from what each folder's
reader recorded (``dir_dtypes``), never from a JSON walk of every unit, and are what that walk gives: on
every sample layout, with folders read in pool chunks, re-read, removed or set aside as another dump, and
where the records cannot say (statistics merged into payload twins) from the walk; non-finite statistics
included (SQLite's own JSON walk, before 3.42, found no dtype at all there)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import dumpscope.core.index.dump_index as index_mod
import dumpscope.core.index.pool as pool_mod
from conftest import SAMPLES, unpack_data
from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.query import DumpQuery, open_query
from synth.cann_writer import SynthTensor, write_dump
from synth.job_tree import write_cann_job
from synth.stats_csv_writer import write_cann_stats_csv

def _walk(q: DumpQuery, rank: int, step: int) -> set[str]:
    """Every non-empty string dtype of every packed tensor of the place's ops, read with Python's JSON (which
    takes the NaN and Infinity statistics of a non-finite tensor, as SQLite before 3.42 does not)."""
    names: set[str] = set()
    for (text,) in q.index.query("SELECT u.tensors FROM units u JOIN ops o ON u.op_id = o.id "
                                 "WHERE o.rank=? AND o.step=?", (rank, step)):
        names |= {e[2] for e in json.loads(text) if isinstance(e[2], str) and e[2]}
    return names


def _asked(q: DumpQuery, rank: int, step: int) -> tuple[set[str], list[str]]:
    """``place_dtypes`` and the SQL it ran."""
    queries: list[str] = []
    real = q.index.query
    q.index.query = lambda sql, params=(): queries.append(sql) or real(sql, params)  # type: ignore[method-assign]
    try:
        return q.place_dtypes(rank, step), queries
    finally:
        del q.index.query


def _records(q: DumpQuery, rank: int, step: int) -> list:
    return q.index.query("SELECT names FROM dir_dtypes WHERE rank=? AND step=?", (rank, step))


def _places(q: DumpQuery) -> list[tuple[int, int]]:
    return q.index.query("SELECT DISTINCT rank, step FROM units ORDER BY rank, step")


def _build(root: Path, cache: Path, workers: int = 1) -> DumpQuery:
    idx = DumpIndex.open(str(root), cache_directory=cache, update=False)
    idx.update(workers=workers)
    return DumpQuery(idx)


@pytest.mark.parametrize("sample", ["compare_golden", "msprobe", "troubleshooter", "stats_only", "cann_overflow",
                                    "mindspore_lenet_sync", "mindspore_stats", "watch", "torchair_2rank",
                                    "cann_tf_adapter"])
def test_every_place_of_a_sample_reads_its_records_and_gets_the_walks_answer(tmp_path, sample):
    q = open_query(str(SAMPLES / sample), cache_directory=tmp_path / "cache")
    assert _places(q)
    for rank, step in _places(q):
        got, queries = _asked(q, rank, step)
        assert got == _walk(q, rank, step) and got, (rank, step)
        assert not any("json_each" in s for s in queries), (rank, step)
    assert not q.index.query("SELECT key FROM meta WHERE key LIKE 'place_dtypes:%'")  # nothing to keep
    assert q.place_dtypes(5, 5) == set()  # no units there: nothing recorded, nothing walked


def test_real_msprobe_and_mindspore_runs_get_the_walks_answer(tmp_path_factory, tmp_path):
    for name in ("real_msprobe26", "real_ms210_dp2", "real_ms_pt_pair", "real_ts_nan"):
        tree = unpack_data(tmp_path_factory, name)
        q = open_query(str(tree), cache_directory=tmp_path / name)
        for rank, step in _places(q):
            assert q.place_dtypes(rank, step) == _walk(q, rank, step), (name, rank, step)


def test_a_folder_read_in_pool_chunks_records_each_chunk(tmp_path, monkeypatch):
    root = write_cann_job(tmp_path / "job", ranks=(0, 1), steps=(0, 1))
    write_dump(next(root.rglob("Exp.*")).parent, "Cast", "model/cast/Cast", 40, 2, 1719792000009999,
               inputs=[SynthTensor(np.ones(4, np.float16), "float16")],
               outputs=[SynthTensor(np.ones(4, np.float32), "float32")])
    monkeypatch.setattr(index_mod, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(pool_mod, "CHUNK_FILES", 2)
    q = _build(root, tmp_path / "c", workers=2)
    assert len(_records(q, 0, 0)) >= 3  # six files, two a chunk
    for rank, step in _places(q):
        assert q.place_dtypes(rank, step) == _walk(q, rank, step)
    assert q.place_dtypes(0, 0) == {"float16", "float32"} and q.place_dtypes(1, 1) == {"float16"}


def test_a_folder_read_again_replaces_its_record_and_a_removed_one_takes_it_away(tmp_path):
    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0, 1))
    folder = next(p.parent for p in root.rglob("Exp.*") if p.parent.name == "0")
    q = _build(root, tmp_path / "c")
    assert q.place_dtypes(0, 0) == {"float16"}
    q.index.close()
    write_dump(folder, "Cast", "model/cast/Cast", 40, 2, 1719792000009999,
               inputs=[SynthTensor(np.ones(4, np.float16), "float16")],
               outputs=[SynthTensor(np.ones(4, np.int32), "int32")])
    q = _build(root, tmp_path / "c")
    assert q.place_dtypes(0, 0) == {"float16", "int32"} == _walk(q, 0, 0)
    assert len(_records(q, 0, 0)) == 1  # the folder's record, replaced: not one more beside the old one
    assert q.place_dtypes(0, 1) == {"float16"}
    q.index.close()
    shutil.rmtree(folder)
    q = _build(root, tmp_path / "c")
    assert _records(q, 0, 0) == [] and q.place_dtypes(0, 0) == set() == _walk(q, 0, 0)
    assert q.place_dtypes(0, 1) == {"float16"}


def test_another_dump_of_the_same_places_set_aside_takes_its_records_along(tmp_path):
    first = write_cann_job(tmp_path / "pair" / "a", ranks=(0,), steps=(0,))
    second = tmp_path / "pair" / "b"
    shutil.copytree(first, second)
    write_dump(next(second.rglob("Exp.*")).parent, "Cast", "model/cast/Cast", 40, 2, 1719792000009999,
               inputs=[SynthTensor(np.ones(4, np.float16), "float16")],
               outputs=[SynthTensor(np.ones(4, np.float32), "float32")])
    q = _build(tmp_path / "pair", tmp_path / "c")
    assert q.index.query("SELECT COUNT(*) FROM aside_units")[0][0] > 0  # b is set aside: a answers
    assert q.place_dtypes(0, 0) == {"float16"} == _walk(q, 0, 0)
    assert q.index.query("SELECT COUNT(*) FROM aside_dir_dtypes")[0][0] == 1
    q.index.close()
    shutil.rmtree(first)  # the clash is gone: b comes back, with its record
    q = _build(tmp_path / "pair", tmp_path / "c")
    assert q.place_dtypes(0, 0) == {"float16", "float32"} == _walk(q, 0, 0)
    assert q.index.query("SELECT COUNT(*) FROM aside_dir_dtypes")[0][0] == 0


def test_statistics_merged_into_payload_twins_leave_the_place_to_the_walk(tmp_path):
    """The CSV names its tensors bfloat16, the payload files float16: the CSV rows are merged away, and with
    them the only bfloat16 the folder's reader saw."""
    root = write_cann_job(tmp_path / "job", ranks=(0,), steps=(0, 1))
    folder = next(p.parent for p in root.rglob("Exp.*") if p.parent.name == "0")
    ones = np.ones((4, 8), np.float16)
    for f in sorted(p.name for p in folder.iterdir()):
        op_type, file_name, task, stream, ts = f.split(".")
        write_cann_stats_csv(folder, op_type, file_name, int(task), int(stream), int(ts),
                             inputs=[(ones, "bfloat16", "ND")], outputs=[(ones, "bfloat16", "ND")])
    q = _build(root, tmp_path / "c")
    assert not q.index.query("SELECT 1 FROM units WHERE storage='none'")  # every row had a twin
    assert _records(q, 0, 0) == [(None,)]
    assert q.place_dtypes(0, 0) == {"float16"} == _walk(q, 0, 0)
    assert q.place_dtypes(0, 1) == {"float16"} and _records(q, 0, 1) == [('["float16"]',)]  # untouched


@pytest.mark.parametrize("rows", [1, 2])
def test_non_finite_statistics_give_the_dtypes_on_any_sqlite(tmp_path, rows):
    """A CSV of one row is a tensor record packed alone, of two a unit of its own (``stats_tree``): either
    way a NaN maximum in its statistics is packed as NaN, which SQLite before 3.42 does not read as JSON.
    The place's dtypes are the recorded ones, and the walk (statistics merged away) reads them alike."""
    folder = tmp_path / "job" / "20240701000000" / "0" / "model" / "1" / "0"
    ones = np.ones(2, np.float32)
    for k, (op_type, dtype) in enumerate((("Mul", "float32"), ("Add", "int8"))):
        path = write_cann_stats_csv(folder, op_type, f"model_{op_type}", 3 + k, 2, 1719792000000000 + k,
                                    inputs=[(ones, dtype, "ND")], outputs=[(ones, dtype, "ND")] * (rows - 1))
        if k == 0:  # Max Value of its first row: nan
            lines = path.read_text().splitlines()
            cells = lines[1].split(",")
            cells[6] = "nan"
            path.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    q = _build(tmp_path / "job", tmp_path / "c")
    assert q.index.query("SELECT ntensors FROM units") == [(rows,), (rows,)]  # a unit a row, or a CSV
    assert "NaN" in q.index.query("SELECT tensors FROM units ORDER BY id LIMIT 1")[0][0]
    assert _records(q, 0, 0) == [('["float32", "int8"]',)]
    assert q.place_dtypes(0, 0) == {"float32", "int8"} == _walk(q, 0, 0)
    q.index.query("UPDATE dir_dtypes SET names=NULL")  # (as merged statistics leave it): the units are read
    got, queries = _asked(q, 0, 0)
    assert got == {"float32", "int8"} and any("FROM units" in sql for sql in queries)
