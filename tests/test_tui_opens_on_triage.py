"""The explorer opens on the answer triage gives (issue 31): ``dumpscope PATH`` on the overflow origin that
``dumpscope triage PATH`` names, ``dumpscope GOLDEN --compare TARGET`` on the whole job's first divergence that
``dumpscope triage TARGET --golden GOLDEN`` names (every rank and step, not only the place it opens on).

Real data: tests/data/real_msprobe_dist_nan.tar.gz (mindstudio-probe 26.2, torch CPU, 2 ranks x 2 steps: only
rank 1's step-1 input is negative, so msprobe recorded NaN first for rank 1's ``Torch.sqrt.0.forward``; rank 0
received it through ``all_reduce``) and tests/data/real_ms210_causes.tar.gz (MindSpore 2.10 CPU: ``lr`` trained
with the learning rate x1.1).  The expected answers are triage's documents, run by the command line here; the
dumps' README and tests/test_real_msprobe_dist_nan.py check those against msprobe's own statistics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import unpack_data
from test_tui_support import set_env, settle, wait_for, wait_ready

from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.cli.entry import main

SIZE = (100, 30)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_msprobe_dist_nan") / "dist"


@pytest.fixture(scope="module")
def causes(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_causes")


def _triage(capsys, *args: str) -> dict:
    code = main(["triage", *args, "--json", "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 3, err  # trouble found
    return json.loads(out)["origin"]


async def _opened(app: DumpscopeApp, pilot) -> tuple[int, int, str]:
    await wait_ready(pilot)
    if app.compare_with:
        # the whole-job compare runs in a worker after the index is ready
        await wait_for(pilot, lambda: app.compare_result is not None or app.compare_error, "the compare")
        assert app.compare_result is not None, app.compare_error
        await settle(pilot)
    return app.rank, app.step, app.main.current.name


async def test_the_explorer_opens_on_the_overflow_origin_triage_names(dist, capsys, tmp_path, monkeypatch):
    origin = _triage(capsys, str(dist / "target"))
    assert (origin["name"], origin["rank"], origin["step"]) == ("Torch.sqrt.0.forward", 1, 1)  # the README's
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(dist / "target"), display_name="target")
    async with app.run_test(size=SIZE) as pilot:
        assert await _opened(app, pilot) == (origin["rank"], origin["step"], origin["name"])


@pytest.mark.parametrize("golden, target", [("dist/golden", "dist/target"), ("golden", "lr")])
async def test_compare_opens_on_the_whole_jobs_first_divergence_triage_names(golden, target, dist, causes, capsys,
                                                                             tmp_path, monkeypatch):
    """The distributed pair diverges only at rank 1 step 1 (its opening place, rank 0 step 0, agrees); the lr
    pair in the optimizer's ApplyMomentum of step 0, the place it opens on, where the cursor is put on it."""
    root = dist.parent if golden.startswith("dist") else causes
    origin = _triage(capsys, str(root / target), "--golden", str(root / golden))
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(root / golden), compare_with=str(root / target), display_name=golden)
    async with app.run_test(size=SIZE) as pilot:
        assert await _opened(app, pilot) == (origin["golden_rank"], origin["golden_step"], origin["golden_name"])
        fd = app.compare_result["first_divergence"]  # the compare view selects the same row
        assert (fd["name"], fd["rank"], fd["step"], fd["io"], fd["slot"]) == (
            origin["golden_name"], origin["golden_rank"], origin["golden_step"], origin["io"], origin["slot"])


async def test_the_explorer_opens_where_triage_does_when_a_collective_inherited_the_nan(capsys, tmp_path,
                                                                                      monkeypatch):
    """Rank 0's first bad op is an all_reduce whose own input already held the NaN (made by code msprobe did
    not dump): the overflow engine judges it inherited, not received, and being first in execution order it is
    triage's origin.  The explorer used to open on rank 1's sqrt (it took every collective for a receiver)."""
    import numpy as np

    from synth.api_dump_writer import ApiCall, write_msprobe_tree

    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    bad = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    neg = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    with np.errstate(invalid="ignore"):
        sqrt = np.sqrt(neg)  # nan where negative, as torch.sqrt
    root = tmp_path / "job"
    write_msprobe_tree(str(root), [ApiCall("Torch", "mul", 0, [x, x], [x * x]),
                                   ApiCall("Distributed", "all_reduce", 0, [bad], [bad])], task="statistics", rank=0)
    write_msprobe_tree(str(root), [ApiCall("Torch", "mul", 0, [x, x], [x * x]),
                                   ApiCall("Torch", "mul", 1, [x, x], [x * x]),
                                   ApiCall("Torch", "sqrt", 0, [neg], [sqrt])], task="statistics", rank=1)
    origin = _triage(capsys, str(root))
    assert (origin["name"], origin["rank"], origin["step"]) == ("Distributed.all_reduce.0.forward", 0, 0)
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(root), display_name="job")
    async with app.run_test(size=SIZE) as pilot:
        assert await _opened(app, pilot) == (origin["rank"], origin["step"], origin["name"])


async def test_the_opening_compare_of_a_job_compares_the_first_divergences_place_once(dist, tmp_path, monkeypatch):
    """The whole-job pass already compared the place it opens on: that compare is shown, not run again (it
    was, by ``compare_dumps`` in the app), and it is what comparing that place alone gives."""
    import dumpscope.core.engines.compare as compare_pkg
    from dumpscope.core.query import open_query
    from dumpscope.tui.json_text import dumps

    direct = compare_pkg.compare_dumps
    again: list[tuple] = []

    def counted(*args, **kwargs):
        again.append((kwargs.get("rank"), kwargs.get("step")))
        return direct(*args, **kwargs)

    monkeypatch.setattr(compare_pkg, "compare_dumps", counted)
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(dist / "golden"), compare_with=str(dist / "target"), display_name="golden")
    async with app.run_test(size=SIZE) as pilot:
        rank, step, _ = await _opened(app, pilot)
        shown = app.compare_result
    assert (rank, step) == (1, 1) and again == []
    g = open_query(str(dist / "golden"), cache_directory=tmp_path / "cache-direct")
    t = open_query(str(dist / "target"), cache_directory=tmp_path / "cache-direct")
    alone = direct(g, t, rank=rank, step=step, workers=1)
    assert isinstance(shown["rows"], list) and len(shown["rows"]) == len(alone["rows"]) > 0
    for key in ("rows", "first_divergence", "unmatched_golden", "unmatched_target", "problems", "precision"):
        assert dumps(shown.get(key)) == dumps(alone.get(key)), key
