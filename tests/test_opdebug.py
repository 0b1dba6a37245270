"""Opdebug payload / file / JSON decoding (FORMATS.md §3) against the synthetic encoders."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import shared
from dumpscope.core.formats.opdebug import (
    OpdebugError, decode_opdebug_payload, overflowing, parse_opdebug_json, read_opdebug_file,
    read_opdebug_json, status_words,
)
from synth.opdebug_writer import (
    encode_opdebug_file, encode_opdebug_payload_new, encode_opdebug_payload_old, write_opdebug_file,
)

AICORE = dict(model_id=514, stream_id=563, task_id=57, task_type=0, pc_start=0x1008005B0000,
              para_base=0x100800297000, kernel_code=0x1008005AE000, block_idx=1, status=32)


def test_old_layout_bytes_and_decode() -> None:
    payload = encode_opdebug_payload_old(dha={"task_id": 4, "stream_id": 2, "status": 1}, aicore=AICORE)
    assert len(payload) == 2048
    # independent byte-level check of the §3.2 table
    assert struct.unpack_from("<6Q", payload, 256) == (514, 563, 57, 0, 0x1008005B0000, 0x100800297000)
    assert struct.unpack_from("<3Q", payload, 1024) == (0x1008005AE000, 1, 32)
    assert struct.unpack_from("<Q", payload, 512) == (1,)
    recs = decode_opdebug_payload(payload)
    assert [r.kind for r in recs] == ["DHA Atomic Add", "L2 Atomic Add", "AI Core"]
    dha, l2, ai = recs
    assert (dha.task_id, dha.stream_id, dha.status, dha.context_id) == (4, 2, 1, None)
    assert l2.status == 0 and not l2.overflow
    assert (ai.model_id, ai.stream_id, ai.task_id, ai.status) == (514, 563, 57, 32)
    assert ai.raw["pc_start"] == "0x1008005b0000" and ai.raw["kernel_code"] == "0x1008005ae000"
    assert ai.raw["block_idx"] == 1
    assert [r.kind for r in overflowing(recs)] == ["DHA Atomic Add", "AI Core"]


def test_new_layout_all_kinds_and_multiple_entries() -> None:
    entries = [
        {"acc_type": "AIC", "model_id": 1, "stream_id": 5, "task_id": 9, "task_type": 4, "context_id": 3,
         "thread_id": 65535, "pc_start": 0xABC, "para_base": 0xDEF, "core_id": 7, "block_id": 2, "status": 0x120},
        {"acc_type": "SDMA", "stream_id": 6, "task_id": 10, "context_id": 65535, "thread_id": 1,
         "src_addr": 0x10, "dst_addr": 0x20, "channel_id": 3, "status": 1},
        {"acc_type": "AICPU", "stream_id": 7, "task_id": 11, "cpu_id": 2, "thread_id": 4, "status": 0},
        {"acc_type": "AIV", "stream_id": 8, "task_id": 12, "status": 0x8},
    ]
    payload = encode_opdebug_payload_new(entries)
    assert len(payload) == 2048 and struct.unpack_from("<4I", payload, 8) == (1, 0, 0, 88)
    recs = decode_opdebug_payload(payload)
    assert [r.kind for r in recs] == ["AIC", "SDMA", "AICPU", "AIV"]
    aic, sdma, aicpu, aiv = recs
    assert (aic.stream_id, aic.task_id, aic.task_type, aic.context_id, aic.thread_id, aic.status) == (
        5, 9, 4, 3, None, 0x120)
    assert aic.raw["pc_start"] == "0xabc" and aic.raw["block_id"] == 2 and aic.raw["core_id"] == 7
    assert (sdma.context_id, sdma.thread_id, sdma.raw["dst_addr"], sdma.raw["channel_id"]) == (None, 1, "0x20", 3)
    assert (aicpu.raw["cpu_id"], aicpu.thread_id, aicpu.overflow) == (2, 4, False)
    assert aiv.status == 8
    assert [r.kind for r in overflowing(recs)] == ["AIC", "SDMA", "AIV"]


def test_new_layout_version1_status_words() -> None:
    payload = encode_opdebug_payload_new([{"acc_type": "AIC", "task_id": 3, "stream_id": 1,
                                           "status": [0, 0x20, 0, 0x400]}], version=1)
    assert struct.unpack_from("<4I", payload, 8)[3] == (11 + 3) * 8
    (rec,) = decode_opdebug_payload(payload)
    assert rec.raw["status"] == [0, 0x20, 0, 0x400] and rec.status == 0x420
    zero = decode_opdebug_payload(encode_opdebug_payload_new([{"acc_type": "AIV", "status": [0, 0, 0, 0]}],
                                                             version=1))
    assert zero[0].status == 0 and overflowing(zero) == []
    # SDMA is not affected by version 1
    (sd,) = decode_opdebug_payload(encode_opdebug_payload_new([{"acc_type": "SDMA", "status": 5}], version=1))
    assert sd.status == 5 and sd.raw["data_len"] == 80


def test_status_words() -> None:
    assert status_words(32, "AI Core") == ["float computation overflow"]
    assert status_words(0x8 | 0x10 | 0x80 | 0x100 | 0x400 | 0x1, "AIC") == [
        "signed integer minimum NEG overflow", "integer add/sub/mul/mac overflow",
        "negative input to float-to-unsigned conversion", "fp32/int32 to fp16 conversion overflow",
        "CUBE accumulation overflow", "unknown status bits 0x1"]
    assert status_words(3, "DHA Atomic Add") == ["atomic overflow"]
    assert status_words(0, "AI Core") == [] and status_words(2, "SDMA") == ["status 0x2"]


def test_file_container_roundtrip(tmp_path: Path) -> None:
    payload = encode_opdebug_payload_old(aicore=AICORE)
    p = write_opdebug_file(str(tmp_path / "Opdebug.Node_OpDebug.1.2.1700000000000000"), payload,
                           inputs=[b"xyz" * 5])
    recs = read_opdebug_file(p)
    assert recs[2].status == 32 and recs[2].task_id == 57
    # cross-check with the project's CANN dump encoder
    from synth import cann_writer as cw

    arr = np.frombuffer(encode_opdebug_payload_new([{"acc_type": "AIV", "task_id": 77, "status": 16}]), np.uint8)
    q = tmp_path / "Opdebug.Node_OpDebug.5.6.1700000000000001"
    q.write_bytes(cw.encode_dump("Node_OpDebug", [], [cw.SynthTensor(arr.copy(), "uint8")], 1700000000000001))
    (rec,) = read_opdebug_file(str(q))
    assert (rec.kind, rec.task_id, rec.status) == ("AIV", 77, 16)


def test_file_errors(tmp_path: Path) -> None:
    full = encode_opdebug_file(encode_opdebug_payload_old())
    for name, data in (("short", b"\x01\x02"), ("trunc", full[:-100]), ("hdr", b"\xff" * 8 + b"abc")):
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(OpdebugError, match=name) as exc:
            read_opdebug_file(str(p))
        assert "\n" not in str(exc.value)


def test_payload_errors() -> None:
    with pytest.raises(OpdebugError):
        decode_opdebug_payload(b"\x00" * 100)
    with pytest.raises(OpdebugError):
        decode_opdebug_payload(struct.pack("<II", 0x5A5A5A5A, 0) + struct.pack("<4I", 1, 9, 0, 88) + bytes(88))
    with pytest.raises(OpdebugError):
        decode_opdebug_payload(struct.pack("<II", 0x5A5A5A5A, 0) + struct.pack("<4I", 1, 0, 0, 88) + bytes(40))


def test_json_old_new_and_block_id(tmp_path: Path) -> None:
    old = {"DHA Atomic Add": {"model_id": 0, "stream_id": 1, "task_id": 2, "task_type": 0, "pc_start": "0x0",
                              "para_base": "0x0", "status": 0},
           "AI Core": {"model_id": 1, "stream_id": 3, "task_id": 4, "task_type": 0, "pc_start": "0x10",
                       "para_base": "0x20", "kernel_code": "0x30", "block_idx": 5, "status": 16}}
    p = tmp_path / "Opdebug.Node_OpDebug.1.2.3.output.0.json"
    p.write_text(json.dumps(old))
    recs = read_opdebug_json(str(p))
    assert [(r.kind, r.stream_id, r.task_id, r.status) for r in recs] == [
        ("DHA Atomic Add", 1, 2, 0), ("AI Core", 3, 4, 16)]
    new = {"magic": "0x5a5a5a5a", "version": 1, "acc_list": {"valid": 1, "acc_type": "AIC", "rsv": 0,
           "data_len": 112, "data": {"model_id": 0, "stream_id": 2, "task_id": 8, "task_type": 0,
                                     "context_id": 65535, "thread_id": 65535, "pc_start": "0x1", "para_base": "0x2",
                                     "core_id": 0, "block_id": 0, "status": [0, 32, 0, 0]}}}
    (rec,) = parse_opdebug_json(new)
    assert (rec.kind, rec.stream_id, rec.task_id, rec.context_id, rec.thread_id, rec.status) == (
        "AIC", 2, 8, None, None, 32)
    # the binary decoder and the JSON reader agree on the same content
    binary = decode_opdebug_payload(encode_opdebug_payload_new(
        [{"acc_type": "AIC", "stream_id": 2, "task_id": 8, "context_id": 65535, "thread_id": 65535,
          "pc_start": 1, "para_base": 2, "status": [0, 32, 0, 0]}], version=1))[0]
    assert (binary.stream_id, binary.task_id, binary.status, binary.raw["pc_start"]) == (2, 8, 32, "0x1")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(OpdebugError, match="bad.json"):
        read_opdebug_json(str(bad))
    for doc in ([], {"x": 1}, {"AI Core": {"status": "zz"}}, {"acc_list": {"acc_type": "GPU", "data": {}}}):
        with pytest.raises(OpdebugError):
            parse_opdebug_json(doc)


def test_real_cann_doc_json() -> None:
    recs = read_opdebug_json(str(shared("real_samples", "opdebug_parsed_output0_from_cann_doc.json")))
    assert [r.kind for r in overflowing(recs)] == ["AI Core"]
    ai = recs[2]
    assert (ai.model_id, ai.stream_id, ai.task_id, ai.status) == (514, 563, 57, 32)
    assert ai.raw["block_idx"] == 1 and status_words(ai.status, ai.kind) == ["float computation overflow"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.binary(max_size=2100),
    st.binary(max_size=300).map(lambda b: struct.pack("<I", 0x5A5A5A5A) + b),
    st.lists(st.integers(0, 2**32 - 1), max_size=60).map(
        lambda ws: struct.pack("<II", 0x5A5A5A5A, ws[0] % 3 if ws else 0)
        + b"".join(struct.pack("<I", w % 5 if i % 4 < 2 else w % 200) for i, w in enumerate(ws))),
))
def test_fuzz_payload_only_own_error(data: bytes) -> None:
    try:
        recs = decode_opdebug_payload(data)
    except OpdebugError:
        return
    for r in recs:
        assert isinstance(r.status, int)


@settings(max_examples=120, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(
                        st.sampled_from(["AI Core", "acc_list", "data", "acc_type", "status", "task_id",
                                         "version", "magic", "x"]), c, max_size=5), max_leaves=20))
def test_fuzz_json_only_own_error(doc) -> None:
    try:
        parse_opdebug_json(doc)
    except OpdebugError:
        pass
