"""The wheel builds offline from a copy of the sources, installs, and its ``dumpscope`` script runs.

No network: ``pip wheel --no-deps --no-build-isolation`` uses the setuptools of this venv (the
``test`` extra asks for one that builds wheels by itself), ``pip install --no-deps --no-index``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import REPO
from dumpscope import __version__

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "dumpscope", "core", "tui")


def _can_build_wheels() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if (major, minor) >= (70, 1):  # bdist_wheel is part of setuptools from 70.1
        return True
    try:
        import wheel  # noqa: F401
    except ImportError:
        return False
    return major >= 64


@pytest.fixture(scope="module")
def wheel_file(tmp_path_factory) -> Path:
    if not _can_build_wheels():
        pytest.skip("this venv's setuptools cannot build wheels (pip install 'setuptools>=70.1')")
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        p = REPO / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(p, src / name)
    out = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                          "-q", "-w", str(out), str(src)], capture_output=True, text=True, timeout=300, env=env,
                         cwd=src)
    assert res.returncode == 0, res.stderr[-3000:]
    wheels = list(out.glob("dumpscope-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_holds_the_license_and_package_data(wheel_file):
    names = zipfile.ZipFile(wheel_file).namelist()
    assert any(n.endswith(".dist-info/LICENSE") or "/licenses/LICENSE" in n for n in names), names
    for needed in ("dumpscope/tui/app.tcss", "dumpscope/core/formats/dump_data.proto",
                   "dumpscope/core/engines/compare/report.py", "dumpscope/tui/serve.py", "dumpscope/tui/cli/completion.py"):
        assert needed in names
    meta = zipfile.ZipFile(wheel_file).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "Provides-Extra: xlsx" in meta and "Provides-Extra: serve" in meta
    tomli = [line.replace(" ", "") for line in meta.splitlines() if line.startswith("Requires-Dist: tomli")]
    assert tomli and ">=1.1" in tomli[0] and 'python_version<"3.11"' in tomli[0], tomli  # setuptools spacing varies


def test_installed_script_prints_the_version(wheel_file, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, capture_output=True)
    py = venv / "bin" / "python"
    res = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel_file)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    # the dependencies (numpy, textual…) come from this test's environment, offline: its site-packages
    # is put on the new venv's path as a plain entry (its .pth files, e.g. an editable dumpscope, stay unread)
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    Path(purelib, "zz_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    for flag in ("--version", "-V"):
        res = subprocess.run([str(venv / "bin" / "dumpscope"), flag], capture_output=True, text=True, timeout=60,
                             cwd=tmp_path, env=env)
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == f"dumpscope {__version__}"
    res = subprocess.run([str(venv / "bin" / "dumpscope"), "help", "compare"], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path, env=env)
    assert res.returncode == 0 and "--output" in res.stdout, res.stderr
    # it really is the installed copy that answered, not this checkout
    where = subprocess.run([str(py), "-c", "import dumpscope; print(dumpscope.__file__)"], capture_output=True,
                           text=True, timeout=60, cwd=tmp_path, env=env).stdout.strip()
    assert where.startswith(str(venv)), where
