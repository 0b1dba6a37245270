"""Shared bits of the graph parsers: the error type, input reading, name and dtype spelling.

Kept apart from ``__init__`` so the parser modules can import it without a cycle.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

Source = Union[str, bytes, "os.PathLike[str]"]


class GraphParseError(ValueError):
    """A graph file holds nothing usable; the message is one line naming the file."""




def one_line(text: object, limit: int = 200) -> str:
    """Squash a message to one short line (errors must stay one line)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def read_source(src: Source) -> tuple[str, str]:
    """Return ``(text, label)`` for a path or an in-memory text.

    A ``str`` is a path when it has no newline and names an existing file; otherwise it
    is the text itself (labelled ``<text>``).  Undecodable bytes are replaced, never fatal.
    """
    path: str | None = None
    if isinstance(src, os.PathLike):
        path = os.fspath(src)
    elif isinstance(src, str):
        if "\n" not in src and len(src) < 4096:
            try:
                if os.path.isfile(src):
                    path = src
            except (OSError, ValueError):
                path = None
        if path is None:
            return src, "<text>"
    elif isinstance(src, (bytes, bytearray)):
        return bytes(src).decode("utf-8", errors="replace"), "<text>"
    else:
        raise GraphParseError(f"<input>: expected a path or text, got {type(src).__name__}")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise GraphParseError(f"{path}: cannot read: {one_line(exc)}") from None
    return data.decode("utf-8", errors="replace"), path


# ---- dtype spelling -------------------------------------------------------------------

#: MindSpore type names (and the short r1.x spellings) → numpy spelling.
_MS_DTYPES = {
    "float16": "float16", "float32": "float32", "float64": "float64", "float": "float32",
    "double": "float64", "bfloat16": "bfloat16", "bf16": "bfloat16",
    "f16": "float16", "f32": "float32", "f64": "float64",
    "int4": "int4", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "int": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "bool": "bool", "complex64": "complex64", "complex128": "complex128",
    "float8e5m2": "float8_e5m2", "float8e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    "float8_e4m3fn": "float8_e4m3fn", "hifloat8": "hifloat8", "string": "string",
}


def ms_dtype(name: str) -> str:
    """MindSpore type name (``Float32``, ``BFloat16``, ``I64``) → numpy spelling, '' if not a dtype."""
    return _MS_DTYPES.get(name.lower(), "")


_GE_SPECIAL = {
    "DT_FLOAT": "float32", "DT_DOUBLE": "float64", "DT_BF16": "bfloat16",
    "DT_FLOAT8_E8M0": "float8_e8m0fnu", "DT_UNDEFINED": "", "DT_DUAL": "dual",
}

#: ge.proto DataType numbering (proto numbering, not C++ ge::DataType) for JSON/int values.
GE_DTYPE_NAMES = [
    "DT_UNDEFINED", "DT_FLOAT", "DT_FLOAT16", "DT_INT8", "DT_UINT8", "DT_INT16", "DT_UINT16",
    "DT_INT32", "DT_INT64", "DT_UINT32", "DT_UINT64", "DT_BOOL", "DT_DOUBLE", "DT_STRING",
    "DT_DUAL_SUB_INT8", "DT_DUAL_SUB_UINT8", "DT_COMPLEX64", "DT_COMPLEX128", "DT_QINT8",
    "DT_QINT16", "DT_QINT32", "DT_QUINT8", "DT_QUINT16", "DT_RESOURCE", "DT_STRING_REF",
    "DT_DUAL", "DT_VARIANT", "DT_BF16", "DT_INT4", "DT_UINT1", "DT_INT2", "DT_UINT2",
    "DT_COMPLEX32", "DT_HIFLOAT8", "DT_FLOAT8_E5M2", "DT_FLOAT8_E4M3FN", "DT_FLOAT8_E8M0",
    "DT_FLOAT6_E3M2", "DT_FLOAT6_E2M3", "DT_FLOAT4_E2M1", "DT_FLOAT4_E1M2",
]


def ge_dtype(value: object) -> str:
    """ge.proto DataType (enum name or number) → numpy spelling (``DT_FLOAT`` → ``float32``)."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit()):
        idx = int(value)
        if not 0 <= idx < len(GE_DTYPE_NAMES):
            return f"dt_{idx}"
        value = GE_DTYPE_NAMES[idx]
    name = str(value)
    if name in _GE_SPECIAL:
        return _GE_SPECIAL[name]
    return name[3:].lower() if name.startswith("DT_") else name.lower()
