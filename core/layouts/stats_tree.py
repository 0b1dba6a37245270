"""Statistics-only dumps: CANN per-op CSVs, adump CSVs, msprobe and MindSpore ``statistic.csv``.

Each CSV row becomes a tensor record with no payload (``storage = "none"``) carrying the
statistics, so a stats-only tree is explorable like any other (FORMATS.md §4).  When the
same tensor also has a payload file, the index keeps one record with both.  The rows of one
per-op CSV (one run of one op, named like its dump file) are stored as one unit, as the
tensors of a CANN dump file are: half the rows, and ``finalize`` takes such places in SQL.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Optional

from dumpscope.core.errors import reason
from dumpscope.core.formats.cann_names import parse_dump_name
from dumpscope.core.formats.stats_csv import KIND_ADUMP, KIND_CANN, StatsCsv, read_stats_csv
from dumpscope.core.layouts.base import DirListing, Item, Layout
from dumpscope.core.layouts.paths import DumpPlace, place_of
from dumpscope.core.model import STORAGE_NONE, Problem, TensorRecord
from dumpscope.core.units import UnitRecord, dumps_entries, nonfinite_sums, slot_label


class StatsCsvLayout(Layout):
    name = "stats_csv"
    title = "statistics CSV (CANN dump_data=stats, MindSpore/msprobe statistic.csv)"

    def scan_dir(self, listing: DirListing) -> Iterable[Item]:
        place = None
        for fname in list(listing.unclaimed()):
            if not fname.endswith(".csv") or fname in ("mapping.csv",) or fname.startswith("ms_"):
                continue
            per_op = parse_dump_name(fname)
            if fname.lower() != "statistic.csv" and (per_op is None or per_op.kind != "stats"):
                continue
            path = listing.path(fname)
            if place is None:
                place = place_of(listing.parts)
            listing.claimed.add(fname)
            try:
                parsed = read_stats_csv(path)
            except Exception as exc:
                yield Problem(path, reason(exc, path))
                continue
            if parsed.warnings:  # one problem per file, however many rows are bad
                w = parsed.warnings[0].splitlines()[0] if parsed.warnings[0] else "bad row"
                w = w[len(path) + 1:].lstrip(" ") if w.startswith(path + ":") else w
                more = f" (and {len(parsed.warnings) - 1} more bad rows)" if len(parsed.warnings) > 1 else ""
                yield Problem(path, f"line {w}{more}" if w[:1].isdigit() else w + more)
            unit = _per_op_unit(parsed, place) if parsed.kind in (KIND_CANN, KIND_ADUMP) else None
            if unit is not None:
                yield unit
            else:
                yield from _records(parsed, place)


def _per_op_unit(parsed: StatsCsv, place: DumpPlace) -> Optional[UnitRecord]:
    """A per-op CSV is one run of one op, like a CANN dump file: one unit holds its tensors.

    The same unit as ``pack(list(_records(parsed, place)))`` (a test holds them equal), made without
    the tensor records (a 64-rank job has thousands of these files).  None for a CSV of one usable
    row or with a slot twice (those stay one unit a row)."""
    rows = [r for r in parsed.rows if r.op_name]
    if len(rows) < 2 or len({(r.io, r.slot) for r in rows}) != len(rows):
        return None
    entries = []
    for r in rows:
        dtype = r.dtype or "unknown"
        shape = list(r.shape)
        entries.append([r.io, r.slot, dtype, shape, r.format or "ND", list(shape), dtype, 0, r.size or 0, 0,
                        {k: v for k, v in r.stats.items() if v is not None}, None])
    first = rows[0]
    op_name = first.op_name
    return UnitRecord(
        "stats_csv", parsed.path, first.op_type or "", op_name, op_name.replace("/", "_"), place.rank, place.step,
        place.graph, first.task, first.stream, first.timestamp, STORAGE_NONE,
        min(float(r.timestamp or 0) for r in rows), len(entries), dumps_entries(entries),
        " ".join(slot_label(r.io, r.slot) for r in rows), None, *nonfinite_sums(entries))


def _records(parsed: StatsCsv, place: DumpPlace) -> Iterator[TensorRecord]:
    for row in parsed.rows:
        if not row.op_name:
            continue
        op_name = row.op_name
        yield TensorRecord(
            producer="stats_csv", path=parsed.path, op_type=row.op_type or "", op_name=op_name,
            file_name=op_name.replace("/", "_"), io=row.io, slot=row.slot, dtype=row.dtype or "unknown",
            shape=tuple(row.shape), format=row.format or "ND", device_shape=tuple(row.shape), rank=place.rank,
            step=place.step, graph=place.graph, task=row.task, stream=row.stream, timestamp=row.timestamp,
            storage=STORAGE_NONE, nbytes=row.size or 0, order_hint=float(row.timestamp or 0),
            stats={k: v for k, v in row.stats.items() if v is not None},
        )
