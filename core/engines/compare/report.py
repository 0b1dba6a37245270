"""Compare results as msprobe writes them: its column names and order, then ours.

msprobe users (and their scripts, and their colleagues' spreadsheets) read compare results by
msprobe's column names.  The facts below were taken from mindstudio-probe 26.2.0 itself
(``msprobe compare -tp TARGET -gp GOLDEN`` on the real dumps in ``tests/data/real_api_dumps``):

* columns, in order: ``MSPROBE_COLUMNS``; the device under test ("NPU") is the *target*, the
  benchmark ("Bench") the *golden* side;
* ``Result`` is ``pass`` / ``warning`` / ``error``; tensor shapes are written as Python lists
  (``[2, 3, 8, 8]``); non-tensor arguments get ``unsupported`` metrics; ``Data_name`` is the list
  ``[npu file, bench file]`` (``-1`` for a non-tensor); ``NPU_Stack_Info`` is filled on an API's
  first row and ``N/A`` after it; in CSV an infinite value is written `` inf`` / `` -inf``
  (a leading space, so a spreadsheet does not read it as a formula name).
* xlsx: one sheet ``Sheet1``.  msprobe 26.2 writes it without fills; the msprobe releases that
  highlighted rows filled every cell of an error row red (``FFFF0000``) and of a warning row
  yellow (``FFFF00``), solid — we do that, and the ``Result`` column says the same in words.

Ours: ``Result`` is dumpscope's verdict and ``Err_message`` the rule that set it; our own
columns (place, io/slot, match rule, origin…) follow msprobe's.  The table is built from the
rows of a ``compare`` document only; sides the document does not describe (dtype, shape,
statistics, files, stacks) can be filled from the indexes by ``describe_sides``.
"""

from __future__ import annotations

import os
import posixpath
from array import array
from itertools import islice, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional

from dumpscope.core.inert import csv_text, inert_lines

if TYPE_CHECKING:
    from dumpscope.core.query import DumpQuery

MSPROBE_COLUMNS = [
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
    "NPU Requires_grad", "Bench Requires_grad",
    "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio",
    "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm",
    "Requires_grad Consistent", "Result", "Err_message", "NPU_Stack_Info", "Data_name",
]
#: ours, after msprobe's (snake_case, as in ``compare --json``)
EXTRA_COLUMNS = ["step", "rank", "io", "slot", "kind", "origin", "match", "mode", "first_divergence",
                 "type", "exec_index", "judgement", "rel_err", "allowed", "precision"]
COLUMNS = MSPROBE_COLUMNS + EXTRA_COLUMNS

_METRICS = [("Cosine", "cosine"), ("EucDist", "euc_dist"), ("MaxAbsErr", "max_abs_err"),
            ("MaxRelativeErr", "max_rel_err"), ("One Thousandth Err Ratio", "one_thousandth_ratio"),
            ("Five Thousandths Err Ratio", "five_thousandth_ratio")]
_STATS = ("max", "min", "mean", "l2norm")
_METRIC_KEYS = [k for _, k in _METRICS]
#: the keys of a compare row the table reads, and of each of its sides (``TableCells.of``)
_ROW_KEYS = ("name", "io", "slot", "step", "rank", "kind", "target_name", "target_op_id", "golden", "target",
             "verdict", "rule", "type", "precision", "origin", "match", "mode", "exec_index", "judgement", "rel_err",
             "allowed", *_METRIC_KEYS)
_row_values = itemgetter(*_ROW_KEYS)
_SIDE_KEYS = ("dtype", "shape", "max", "min", "mean", "l2norm", "file")
_side_values = itemgetter(*_SIDE_KEYS)
#: each column's position in a row of ``table_rows``
_IX = {c: i for i, c in enumerate(COLUMNS)}

#: msprobe's highlight colours, spelled as msprobe spelled them (openpyxl stores "FFFF00" as "00FFFF00")
ERROR_FILL = "FFFF0000"
WARNING_FILL = "FFFF00"
#: rows per sheet: msprobe splits its tables below Excel's 1,048,576-row limit at this size
MAX_SHEET_ROWS = 1048500

NA = "N/A"


class ExportError(Exception):
    """The table cannot be written: one line naming the file and the problem."""


def _side(row: dict[str, Any], which: str) -> dict[str, Any]:
    side = row.get(which)
    return side if isinstance(side, dict) else {}


def _cell_text(text: Any) -> str:
    """Dump-derived text made inert for a spreadsheet: no control characters, no formula.

    Most of the table's text is printable ASCII that starts with no formula character: that is
    returned as it is after two C-level checks (``inert_lines`` and ``csv_text`` would return it
    unchanged); anything else takes their way."""
    s = text if type(text) is str else str(text)
    if s.isascii() and s.isprintable() and s[:1] not in _ASCII_FORMULA_START:
        return s
    # a leading quote keeps a spreadsheet from running it (what msprobe refuses outright)
    return csv_text(inert_lines(s))


#: the ASCII characters of ``core.inert``'s formula starts that are printable (tab and CR are not)
_ASCII_FORMULA_START = frozenset("=+-@")
#: a row's statistics of only these types are written as they are (``None`` as N/A)
_PLAIN = frozenset((float, int, bool, type(None)))
_FLOATS = frozenset((float,))
_DICTS = frozenset((dict,))


def _stat(v: Any) -> Any:
    """One statistic cell: N/A when unknown, a number as it is, anything else as inert text."""
    return NA if v is None else (v if isinstance(v, (int, float)) else _cell_text(v))


def _shape(value: Any) -> str:
    if value is None:
        return NA
    return str([int(v) for v in value]) if isinstance(value, (list, tuple)) else _cell_text(value)


def _stack(frames: Any) -> str:
    if not frames:
        return NA
    return _cell_text(str([str(f) for f in frames]))


#: what marks a row as the first divergence's (rows of every rank, and of a list argument's items, alike)
FIRST_KEYS = ("name", "io", "slot", "step")


def is_first(row: dict[str, Any], fd: Optional[dict[str, Any]]) -> bool:
    return bool(fd) and all(row.get(k) == fd.get(k) for k in FIRST_KEYS if k in fd)  # type: ignore


def table_rows(doc: dict[str, Any], stacks: Optional[Callable[[dict[str, Any]], Any]] = None
               ) -> Iterator[tuple[list[Any], Optional[str]]]:
    """``(cells in COLUMNS order, verdict)`` for each row of a ``compare`` document (msprobe names a
    tensor ``{api}.{input|output}.{slot}``: ours are op name, io and slot).

    Numbers stay numbers (``None`` when unknown); text is made inert.  ``stacks(row)`` gives
    the target op's call stack (list of frames), asked once per op.
    """
    cells = TableCells(doc, stacks)
    prefetch = getattr(stacks, "prefetch", None)
    rows = doc.get("rows", [])
    if prefetch is None:
        yield from cells.of(rows)
        return
    it = iter(rows)
    while True:
        chunk = list(islice(it, CHUNK_ROWS))  # rows read ahead so their stacks are looked up together
        if not chunk:
            return
        prefetch(chunk)
        yield from cells.of(chunk)


class TableCells:
    """The table's cells of a document's rows, given in order a chunk at a time (``of``).

    Written as one straight run of C-level lookups per row (the table is ~40 cells a row, 40,000 rows
    a compare of two 20k trees): a row's statistics are checked at once (``_PLAIN``), and only an
    unusual value takes the per-cell way; the few-valued texts (dtypes, shapes, rules) are made once.

    ``float_texts``: a row's metrics and statistics, when all are floats, are given as it returns them
    (the CSV's texts of them, looked up: ``table_file._CsvFloats``), and its ``rel_err`` and ``allowed``
    with them when both are floats.

    ``first_slot``: the rows are made before the first divergence is known (``table_file.TableAsMade``):
    every row's ``first_divergence`` cell is ``first_slot``, filled when the table is finished, and each
    row's ``FIRST_KEYS`` are remembered as one hash (``keys``; 0 for a key with no hash, which only a key
    with none equals), and ``spread`` lists the rows made several table rows (``(row number, table
    rows)``: a scalar list).
    """

    def __init__(self, doc: Optional[dict[str, Any]], stacks: Optional[Callable[[dict[str, Any]], Any]],
                 first_slot: Any = None, float_texts: Optional[Callable[[list[float]], list[Any]]] = None) -> None:
        fd = doc.get("first_divergence") if doc is not None else None
        self.fd_items = [(k, fd[k]) for k in FIRST_KEYS if k in fd] if fd else None
        self.first_slot = first_slot
        self.float_texts = float_texts
        self.keys = array("q")
        self.spread: list[tuple[int, int]] = []
        self.stacks = stacks
        self.last_op: Any = object()
        self.few: dict[Any, str] = {}  # _cell_text of the few-valued fields, once per value

    def text(self, v: Any) -> str:
        few = self.few
        if v not in few:
            if len(few) > 4096:
                few.clear()
            few[v] = _cell_text(v)
        return few[v]

    def shape(self, v: Any) -> str:
        if not isinstance(v, list):
            return _shape(v)
        few = self.few
        key = tuple(v)
        if key not in few:
            if len(few) > 4096:
                few.clear()
            few[key] = _shape(v)
        return few[key]

    def of(self, rows: Iterable[dict[str, Any]]) -> Iterator[tuple[list[Any], Optional[str]]]:
        """``(cells, verdict)`` of each of ``rows`` (a scalar list argument: one per item)."""
        fd_items, stacks, text, shape = self.fd_items, self.stacks, self.text, self.shape
        plain, na, few_get = _PLAIN.issuperset, NA, self.few.get
        formula_start = _ASCII_FORMULA_START
        pending = self.first_slot
        ftext, floats_only = self.float_texts, _FLOATS.issuperset
        keys = self.keys
        key_of = keys.append
        last_files: tuple[Any, Any] = (None, None)  # the last row's files, and their Data_name
        last_name = na
        for row in rows:
            get = row.get
            try:  # every key a compare row has (one C call); else one by one
                (name, io, slot, step, rank, kind, target_name, op_id, golden, target, verdict, rule, typ, prec,
                 origin, match, mode, exec_index, judgement, rel_err, allowed, *metrics) = _row_values(row)
            except KeyError:
                (name, io, slot, step, rank, kind, target_name, op_id, golden, target, verdict, rule, typ, prec,
                 origin, match, mode, exec_index, judgement, rel_err, allowed, *metrics) = map(get, _ROW_KEYS)
                if "name" not in row:
                    name = ""
            if not isinstance(golden, dict):
                golden = {}
            if not isinstance(target, dict):
                target = {}
            try:
                dt_t, sh_t, *stats, f_t = _side_values(target)
            except KeyError:
                dt_t, sh_t, *stats, f_t = map(target.get, _SIDE_KEYS)
            try:
                dt_g, sh_g, *g_stats, f_g = _side_values(golden)
            except KeyError:
                dt_g, sh_g, *g_stats, f_g = map(golden.get, _SIDE_KEYS)
            stats += g_stats
            stat_floats = floats_only(map(type, stats))  # (the common case: no None, nothing to make inert)
            if not stat_floats:
                if not plain(map(type, stats)):
                    stats = [_stat(v) for v in stats]
                elif None in stats:
                    stats = [na if v is None else v for v in stats]
            scalar = kind == "scalar"
            if floats_only(map(type, metrics)):  # (no None)
                if ftext is not None and stat_floats:
                    if type(rel_err) is float and type(allowed) is float:  # (with the judgement's, in one call)
                        both = ftext(metrics + stats + [rel_err, allowed])  # (the CSV's texts of them, looked up)
                        metrics, stats, rel_err, allowed = both[:6], both[6:14], both[14], both[15]
                    else:
                        both = ftext(metrics + stats)
                        metrics, stats = both[:6], both[6:]
            elif None in metrics:
                miss = "unsupported" if scalar else na
                metrics = [miss if v is None else v for v in metrics]
            if type(name) is not str:
                name = str(name)
            tname = target_name or name
            if type(tname) is not str:
                tname = str(tname)
            suffix = f".{io}.{slot}"
            bench = name + suffix  # (``_cell_text``'s test of the common text, without its call)
            if not (bench.isascii() and bench.isprintable() and bench[:1] not in formula_start):
                bench = _cell_text(bench)
            rg_t, rg_g = target.get("requires_grad", na), golden.get("requires_grad", na)
            if stacks is not None:
                op_key = (op_id, target_name or name, step, rank)
                frames = stacks(row) if op_key != self.last_op else None
                self.last_op = op_key
                stack = _stack(frames) if frames else na
            else:
                stack = na
            if scalar:
                data_name = "['-1', '-1']"
            elif f_t or f_g:
                if f_t != last_files[0] or f_g != last_files[1]:  # (a CANN op's tensors share its file)
                    last_files = (f_t, f_g)
                    last_name = _cell_text(f"[{_basename(f_t) if f_t else na!r}, {_basename(f_g) if f_g else na!r}]")
                data_name = last_name
            else:
                data_name = na
            if pending is not None:  # the first divergence is not known yet: its rows are found by this key
                first = pending
                try:
                    key_of(hash((get("name"), io, slot, step)))
                except TypeError:  # (a list: only a first divergence of no hash either matches it)
                    key_of(0)
            elif fd_items is None:
                first = ""
            else:
                first = "yes"
                for k, v in fd_items:
                    if not get(k) == v:
                        first = ""
                        break
            # the cells in COLUMNS order, made as a list (a dict by column name cost a third of the table)
            cells: list[Any] = [
                bench if tname == name else _cell_text(tname + suffix),
                bench,
                (few_get(dt_t) or text(dt_t)) if dt_t else na,
                (few_get(dt_g) or text(dt_g)) if dt_g else na,
                shape_t := (few_get(tuple(sh_t)) if type(sh_t) is list else None) or shape(sh_t),
                shape_t if sh_g == sh_t else (few_get(tuple(sh_g)) if type(sh_g) is list else None) or shape(sh_g),
                rg_t,
                rg_g,
                *metrics,
                *stats,
                na if na in (rg_t, rg_g) else rg_t == rg_g,  # Requires_grad Consistent
                verdict,
                (few_get(rule) or text(rule)) if rule else "",
                stack,
                data_name,
                step, rank, io, slot, kind, origin, match, mode,
                first,
                (few_get(typ) or text(typ)) if typ is not None else None,
                exec_index, judgement, rel_err, allowed,
                (few_get(prec) or text(prec)) if prec is not None else None,
            ]
            verdict = str(verdict) if verdict else None
            if not scalar:
                yield cells, verdict
                continue
            # a non-tensor argument: msprobe shows its value as every statistic, one row per list item
            # (``input.3.0``, ``input.3.1``), each carrying the argument's verdict
            parts = _value_parts(target, golden)
            if pending is not None and len(parts) > 1:
                self.spread.append((len(keys) - 1, len(parts)))
            for suffix, t_val, g_val in parts:
                part = list(cells)
                if suffix:
                    part[_IX["NPU Name"]] += suffix
                    part[_IX["Bench Name"]] += suffix
                    part[_IX["NPU Dtype"]] = _json_type(t_val)
                    part[_IX["Bench Dtype"]] = _json_type(g_val)
                for prefix, side, v in (("NPU", target, t_val), ("Bench", golden, g_val)):
                    for k in _STATS:
                        if side.get(k) is None:
                            part[_IX[f"{prefix} {k}"]] = NA if v is _ABSENT or v is None else (
                                v if isinstance(v, (int, float)) else _cell_text(v))
                yield part, verdict


_ABSENT = object()
#: os.path.basename; on POSIX the same slice without the function's separator lookup (once per row)
_basename = (lambda p: p[p.rfind("/") + 1:]) if os.path.basename is posixpath.basename else os.path.basename
#: rows read ahead so their stacks are looked up together (and held by a table being written): as many
#: as a printed block of rows (``row_spool.BLOCK_ROWS``), so a table written as the rows are made reads
#: them while the print's block still has them in the cache (512: ~1 us a row more, 20k copies compare)
CHUNK_ROWS = 128


def _json_type(v: Any) -> str:
    """The type name of one list item, spelled as the argument dtypes are (``int``, ``float``, …)."""
    if v is _ABSENT:
        return NA
    if v is None:
        return "none"
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list"}.get(type(v), type(v).__name__)


def _value_parts(target: dict[str, Any], golden: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    t_val, g_val = target.get("value", _ABSENT), golden.get("value", _ABSENT)
    if not (isinstance(t_val, list) or isinstance(g_val, list)):
        return [("", t_val, g_val)]
    t_list = t_val if isinstance(t_val, list) else []
    g_list = g_val if isinstance(g_val, list) else []
    return [(f".{i}", t_list[i] if i < len(t_list) else _ABSENT, g_list[i] if i < len(g_list) else _ABSENT)
            for i in range(max(len(t_list), len(g_list)))] or [("", t_val, g_val)]


def summary_rows(doc: dict[str, Any]) -> list[list[Any]]:
    """The workbook's Summary sheet: what each side ran in, the first divergence, and the evidence when
    there is none (its text and the rows nearest the line); empty when the document has neither."""
    prec, ev = doc.get("precision") or {}, doc.get("evidence") or {}
    if not prec and not ev:
        return []
    fd = doc.get("first_divergence")
    rows: list[list[Any]] = [
        ["golden precision", _cell_text(prec.get("golden_text") or "")],
        ["target precision", _cell_text(prec.get("target_text") or "")],
        ["first divergence", _cell_text(f"{fd.get('name')} {fd.get('io')}.{fd.get('slot')}") if fd else "none"],
    ]
    if ev.get("text"):
        rows.append(["evidence", _cell_text(ev["text"])])
    near = list(ev.get("nearest") or [])
    if near:
        rows.append([])
        rows.append(["nearest to the line", "tensor", "rel_err", "allowed", "share_of_allowed", "precision",
                     "judgement"])
        for n in near:
            rows.append([_cell_text(str(n.get("name"))), _cell_text(str(n.get("tensor"))), n.get("rel_err"),
                         n.get("allowed"), n.get("share_of_allowed"), _cell_text(str(n.get("precision") or "")),
                         n.get("judgement")])
    return rows


# -- sides the compare document does not describe ------------------------------------------------


def describe_sides(doc: dict[str, Any], golden_q: Optional["DumpQuery"], target_q: Optional["DumpQuery"]
                   ) -> Callable[[dict[str, Any]], Any]:
    """Fill ``golden``/``target`` (dtype, shape, file, stored statistics) from the indexes where a
    row lacks them, in place; return the ``stacks(row)`` lookup of the target side.

    Only what the indexes already hold is used (dump statistics, statistics computed earlier):
    no tensor is read here.
    """
    fill, stacks = side_filler(golden_q, target_q)
    rows = doc.get("rows", [])
    if isinstance(rows, list):
        for row in rows:
            fill(row)
    else:  # rows read back from a spool (``core.row_spool``): filled as they are read
        from dumpscope.core.support.row_spool import MappedRows

        doc["rows"] = MappedRows(rows, fill)
    return stacks


def block_filler(fill: Callable[[dict[str, Any]], Any]) -> Callable[[list[dict[str, Any]]], None]:
    """``side_filler``'s ``fill`` of each row of a block, skipped for a block whose every row describes both
    its sides, which ``fill`` leaves as they are (``sides_described``: a compare's rows)."""

    def fill_rows(rows: list[dict[str, Any]]) -> None:
        if not sides_described(rows):
            for row in rows:
                fill(row)

    return fill_rows


def sides_described(rows: list[dict[str, Any]]) -> bool:
    """Whether every one of ``rows`` describes both its sides (a dict with a dtype and a shape each), so that
    ``side_filler``'s ``fill`` would leave each as it is (a compare's rows): checked for a block of rows by
    C-level passes, instead of a call a row (~0.6 us a row with the table's own call)."""
    get = dict.get
    try:
        for side in ("golden", "target"):
            sides = list(map(get, rows, repeat(side)))
            if (not _DICTS.issuperset(map(type, sides)) or not all(map(get, sides, repeat("dtype")))
                    or None in map(get, sides, repeat("shape"))):
                return False
    except TypeError:  # (a row that is not a dict)
        return False
    return True


def side_filler(golden_q: Optional["DumpQuery"], target_q: Optional["DumpQuery"]
                ) -> tuple[Callable[[dict[str, Any]], dict[str, Any]], "_Stacks"]:
    """``describe_sides``'s two halves: ``fill(row)`` (fills the row's sides in place and returns it;
    rows of one op given together, in order) and the ``stacks(row)`` lookup."""
    # each side's last op only (an op's rows are read together): memory does not grow with the ops
    cache: dict[int, tuple[int, dict[tuple[str, int], Any]]] = {}

    def tensors(q: Optional["DumpQuery"], side: int, op_id: Any) -> dict[tuple[str, int], Any]:
        if q is None or op_id is None:
            return {}
        have = cache.get(side)
        if have is None or have[0] != int(op_id):
            have = cache[side] = (int(op_id), {(t.io, t.slot): t for t in q.tensors(int(op_id))})
        return have[1]

    def fill(row: dict[str, Any]) -> dict[str, Any]:
        g, t = row.get("golden"), row.get("target")
        if (type(g) is dict and type(t) is dict and g.get("dtype") and t.get("dtype")
                and g.get("shape") is not None and t.get("shape") is not None):
            return row  # (a compare row describes both sides: nothing to look up)
        for side, which, q in ((0, "golden", golden_q), (1, "target", target_q)):
            have = _side(row, which)
            if have.get("dtype") and have.get("shape") is not None:
                continue
            t = tensors(q, side, row.get(f"{which}_op_id")).get((row.get("io"), row.get("slot")))
            if t is None:
                continue
            filled = dict(have)
            filled.setdefault("dtype", t.dtype)
            filled.setdefault("shape", list(t.shape))
            filled.setdefault("file", t.path)
            if t.storage == "value" and "value" in t.extra:
                filled.setdefault("value", t.extra["value"])
            st = t.stats or (q.cached_stats(t) if q is not None and t.storage not in ("none", "value") else None) or {}
            for k in _STATS:
                if filled.get(k) is None and st.get(k) is not None:
                    filled[k] = st[k]
            row[which] = filled
        return row

    return fill, _Stacks(target_q)


class _Stacks:
    """``stacks(row)``: the target op's call stack as the table writes it (``show``'s ``stack``, or its
    ``source`` frames as lines), looked up for a chunk of rows at once (``prefetch``) and kept for that
    chunk only: a few queries per chunk instead of three per op, memory flat."""

    def __init__(self, target_q: Optional["DumpQuery"]) -> None:
        self.q = target_q
        self.known: dict[int, Any] = {}
        self.any: Optional[bool] = None  # whether the target has any call site at all (asked once)

    def prefetch(self, rows: list[dict[str, Any]]) -> None:
        self.known = {}
        if self.q is None:
            return
        if self.any is None:
            self.any = self.q.has_call_sites()
        if not self.any:  # no graph joined, no stack recorded: every op's lookup would say so (``__call__``)
            return
        ids = {int(r["target_op_id"]) for r in rows if r.get("target_op_id") is not None}
        sites = self.q.call_sites(ids)
        self.known = {i: _frames(*sites[i]) if i in sites else None for i in ids}

    @property
    def none_at_all(self) -> bool:
        """Whether the target is known to hold no call site at all (asked at the first ``prefetch``): every
        row's lookup says None, so a table's chunk need not ask row by row (``table_columns``)."""
        return self.any is False

    def __call__(self, row: dict[str, Any]) -> Any:
        op_id = row.get("target_op_id")
        if self.q is None or op_id is None:
            return None
        if self.any is None:
            self.any = self.q.has_call_sites()
        if not self.any:
            return None
        op_id = int(op_id)
        if op_id not in self.known:  # not prefetched (a caller that reads rows one by one)
            self.prefetch([row])
        return self.known[op_id]


def _frames(source: list[dict[str, Any]], stack: Optional[list]) -> Optional[list]:
    return stack or [f"File {s.get('file')}, line {s.get('line')}, {str(s.get('code', '')).strip()}"
                     for s in source or []] or None


def check_outside(path: str, roots: Iterable[str]) -> None:
    """Results never go inside a dump tree."""
    from dumpscope.core.support.tree_paths import tree_holding

    root = tree_holding(path, roots)
    if root is not None:
        raise ExportError(f"{path}: inside the dump tree {root}; write it elsewhere (dumps are read-only)")

