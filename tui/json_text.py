"""The ``--json`` document as text: exactly what ``inert.json_safe(json.dumps(doc, indent=1,
ensure_ascii=False))`` prints with NaN/Inf spelled as strings, in a third of the time (DEL, C1 and bidi
controls escaped string by string, so the terminal stays safe and no pass over the whole text is needed).

With ``indent`` the standard library encodes in Python generators, one per nested value: 1.5 s CPU for
the 40,000 rows (63 MB) of a compare of two 20,000-file trees.  This writer takes 0.5 s, and applies
the CLI's cleaning on the way (NaN/±Inf as the strings "nan"/"inf"/"-inf", numpy scalars as Python
numbers, tuples as lists) — the same text, byte for byte, and the same ``TypeError`` for an object
JSON cannot hold.

Rows: a list's dicts that share one tuple of ``str`` keys (a compare's rows, an op list, an op's
tensors) are printed column by column, 64 at a time (``_dicts_parts``): per key one ``map`` over all
of them (``float.__repr__``, the C string encoder, ``int.__repr__``; nested dicts' keys alike, in their
row's columns), a column of one text a row folded into the text between columns, and the chunk joined
at once (``_dicts_block``; a list's dicts inside a row: one ``%`` of a template each, ``_dicts_text``).
Anything else is printed one value at a time, appending to one list (``_dict``: a dict's key
prefixes ``,\n<indent>"key": `` are kept per key tuple).

Why not the C encoder for all of it (``json.encoder.c_make_encoder`` with ``item_separator=",\n" +
indent`` prints a dict or list of *leaves* as ``indent=1`` does, brackets aside): on Python 3.11 it
spends about 0.08 us per item besides the texts of numbers and strings, and a document of nested
values needs one call per run of leaves.  Without any indent it prints the compare document in
0.41 s, of which the float and string texts are 0.24 s: the floor of any writer built from the
standard library.  It prints lists of eight leaves or more (values, histograms), in slices of
``_C_LIST_SLICE`` items, and the columns of mixed leaves; a NaN or ±Inf (which it would print as
``NaN``) sends its slice or column back here.
"""

from __future__ import annotations

import json.encoder
import math
from itertools import chain, islice, repeat
from typing import Any, Callable

from dumpscope.core.inert import json_safe, json_unsafe_in
from dumpscope.core.support.row_columns import columns_of, float_texts, has_negative_zero

_encode_str: Callable[[str], str] = json.encoder.encode_basestring  # the C one when available
#: a string's JSON text with DEL, C1 and bidi controls escaped (``inert.json_safe``): done string by
#: string here, where only the rare non-ASCII string costs a scan, instead of a regex over the whole
#: printed document (0.19 s CPU of a compare of two 20k trees, whose every rule holds a "≤")
_safe: Callable[[str], str] = json_safe
_float_repr = float.__repr__
_int_repr = int.__repr__
_INF = float("inf")

#: types the C encoder prints as the cleaned document does (NaN/±Inf aside: it refuses them)
_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})
_is_leaf: Callable[[type], bool] = _LEAF_TYPES.__contains__

#: the shortest list of leaves given to the C encoder (one call costs about as much as a few items
#: here), and the most items in one call (a list of millions of values is printed in slices)
_C_LIST_MIN = 8
_C_LIST_SLICE = 4096


def dumps(doc: Any) -> str:
    """``json.dumps(clean(doc), indent=1, ensure_ascii=False)``, faster (see the module docstring)."""
    out: list[str] = []
    _value(doc, out, "\n")
    return "".join(out)


#: pieces gathered before ``dump`` hands them on: a few MB of text, whatever the document's size
_FLUSH_PIECES = 1 << 16


class _Flushing(list):
    """The piece list of ``dump``: a list items are appended to, emptied into ``write`` between the
    items of a list (the rows of a compare) once it holds ``_FLUSH_PIECES``, and after each chunk of
    rows printed column by column.  ``write_bytes`` (or None): where printed rows' UTF-8 blocks are
    copied as they are stored (``_printed``)."""

    __slots__ = ("write", "write_bytes")

    def flush(self) -> None:
        if self:
            self.write("".join(self))
            self.clear()


def dump(doc: Any, write: Callable[[str], Any], write_bytes: Callable[[bytes], Any] | None = None) -> None:
    """The text of ``dumps(doc)`` handed to ``write`` in parts: a 63 MB compare document never sits in
    memory whole (nor the millions of small pieces it is joined from).  ``write_bytes``: the same stream
    as UTF-8 bytes (what ``write`` writes encoded), given the printed rows' blocks as they are stored."""
    out = _Flushing()
    out.write = write
    out.write_bytes = write_bytes
    _value(doc, out, "\n")
    out.flush()


def _value(v: Any, out: list[str], nl: str) -> None:
    t = type(v)
    if t is dict:
        _dict(v, out, nl)
        return
    if t is list:
        _list(v, out, nl)
        return
    leaf = _leaf(v)
    if leaf is not None:
        out.append(leaf)
    elif isinstance(v, dict):
        _dict(v, out, nl)
    elif isinstance(v, (list, tuple)) or _is_rows(v):  # rows read back from a spool: a list too
        _list(v, out, nl)
    elif hasattr(v, "item") and not isinstance(v, bytes):  # numpy scalars (an array: its text)
        try:
            item = v.item()
        except Exception:
            item = str(v)
        _value(item, out, nl)
    else:
        raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


def _is_rows(v: Any) -> bool:
    from dumpscope.core.support.row_spool import is_rows

    return is_rows(v)


def _leaf(v: Any) -> Any:
    """The text of a string, number, bool or None (the CLI's cleaning applied), else None."""
    t = type(v)
    if t is str:
        return _safe(_encode_str(v))
    if t is float:
        return _float_repr(v) if v - v == 0.0 else _nonfinite(v)
    if t is int:
        return _int_repr(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return _safe(_encode_str(v))
    if isinstance(v, float):  # before int: the CLI cleans floats (numpy float64 included) first
        return _float_repr(v) if math.isfinite(v) else _nonfinite(v)
    if isinstance(v, int):
        return _int_repr(v)
    return None


def _nonfinite(v: float) -> str:
    return '"nan"' if v != v else ('"inf"' if v > 0 else '"-inf"')


#: per indentation, the key prefixes of a dict by its key tuple: ``{<indent>"a": `` then
#: ``,<indent>"b": `` ... (only tuples of ``str`` keys: 1, 1.0 and True are equal keys, not one text)
_PLANS: dict[str, dict[tuple, list[str]]] = {}
_PLANS_MAX = 1024


#: per indentation, ``,<indent>"key": `` by ``str`` key: dicts of many different key tuples (past
#: ``_PLANS_MAX``) still find their keys' prefixes
_KEY_PREFIXES: dict[str, dict[str, str]] = {}
_KEY_PREFIXES_MAX = 4096


def _prefixes(keys: Any, inner: str) -> tuple[list[str], bool]:
    """The text before each value of a dict with ``keys`` whose items sit after ``inner``, and whether
    every key is a ``str``."""
    known = _KEY_PREFIXES.get(inner)
    if known is None:
        known = _KEY_PREFIXES[inner] = {}
    prefixes = list(map(known.get, keys))  # only str keys are there: no other key equals one
    plain = True
    if None in prefixes:
        for i, k in enumerate(keys):
            if prefixes[i] is None:
                if type(k) is str:
                    prefix = prefixes[i] = "," + inner + _safe(_encode_str(k)) + ": "
                    if len(known) < _KEY_PREFIXES_MAX:
                        known[k] = prefix
                else:
                    prefixes[i] = "," + inner + _safe(_encode_str(_key_text(k))) + ": "
                    plain = False
    if prefixes:
        prefixes[0] = "{" + prefixes[0][1:]
    return prefixes, plain


def _dict(d: dict, out: list[str], nl: str) -> None:
    if not d:
        out.append("{}")
        return
    inner = nl + " "
    if type(d) is dict:
        keys = tuple(d)
        plans = _PLANS.get(inner)
        if plans is None:
            plans = _PLANS[inner] = {}
        prefixes = plans.get(keys)
        if prefixes is None:
            prefixes, plain = _prefixes(keys, inner)
            if plain and len(plans) < _PLANS_MAX:
                plans[keys] = prefixes
        pairs: Any = zip(prefixes, d.values())
    else:  # a subclass: its own items()
        items = list(d.items())
        pairs = zip(_prefixes([k for k, _ in items], inner)[0], [v for _, v in items])
    append = out.append
    for prefix, v in pairs:
        t = type(v)
        if t is str:
            append(prefix + _safe(_encode_str(v)))
        elif t is float and v - v == 0.0:
            append(prefix + _float_repr(v))
        elif t is int:
            append(prefix + _int_repr(v))
        elif v is None:
            append(prefix + "null")
        elif t is bool:
            append(prefix + ("true" if v else "false"))
        elif t is dict:
            append(prefix)
            _dict(v, out, inner)
        elif t is list:
            append(prefix)
            _list(v, out, inner)
        else:
            append(prefix)
            _value(v, out, inner)
    append(nl + "}")


#: the C encoder of each indentation (``inner``); None without the C module
_ENCODERS: dict[str, Callable[[Any], str] | None] = {}


def _c_encoder(inner: str) -> Callable[[Any], str] | None:
    """The C encoder printing a list of leaves whose items sit after ``inner`` as
    ``[1,<inner>2]``; it refuses NaN and ±Inf (ValueError) and anything but the leaf types."""
    try:
        return _ENCODERS[inner]
    except KeyError:
        pass
    make = json.encoder.c_make_encoder
    encoder = None
    if make is not None and _encode_str is json.encoder.c_encode_basestring:
        encode = make(None, None, _encode_str, None, ": ", "," + inner, False, False, False)

        def encoder(value: Any) -> str:
            return encode(value, 0)[0]

    _ENCODERS[inner] = encoder
    return encoder


#: how many slices of lists the C encoder printed (a test's seam: the fast path is taken)
c_slices = 0


#: where the items of a top-level key's list sit (compare's ``rows``: ``row_block_text``)
_ROWS_INNER = "\n  "


def row_block_text(rows: list) -> str:
    """The text of ``rows`` as items of a list that is the value of a top-level key of the document
    (compare's ``rows``), joined by that list's separator: what ``dump`` prints there.  A spool of
    rows kept printed (``row_spool.PrintedRows``) is made with it and copied by ``dump``."""
    out: list[str] = []
    # the whole block as one chunk (a spool's block is 128 rows, made while compare keeps the collector
    # paused): 0.62 -> 0.47 s CPU for the 40,000 rows of two 20k trees against chunks of 64
    _chunks(rows, out, "", _ROWS_INNER, max(_CHUNK, len(rows)))
    return "".join(out)


def _printed(parts: list, out: list[str], sep: str, inner: str) -> None:
    """The blocks of printed rows (``row_block_text``'s texts), the first after ``sep``; as bytes to
    ``write_bytes`` when ``_list`` asked for them (``_as_bytes``)."""
    flushing = type(out) is _Flushing
    copy = out.write_bytes if flushing else None  # type: ignore[attr-defined]
    for blocks in parts:
        for text in blocks:
            if copy is not None:
                out.append(sep)
                out.flush()  # type: ignore[attr-defined]
                copy(text)
            else:
                out.append(sep + text)
                if flushing:
                    out.flush()  # type: ignore[attr-defined]
            sep = "," + inner


def _list(items: Any, out: list[str], nl: str) -> None:
    if not items:
        out.append("[]")
        return
    inner = nl + " "
    sep = "[" + inner
    if inner == _ROWS_INNER and _is_rows(items):
        from dumpscope.core.support.row_spool import printed_parts

        parts = printed_parts(items, as_bytes=type(out) is _Flushing and out.write_bytes is not None)  # type: ignore
        if parts is not None:  # rows printed as they were made, at this very place: copied
            _printed(parts, out, sep, inner)
            out.append(nl + "]")
            return
    t = type(items)
    encoder = None
    if (t is list or t is tuple) and len(items) >= _C_LIST_MIN and False not in map(_is_leaf, map(type, items)):
        encoder = _c_encoder(inner)
    if encoder is None:
        _chunks(items, out, sep, inner)
    else:  # a long list of leaves: the C encoder, a slice at a time
        global c_slices
        flushing = type(out) is _Flushing and len(items) > _C_LIST_SLICE
        for start in range(0, len(items), _C_LIST_SLICE):
            part = items[start : start + _C_LIST_SLICE]
            try:
                text = _safe(encoder(part))
            except ValueError:  # a NaN or ±Inf (printed as a string here), an int too long to print
                _items(part, out, sep, inner)
            else:
                out.append(sep + text[1:-1])
                c_slices += 1
            sep = "," + inner
            if flushing:
                out.flush()  # type: ignore[attr-defined]
    out.append(nl + "]")


#: a list's items are taken this many at a time; a run of as many dicts of one key tuple (the rows of
#: a compare) is printed column by column (``_dicts_text``).  Few enough that their dicts and lists
#: (5 a compare row) stay under the garbage collector's 700: with 256 the CLI's compare of two 20k
#: trees ran 286 young, 26 middle and 2 full collections while printing, and cost 0.1 s more CPU
_CHUNK = 64
_COLUMNS_MIN = 8

#: how many chunks of dicts were printed column by column (a test's seam: the fast path is taken)
column_chunks = 0


def _chunks(items: Any, out: list[str], sep: str, inner: str, size: int = 0) -> None:
    """The items of a list (or of rows read back from a spool), the first after ``sep``: each chunk of
    ``size`` (``_CHUNK``) dicts column by column where it can, else one item at a time."""
    global column_chunks
    t = type(items)
    if (len(items) < _COLUMNS_MIN) if (t is list or t is tuple) else not _is_rows(items):
        _items(items, out, sep, inner)
        return
    flushing = type(out) is _Flushing
    later = "," + inner
    size = size or _CHUNK
    # (a list of one chunk is that chunk itself: a spool's block, read by column by its table too, is the
    # very list the table read: ``row_columns``)
    if t is list and len(items) <= size:
        chunks: Any = (items,)
    else:
        it = iter(items)
        chunks = iter(lambda: list(islice(it, size)), [])
    for chunk in chunks:
        text = None
        if len(chunk) >= _COLUMNS_MIN and set(map(type, chunk)) == _DICT_ONLY:
            try:
                text = _dicts_block(chunk, inner, later)
            except (TypeError, ValueError):  # raised again row by row: about the first value in the text
                text = None
        if text is None:
            _items(chunk, out, sep, inner)
        else:
            out.append(sep + text)
            column_chunks += 1
            if flushing:
                out.flush()  # type: ignore[attr-defined]
        sep = later


_DICT_ONLY = {dict}
_NONFINITE = {"nan": '"nan"', "inf": '"inf"', "-inf": '"-inf"'}
_BOOL_TEXT = {True: "true", False: "false"}
_NONE_TYPE = type(None)


def _dicts_text(ds: list[dict], nl: str) -> list[str] | None:
    """The texts of ``ds``, dicts sitting after ``nl``, printed column by column: one ``map`` per key
    over all of them (``float.__repr__``, the C string encoder...) and one ``%`` per dict, instead of a
    Python step per value (a column of other values: one ``_value`` each); None (nothing done)
    unless they share one tuple of ``str`` keys."""
    parts = _dicts_parts(ds, nl)
    if parts is None:
        return None
    pieces, texts = parts
    if not texts:  # every column one text: the last piece is the text
        return [pieces[-1]] * len(ds)
    template = "%s".join([p.replace("%", "%%") for p in pieces])
    return list(map(template.__mod__, zip(*texts)))


def _dicts_block(ds: list[dict], nl: str, sep: str) -> str | None:
    """``sep.join(_dicts_text(ds, nl))``, joined at once: the texts between columns repeated beside the
    columns, one ``str.join`` of them all (no ``%`` a row)."""
    parts = _dicts_parts(ds, nl)
    if parts is None:
        return None
    pieces, texts = parts
    if not texts:
        return sep.join([pieces[-1]] * len(ds))
    its: list[Any] = []
    for piece, col in zip(pieces, texts):
        its.append(repeat(piece))
        its.append(col)
    its.append(repeat(pieces[-1] + sep))
    whole = "".join(chain.from_iterable(zip(*its)))
    return whole[: len(whole) - len(sep)]


#: how many columns of dicts were printed in their rows' template, and how many columns of one text were
#: made part of it (a test's seams: the fast paths are taken)
spliced_columns = folded_columns = 0


def _dicts_parts(ds: Any, nl: str) -> tuple[list[str], list[list[str]]] | None:
    """The texts of ``ds`` (dicts sitting after ``nl`` sharing one tuple of ``str`` keys) as columns: the
    text before each column (keys, indentation, the texts of columns of one text a row), then the one
    after the last; None unless they share one tuple of keys.  A column of dicts that share keys too (a
    compare row's golden and target) is not printed apart: its texts are spliced into these (one ``%``
    a row, not three: 0.47 -> 0.43 s CPU for the 40,000 rows of two 20k trees).  A column of one text
    (a compare's mode, dtypes, null sources; folded when its ends are equal and so is every row) is part
    of the text between columns: 0.32 -> 0.29 s with ``_dicts_block``'s one join a chunk."""
    keys = tuple(ds[0])
    if not keys:
        return None
    inner = nl + " "
    prefixes, plain = _prefixes(keys, inner)
    if not plain:
        return None
    # equal tuples of keys: the same keys when one tuple is all str (no other key equals a str); the
    # columns made once for the block's table too, while a spool stores it (``row_columns``)
    got = columns_of(ds)
    if got is None:
        return None
    global spliced_columns, folded_columns
    texts: list[list[str]] = []
    pieces: list[str] = []  # the text before each column
    lit = ""  # the text since the last column
    for prefix, column in zip(prefixes, got[1]):
        lit += prefix
        col: Any = None
        first = type(column[0])
        if first is float and _one_float(column):  # (identical pairs' errors and cosines, a dtype's allowed error)
            text = _float_repr(column[0])
            folded_columns += 1
            lit += _NONFINITE.get(text, text)
            continue
        if first is float or first is str:  # guessed from the first value: a TypeError if another is not one
            try:
                # (each float's own text: printing a repeated value once made the bench trees' rows 0.12 s
                # cheaper only because they repeat 167 distinct floats in 660k; real statistics differ.  Made
                # once for the block's table too, ``--output``'s: ``row_columns.float_texts``)
                col = float_texts(column) if first is float else _str_texts(column)
            except TypeError:  # None among them...: by the types of all (never all floats or all str)
                pass
            else:
                if first is float and ("nan" in col or "inf" in col or "-inf" in col):
                    col = [_NONFINITE.get(t, t) for t in col]
        if col is None:
            kinds = set(map(type, column))
            if len(kinds) == 1:
                kind = kinds.pop()
                if kind is int:
                    col = list(map(_int_repr, column))
                elif kind is _NONE_TYPE:
                    col = ["null"]
                elif kind is bool:
                    col = list(map(_BOOL_TEXT.__getitem__, column))
                elif kind is dict:
                    nested = _dicts_parts(column, inner)
                    if nested is None:
                        col = [_text(v, inner) for v in column]
                    else:  # its template in this one, its columns among these
                        spliced_columns += 1
                        inner_pieces, inner_texts = nested
                        if inner_texts:
                            pieces.append(lit + inner_pieces[0])
                            pieces += inner_pieces[1:-1]
                            texts += inner_texts
                            lit = inner_pieces[-1]
                        else:
                            lit += inner_pieces[-1]
                        continue
                elif kind is list:
                    col = _lists_text(column, inner)
                else:
                    col = [_text(v, inner) for v in column]
            elif kinds <= _LEAF_TYPES:  # str or None, float or None...: one C call, or here with a NaN
                col = _leaves_text(column)
            else:
                col = [_text(v, inner) for v in column]
        text = col[0]
        if text == col[-1] and col.count(text) == len(col):  # one text in every row (a compare's mode, dtype,
            folded_columns += 1  # null source...): in the template, not a column
            lit += text
        else:
            pieces.append(lit)
            texts.append(col)
            lit = ""
    pieces.append(lit + nl + "}")
    return pieces, texts


_STR_ONLY = {str}
_FLOAT_ONLY = {float}


def _one_float(column: tuple) -> bool:
    """Whether a column of a chunk of rows is one float throughout, so that it is printed once (the
    texts are not made to find out: a ``float.__repr__`` is ~0.1-0.3 us, a comparison ~0.01): every
    row an exact match (a compare of a run with its rerun: cosine 1, errors 0) or of one dtype pair (its
    allowed error).  Not a float equal to it (``1 == 1.0 == True``), not a -0.0 among zeros; a NaN
    equals only itself (the same object)."""
    v = column[0]
    return (column.count(v) == len(column) and set(map(type, column)) == _FLOAT_ONLY
            and bool(v or not has_negative_zero(column)))


def _str_texts(column: tuple) -> list[str]:
    """The JSON texts of a column of strings: the C encoder's, escaped (``_safe``) only where the
    column holds a character to escape (one join, one scan where it is not plain ASCII: every rule of
    a compare holds a "≤"); each distinct string encoded once where at most half are distinct (a
    compare's rules and files: 0.032 -> 0.024 s for the 40,000 rows of the 20k noisy pair)."""
    distinct = dict.fromkeys(column)
    # (a compare's files: a CANN op's inputs and outputs share one; every value a str: an object equal
    # to one is no JSON value)
    if len(distinct) * 2 <= len(column) and set(map(type, column)) == _STR_ONLY:
        known = dict(zip(distinct, map(_encode_str, distinct)))
        texts = list(map(known.__getitem__, column))
        joined = "".join(known.values())
    else:
        texts = list(map(_encode_str, column))
        joined = "".join(texts)
    if (joined.isascii() and "\x7f" not in joined) or not json_unsafe_in(joined):
        return texts
    return list(map(_safe, texts))


def _leaves_text(column: tuple) -> list[str]:
    """The texts of leaves of several types: one C call (a raw control character is only ever its
    separator), or one ``_leaf`` each where it cannot (a NaN or ±Inf, no C encoder)."""
    encoder = _c_encoder("\x00")
    if encoder is not None:
        try:
            return _safe(encoder(column))[1:-1].split(",\x00")
        except ValueError:
            pass
    return list(map(_leaf, column))


def _text(v: Any, nl: str) -> str:
    """The text of ``v`` sitting after ``nl``, one step per value."""
    out: list[str] = []
    _value(v, out, nl)
    return "".join(out)


def _lists_text(column: tuple, nl: str) -> list[str]:
    """The texts of the lists of ``column``, each sitting after ``nl``: their dicts (an op's tensors)
    column by column, all lists' together, where they are dicts of one tuple of keys."""
    flat = list(chain.from_iterable(column))
    if len(flat) >= _COLUMNS_MIN and set(map(type, flat)) == _DICT_ONLY:
        inner = nl + " "
        texts = _dicts_text(flat, inner)
        if texts is not None:
            sep = "," + inner
            lists = []
            at = 0
            for v in column:
                if v:
                    lists.append("[" + inner + sep.join(texts[at : at + len(v)]) + nl + "]")
                    at += len(v)
                else:
                    lists.append("[]")
            return lists
    elif flat and set(map(type, flat)) == _INT_ONLY:  # shapes: a few distinct ones, each printed once
        known = _INT_LISTS.get(nl)
        if known is None or len(known) > _INT_LISTS_MAX:
            known = _INT_LISTS[nl] = {}
        keys = list(map(tuple, column))
        texts = list(map(known.get, keys))
        if None in texts:
            for i, v in enumerate(column):
                if texts[i] is None:
                    texts[i] = known[keys[i]] = _list_text(v, nl)
        return texts
    return [_list_text(v, nl) for v in column]


#: per indentation, the texts of lists of ints (shapes) by their tuple, for ``_lists_text``
_INT_LISTS: dict[str, dict[tuple, str]] = {}
_INT_LISTS_MAX = 4096


def _list_text(v: list, nl: str) -> str:
    """The text of the list ``v`` sitting after ``nl`` (a ``shape``)."""
    if v and set(map(type, v)) == _INT_ONLY:
        inner = nl + " "
        return "[" + inner + ("," + inner).join(map(_int_repr, v)) + nl + "]"
    return _text(v, nl)


_INT_ONLY = {int}


def _items(items: Any, out: list[str], sep: str, inner: str) -> None:
    """The items of a list, the first after ``sep``."""
    append = out.append
    flushing = type(out) is _Flushing
    for v in items:
        append(sep)
        sep = "," + inner
        t = type(v)
        if t is int:
            append(_int_repr(v))
        elif t is str:
            append(_safe(_encode_str(v)))
        elif t is float and v - v == 0.0:
            append(_float_repr(v))
        else:
            if t is dict:
                _dict(v, out, inner)
            else:
                _value(v, out, inner)
            if flushing and len(out) >= _FLUSH_PIECES:
                out.flush()  # type: ignore[attr-defined]


def _key_text(k: Any) -> str:
    return k if isinstance(k, str) else _key(k)


def _key(k: Any) -> str:
    """A non-string key as ``json`` spells it (keys are not cleaned: NaN stays NaN)."""
    if isinstance(k, float):
        if k != k:
            return "NaN"
        if k == _INF:
            return "Infinity"
        if k == -_INF:
            return "-Infinity"
        return _float_repr(k)
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, int):
        return _int_repr(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")
