"""The GE text parser and the run grouping stay linear in their input (issue 30): a file of many
one-line messages or stray ``}`` lines counted newlines from the start of the text for every
line (80k lines 46 s, 1M lines > 10 min); many dump files of one op in one step folder (a loop,
dynamic shapes) were grouped into runs by scanning every run for each file (65k files 7.5 min)."""

from __future__ import annotations

import random
import sys

from dumpscope.core.index import op_groups
from dumpscope.core.graphs import pbtext
from dumpscope.core.graphs.ge_text import parse_ge_text
from synth.ge_graph_writer import one_line_ge_text


class _CountingText(str):
    """A text that counts the characters its ``count`` calls look at (the line numbering's work)."""

    looked = 0

    def count(self, sub, start=0, end=None):  # type: ignore[override]
        end = len(self) if end is None else end
        _CountingText.looked += max(0, end - start)
        return str.count(self, sub, start, end)


def test_line_numbers_cost_one_pass_over_200k_lines():
    text = _CountingText(one_line_ge_text(200_000))
    _CountingText.looked = 0
    root, reader = pbtext.parse_text_tree(text, "g.txt")
    assert _CountingText.looked <= len(text)  # was ~ lines x length / 2
    assert len(root["graph"][0]["op"]) == 200_000
    # the stray '}' lines are reported with their right line numbers
    assert reader.warnings[:2] == ["g.txt:200004: unbalanced '}'", "g.txt:200005: unbalanced '}'"]
    assert reader.bad_lines == 200_000 // 50


def _calls(text: str) -> int:
    """The function calls (Python and C) ``parse_ge_text`` makes on ``text``: a count of work that does not
    depend on the machine or its load (the wall-clock ratio is benchmarks/bench_parsers_linear.py's)."""
    calls = 0

    def count(frame, event, arg) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(count)
    try:
        graphs = parse_ge_text(text)
    finally:
        sys.setprofile(None)
    assert sum(len(g.nodes) for g in graphs) > 0
    return calls


def test_ge_text_of_one_line_messages_scales_linearly():
    """8x the input, 8x the calls (a loop over lines per line would be ~64x); the one C call that scans the
    text, the line numbering's ``count``, is held to one pass by the test above."""
    ratio = _calls(one_line_ge_text(8_000)) / _calls(one_line_ge_text(1_000))
    assert 7 < ratio < 9, ratio


def _old_split_runs(units):
    ordered = sorted(units, key=lambda u: (u[5] or 0, u[0]))
    runs, seen = [], []
    for unit in ordered:
        slots = set(unit[16].split())
        for run, used in zip(runs, seen):
            if not (slots & used):
                run.append(unit)
                used |= slots
                break
        else:
            runs.append([unit])
            seen.append(set(slots))
    return runs


def _unit(uid: int, ts: int, slots: str) -> tuple:
    return (uid, "g", "op", "f", "Add", ts, "p", None, None, None, "/x", "npy", None, None, None, None, slots)


def test_split_runs_gives_the_same_runs_as_before():
    rng = random.Random(5)
    names = ["input.0", "input.1", "output.0", "output.1", "input.2"]
    for _ in range(300):
        units = [_unit(i, rng.randrange(20), " ".join(rng.sample(names, rng.randrange(0, 4))))
                 for i in range(rng.randrange(1, 40))]
        assert op_groups.split_runs(units) == _old_split_runs(units)


def test_split_runs_is_linear_for_many_files_of_one_op():
    """20k files of one op (each a whole call: the same slots) are 20k runs; the work was quadratic."""
    checks = 0

    class CountingSet(set):
        def __and__(self, other):
            nonlocal checks
            checks += 1
            return set.__and__(self, other)

        def isdisjoint(self, other):
            nonlocal checks
            checks += 1
            return set.isdisjoint(self, other)

    real_set = set
    units = [_unit(i, i, "input.0 input.1 output.0") for i in range(20_000)]
    op_groups.set = CountingSet  # type: ignore[attr-defined]
    try:
        runs = op_groups.split_runs(units)
    finally:
        del op_groups.set
    assert real_set is set
    assert len(runs) == 20_000 and all(len(r) == 1 for r in runs)
    assert checks <= 4 * len(units), checks
