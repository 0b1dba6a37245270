"""The overflow evidence the index holds, and the overflow scan's cache of output counts.

The questions ``engines.overflow`` asks, in SQL, kept with the other queries: evidence per place
(Opdebug status, statistics, earlier scans), the ops a scan still has to look at, the ops already
called bad, and the ``nonfinite`` table: one row of output counts per stored unit (a unit id is
never reused, so a cached count is never stale), made on first use.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any, Optional

from dumpscope.core.layouts.paths import CONSTANTS_STEP
from dumpscope.core.query.rows import OP_COLS, OpRow, op_row

if TYPE_CHECKING:
    from dumpscope.core.query.dump_query import DumpQuery

#: an op with overflow evidence: an Opdebug status, or NaN/Inf counts from statistics or a scan
_BAD = "(COALESCE(status, 0) != 0 OR nan > 0 OR posinf > 0 OR neginf > 0)"
_TABLE = "CREATE TABLE IF NOT EXISTS nonfinite(unit_id INTEGER PRIMARY KEY, data TEXT, error TEXT)"
#: a unit row as the scan reads it: ``(id, op_id, path, storage, tensors)``
_UNIT = "id, op_id, path, storage, tensors"


def _filters(rank: Optional[int], step: Optional[int], prefix: str = "") -> tuple[str, list]:
    sql, params = "", []
    if rank is not None:
        sql += f" AND {prefix}rank=?"
        params.append(rank)
    if step is not None:
        sql += f" AND {prefix}step=?"
        params.append(step)
    return sql, params


def _unscanned(scan: str) -> str:
    """The ops a scan in mode ``scan`` counts: without an Opdebug status and, in "auto", without any
    evidence yet ("all": without evidence from a scan)."""
    evidence = "nan IS NULL" if scan == "auto" else "(evidence IS NULL OR evidence != 'tensor')"
    return f"graph_only=0 AND COALESCE(status, 0) = 0 AND {evidence}"


class OverflowQueries:
    """``DumpQuery.overflow``: the overflow questions of one indexed tree."""

    def __init__(self, q: "DumpQuery") -> None:
        self.q = q

    def _rows(self, sql: str, params: Any = ()) -> list[tuple]:
        return self.q.index.query(sql, params)

    # -- evidence in the index ---------------------------------------------------------------

    def places(self, rank: Optional[int] = None, step: Optional[int] = None) -> list[dict[str, Any]]:
        """Every (rank, step) with ops, and what evidence its ops carry, ordered by step then rank."""
        where, params = _filters(rank, step)
        rows = self._rows(
            "SELECT rank, step, COUNT(*), SUM(COALESCE(status, 0) != 0), "
            "SUM(nan IS NULL AND COALESCE(status, 0) = 0), SUM(nan IS NOT NULL AND evidence='stats'), "
            "SUM(nan IS NOT NULL AND evidence='tensor') "
            f"FROM ops WHERE graph_only=0{where} GROUP BY rank, step ORDER BY step, rank", params)
        return [{"rank": r, "step": s, "ops": n, "opdebug": od or 0, "unknown": unk or 0, "stats": st or 0,
                 "tensor": te or 0} for r, s, n, od, unk, st, te in rows]

    def bad_ops(self, rank: Optional[int] = None, step: Optional[int] = None) -> dict[int, OpRow]:
        """The executed ops the index already calls bad (of a rank and step, or all), by id."""
        where, params = _filters(rank, step)
        return {r[0]: op_row(r) for r in self._rows(
            f"SELECT {OP_COLS} FROM ops WHERE graph_only=0{where} AND {_BAD}", params)}

    def trouble_places(self) -> list[tuple[int, int, int, Optional[int]]]:
        """``(rank, step, bad ops, first bad exec index)`` of each place (constants left out) with bad ops."""
        return self._rows(
            f"SELECT rank, step, COUNT(*), MIN(exec_index) FROM ops WHERE graph_only=0 AND step != ? AND {_BAD} "
            "GROUP BY rank, step", (CONSTANTS_STEP,))

    def first_bad_op(self, rank: int, step: int) -> Optional[OpRow]:
        """The first op of a place (execution order) the index calls bad, or None."""
        rows = self._rows(f"SELECT {OP_COLS} FROM ops WHERE rank=? AND step=? AND graph_only=0 AND {_BAD} "
                          "ORDER BY exec_index IS NULL, exec_index, seq LIMIT 1", (rank, step))
        return op_row(rows[0]) if rows else None

    # -- what a scan reads ---------------------------------------------------------------------

    def unscanned_count(self, rank: int, step: int, scan: str) -> tuple[int, int]:
        """(ops, units) at a place that a scan in mode ``scan`` counts."""
        cond = _unscanned(scan)
        n_ops = self._rows(f"SELECT COUNT(*) FROM ops WHERE rank=? AND step=? AND {cond}", (rank, step))[0][0]
        if not n_ops:
            return 0, 0
        n_units = self._rows(f"SELECT COUNT(*) FROM units WHERE rank=? AND step=? AND op_id IN "
                             f"(SELECT id FROM ops WHERE rank=? AND step=? AND {cond})",
                             (rank, step, rank, step))[0][0]
        return n_ops, n_units

    def unscanned_ids(self, rank: int, step: int, scan: str, bad_only: bool = False) -> set[int]:
        """Ids of the ops at a place a scan in mode ``scan`` counts (``bad_only``: those already bad)."""
        cond = _unscanned(scan) + (f" AND {_BAD}" if bad_only else "")
        return {i for (i,) in self._rows(f"SELECT id FROM ops WHERE rank=? AND step=? AND {cond}", (rank, step))}

    def units_at(self, rank: int, step: int) -> list[tuple]:
        """The unit rows ``(id, op_id, path, storage, tensors)`` stored at a place."""
        return self._rows(f"SELECT {_UNIT} FROM units WHERE rank=? AND step=?", (rank, step))

    def units_of_ops(self, op_ids: list[int]) -> list[tuple]:
        """The unit rows ``(id, op_id, path, storage, tensors)`` of the ops ``op_ids`` (an op's own unit by
        id, the others through the partial index ``units_op``)."""
        out: list[tuple] = []
        for op_id in op_ids:
            out += self._rows(f"SELECT {_UNIT} FROM units WHERE id=? AND op_id=id "
                              f"UNION ALL SELECT {_UNIT} FROM units WHERE op_id=? AND op_id != id", (op_id, op_id))
        return out

    # -- the scan's cache ----------------------------------------------------------------------

    def ensure_counts_table(self) -> None:
        """Make the ``nonfinite`` table; while a writer holds the file nothing is cached this time."""
        with self.q.index._lock:
            try:
                self.q.index.conn.execute(_TABLE)
            except sqlite3.OperationalError:
                pass

    def store_counts(self, results: list[tuple]) -> None:
        """Cache scan results ``(unit id, tensors, error)`` in one transaction; skipped (not cached) while
        another writer holds the file."""
        if not results:
            return
        rows = [(uid, json.dumps(tensors), err) for uid, tensors, err in results]
        index = self.q.index
        with index._lock:
            cur = index.conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                cur.executemany("INSERT OR REPLACE INTO nonfinite VALUES(?, ?, ?)", rows)
                cur.execute("COMMIT")
            except sqlite3.OperationalError:
                if index.conn.in_transaction:
                    cur.execute("ROLLBACK")

    def cached_counts(self, unit_ids: list[int]) -> dict[int, tuple]:
        """The cached results ``(unit id, tensors, error)`` of those units that have one, by unit id."""
        out: dict[int, tuple] = {}
        for k in range(0, len(unit_ids), 900):  # under SQLite's 999 parameters
            part = unit_ids[k:k + 900]
            for uid, data, err in self._rows(
                    f"SELECT unit_id, data, error FROM nonfinite WHERE unit_id IN ({','.join('?' * len(part))})", part):
                out[uid] = (uid, json.loads(data), err)
        return out

    def unreadable_outputs(self, rank: Optional[int] = None, step: Optional[int] = None) -> list[tuple[str, str]]:
        """``(path, error)`` of the files a scan could not read, by path (the cache keeps them: warm runs
        say so too)."""
        self.ensure_counts_table()
        where, params = _filters(rank, step, "u.")
        return self._rows("SELECT u.path, n.error FROM nonfinite n JOIN units u ON u.id = n.unit_id "
                          f"WHERE n.error IS NOT NULL{where} ORDER BY u.path", params)
