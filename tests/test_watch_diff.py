"""watch_diff: snapshot name splitting, exact snapshot diffs, watch timelines."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dumpscope.core.engines.watch.diff import build_timeline, diff_snapshot
from dumpscope.core.names import split_watch_name


# ---- acceptance scenario ------------------------------------------------------------------


def test_acceptance_b_overwrites_five_elements_of_c():
    """C (watched) runs first, then A and B (layer=[A, B]); B scribbles over 5 elements."""
    rng = np.random.default_rng(0)
    c_out = rng.standard_normal((8, 16)).astype(np.float16)
    after_a = c_out.copy()
    after_b = c_out.copy()
    hit = [(0, 3), (1, 0), (2, 15), (5, 5), (7, 1)]
    for i, j in hit:
        after_b[i, j] = np.float16(100.0)
    file_names = ["C", "A", "B", "A_To_C", "B_To_C"]
    known = {"A", "B", "C"}
    assert [split_watch_name(n, known) for n in file_names] == [None, None, None, ("A", "C"), ("B", "C")]

    tl = build_timeline("C", c_out, [("B", 2, after_b), ("A", 1, after_a)], watched_exec_index=0)
    doc = tl.to_dict()
    json.dumps(doc)  # JSON-ready
    assert [s["after"] for s in doc["snapshots"]] == ["C", "A", "B"]
    own, a, b = doc["snapshots"]
    assert own["changed"] is False and own["changed_elements"] == 0
    assert a["changed"] is False and a["changed_elements"] == 0 and a["max_abs_diff"] == 0.0
    assert b["changed"] is True and b["changed_elements"] == 5
    want_max = max(abs(100.0 - float(c_out[i, j])) for i, j in hit)
    assert b["max_abs_diff"] == pytest.approx(want_max)
    assert b["first_changed"] == [list(h) for h in hit]
    assert doc["first_change_after"] == "B"
    for s in doc["snapshots"]:
        assert {"after", "changed", "changed_elements", "max_abs_diff"} <= set(s)


def test_snapshots_before_the_watched_op_are_not_overwrites():
    ref = np.ones(4, np.float32)
    stale = np.zeros(4, np.float32)  # memory before W wrote it
    tl = build_timeline("W", ref, [("P", 0, stale), ("W", 1, ref), ("L", 2, ref.copy())])
    first = tl.snapshots[0]
    assert first["after"] == "P" and first["before_watched"] and first["changed"]
    assert tl.first_change_after is None


def test_own_entry_added_first_when_position_unknown():
    ref = np.arange(3)
    changed = ref.copy()
    changed[1] = 7
    tl = build_timeline("W", ref, [("L2", 9, changed), ("L1", 4, ref)])
    assert [s["after"] for s in tl.snapshots] == ["W", "L1", "L2"]
    assert tl.first_change_after == "L2"


# ---- names ---------------------------------------------------------------------------------


def test_split_scoped_names_containing_to():
    known = {"Default_Cast_To_Float-op1", "Default_Add-op2", "net_Convert_To_fp16"}
    assert split_watch_name("Default_Add-op2_To_Default_Cast_To_Float-op1", known) == (
        "Default_Add-op2", "Default_Cast_To_Float-op1")
    assert split_watch_name("Default_Cast_To_Float-op1_To_net_Convert_To_fp16", known) == (
        "Default_Cast_To_Float-op1", "net_Convert_To_fp16")
    # an ordinary op whose own name contains _To_
    assert split_watch_name("Default_Cast_To_Float-op1", known) is None
    assert split_watch_name("net_Convert_To_fp16", known) is None


def test_split_layer_not_dumped_and_unknown():
    known = ["Default/Mul-op7", "fp16", "Convert_To_fp16"]  # graph spelling gets sanitised
    assert split_watch_name("X-op9_To_Default_Mul-op7", known) == ("X-op9", "Default_Mul-op7")
    # watched side known two ways: longest known watched name wins
    assert split_watch_name("Y_To_Convert_To_fp16", known) == ("Y", "Convert_To_fp16")
    assert split_watch_name("Q_To_Unknown", known) is None
    assert split_watch_name("Plain-op1", known) is None


# ---- diff_snapshot -----------------------------------------------------------------------


def test_nan_vs_nan_unchanged_but_signed_zero_changed():
    ref = np.array([np.nan, 0.0, 1.0, 2.0], np.float32)
    snap = ref.copy()
    snap.view(np.uint32)[0] |= 1  # another NaN payload
    snap[1] = -0.0
    d = diff_snapshot(ref, snap)
    assert d.changed and d.changed_elements == 1 and d.max_abs_diff == 0.0
    assert d.first_changed == [(1,)]


def test_nonfinite_changes_counted_separately():
    ref = np.array([1.0, 2.0, 3.0])
    snap = np.array([np.inf, 2.5, np.nan])
    d = diff_snapshot(ref, snap)
    assert d.changed_elements == 3 and d.nonfinite_changed == 2 and d.max_abs_diff == 0.5


def test_shape_and_dtype_mismatch():
    d = diff_snapshot(np.zeros((2, 3)), np.zeros((3, 2)))
    assert d.changed and d.max_abs_diff is None and d.reason == "shape (2, 3) vs (3, 2)"
    e = diff_snapshot(np.array([1, 2, 3], np.int32), np.array([1.0, 2.0, 4.0], np.float64))
    assert e.changed_elements == 1 and e.max_abs_diff == 1.0 and "dtype" in e.reason


def test_first_n_and_chunks_and_odd_itemsizes():
    ref = np.zeros((10, 10), np.complex128)  # itemsize 16 → byte-row comparison
    snap = ref.copy()
    snap.flat[::7] = 1j
    d = diff_snapshot(ref, snap, first_n=3, chunk_elems=6)
    assert d.changed_elements == len(range(0, 100, 7))
    assert d.first_changed == [(0, 0), (0, 7), (1, 4)]
    assert d.max_abs_diff == 1.0
    nc = diff_snapshot(ref.T, snap.T, chunk_elems=5)  # non-contiguous inputs
    assert nc.changed_elements == d.changed_elements


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(np.float32, hnp.array_shapes(max_dims=3, max_side=8), elements=st.floats(width=32, allow_nan=True)),
    st.data(),
)
def test_diff_counts_exactly_the_modified_elements(x, data):
    assert not diff_snapshot(x, x.copy()).changed
    if x.size == 0:
        return
    picks = data.draw(st.sets(st.integers(0, x.size - 1), max_size=x.size))
    y = x.copy()
    flat = y.reshape(-1)
    for i in picks:
        flat[i] = np.float32(12345.0) if x.reshape(-1)[i] != np.float32(12345.0) else np.float32(-1.0)
    d = diff_snapshot(x, y, first_n=x.size, chunk_elems=5)
    assert d.changed_elements == len(picks)
    assert [np.ravel_multi_index(i, x.shape) if x.ndim else 0 for i in d.first_changed] == sorted(picks)
