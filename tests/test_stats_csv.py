"""Stats CSV readers (FORMATS.md §4) on generated fixtures, hand-written variants and the real samples."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import shared
from dumpscope.core.formats.stats_csv import (
    KIND_ADUMP, KIND_CANN, KIND_MINDSPORE, KIND_MSPROBE, STAT_KEYS, StatsCsvError, ops_from_file_name,
    parse_stats_csv, read_stats_csv,
)
from dumpscope.core.tensors.stats_record import stats_from_row
from synth.stats_csv_writer import (
    array_stats, write_cann_stats_csv, write_ms_statistic_csv, write_msprobe_statistic_csv,
)



def _arrays():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5, 6)).astype(np.float32)
    a[0, 0, 0] = np.nan
    a[1, 1, 1] = -np.inf
    b = rng.integers(-5, 5, size=(7,)).astype(np.int32)
    c = np.array(3.5, dtype=np.float16)
    return a, b, c


def _ref(arr: np.ndarray) -> dict:
    x = np.asarray(arr, dtype=np.float64).reshape(-1)
    fin = x[np.isfinite(x)]
    return {"max": fin.max(), "min": fin.min(), "mean": fin.mean(), "l2norm": math.sqrt((fin * fin).sum()),
            "count": x.size, "nan": int(np.isnan(x).sum()), "neginf": int((x == -np.inf).sum()),
            "posinf": int((x == np.inf).sum())}


def test_cann_per_op_roundtrip(tmp_path: Path) -> None:
    a, b, c = _arrays()
    p = write_cann_stats_csv(tmp_path, "Conv2D", "net/conv1.Conv2D", 12, 3, 1700000000000123,
                             inputs=[(a, "float32", "NCHW"), (b, "int32", "ND")], outputs=[(c, "float16", "ND")],
                             blank_stats=[("input", 1)])
    assert p.name == "Conv2D.net_conv1_Conv2D.12.3.1700000000000123.csv"
    res = read_stats_csv(str(p))
    assert res.kind == KIND_CANN and res.warnings == [] and len(res.rows) == 3
    r0, r1, r2 = res.rows
    assert (r0.op_type, r0.op_name, r0.task, r0.stream, r0.timestamp) == (
        "Conv2D", "net_conv1_Conv2D", 12, 3, 1700000000000123)
    assert (r0.io, r0.slot, r0.dtype, r0.format, r0.shape, r0.size) == ("input", 0, "float32", "NCHW", (4, 5, 6), 480)
    ref = _ref(a)
    for k in ("max", "min", "mean", "count", "nan", "neginf", "posinf"):
        assert r0.stats[k] == pytest.approx(ref[k], rel=1e-12), k
    assert r0.stats["l2norm"] is None and r0.stats["zeros"] is None and set(r0.stats) >= set(STAT_KEYS)
    assert r1.stats["max"] is None and r1.stats["count"] is None and r1.dtype == "int32"
    assert (r2.io, r2.shape, r2.dtype, r2.stats["max"]) == ("output", (), "float16", 3.5)


def test_ms_statistic_new_and_old_headers(tmp_path: Path) -> None:
    a, b, c = _arrays()
    rows = [dict(op_type="Conv2D", op_name="Default_net_Conv2D-op1", task=0, stream=0, timestamp=1 + i, io=io,
                 slot=i, array=arr) for i, (io, arr) in enumerate([("input", a), ("input", b), ("output", c)])]
    cats = ["max", "min", "avg", "count", "nan count", "negative inf count", "positive inf count", "zero count",
            "l2norm", "md5"]
    p = write_ms_statistic_csv(tmp_path / "new" / "statistic.csv", rows, categories=cats)
    res = read_stats_csv(str(p))
    assert res.kind == KIND_MINDSPORE and res.warnings == [] and len(res.rows) == 3
    r0 = res.rows[0]
    assert (r0.op_type, r0.op_name, r0.timestamp, r0.io, r0.slot, r0.shape) == (
        "Conv2D", "Default_net_Conv2D-op1", 1, "input", 0, (4, 5, 6))
    ref = _ref(a)
    for k in ("max", "min", "mean", "l2norm", "count", "nan", "neginf", "posinf"):
        assert r0.stats[k] == pytest.approx(ref[k], rel=1e-12), k
    assert r0.stats["md5"] == array_stats(a)["md5"] and r0.stats["zeros"] == 0
    assert res.rows[2].shape == () and res.rows[2].dtype == "float16"
    old = write_ms_statistic_csv(tmp_path / "old" / "statistic.csv", rows, categories=None, trailing_comma=False)
    assert "NaN Count" in old.read_text().splitlines()[0]
    r = read_stats_csv(str(old))
    assert r.kind == KIND_MINDSPORE and r.warnings == []
    assert r.rows[0].stats["nan"] == 1 and r.rows[0].stats["zeros"] == 0 and r.rows[0].stats["l2norm"] is None


def test_ms_null_cells_and_all_nan(tmp_path: Path) -> None:
    rows = [dict(op_type="Add", op_name="Add-op0", timestamp=5, io="output", slot=0,
                 array=np.array([np.nan, np.inf], dtype=np.float32))]
    p = write_ms_statistic_csv(tmp_path / "statistic.csv", rows, categories=["max", "min", "avg", "nan count"])
    assert ",null," in p.read_text()
    r = read_stats_csv(str(p)).rows[0]
    assert r.stats["max"] is None and r.stats["mean"] is None and r.stats["nan"] == 1


def test_msprobe_aggregated(tmp_path: Path) -> None:
    a, _, _ = _arrays()
    p = write_msprobe_statistic_csv(tmp_path / "statistic.csv", [
        dict(op_type="MatMul", op_name="Default_MatMul-op3", task=7, stream=2, timestamp=99, io="output", slot=0,
             array=a, format="FRACTAL_NZ")])
    res = read_stats_csv(str(p))
    assert res.kind == KIND_MSPROBE and res.warnings == []
    r = res.rows[0]
    assert (r.op_type, r.task, r.stream, r.io, r.format, r.dtype) == ("MatMul", 7, 2, "output", "FRACTAL_NZ", "float32")
    assert r.stats["l2norm"] == pytest.approx(_ref(a)["l2norm"], rel=1e-12) and r.stats["md5"]


def test_adump_variants(tmp_path: Path) -> None:
    head = "Input/Output,Index,Data Size,Data Type,Format,Shape"
    p = tmp_path / "Add.add_1.4.5.1700000000000001.csv"
    p.write_text(f"{head},Count,Max Value,l2norm\nOutput,0,8,DT_BF16,ND,2x2,4,1.5,NA\nInput,0,8,DT_INT64,-,-,1,7,7\n")
    res = read_stats_csv(str(p))
    assert res.kind == KIND_ADUMP and res.warnings == []
    r0, r1 = res.rows
    assert r0.dtype == "bfloat16" and r0.stats["count"] == 4 and r0.stats["max"] == 1.5 and r0.stats["l2norm"] is None
    assert r1.dtype == "int64" and r1.format == "" and r1.shape == () and r1.stats["l2norm"] == 7.0
    # default six items: Count inserted before Nan Count -> same as the CANN header
    q = tmp_path / "Add.add_2.4.5.1700000000000002.csv"
    q.write_text(f"{head},Max Value,Min Value,Avg Value,Count,Nan Count,Negative Inf Count,Positive Inf Count\n"
                 "Output,0,4,DT_FLOAT,ND,1,NA,NA,NA,NA,NA,NA,NA\n")
    r = read_stats_csv(str(q))
    assert r.kind == KIND_CANN and r.rows[0].stats["max"] is None


def test_tolerant_rows_and_header_errors(tmp_path: Path) -> None:
    p = tmp_path / "Relu.relu.1.2.3.csv"
    p.write_text("Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,"
                 "Nan Count,Negative Inf Count,Positive Inf Count\n"
                 "Output,0,4,DT_FLOAT,ND,1,1,1,1,1,0,0,0\n"
                 "Sideways,0,4,DT_FLOAT,ND,1,1,1,1,1,0,0,0\n"
                 "Output,x,4,DT_FLOAT,ND,1,1,1,1,1,0,0,0\n"
                 "Output,1,4,DT_FLOAT\n"
                 "Output,2,4,DT_FLOAT,ND,2xq,1,1,1,1,0,0,0\n"
                 "Output,3,4,DT_FLOAT,ND,1,abc,1,1,1,0,0,0\n"
                 "\n"
                 "Input,0,4,DT_FLOAT,ND,1,2,2,2,1,0,0,0,,,\n")
    res = read_stats_csv(str(p))
    assert [(r.io, r.slot) for r in res.rows] == [("output", 0), ("input", 0)]
    assert len(res.warnings) == 5 and all(str(p) in w for w in res.warnings)
    bad = tmp_path / "x.csv"
    bad.write_text("foo,bar\n1,2\n")
    with pytest.raises(StatsCsvError, match="x.csv"):
        read_stats_csv(str(bad))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(StatsCsvError):
        read_stats_csv(str(empty))
    with pytest.raises(StatsCsvError, match="cannot read"):
        read_stats_csv(str(tmp_path / "missing.csv"))


def test_file_name_fields() -> None:
    assert ops_from_file_name("/d/Add.add_1.4.5.1700000000000001.csv") == ("Add", "add_1", 4, 5, 1700000000000001)
    assert ops_from_file_name("Add.a.1.2.3.4.5.6.7.csv") == ("Add", "a", 1, 2, 3)
    assert ops_from_file_name("FIXTURE_x.Conv2D.conv1.1.2.17.csv") == ("Conv2D", "conv1", 1, 2, 17)
    assert ops_from_file_name("statistic.csv") is None


def test_stats_row_to_tensor_stats(tmp_path: Path) -> None:
    a, _, _ = _arrays()
    p = write_cann_stats_csv(tmp_path, "A", "b", 1, 2, 3, outputs=[a])
    st_ = stats_from_row(read_stats_csv(str(p)).rows[0].stats)
    assert st_.count == a.size and st_.nan == 1 and st_.neginf == 1 and st_.std is None
    assert st_.max == pytest.approx(_ref(a)["max"])


def test_real_samples() -> None:
    samples = shared("real_samples")
    ms = read_stats_csv(str(samples / "ms_kbyk_statistic_max_min_l2norm.csv"))
    assert ms.kind == KIND_MINDSPORE and ms.warnings == [] and len(ms.rows) == 15
    cast_in = ms.rows[7]
    assert (cast_in.op_type, cast_in.op_name, cast_in.io, cast_in.slot, cast_in.dtype, cast_in.shape) == (
        "Cast", "Default_Cast-op0", "input", 1, "int64", ())
    assert cast_in.stats["max"] == 30 and cast_in.stats["l2norm"] == 30 and cast_in.timestamp == 1733905446824053
    assert ms.rows[11].stats["min"] == 0.5 and ms.rows[8].dtype == "bool"
    cann = read_stats_csv(str(samples / "FIXTURE_cann_per_op_stats.Conv2D.conv1.1.2.1700000000000000.csv"))
    assert cann.kind == KIND_CANN and cann.warnings == []
    r = cann.rows[0]
    assert (r.op_type, r.op_name, r.task, r.stream, r.timestamp) == ("Conv2D", "conv1", 1, 2, 1700000000000000)
    assert (r.io, r.slot, r.size, r.dtype, r.format, r.shape) == ("output", 0, 640000, "float32", "NHWC",
                                                                  (4, 50, 50, 16))
    assert r.stats == {"max": 1.99999, "min": 1.0, "mean": 1.50004, "count": 160000, "nan": 0, "neginf": 0,
                       "posinf": 0, "zeros": None, "l2norm": None, "md5": None}


_HEADERS = [
    "Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,Nan Count,"
    "Negative Inf Count,Positive Inf Count",
    "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Data Size,Data Type,Shape,Max Value,Min Value,L2Norm Value,",
]


@settings(max_examples=200, deadline=None)
@given(header=st.sampled_from(_HEADERS + [""]), body=st.text(alphabet=st.sampled_from(
    list('abcx0123456789,.-"\n\r()NnIiOoUuTtPpl \x00\ufffd')), max_size=300))
def test_fuzz_only_own_error(header: str, body: str) -> None:
    try:
        res = parse_stats_csv(header + "\n" + body, "Add.a.1.2.3.csv")
    except StatsCsvError as exc:
        assert "\n" not in str(exc)
        return
    for r in res.rows:
        assert r.io in ("input", "output") and isinstance(r.slot, int) and isinstance(r.shape, tuple)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400))
def test_fuzz_binary_file(tmp_path_factory, data: bytes) -> None:
    p = tmp_path_factory.mktemp("f") / "X.y.1.2.3.csv"
    p.write_bytes(data)
    try:
        read_stats_csv(str(p))
    except StatsCsvError:
        pass
