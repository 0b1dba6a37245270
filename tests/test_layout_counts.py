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
