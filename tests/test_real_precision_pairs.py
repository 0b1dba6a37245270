"""compare judged at the run's own precision, on real msprobe 26.2 dumps (issue 28).

tests/data/real_precision_pairs.tar.gz (made by tests/data/precision_pairs/make_pairs.py, torch 2.14.1 CPU):
two nets, a float32 golden against bfloat16/float16 autocast targets with and without a bug.  Held out:
the precision rules were developed on ../shared/real_dumps/gpu-msprobe-mixer (checked last here, skipped
without ../shared) and not tuned on these.  The honest answers are the make script's construction.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any, Optional

import pytest

from conftest import shared, unpack_data
from dumpscope.core.engines.compare import compare_dumps
from dumpscope.core.query import open_query

NO = None
#: (net, target) -> the first divergence at step 0 (name, origin), the make script's bug
WANT: dict[tuple[str, str], Optional[tuple[str, str]]] = {
    ("tiny_gpt", "fp32_rerun"): NO, ("tiny_gpt", "bf16"): NO, ("tiny_gpt", "fp16"): NO,
    ("tiny_gpt", "bf16_arg"): ("Functional.layer_norm.1.forward", "constant"),  # ln2 eps 1e-5 -> 1e-1
    # the attention projection scaled in place after it was dumped: the residual add reads it first
    ("tiny_gpt", "bf16_kernel"): ("Tensor.__add__.1.forward", "born"),
    ("tiny_gpt", "fp32_kernel"): ("Tensor.__add__.1.forward", "born"),
    ("tiny_cnn", "fp32_rerun"): NO, ("tiny_cnn", "bf16"): NO, ("tiny_cnn", "fp16"): NO,
    ("tiny_cnn", "bf16_arg"): ("Functional.leaky_relu.1.forward", "constant"),  # slope 0.01 -> 0.2
    ("tiny_cnn", "bf16_kernel"): ("Functional.conv2d.1.forward", "born"),  # one weight element set to 3.0
    ("tiny_cnn", "fp32_kernel"): ("Functional.conv2d.1.forward", "born"),
}
TENSOR_TARGETS = [k for k in WANT if k[1] != "fp32_kernel"]  # fp32_kernel: statistics dumps only


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_precision_pairs")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def compare(data: Path, cache: Path, net: str, task: str, target: str, step: int = 0) -> dict[str, Any]:
    golden = open_query(str(data / net / task / "fp32"), cache_directory=cache)
    return compare_dumps(golden, open_query(str(data / net / task / target), cache_directory=cache), step=step)


def answer(doc: dict[str, Any]) -> Optional[tuple[str, str]]:
    fd = doc["first_divergence"]
    return None if fd is None else (fd["name"], fd["origin"])


@pytest.mark.parametrize("net,target", TENSOR_TARGETS)
def test_tensor_pairs_name_the_bug_or_nothing(data, cache, net, target):
    doc = compare(data, cache, net, "tensor", target)
    assert answer(doc) == WANT[(net, target)], doc["first_divergence"]


@pytest.mark.parametrize("step", [0, 1])
@pytest.mark.parametrize("net,target", list(WANT))
def test_statistics_pairs_name_the_bug_or_nothing(data, cache, net, target, step):
    doc = compare(data, cache, net, "statistics", target, step)
    want = WANT[(net, target)]
    if step == 1 and target == "fp32_kernel":
        # at step 1 the weights already differ by step 0's bug: the first op reading one is where it shows
        assert doc["first_divergence"]["origin"] == "born" and doc["first_divergence"]["io"] == "output"
        return
    if step == 1 and want is not None and want[1] == "constant":
        assert answer(doc) == want
        return
    assert answer(doc) == want, doc["first_divergence"]


@pytest.mark.parametrize("net", ["tiny_gpt", "tiny_cnn"])
@pytest.mark.parametrize("target", ["bf16", "fp16"])
def test_mixed_precision_without_a_bug_has_no_error_row_and_says_why(data, cache, net, target):
    doc = compare(data, cache, net, "tensor", target)
    bad = [(r["name"], r["io"], r["slot"], r["rule"]) for r in doc["rows"] if r["verdict"] == "error"]
    assert bad == []
    dtype = {"bf16": "bfloat16", "fp16": "float16"}[target]
    assert doc["precision"]["target"].get(dtype, 0) > 0 and dtype in doc["precision"]["target_text"]
    ev = doc["evidence"]
    assert ev["text"].startswith("no divergence: the nearest to the line is ")
    assert ev["nearest"] and all(0 < n["share_of_allowed"] <= 1 for n in ev["nearest"])
    assert ev["largest"]["rel_err"] > 0 and not ev["bit_identical"]
    judged = {r["precision"] for r in doc["rows"] if r["precision"]}
    assert dtype in judged  # rows are judged at the coarser stored dtype, not the decoded float32


def test_bit_identical_rerun_says_so(data, cache):
    doc = compare(data, cache, "tiny_cnn", "tensor", "fp32_rerun")
    assert doc["evidence"]["bit_identical"] and "bit-identical" in doc["evidence"]["text"]


def test_kernel_bug_rows_say_born_inherited_and_noise(data, cache):
    doc = compare(data, cache, "tiny_gpt", "tensor", "bf16_kernel")
    judgements = {r["judgement"] for r in doc["rows"]}
    assert {"noise", "inherited", "changed"} <= judgements
    # the target-only in-place op that made the difference is listed, not hidden
    assert any(n.startswith("Tensor.mul_.") for n in doc["unmatched_target"])
    # what msprobe itself recorded: the residual add's input is the projection's output x 1.25
    raw = json.loads((data / "tiny_gpt" / "tensor" / "bf16_kernel" / "step0").glob("*/dump.json").__next__()
                     .read_text())["data"]
    proj_max = raw["Functional.linear.1.forward"]["output"][0]["Max"]
    add_in = raw["Tensor.__add__.1.forward"]["input_args"][1]["Max"]
    assert add_in == pytest.approx(1.25 * proj_max, rel=2 ** -7)


def test_one_tensor_one_verdict(data, cache):
    """A producer's output and its consumer's input are the same tensor: the same verdict and judgement."""
    doc = compare(data, cache, "tiny_cnn", "tensor", "bf16_kernel")
    by_key: dict[tuple, set] = {}
    for r in doc["rows"]:
        if r["mode"] != "tensor" or r["kind"] != "tensor" or r["golden"]["max"] is None:
            continue
        key = (len(r["golden"]["shape"]), r["golden"]["max"], r["golden"]["min"], r["target"]["max"],
               r["target"]["min"])
        by_key.setdefault(key, set()).add((r["verdict"], r["judgement"] in ("noise",)))
    assert by_key and all(len(v) == 1 for v in by_key.values())


MIXER_WANT = {"cpu_fp32": None, "gpu_bf16": None, "gpu_fp16": None,
              "cpu_bug": "Functional.gelu.1.forward", "gpu_bf16_bug": "Functional.gelu.1.forward"}


@pytest.fixture(scope="module")
def mixer(tmp_path_factory) -> Path:
    tar = shared("real_dumps", "gpu-msprobe-mixer.tar.gz")
    out = tmp_path_factory.mktemp("mixer")
    with tarfile.open(tar) as t:
        t.extractall(out, filter="data")
    return out / "mixout" / "mixer"


@pytest.mark.parametrize("task", ["tensor", "statistics"])
@pytest.mark.parametrize("target", list(MIXER_WANT))
def test_real_gpu_golden_pairs(mixer, cache, task, target):
    """The development pairs: a real H100 float32 golden against CPU, bf16 and fp16 runs (its README's answers)."""
    golden = open_query(str(mixer / task / "gpu_fp32"), cache_directory=cache)
    doc = compare_dumps(golden, open_query(str(mixer / task / target), cache_directory=cache), step=0)
    fd = doc["first_divergence"]
    assert (fd and fd["name"]) == MIXER_WANT[target]
