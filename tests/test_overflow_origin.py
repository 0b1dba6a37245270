"""Overflow origin judgement: born / inherited / received, and which rank went bad first."""

from __future__ import annotations

from dumpscope.core.engines.overflow.origin import (
    Judgement, RankFirst, TensorSummary, collective_kind, first_rank, judge_op,
)


def T(io, slot=0, dtype="float16", lo=-1.0, hi=1.0, nan=0, pos=0, neg=0):
    return TensorSummary(io, slot, dtype, lo, hi, nan, pos, neg)


def test_finite_inputs_inf_output_is_born_with_the_range_reason():
    j = judge_op("Exp", [T("input", hi=88.7), T("output", hi=None, pos=3)])
    assert j.kind == "born"
    assert j.reason == "inputs finite (max 88.7) → output 0 +inf: float16 range exceeded (max 6.55e+04)"


def test_nan_from_finite_inputs_is_an_invalid_operation():
    j = judge_op("Sqrt", [T("input", lo=-3.0), T("output", nan=2)])
    assert j.kind == "born" and "max 3" in j.reason and "output 0 nan" in j.reason and "invalid" in j.reason


def test_nan_and_minus_inf_from_a_log_name_both_causes():
    j = judge_op("Log", [T("input", 0, "float32", lo=-0.5, hi=0.7), T("output", 0, "float32", nan=1, neg=1)])
    assert j.kind == "born"
    assert j.reason.endswith("→ output 0 nan and -inf: invalid operation (0/0, inf-inf, 0*inf, sqrt or log of a "
                             "negative…); log of 0 (or of a value that underflowed to 0)")


def test_inf_from_a_division_with_small_inputs_is_a_division_by_zero_not_a_range():
    j = judge_op("RealDiv", [T("input", 0, "float32", lo=0.0, hi=2.0), T("input", 1, "float32", lo=0.0, hi=0.0),
                             T("output", 0, "float32", pos=1)])
    assert j.reason.endswith("output 0 +inf: division by zero")
    assert "range" in judge_op("Mul", [T("input", 0, "float32", hi=2.0), T("output", 0, "float32", pos=1)]).reason


def test_bad_input_means_inherited():
    j = judge_op("Add", [T("input", 0), T("input", 1, nan=1), T("output", nan=4)])
    assert j.kind == "inherited" and j.reason.startswith("input 1 already nan")


def test_inputs_not_dumped_is_unknown():
    assert judge_op("Exp", [T("output", pos=1)]).kind == "unknown"
    assert judge_op("Exp", [TensorSummary("input", 0, "float16"), T("output", pos=1)]).kind == "unknown"


def test_collective_with_finite_inputs_received_it():
    j = judge_op("HcomAllReduce", [T("input"), T("output", pos=1)])
    assert j.kind == "received" and "all_reduce" in j.reason


def test_collective_kinds():
    assert collective_kind("HcomAllReduce") == "all_reduce"
    assert collective_kind("Distributed.all_reduce") == "all_reduce"
    assert collective_kind("HcomSend") == "send" and collective_kind("Distributed.recv") == "recv"
    assert collective_kind("ReduceSum") is None and collective_kind("Exp") is None


def R(rank, step, exec_index, kind, type_="Exp", ts=None):
    return RankFirst(rank, step, exec_index, f"op{rank}", type_, ts, Judgement(kind, ""))


def test_earlier_step_wins_whatever_the_rank():
    best, why = first_rank([R(0, 2, 1, "born"), R(1, 1, 9, "received", "HcomAllReduce")])
    assert best.rank == 1 and "step 1" in why


def test_rank_that_received_through_all_reduce_is_not_the_origin():
    best, why = first_rank([R(0, 0, 3, "received", "HcomAllReduce"), R(1, 0, 5, "born")])
    assert best.rank == 1 and "rank(s) 0 received" in why


def test_send_precedes_recv():
    best, _ = first_rank([R(0, 0, 2, "received", "HcomRecv"), R(1, 0, 4, "inherited", "HcomSend")])
    assert best.rank == 1


def test_all_reduce_on_every_rank_with_finite_inputs_is_the_collective_itself():
    best, why = first_rank([R(0, 0, 3, "received", "HcomAllReduce"), R(1, 0, 3, "received", "HcomAllReduce")])
    assert best.rank == 0 and "collective itself" in why


def test_timestamps_decide_when_every_rank_has_one():
    best, why = first_rank([R(0, 0, 1, "born", ts=500), R(1, 0, 7, "born", ts=100)])
    assert best.rank == 1 and "timestamp" in why
    best, why = first_rank([R(0, 0, 1, "born", ts=500), R(1, 0, 7, "born")])
    assert best.rank == 0 and "execution index" in why


def test_collectives_are_recognised_by_what_they_are_not_by_a_substring():
    for compute in ("BroadcastTo", "MatmulAllReduce", "MatMulAllReduce", "AllGatherMatmul", "MatmulReduceScatter",
                    "npu_mm_all_reduce_base", "npu_all_gather_base_mm", "ReduceSum", "ReduceMean", "SendRecvLike",
                    "broadcast_to", "gather", "scatter", "Gather"):
        assert collective_kind(compute) is None, compute
    assert collective_kind("gather", "Torch.gather.0.forward") is None
    assert collective_kind("gather", "Distributed.gather.0.forward") == "gather"
    assert collective_kind("AllReduce") == "all_reduce" and collective_kind("Broadcast") == "broadcast"
    assert collective_kind("all_gather_into_tensor") == "all_gather" and collective_kind("Receive") == "recv"
    assert collective_kind("HcomReduce") == "reduce" and collective_kind("isend") == "send"
    j = judge_op("BroadcastTo", [T("input"), T("output", pos=1)])
    assert j.kind == "born" and "received" not in j.reason


def test_an_input_that_was_not_dumped_is_not_called_finite():
    missing = TensorSummary("input", 0, "float32", dumped=False)
    j = judge_op("Sub", [missing, T("input", 1, hi=0.0), T("output", nan=2)])
    assert j.kind == "unknown" and j.reason.startswith("input 0 not dumped") and "finite" not in j.reason
    # a non-finite input that was dumped still says where the values came from
    assert judge_op("Sub", [missing, T("input", 1, nan=1), T("output", nan=2)]).kind == "inherited"
