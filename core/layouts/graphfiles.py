"""Graph files anywhere under PATH: GE ``ge_proto_*.txt`` / ``ge_onnx_*.pbtxt``, atc JSON, stray ``.ir``.

They are only reported here; ``core.finalize`` picks the one matching each dump's graph
(model name) and joins its nodes.  MindSpore's own ``graphs/`` folder is read by the
MindSpore layout.
"""

from __future__ import annotations

from typing import Iterable

from dumpscope.core.graphs import detect_graph_kind, sniff_ge_json
from dumpscope.core.layouts.base import DirListing, Item, Layout, rank_from_parts
from dumpscope.core.model import GraphFile


class GraphFilesLayout(Layout):
    name = "graph_files"
    title = "graph descriptions (GE graph text, MindSpore IR)"

    def scan_dir(self, listing: DirListing) -> Iterable[Item]:
        rank = rank_from_parts(listing.parts, -1)
        for fname in list(listing.unclaimed()):
            kind = detect_graph_kind(fname)
            if kind is None and fname.endswith(".json") and sniff_ge_json(listing.path(fname)):
                kind = "ge_json"  # atc --json output under the name the user gave it
            if kind is None:
                continue
            listing.claimed.add(fname)
            yield GraphFile(path=listing.path(fname), kind=kind, rank=None if rank < 0 else rank, graph="")
