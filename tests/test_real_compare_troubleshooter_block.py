"""compare on real Troubleshooter 1.0.18 pairs (torch CPU) against Troubleshooter's own compare.

tests/data/real_troubleshooter_1018_block.tar.gz: the transformer block of the msprobe/MindSpore pairs;
ts_reference.json holds the first API whose allclose failed in Troubleshooter's api_dump_compare (README inside).
"""

from __future__ import annotations

import json

import pytest

from conftest import unpack_data
from dumpscope.core.engines.compare import compare_dumps
from dumpscope.core.query import open_query


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return unpack_data(tmp_path_factory, "real_troubleshooter_1018_block")


@pytest.mark.parametrize("pair", ["rerun", "ln_eps", "scale", "nan"])
def test_first_divergence_is_troubleshooters_first_failed_api(data, tmp_path, pair):
    ref = json.loads((data / "ts_reference.json").read_text())[pair]
    golden = open_query(str(data / "golden"), cache_directory=tmp_path)
    doc = compare_dumps(golden, open_query(str(data / pair), cache_directory=tmp_path))
    fd = doc["first_divergence"]
    assert len(doc["rows"]) == ref["rows"]
    if ref["first_failed_api"] is None:
        assert fd is None and {r["verdict"] for r in doc["rows"]} == {"pass"}
        return
    # Troubleshooter records no argument values: the op is where the change is born, from its tensors
    assert (fd["name"], fd["cause"], fd["origin"]) == (ref["first_failed_api"], "tensor", "born")
    assert f'{fd["name"]}_{fd["io"]}' == ref["first_failed_row"]
    if pair == "nan":
        assert fd["rule"].startswith("nan only in target")
    else:  # cosine 0.9885 / 1.0: caught by its relative error against float32 rounding
        assert "born here" in fd["rule"] and "float32 rounding" in fd["rule"]
