"""A lean decoder of the few ``DumpData`` fields the index needs (FORMATS.md §1.3, §1.6).

Why: on freshly parsed messages the upb protobuf runtime spends most of its time creating Python
wrappers per attribute access; decoding the ~100-byte header by hand is several times faster.
It is only a fast path: ``cann_dump.read_header`` falls back to the generated ``dump_data_pb2``
module whenever this raises ``WireError``, and tests check both agree on every message this
accepts.  Proto3 rules are followed: last scalar wins, singular sub-messages merge (shape dims
concatenate), packed and unpacked repeated varints both accepted, wrong wire types skipped as
unknown fields, enums/int32 truncated to signed 32 bits.
"""

from __future__ import annotations

_U64 = (1 << 64) - 1


class WireError(ValueError):
    """Bytes this fast path does not accept (the caller retries with the full protobuf runtime)."""


def _varint(b: bytes, i: int, end: int) -> tuple[int, int]:
    x = b[i] if i < end else -1
    if 0 <= x < 0x80:
        return x, i + 1
    result = shift = 0
    while True:
        if i >= end:
            raise WireError("truncated varint")
        x = b[i]
        i += 1
        result |= (x & 0x7F) << shift
        if x < 0x80:
            return result & _U64, i
        shift += 7
        if shift >= 70:
            raise WireError("varint too long")


def _i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _skip(b: bytes, i: int, end: int, wt: int) -> int:
    if wt == 0:
        return _varint(b, i, end)[1]
    if wt == 2:
        n, i = _varint(b, i, end)
        if n > end - i:
            raise WireError("length beyond message")
        return i + n
    if wt == 1:
        i += 8
    elif wt == 5:
        i += 4
    else:
        raise WireError(f"wire type {wt}")
    if i > end:
        raise WireError("truncated fixed field")
    return i


def _dims(b: bytes, i: int, end: int, out: list[int]) -> None:
    while i < end:
        key, i = _varint(b, i, end)
        if key == 0x0A:  # field 1 packed
            n, i = _varint(b, i, end)
            stop = i + n
            if stop > end:
                raise WireError("length beyond message")
            while i < stop:
                v, i = _varint(b, i, stop)
                out.append(v)
        elif key == 0x08:  # field 1 unpacked
            v, i = _varint(b, i, end)
            out.append(v)
        else:
            if key >> 3 == 0:
                raise WireError("field number 0")
            i = _skip(b, i, end, key & 7)


def _name(b: bytes, i: int, end: int) -> str:
    name = ""
    while i < end:
        key, i = _varint(b, i, end)
        if key == 0x0A:
            n, i = _varint(b, i, end)
            if n > end - i:
                raise WireError("length beyond message")
            name = b[i:i + n].decode("utf-8")
            i += n
        else:
            if key >> 3 == 0:
                raise WireError("field number 0")
            i = _skip(b, i, end, key & 7)
    return name


# field numbers of (data_type, format, shape, size, original_shape, sub_format, original_op)
_OUT = (1, 2, 3, 6, 7, 8, 4)
_IN = (1, 2, 3, 5, 6, 7, 0)


def _tensor(b: bytes, i: int, end: int, fields: tuple[int, ...]) -> tuple:
    f_dt, f_fmt, f_shape, f_size, f_orig, f_sub, f_op = fields
    dt = fmt = size = sub = 0
    shape: list[int] = []
    orig: list[int] = []
    op = ""
    while i < end:
        key, i = _varint(b, i, end)
        fn, wt = key >> 3, key & 7
        if fn == 0:
            raise WireError("field number 0")
        if wt == 0 and fn in (f_dt, f_fmt, f_size, f_sub):
            v, i = _varint(b, i, end)
            if fn == f_dt:
                dt = _i32(v)
            elif fn == f_fmt:
                fmt = _i32(v)
            elif fn == f_size:
                size = v
            else:
                sub = _i32(v)
        elif wt == 2 and fn in (f_shape, f_orig, f_op):
            n, i = _varint(b, i, end)
            stop = i + n
            if stop > end:
                raise WireError("length beyond message")
            if fn == f_shape:
                _dims(b, i, stop, shape)
            elif fn == f_orig:
                _dims(b, i, stop, orig)
            else:
                op = _name(b, i, stop) or op  # merge semantics: a later original_op without name keeps it
            i = stop
        elif wt == 2 and fn == 10 and f_op:  # OpOutput.dim_range: the runtime parses it, so walk it
            n, i = _varint(b, i, end)
            if n > end - i:
                raise WireError("length beyond message")
            _size_only(b, i, i + n)
            i += n
        else:
            i = _skip(b, i, end, wt)
    return dt, fmt, tuple(shape), tuple(orig), sub, size, op


def _size_only(b: bytes, i: int, end: int) -> int:
    size = 0
    while i < end:
        key, i = _varint(b, i, end)
        if key == 0x18:  # field 3 varint
            size, i = _varint(b, i, end)
        else:
            if key >> 3 == 0:
                raise WireError("field number 0")
            i = _skip(b, i, end, key & 7)
    return size


def decode_dump_data(b: bytes, start: int, end: int) -> tuple:
    """(version, dump_time, op_name, inputs, outputs, buffer_sizes, space_sizes, has_attr).

    Tensors are ``(data_type, format, shape, original_shape, sub_format, size, original_op_name)``.
    """
    version = op_name = ""
    dump_time = 0
    inputs: list[tuple] = []
    outputs: list[tuple] = []
    buffers: list[int] = []
    spaces: list[int] = []
    has_attr = False
    i = start
    while i < end:
        key, i = _varint(b, i, end)
        fn, wt = key >> 3, key & 7
        if fn == 0:
            raise WireError("field number 0")
        if wt == 2 and fn <= 9:
            n, i = _varint(b, i, end)
            stop = i + n
            if stop > end:
                raise WireError("length beyond message")
            if fn == 4:
                inputs.append(_tensor(b, i, stop, _IN))
            elif fn == 3:
                outputs.append(_tensor(b, i, stop, _OUT))
            elif fn == 1:
                version = b[i:stop].decode("utf-8")
            elif fn == 6:
                op_name = b[i:stop].decode("utf-8")
            elif fn == 5:
                buffers.append(_size_only(b, i, stop))
            elif fn == 8:
                spaces.append(_size_only(b, i, stop))
            elif fn == 7:
                has_attr = True
            elif fn == 9:
                b[i:stop].decode("utf-8")  # validated like the runtime does
            i = stop
        elif wt == 0 and fn == 2:
            dump_time, i = _varint(b, i, end)
        else:
            i = _skip(b, i, end, wt)
    return version, dump_time, op_name, inputs, outputs, buffers, spaces, has_attr
