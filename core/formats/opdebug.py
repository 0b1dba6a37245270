"""Overflow status files ``Opdebug.Node_OpDebug.*`` (FORMATS.md §3): binary payload and rendered JSON.

The 2048-byte payload (``output[0]`` of an ordinary CANN dump) has two layouts, told apart by the
first uint32: the *old* fixed layout (DHA Atomic Add / L2 Atomic Add / AI Core sections) and the
*new* one (magic ``0x5A5A5A5A``, version, then ``acc_list`` entries for AIC/AIV/AICPU/SDMA).

Multiple ``acc_list`` entries: msaccucmp reads exactly one entry.  We read the first entry
unconditionally and then keep reading entries packed right after it (stride ``16 + data_len``) as
long as one looks real: ``valid == 1``, a known ``acc_type``, a ``data_len`` that covers that
type's fields, and the whole entry inside the buffer.  The zero padding that fills the rest of
the 2048 bytes has ``valid == 0`` and ends the scan.

For AIC/AIV entries with ``version == 1`` the status is four u64 words (``raw["status"]`` keeps
the list); ``OpdebugRecord.status`` is their bitwise OR, so it is non-zero iff any word is.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any, Optional

from dumpscope.core.formats.cann_dump import DumpFormatError, read_header

OPDEBUG_SIZE = 2048
MAGIC = 0x5A5A5A5A
INVALID_ID = 65535  # context_id / thread_id "not set"
STATUS_LEN = 4  # version-1 AIC/AIV status words

OLD_SECTIONS = ("DHA Atomic Add", "L2 Atomic Add", "AI Core")
_OLD_INFO = ("model_id", "stream_id", "task_id", "task_type", "pc_start", "para_base")
_OLD_INFO_OFFSETS = (0, 128, 256)
_OLD_STATUS_OFFSETS = (512, 768, 1024)

ACC_TYPES = {0: "AIC", 1: "AIV", 2: "AICPU", 3: "SDMA"}
ACC_FIELDS: dict[str, tuple[str, ...]] = {
    "AIC": ("model_id", "stream_id", "task_id", "task_type", "context_id", "thread_id", "pc_start",
            "para_base", "core_id", "block_id", "status"),
    "SDMA": ("model_id", "stream_id", "task_id", "task_type", "context_id", "thread_id", "src_addr",
             "dst_addr", "channel_id", "status"),
    "AICPU": ("model_id", "stream_id", "task_id", "task_type", "context_id", "cpu_id", "thread_id", "status"),
}
ACC_FIELDS["AIV"] = ACC_FIELDS["AIC"]
HEX_FIELDS = ("pc_start", "para_base", "kernel_code", "src_addr", "dst_addr")

_AICORE_KINDS = ("AI Core", "AIC", "AIV")
_ATOMIC_KINDS = ("DHA Atomic Add", "L2 Atomic Add")
AICORE_STATUS_BITS: tuple[tuple[int, str], ...] = (
    (0x8, "signed integer minimum NEG overflow"),
    (0x10, "integer add/sub/mul/mac overflow"),
    (0x20, "float computation overflow"),
    (0x80, "negative input to float-to-unsigned conversion"),
    (0x100, "fp32/int32 to fp16 conversion overflow"),
    (0x400, "CUBE accumulation overflow"),
)


class OpdebugError(ValueError):
    """An Opdebug file, payload or JSON that cannot be decoded (one line: file and problem)."""


@dataclass(slots=True)
class OpdebugRecord:
    """One unit's overflow status: which task (stream/task, FFTS+ context/thread) and its status."""

    kind: str  # "DHA Atomic Add" | "L2 Atomic Add" | "AI Core" | "AIC" | "AIV" | "AICPU" | "SDMA"
    model_id: Optional[int]
    stream_id: Optional[int]
    task_id: Optional[int]
    task_type: Optional[int]
    context_id: Optional[int]
    thread_id: Optional[int]
    status: int
    raw: dict[str, Any] = field(default_factory=dict)  # every field as rendered (hex strings for addresses)

    @property
    def overflow(self) -> bool:
        return self.status != 0


def overflowing(records: list[OpdebugRecord]) -> list[OpdebugRecord]:
    """Only the records reporting an overflow (status != 0)."""
    return [r for r in records if r.status != 0]


def status_words(status: int, kind: str) -> list[str]:
    """Human meaning of a status word (§3.4): AI Core bits, or "atomic overflow"."""
    if not status:
        return []
    if kind in _ATOMIC_KINDS:
        return ["atomic overflow"]
    if kind in _AICORE_KINDS:
        words = [text for bit, text in AICORE_STATUS_BITS if status & bit]
        rest = status & ~sum(bit for bit, _ in AICORE_STATUS_BITS)
        if rest:
            words.append(f"unknown status bits 0x{rest:x}")
        return words
    return [f"status 0x{status:x}"]


# --------------------------------------------------------------------------------------------
# binary payload


def decode_opdebug_payload(buf: bytes, name: str = "<payload>") -> list[OpdebugRecord]:
    """Decode a 2048-byte Opdebug payload of either layout into one record per unit."""
    data = bytes(buf)
    if len(data) < 4:
        raise OpdebugError(f"{name}: Opdebug payload of {len(data)} bytes is too short")
    (magic,) = struct.unpack_from("<I", data, 0)
    if magic == MAGIC:
        return _decode_new(data, name)
    if len(data) < OPDEBUG_SIZE:
        raise OpdebugError(f"{name}: old-layout Opdebug payload has {len(data)} bytes, expected {OPDEBUG_SIZE}")
    return _decode_old(data)


def _u64s(data: bytes, offset: int, count: int) -> tuple[int, ...]:
    return struct.unpack_from(f"<{count}Q", data, offset)


def _decode_old(data: bytes) -> list[OpdebugRecord]:
    out: list[OpdebugRecord] = []
    for kind, info_off, status_off in zip(OLD_SECTIONS, _OLD_INFO_OFFSETS, _OLD_STATUS_OFFSETS):
        raw: dict[str, Any] = dict(zip(_OLD_INFO, _u64s(data, info_off, len(_OLD_INFO))))
        if kind == "AI Core":
            kernel_code, block_idx, status = _u64s(data, status_off, 3)
            raw["kernel_code"] = kernel_code
            raw["block_idx"] = block_idx
        else:
            (status,) = _u64s(data, status_off, 1)
        raw["status"] = status
        out.append(_record(kind, raw))
    return out


def _expected_words(kind: str, version: int) -> int:
    n = len(ACC_FIELDS[kind])
    return n + STATUS_LEN - 1 if kind in ("AIC", "AIV") and version == 1 else n


def _decode_new(data: bytes, name: str) -> list[OpdebugRecord]:
    if len(data) < 24:
        raise OpdebugError(f"{name}: new-layout Opdebug payload of {len(data)} bytes has no acc_list")
    version = struct.unpack_from("<I", data, 4)[0]
    out: list[OpdebugRecord] = []
    off = 8
    while off + 16 <= len(data):
        valid, acc_type, rsv, data_len = struct.unpack_from("<4I", data, off)
        kind = ACC_TYPES.get(acc_type)
        first = not out
        if not first and (valid != 1 or kind is None):
            break
        if kind is None:
            raise OpdebugError(f"{name}: unknown acc_type {acc_type} in Opdebug payload")
        words = _expected_words(kind, version)
        if not first and data_len < words * 8:
            break
        if off + 16 + words * 8 > len(data):
            if first:
                raise OpdebugError(f"{name}: Opdebug {kind} entry truncated at {len(data)} bytes")
            break
        values = list(_u64s(data, off + 16, words))
        raw: dict[str, Any] = {"magic": MAGIC, "version": version, "valid": valid, "acc_type": kind,
                               "rsv": rsv, "data_len": data_len}
        for i, key in enumerate(ACC_FIELDS[kind]):
            if key == "status" and words > len(ACC_FIELDS[kind]):
                raw[key] = values[i : i + STATUS_LEN]
            else:
                raw[key] = values[i]
        out.append(_record(kind, raw))
        off += 16 + max(data_len, words * 8)
    return out


def _opt_id(v: Any) -> Optional[int]:
    if v is None:
        return None
    v = int(v)
    return None if v == INVALID_ID else v


def _record(kind: str, raw: dict[str, Any]) -> OpdebugRecord:
    """Build a record from integer fields, then render addresses as hex like msaccucmp."""
    status_v = raw.get("status", 0)
    if isinstance(status_v, list):
        status = 0
        for w in status_v:
            status |= int(w)
    else:
        status = int(status_v)
    rec = OpdebugRecord(
        kind=kind,
        model_id=_maybe_int(raw.get("model_id")),
        stream_id=_maybe_int(raw.get("stream_id")),
        task_id=_maybe_int(raw.get("task_id")),
        task_type=_maybe_int(raw.get("task_type")),
        context_id=_opt_id(raw.get("context_id")),
        thread_id=_opt_id(raw.get("thread_id")),
        status=status,
        raw=dict(raw),
    )
    for key in HEX_FIELDS:
        if isinstance(rec.raw.get(key), int):
            rec.raw[key] = hex(rec.raw[key])
    if isinstance(rec.raw.get("magic"), int):
        rec.raw["magic"] = hex(rec.raw["magic"])
    return rec


def _maybe_int(v: Any) -> Optional[int]:
    return None if v is None else int(v)


# --------------------------------------------------------------------------------------------
# rendered JSON


def read_opdebug_json(path: str) -> list[OpdebugRecord]:
    """Records from a rendered ``Opdebug…output.N.json`` (old or new layout)."""
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8-sig", errors="replace")
    except OSError as exc:
        raise OpdebugError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise OpdebugError(f"{path}: not JSON: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    return parse_opdebug_json(obj, path)


def parse_opdebug_json(obj: Any, name: str = "<json>") -> list[OpdebugRecord]:
    """Records from an already-loaded Opdebug JSON document."""
    if not isinstance(obj, dict):
        raise OpdebugError(f"{name}: Opdebug JSON is not an object")
    try:
        if any(k in obj for k in OLD_SECTIONS):
            out = []
            for kind in OLD_SECTIONS:
                sec = obj.get(kind)
                if sec is None:
                    continue
                if not isinstance(sec, dict):
                    raise OpdebugError(f"{name}: Opdebug JSON section {kind!r} is not an object")
                raw = {k: _json_int(v) for k, v in sec.items()}
                if "block_id" in raw and "block_idx" not in raw:  # CANN doc spelling
                    raw["block_idx"] = raw["block_id"]
                out.append(_record(kind, raw))
            return out
        if "acc_list" in obj:
            version = _json_int(obj.get("version", 0))
            entries = obj["acc_list"]
            entries = entries if isinstance(entries, list) else [entries]
            out = []
            for entry in entries:
                if not isinstance(entry, dict) or not isinstance(entry.get("data", {}), dict):
                    raise OpdebugError(f"{name}: Opdebug JSON acc_list entry is not an object")
                kind = _acc_kind(entry.get("acc_type"), name)
                raw = {"magic": _json_int(obj.get("magic", MAGIC)), "version": version, "acc_type": kind}
                for key in ("valid", "rsv", "data_len"):
                    if key in entry:
                        raw[key] = _json_int(entry[key])
                for key, v in entry.get("data", {}).items():
                    raw[key] = _json_int(v)
                out.append(_record(kind, raw))
            return out
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, OpdebugError):
            raise
        raise OpdebugError(f"{name}: bad value in Opdebug JSON: {exc}") from None
    raise OpdebugError(f"{name}: neither old (AI Core/Atomic Add) nor new (acc_list) Opdebug JSON")


def _acc_kind(v: Any, name: str) -> str:
    if isinstance(v, str) and v.upper() in ACC_FIELDS:
        return v.upper()
    if isinstance(v, int) and not isinstance(v, bool) and v in ACC_TYPES:
        return ACC_TYPES[v]
    raise OpdebugError(f"{name}: unknown acc_type {v!r} in Opdebug JSON")


def _json_int(v: Any) -> Any:
    """JSON ints, hex/decimal strings, and lists of them → int(s)."""
    if isinstance(v, bool):
        raise ValueError(f"boolean {v!r} where an integer was expected")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        return int(v.strip(), 0) if v.strip().lower().startswith("0x") else int(v.strip())
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, list):
        return [_json_int(x) for x in v]
    raise ValueError(f"{v!r} is not an integer")


# --------------------------------------------------------------------------------------------
# binary file (CANN dump container)


def read_opdebug_file(path: str) -> list[OpdebugRecord]:
    """Records from an ``Opdebug.Node_OpDebug.*`` binary dump (payload = its output[0])."""
    return decode_opdebug_payload(read_opdebug_payload(path), path)


def read_opdebug_payload(path: str) -> bytes:
    """The bytes of output[0] of a CANN dump file, located by ``cann_dump.read_header``."""
    try:
        header = read_header(path)
    except DumpFormatError as exc:
        raise OpdebugError(str(exc)) from None
    if not header.outputs:
        raise OpdebugError(f"{path}: CANN dump has no output, expected the Opdebug payload in output[0]")
    t = header.outputs[0]
    if t.truncated:
        raise OpdebugError(f"{path}: output[0] ({t.size} bytes at {t.offset}) runs past the end of the file")
    try:
        with open(path, "rb") as fh:
            fh.seek(t.offset)
            data = fh.read(t.size)
    except OSError as exc:
        raise OpdebugError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) != t.size:
        raise OpdebugError(f"{path}: short read of output[0] ({len(data)} of {t.size} bytes)")
    return data
