"""dumpscope reads every synthetic CANN dump file as msprobe's own parser does.

The writer (tests/synth/cann_writer.py) and the reader (core/formats/cann_dump.py) are both ours; the
independent answers are msprobe's: tests/data/cann_oracle.json holds what mindstudio-probe 26.2's msaccucmp
read from every CANN file in sample_dumps/ and from tests/synth/cann_corpus.py (every data type and device
format the writer produces): names and codes of the data types and formats, shapes, sizes, the payload
split (inputs, outputs, buffers, workspaces) and, per tensor, an exact digest of the values in the device
layout and, where msprobe converts the format, in the logical layout (make_cann_oracle.py says how, and
which part of the header reading is not msprobe's).  No msprobe needed here.

Not checked by msprobe (it refuses them, recorded as such): int4, int2, uint2, complex32, float8_e8m0fnu;
no logical layout from it for C1HWNCoC0, FRACTAL_Z_3D, the C04 formats, grouped FRACTAL_Z (its converter
is called with one argument too many) and a 1-D FRACTAL_NZ.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from conftest import DATA, REPO
from dumpscope.core.formats.cann_dump import load_raw, load_tensor, read_header
from synth.cann_corpus import CORPUS, write_corpus


def _maker():
    spec = importlib.util.spec_from_file_location("make_cann_oracle", DATA / "make_cann_oracle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MAKER = _maker()
ORACLE = json.loads((DATA / "cann_oracle.json").read_text())["files"]
#: the data types msprobe 26.2 refuses ("The output data type (N) does not support.")
MSPROBE_REFUSES = {"int4", "int2", "uint2", "complex32", "float8_e8m0fnu"}
#: codes msprobe 26.2's float8 decoders (msaccucmp conversion.dtype_conversion) read against the OCP FP8
#: definition, which ml_dtypes and torch follow: {dtype: {code: msprobe's value}}.  E4M3FN has no infinities
#: and S.1111.111 is NaN (largest finite 448; msprobe: +-480); E5M2 1.11111.00 is -inf (msprobe: +inf, the
#: sign dropped).  dumpscope keeps the definition, checked against ml_dtypes below.
MSPROBE_FP8_DEFECTS = {"float8_e4m3fn": {0x7F: 480.0, 0xFF: -480.0}, "float8_e5m2": {0xFC: "inf"}}


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("oracle")
    write_corpus(root)
    return root


def _path(rel: str, corpus_root: Path) -> Path:
    return (corpus_root if rel.startswith(CORPUS + "/") else REPO) / rel


def test_the_oracle_covers_every_synthetic_cann_file(tmp_path):
    """A new sample tree or corpus case without a rerun of make_cann_oracle.py fails here."""
    corpus = {str(p.relative_to(tmp_path)) for p in write_corpus(tmp_path).values()}
    assert set(ORACLE) == corpus | set(MAKER.sample_cann_files())
    assert sum(len(v.get("tensors", [])) for v in ORACLE.values()) > 150


@pytest.mark.parametrize("rel", sorted(ORACLE), ids=lambda rel: rel.split("/")[1] if rel.startswith(CORPUS)
                         else rel.split("/", 2)[1] + "/" + rel.rsplit("/", 1)[1][:48])
def test_dumpscope_reads_what_msprobe_reads(rel, corpus_root):
    want = ORACLE[rel]
    path = _path(rel, corpus_root)
    h = read_header(path)
    tensors = h.inputs + h.outputs
    if "error" in want:  # msprobe refused the file: say which type, and that dumpscope still reads it
        assert "does not support" in want["error"]
        assert {t.dtype for t in tensors} & MSPROBE_REFUSES
        for t in tensors:
            load_tensor(path, t)
        return
    assert (h.op_name, h.dump_time, h.version) == (want["op_name"], want["dump_time"], want["version"])
    assert [(t.io, t.slot) for t in tensors] == [(w["io"], w["slot"]) for w in want["tensors"]]
    for t, w in zip(tensors, want["tensors"]):
        where = f"{t.io}[{t.slot}]"
        got = {"data_type": t.dtype_code, "dtype": t.dtype, "format_code": t.format_code, "format": t.format,
               "shape": list(t.shape), "original_shape": list(t.original_shape), "sub_format": t.sub_format,
               "size": t.size}
        assert got == {k: w[k] for k in got}, where
        raw = load_raw(path, t)
        if t.dtype in MSPROBE_FP8_DEFECTS and MAKER.summary(raw) != w["raw"]:
            _same_but_msprobe_defects(path, t, raw, w["raw"])
        else:
            assert MAKER.summary(raw) == w["raw"], f"{where}: device-layout values differ"
        if "logical" in w:
            logical = load_tensor(path, t)
            assert dict(MAKER.summary(logical), shape=list(logical.shape)) == w["logical"], \
                f"{where}: logical values differ"
    data = path.read_bytes()
    for kind, items in (("buffers", h.buffers), ("spaces", h.spaces)):
        got = [MAKER.summary(np.frombuffer(data[b.offset:b.offset + b.size], np.uint8)) for b in items]
        assert got == want[kind], kind


def _same_but_msprobe_defects(path: Path, t, raw: np.ndarray, want: dict) -> None:
    """Element by element: msprobe's value, except at its known defect codes, where the OCP definition
    (ml_dtypes) is dumpscope's answer and msprobe's recorded one is the defect named above."""
    codes = np.frombuffer(path.read_bytes()[t.offset:t.offset + t.size], np.uint8)
    spec = codes.view(getattr(ml_dtypes, t.dtype)).astype(np.float64)
    ours = [MAKER.spell(v) for v in raw.astype(np.float64).reshape(-1).tolist()]
    defects = MSPROBE_FP8_DEFECTS[t.dtype]
    assert "values" in want and set(codes.tolist()) & set(defects), "a disagreement away from the known codes"
    assert len(want["values"]) == len(ours) == codes.size
    for code, mine, theirs, by_spec in zip(codes.tolist(), ours, want["values"], spec.tolist()):
        if code in defects:
            assert theirs == defects[code] and mine == MAKER.spell(by_spec), (hex(code), mine, theirs)
        else:
            assert mine == theirs, (hex(code), mine, theirs)


def test_msprobe_converted_every_device_format_it_has_a_converter_for():
    """The logical check ran where msprobe can convert: NC1HWC0, FRACTAL_Z, FRACTAL_NZ, NDC1HWC0."""
    converted = {t["format"] for v in ORACLE.values() for t in v.get("tensors", []) if "logical" in t}
    assert converted == {"NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ", "NDC1HWC0"}
