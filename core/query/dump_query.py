"""The questions about one indexed dump tree that the command line and the explorer share.

Views ask questions here and never touch files or SQL themselves.  Rows come back as
plain dataclasses (``rows``); ``*_json`` helpers give the exact documents of ``CLI.md``.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Callable, Optional

from dumpscope.core.index import place_dtypes as dtype_records
from dumpscope.core.index.dump_index import DumpIndex
from dumpscope.core.index.schema import PLACE_DTYPES
from dumpscope.core.layouts.paths import CONSTANTS_STEP
from dumpscope.core.names import sanitize_name
from dumpscope.core.query.documents import Documents
from dumpscope.core.query.graph import GraphQueries
from dumpscope.core.query.overflow import OverflowQueries
from dumpscope.core.query.stats import StatsQueries
from dumpscope.core.query.rows import (
    AT_STEP,
    KINDS,
    OP_COLS,
    PLACE_OP_COLS,
    U_COLS,
    OpLookupError,
    OpRow,
    PlaceOp,
    TensorRow,
    add_units_of_texts,
    like_pattern,
    op_row,
    op_rows,
    in_slot_order,
    place_op_rows,
    slot_key,
    tensors_of_unit,
)


class DumpQuery(GraphQueries, Documents, StatsQueries):
    """Questions about one indexed dump tree (the graph, document and statistics questions inherited)."""

    def __init__(self, index: DumpIndex) -> None:
        self.index = index

    @property
    def root(self) -> str:
        return self.index.root

    @property
    def overflow(self) -> OverflowQueries:
        """The overflow evidence questions (``engines.overflow`` asks them)."""
        return OverflowQueries(self)

    # -- what is there ----------------------------------------------------------------

    def ranks(self) -> list[int]:
        return [r for (r,) in self.index.query("SELECT DISTINCT rank FROM ops ORDER BY rank")]

    def steps(self, rank: Optional[int] = None) -> list[int]:
        if rank is None:
            rows = self.index.query("SELECT DISTINCT step FROM ops WHERE step >= 0 ORDER BY step")
        else:
            rows = self.index.query("SELECT DISTINCT step FROM ops WHERE step >= 0 AND rank=? ORDER BY step",
                                    (rank,))
        return [s for (s,) in rows]

    def graphs(self) -> list[str]:
        return [g for (g,) in self.index.query("SELECT DISTINCT graph FROM ops ORDER BY graph")]

    def default_place(self, rank: Optional[int] = None, step: Optional[int] = None) -> tuple[int, int]:
        """``--rank``/``--step`` default to the lowest present (CLI.md)."""
        if rank is None:
            ranks = self.ranks()
            rank = ranks[0] if ranks else 0
        if step is None:
            steps = self.steps(rank)
            step = steps[0] if steps else (-1 if self.count_ops(rank, -1, kind="all") else 0)
        return rank, step

    def problems(self) -> list[dict[str, str]]:
        # files changed in place since they were read are read again by the update (core.freshness)
        return [{"path": p, "error": e} for p, e in self.index.query("SELECT path, error FROM problems ORDER BY path, error")]

    def problem_count(self) -> int:
        """The problems stored so far, counted as they are (``problems`` lists them)."""
        return self.index.query("SELECT COUNT(*) FROM problems")[0][0]

    def has_place(self, rank: int, step: int) -> bool:
        """Whether any op row (an index seek) lies at ``rank`` and ``step``."""
        return bool(self.index.query("SELECT 1 FROM ops WHERE rank=? AND step=? LIMIT 1", (rank, step)))

    def stored_layout_names(self) -> list[str]:
        """The producers of the folders stored so far, by name (``dirs.layouts``: one short JSON list per
        folder): what a partial result can say without counting the files of every unit (``layouts``)."""
        names: set[str] = set()
        for (used,) in self.index.query("SELECT DISTINCT layouts FROM dirs WHERE layouts IS NOT NULL"):
            names.update(json.loads(used))
        return sorted(names)

    def layouts(self, files_by_producer: Optional[dict[str, int]] = None) -> list[dict[str, Any]]:
        """Producers found, with their file counts (computed once per index build; ``summary``
        passes the counts its file accounting made in its own pass over the units)."""
        cached = self.index.query("SELECT value FROM meta WHERE key='layouts'")
        if cached:
            return json.loads(cached[0][0])
        from dumpscope.core.index.accounting import layout_roots
        from dumpscope.core.index.dump_roots import aside_layouts

        if files_by_producer is not None:
            rows = sorted(files_by_producer.items())
        else:
            rows = self.index.query(
                "SELECT producer, COUNT(DISTINCT path) FROM units GROUP BY producer ORDER BY producer")
        roots = layout_roots(self.index)
        out = [{"name": producer, "root": roots.get(producer, self.root), "files": files} for producer, files in rows]
        out += list(aside_layouts(self.index))  # another dump of the same places: listed, set aside
        self._remember("INSERT OR REPLACE INTO meta VALUES('layouts', ?)", [(json.dumps(out),)])
        return out

    def _remember(self, sql: str, rows: list[tuple], wait: bool = False) -> None:
        """Best-effort cache write: while another connection is building the index the file is
        locked for writing, and a view must not wait for it (the answer is still returned).  No busy
        wait either: it would hold the index's lock, and every other query of the explorer with it.
        ``wait``: an overflow scan's counts (its own long job) wait for the lock as other writes do."""
        with self.index._lock:
            conn = self.index.conn
            cur = conn.cursor()
            waits = cur.execute("PRAGMA busy_timeout").fetchone()[0]
            if not wait:
                cur.execute("PRAGMA busy_timeout=0")
            try:
                cur.execute("BEGIN IMMEDIATE")
                cur.executemany(sql, rows)
                cur.execute("COMMIT")
            except sqlite3.OperationalError:
                if conn.in_transaction:
                    cur.execute("ROLLBACK")
            finally:
                cur.execute(f"PRAGMA busy_timeout={int(waits)}")

    def graph_files(self) -> list[dict[str, Any]]:
        """Every graph file found: the graphs joined to the dump (``joined: true``) or, in a tree
        without tensors, listed as its ops (``listed: true``), then the files nothing was taken
        from (``joined: false``, with ``error`` when unreadable, ``note`` when another file
        describes the same graph)."""
        graph_only = not self.index.query("SELECT 1 FROM units LIMIT 1")
        out: list[dict[str, Any]] = [
            {"rank": r, "graph": g, "name": n, "file": p, "kind": k, "joined": not graph_only, "listed": graph_only}
            for r, g, n, p, k in self.index.query("SELECT rank, graph, name, path, kind FROM graphs "
                                                  "ORDER BY rank, graph")]
        status = self.index.query("SELECT value FROM meta WHERE key='graph_file_status'")
        return out + (json.loads(status[0][0]) if status else [])

    def summary(self) -> dict[str, Any]:
        kinds = dict(self.index.query("SELECT kind, COUNT(*) FROM ops WHERE graph_only=0 GROUP BY kind"))
        n_tensors, n_values = self.index.query(
            "SELECT COALESCE(SUM(CASE WHEN storage != 'value' THEN ntensors END), 0), "
            "COALESCE(SUM(CASE WHEN storage = 'value' THEN ntensors END), 0) FROM units")[0]
        from dumpscope.core.index.accounting import file_accounting

        graphs = self.graph_files()
        # ~1 s at 100k files: computed once per index build (finalize drops it), like layouts()
        cached = self.index.query("SELECT value FROM meta WHERE key='accounting'")
        files_by_producer: Optional[dict[str, int]] = None
        if cached:
            accounting = json.loads(cached[0][0])
        else:
            files_by_producer = {}  # the layouts' file counts, from the same pass over the units
            accounting = file_accounting(self.index, files_by_producer)
            self._remember("INSERT OR REPLACE INTO meta VALUES('accounting', ?)", [(json.dumps(accounting),)])
        return {
            "path": self.root,
            "layouts": self.layouts(files_by_producer),
            "ranks": self.ranks(),
            "steps": self.steps(),
            "graphs": self.graphs(),
            "graph_files": graphs,
            "ops": kinds.get("op", 0),
            "parameters": kinds.get("parameter", 0),
            "constants": kinds.get("constant", 0),
            "tensors": n_tensors,
            "values": n_values,  # non-tensor arguments kept as entries (msprobe), not counted as tensors
            "files": accounting["files"],
            "skipped_files": accounting["not_recognised"],
            "accounting": accounting,  # every listed file's fate: the parts add up to "files"
            "problems": self.problems(),
            # how much of the tree the last update checked for files changed in place (core.freshness)
            **({"changes": self.index.freshness.as_json()} if self.index.freshness is not None else {}),
            # dumps of the same rank/step places as an earlier root under PATH: set aside, not merged
            "other_dumps": self.other_dumps(),
        }

    def other_dumps(self) -> list[dict[str, Any]]:
        """Each dump root set aside because an earlier root holds the same rank/step places
        (``core.dump_roots``): its root, the root read instead, the shared places, one message."""
        from dumpscope.core.index.dump_roots import other_dumps

        return [o.as_json(self.root) for o in other_dumps(self.index)]

    # -- ops ----------------------------------------------------------------------------

    def _where(self, rank: Optional[int], step: Optional[int], grep: Optional[str],
               graph_only: bool = False, kind: str = "op") -> tuple[str, list]:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
        clauses, params = [], []
        if rank is not None:
            clauses.append("rank=?")
            params.append(rank)
        if step is not None:
            if kind in ("constant", "all"):  # constants belong to no step: listed with every step
                clauses.append("(step=? OR (step=-1 AND kind='constant'))")
            else:
                clauses.append("step=?")
            params.append(step)
        if kind != "all":
            clauses.append("kind=?")
            params.append(kind)
        if not graph_only:
            clauses.append("graph_only=0")
        if grep:
            clauses.append("(instr(lower(name), ?) > 0 OR instr(lower(type), ?) > 0 "
                           "OR instr(lower(file_name), ?) > 0)")
            g = grep.lower()
            params += [g, g, g]
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    def ops(self, rank: Optional[int] = None, step: Optional[int] = None, grep: Optional[str] = None,
            limit: Optional[int] = None, offset: int = 0, graph_only: bool = False, kind: str = "op") -> list[OpRow]:
        """Rows in execution order; ``kind`` "op" (the default) lists executed ops only,
        "parameter"/"constant" those, "all" everything (parameters and constants last)."""
        where, params = self._where(rank, step, grep, graph_only, kind)
        if limit is not None and offset and rank is not None and step is not None and not grep and not graph_only \
                and kind == "op":
            # Visible ops of one rank/step are numbered 0..n-1 in execution order, so a page is a
            # range of exec_index: no OFFSET scan, constant time however deep the page is.
            return [op_row(r) for r in self.index.query(
                f"SELECT {OP_COLS} FROM ops{where} AND exec_index >= ? ORDER BY exec_index, seq LIMIT ?",
                params + [offset, limit])]
        if limit is None and rank is not None and step is not None:
            return op_rows(self._place_rows(rank, step, grep, graph_only, kind))
        sql = f"SELECT {OP_COLS} FROM ops{where} ORDER BY rank, step < 0, step, exec_index IS NULL, exec_index, seq"
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [limit, offset]
        return op_rows(self.index.query(sql, params))

    def place_ops(self, rank: int, step: int) -> list[PlaceOp]:
        """``ops(rank, step, kind="all")`` as ``compare`` reads them: its columns only (``PlaceOp``)."""
        return place_op_rows(self._place_rows(rank, step, None, False, "all", PLACE_OP_COLS))

    def _place_rows(self, rank: int, step: int, grep: Optional[str], graph_only: bool, kind: str,
                    cols: str = OP_COLS) -> list[tuple]:
        """``ops``' rows of one rank/step in its order (the step's ops, then the constants of no step; each
        executed ones by execution index and ``seq``, then the rest by ``seq``), read in index order
        (``ops_order`` ends in ``seq``) a part at a time: no sort of the whole place in a temporary B-tree."""
        where, params = self._where(rank, None, grep, graph_only, kind)  # rank given: never empty
        parts = [(step, "")]
        if kind in ("constant", "all") and step != CONSTANTS_STEP:  # constants belong to no step
            parts.append((CONSTANTS_STEP, " AND kind='constant'"))
        parts.sort(key=lambda p: (p[0] < 0, p[0]))
        rows: list[tuple] = []
        for at, only in parts:
            head = f"SELECT {cols} FROM ops{where} AND step=?{only} AND exec_index IS "
            rows += self.index.query(head + "NOT NULL ORDER BY exec_index, seq", params + [at])
            rows += self.index.query(head + "NULL ORDER BY seq", params + [at])
        return rows

    def count_ops(self, rank: Optional[int] = None, step: Optional[int] = None, grep: Optional[str] = None,
                  kind: str = "op") -> int:
        where, params = self._where(rank, step, grep, kind=kind)
        return self.index.query(f"SELECT COUNT(*) FROM ops{where}", params)[0][0]

    def op_by_id(self, op_id: int) -> Optional[OpRow]:
        rows = self.index.query(f"SELECT {OP_COLS} FROM ops WHERE id=?", (op_id,))
        return op_row(rows[0]) if rows else None

    def op_position(self, op: OpRow, grep: Optional[str] = None) -> int:
        """Row number of ``op`` in ``ops(op.rank, op.step, grep)`` (for virtual lists)."""
        where, params = self._where(op.rank, op.step, grep)
        return self.index.query(
            f"SELECT COUNT(*) FROM ops{where} AND (exec_index < ? OR (exec_index = ? AND seq < "
            "(SELECT seq FROM ops WHERE id=?)))", params + [op.exec_index, op.exec_index, op.id])[0][0]

    def tensors(self, op_id: int) -> list[TensorRow]:
        """An op's tensors, inputs first, each by slot."""
        rows = self.index.query(  # the op's own unit by id, the others through the partial index units_op
            f"SELECT {U_COLS} FROM units WHERE id=? AND op_id=id UNION ALL "
            f"SELECT {U_COLS} FROM units WHERE op_id=? AND op_id != id ORDER BY id", (op_id, op_id))
        out = [t for row in rows for t in tensors_of_unit(row)]
        out.sort(key=slot_key)
        return out

    def tensors_of(self, op_ids: list[int]) -> dict[int, list[TensorRow]]:
        """``tensors(op_id)`` of many ops in a few queries (compare reads every op of a place, 256 at a time).

        The units come back sorted by id (what ``tensors`` orders them by) and their packed tensors are
        decoded as one JSON document, each text once (``rows.add_units_of_texts``); an op's tensors are
        sorted inputs first only when they are not already (a unit is packed that way: most never are)."""
        out: dict[int, list[TensorRow]] = {op_id: [] for op_id in op_ids}
        ids = list(out)
        every: list[tuple] = []
        if ids and max(ids) - min(ids) + 1 == len(ids):  # every id from the lowest to the highest: a range
            lo, hi = min(ids), max(ids)  # (compare's chunks nearly always are: ops are numbered by place)
            every = self.index.query(
                f"SELECT {U_COLS} FROM units WHERE id BETWEEN ? AND ? AND op_id=id UNION ALL "
                f"SELECT {U_COLS} FROM units WHERE op_id BETWEEN ? AND ? AND op_id != id", (lo, hi, lo, hi))
            ids = []
        for k in range(0, len(ids), 450):  # two parameters per id, under SQLite's 999 limit
            part = ids[k:k + 450]
            marks = ",".join("?" * len(part))
            every += self.index.query(
                f"SELECT {U_COLS} FROM units WHERE id IN ({marks}) AND op_id=id UNION ALL "
                f"SELECT {U_COLS} FROM units WHERE op_id IN ({marks}) AND op_id != id", part + part)
        every.sort()  # by unit id (unique: the rest of a row is never compared)
        try:
            add_units_of_texts(out, every)
        except (TypeError, ValueError):  # a damaged unit: decode one by one, so the error is the usual one
            out = {op_id: [] for op_id in out}
            for row in every:
                out[row[1]] += tensors_of_unit(row)
        for tensors in out.values():
            if len(tensors) > 1 and not in_slot_order(tensors):
                tensors.sort(key=slot_key)
        return out

    def place_storages(self, rank: int, step: int) -> list[str]:
        """How the first tensor file stored at one rank/step holds its tensors (``model.STORAGE_*``): a hint
        for compare's pool, which imports that reader once before it forks.  One indexed row: a place
        mixing storages gets the others' readers imported by the workers that need them (and so does a
        place this cannot ask: an empty list)."""
        try:
            return [s for (s,) in self.index.query("SELECT storage FROM units WHERE rank=? AND step=? LIMIT 1",
                                                   (rank, step))]
        except Exception:  # only a hint: the workers import what they need
            return []

    def place_dtypes(self, rank: int, step: int) -> set[str]:
        """Every tensor dtype name recorded at one rank/step (compare: the precision the run stored in):
        the union of what each folder's reader recorded (``index.place_dtypes``: a few rows).

        Where a folder's record is not known (statistics rows merged into payload twins), read from the
        packed tensor lists (``units.tensors``: [io, slot, dtype, …] each): ~35 ms at 20k files (every
        unit's list parsed), so kept in ``meta`` once known, until the next finalize (which
        drops it), so that comparing against the same tree again reads one row."""
        try:
            known = dtype_records.union(self.index.query(
                "SELECT DISTINCT names FROM dir_dtypes WHERE rank=? AND step=?", (rank, step)))
        except (sqlite3.Error, TypeError, ValueError):  # not what the index stores: read the units
            known = None
        if known is not None:
            return known
        key = f"{PLACE_DTYPES}{rank}:{step}"
        cached = self.index.query("SELECT value FROM meta WHERE key=?", (key,))
        if cached:
            try:
                return {str(name) for name in json.loads(cached[0][0])}
            except (TypeError, ValueError):
                pass  # not what this method stores: read again (and stored again below)

        def read() -> set[str]:
            # parsed here, not by SQLite's json_each: statistics of a non-finite tensor are packed as NaN or
            # Infinity, which SQLite before 3.42 rejects (the place then had no dtypes: an answer that
            # depended on the machine's SQLite)
            names: set[str] = set()
            for (text,) in self.index.query("SELECT DISTINCT u.tensors FROM units u JOIN ops o ON u.op_id = o.id "
                                            "WHERE o.rank=? AND o.step=?", (rank, step)):
                names |= dtype_records.names_in(text)
            return names

        try:
            return self._remembered(key, read, lambda names: json.dumps(sorted(names)))
        except Exception:  # an SQLite without JSON functions: the caller goes without
            return set()

    def _remembered(self, key: str, read: Callable[[], Any], text: Callable[[Any], str]) -> Any:
        """``read()``, stored in ``meta`` under ``key`` as ``text(value)`` in the same write transaction, so
        that no build can finalize between the reading and the storing (finalize drops such keys).  While
        another connection writes, or when the cache cannot be written, the value is read and not stored
        (no wait: a view must not wait for a build, see ``_remember``)."""
        with self.index._lock:
            conn = self.index.conn
            cur = conn.cursor()
            waits = cur.execute("PRAGMA busy_timeout").fetchone()[0]
            cur.execute("PRAGMA busy_timeout=0")
            try:
                try:
                    cur.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError:
                    return read()
                try:
                    value = read()
                except BaseException:
                    if conn.in_transaction:
                        cur.execute("ROLLBACK")
                    raise
                try:
                    cur.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)", (key, text(value)))
                    cur.execute("COMMIT")
                except sqlite3.Error:  # a read-only cache: the value is still the answer
                    if conn.in_transaction:
                        cur.execute("ROLLBACK")
                return value
            finally:
                cur.execute(f"PRAGMA busy_timeout={int(waits)}")

    def resolve_op(self, text: str, rank: Optional[int] = None, step: Optional[int] = None,
                   run: Optional[int] = None) -> OpRow:
        """Find one op by full name (graph or file spelling), raising with close matches.

        An op that ran several times in the step (a loop body: one op row per execution, all of one
        name) is one op: ``run`` picks the execution (0, the first, by default)."""
        rank, step = self.default_place(rank, step)
        if not text.strip():
            raise OpLookupError("empty op name", [])
        s = sanitize_name(text)
        for sql, params in (
            ("name=?", [text]),
            ("file_name=?", [text]),
            ("file_name=?", [s]),
            ("joined=?", [text]),
        ):
            rows = self.index.query(f"SELECT {OP_COLS} FROM ops WHERE {sql} AND rank=? AND {AT_STEP} "
                                    "AND graph_only=0 ORDER BY exec_index IS NULL, exec_index, seq",
                                    params + [rank, step])
            if rows and len({r[4] for r in rows}) == 1:
                return self._pick_run(rows, text, rank, step, run)
            if len(rows) > 1:
                names = [f"{r[4]} (exec {r[8]})" for r in rows[:8]]
                raise OpLookupError(f"op {text!r} is ambiguous at rank {rank} step {step}: {len(rows)} ops", names)
        # a unique suffix (e.g. "Conv2D-op0" or the last scope segments) is accepted too
        rows = self.index.query(f"SELECT {OP_COLS} FROM ops WHERE rank=? AND {AT_STEP} AND graph_only=0 AND "
                                "(name LIKE ? ESCAPE '\\' OR file_name LIKE ? ESCAPE '\\') "
                                "ORDER BY exec_index IS NULL, exec_index, seq",
                                [rank, step, "%/" + like_pattern(text), "%_" + like_pattern(s)])
        if rows and len({r[4] for r in rows}) == 1:
            return self._pick_run(rows, text, rank, step, run)
        names = [r[0] for r in self.index.query(f"SELECT name FROM ops WHERE rank=? AND {AT_STEP} AND graph_only=0",
                                                (rank, step))]
        if len(rows) > 1:
            raise OpLookupError(f"op {text!r} is ambiguous at rank {rank} step {step}: {len(rows)} ops",
                                [r[4] for r in rows[:8]])
        import difflib  # only when a name is not found

        close = difflib.get_close_matches(text, names, n=5, cutoff=0.5)
        if not close:
            low = text.lower()
            close = [n for n in names if low in n.lower()][:5]
        raise OpLookupError(f"no op named {text!r} at rank {rank} step {step}", close)

    @staticmethod
    def _pick_run(rows: list[tuple], text: str, rank: int, step: int, run: Optional[int]) -> OpRow:
        """Execution ``run`` (default 0) of the rows of one op name, in execution order."""
        k = 0 if run is None else run
        if 0 <= k < len(rows):
            return op_row(rows[k])
        raise OpLookupError(f"op {text!r} ran {len(rows)} time{'s' if len(rows) != 1 else ''} at rank {rank} "
                            f"step {step}: run {k} does not exist (runs: "
                            f"{', '.join(f'{i} (exec {r[8]})' for i, r in enumerate(rows[:20]))})", [])

    def runs(self, op: OpRow) -> list[OpRow]:
        """Every execution of ``op``'s name at its rank and step, in execution order: a loop body runs
        once per iteration, each run its own row (``op_groups.group_ops``); the first is run 0."""
        if op.graph_only:
            return [op]
        rows = self.index.query(f"SELECT {OP_COLS} FROM ops WHERE name=? AND rank=? AND step=? AND graph_only=0 "
                                "ORDER BY exec_index IS NULL, exec_index, seq", (op.name, op.rank, op.step))
        return [op_row(r) for r in rows] or [op]

    def runs_named(self, name: str, rank: Optional[int] = None) -> list[OpRow]:
        """Every execution of the op named ``name`` at every step (of ``rank``, or every rank), by rank,
        step, then execution order (``trend``: one tensor across the job)."""
        sql = f"SELECT {OP_COLS} FROM ops WHERE name=? AND graph_only=0"
        params: list[Any] = [name]
        if rank is not None:
            sql += " AND rank=?"
            params.append(rank)
        return [op_row(r) for r in self.index.query(
            sql + " ORDER BY rank, step, exec_index IS NULL, exec_index, seq", params)]

    def first_named(self, text: str, rank: Optional[int] = None) -> Optional[OpRow]:
        """The op named ``text`` (graph or file spelling) at the first step (of ``rank``) that has it."""
        sql = f"SELECT {OP_COLS} FROM ops WHERE (name=? OR file_name=? OR file_name=?) AND graph_only=0"
        params: list[Any] = [text, text, sanitize_name(text)]
        if rank is not None:
            sql += " AND rank=?"
            params.append(rank)
        rows = self.index.query(sql + " ORDER BY step, rank, exec_index LIMIT 1", params)
        return op_row(rows[0]) if rows else None

    def run_of(self, op: OpRow) -> tuple[int, list[OpRow]]:
        """(which execution ``op`` is, every execution of its name at its place)."""
        runs = self.runs(op)
        return next((i for i, r in enumerate(runs) if r.id == op.id), 0), runs

    def search(self, text: str, rank: Optional[int] = None, step: Optional[int] = None,
               limit: int = 200) -> list[OpRow]:
        """Fuzzy search over full names and types: substring hits first, then subsequence hits."""
        if not text:
            return self.ops(rank, step, limit=limit)
        # parameters and constants are found too (they are just not listed among ops)
        hits = self.ops(rank, step, grep=text, limit=limit, kind="all")
        if len(hits) >= limit:
            return hits
        seen = {h.id for h in hits}
        pattern = "%" + "%".join(like_pattern(c) for c in text.lower()) + "%"
        where, params = self._where(rank, step, None, kind="all")
        rows = self.index.query(
            f"SELECT {OP_COLS} FROM ops{where} AND (lower(name) LIKE ? ESCAPE '\\' OR lower(type) LIKE ? "
            "ESCAPE '\\') ORDER BY exec_index IS NULL, exec_index LIMIT ?", params + [pattern, pattern, limit])
        more = [op_row(r) for r in rows if r[0] not in seen]
        more.sort(key=lambda o: _fuzzy_score(text.lower(), o.name.lower()))
        return hits + more[: limit - len(hits)]

    # -- scope tree -----------------------------------------------------------------------

    def scope_facts(self, rank: int, step: int) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int],
                                                         dict[tuple[str, str], int]]:
        """Per (graph, scope) of one rank/step, from one pass over its ops: the ops (for the lazy scope tree),
        the first execution index (scopes listed in execution order), and the ops with overflow status or
        non-finite outputs (badges on scope nodes).  The tree needs all three before it shows anything."""
        counts: dict[tuple[str, str], int] = {}
        order: dict[tuple[str, str], int] = {}
        bad: dict[tuple[str, str], int] = {}
        for g, s, n, first, nbad in self.index.query(
                "SELECT graph, scope, COUNT(*), MIN(exec_index), SUM(graph_only = 0 AND "
                "(COALESCE(status, 0) != 0 OR COALESCE(nan, 0) + COALESCE(posinf, 0) + COALESCE(neginf, 0) > 0)) "
                "FROM ops WHERE rank=? AND step=? AND kind='op' AND graph_only != 2 GROUP BY graph, scope",
                (rank, step)):
            counts[(g, s)] = n
            if first is not None:
                order[(g, s)] = first
            if nbad:
                bad[(g, s)] = nbad
        return counts, order, bad

    def ops_in_scope(self, rank: int, step: int, graph: str, scope: str) -> list[OpRow]:
        return [op_row(r) for r in self.index.query(
            f"SELECT {OP_COLS} FROM ops WHERE rank=? AND step=? AND graph=? AND scope=? AND kind='op' "
            "AND graph_only != 2 ORDER BY exec_index IS NULL, exec_index, seq",
            (rank, step, graph, scope))]

    def snapshot_counts(self, rank: int, step: int) -> dict[tuple[str, str], int]:
        """Dump-Watch snapshots per (graph, watched op's file-side name): children of that op's node."""
        return {(g, w): n for g, w, n in self.index.query(
            "SELECT graph, watch_of, COUNT(*) FROM ops WHERE rank=? AND step=? AND graph_only=2 "
            "AND watch_of IS NOT NULL GROUP BY graph, watch_of", (rank, step))}

    def snapshots_of(self, op: OpRow) -> list[OpRow]:
        """The Dump-Watch snapshots of a watched op, in the order they were taken."""
        return [op_row(r) for r in self.index.query(
            f"SELECT {OP_COLS} FROM ops WHERE rank=? AND step=? AND graph=? AND graph_only=2 AND watch_of=? "
            "ORDER BY first_ts IS NULL, first_ts, seq", (op.rank, op.step, op.graph, sanitize_name(op.file_name)))]

    def kind_counts(self, rank: int, step: int) -> dict[tuple[str, str], int]:
        """Parameters and constants per (graph, kind) of one rank/step: one tree node each."""
        return {(g, k): n for g, k, n in self.index.query(
            f"SELECT graph, kind, COUNT(*) FROM ops WHERE rank=? AND {AT_STEP} AND kind != 'op' "
            "GROUP BY graph, kind", (rank, step))}

    def ops_of_kind(self, rank: int, step: int, graph: str, kind: str) -> list[OpRow]:
        """The parameters (or constants) of one graph, by name."""
        return [op_row(r) for r in self.index.query(
            f"SELECT {OP_COLS} FROM ops WHERE rank=? AND {AT_STEP} AND graph=? AND kind=? ORDER BY name, seq",
            (rank, step, graph, kind))]


def _fuzzy_score(needle: str, hay: str) -> tuple[int, int]:
    """Lower is better: compact subsequence matches near the end (the op's own name) first."""
    pos = -1
    first = -1
    for ch in needle:
        pos = hay.find(ch, pos + 1)
        if pos < 0:
            return (1 << 30, 0)
        if first < 0:
            first = pos
    return (pos - first, len(hay) - pos)


def open_query(path: str, **kwargs: Any) -> DumpQuery:
    """Open (building or updating) the index of ``path`` and wrap it in a query object."""
    return DumpQuery(DumpIndex.open(path, **kwargs))
