"""``summary``'s layouts count each producer's files in the file accounting's pass over the units
(issue 33: one pass, not a second ``COUNT(DISTINCT path)`` over every unit); the counts must be the
ones that query gives, on the real dumps of every tool (files read from a subfolder, statistics-only
records, several producers in one tree)."""

from __future__ import annotations

import pytest

from conftest import unpack_data
from dumpscope.core.index.accounting import file_accounting
from dumpscope.core.query import open_query

DUMPS = ["real_api_dumps", "real_msprobe26", "real_mindspore_train", "real_ms210_dp2", "real_ts_nan",
         "real_troubleshooter_1018_block", "real_ms_pt_pair"]


@pytest.mark.parametrize("name", DUMPS)
def test_layout_files_equal_distinct_paths(tmp_path_factory, name):
    q = open_query(str(unpack_data(tmp_path_factory, name)))
    want = dict(q.index.query("SELECT producer, COUNT(DISTINCT path) FROM units GROUP BY producer"))
    got: dict[str, int] = {}
    accounting = file_accounting(q.index, got)
    assert got == want and want
    assert accounting == file_accounting(q.index)  # the accounting itself is the same with or without
    listed = [(lay["name"], lay["files"]) for lay in q.layouts(got)]
    assert listed[:len(want)] == sorted(want.items())  # (dumps set aside follow)


ACCOUNTED = DUMPS + ["real_msprobe_fp16_dist", "real_ms210_causes", "real_precision_pairs"]


@pytest.mark.parametrize("name", ACCOUNTED)
def test_accounting_at_once_is_file_by_file(tmp_path_factory, monkeypatch, name):
    """A folder whose every file lies right inside it and is no graph, order or problem is counted at once
    (``all_own``, ``file_kinds``): the counts are those of looking at each file, and the files' kinds
    those of each unit's storage."""
    from dumpscope.core.index import accounting

    q = open_query(str(unpack_data(tmp_path_factory, name)))
    fast_got: dict[str, int] = {}
    fast = file_accounting(q.index, fast_got)
    rows = q.index.query("SELECT path, storage FROM units ORDER BY id")
    want: dict[str, bool] = {}
    for path, storage in rows:
        want[path] = want.get(path, False) or storage not in ("none", "value")
    assert accounting.file_kinds(rows) == want
    monkeypatch.setattr(accounting, "all_own", lambda paths, inside: False)  # every file looked at
    slow_got: dict[str, int] = {}
    assert file_accounting(q.index, slow_got) == fast and slow_got == fast_got
    assert fast["tensor"] + fast["stats"] > 0


def test_accounting_at_once_of_statistics_files(tmp_path, monkeypatch):
    """A CANN ``dump_data=stats`` job (per-op statistics CSVs, no tensor data, nothing else in the folders):
    every folder is counted at once, as statistics files."""
    import numpy as np

    from dumpscope.core.index import accounting
    from synth.job_tree import write_cann_stats_job

    write_cann_stats_job(tmp_path, 2, 2, 5, np.linspace(-1, 1, 12, dtype=np.float16).reshape(3, 4), (0, 0, 0), (0, 0))
    q = open_query(str(tmp_path))
    fast = file_accounting(q.index)
    assert fast["stats"] == 20 and fast["tensor"] == 0
    monkeypatch.setattr(accounting, "all_own", lambda paths, inside: False)
    assert file_accounting(q.index) == fast
