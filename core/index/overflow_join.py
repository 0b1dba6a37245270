"""Attach Opdebug overflow status to the op it names.

An ``Opdebug.Node_OpDebug`` file names the overflowing op by task id and stream id (and
context/thread for FFTS+ sub-tasks); that op's own dump lies in the same folder
(FORMATS.md §3.4).  The Opdebug file's own task id means nothing and is ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dumpscope.core.index.dump_index import DumpIndex


def attach_overflow(index: "DumpIndex") -> int:
    """Mark ops with overflow status; returns how many ops were marked."""
    rows = index.query("SELECT folder, task, stream, status, kind, context, thread, path FROM overflow "
                       "WHERE status != 0")
    if not rows:
        return 0
    marked = 0
    with index._lock:
        cur = index.conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        for folder, task, stream, status, kind, context, thread, path in rows:
            cands = cur.execute("SELECT id FROM ops WHERE folder=? AND task=? AND stream=? ORDER BY exec_index",
                                (folder, task, stream)).fetchall()
            if context is not None and len(cands) > 1:
                narrowed = cur.execute(
                    "SELECT DISTINCT op_id FROM units WHERE op_id IN (%s) AND (tensors LIKE ? OR tensors LIKE ?)"
                    % ",".join("?" * len(cands)),
                    [c[0] for c in cands] + [f'%"context":{context},%', f'%"context":{context}}}%']).fetchall()
                cands = narrowed or cands
            for (op_id,) in cands[:1]:
                cur.execute("UPDATE ops SET status=COALESCE(status, 0) | ?, evidence='opdebug' WHERE id=?",
                            (int(status), op_id))
                marked += 1
        cur.execute("COMMIT")
    return marked
