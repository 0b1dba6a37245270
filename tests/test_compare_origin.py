"""compare.origin: born / inherited / constant, and the first divergence, on hand-made op facts."""

from __future__ import annotations

from dumpscope.core.engines.compare.origin import OpFacts, RowFacts, first_divergence, trace


def op(name, *rows, parameter=False, producers=(), input_producers=None):
    return OpFacts(name, [RowFacts(*r) if isinstance(r, tuple) else r for r in rows], parameter,
                   list(producers), dict(input_producers or {}))


def i(slot, verdict, kind="tensor", produced=True, rule=""):
    return RowFacts("input", slot, verdict, kind, produced, rule or verdict)


def o(slot, verdict, rule=""):
    return RowFacts("output", slot, verdict, "tensor", True, rule or verdict)


def walk(ops):
    origins = trace(ops)
    fd = first_divergence(ops, origins)
    # looked at only where a row did not pass (as compare hands them), the answer is the same
    erred = [k for k, x in enumerate(ops) if any(r.verdict != "pass" for r in x.rows)]
    assert first_divergence(ops, origins, erred) == fd
    return [x.kind for x in origins], fd


def test_born_then_inherited():
    ops = [op("A", i(0, "pass"), o(0, "pass")),
           op("B", i(0, "pass"), o(0, "error", "moved")),
           op("C", i(0, "error"), o(0, "error"), input_producers={0: "B"})]
    kinds, fd = walk(ops)
    assert kinds == [None, "born", "inherited"]
    assert (fd.op, fd.row, fd.cause, fd.rule) == (1, 1, "tensor", "moved")
    assert trace(ops)[2].via == "input.0 ← B"


def test_changed_constant_is_the_origin_not_an_inheritance():
    # the LayerNorm: only its epsilon (a constant, no producer) changed
    ln = op("LayerNorm", i(0, "pass"), i(5, "error", "scalar", False, "argument changed: 1e-05 → 0.5"),
            o(0, "error", "98% moved"))
    ops = [op("A", i(0, "pass"), o(0, "pass")), ln, op("Q", i(0, "error"), o(0, "error"))]
    kinds, fd = walk(ops)
    assert kinds == [None, "constant", "inherited"]
    assert (fd.op, fd.row, fd.cause) == (1, 2, "constant")
    assert fd.rule == "input.5 argument changed: 1e-05 → 0.5"


def test_constant_changed_without_effect_points_at_the_constant():
    ops = [op("M", i(0, "pass"), i(1, "error", "scalar", False, "argument changed: 1 → 2"), o(0, "pass"))]
    kinds, fd = walk(ops)
    assert kinds == ["constant"] and (fd.row, fd.cause) == (1, "constant")


def test_parameters_never_first_while_an_op_diverges():
    ops = [op("Parameter.w", o(0, "error"), parameter=True),
           op("A", i(0, "pass"), o(0, "pass")),
           op("B", i(0, "pass"), o(0, "error"))]
    kinds, fd = walk(ops)
    assert kinds == [None, None, "born"] and fd.op == 2
    only_params = walk(ops[:2])[1]
    assert only_params.op == 0 and only_params.cause == "tensor"


def test_input_changed_outside_the_dumped_ops_makes_the_reader_the_origin():
    # nothing before B erred, so B's bad input (different weights/data) shows first at B
    ops = [op("A", i(0, "pass"), o(0, "pass")), op("B", i(0, "error"), i(1, "pass"), o(0, "error", "moved"))]
    kinds, fd = walk(ops)
    assert kinds == [None, "born"]
    # ...and the answer says the op only shows a difference that came from outside (data or weights)
    assert trace(ops)[1].via == "input.0"
    assert fd.rule.startswith("input.0 already differs") and fd.rule.endswith("output: moved")


def test_born_with_clean_inputs_names_no_input():
    ops = [op("B", i(0, "pass"), i(1, "warning"), o(0, "error", "moved"))]
    assert trace(ops)[0].via is None and walk(ops)[1].rule == "moved"


def test_input_without_producer_does_not_carry_an_error():
    ops = [op("A", i(0, "pass"), o(0, "error")),
           op("B", i(0, "pass"), i(1, "error", produced=False), o(0, "error"))]
    assert walk(ops)[0] == ["born", "born"]


def test_first_erring_op_is_born_and_nothing_when_no_output_errs():
    ops = [op("A", o(0, "pass"), producers=["X"]),
           op("B", i(0, "error"), o(0, "error")), op("C", i(0, "error"), o(0, "error"))]
    ops[1].rows[0].produced = True
    kinds, fd = walk(ops)
    assert kinds == [None, "born", "inherited"] and fd.op == 1
    assert walk([op("A", i(0, "error"), o(0, "pass"))]) == ([None], None)
    assert walk([]) == ([], None)


def test_output_only_dumps_use_the_graph_producers():
    ops = [op("X", o(0, "error")), op("A", o(0, "error"), producers=["X"]), op("B", o(0, "error"), producers=["Y"])]
    kinds, fd = walk(ops)
    assert kinds == ["born", "inherited", "born"] and fd.op == 0


def test_same_sig_equal_signatures_answer_as_the_side_by_side_checks():
    """``_same_sig`` says at once that equal signatures are one tensor's: the side-by-side checks (norms within
    2^-6, means within 2^-6 of the norm) say so too, NaN, ±Inf, None and zeros included; and so does any
    other pair the checks are asked about."""
    import math
    import random

    from dumpscope.core.engines.compare.origin import _same_side, _same_sig

    values = [None, 0.0, -0.0, 1.0, -1.0, 1.0 + 2.0 ** -8, 3e300, -3e300, math.inf, -math.inf, math.nan, 1e-300]
    rng = random.Random(3)
    for _ in range(20000):
        a = tuple(rng.choice(values) for _ in range(4))
        b = a if rng.random() < 0.5 else tuple(rng.choice(values) for _ in range(4))
        sides = _same_side(a[0], a[1], b[0], b[1]) and _same_side(a[2], a[3], b[2], b[3])
        assert _same_sig(a, b) == sides, (a, b)
    assert _same_sig(None, None) and not _same_sig(None, (1.0, 1.0, 1.0, 1.0))


def test_a_walk_told_the_forward_calls_remembers_only_theirs_and_judges_alike():
    """A backward call carries what its forward call's tensors carry (``saved_from``); compare tells the walk
    which calls some backward call names (``forward_calls``) and only those are remembered: the same
    origins and first divergence as a walk that remembers every op."""
    from dumpscope.core.engines.compare.origin import Walk

    def ops():
        fwd = op("L.0.forward", i(0, "error"), o(0, "error"))
        other = op("M.0.forward", i(0, "pass"), o(0, "pass"))
        bwd = op("L.0.backward", i(0, "pass"), o(0, "error"))
        bwd.saved_from = "L.0.forward"
        return [fwd, other, bwd]

    def judged(forward_calls):
        w = Walk()
        w.forward_calls = forward_calls
        facts = ops()
        origins = [w.judge(x) for x in facts]
        return [(x.kind, x.via) for x in origins], first_divergence(facts, origins), sorted(w._op_err)

    every = judged(None)
    told = judged({"L.0.forward"})
    assert told[:2] == every[:2] and told[2] == ["L.0.forward"]
    assert every[0][2] == ("inherited", "saved tensors of L.0.forward")
    assert judged(set())[0] != every[0]  # (what is remembered is what the backward call is judged by)
