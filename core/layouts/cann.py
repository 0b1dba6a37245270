"""CANN binary dump files in any tree that CANN writes (FORMATS.md §1, §3, §5.1, §8).

One file per executed op: ``{op_type}.{op_name}.{task}.{stream}.{ts}`` (also the old
no-stream form, FFTS+ 9-field names, aclnn swapped names and all-digit ``mapping.csv``
aliases), plus ``Opdebug.Node_OpDebug.*`` overflow status files.  Only the protobuf header
is read while indexing; payloads are located by offset for later lazy loading.  Ranks,
graphs (model names) and steps come from the folder path (``core.layouts.paths``).
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator, Optional

from dumpscope.core.errors import reason
from dumpscope.core.formats.cann_dump import CannHeader, build_header, read_prefix_header
from dumpscope.core.formats.cann_names import (
    DumpName,
    parse_dump_name,
    quick_dump_name,
    read_mapping_csv,
    sanitize,
)
from dumpscope.core.layouts.base import DirListing, Item, Layout
from dumpscope.core.layouts.paths import DumpPlace, place_of
from dumpscope.core.model import STORAGE_CANN, OverflowEvidence, Problem, TensorRecord
from dumpscope.core.formats.shapes import impossible_header
from dumpscope.core.units import UNIT_COLUMNS, UnitRecord, pack


#: packed tensors kept per header layout (one per header length seen)
_MEMO_PER_LAYOUT = 256


class CannLayout(Layout):
    name = "cann"
    title = "CANN binary dump (TF adapter / ACL / torchair / MindSpore async & O2)"

    def scan_dir(self, listing: DirListing) -> Iterable[Item]:
        aliases: dict[str, str] = {}
        if "mapping.csv" in listing.files:
            bad: list[str] = []
            mpath = listing.path("mapping.csv")
            try:
                aliases = read_mapping_csv(mpath, bad)
            except (OSError, ValueError) as exc:
                yield Problem(mpath, reason(exc, mpath))
            if bad:  # one problem per file, however many lines are bad
                first = bad[0][len(mpath) + 1:] if bad[0].startswith(mpath + ":") else bad[0]
                more = f" (and {len(bad) - 1} more bad lines)" if len(bad) > 1 else ""
                yield Problem(mpath, f"line {first}{more}")
        place: Optional[DumpPlace] = None
        unmapped: list[str] = []
        prefix = listing.dirpath if listing.dirpath.endswith(os.sep) else listing.dirpath + os.sep
        folder_fd = _open_folder(listing.dirpath)
        try:
            for fname in list(listing.unclaimed()):
                quick = quick_dump_name(fname)
                if quick is not None:  # the usual name: one header read, no intermediate objects
                    if place is None:
                        place = place_of(listing.parts)
                    listing.claimed.add(fname)
                    yield from self._dump(prefix + fname, place, quick=quick,
                                          at=None if folder_fd is None else (folder_fd, fname))
                    continue
                yield from self._other(listing, fname, aliases, place, unmapped)
                if place is None and fname in listing.claimed:
                    place = place_of(listing.parts)
        finally:
            if folder_fd is not None:
                os.close(folder_fd)
        if aliases:
            listing.claimed.add("mapping.csv")
        # an all-digit alias beside dump files (or a mapping.csv) is a dump whose real name is lost
        if unmapped and (aliases or "mapping.csv" in listing.files or place is not None):
            why = "no entry in mapping.csv" if "mapping.csv" in listing.files else "no mapping.csv in its folder"
            for fname in unmapped:
                listing.claimed.add(fname)
                yield Problem(listing.path(fname), f"all-digit alias with {why}: its dump file name is unknown")

    def _other(self, listing: DirListing, fname: str, aliases: dict[str, str], place: Optional[DumpPlace],
               unmapped: list[str]) -> Iterator[Item]:
        """Any other name: old/FFTS+/swapped forms, all-digit aliases, Opdebug files."""
        if fname.endswith((".npy", ".csv", ".txt", ".ir", ".pb", ".pbtxt", ".log", ".py")):
            if not (fname.startswith("Opdebug.") and fname.endswith(".json")):
                return
        name = parse_dump_name(fname)
        real_name = None
        if name is not None and name.kind == "alias":
            real_name = aliases.get(fname) or aliases.get(fname.split(".", 1)[0])
            name = parse_dump_name(real_name) if real_name else None
            if name is None:
                if real_name and "." not in fname:
                    listing.claimed.add(fname)
                    yield Problem(listing.path(fname), f"mapping.csv names it {real_name[:120]!r}, "
                                                       "which is not a dump file name")
                elif not real_name and "." not in fname:
                    unmapped.append(fname)
                return
        if name is None or name.kind not in ("dump", "opdebug"):
            return
        if place is None:
            place = place_of(listing.parts)
        listing.claimed.add(fname)
        path = listing.path(fname)
        if name.kind == "opdebug":
            yield from self._opdebug(path, fname, place, listing.dirpath)
        else:
            yield from self._dump(path, place, name=name, real_name=real_name)

    @staticmethod
    def _dump(path: str, place: DumpPlace, quick: Optional[tuple[str, str, int, int, int]] = None,
              name: Optional[DumpName] = None, real_name: Optional[str] = None,
              at: Optional[tuple[int, str]] = None) -> list[Item]:
        """One dump file's unit (or the problem that stops it), from its header read once.

        ``quick`` is the usual five-field name already parsed, ``name`` any other form.  Files whose
        header has the same tensor layout and length pack to the same tensors JSON, so it is made once
        per (layout, header length); other files (incomplete, FFTS+, swapped or aliased names) are
        packed from their own records.  A list, not a generator: this runs once per file.
        """
        try:
            path, size, h, fields = read_prefix_header(path, at=at)
        except Exception as exc:  # any unreadable header is a named problem
            return [Problem(path, reason(exc, path))]
        if quick is not None:
            op_type, file_name, task, stream, name_ts = quick
            plain = True
        else:
            assert name is not None
            op_type, file_name, task, stream, name_ts = name.op_type, name.op_name, name.task, name.stream, \
                name.timestamp
            plain = not (real_name or name.is_ffts or name.swapped)
        lay = fields.layout
        common = plain and 8 + h + lay.payload <= size
        packed = lay.memo.get(h) if common else None
        items: list[Item] = []
        if packed is None:
            records: list[TensorRecord] = []
            header = build_header(path, size, h, fields)
            for item in records_from_header(header, name or parse_dump_name(os.path.basename(path)), place):
                if isinstance(item, TensorRecord):
                    if real_name:
                        item.extra["real_name"] = real_name
                    records.append(item)
                else:
                    items.append(item)
            if not records:
                return items
            packed = pack(records)[UNIT_COLUMNS.index("ntensors"):]
            if common and not items:  # a layout with a problem (impossible header) is read per file
                if len(lay.memo) >= _MEMO_PER_LAYOUT:  # header lengths vary with op-name length: bound it
                    lay.memo.clear()
                lay.memo[h] = packed
        ts = name_ts or fields.dump_time or None
        items.append(UnitRecord("cann", path, op_type, fields.op_name or file_name, file_name, place.rank, place.step,
                                place.graph, task, stream, ts, STORAGE_CANN, float(ts or 0), *packed))
        return items

    def _opdebug(self, path: str, fname: str, place: DumpPlace, folder: str) -> Iterator[Item]:
        from dumpscope.core.formats.opdebug import read_opdebug_file, read_opdebug_json

        try:
            records = read_opdebug_json(path) if fname.endswith(".json") else read_opdebug_file(path)
        except Exception as exc:
            yield Problem(path, reason(exc, path))
            return
        for rec in records:
            if rec.status == 0 or rec.task_id is None or rec.stream_id is None:
                continue
            yield OverflowEvidence(path=path, rank=place.rank, step=place.step, graph=place.graph,
                                   task=rec.task_id, stream=rec.stream_id, status=rec.status, kind=rec.kind,
                                   context=rec.context_id, thread=rec.thread_id, folder=folder)


def _open_folder(path: str) -> Optional[int]:
    """A descriptor of the folder, to open its files by name alone (None where unsupported)."""
    if os.open not in os.supports_dir_fd:
        return None
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None


def records_from_header(header: CannHeader, name: DumpName, place: DumpPlace) -> Iterator[Item]:
    """Tensor records of one decoded dump file (inputs first, then outputs)."""
    path = header.path
    op_name = header.op_name or name.op_name
    file_name = name.op_name
    extra: dict = {}
    if name.is_ffts:
        extra.update({"task_type": name.task_type, "context": name.context, "thread": name.thread,
                      "device": name.device})
    if name.swapped:
        extra["swapped_name"] = True
    truncated = [t for t in header.inputs + header.outputs if t.truncated]
    if truncated:
        labels = ", ".join(f"{t.io}.{t.slot}" for t in truncated[:4])
        yield Problem(path, f"truncated or still being written: {header.file_size} bytes, header declares "
                            f"{header.expected_size} (missing data of {labels})")
    for t in header.inputs + header.outputs:
        if t.truncated:
            continue
        bad = impossible_header(t.shape, t.dtype, t.size)
        if bad:  # listed, so the op is complete; its data is refused with this same line everywhere
            yield Problem(path, f"{t.io}.{t.slot}: {bad}")
        orig_op = t.original_op_name
        yield TensorRecord(
            producer="cann", path=path, op_type=name.op_type, op_name=op_name, file_name=file_name,
            io=t.io, slot=t.slot, dtype=t.dtype, shape=tuple(t.logical_shape), format=t.format,
            device_shape=tuple(t.shape), rank=place.rank, step=place.step, graph=place.graph,
            task=name.task, stream=name.stream, timestamp=name.timestamp or header.dump_time or None,
            storage=STORAGE_CANN, stored_dtype=t.dtype, offset=t.offset, nbytes=t.size,
            sub_format=t.sub_format, order_hint=float(name.timestamp or header.dump_time or 0),
            extra=dict(extra, original_op=orig_op) if orig_op else dict(extra),
        )


__all__ = ["CannLayout", "records_from_header", "sanitize"]
