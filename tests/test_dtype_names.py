"""One dtype table (issue 32): the layouts, the statistics CSVs and compare's precision rules all name
a dtype by ``formats.dtypes.dtype_name``.  They once had four normalisers that disagreed on 11 of 17
spellings (``DT_RESOURCE``, ``float8_e4m3``, ``fp16``, ``long`` …)."""

from __future__ import annotations

import pytest

from dumpscope.core.engines.compare.precision import canonical
from dumpscope.core.formats.dtypes import dtype_name
from dumpscope.core.formats.stats_csv import normalize_dtype as csv_dtype

#: every dtype spelling the real dumps in tests/data hold (msprobe 2.6 on torch and MindSpore, MindSpore
#: 2.0/2.10 file names, Troubleshooter 1.0.18), recorded from each normaliser's input while indexing and
#: comparing all of them, with the name the answers on them show (the same before the table was shared)
REAL = {
    "BFloat16": "bfloat16", "Bool": "bool", "Float16": "float16", "Float32": "float32", "Int32": "int32",
    "Int64": "int64", "UInt8": "uint8", "bfloat16": "bfloat16", "float32": "float32", "int32": "int32",
    "int64": "int64", "bool": "bool", "torch.bfloat16": "bfloat16", "torch.bool": "bool",
    "torch.float16": "float16", "torch.float32": "float32", "torch.int64": "int64",
}
#: the type names of msprobe's non-tensor arguments, as compare's precision rules meet them in the real dumps
VALUES = {"float": "float32", "int": "int32", "bool": "bool", "list": "list", "none": "none"}
#: spellings of the formats' documents and of other releases
DOCUMENTED = {
    "DT_FLOAT": "float32", "DT_FLOAT16": "float16", "DT_BF16": "bfloat16", "DT_BFLOAT16": "bfloat16",
    "DT_DOUBLE": "float64", "DT_HIFLOAT8": "hifloat8", "DT_FLOAT8_E4M3FN": "float8_e4m3fn",
    "DT_FLOAT8_E8M0": "float8_e8m0fnu", "DT_RESOURCE": "int64", "kNumberTypeFloat32": "float32",
    "mindspore.float16": "float16", "np.float64": "float64", "fp16": "float16", "bf16": "bfloat16",
    "half": "float16", "double": "float64", "long": "int64", "int": "int32", "bool_": "bool",
    "float8_e4m3": "float8_e4m3fn", "hif8": "hifloat8", "<f4": "float32", " Float32 ": "float32",
}
#: names no table holds: kept, lower-cased, without the framework's prefix
UNKNOWN = {"torch.float8_e4m3fnuz": "float8_e4m3fnuz", "DT_SOMETHING_NEW": "something_new", "Str": "str"}


@pytest.mark.parametrize("text,want", sorted({**REAL, **DOCUMENTED, **UNKNOWN}.items()))
def test_every_reader_names_a_dtype_alike(text, want):
    assert dtype_name(text) == want
    assert csv_dtype(text) == want  # CANN / MindSpore statistics CSVs
    assert canonical(text) == want  # compare's precision rules


@pytest.mark.parametrize("text,want", sorted(VALUES.items()))
def test_argument_types_are_named_by_the_same_table(text, want):
    assert dtype_name(text) == want
    assert canonical(text) == want


@pytest.mark.parametrize("text", ["", "-", "N/A", "null", "none"])
def test_a_statistics_csv_without_a_dtype_says_none(text):
    assert csv_dtype(text) == ""
