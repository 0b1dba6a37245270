"""Per-op badges: a glyph for every meaning (colour only repeats it), so NO_COLOR loses nothing.

``!`` overflow / NaN / Inf   ``✓ ~ ✗`` compare verdict pass / warning / error   ``W`` watched
tensor changed   ``★`` bookmarked   ``+`` marked for the re-dump config   ``·`` graph-only node
(no dump data, drawn dim)   ``?`` no graph-side name found (the op keeps its file-side name; ``show`` says why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from dumpscope.core.query import OpRow

VERDICT_GLYPH = {"pass": "✓", "warning": "~", "error": "✗"}
VERDICT_CLASS = {"pass": "linelist--ok", "warning": "linelist--warn", "error": "linelist--bad"}
_VERDICT_RANK = {"pass": 0, "warning": 1, "error": 2}

Part = tuple[str, Optional[str]]


@dataclass
class BadgeState:
    """What the app knows beyond the index: engine findings, bookmarks (op ids)."""

    overflow: set[int] = field(default_factory=set)
    verdicts: dict[int, str] = field(default_factory=dict)
    watched: set[int] = field(default_factory=set)
    bookmarks: set[int] = field(default_factory=set)
    marked: set[int] = field(default_factory=set)

    def add_verdict(self, op_id: Optional[int], verdict: Optional[str]) -> None:
        """Keep the worst verdict per op (an op has several tensors)."""
        if op_id is None or verdict not in _VERDICT_RANK:
            return
        old = self.verdicts.get(op_id)
        if old is None or _VERDICT_RANK[verdict] > _VERDICT_RANK[old]:
            self.verdicts[op_id] = verdict

    def parts(self, op: OpRow) -> list[Part]:
        """Fixed-width (4 cells) badge column for one op."""
        bad = op.bad or op.id in self.overflow
        verdict = self.verdicts.get(op.id)
        return [
            ("!" if bad else " ", "linelist--bad" if bad else None),
            (VERDICT_GLYPH.get(verdict, " ") if verdict else " ", VERDICT_CLASS.get(verdict or "")),
            ("W" if op.id in self.watched else " ", "linelist--warn"),
            ("★" if op.id in self.bookmarks else "+" if op.id in self.marked else
             ("·" if op.graph_only else "?" if op.join_note else " "),
             "linelist--mark" if op.id in self.bookmarks or op.id in self.marked else "linelist--dim"),
        ]

    def text(self, op: OpRow) -> str:
        return "".join(t for t, _ in self.parts(op)).rstrip()
