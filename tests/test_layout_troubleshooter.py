"""Troubleshooter api_dump trees (generated fixtures; the format is text-only)."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpscope.core.layouts.base import DirListing
from dumpscope.core.layouts.troubleshooter import (
    MAX_NAME,
    TroubleshooterLayout,
    TsNameError,
    load_tensor,
    module_scope,
    parse_info_line,
    parse_ts_name,
)
from dumpscope.core.model import ExecOrder, Problem, TensorRecord
from synth.api_dump_writer import simulate_small_net, write_troubleshooter_tree


def scan(root: str):
    items, listings = [], {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        parts = () if rel == "." else tuple(rel.split(os.sep))
        listing = DirListing(root, dirpath, parts, sorted(filenames), sorted(dirnames))
        items.extend(TroubleshooterLayout().scan_dir(listing))
        listings[rel] = listing
        dirnames[:] = [d for d in dirnames if d not in listing.skip_subdirs]
    return items, listings


def by_key(items):
    return {(r.op_name, r.io, r.slot): r for r in items if isinstance(r, TensorRecord)}


def test_torch_tree_with_markers(tmp_path):
    calls = simulate_small_net()
    write_troubleshooter_tree(str(tmp_path), calls, framework="torch", rank=2)
    items, listings = scan(str(tmp_path))
    assert not [i for i in items if isinstance(i, Problem)]
    recs = by_key(items)
    assert len(recs) == sum(len(c.inputs) + len(c.outputs) for c in calls)  # markers make none
    for order, call in enumerate(calls):
        for io, arrays in (("input", call.inputs), ("output", call.outputs)):
            for slot, arr in enumerate(arrays):
                rec = recs[(call.ts_name, io, slot)]
                assert rec.producer == "troubleshooter" and rec.graph == "" and rec.rank == 2
                assert rec.op_type == call.api_name and rec.file_name == rec.op_name
                assert rec.storage == "npy" and rec.dtype == "float32" and rec.shape == arr.shape
                assert rec.order_hint == float(order)
                assert rec.extra["scope"] == [call.module] and rec.extra["framework"] == "torch"
                assert rec.extra["direction"] == "forward" and rec.extra["api_type"] == "Functional"
                assert rec.extra["arg"] == (str(slot) if len(arrays) > 1 else "")
                assert rec.stats["l2norm"] == pytest.approx(float(np.linalg.norm(arr.astype(np.float64))))
                assert set(rec.stats) == {"max", "min", "mean", "l2norm"}
                np.testing.assert_array_equal(load_tensor(rec), arr)
    assert "self.bn1(x)" in recs[("Functional_batch_norm_0_forward", "output", 0)].extra["stack"][0]
    (order,) = [i for i in items if isinstance(i, ExecOrder)]
    assert order.names == [c.ts_name for c in calls] and order.rank == 2
    assert order.source.endswith("torch_api_dump_info.csv")
    listing = listings["rank2"]
    assert listing.claimed == {"torch_api_dump_info.csv", "torch_api_dump_stack.json"}
    assert listing.skip_subdirs == {"torch_api_dump"}


def test_missing_and_unlisted_npy(tmp_path):
    calls = simulate_small_net()
    rank = write_troubleshooter_tree(str(tmp_path), calls, framework="mindspore",
                                     skip_npy=["Functional_relu_0_forward_output"])
    extra = np.arange(3, dtype=np.int64)
    np.save(os.path.join(rank, "mindspore_api_dump", "Tensor___add___0_forward_output.npy"), extra)
    np.save(os.path.join(rank, "mindspore_api_dump", "junk.npy"), extra)
    items, _ = scan(str(tmp_path))
    recs = by_key(items)
    relu = recs[("Functional_relu_0_forward", "output", 0)]
    assert relu.storage == "none" and relu.stats["max"] >= 0 and relu.path.endswith("_info.csv")
    add = recs[("Tensor___add___0_forward", "output", 0)]
    assert (add.op_type, add.dtype, add.shape, add.storage) == ("__add__", "int64", (3,), "npy")
    assert add.order_hint == 3.0 and add.stats is None
    assert "scope" not in relu.extra  # mindspore writes no LAYER markers
    (order,) = [i for i in items if isinstance(i, ExecOrder)]
    assert order.names[-1] == "Tensor___add___0_forward"


def test_old_row_layout_pkl_name_and_nan(tmp_path):
    rank = tmp_path / "rank0"
    (rank / "torch_api_dump").mkdir(parents=True)
    rows = [
        '["LAYER_layer1.0_forward_input", 0, [], "torch.float32", [1], [0, 0, 0]]',
        '["Functional_linear_0_forward_input.0", 0, [], "torch.float32", [2, 3], [1.5, -1, 0.25]]',
        '["Functional_linear_0_forward_input.1.0", 0, [], "torch.bool", [3], [NaN, NaN, NaN]]',
        '["Functional_linear_0_forward_output", 0, [], "torch.float32", [2, 4], [1, 0, 0.5]]',
        '["Functional_linear_0_backward_input", 1, [], "torch.float32", [2, 4], [1, 0, 0.5]]',
        "not json at all",
        "",
    ]
    (rank / "torch_api_dump_info.pkl").write_text("\n".join(rows))
    np.save(rank / "torch_api_dump" / "Functional_linear_0_forward_input.0.npy",
            np.zeros((2, 3), np.float32))
    items, listings = scan(str(tmp_path))
    problems = [i for i in items if isinstance(i, Problem)]
    assert len(problems) == 1 and "line 6" in problems[0].error
    recs = by_key(items)
    a = recs[("Functional_linear_0_forward", "input", 0)]
    b = recs[("Functional_linear_0_forward", "input", 1)]
    assert a.storage == "npy" and a.stats == {"max": 1.5, "min": -1, "mean": 0.25}
    assert b.storage == "none" and b.stats is None and b.dtype == "bool" and b.extra["arg"] == "1.0"
    assert a.extra["scope"] == ["layer1", "layer1.0"]
    bwd = recs[("Functional_linear_0_backward", "input", 0)]
    assert bwd.step == 1 and bwd.extra["direction"] == "backward" and "scope" not in bwd.extra
    assert "torch_api_dump_info.pkl" in listings["rank0"].claimed


def test_binary_pickle_info_is_refused(tmp_path):
    rank = tmp_path / "rank0"
    rank.mkdir()
    canary = tmp_path / "canary"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {canary}",))

    (rank / "mindtorch_api_dump_info.pkl").write_bytes(pickle.dumps(Evil()))
    items, _ = scan(str(tmp_path))
    assert [type(i) for i in items] == [Problem, ExecOrder]
    assert "refusing to unpickle" in items[0].error
    assert not canary.exists()


def test_info_line_1018_layout():
    row = parse_info_line('["NN_Conv2d_1_forward_output", 0, [], "Float16", [1, 2], '
                          '[NaN, 1.0, NaN], "d41d8cd9", 3.5]')
    assert (row.dtype, row.shape, row.stats) == ("float16", (1, 2), {"min": 1.0, "md5": "d41d8cd9",
                                                                     "l2norm": 3.5})
    row = parse_info_line('["NN_Conv2d_1_forward_output", 0, [], "Float16", [1], [1, 2, 3], [], NaN]')
    assert row.stats == {"max": 1, "min": 2, "mean": 3}
    with pytest.raises(ValueError):
        parse_info_line('{"a": 1}')


def test_name_parser():
    p = parse_ts_name("Functional_pad_0_forward_input.0")
    assert (p.api_type, p.api_name, p.count, p.direction, p.io, p.index) == (
        "Functional", "pad", 0, "forward", "input", "0")
    p = parse_ts_name("NN_Conv2d_1_forward_output")
    assert (p.op_name, p.io, p.index) == ("NN_Conv2d_1_forward", "output", "")
    assert parse_ts_name("Tensor___matmul___1_forward_output").api_name == "__matmul__"
    assert parse_ts_name("Functional_max_pool2d_12_backward_input.1.2").index == "1.2"
    marker = parse_ts_name("LAYER_features.0_forward_input")
    assert marker.is_marker and marker.api_name == "features.0"
    assert module_scope("a.b.c") == ["a", "a.b", "a.b.c"]
    for bad in ("", "pad_0_forward_input", "F_pad_x_forward_input", "F_pad_0_sideways_input",
                "F_pad_0_forward_inout", "F_pad_0_forward_input.a", "F_p-d_0_forward_input"):
        with pytest.raises(TsNameError):
            parse_ts_name(bad)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="aF_.019forwadbckinputLAYER", max_size=80))
def test_name_parser_fuzz_raises_only_own_error(name):
    try:
        p = parse_ts_name(name)
    except TsNameError:
        return
    assert p.io in ("input", "output") and p.direction in ("forward", "backward")


def test_name_parser_refuses_the_names_a_backtracking_parser_was_slow_on():
    """The names refused, and a name past ``MAX_NAME`` refused for its length before any parsing: the work
    on one name is bounded.  How long they take is benchmarks/bench_parsers_linear.py's (no clock here)."""
    for bad in ("a_" + "_1" * 500 + "_forward_x", "a_b_" + "1" * 1000 + "x"):
        with pytest.raises(TsNameError, match="not a Troubleshooter api_dump name"):
            parse_ts_name(bad)
    with pytest.raises(TsNameError, match="too long"):
        parse_ts_name("Tensor_add_" + "_1" * MAX_NAME + "_0_forward_input")


def test_npy_dir_without_info_file(tmp_path):
    npy_dir = tmp_path / "rank5" / "mindtorch_api_dump"
    npy_dir.mkdir(parents=True)
    np.save(npy_dir / "NN_Linear_0_forward_output.npy", np.ones((2, 2), np.float16))
    np.save(npy_dir / "NN_Linear_0_forward_input.npy", np.ones((2, 3), np.float16))
    (npy_dir / "Tensor_add_0_forward_input.0.npy").write_bytes(b"garbage")
    items, _ = scan(str(tmp_path))
    problems = [i for i in items if isinstance(i, Problem)]
    assert len(problems) == 1 and "Tensor_add_0_forward_input.0.npy" in problems[0].error
    recs = by_key(items)
    assert set(recs) == {("NN_Linear_0_forward", "input", 0), ("NN_Linear_0_forward", "output", 0)}
    out = recs[("NN_Linear_0_forward", "output", 0)]
    assert (out.rank, out.dtype, out.shape, out.op_type, out.extra["framework"]) == (
        5, "float16", (2, 2), "Linear", "mindtorch")
