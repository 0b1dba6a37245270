"""Issue 18's Done-when, unseen, on every real dump that went NaN (tests/data, written by the tools
themselves; see each README): at 80x24, ``/ <the first NaN op> Enter`` opens that op with its source
line (``script.py:<line>``) on the first screen when the dump carries source information, the status
bar shows rank and step, and ``q`` followed by ``/ ? e`` exits cleanly.  The real dumps that did not
go NaN (and ../shared/real_dumps, skipped without it) are opened at 80x24 for the status bar and the
clean exit.

Which op went NaN first comes from the tool's own record, never from dumpscope: numpy on MindSpore's
``.npy`` files in MindSpore's execution-order CSV, msprobe's ``dump.json`` statistics in call order,
numpy on Troubleshooter's ``.npy`` files in its ``*_info.csv`` order.  The expected source line is the
line of the script that made the dump holding the call (``needle``)."""

from __future__ import annotations

import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from conftest import DATA, shared
from test_tui_keys import burst
from test_tui_support import screen_text, search_and_open, set_env, wait_ended, wait_ready

from dumpscope.tui.app import DumpscopeApp

SIZE = (80, 24)


@dataclass(frozen=True)
class NanDump:
    tarball: str
    dump: str  # the dump's folder inside the tarball
    tool: str  # "ms", "msprobe", "ts": how the first NaN op is found
    script: str  # the script that made it (inside the tarball, else under tests/data)
    needle: str  # the text of its line that made the NaN
    rank: int = 0
    ran_as: str = ""  # the script's name when it ran (the stack says that one)

    @property
    def id(self) -> str:
        return f"{self.tarball}/{self.dump}"


NAN_DUMPS = [
    NanDump("real_mindspore_210_bn", "overflow", "ms", "net.py", "return ops.exp("),
    NanDump("real_mindspore_210_bn", "outs", "ms", "net2.py", "return ops.exp("),
    NanDump("real_mindspore_210_block", "nan", "ms", "block.py", "f = ops.pow("),
    NanDump("real_ms20_block", "dump", "ms", "make_dump.py", "return ops.sqrt(", ran_as="net.py"),  # see README
    NanDump("real_ms210_dp2", "dp2", "ms", "make_dp2_run.py", "return ops.log(", rank=1),
    NanDump("real_ms210_dp2", "dp2_ms27", "ms", "make_dp2_run.py", "return ops.log(", rank=1),
    NanDump("real_ms210_nan", "nan", "ms", "make_nan_run.py", "return ops.log("),
    NanDump("real_msprobe26", "nan_stats", "msprobe", "make_dumps.py", "c = torch.sqrt("),
    NanDump("real_msprobe_262_block", "nan_statistics", "msprobe", "block_msp.py", "f = torch.pow("),
    NanDump("real_msprobe_262_block", "nan_tensor", "msprobe", "block_msp.py", "f = torch.pow("),
    NanDump("real_troubleshooter_1018_block", "nan", "ts", "block_ts.py", "f = torch.pow("),
    NanDump("real_ts_nan", "rank0", "ts", "ts_nan/make_ts_nan.py", "h = torch.sqrt(h)"),
]

#: one dump of each other real tarball (no NaN): opened for the status bar and the clean exit
PLAIN_DUMPS = [("real_mindspore_210_bn", "golden"), ("real_mindspore_210_pad", "target"),
               ("real_mindspore_cf_io", "ms210_loop"), ("real_mindspore_train", "ms27_transformer"),
               ("real_ms210_source", "real_ms210_source/out"), ("real_ms_pt_pair", "ms"),
               ("real_msprobe26", "dist_stats"), ("real_api_dumps", "ts_a"), ("real_api_dumps", "msp_b"),
               ("real_ge_graphs", "real_ge_graphs/complie_path"), ("msprobe_ut_ms_pt", "pt")]

_unpacked: dict[str, Path] = {}


def unpacked(tmp_path_factory, name: str, archive: Optional[Path] = None) -> Path:
    """Each tarball once per session (the dumps are only read)."""
    if name not in _unpacked:
        dest = tmp_path_factory.mktemp(name)
        with tarfile.open(archive or DATA / f"{name}.tar.gz") as tar:
            tar.extractall(dest, filter="data")
        _unpacked[name] = dest
    return _unpacked[name]


# -- the tools' own record of the first NaN op ------------------------------------------------------


def _finite(path: Path) -> bool:
    a = np.load(path)
    return a.dtype.kind not in "fc" or bool(np.isfinite(a).all())


def first_nan_mindspore(dump: Path, rank: int) -> tuple[str, int]:
    """(full name, step): the first kernel, in MindSpore's execution order, with a non-finite output (numpy)."""
    rank_dir = dump / f"rank_{rank}"
    order = (rank_dir / "execution_order" / "ms_execution_order_graph_0.csv").read_text().split()[1:]
    steps = sorted((p for p in rank_dir.glob("*/0/*") if p.name.isdigit()), key=lambda p: int(p.name))
    for step in steps:
        files = [p.name for p in step.iterdir()]
        for name in order:
            kind = name.rsplit("/", 1)[-1].split("-op")[0]
            prefixes = (f"{kind}.{name.replace('/', '_')}.", f"{kind}.{name.rsplit('/', 1)[-1]}.")
            outs = [f for f in files if f.startswith(prefixes) and ".output." in f]
            if any(not _finite(step / f) for f in outs):
                return name, int(step.name)
    raise AssertionError(f"{dump}: no non-finite output")


def first_nan_msprobe(dump: Path) -> str:
    """The first API in msprobe's dump.json (call order) whose output statistics hold a NaN or Inf."""
    (path,) = dump.rglob("dump.json")
    for name, entry in json.loads(path.read_text())["data"].items():
        for out in entry.get("output", []) or []:
            stats = [str(out.get(k)).lower() for k in ("Max", "Min", "Mean", "Norm")] if isinstance(out, dict) else []
            if any(v in ("nan", "inf", "-inf") for v in stats):
                return name
    raise AssertionError(f"{dump}: no NaN in msprobe's statistics")


def first_nan_troubleshooter(dump: Path) -> str:
    """The first API whose output file holds a NaN or Inf, in the order of Troubleshooter's info CSV (numpy)."""
    (info,) = dump.rglob("*_api_dump_info.csv")
    folder = info.with_name(info.name.replace("_info.csv", ""))
    for line in info.read_text().splitlines():
        name = json.loads(line.replace("NaN", "null").replace("Infinity", "null"))[0]
        if "_forward_output" in name and not _finite(folder / f"{name}.npy"):
            return name.split("_forward_output")[0] + "_forward"
    raise AssertionError(f"{dump}: no NaN output")


def has_source(dump: Path, tool: str) -> bool:
    """Did the tool write source information: ``In file`` lines in MindSpore's .ir, a stack file otherwise."""
    if tool == "ms":
        return any("In file" in p.read_text(errors="replace") for p in dump.rglob("graphs/*.ir"))
    return any(p.stat().st_size > 2 for p in dump.rglob("*stack*.json"))


def script_line(script: Path, needle: str) -> int:
    lines = script.read_text().splitlines()
    (line,) = [i for i, text in enumerate(lines, 1) if needle in text]
    return line


# -- the tests ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", NAN_DUMPS, ids=lambda c: c.id)
async def test_first_nan_op_source_line_status_and_clean_quit(case, tmp_path_factory, tmp_path, monkeypatch):
    root = unpacked(tmp_path_factory, case.tarball)
    dump = root / case.dump
    script = root / case.script if (root / case.script).is_file() else DATA / case.script
    step = None
    if case.tool == "ms":
        name, step = first_nan_mindspore(dump, case.rank)
        typed = name.rsplit("/", 1)[-1]
    else:
        name = first_nan_msprobe(dump) if case.tool == "msprobe" else first_nan_troubleshooter(dump)
        typed = name
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(dump), display_name=case.dump)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        if step is not None and (app.rank, app.step) != (case.rank, step):
            app.set_place(case.rank, step)  # the s / r pickers' effect
            await wait_ready(pilot)
        await search_and_open(pilot, typed)
        op = app.main.current
        assert op.name == name, f"/ {typed} Enter opened {op.name}"
        rows = screen_text(app).splitlines()
        detail = [r.split("▕", 1)[1] for r in rows if "▕" in r]
        if has_source(dump, case.tool):
            where = f"{case.ran_as or script.name}:{script_line(script, case.needle)}"
            head = next(i for i, r in enumerate(detail) if op.short in r)
            assert where in detail[head + 1], f"{where} not under the header: {detail[head:head + 3]}"
        else:
            assert any("· no source line in this dump" in r for r in detail)
        assert f"rank {op.rank} step {op.step}" in rows[-2] and (app.rank, app.step) == (op.rank, op.step)
        burst(app, ["q", "slash", "question_mark", "e"])
        await wait_ended(app)
    assert app.return_code == 0


def _plain_cases():
    cases = [pytest.param(t, d, id=f"{t}/{d}") for t, d in PLAIN_DUMPS]
    cases.append(pytest.param("lenet", "out", id="shared/real_dumps/lenet"))
    return cases


@pytest.mark.parametrize("tarball, folder", _plain_cases())
async def test_other_real_dumps_show_rank_and_step_and_quit_cleanly(tarball, folder, tmp_path_factory, tmp_path,
                                                                     monkeypatch):
    lenet = shared("real_dumps", "mindspore-2.10-cpu-lenet.tar.gz") if tarball == "lenet" else None
    root = unpacked(tmp_path_factory, tarball, lenet)
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(root / folder), display_name=folder)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        status = screen_text(app).splitlines()[-2]
        assert f"rank {app.rank} step {app.step}" in status and f"{app.q.count_ops(app.rank, app.step):,} ops" in status
        burst(app, ["q", "slash", "question_mark", "e"])
        await wait_ended(app)
    assert app.return_code == 0
