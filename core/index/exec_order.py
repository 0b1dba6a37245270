"""Execution order of one rank/step's ops: each graph's own order, the graphs interleaved as they ran.

Within a graph: MindSpore's execution-order CSV where it names the op, file timestamps for the rest
(``order_in_graph``); across graphs: the file timestamps (``merge_graphs``), the dump's only cross-graph
fact.  Part of ``finalize``.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import defaultdict
from typing import Optional

from dumpscope.core.index.op_groups import OpAcc
from dumpscope.core.names import sanitize_name


def order_in_graph(ops: list[OpAcc], csv_pos: dict[str, int], csv_spos: dict[str, int]) -> list[OpAcc]:
    """Execution order: the CSV where names match, timestamps for the rest.

    An op missing from the CSV (renamed, or never listed, like parameters) is placed right
    after the CSV-listed op that ran just before it according to the file timestamps.
    """
    if not csv_pos:
        return sorted(ops, key=lambda o: (o.first_ts if o.first_ts is not None else float("inf"),
                                          o.order_hint, o.name))
    placed: list[tuple[int, OpAcc]] = []
    loose: list[OpAcc] = []
    stride = len(csv_pos) + 1  # the CSV lists one run: a loop body's k-th run comes after the whole (k-1)-th
    for op in ops:
        pos = csv_pos.get(op.joined or op.csv_name or op.name)
        if pos is None:
            pos = csv_spos.get(op.sfile)
        if pos is None:
            loose.append(op)
        else:
            placed.append((op.run * stride + pos, op))
    timeline = sorted((op.first_ts, pos) for pos, op in placed if op.first_ts is not None)
    ts_keys = [t for t, _ in timeline]
    keyed: list[tuple] = [((pos, 0, op.first_ts or 0), op) for pos, op in placed]
    for op in loose:
        if op.first_ts is None:
            keyed.append(((float("inf"), 2, op.order_hint), op))
            continue
        i = bisect_right(ts_keys, op.first_ts)
        before = max((p for _, p in timeline[:i]), default=-1) if i else -1
        keyed.append(((before, 1, op.first_ts), op))
    keyed.sort(key=lambda kv: (kv[0], kv[1].name))
    return [op for _, op in keyed]


def csv_maps_of(names: list[str]) -> tuple[dict[str, int], dict[str, int], dict[str, str]]:
    """Positions by full name and by file-side spelling, and full names by file-side spelling."""
    csv_pos = {n: i for i, n in enumerate(names)}
    snames = [sanitize_name(n) for n in names]
    csv_spos = {s: i for i, s in enumerate(snames)}
    csv_names = dict(zip(snames, names))
    # doc-style npy names carry only the last scope segment (``Conv2D-op12``)
    shorts: dict[str, list[str]] = defaultdict(list)
    for n in names:
        shorts[sanitize_name(n.rsplit("/", 1)[-1])].append(n)
    for short, full in shorts.items():
        if len(full) == 1 and short not in csv_spos:
            csv_spos[short] = csv_pos[full[0]]
            csv_names[short] = full[0]
    return csv_pos, csv_spos, csv_names


def graph_key(graph: str) -> tuple:
    """Graphs by number where they are numbers (MindSpore's kernel graph ids: 2 before 10), else by name:
    the order of last resort, for ops that no timestamp places (see ``merge_graphs``)."""
    return (0, int(graph), "") if graph.isascii() and graph.isdigit() else (1, 0, graph)


def merge_graphs(ordered: dict[str, list[OpAcc]]) -> list[OpAcc]:
    """One execution order for a step whose ops sit in several graphs: each graph's own order kept, the
    graphs interleaved by the file timestamps (as they ran).

    MindSpore runs several kernel graphs per step with control flow (a while loop's condition and
    body are graphs of their own, run once per iteration), not in graph-id order: graph 6 may run
    before graph 0, twice, between runs of graph 2.  The dump's only cross-graph fact is the time
    each file was written, so the next op is the graph head that was written first; an op without
    a timestamp takes its predecessor's (it stays right after it), and ties go by ``graph_key``."""
    if len(ordered) == 1:
        return next(iter(ordered.values()))
    runs = [ordered[g] for g in sorted(ordered, key=graph_key)]
    if not any(acc.first_ts is not None for run in runs for acc in run):  # nothing to interleave by
        return [acc for run in runs for acc in run]
    keys = [_filled_ts(run) for run in runs]
    out: list[OpAcc] = []
    heap = [(keys[g][0], g, 0) for g, run in enumerate(runs) if run]  # ties: graph_key order
    heapq.heapify(heap)
    while heap:
        _k, g, i = heapq.heappop(heap)
        out.append(runs[g][i])
        if i + 1 < len(runs[g]):
            heapq.heappush(heap, (keys[g][i + 1], g, i + 1))
    return out


def _filled_ts(run: list[OpAcc]) -> list[float]:
    """Each op's timestamp, else its predecessor's, else its successor's, else +inf (last)."""
    keys: list[Optional[float]] = [None if a.first_ts is None else float(a.first_ts) for a in run]
    last: Optional[float] = None
    for i, k in enumerate(keys):
        keys[i] = last = k if k is not None else last
    nxt: Optional[float] = None
    for i in range(len(keys) - 1, -1, -1):
        keys[i] = nxt = keys[i] if keys[i] is not None else nxt
    return [float("inf") if k is None else k for k in keys]
