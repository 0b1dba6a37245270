"""Shared fixtures: the index cache goes to a temp dir, and the real MindSpore dump is unpacked once."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: real dumps written by the tools, kept with the tests (tarballs, each with the script that made it)
DATA = REPO / "tests" / "data"
#: the committed sample trees (sample_dumps/generate.py)
SAMPLES = REPO / "sample_dumps"
#: The one setting for where the project's shared real data lives (real_dumps/, real_samples/): the folder
#: ``$DUMPSCOPE_TEST_SHARED`` names, else ``shared`` beside the checkout.  CI has it; a user's clone does not,
#: so the tests that need it ask through ``shared()`` and skip there, and fail where the variable names a
#: folder that is not there (a setting given and wrong is an error, not a reason to skip).
SHARED_SETTING = os.environ.get("DUMPSCOPE_TEST_SHARED", "")
SHARED = Path(SHARED_SETTING) if SHARED_SETTING else REPO.parent / "shared"


def shared(*parts: str) -> Path:
    """``SHARED/parts``, or the test skips (no shared data beside this checkout) or fails (the setting is wrong)."""
    path = SHARED.joinpath(*parts)
    if path.exists():
        return path
    if SHARED_SETTING:
        pytest.fail(f"DUMPSCOPE_TEST_SHARED={SHARED_SETTING}: {path} is not there")
    pytest.skip(f"{path} is not here (the shared real data: put it beside the checkout or set DUMPSCOPE_TEST_SHARED)")


try:  # property tests: CI replays the same examples on every run (a failure there is reproducible, never luck);
    # elsewhere hypothesis explores new ones each run (it found grouped FRACTAL_Z's division by zero channels)
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("ci", derandomize=True, database=None)
    if os.environ.get("CI"):
        _hypothesis_settings.load_profile("ci")
except ImportError:  # (the test extra is not installed: the property tests skip themselves)
    pass


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts): two test processes per core, at most 16.

    The explorer's tests spend most of their time waiting on its timers and thread workers, not on a
    core: tests/test_tui.py + test_tui_real_dumps.py on 2 cores took 110 s with 2 processes, 58-80 s
    with 4, no less with 6 or 8.  ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins (xdist reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(16, 2 * cores))


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path_factory, monkeypatch):
    """Never write index files into the user's ~/.cache while testing (one cache per test process:
    ``getbasetemp`` is a worker's own folder under pytest-xdist)."""
    monkeypatch.setenv("DUMPSCOPE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "dumpscope-cache"))
    # nor read the user's ~/.config/dumpscope/keys.toml (a remapped key would change what a test presses)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "config"))


@pytest.fixture(autouse=True)
def _no_terminal_size(monkeypatch):
    """The CLI's human tables follow ``$COLUMNS`` off a terminal; pytest-xdist's workers carry
    ``COLUMNS=80 LINES=24`` and a user's shell may export its own: tests read the documented default."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(scope="session")
def real_lenet_tree(tmp_path_factory) -> Path:
    """The real MindSpore 2.10 LeNet dump, unpacked read-only into a temp dir (skips without shared/)."""
    tar_path = shared("real_dumps", "mindspore-2.10-cpu-lenet.tar.gz")
    dest = tmp_path_factory.mktemp("real_lenet")
    with tarfile.open(tar_path) as tar:
        tar.extractall(dest, filter="data")
    return dest / "out"


@pytest.fixture()
def real_lenet_copy(real_lenet_tree, tmp_path) -> Path:
    """A writable copy of the real dump, for tests that reshape it."""
    dest = tmp_path / "out"
    shutil.copytree(real_lenet_tree, dest)
    for root, dirs, files in os.walk(dest):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
    return dest


@pytest.fixture
def tiny(tmp_path, monkeypatch) -> Path:
    """The explorer tests' small MindSpore tree (``test_tui_support.make_ms_tree``), with the
    cache, config and working directory in tmp."""
    from test_tui_support import make_ms_tree, set_env

    set_env(monkeypatch, tmp_path)
    return make_ms_tree(tmp_path / "trees")


def unpack_data(tmp_path_factory, name: str) -> Path:
    """Unpack ``tests/data/{name}.tar.gz`` (real dumps written by the tools) into a temp dir."""
    dest = tmp_path_factory.mktemp(name)
    with tarfile.open(DATA / f"{name}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest


def cli_json(capsys, *args):
    """Run the CLI with ``--json`` in-process and return its document (failing with its stderr on a non-zero exit)."""
    from dumpscope.tui.cli.entry import main

    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)
