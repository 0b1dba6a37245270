"""Write cann_oracle.json: what msprobe's own CANN dump parser reads from every synthetic CANN dump file.

dumpscope's CANN files are written by tests/synth/cann_writer.py and read by core/formats/cann_dump.py: both
ours, so a convention both got wrong would pass every test.  This script hands the same files to
mindstudio-probe's vendored msaccucmp (``dump_parse`` splits the payloads and decodes the data types,
``ConvertSingleTensorFormat`` turns device formats back to NCHW / NCDHW / ND) and records its answers;
tests/test_cann_oracle.py checks dumpscope reads the same, without msprobe.  The files: every CANN dump in
sample_dumps/ and the fixed corpus of tests/synth/cann_corpus.py (every data type and device format the
writer produces).

Run from the repository with the project's python (it writes the corpus and picks the sample files), naming
a python that has mindstudio-probe (here 26.2.0, torch 2.13 CPU):
    .venv/bin/python tests/data/make_cann_oracle.py --msprobe-python /work/venvs/torch/bin/python
The second step (``--decode``) runs in that python and imports nothing of dumpscope.

One part is not msprobe's: msaccucmp 26.2 reads the DumpData protobuf header through CANN's native
``libascend_dump_parser.so`` (``ParseDumpProtoToJson``), which is not on PyPI.  Here a wire-format reader
written below gives msaccucmp the JSON that library returns, with the field numbers of CANN's public
``dump_data.proto`` (the order msaccucmp's ``proto_dump_data`` classes list their fields in; checked at run
time).  Payload splitting, data type decoding, format names and format conversion are msprobe's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "cann_oracle.json")
#: device formats msprobe is asked to convert (plain formats are compared as stored: msprobe's converter
#: turns any 4-D tensor to NCHW, which is not what an NHWC tensor's logical layout is)
DEVICE_FORMATS = {"NC1HWC0", "NC1HWC0_C04", "FRACTAL_Z", "FRACTAL_Z_C04", "FRACTAL_Z_G", "FRACTAL_NZ", "NDC1HWC0",
                  "FRACTAL_Z_3D", "C1HWNCoC0"}
#: tensors up to this many elements also keep every value (where a disagreement is, element by element)
SMALL = 24


# -- the answer record, shared with tests/test_cann_oracle.py ----------------------------------------------

def summary(values) -> dict:
    """Element count, NaN count, the exact sum of the finite values and a digest of every value.

    Values are compared as exact numbers whatever array type carries them: floats as float64 (every
    CANN float type widens exactly; NaNs made one NaN), complex as (re, im) float64 pairs, bool and
    integers as int64 (uint64 as uint64)."""
    a = np.asarray(values).reshape(-1)
    count = int(a.size)
    if a.dtype.kind == "c":
        a = np.stack([a.real, a.imag], -1).astype("<f8").reshape(-1)
    if a.dtype.kind in "biu":
        tag, a = ("uint", a.astype("<u8")) if a.dtype == np.uint64 else ("int", a.astype("<i8"))
        total = str(sum(int(v) for v in a.tolist()))
        nan = 0
    else:
        tag, a = "float", a.astype("<f8")
        nans = np.isnan(a)
        nan = int(nans.sum())
        a = np.where(nans, np.nan, a)
        finite = a[np.isfinite(a)]
        total = repr(math.fsum(finite.tolist()))
    digest = hashlib.sha256(tag.encode() + a.tobytes()).hexdigest()[:20]
    out = {"count": count, "nan": nan, "sum": total, "digest": digest}
    if count <= SMALL and np.asarray(values).dtype.kind != "c":
        out["values"] = [spell(v) for v in a.tolist()]
    return out


def spell(v):
    """A value as JSON holds it: NaN and infinities as strings."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


# -- the msprobe side (no dumpscope imports below) ----------------------------------------------------------

def _varint(b: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return value, i


def _fields(b: bytes):
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            value, i = b[i:i + n], i + n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            value, i = b[i:i + n], i + n
        else:
            raise ValueError(f"protobuf wire type {wire}")
        yield num, wire, value


def _shape(b: bytes) -> dict:
    dims = []
    for num, wire, value in _fields(b):
        if num == 1 and wire == 0:
            dims.append(value)
        elif num == 1:  # packed
            j = 0
            while j < len(value):
                d, j = _varint(value, j)
                dims.append(d)
    return {"dim": dims}


_ORIGINAL_OP = {1: ("name", "str"), 2: ("output_index", "int"), 3: ("data_type", "int"), 4: ("format", "int")}
_OUTPUT = {1: ("data_type", "int"), 2: ("format", "int"), 3: ("shape", "shape"), 4: ("original_op", _ORIGINAL_OP),
           6: ("size", "int"), 7: ("original_shape", "shape"), 8: ("sub_format", "int"), 9: ("address", "int"),
           11: ("offset", "int")}
_INPUT = {1: ("data_type", "int"), 2: ("format", "int"), 3: ("shape", "shape"), 5: ("size", "int"),
          6: ("original_shape", "shape"), 7: ("sub_format", "int"), 8: ("address", "int"), 9: ("offset", "int")}
_BUFFER = {1: ("buffer_type", "int"), 3: ("size", "int")}
_SPACE = {1: ("type", "int"), 3: ("size", "int")}
_ATTR = {1: ("name", "str"), 2: ("value", "str")}
_DUMP_DATA = {1: ("version", "str"), 2: ("dump_time", "int"), 3: ("output[]", _OUTPUT), 4: ("input[]", _INPUT),
              5: ("buffer[]", _BUFFER), 6: ("op_name", "str"), 7: ("attr[]", _ATTR), 8: ("space[]", _SPACE)}
#: field numbers skipped above hold the payload bytes (``data``), which the header does not carry
_DATA_FIELD = {"OpOutput": 5, "OpInput": 4, "OpBuffer": 2, "Workspace": 2}


def _message(b: bytes, spec: dict) -> dict:
    out: dict = {}
    for num, wire, value in _fields(b):
        if num not in spec:
            continue
        name, kind = spec[num]
        if kind == "str":
            value = value.decode("utf-8")
        elif kind == "shape":
            value = _shape(value)
        elif isinstance(kind, dict):
            value = _message(value, kind)
        if name.endswith("[]"):
            out.setdefault(name[:-2], []).append(value)
        else:
            out[name] = value
    return out


def _check_field_order(pdd) -> None:
    """The field numbers above are the positions of the fields msaccucmp's classes list (1-based)."""
    for cls, spec in ((pdd.OpOutput, _OUTPUT), (pdd.OpInput, _INPUT), (pdd.OpBuffer, _BUFFER),
                      (pdd.Workspace, _SPACE), (pdd.DumpData, _DUMP_DATA)):
        names = list(vars(cls()).keys())
        for num, (name, _) in spec.items():
            assert names[num - 1] == name.rstrip("[]"), (cls.__name__, num, name, names)
        if cls.__name__ in _DATA_FIELD:
            assert names[_DATA_FIELD[cls.__name__] - 1] == "data", (cls.__name__, names)


def _msprobe():
    """msaccucmp's modules, with the header read by ``_message`` instead of CANN's native library."""
    import msprobe

    sys.path.insert(0, os.path.join(os.path.dirname(msprobe.__file__), "msaccucmp"))
    from cmp_utils import log
    from cmp_utils.constant.const_manager import ConstManager
    from conversion.tensor_conversion import ConvertSingleTensorFormat
    from dump_parse import big_dump_data
    from dump_parse import proto_dump_data
    from dump_parse.dump_utils import parse_dump_file

    _check_field_order(proto_dump_data)

    def parse_header(self) -> None:
        with open(self.dump_file_path, "rb") as fh:
            head = fh.read(8)
            self.dump_json_data = _message(fh.read(int.from_bytes(head, "little")), _DUMP_DATA)

    big_dump_data.BigDumpDataParser._parse_dump_to_json = parse_header
    said: list[str] = []
    for name in ("print_error_log", "print_warn_log", "print_info_log"):
        setattr(log, name, lambda msg, said=said: said.append(str(msg)))
    return parse_dump_file, ConvertSingleTensorFormat, ConstManager, said


def decode(root: str, files: list[str]) -> dict:
    """msprobe's answers for ``files`` (relative to ``root``)."""
    parse_dump_file, Convert, CM, said = _msprobe()
    fmt_name = {code: name for name, code in CM.STRING_TO_FORMAT_MAP.items()}
    convert = Convert(additional_target_dim_to_format={5: "NCDHW"})
    answers = {}
    for rel in files:
        said.clear()
        try:
            obj = parse_dump_file(os.path.join(root, rel), 2)
        except Exception as exc:  # msaccucmp raises CompareError with a code; its log line says why
            answers[rel] = {"error": "; ".join(said) or f"{type(exc).__name__} {exc}"}
            continue
        tensors = []
        for io, items in (("input", obj.input_data), ("output", obj.output_data)):
            for slot, t in enumerate(items):
                count = int(np.prod(t.shape)) if t.shape else 1
                data = np.asarray(t.data).reshape(-1)
                rec = {"io": io, "slot": slot, "data_type": int(t.data_type),
                       "dtype": CM.DATA_TYPE_TO_STR_DTYPE_MAP.get(t.data_type), "format_code": int(t.tensor_format),
                       "format": fmt_name.get(t.tensor_format), "shape": list(t.shape),
                       "original_shape": list(t.original_shape or []), "sub_format": int(t.sub_format or 0),
                       "size": int(t.size)}
                if data.size != count:  # uint1: msaccucmp unpacks every payload byte, padding bits included
                    rec["msprobe_elements"] = int(data.size)
                    data = data[:count]
                rec["raw"] = summary(data)
                if rec["format"] in DEVICE_FORMATS:
                    said.clear()
                    logical = np.asarray(convert(t))
                    if list(logical.shape) == rec["original_shape"]:
                        rec["logical"] = dict(summary(logical), shape=list(logical.shape))
                    else:
                        rec["logical_error"] = "; ".join(said or ["no conversion"]) + \
                            f" (msprobe returned shape {list(logical.shape)})"
                tensors.append(rec)
        answers[rel] = {"op_name": obj.op_name, "dump_time": int(obj.dump_time), "version": obj.version,
                        "tensors": tensors,
                        "buffers": [summary(np.frombuffer(b.data, np.uint8)) for b in obj.buffer or []],
                        "spaces": [summary(np.frombuffer(s.data, np.uint8)) for s in obj.space or []]}
    return answers


# -- the dumpscope side: which files ---------------------------------------------------------------------

def sample_cann_files() -> list[str]:
    """Every file under sample_dumps/ that is a CANN dump (dumpscope's header reader accepts it)."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from dumpscope.core.formats.cann_dump import DumpFormatError, read_header

    found = []
    for folder, _, names in os.walk(os.path.join(REPO, "sample_dumps")):
        for name in names:
            path = os.path.join(folder, name)
            if "." in name and name.rsplit(".", 1)[1] in ("npy", "json", "csv", "txt", "md", "pb", "ir", "py"):
                continue
            try:
                read_header(path)
            except DumpFormatError:
                continue
            found.append(os.path.relpath(path, REPO))
    return sorted(found)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msprobe-python", default="/work/venvs/torch/bin/python",
                    help="a python with mindstudio-probe installed")
    ap.add_argument("--decode", nargs=2, metavar=("ROOT", "LIST"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.decode:  # in the msprobe python
        root, listing = a.decode
        with open(listing) as fh:
            json.dump(decode(root, json.load(fh)), sys.stdout)
        return
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from synth.cann_corpus import write_corpus

    with tempfile.TemporaryDirectory() as tmp:
        corpus = {name: os.path.relpath(p, tmp) for name, p in write_corpus(tmp).items()}
        jobs = [(tmp, sorted(corpus.values())), (REPO, sample_cann_files())]
        answers = {}
        for root, files in jobs:
            listing = os.path.join(tmp, "files.json")
            with open(listing, "w") as fh:
                json.dump(files, fh)
            done = subprocess.run([a.msprobe_python, os.path.abspath(__file__), "--decode", root, listing],
                                  capture_output=True, text=True, check=True)
            answers.update(json.loads(done.stdout.strip().splitlines()[-1]))
    tool = subprocess.run([a.msprobe_python, "-c", "from importlib.metadata import version as v; "
                           "print('mindstudio-probe', v('mindstudio-probe'), 'numpy', v('numpy'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    doc = {"tool": tool + ": msaccucmp dump_parse.dump_utils.parse_dump_file (header through this script's "
                          "protobuf wire reader) + conversion.tensor_conversion.ConvertSingleTensorFormat",
           "files": answers}
    with open(OUT, "w") as fh:  # one file a line: small, and a change shows as the lines of the files it touched
        fh.write('{"tool": %s,\n"files": {\n' % json.dumps(doc["tool"]))
        fh.write(",\n".join(f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(answers.items())))
        fh.write("\n}}\n")
    bad = {k: v["error"] for k, v in answers.items() if "error" in v}
    print(f"{OUT}: {len(answers)} files, {sum(len(v.get('tensors', [])) for v in answers.values())} tensors; "
          f"msprobe could not read {len(bad)}: " + "; ".join(f"{k}: {v}" for k, v in sorted(bad.items())))


if __name__ == "__main__":
    main()
