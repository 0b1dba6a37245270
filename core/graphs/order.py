"""A topological order of a graph's nodes, the file order wherever the edges allow it.

Graph dumps print nodes in an order GE or MindSpore chose (GE sorts the ``Build`` graph
before writing it, the ``.ir`` lists each subgraph's nodes in definition order), so the file
order is nearly always topological already.  A graph without tensors is listed in this order:
a node never comes before a producer of its data or control inputs, and where the file is
already in order nothing moves.  Edges of a cycle (a loop's back edge) are broken at the
node that comes first in the file.
"""

from __future__ import annotations

import heapq

from dumpscope.core.model import Graph


def producer_name(edge: str) -> str:
    """``"producer:out_index"`` → ``"producer"`` (other input texts are returned as they are)."""
    head, sep, tail = edge.rpartition(":")
    return head if sep and tail.lstrip("-").isdigit() else edge


def topological_names(graph: Graph) -> list[str]:
    """Node names of ``graph`` in a stable topological order (see the module docstring)."""
    names = list(graph.nodes)
    position = {name: i for i, name in enumerate(names)}
    preds: list[set[int]] = [set() for _ in names]
    for i, node in enumerate(graph.nodes.values()):
        for edge in (*node.inputs, *node.control):
            j = position.get(producer_name(edge)) if edge else None
            if j is not None and j != i:
                preds[i].add(j)
    succs: list[list[int]] = [[] for _ in names]
    waiting = [len(p) for p in preds]
    for i, ps in enumerate(preds):
        for j in ps:
            succs[j].append(i)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    done = [False] * len(names)
    out: list[int] = []
    while len(out) < len(names):
        if not ready:  # a cycle: release the first node (in file order) still waiting
            i = next(k for k in range(len(names)) if not done[k])
            waiting[i] = 0
            heapq.heappush(ready, i)
        i = heapq.heappop(ready)
        if done[i]:
            continue
        done[i] = True
        out.append(i)
        for k in succs[i]:
            if not done[k]:
                waiting[k] -= 1
                if waiting[k] == 0:
                    heapq.heappush(ready, k)
    return [names[i] for i in out]
