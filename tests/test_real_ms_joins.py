"""Dump files joined to the graph node that ran them, on the real MindSpore dumps with graphs (tests/data):
checked by data flow, with numpy, not by names.  A joined op's dumped input i must be, bit for bit, the
dumped output of the producer its node reads (``inputs_from[i]`` = ``P:k``, the producer's latest run
before it), or the constant its node reads (``Tensor(shape=…, dtype=…, value=…)``).

Found wrong before the tensor check (issue 29): real_ms210_cf_nan graph 6 (the while body) — MindSpore
named the file of ``x + 0.1`` ``Add-op0`` and the ``.ir`` node ``Add-op1`` (its counter ``i + 1`` the
other way round), so ``Add-op0`` showed the counter's inputs and source; real_mindspore_210_block ``nan``
— the two ``Grad_Pow/Pow`` files were paired with each other's node by timestamp order."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import unpack_data
from dumpscope.core.query import open_query

_CONST = re.compile(r"^Tensor\(shape=\[([^\]]*)\], dtype=(\w+), value=([-+0-9.eE]+|True|False)\)$")

DUMPS = [("real_ms210_cf_nan", "cf"), ("real_ms210_cf_nan", "cf_golden"),
         ("real_mindspore_210_block", "nan"), ("real_mindspore_210_block", "golden"),
         ("real_ms210_causes_cf", "loopw"), ("real_ms210_causes_cf", "bprop"),
         ("real_mindspore_cf_io", "ms210_loop"), ("real_ms210_dp2", "dp2"),
         ("real_mindspore_train", "ms210_transformer"), ("real_mindspore_train", "ms27_stem")]


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            done[name] = unpack_data(tmp_path_factory, name)
        return done[name]

    return get


def _flow_checks(root: Path, cache: Path) -> tuple[int, list[str]]:
    """(inputs checked, what disagrees) over every op of every rank and step of one dump."""
    q = open_query(str(root), cache_directory=cache)
    checked, wrong = 0, []
    for rank in q.ranks():
        for step in q.steps(rank):
            ops = [o for o in q.ops(rank=rank, step=step) if o.kind == "op"]
            runs: dict[tuple[str, str], list] = {}
            for o in ops:
                runs.setdefault((o.graph, o.name), []).append(o)
            for op in ops:
                reads = q.show_json(op).get("inputs_from") or []
                for t in q.tensors(op.id):
                    if t.io != "input" or t.slot >= len(reads):
                        continue
                    got = np.load(t.path)
                    src = reads[t.slot]
                    const = _CONST.match(src)
                    if const:
                        shape, dtype, value = const.groups()
                        ok = got.dtype.name == dtype.lower() and got.size == 1 and np.isclose(
                            float(got.ravel()[0]), float(value == "True" if value in ("True", "False") else value))
                    else:
                        m = re.match(r"^(.*):(\d+)$", src)
                        before = [p for p in runs.get((op.graph, m.group(1)) if m else ("", ""), [])
                                  if p.exec_index is not None and p.exec_index < op.exec_index]
                        outs = [u for u in q.tensors(before[-1].id) if u.io == "output" and u.slot == int(m.group(2))] \
                            if before and m else []
                        if not outs:
                            continue  # the producer's output was not dumped (or runs in another graph)
                        want = np.load(outs[0].path)
                        ok = got.dtype == want.dtype and got.tobytes() == want.tobytes()
                    checked += 1
                    if not ok:
                        wrong.append(f"step {step} graph {op.graph} {op.name} (file {op.file_name}) input {t.slot} "
                                     f"is not {src}")
    return checked, wrong


@pytest.mark.parametrize("name, sub", DUMPS, ids=[f"{n}/{s}" for n, s in DUMPS])
def test_every_dumped_input_is_what_its_joined_node_reads(unpacked, tmp_path, name, sub):
    checked, wrong = _flow_checks(unpacked(name) / sub, tmp_path)
    assert checked > 0
    assert wrong == []


def test_the_while_body_adds_are_joined_by_what_they_hold(unpacked, tmp_path):
    """Graph 6 of cf_nan: the file of ``x + 0.1`` (float32 [2, 4], read from the Sqrt) is the ``.ir``'s
    Add-op1, the file of the counter ``i + 1`` (int32) its Add-op0; every run of both, both dumps."""
    for sub in ("cf", "cf_golden"):
        q = open_query(str(unpacked("real_ms210_cf_nan") / sub), cache_directory=tmp_path / sub)
        adds = [o for o in q.ops() if o.graph == "6" and o.type == "Add"]
        assert len(adds) == 8  # 2 Adds x 2 loop iterations x 2 steps
        for op in adds:
            dtypes = {t.dtype for t in q.tensors(op.id)}
            reads = q.show_json(op)["inputs_from"]
            if op.file_name.endswith("Add-op0"):
                assert (dtypes, op.name, reads[0]) == ({"float32"}, "Default/network-WithLossCell/_backbone-Net/Add-op1",
                                                       "Default/network-WithLossCell/_backbone-Net/Sqrt-op0:0")
            else:
                assert (dtypes, op.name, reads[0]) == ({"int32"}, "Default/network-WithLossCell/_backbone-Net/Add-op0",
                                                       "param:фi")
            assert op.join_rule == "scope_type_tensors" and op.join_note is None


def test_a_kernel_graph_input_without_a_name_is_read_with_its_tensor(unpacked):
    """The while body's inputs come from another graph and have no name in the .ir (``%para1_: <Tensor…``):
    they were read as a node named ``: <Tensor[Float32], (2, 4)> : [2, 4]`` without a data type."""
    from dumpscope.core.graphs import load_graph_file

    ir = unpacked("real_ms210_cf_nan") / "cf" / "rank_0" / "graphs" / "ms_output_trace_code_graph_6.ir"
    (graph,) = load_graph_file(str(ir), "ms_ir")
    params = {n.name: [(d["dtype"], d["shape"]) for d in n.output_descs]
              for n in graph.nodes.values() if n.type == "Parameter"}
    assert params == {"%para1": [("float32", [2, 4])], "%para2": [("int32", [])]}
