"""``core.support.row_columns``: dicts of one tuple of keys read column by column, once for a spool's block
however many read it so (its table, its print)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from dumpscope.core.support import row_columns
from dumpscope.core.support.row_columns import columns_of, one_transpose_each

_dicts = st.lists(st.dictionaries(st.sampled_from("abc"), st.integers(), min_size=1), max_size=5)


@settings(max_examples=200, deadline=None)
@given(ds=_dicts)
def test_columns_are_the_values_key_by_key_or_none(ds):
    got = columns_of(ds)
    if ds and all(list(d) == list(ds[0]) for d in ds):
        keys, cols = got
        assert keys == tuple(ds[0]) and cols == [tuple(d[k] for d in ds) for k in keys]
    else:
        assert got is None


def test_made_once_for_the_same_sequence_while_a_block_is_stored(monkeypatch):
    made = []
    real = row_columns._columns
    monkeypatch.setattr(row_columns, "_columns", lambda ds: made.append(len(ds)) or real(ds))
    ds = [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    with one_transpose_each():
        first = columns_of(ds)
        assert columns_of(ds) is first and columns_of(list(ds)) == first and len(made) == 2  # (a copy: made again)
    assert columns_of(ds) == first and len(made) == 3  # (outside: not remembered)


def test_a_block_with_its_table_is_read_by_column_once(tmp_path, monkeypatch):
    """A spool's block stored with ``--output``'s table: its rows and their two sides are read by column once
    each, the table's columns taken by the print (whose text is the print's alone)."""
    from dumpscope.core.engines.compare import table_file as tf
    from dumpscope.core.support import row_spool
    from dumpscope.core.support.row_spool import PrintedRows
    from dumpscope.tui.json_text import row_block_text

    from test_compare_table_as_made import _row

    rows = [_row(f"op{k // 2}", k) for k in range(300)]
    alone = PrintedRows(row_block_text)
    alone.extend(json.loads(json.dumps(rows)))
    made = []
    real = row_columns._columns
    monkeypatch.setattr(row_columns, "_columns", lambda ds: made.append(len(ds)) or real(ds))
    table = tf.TableAsMade(str(tmp_path / "t.xlsx"), lambda rows: None, None)
    spool = PrintedRows(row_block_text, table.add)
    spool.extend(json.loads(json.dumps(rows)))
    table.finish({"rows": spool, "first_divergence": None})
    blocks = -(-300 // row_spool.BLOCK_ROWS)
    assert len(made) == 3 * blocks  # (the rows, their golden sides, their target sides)
    assert list(spool.printed_blocks()) == list(alone.printed_blocks())


def test_remembered_in_the_storing_thread_only():
    import threading

    ds = [{"a": 1}, {"a": 2}]
    seen = []
    with one_transpose_each():
        first = columns_of(ds)
        other = threading.Thread(target=lambda: seen.append(columns_of(ds)))
        other.start()
        other.join()
    assert seen == [first] and seen[0] is not first  # (made afresh there: another thread's block is not its own)
