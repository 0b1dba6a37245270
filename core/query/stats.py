"""Tensor statistics as the query layer gives them: computed from the data once and cached in the
index, or the dump's own statistics for statistics-only tensors (``DumpQuery`` inherits these)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Optional

from dumpscope.core.query.rows import TensorRow

if TYPE_CHECKING:
    from dumpscope.core.index.dump_index import DumpIndex


class StatsQueries:
    """The statistics of ``DumpQuery`` (a mixin: ``index`` and ``_remember`` are the query's)."""

    index: "DumpIndex"

    def record_nonfinite(self, counts: dict[int, tuple[int, int, int]]) -> None:
        """Remember scanned non-finite output counts on the ops (badges, overflow view)."""
        if not counts:
            return
        self._remember("UPDATE ops SET nan=?, posinf=?, neginf=?, evidence=COALESCE(evidence, 'tensor') "
                       "WHERE id=? AND (evidence IS NULL OR evidence='tensor')",
                       [(n, p, m, op_id) for op_id, (n, p, m) in counts.items()], wait=True)

    def cached_stats(self, t: TensorRow) -> Optional[dict[str, Any]]:
        from dumpscope.core.tensors.load import signature

        sig = signature(t.ref())
        if sig is None:
            return None
        rows = self.index.query("SELECT data FROM stats_cache WHERE sig=?", (sig,))
        return json.loads(rows[0][0]) if rows else None

    def tensor_stats(self, t: TensorRow, use_cache: bool = True) -> dict[str, Any]:
        """Full statistics of one tensor (CLI.md ``stats`` keys + histogram), cached in the index.

        Raises ``TensorLoadError`` (one line naming the file) when the data cannot be read; for a
        statistics-only tensor, returns the stored statistics (fields unknown → ``None``).
        """
        if t.storage == "value":
            from dumpscope.core.tensors.load import TensorLoadError

            raise TensorLoadError(f"{t.path}: {t.io} {t.slot} is a non-tensor argument "
                                  f"({t.dtype} {_short_value(t.extra.get('value'))}): no statistics")
        if t.storage == "none":
            from dumpscope.core.tensors.stats_record import stats_from_row

            row = dict(t.stats or {})
            row.setdefault("dtype", t.dtype)  # the record knows them even when the statistics do not
            row.setdefault("shape", list(t.shape))
            if t.dtype and "count" not in row:
                row["count"] = math.prod(t.shape)
            st = stats_from_row(row)
            doc = st.to_json()
            doc["source"] = "stats"
            bad = {k: str(v).lower().replace("infinity", "inf") for k, v in (t.stats or {}).items()
                   if k in ("max", "min", "mean", "l2norm") and isinstance(v, float) and not math.isfinite(v)}
            if bad:  # what the dump recorded where the finite-only keys must say null ("nan", "inf", "-inf")
                doc["recorded_nonfinite"] = bad
            return doc
        from dumpscope.core.tensors.load import compute_tensor_stats, signature

        if use_cache:
            cached = self.cached_stats(t)
            if cached is not None:
                return _described(cached, t)
        st = compute_tensor_stats(t.ref())
        doc = st.to_json()
        doc["source"] = "tensor"
        sig = signature(t.ref())
        if sig is not None:
            self._remember("INSERT OR REPLACE INTO stats_cache VALUES(?, ?)",
                           [(sig, json.dumps(doc, default=_json_default))])
        return _described(doc, t)


def _short_value(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _described(doc: dict[str, Any], t: TensorRow) -> dict[str, Any]:
    """One tensor, one description: statistics carry the dtype every other command shows (the
    name's), and say what the values were read as when the payload header differs."""
    out = dict(doc)
    read_as = out.get("dtype")
    out["dtype"] = t.dtype
    if read_as and read_as != t.dtype:
        out["read_as"] = read_as
    return out


def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return str(v)
