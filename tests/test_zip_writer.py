"""``core.support.zip_writer``: parts deflated in segments, some replaced when the archive is written, read
back by ``zipfile`` (which checks every entry's CRC-32) as the texts they should be."""

from __future__ import annotations

import io
import zipfile
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpscope.core.support import zip_writer
from dumpscope.core.support.zip_writer import DeflatedPart, ZipWriter, crc32_combine


@settings(max_examples=300, deadline=None)
@given(a=st.binary(max_size=3000), b=st.binary(max_size=3000))
def test_crc32_combine_is_the_crc_of_both_texts(a, b):
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_crc32_combine_over_long_lengths():
    a, b = b"x" * 7, bytes(range(256)) * 4099  # (a length of many bits)
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def _archive(writes: list[bytes], replace: dict[int, bytes], small: bytes = b"small") -> tuple[bytes, DeflatedPart]:
    fh, scratch = io.BytesIO(), io.BytesIO()
    z = ZipWriter(fh)
    z.add("first.txt", small)
    part = DeflatedPart(scratch)
    for tag, data in enumerate(writes):
        part.write(data, tag)
    part.finish()
    z.add_part("part.xml", part, {k: text(part) for k, text in replace.items()} if replace else None)
    z.add("last.txt", b"")
    z.close()
    return fh.getvalue(), part


@settings(max_examples=150, deadline=None)
@given(writes=st.lists(st.binary(max_size=700) | st.sampled_from([b"<row>" * 90, b"a" * 2000]), max_size=30),
       segment=st.integers(1, 3000), picks=st.lists(st.integers(0, 40), max_size=4),
       news=st.lists(st.binary(max_size=900), min_size=4, max_size=4))
def test_a_part_with_segments_replaced_reads_back_as_its_new_text(writes, segment, picks, news):
    """Whatever the segments (one write or many each) and whichever are replaced (the first, the last, several,
    by longer or shorter texts, by nothing): the entry is the texts joined with those segments' replaced, its
    CRC-32 and sizes right (``zipfile`` checks them)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(zip_writer, "SEGMENT_BYTES", segment)
        _, part = _archive(writes, {})
        n = len(part.tags)
        chosen = {p % n: news[i % len(news)] for i, p in enumerate(picks)}
        data, part = _archive(writes, {k: (lambda p, t=t: t) for k, t in chosen.items()})
    # the expected text: each segment's writes (tags are the writes' numbers), replaced where chosen
    bounds = part.tags + [len(writes)]
    want = b"".join(chosen.get(k, b"".join(writes[bounds[k]:bounds[k + 1]])) for k in range(n))
    book = zipfile.ZipFile(io.BytesIO(data))
    assert book.testzip() is None
    assert book.namelist() == ["first.txt", "part.xml", "last.txt"]
    assert book.read("part.xml") == want and book.read("first.txt") == b"small" and book.read("last.txt") == b""


def test_segments_are_found_by_tag_and_read_back_alone(monkeypatch):
    monkeypatch.setattr(zip_writer, "SEGMENT_BYTES", 100)
    writes = [b"%d:" % k + b"x" * 60 for k in range(20)]
    _, part = _archive(writes, {})
    assert part.tags == list(range(0, 20, 2))  # (two writes pass 100 bytes)
    assert part.segment_at(7) == 3 and part.segment_at(0) == 0 and part.segment_at(99) == 9
    assert part.text_of(3) == writes[6] + writes[7]


def test_zip64_fields_where_sizes_and_offsets_need_them(monkeypatch):
    """Past the limit (made small here) the sizes and offsets go in ZIP64 fields, and the end records too."""
    monkeypatch.setattr(zip_writer, "ZIP64_LIMIT", 50)
    text = bytes(range(256)) * 3
    data, _ = _archive([text[:300], text[300:]], {}, small=b"tiny")
    assert b"PK\x06\x06" in data and b"PK\x06\x07" in data
    book = zipfile.ZipFile(io.BytesIO(data))
    assert book.testzip() is None and book.read("part.xml") == text and book.read("first.txt") == b"tiny"
    assert book.getinfo("part.xml").file_size == len(text)


def test_the_same_parts_are_the_same_bytes():
    """Every entry is dated 1980-01-01: the same table, the same file."""
    assert _archive([b"a" * 100, b"b"], {})[0] == _archive([b"a" * 100, b"b"], {})[0]
