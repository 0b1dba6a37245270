"""The compare table's cells of a chunk of rows made column by column, for the workbook and the CSV.

``TableCells.of`` makes a row's ~42 cells as a list, one row at a time; the workbook then writes them
column by column (``xlsx_stream.XlsxWriter._run``: one check of a column's types, one lookup of its
texts), so the rows were made and transposed back (the 20k noisy compare's table: ~4 us a row for the
cells, ~4 us for the sheet's XML).  Here a chunk's rows are read key by key (one ``itemgetter`` per
row, transposed by ``zip``) and each column made by C-level passes over the chunk: ``XlsxWriter.columns``
takes them as they are.  The cells are ``TableCells.of``'s, the same values (each column is the same
function of a row's keys as ``of``'s cell, applied to a column); a chunk ``of`` has anything unusual in
(a missing key, a side that is not a dict, a scalar argument spread over several rows, a key of no hash,
a name that is not text) is left to ``of``: ``chunk_columns`` then returns None and has changed nothing.
Rows added a spool's block at a time come with their columns already read (``block_columns``, made once
for the block's print too: ``core.support.row_columns``), joined for the chunk (``joined_columns``).
"""

from __future__ import annotations

import os
import posixpath
from itertools import chain, repeat
from operator import eq, itemgetter
from typing import Any, Optional, Sequence

from dumpscope.core.engines.compare.report import (_ASCII_FORMULA_START, _FLOATS, _PLAIN, _ROW_KEYS, _SIDE_KEYS, NA,
                                                   TableCells, _basename, _cell_text, _row_values, _side_values,
                                                   _stack, _stat)
from dumpscope.core.support.row_columns import columns_of

#: the formula starts of ``_cell_text`` after a line end: a chunk's texts joined by ``\n`` hold one where a
#: text starts with one
_LINE_FORMULA = tuple("\n" + c for c in _ASCII_FORMULA_START)
#: the ASCII characters that are not printable (``str.isprintable``), and those ``repr`` escapes or that make it
#: quote a text otherwise than in single quotes
_CONTROL = bytes(range(32)) + b"\x7f"
_REPR_SPECIAL = _CONTROL + b"'\\"
_POSIX = os.path.basename is posixpath.basename
_LAST = itemgetter(2)
_STR = frozenset((str,))
_DICT = frozenset((dict,))
_LIST = frozenset((list,))
_KEY_AT = {k: i for i, k in enumerate(_ROW_KEYS)}
_SIDES = ("golden", "target")

#: a block's columns by key: its rows', its golden sides', its target sides' (``block_columns``)
BlockColumns = tuple[dict[str, tuple], dict[str, tuple], dict[str, tuple]]


def block_columns(rows: list[dict[str, Any]]) -> Optional[BlockColumns]:
    """The columns ``chunk_columns`` reads of a block of rows, by key (``row_columns.columns_of``: while
    a spool stores the block, made once for its print too): the rows', and their sides' where every row's
    side is a dict of one tuple of keys; None where they are not so (``chunk_columns`` reads the rows)."""
    if not _DICT.issuperset(map(type, rows)):
        return None
    got = columns_of(rows)
    if got is None:
        return None
    by_key = dict(zip(*got))
    sides = []
    for side in _SIDES:
        col = by_key.get(side)
        if col is None or not _DICT.issuperset(map(type, col)):
            return None
        inner = columns_of(col)
        if inner is None:
            return None
        sides.append(dict(zip(*inner)))
    return by_key, sides[0], sides[1]


def joined_columns(blocks: Sequence[Optional[BlockColumns]]) -> Optional[BlockColumns]:
    """The columns of blocks of rows one after the other (``block_columns``'s: a chunk's), the keys
    ``chunk_columns`` reads; None unless every block has them, under the same keys in the same order."""
    if not blocks or None in blocks:
        return None
    if len(blocks) == 1:
        return blocks[0]
    out = []
    for i, wanted in enumerate((_ROW_KEYS, _SIDE_KEYS, _SIDE_KEYS)):
        parts = [b[i] for b in blocks]  # type: ignore[index]
        if any(list(p) != list(parts[0]) for p in parts[1:]):
            return None
        out.append({k: tuple(chain.from_iterable(p[k] for p in parts)) for k in wanted if k in parts[0]})
    return out[0], out[1], out[2]


def _bare_ascii(text: str, special: bytes) -> bool:
    """Whether ``text`` is ASCII holding none of the bytes ``special``: one C-level pass that deletes them
    (``str.isprintable`` reads the character database for each character: ~4x slower)."""
    return text.isascii() and len(text.encode().translate(None, special)) == len(text)


def _basenames(paths: tuple[str, ...]) -> list[str]:
    """``_basename`` of each of ``paths`` (on POSIX what follows the last ``/``, in C: ``rpartition``)."""
    if _POSIX:
        return list(map(_LAST, map(str.rpartition, paths, repeat("/"))))
    return list(map(_basename, paths))


def _plain_texts(texts: list[str]) -> bool:
    """Whether ``_cell_text`` leaves each of ``texts`` (all ``str``, none empty) as it is: printable ASCII
    (checked on them joined) starting with no formula character (checked after the line ends of them
    joined by ``\\n``)."""
    if not _bare_ascii("".join(texts), _CONTROL):
        return False
    lines = "\n" + "\n".join(texts)
    return not any(map(lines.__contains__, _LINE_FORMULA))


def _npu_name(bench: str, target_name: Any, name: str, io: Any, slot: Any) -> str:
    """``TableCells.of``'s NPU Name: the Bench Name, or the target's own name's."""
    tname = target_name or name
    if type(tname) is not str:
        tname = str(tname)
    return bench if tname == name else _cell_text(tname + f".{io}.{slot}")


def chunk_columns(cells: TableCells, rows: list[dict[str, Any]], given: Optional[BlockColumns] = None
                  ) -> Optional[tuple[list[Any], list[Optional[str]], list[Optional[type]]]]:
    """``(columns in COLUMNS order, each row's fill, each column's type)`` of ``rows``: the cells
    ``cells.of(rows)`` makes, by column, and the type of every cell of a column where it is known (the
    texts made here; None where the writer must look: ``XlsxWriter.columns``); None (nothing done) for a
    chunk ``of`` must make row by row.  ``cells.float_texts`` (the CSV's) is not applied: the floats are
    given as floats (the CSV spells them by column: ``table_file._CsvLines.of_columns``).  ``given``: the
    rows' columns already made (``joined_columns`` of their blocks'), read instead of the rows."""
    n = len(rows)
    if not n:
        return None
    try:
        if given is not None:  # (a key missing: as a row missing it)
            by_key, g_by_key, t_by_key = given
            cols = [by_key[k] for k in _ROW_KEYS]
            t_sides = [t_by_key[k] for k in _SIDE_KEYS]
            g_sides = [g_by_key[k] for k in _SIDE_KEYS]
        else:
            cols = list(zip(*map(_row_values, rows)))
    except (KeyError, TypeError):
        return None
    (names, ios, slots, steps, ranks, kinds, target_names, op_ids, goldens, targets, verdicts, rules, typs,
     precs, origins, matches, modes, exec_indexes, judgements, rel_errs, alloweds, *metrics) = cols
    if (not _STR.issuperset(map(type, names)) or kinds.count("scalar")
            or not _DICT.issuperset(map(type, goldens)) or not _DICT.issuperset(map(type, targets))):
        return None
    if given is None:
        try:
            t_sides = list(zip(*map(_side_values, targets)))
            g_sides = list(zip(*map(_side_values, goldens)))
        except KeyError:
            return None
    pending = cells.first_slot
    if pending is not None:
        try:
            keys = list(map(hash, zip(names, ios, slots, steps)))
        except TypeError:
            return None
    dt_t, sh_t, *stats, f_t = t_sides
    dt_g, sh_g, *g_stats, f_g = g_sides
    stats += g_stats
    na = NA
    # Data_name: each pair of files' once (a CANN op's tensors share its file)
    pairs = list(zip(f_t, f_g))
    try:
        named = dict.fromkeys(pairs)
    except TypeError:  # (a file of no hash)
        return None
    files_t, files_g = zip(*named)
    if _STR.issuperset(map(type, files_t + files_g)) and all(files_t) and all(files_g):
        base_t, base_g = _basenames(files_t), _basenames(files_g)
        if _bare_ascii("".join(base_t) + "".join(base_g), _REPR_SPECIAL):  # (``repr`` quotes them as they are)
            texts = list(map("['{}', '{}']".format, base_t, base_g))
        else:
            texts = list(map(_cell_text, map("[{!r}, {!r}]".format, base_t, base_g)))
    else:
        texts = [_cell_text(f"[{_basename(t) if t else na!r}, {_basename(g) if g else na!r}]") if t or g else na
                 for t, g in named]
    data_name = list(map(dict(zip(named, texts)).__getitem__, pairs))
    few = cells.few
    few_get, text = few.get, cells.text

    def few_texts(col: tuple, empty: Any) -> Any:
        """``(few_get(v) or text(v)) if v else empty`` of each value (``of``'s dtype and rule cells)."""
        out = list(map(few_get, col))
        # (``all``: a None found ~2x faster than by ``in``; an empty text, if any, is made again: the same)
        if not all(out) or not all(col):
            out = [(few_get(v) or text(v)) if v else empty for v in col]
        return out

    def few_or_none(col: tuple) -> Any:
        """``(few_get(v) or text(v)) if v is not None else None`` (``of``'s type and precision cells)."""
        out = list(map(few_get, col))
        if not all(out):  # (an empty text too: made again, the same)
            out = [(few_get(v) or text(v)) if v is not None else None for v in col]
        return out

    def shapes(col: tuple) -> Any:
        if _LIST.issuperset(map(type, col)):
            out = list(map(few_get, map(tuple, col)))
            if all(out):
                return out
        shape = cells.shape
        return [(few_get(tuple(v)) if type(v) is list else None) or shape(v) for v in col]

    # NPU / Bench Name: ``name.io.slot`` (the target's name when it has its own)
    bench = list(map("{}.{}.{}".format, names, ios, slots))
    if not _plain_texts(bench):
        bench = [b if b.isascii() and b.isprintable() and b[:1] not in _ASCII_FORMULA_START else _cell_text(b)
                 for b in bench]
    if target_names == names or not any(target_names):
        npu = bench
    else:
        npu = list(map(_npu_name, bench, target_names, names, ios, slots))
    shape_t = shapes(sh_t)
    shape_g = shape_t if sh_g == sh_t else shapes(sh_g)
    # metrics: None is N/A (no scalar argument here); statistics: N/A, numbers, or inert text
    floats_in = [_FLOATS.issuperset(map(type, col)) for col in metrics]
    metrics = [col if floats or None not in col else [na if v is None else v for v in col]
               for col, floats in zip(metrics, floats_in)]
    stat_floats = [_FLOATS.issuperset(map(type, col)) for col in stats]
    for k, col in enumerate(stats):
        if not stat_floats[k]:
            stats[k] = ([na if v is None else v for v in col] if _PLAIN.issuperset(map(type, col))
                        else list(map(_stat, col)))
    rg_t = list(map(dict.get, targets, repeat("requires_grad"), repeat(na)))
    rg_g = list(map(dict.get, goldens, repeat("requires_grad"), repeat(na)))
    consistent_na = rg_t.count(na) == n and rg_g.count(na) == n
    if consistent_na:
        consistent: Any = [na] * n
    else:
        consistent = [na if na in (a, b) else a == b for a, b in zip(rg_t, rg_g)]
    stacks = cells.stacks
    # (a target with no call site at all, as a CANN dump joined to no graph: every lookup says None)
    if stacks is not None and not getattr(stacks, "none_at_all", False):
        stack = []
        last = cells.last_op
        for row, op_id, tn, nm, step, rank in zip(rows, op_ids, target_names, names, steps, ranks):
            op_key = (op_id, tn or nm, step, rank)
            frames = stacks(row) if op_key != last else None
            last = op_key
            stack.append(_stack(frames) if frames else na)
        cells.last_op = last
    else:
        stack = [na] * n
    if pending is not None:
        first: Any = [pending] * n
        cells.keys.extend(keys)
    elif cells.fd_items is None:
        first = [""] * n
    else:
        hits = [list(map(eq, cols[_KEY_AT[k]], repeat(v))) for k, v in cells.fd_items]
        first = ["yes" if all(h) else "" for h in zip(*hits)] if hits else ["yes"] * n
    typ_texts, prec_texts = few_or_none(typs), few_or_none(precs)
    columns = [
        npu, bench, few_texts(dt_t, na), few_texts(dt_g, na), shape_t, shape_g, rg_t, rg_g, *metrics, *stats,
        consistent, verdicts, few_texts(rules, ""), stack, data_name,
        steps, ranks, ios, slots, kinds, origins, matches, modes, first,
        typ_texts, exec_indexes, judgements, rel_errs, alloweds, prec_texts,
    ]
    # the type of every cell of the columns made here as texts (the few texts, shapes, names: all str),
    # and of the numbers found all floats; None: the writer looks
    types: list[Optional[type]] = [str] * 6 + [None, None]
    types += [float if floats else None for floats in floats_in]
    types += [float if floats_at else None for floats_at in stat_floats]
    types += [str if consistent_na else None, None, str, str, str] + [None] * 8
    types += [type(first[0]), str if None not in typ_texts else None] + [None] * 4
    types.append(str if None not in prec_texts else None)
    fills = (list(verdicts) if _STR.issuperset(map(type, verdicts)) and all(verdicts)
             else [str(v) if v else None for v in verdicts])
    return columns, fills, types
