"""compare's causes on real MindSpore 2.10 training dumps (issue 29): an in-place buffer is not a cause, a
Parameter is named as such.

tests/data/real_ms210_causes.tar.gz (net.py inside, MindSpore 2.10.0 CPU graph mode, e2e dump, 3 iterations
of Momentum): ``lr`` trains with the learning rate x1.1, ``weight`` with conv2.weight x1.5.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import unpack_data
from dumpscope.core.engines.compare import compare_dumps
from dumpscope.core.query import open_query

MOMENTUM = "Default/optimizer-Momentum/ApplyMomentum-op0"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return unpack_data(tmp_path_factory, "real_ms210_causes")


def _doc(data, tmp_path_factory, variant, step=0):
    cache = tmp_path_factory.mktemp("cache")
    return compare_dumps(open_query(str(data / "golden"), cache_directory=cache),
                         open_query(str(data / variant), cache_directory=cache), step=step)


def test_learning_rate_is_the_cause_not_the_weight_updated_in_place(data, tmp_path_factory):
    doc = _doc(data, tmp_path_factory, "lr")
    fd = doc["first_divergence"]
    assert (fd["name"], fd["origin"]) == (MOMENTUM, "born")
    assert fd["rule"].startswith("input.2 (Parameter learning_rate) already differs")
    rows = {(r["io"], r["slot"]): r for r in doc["rows"] if r["name"] == MOMENTUM}
    # what MindSpore wrote: the weight input is the updated weight (equal to the output bit for bit) ...
    files = sorted((data / "lr").rglob("ApplyMomentum.*ApplyMomentum-op0.*.npy"))
    w_in = np.load(next(f for f in files if ".input.0." in f.name and "/0/0/" in str(f)))
    w_out = np.load(next(f for f in files if ".output.0." in f.name and "/0/0/" in str(f)))
    assert np.array_equal(w_in, w_out)
    assert rows[("input", 0)]["judgement"] == "in-place"
    # ... and the learning rate is 0.01 vs 0.011
    assert (rows[("input", 2)]["golden"]["max"], rows[("input", 2)]["target"]["max"]) == pytest.approx((0.01, 0.011))


def test_changed_weight_first_shows_at_the_op_reading_it(data, tmp_path_factory):
    fd = _doc(data, tmp_path_factory, "weight")["first_divergence"]
    assert fd["name"].endswith("conv2-Conv2d/Conv2D-op0") and fd["origin"] == "born"
    assert fd["rule"].startswith("input.1 (Parameter conv2.weight) already differs")


@pytest.fixture(scope="module")
def cf(tmp_path_factory):
    return unpack_data(tmp_path_factory, "real_ms210_causes_cf")


def _first(cf, tmp_path_factory, variant):
    cache = tmp_path_factory.mktemp("cache")
    return compare_dumps(open_query(str(cf / "golden"), cache_directory=cache),
                         open_query(str(cf / variant), cache_directory=cache))


def _npy(root, pattern):
    (f,) = sorted(root.rglob(pattern))[:1]
    return np.load(f)


def test_weight_changed_inside_a_while_loop_shows_at_the_loops_copy_of_it(cf, tmp_path_factory):
    doc = _first(cf, tmp_path_factory, "loopw")
    fd = doc["first_divergence"]
    assert (fd["name"], fd["io"], fd["origin"]) == ("Default/TensorMove-op0", "output", "born")
    g = _npy(cf / "golden", "TensorMove.Default_TensorMove-op0.*.output.0.*.npy")
    t = _npy(cf / "loopw", "TensorMove.Default_TensorMove-op0.*.output.0.*.npy")
    assert np.allclose(t, 1.5 * g)  # numpy: the loop's weight copy is the x1.5 weight


def test_custom_bprop_doubling_shows_at_the_gradient_it_feeds_and_is_listed(cf, tmp_path_factory):
    doc = _first(cf, tmp_path_factory, "bprop")
    fd = doc["first_divergence"]
    assert "dense1-Dense/Grad_BiasAdd/BiasAddGrad" in fd["name"] and fd["origin"] == "born"
    assert any(n.endswith("Mul-op0") for n in doc["unmatched_target"])  # the bprop's Mul, target only
    row = next(r for r in doc["rows"] if r["name"] == fd["name"] and r["io"] == "output")
    assert row["target"]["max"] == pytest.approx(2 * row["golden"]["max"], rel=1e-6)


def test_the_loops_weight_copy_names_its_undumped_input_the_parameter(cf, tmp_path_factory):
    """MindSpore dumps no input of the loop's ``TensorMove``: the .ir says it copies ``Load(%para3_▸dense2.weight)``,
    so the cause names that Parameter (spelled as declared, without the ``▸`` trace mark)."""
    fd = _first(cf, tmp_path_factory, "loopw")["first_divergence"]
    assert not sorted((cf / "loopw").rglob("TensorMove.Default_TensorMove-op0.*.input.*"))  # not dumped indeed
    assert fd["rule"].startswith("input.0 (Parameter dense2.weight, whose dump after the step differs) was not dumped")
    assert "▸" not in fd["rule"]
    # MindSpore's own dump of that Parameter (written after the step's update) differs
    g, t = (_npy(cf / side, "Parameter.dense2_weight.*.npy") for side in ("golden", "loopw"))
    assert not np.array_equal(g, t)


def test_custom_bprop_doubling_names_the_target_only_mul_that_feeds_it(cf, tmp_path_factory):
    doc = _first(cf, tmp_path_factory, "bprop")
    fd = doc["first_divergence"]
    assert "input.0 comes from Expand/_Muls/Mul-op0, which only the target ran" in fd["rule"]
    assert fd["target_only_before"] == ["Expand/_Muls/Mul-op0"]
    # numpy on what MindSpore wrote: the Mul multiplies by 2, the gradient reads the Mul's output, sums it
    # over the batch, and is twice the golden's
    t, g = cf / "bprop", cf / "golden"
    mul = _npy(t, "Mul.Expand__Muls_Mul-op0.*.output.0.*.npy")
    assert float(_npy(t, "Mul.Expand__Muls_Mul-op0.*.input.1.*.npy")) == 2.0
    grad_in = _npy(t / "rank_0/Net/2", "BiasAddGrad.*.input.0.*.npy")
    grad_out = _npy(t / "rank_0/Net/2", "BiasAddGrad.*.output.0.*.npy")
    assert np.array_equal(grad_in, mul) and np.allclose(grad_out, mul.sum(0))
    assert np.allclose(grad_out, 2 * _npy(g / "rank_0/Net/2", "BiasAddGrad.*.output.0.*.npy"))


def test_the_bprop_mul_runs_before_the_gradients_it_feeds(cf, tmp_path_factory):
    """MindSpore's own order (ms_execution_order_graph_2.csv: Mul, …, MatMul-op4, BiasAddGrad-op2) and the
    graphs interleaved by time put the target-only Mul before both its consumers."""
    q = open_query(str(cf / "bprop"), cache_directory=tmp_path_factory.mktemp("cache"))
    at = {op.name.rsplit("/", 1)[-1]: op.exec_index for op in q.ops(0, 0) if op.graph == "2"}
    assert at["Mul-op0"] < at["MatMul-op4"] and at["Mul-op0"] < at["BiasAddGrad-op2"]
