"""Synthetic ``Opdebug.Node_OpDebug.*`` payloads and files (FORMATS.md §3.2) for tests and samples.

No real Opdebug binary is public, so these encoders are written straight from the byte tables and
serve as ground truth for ``core.formats.opdebug``.
"""

from __future__ import annotations

import struct
from typing import Any, Mapping, Optional, Sequence, Union

from synth.cann_writer import varint

OPDEBUG_SIZE = 2048
MAGIC = 0x5A5A5A5A
_ACC_CODES = {"AIC": 0, "AIV": 1, "AICPU": 2, "SDMA": 3}
_ACC_FIELDS: dict[str, tuple[str, ...]] = {
    "AIC": ("model_id", "stream_id", "task_id", "task_type", "context_id", "thread_id", "pc_start",
            "para_base", "core_id", "block_id", "status"),
    "SDMA": ("model_id", "stream_id", "task_id", "task_type", "context_id", "thread_id", "src_addr",
             "dst_addr", "channel_id", "status"),
    "AICPU": ("model_id", "stream_id", "task_id", "task_type", "context_id", "cpu_id", "thread_id", "status"),
}
_ACC_FIELDS["AIV"] = _ACC_FIELDS["AIC"]
_OLD_INFO = ("model_id", "stream_id", "task_id", "task_type", "pc_start", "para_base")


def encode_opdebug_payload_old(dha: Optional[Mapping[str, int]] = None, l2: Optional[Mapping[str, int]] = None,
                               aicore: Optional[Mapping[str, int]] = None) -> bytes:
    """The 2048-byte old layout; each section is a dict of the §3.2 fields (missing → 0).

    ``aicore`` may also hold ``kernel_code`` and ``block_idx``.
    """
    buf = bytearray(OPDEBUG_SIZE)
    for sec, info_off, status_off in ((dha, 0, 512), (l2, 128, 768), (aicore, 256, 1024)):
        sec = sec or {}
        struct.pack_into("<6Q", buf, info_off, *(int(sec.get(k, 0)) for k in _OLD_INFO))
        if info_off == 256:
            struct.pack_into("<3Q", buf, status_off, int(sec.get("kernel_code", 0)),
                             int(sec.get("block_idx", 0)), int(sec.get("status", 0)))
        else:
            struct.pack_into("<Q", buf, status_off, int(sec.get("status", 0)))
    return bytes(buf)


def encode_acc_entry(acc_type: str, fields: Mapping[str, Any], version: int = 0, valid: int = 1,
                     rsv: int = 0, data_len: Optional[int] = None) -> bytes:
    """One ``acc_list`` entry: 4×u32 header then u64 data (status as 4 words for v1 AIC/AIV)."""
    words: list[int] = []
    for key in _ACC_FIELDS[acc_type]:
        v: Union[int, Sequence[int]] = fields.get(key, 0)
        if key == "status" and acc_type in ("AIC", "AIV") and version == 1:
            seq = list(v) if isinstance(v, (list, tuple)) else [int(v), 0, 0, 0]
            words.extend(int(x) for x in (seq + [0, 0, 0, 0])[:4])
        else:
            words.append(int(v))  # type: ignore[arg-type]
    body = struct.pack(f"<{len(words)}Q", *words)
    dl = len(body) if data_len is None else data_len
    return struct.pack("<4I", valid, _ACC_CODES[acc_type], rsv, dl) + body


def encode_opdebug_payload_new(entries: Sequence[Mapping[str, Any]], version: int = 0,
                               size: int = OPDEBUG_SIZE) -> bytes:
    """The new layout: magic, version, then the entries packed back to back, zero-padded to ``size``.

    Each entry is ``{"acc_type": "AIC"|"AIV"|"AICPU"|"SDMA", <fields>…}`` with optional ``valid``,
    ``rsv``, ``data_len``.
    """
    body = struct.pack("<II", MAGIC, version)
    for e in entries:
        body += encode_acc_entry(e["acc_type"], e, version=version, valid=int(e.get("valid", 1)),
                                 rsv=int(e.get("rsv", 0)), data_len=e.get("data_len"))
    if len(body) > size:
        raise ValueError(f"{len(entries)} acc_list entries need {len(body)} bytes, more than {size}")
    return body + bytes(size - len(body))


# --------------------------------------------------------------------------------------------
# container: a minimal DumpData header with one DT_UINT8/ND output holding the payload


def _field_varint(num: int, v: int) -> bytes:
    return varint(num << 3) + varint(v)


def _field_bytes(num: int, data: bytes) -> bytes:
    return varint((num << 3) | 2) + varint(len(data)) + data


def encode_opdebug_file(payload: bytes, dump_time: int = 1700000000000000, op_name: str = "Node_OpDebug",
                        inputs: Sequence[bytes] = ()) -> bytes:
    """A complete Opdebug dump file: u64 header length, DumpData header, input bytes, payload."""
    out = (_field_varint(1, 4) + _field_varint(2, 2) + _field_bytes(3, _field_varint(1, len(payload)))
           + _field_varint(6, len(payload)))
    header = _field_bytes(1, b"2.0") + _field_varint(2, dump_time) + _field_bytes(3, out)
    for data in inputs:
        inp = _field_varint(1, 4) + _field_varint(2, 2) + _field_varint(5, len(data))
        header += _field_bytes(4, inp)
    header += _field_bytes(6, op_name.encode())
    return struct.pack("<Q", len(header)) + header + b"".join(inputs) + payload


def write_opdebug_file(path: str, payload: bytes, **kw: Any) -> str:
    """Write an Opdebug dump file and return its path."""
    with open(path, "wb") as fh:
        fh.write(encode_opdebug_file(payload, **kw))
    return path
