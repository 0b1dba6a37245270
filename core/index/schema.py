"""The index's SQLite schema: tables, their secondary indexes, and the key that says which
schema (and dumpscope release) wrote an index file.

Its own module so that the index (which builds) and finalize (which fills the op table)
both read it without importing each other: data flows layout -> records -> index -> queries.
"""

from __future__ import annotations

import sqlite3

#: 15: ops_watch, ops_joined_at partial (an index file of 14 lacks them: rebuilt, like any other version's)
#: 16: MindSpore joins checked by their tensors (index/shape_guard): an index of 15 may hold the old swapped joins
#: 17: ops_order ends in seq (a place's ops are read in index order, no sort)
#: 18: dir_dtypes, each folder's tensor dtypes per place (index/place_dtypes): an index of 17 has none to read
SCHEMA_VERSION = 18

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS dirs(id INTEGER PRIMARY KEY, path TEXT UNIQUE, mtime_ns INTEGER,
    nentries INTEGER, skips TEXT, layouts TEXT, nfiles INTEGER, nclaimed INTEGER, subdirs TEXT,
    first_unit INTEGER, last_unit INTEGER, scanned_ns INTEGER);
-- every file a folder's records come from (tensor files, dump.json, graphs, execution orders):
-- core/index/freshness.py compares each with the time its folder was read
CREATE TABLE IF NOT EXISTS files(id INTEGER PRIMARY KEY, dir_id INTEGER, path TEXT);
CREATE TABLE IF NOT EXISTS units(id INTEGER PRIMARY KEY, op_id INTEGER, dir_id INTEGER, producer TEXT, path TEXT,
    op_type TEXT, op_name TEXT, file_name TEXT, rank INTEGER, step INTEGER, graph TEXT, task INTEGER,
    stream INTEGER, ts INTEGER, storage TEXT, order_hint REAL, ntensors INTEGER, tensors TEXT, slots TEXT,
    scope TEXT, nan INTEGER, posinf INTEGER, neginf INTEGER);
-- the tensor dtypes of a folder's units per rank/step (core/index/place_dtypes: names a JSON list, NULL
-- where the units are to be read instead), one row per place and pool task
CREATE TABLE IF NOT EXISTS dir_dtypes(dir_id INTEGER, rank INTEGER, step INTEGER, names TEXT);
CREATE INDEX IF NOT EXISTS dir_dtypes_dir ON dir_dtypes(dir_id);
CREATE INDEX IF NOT EXISTS dir_dtypes_place ON dir_dtypes(rank, step);
CREATE TABLE IF NOT EXISTS exec_orders(dir_id INTEGER, rank INTEGER, graph TEXT, source TEXT, names TEXT);
CREATE TABLE IF NOT EXISTS graph_files(dir_id INTEGER, path TEXT, kind TEXT, rank INTEGER, graph TEXT);
CREATE TABLE IF NOT EXISTS problems(dir_id INTEGER, path TEXT, error TEXT);
CREATE TABLE IF NOT EXISTS overflow(dir_id INTEGER, path TEXT, rank INTEGER, step INTEGER, graph TEXT,
    task INTEGER, stream INTEGER, status INTEGER, kind TEXT, context INTEGER, thread INTEGER, folder TEXT);
CREATE TABLE IF NOT EXISTS ops(id INTEGER PRIMARY KEY, rank INTEGER, step INTEGER, graph TEXT, name TEXT,
    file_name TEXT, type TEXT, scope TEXT, exec_index INTEGER, first_ts INTEGER, producer TEXT,
    joined TEXT, join_rule TEXT, graph_only INTEGER DEFAULT 0, nan INTEGER, posinf INTEGER,
    neginf INTEGER, status INTEGER, evidence TEXT, folder TEXT, task INTEGER, stream INTEGER,
    watch_of TEXT, watch_after TEXT, seq INTEGER, kind TEXT NOT NULL DEFAULT 'op', join_note TEXT);
CREATE TABLE IF NOT EXISTS graph_nodes(gkey TEXT, name TEXT, sname TEXT, type TEXT, data TEXT);
CREATE INDEX IF NOT EXISTS graph_nodes_name ON graph_nodes(gkey, name);
CREATE INDEX IF NOT EXISTS graph_nodes_sname ON graph_nodes(gkey, sname);
CREATE TABLE IF NOT EXISTS graphs(gkey TEXT PRIMARY KEY, rank INTEGER, graph TEXT, name TEXT, path TEXT, kind TEXT);
CREATE TABLE IF NOT EXISTS stats_cache(sig TEXT PRIMARY KEY, data TEXT);
-- rows of the folders of another dump of the same rank/step places, set aside (core.dump_roots)
CREATE TABLE IF NOT EXISTS aside_dirs(dir_id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS aside_units AS SELECT * FROM units WHERE 0;
CREATE INDEX IF NOT EXISTS aside_units_dir ON aside_units(dir_id);
CREATE TABLE IF NOT EXISTS aside_exec_orders AS SELECT * FROM exec_orders WHERE 0;
CREATE TABLE IF NOT EXISTS aside_graph_files AS SELECT * FROM graph_files WHERE 0;
CREATE TABLE IF NOT EXISTS aside_problems AS SELECT * FROM problems WHERE 0;
CREATE TABLE IF NOT EXISTS aside_overflow AS SELECT * FROM overflow WHERE 0;
CREATE TABLE IF NOT EXISTS aside_dir_dtypes AS SELECT * FROM dir_dtypes WHERE 0;
"""

#: secondary indexes, dropped while a table is bulk-loaded and built once afterwards (a sorted
#: build is several times cheaper than updating each index row by row)
UNIT_INDEXES = {
    # only units grouped under another unit's op (npy inputs/outputs…): a CANN file is its own op
    "units_op": "CREATE INDEX IF NOT EXISTS units_op ON units(op_id) WHERE op_id != id",
    "units_place": "CREATE INDEX IF NOT EXISTS units_place ON units(rank, step)",
    "files_dir": "CREATE INDEX IF NOT EXISTS files_dir ON files(dir_id)",
}
OP_INDEXES = {
    # a place's ops in execution order (``DumpQuery.ops``: exec_index, then seq) read straight from the index
    "ops_order": "CREATE INDEX IF NOT EXISTS ops_order ON ops(rank, step, exec_index, seq)",
    # lookups by name are "name = ? AND rank = ? AND step = ?": all three in the key, so no planner
    # ever prefers walking a whole (rank, step) through ops_order
    "ops_name_at": "CREATE INDEX IF NOT EXISTS ops_name_at ON ops(name, rank, step)",
    "ops_file_name_at": "CREATE INDEX IF NOT EXISTS ops_file_name_at ON ops(file_name, rank, step)",
    # only ops joined to a graph node (every lookup is "joined = ?" or "joined IN (…)"): a dump
    # without graphs builds an empty index instead of one entry per op
    "ops_joined_at": "CREATE INDEX IF NOT EXISTS ops_joined_at ON ops(joined, rank, step) WHERE joined IS NOT NULL",
    "ops_scope": "CREATE INDEX IF NOT EXISTS ops_scope ON ops(rank, step, graph, scope)",
    # Dump-Watch snapshots of one watched op (``show``, compare's table: once per op): only snapshot
    # rows carry watch_of, so the index is as small as they are; without it each lookup walked the place
    "ops_watch": "CREATE INDEX IF NOT EXISTS ops_watch ON ops(rank, step, watch_of) WHERE watch_of IS NOT NULL",
}
#: indexes of earlier versions of OP_INDEXES, dropped from caches written by them
OLD_OP_INDEXES = ("ops_name", "ops_file_name")
#: ``meta`` key prefix of a place's tensor dtypes (``DumpQuery.place_dtypes``: ``place_dtypes:RANK:STEP``),
#: dropped by every finalize like the other values computed from the tables
PLACE_DTYPES = "place_dtypes:"
#: rows ANALYZE samples per index: statistics good enough for the planner at a bounded cost
ANALYSIS_LIMIT = 1000


def schema_key() -> str:
    """Index files are reused only by the same schema and the same dumpscope release."""
    from dumpscope import __version__

    return f"{SCHEMA_VERSION}:{__version__}"


def create_indexes(cur: sqlite3.Cursor, which: dict[str, str]) -> None:
    for sql in which.values():
        cur.execute(sql)


def drop_indexes(cur: sqlite3.Cursor, which: dict[str, str]) -> None:
    for name in which:
        cur.execute(f"DROP INDEX IF EXISTS {name}")
