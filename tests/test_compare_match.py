"""compare.match: op pairing rules and slot pairing (origins: test_compare_origin)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpscope.core.engines.compare.match import (
    OpRef,
    match_ops,
    pair_slots,
    same_slots,
    normalize_name,
    op_token,
)


def ops(*specs: tuple[str, str]) -> list[OpRef]:
    return [OpRef(name=n, type=t, exec_index=i, key=("k", i)) for i, (n, t) in enumerate(specs)]


def rules(res) -> dict[tuple[str, str], str]:
    return {(g.name, t.name): r for g, t, r in res.pairs}


def test_exact_names_first():
    g = ops(("net/conv1/Conv2D", "Conv2D"), ("net/relu", "ReLU"))
    t = ops(("net/relu", "ReLU"), ("net/conv1/Conv2D", "Conv2D"))
    res = match_ops(g, t)
    assert rules(res) == {("net/conv1/Conv2D", "net/conv1/Conv2D"): "name", ("net/relu", "net/relu"): "name"}
    assert [p[1].exec_index for p in res.pairs] == [0, 1]  # target execution order
    assert res.unmatched_golden == [] and res.unmatched_target == []


def test_normalized_names_and_primfunc():
    g = ops(("Default/net-Net/Conv2D-op1", "Conv2D"), ("Default/PrimFunc_Add-op3", "Add"))
    t = ops(("Default_net-Net_Conv2D-op1", "Conv2D"), ("Default_Add-op3", "Add"))
    assert normalize_name("a/b.c\\d e") == "a_b_c_d_e"
    assert set(rules(match_ops(g, t)).values()) == {"name_normalized"}


def test_op_token_only_when_unique():
    assert op_token("Default/network-WithLossCell/Conv2D-op12") == "Conv2D-op12"
    assert op_token("resnet/conv1") is None
    g = ops(("Default/a/Conv2D-op12", "Conv2D"), ("Default/b/MatMul-op3", "MatMul"), ("Default/c/MatMul-op3", "MatMul"))
    t = ops(("Conv2D-op12", "Conv2D"), ("MatMul-op3", "MatMul"))
    res = match_ops(g, t)
    r = rules(res)
    assert r[("Default/a/Conv2D-op12", "Conv2D-op12")] == "name_normalized"
    # the MatMul-op3 token is not unique in golden: not paired by token, and the type counts
    # (2 vs 1) are inconsistent, so not by order either
    assert [o.name for o in res.unmatched_golden] == ["Default/b/MatMul-op3", "Default/c/MatMul-op3"]
    assert [o.name for o in res.unmatched_target] == ["MatMul-op3"]


def test_order_type_for_renamed_ops():
    g = ops(("x/MatMul_a", "MatMul"), ("x/Add_a", "Add"), ("x/MatMul_b", "MatMul"), ("gone", "Cast"))
    t = ops(("y/mm0", "MatMul"), ("y/add", "Add"), ("y/mm1", "MatMul"), ("new1", "Cast"), ("new2", "Cast"))
    res = match_ops(g, t)
    assert rules(res) == {
        ("x/MatMul_a", "y/mm0"): "order_type",
        ("x/Add_a", "y/add"): "order_type",
        ("x/MatMul_b", "y/mm1"): "order_type",
    }
    assert [o.name for o in res.unmatched_golden] == ["gone"]
    assert [o.name for o in res.unmatched_target] == ["new1", "new2"]


def test_repeated_names_pair_in_order():
    g = [OpRef("loop/Add", "Add", 5, "g5"), OpRef("loop/Add", "Add", 1, "g1")]
    t = [OpRef("loop/Add", "Add", 2, "t2"), OpRef("loop/Add", "Add", 9, "t9")]
    res = match_ops(g, t)
    assert [(a.key, b.key, r) for a, b, r in res.pairs] == [("g1", "t2", "name"), ("g5", "t9", "name")]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from(["Add", "Mul"])), max_size=12))
def test_matching_self_pairs_everything_by_name(specs):
    g = ops(*specs)
    res = match_ops(g, ops(*specs))
    assert len(res.pairs) == len(specs) and not res.unmatched_golden and not res.unmatched_target
    assert all(a.name == b.name and r == "name" for a, b, r in res.pairs)
    # every op is used at most once
    assert len({id(a) for a, _, _ in res.pairs}) == len(specs)


# ---- first divergence -----------------------------------------------------------------


def test_pair_slots_by_position_inputs_first():
    g = {("output", 0): "go0", ("input", 2): "gi2", ("input", 1): "gi1", ("output", 3): "go3"}
    t = {("input", 1): "ti1", ("input", 2): "ti2", ("output", 0): "to0"}
    pairs, missing = pair_slots(g, t)
    assert [(k, a, b) for k, a, b in pairs] == [(("input", 1), "gi1", "ti1"), (("input", 2), "gi2", "ti2"),
                                               (("output", 0), "go0", "to0")]
    assert missing == [("output", 3)]


def test_generated_expand_names_pair_by_place_not_by_their_counter():
    # the target expanded one more Muls before (another MindSpore version, or a change earlier in
    # the net): its Expand/_Muls/Mul-op1 is the golden's Mul-op0, not the golden's Mul-op1
    g = ops(("Default/A-op0", "A"), ("Expand/_Muls/Mul-op0", "Mul"), ("Default/B-op0", "B"),
            ("Expand/_Muls/Mul-op1", "Mul"))
    t = ops(("Expand/_Muls/Mul-op0", "Mul"), ("Default/A-op0", "A"), ("Expand/_Muls/Mul-op1", "Mul"),
            ("Default/B-op0", "B"), ("Expand/_Muls/Mul-op2", "Mul"))
    res = match_ops(g, t)
    assert rules(res) == {
        ("Default/A-op0", "Default/A-op0"): "name", ("Default/B-op0", "Default/B-op0"): "name",
        ("Expand/_Muls/Mul-op0", "Expand/_Muls/Mul-op1"): "order_type",
        ("Expand/_Muls/Mul-op1", "Expand/_Muls/Mul-op2"): "order_type",
    }
    assert [o.name for o in res.unmatched_target] == ["Expand/_Muls/Mul-op0"] and res.unmatched_golden == []


def test_generated_ops_of_a_reordered_branch_pair_across_the_graph_then_anchor_their_neighbours():
    # independent branches ran in another order, so the op before each expansion differs; the
    # SoftmaxBackward kinds are one each on both sides (pair across the graph), then the Muls
    # right after them shares that new anchor — and the golden's other Muls, between X and Y,
    # does not take the target's Mul-op1 although both follow X
    g = ops(("X-op0", "X"), ("Expand/_Muls/Mul-op1", "Mul"), ("Y-op0", "Y"),
            ("Expand/_SoftmaxBackward/Mul-op0", "Mul"), ("Expand/_Muls/Mul-op3", "Mul"))
    t = ops(("Y-op0", "Y"), ("X-op0", "X"), ("Expand/_SoftmaxBackward/Mul-op0", "Mul"),
            ("Expand/_Muls/Mul-op1", "Mul"))
    res = match_ops(g, t)
    r = rules(res)
    assert r[("Expand/_SoftmaxBackward/Mul-op0", "Expand/_SoftmaxBackward/Mul-op0")] == "name"
    assert r[("Expand/_Muls/Mul-op3", "Expand/_Muls/Mul-op1")] == "order_type"
    assert [o.name for o in res.unmatched_golden] == ["Expand/_Muls/Mul-op1"]  # the same name, another op


def test_generated_ops_that_do_not_line_up_stay_unmatched():
    g = ops(("A-op0", "A"), ("Expand/_Muls/Mul-op0", "Mul"), ("Expand/_Muls/Mul-op1", "Mul"))
    t = ops(("A-op0", "A"), ("Expand/_Muls/Mul-op0", "Mul"))
    res = match_ops(g, t)
    assert len(res.pairs) == 1
    assert len(res.unmatched_golden) == 2 and len(res.unmatched_target) == 1


_IOS = st.sampled_from(["input", "output", "workspace"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_IOS, st.integers(0, 3)), max_size=6), st.booleans(),
       st.lists(st.tuples(_IOS, st.integers(0, 3)), max_size=6))
def test_same_slots_is_pair_slots_when_it_answers(g_keys, like_golden, t_keys):
    """``same_slots`` (compare's usual op: both sides in the same slots, listed in pair order) gives what
    ``pair_slots`` of the keyed tensors gives; for anything else it gives None, never other pairs."""
    from types import SimpleNamespace

    from dumpscope.core.query.rows import slot_key

    def tensors(keys, side):
        out = [SimpleNamespace(io=io, slot=slot, side=side, k=k) for k, (io, slot) in enumerate(keys)]
        out.sort(key=slot_key)  # as ``tensors_of`` lists an op's
        return out

    g = tensors(g_keys, "g")
    t = tensors(g_keys if like_golden else t_keys, "t")
    got = same_slots(g, t)
    keyed, missing = pair_slots({(x.io, x.slot): x for x in g}, {(x.io, x.slot): x for x in t})
    if got is not None:
        assert got == [(a, b) for _, a, b in keyed] and not missing
    keys = [(x.io, x.slot) for x in g]
    plain = len(set(keys)) == len(keys) and len({slot_key(x) for x in g}) == len(g)
    if like_golden and plain:  # the usual op always takes the short way
        assert got is not None


def _pair_by_reference(golden, target, keyfn, rule, pairs, unique_only=False, equal_counts_only=False):
    """``_pair_by`` as it was before its one-key-a-side way (a list of ops per key, pairs by occurrence)."""
    from collections import defaultdict

    gk, tk = defaultdict(list), defaultdict(list)
    for side, ops_ in ((gk, golden), (tk, target)):
        for op in ops_:
            k = keyfn(op)
            if k is not None:
                side[k].append(op)
    used = set()
    for k, gops in gk.items():
        tops = tk.get(k)
        if not tops or (unique_only and (len(gops) != 1 or len(tops) != 1)) or \
                (equal_counts_only and len(gops) != len(tops)):
            continue
        for g, t in zip(gops, tops):
            pairs.append((g, t, rule))
            used.update((id(g), id(t)))
    return [o for o in golden if id(o) not in used], [o for o in target if id(o) not in used]


_NAMES = st.lists(st.sampled_from(["a", "b", "c", "d", "e", "-"]), max_size=8)


@settings(max_examples=400, deadline=None)
@given(_NAMES, _NAMES, st.booleans(), st.booleans(), st.booleans())
def test_pair_by_is_the_occurrence_pairing(g_names, t_names, unique_fold, unique_only, equal_counts_only):
    """``_pair_by``'s way for keys that occur once a side gives the pairs and leftovers, in their order, of
    the pairing by occurrence (``-``: an op with no key)."""
    from dumpscope.core.engines.compare.match import _pair_by

    if unique_fold:  # most places: each name once a side
        g_names, t_names = list(dict.fromkeys(g_names)), list(dict.fromkeys(t_names))
    g, t = ops(*[(n, "Add") for n in g_names]), ops(*[(n, "Add") for n in t_names])
    key = lambda o: None if o.name == "-" else o.name  # noqa: E731
    got_pairs, want_pairs = [], []
    got = _pair_by(g, t, key, "name", got_pairs, unique_only, equal_counts_only)
    want = _pair_by_reference(g, t, key, "name", want_pairs, unique_only, equal_counts_only)
    assert [(a.exec_index, b.exec_index) for a, b, _ in got_pairs] == \
        [(a.exec_index, b.exec_index) for a, b, _ in want_pairs]
    assert [[o.exec_index for o in side] for side in got] == [[o.exec_index for o in side] for side in want]
