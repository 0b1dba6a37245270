"""The small query API the command line and the explorer share: the only place, with the index,
where SQL is written.  Views and engines ask questions here and never touch files or SQL themselves.

* ``rows``: the op and tensor rows as records (``OpRow``, ``TensorRow``) and their decoding;
* ``dump_query``: ``DumpQuery``, the questions about one indexed tree (``open_query`` opens one): what is
  there, the ops, the scope tree; it inherits ``graph`` (what the joined graphs say), ``documents`` (the
  ``show``/``ops`` JSON) and ``stats`` (tensor statistics, cached in the index);
* ``overflow``: ``DumpQuery.overflow``, the overflow evidence the index holds and the scan's cache.
"""

from __future__ import annotations

from dumpscope.core.query.dump_query import DumpQuery, open_query
from dumpscope.core.query.rows import KINDS, OpLookupError, OpRow, TensorRow, shown_step

__all__ = ["DumpQuery", "KINDS", "OpLookupError", "OpRow", "TensorRow", "open_query", "shown_step"]
