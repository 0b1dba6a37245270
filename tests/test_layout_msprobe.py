"""msprobe dump.json trees: synthetic fixtures plus the real MindSpore mix sample when present."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import shared

from dumpscope.core.formats.dtypes import dtype_name
from dumpscope.core.layouts.base import DirListing
from dumpscope.core.layouts.msprobe import (
    MsprobeLayout,
    MsprobeNameError,
    load_tensor,
    parse_msprobe_name,
    parse_stack_json,
    scopes_from_construct,
    step_rank_from_parts,
)
from dumpscope.core.model import ExecOrder, Problem, TensorRecord
from synth.api_dump_writer import simulate_small_net, write_msprobe_tree



def scan(root: str, layout=None):
    """A minimal walker: list each directory once, honour ``skip_subdirs``."""
    layout = layout or MsprobeLayout()
    items, listings = [], {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        parts = () if rel == "." else tuple(rel.split(os.sep))
        listing = DirListing(root, dirpath, parts, sorted(filenames), sorted(dirnames))
        items.extend(layout.scan_dir(listing))
        listings[rel] = listing
        dirnames[:] = [d for d in dirnames if d not in listing.skip_subdirs]
    return items, listings


def records(items):
    return [i for i in items if isinstance(i, TensorRecord)]


def by_key(items):
    return {(r.op_name, r.io, r.slot): r for r in records(items)}


@pytest.fixture()
def tensor_tree(tmp_path):
    calls = simulate_small_net()
    write_msprobe_tree(str(tmp_path), calls, step=2, rank=1,
                       pt_names=["Functional.relu.0.forward.output.0"])
    return str(tmp_path), calls


def test_tensor_tree_records_and_payloads(tensor_tree):
    root, calls = tensor_tree
    items, listings = scan(root)
    recs = by_key(items)
    assert len([r for r in recs.values() if r.storage != "value"]) == sum(len(c.inputs) + len(c.outputs)
                                                                          for c in calls)
    assert not [i for i in items if isinstance(i, Problem)]
    for call in calls:
        for io, arrays in (("input", call.inputs), ("output", call.outputs)):
            for slot, arr in enumerate(arrays):
                rec = recs[(call.msprobe_name, io, slot)]
                assert rec.producer == "msprobe" and rec.graph == ""
                assert (rec.rank, rec.step) == (1, 2)
                assert rec.op_type == call.api_name and rec.file_name == rec.op_name
                assert rec.dtype == "float32" and rec.shape == arr.shape
                assert rec.extra["direction"] == "forward" and rec.extra["api_type"] == "Functional"
                assert rec.extra["framework"] == "pytorch" and rec.extra["pos"] == str(slot)
                np.testing.assert_array_equal(load_tensor(rec), arr)
                assert rec.stats["max"] == pytest.approx(float(arr.max()))
                assert rec.stats["l2norm"] == pytest.approx(float(np.linalg.norm(arr.astype(np.float64))))
    relu_out = recs[("Functional.relu.0.forward", "output", 0)]
    assert relu_out.storage == "pt" and relu_out.path.endswith(".pt")
    conv_in = recs[("Functional.conv2d.0.forward", "input", 0)]
    assert conv_in.storage == "npy" and os.path.dirname(conv_in.path).endswith("dump_tensor_data")
    assert conv_in.nbytes == arr_nbytes(calls[0].inputs[0])
    assert conv_in.extra["scope"] == ["Module.conv1.Conv2d.forward.0"]
    assert "self.conv1(x)" in conv_in.extra["stack"][0]
    eps = [r for r in records(items) if r.op_name == "Functional.batch_norm.0.forward" and r.storage == "value"]
    assert [(r.extra["arg"], r.dtype, r.extra["value"]) for r in eps] == [("eps", "float", 1e-5)]
    orders = [i for i in items if isinstance(i, ExecOrder)]
    assert len(orders) == 1 and orders[0].rank == 1 and orders[0].source.endswith("dump.json")
    assert orders[0].names == [c.msprobe_name for c in calls]
    assert [recs[(c.msprobe_name, "output", 0)].order_hint for c in calls] == [0.0, 1.0, 2.0]
    listing = listings[os.path.join("step2", "rank1")]
    assert {"dump.json", "stack.json", "construct.json"} <= listing.claimed
    assert listing.skip_subdirs == {"dump_tensor_data"}


def arr_nbytes(a):
    return a.size * a.dtype.itemsize


def test_statistics_task_old_stack_and_rank_without_id(tmp_path):
    calls = simulate_small_net()
    write_msprobe_tree(str(tmp_path), calls, task="statistics", rank=None, framework="mindspore",
                       stack_layout="old")
    items, _ = scan(str(tmp_path))
    recs = records(items)
    assert recs and all(r.storage in ("none", "value") and r.rank == 0 for r in recs)
    assert all(r.path.endswith("dump.json") for r in recs)
    assert all(r.extra["framework"] == "mindspore" for r in recs)
    first = {}
    for r in recs:
        first.setdefault(r.op_name, r)
    assert all(r.extra["stack"] for r in first.values())  # the stack goes on each op's first record
    tensors = [r for r in recs if r.storage == "none"]
    assert {r.dtype for r in tensors} == {"float32"}  # "Float32" normalised
    assert all(set(r.stats) >= {"max", "min", "mean", "l2norm"} for r in tensors)


def test_missing_tensor_file_is_problem_and_stats_only(tensor_tree):
    root, _ = tensor_tree
    data = os.path.join(root, "step2", "rank1", "dump_tensor_data")
    os.remove(os.path.join(data, "Functional.conv2d.0.forward.input.1.npy"))
    items, _ = scan(root)
    problems = [i for i in items if isinstance(i, Problem)]
    assert len(problems) == 1 and "missing" in problems[0].error
    rec = by_key(items)[("Functional.conv2d.0.forward", "input", 1)]
    assert rec.storage == "none" and rec.stats["max"] is not None
    with pytest.raises(ValueError, match="statistics only"):
        load_tensor(rec)


def test_broken_and_foreign_dump_json(tmp_path):
    bad = tmp_path / "step0" / "rank0"
    bad.mkdir(parents=True)
    (bad / "dump.json").write_text("{not json")
    (bad / "stack.json").write_text("{}")
    other = tmp_path / "other"
    other.mkdir()
    (other / "dump.json").write_text(json.dumps({"common_dump_settings": {}}))
    items, listings = scan(str(tmp_path))
    assert [type(i) for i in items] == [Problem]
    assert "dump.json" in items[0].error
    assert "dump.json" not in listings["other"].claimed


def test_nested_args_kwargs_backward_and_param_grads(tmp_path):
    rank = tmp_path / "step0" / "proc4242"
    rank.mkdir(parents=True)
    t = {"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [2], "Max": 1, "Min": 0,
         "Mean": 0.5, "Norm": 1.0, "md5": "abcd1234"}
    data = {
        "Torch.cat.0.forward": {
            "input_args": [[t, t], {"type": "int", "value": 0}, t],
            "input_kwargs": {"out": None, "alpha": t},
            "parameters": {"weight": t},
            "output": [t]},
        "Torch.cat.0.backward": {"input": [t], "output": [t, None, t]},
        "Module.fc.Linear.parameters_grad": {"weight": [t], "bias": [t]},  # older form: no count
    }
    (rank / "dump.json").write_text(json.dumps({"task": "statistics", "framework": "pytorch",
                                                "data": data}))
    items, _ = scan(str(tmp_path))
    assert not [i for i in items if isinstance(i, Problem)]
    recs = by_key(items)
    fwd_in = [recs[("Torch.cat.0.forward", "input", s)] for s in range(6)]
    # every leaf keeps its slot: the int and the None kwarg are value entries
    assert [(r.storage, r.extra.get("pos"), r.extra.get("arg")) for r in fwd_in] == [
        ("none", "0.0", None), ("none", "0.1", None), ("value", "1", None), ("none", "2", None),
        ("value", None, "out"), ("none", None, "alpha")]
    assert (fwd_in[2].dtype, fwd_in[2].shape, fwd_in[2].extra["value"]) == ("int", (), 0)
    assert (fwd_in[4].dtype, fwd_in[4].extra["value"]) == ("none", None)
    assert recs[("Torch.cat.0.forward", "input", 6)].extra["arg"] == "weight"
    assert all(r.rank == 0 and r.extra["proc"] == 4242 for r in fwd_in)
    assert fwd_in[0].dtype == "bfloat16" and fwd_in[0].stats["md5"] == "abcd1234"
    bwd = [r for r in records(items) if r.op_name == "Torch.cat.0.backward"]
    assert [(r.io, r.slot, r.storage, r.extra.get("pos")) for r in bwd] == [
        ("input", 0, "none", "0"), ("output", 0, "none", "0"), ("output", 1, "value", "1"),
        ("output", 2, "none", "2")]
    assert all(r.extra["direction"] == "backward" for r in bwd)
    # gradients of module parameters: outputs of the module's backward call, named
    grads = [r for r in records(items) if r.extra["kind"] == "parameters_grad"]
    assert [(r.op_name, r.io, r.slot, r.extra["arg"], r.op_type) for r in grads] == [
        ("Module.fc.Linear.backward.0", "output", 0, "weight", "Linear"),
        ("Module.fc.Linear.backward.0", "output", 1, "bias", "Linear")]


def test_parameter_gradients_follow_the_backward_outputs(tmp_path):
    rank = tmp_path / "step0" / "rank0"
    rank.mkdir(parents=True)
    t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [3], "Max": 1, "Min": 0, "Mean": 0.5,
         "Norm": 1.0}
    data = {"Module.fc.Linear.parameters_grad.1": {"weight": [t]},  # msprobe 26 writes it first
            "Module.fc.Linear.backward.1": {"input": [t], "output": [t, t]}}
    (rank / "dump.json").write_text(json.dumps({"task": "statistics", "framework": "pytorch", "data": data}))
    items, _ = scan(str(tmp_path))
    recs = records(items)
    assert {r.op_name for r in recs} == {"Module.fc.Linear.backward.1"}
    assert [(r.io, r.slot, r.extra.get("arg")) for r in recs if r.io == "output"] == [
        ("output", 0, None), ("output", 1, None), ("output", 2, "weight")]
    order = [i for i in items if isinstance(i, ExecOrder)][0]
    assert order.names == ["Module.fc.Linear.backward.1"]


@pytest.mark.parametrize("written", [float("nan"), "nan", "NaN", None])
def test_nan_statistics_in_every_spelling_are_kept(tmp_path, written):
    rank = tmp_path / "step0" / "rank0"
    rank.mkdir(parents=True)
    bad = {"type": "torch.Tensor", "dtype": "torch.float16", "shape": [4], "Max": written, "Min": written,
           "Mean": written, "Norm": written}
    data = {"Torch.sqrt.0.forward": {"input_args": [], "input_kwargs": {}, "output": [bad]}}
    (rank / "dump.json").write_text(json.dumps({"task": "statistics", "framework": "pytorch", "data": data}))
    items, _ = scan(str(tmp_path))
    assert not [i for i in items if isinstance(i, Problem)]
    (rec,) = records(items)
    assert np.isnan(rec.stats["max"]) and np.isnan(rec.stats["min"])


def test_infinite_statistics_strings_and_bool_tensors(tmp_path):
    rank = tmp_path / "step0" / "rank0"
    rank.mkdir(parents=True)
    inf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": "inf", "Min": "-inf",
           "Mean": "nan", "Norm": "inf"}
    flag = {"type": "mindspore.Tensor", "dtype": "Bool", "shape": [], "Max": "True", "Min": "False",
            "Mean": None, "Norm": None}
    data = {"Torch.exp.0.forward": {"input_args": [flag], "input_kwargs": {}, "output": [inf]}}
    (rank / "dump.json").write_text(json.dumps({"task": "statistics", "framework": "pytorch", "data": data}))
    items, _ = scan(str(tmp_path))
    assert not [i for i in items if isinstance(i, Problem)]
    recs = by_key(items)
    out = recs[("Torch.exp.0.forward", "output", 0)]
    assert out.stats["max"] == np.inf and out.stats["min"] == -np.inf
    flag_rec = recs[("Torch.exp.0.forward", "input", 0)]
    assert (flag_rec.stats["max"], flag_rec.stats["min"]) == (1.0, 0.0) and "nan" not in str(flag_rec.stats)


def test_real_mindspore_mix_sample(tmp_path):
    real = shared("real_samples")
    rank = tmp_path / "step0" / "rank"
    rank.mkdir(parents=True)
    for kind in ("dump", "stack", "construct"):
        shutil.copy(real / f"msprobe_ms_mix_{kind}.json", rank / f"{kind}.json")
    items, _ = scan(str(tmp_path))
    assert not [i for i in items if isinstance(i, Problem)]
    recs = by_key(items)
    add_in = recs[("Tensor.__add__.0.forward", "input", 0)]
    assert add_in.dtype == "int32" and add_in.shape == (5, 2) and add_in.op_type == "__add__"
    assert add_in.stats == {"max": 3430.0, "min": 0.0, "mean": 926.5, "l2norm": 4977.4384765625}
    assert add_in.storage == "none" and add_in.extra["api_type"] == "Tensor"
    assert add_in.extra["stack"][0].startswith("File ")
    # a scalar second argument is a value entry in its own slot
    scalar = recs[("Tensor.__add__.1.forward", "input", 1)]
    assert (scalar.storage, scalar.dtype, scalar.extra["value"]) == ("value", "int", 1)
    # a null output keeps its position
    none_out = recs[("Distributed.all_reduce.0.forward", "output", 1)]
    assert (none_out.storage, none_out.dtype) == ("value", "none")
    scope = recs[("Mint.cos.0.forward", "input", 0)].extra["scope"]
    assert scope[-1].endswith("attention.ParallelAttention.forward.0")
    assert scope[0].endswith("language_model.encoder.ParallelTransformer.forward.0")
    rms = recs[("Primitive.norm.RmsNorm.0.forward", "output", 1)]
    assert rms.op_type == "RmsNorm"
    cell = recs[("Cell.network_with_loss.module.language_model.encoder.layers.0.input_norm."
                 "FusedRMSNorm.backward.0", "output", 0)]
    assert cell.op_type == "FusedRMSNorm" and cell.extra["direction"] == "backward"
    fa_bwd = [r for r in records(items) if r.op_name == "Functional.flash_attention_score.0.backward"]
    assert [(r.io, r.storage) for r in fa_bwd].count(("output", "none")) == 3  # + a null 4th output
    (order,) = [i for i in items if isinstance(i, ExecOrder)]
    assert len(order.names) == 13 and order.names[0] == "Tensor.__add__.0.forward"


def test_name_parser_and_dtypes():
    p = parse_msprobe_name("Functional.conv2d.0.forward")
    assert (p.api_type, p.op_type, p.count, p.direction, p.kind) == ("Functional", "conv2d", 0, "forward", "api")
    p = parse_msprobe_name("Cell.conv1.Conv2d.backward.3")
    assert (p.api_name, p.op_type, p.count, p.direction, p.kind) == ("conv1.Conv2d", "Conv2d", 3, "backward", "module")
    p = parse_msprobe_name("Tensor.__add__.12.forward")
    assert p.op_type == "__add__" and p.count == 12
    assert parse_msprobe_name("Module.fc.Linear.parameters_grad").kind == "parameters_grad"
    for bad in ("", "conv2d", "Functional.conv2d.x.forward", "Functional..0.forward", "A.0.forward"):
        with pytest.raises(MsprobeNameError):
            parse_msprobe_name(bad)
    cases = {"torch.float32": "float32", "Float32": "float32", "torch.bfloat16": "bfloat16",
             "BFloat16": "bfloat16", "Bool": "bool", "torch.half": "float16", "Int64": "int64",
             "torch.long": "int64", "UInt8": "uint8", "mindspore.float16": "float16"}
    assert {k: dtype_name(k) for k in cases} == cases  # the names msprobe writes (formats.dtypes: one table)


def test_side_file_parsers():
    old = {"A.x.0.forward": ["l1", "l2"]}
    new = {"0": [["A.x.0.forward", "A.x.1.forward"], ["l1"]], "1": [["B.y.0.backward"], ["l9"]]}
    assert parse_stack_json(old) == old
    assert parse_stack_json(new) == {"A.x.0.forward": ["l1"], "A.x.1.forward": ["l1"],
                                     "B.y.0.backward": ["l9"]}
    scopes = scopes_from_construct({"api": "m2", "m2": "m1", "m1": "", "loop_a": "loop_b",
                                    "loop_b": "loop_a", "top": None})
    assert scopes["api"] == ["m1", "m2"] and scopes["m1"] == [] and scopes["top"] == []
    assert "loop_a" in scopes["loop_b"]
    assert step_rank_from_parts(("dump", "pynative", "step7", "rank3")) == (7, 3, {"run_mode": "pynative"})


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcFT_.0123456789fowardbckpmetsgrx", max_size=60))
def test_name_parser_fuzz_raises_only_own_error(name):
    try:
        parsed = parse_msprobe_name(name)
    except MsprobeNameError:
        return
    assert parsed.direction in ("forward", "backward") and parsed.op_type


def test_small_net_eps_changes_only_batchnorm_output():
    base, changed = simulate_small_net(), simulate_small_net(eps=1e-2)
    first = None
    for a, b in zip(base, changed):
        for io, xs, ys in (("input", a.inputs, b.inputs), ("output", a.outputs, b.outputs)):
            for slot, (x, y) in enumerate(zip(xs, ys)):
                if first is None and not np.array_equal(x, y):
                    first = (a.msprobe_name, io, slot)
    assert first == ("Functional.batch_norm.0.forward", "output", 0)
    diff = np.abs(base[1].outputs[0] - changed[1].outputs[0]).max()
    assert diff > 1.0  # past msprobe's "MaxAbsErr > 1" verdict
    assert np.array_equal(simulate_small_net(seed=3)[0].inputs[0], simulate_small_net(seed=3)[0].inputs[0])


def test_tree_opened_at_rank_folder_keeps_ids(tmp_path):
    rank_dir = write_msprobe_tree(str(tmp_path), simulate_small_net(), task="statistics", step=4, rank=6)
    items, _ = scan(rank_dir)
    assert {(r.step, r.rank) for r in records(items)} == {(4, 6)}
