"""``compare``'s rows spooled to a temporary file (``core.row_spool``), not kept in memory: the same
document and the same CSV as the rows kept in a list, on real dumps; and the CLI holds only a few rows
at a time however many pairs it prints."""

from __future__ import annotations

import csv
import io
import json
import sys
import weakref
from pathlib import Path

import pytest

from conftest import unpack_data
from dumpscope.core.engines.compare import engine
from dumpscope.core.engines.compare.places import compare_places
from dumpscope.core.query import open_query
from synth.job_tree import write_cann_job
from dumpscope.tui.cli.entry import main
from dumpscope.core.support import row_spool
from dumpscope.tui import json_text
from dumpscope.tui.json_text import dumps, row_block_text


@pytest.fixture(scope="module")
def msprobe(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_msprobe26") / "dist_stats"


@pytest.fixture(scope="module")
def msnan(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_nan") / "nan"


def _both(path: Path, cache: Path, printed: bool = False, **kw) -> tuple[dict, dict]:
    q = open_query(str(path), cache_directory=cache)
    listed = compare_places(q, q, **kw)
    spooled = compare_places(q, q, spool_rows=True, row_printer=row_block_text if printed else None, **kw)
    return listed, spooled


@pytest.mark.parametrize("case", [
    ("msprobe", {"golden_rank": 0, "target_rank": 1}),  # one place against another: target_rank on every row
    ("msprobe", {"rank": "all"}),  # several places: the rows of each read in turn
    ("msnan", {"golden_step": 0, "target_step": 2}),  # NaN rows: origins, sources
    ("msnan", {}),
])
@pytest.mark.parametrize("printed", [False, True], ids=["spooled", "printed"])
def test_spooled_rows_print_the_same_document_as_listed_rows(case, printed, msprobe, msnan, tmp_path, monkeypatch):
    """Rows spooled as JSON, or kept as the document prints them (``PrintedRows``: copied into it, except
    a place whose target's rank or step differs, whose rows get those as they are read), print the
    document the listed rows print, byte for byte."""
    which, kw = case
    monkeypatch.setattr(row_spool, "BLOCK_ROWS", 5)  # several blocks, an op's rows across two of them
    copied = []
    real = json_text._printed
    monkeypatch.setattr(json_text, "_printed", lambda *a: (copied.append(1), real(*a)))
    listed, spooled = _both(msprobe if which == "msprobe" else msnan, tmp_path, printed=printed, **kw)
    assert type(listed["rows"]) is list and type(spooled["rows"]) is not list
    assert len(listed["rows"]) > 0
    assert dumps(spooled) == dumps(listed)
    assert json.loads(dumps(spooled))["rows"] == json.loads(dumps(listed))["rows"]  # (and not by accident)
    cross = any("target_rank" in r or "target_step" in r for r in listed["rows"])
    assert bool(copied) == (printed and not cross)
    if kw.get("target_step") == 2:
        assert any(r["origin"] for r in listed["rows"]) and listed["first_divergence"]


def test_the_cli_csv_and_json_of_a_real_compare_are_the_rows_of_the_listed_document(capsys, msnan, tmp_path):
    listed, _ = _both(msnan, tmp_path, golden_step=0, target_step=2)
    assert main(["compare", str(msnan), str(msnan), "--golden-step", "0", "--target-step", "2",
                     "--cache-dir", str(tmp_path), "--csv"]) == 0
    got = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    keys = got[0]
    assert "target_step" in keys and "origin" in keys
    want = [["" if r.get(k) is None else str(r.get(k)) for k in keys] for r in listed["rows"]]
    assert got[1:] == want
    assert main(["compare", str(msnan), str(msnan), "--golden-step", "0", "--target-step", "2",
                     "--cache-dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == json.loads(dumps(listed["rows"]))


class _Row(dict):
    """A row that can be watched (``weakref``): alive only while something holds it."""

    __slots__ = ("__weakref__",)


def test_the_cli_compare_holds_a_few_rows_at_a_time(tmp_path, monkeypatch):
    """Every row ``_row`` makes is watched; while the CLI writes its ``--json`` document, at most a few
    are alive (kept in a list until the document is written, all of them were)."""
    root = write_cann_job(tmp_path / "dump", ranks=(0,), steps=(0,))
    alive = [0]
    made = [0]
    real_row = engine._row

    def gone() -> None:
        alive[0] -= 1

    def row(*args):
        r = _Row(real_row(*args))
        weakref.finalize(r, gone)
        alive[0] += 1
        made[0] += 1
        return r
    monkeypatch.setattr(engine, "_row", row)
    peak = [0]

    class Out(io.StringIO):
        def write(self, text):
            peak[0] = max(peak[0], alive[0])
            return super().write(text)
    out = Out()
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["compare", str(root), str(root), "--json", "--cache-dir", str(tmp_path / "c")]) == 0
    doc = json.loads(out.getvalue())
    assert made[0] == len(doc["rows"]) >= 10
    assert peak[0] <= 2  # (the first divergence's row, read back, is not one of them)


def test_compare_reads_both_indexes_with_a_lean_page_cache(msnan, tmp_path, capsys, monkeypatch):
    """Once built, both indexes of a compare are only read, beside both sides' ops: each connection's page
    cache shrinks from the build's 64 MiB (a 200k-pair place: ~100 MB less); the answers are the other
    compare tests'."""
    from dumpscope.core.index.dump_index import READ_CACHE_KIB, DumpIndex

    monkeypatch.setenv("DUMPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    leaned: list[int] = []
    real = DumpIndex.lean_cache

    def lean(self):
        real(self)
        leaned.append(self.conn.execute("PRAGMA cache_size").fetchone()[0])
    monkeypatch.setattr(DumpIndex, "lean_cache", lean)
    doc = json.loads(_cli_out(capsys, "compare", str(msnan), str(msnan), "--json"))
    assert leaned == [-READ_CACHE_KIB, -READ_CACHE_KIB]  # golden and target
    assert doc["rows"] and doc["first_divergence"] is None  # a dump against itself


def _cli_out(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out
