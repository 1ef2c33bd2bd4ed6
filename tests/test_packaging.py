"""Packaging: ``python -m build`` gives a wheel and an sdist, and the wheel works once
installed in a fresh virtual environment, with the core dependencies only and again with
all extras: the console script, ``python -m``, the three reference examples.

The virtual environments are created without pip (fast) and filled by the pip of the
interpreter running the tests (``pip --python``); they never see the system's or this
checkout's packages: no ``--system-site-packages``, no ``PYTHONPATH``, and the commands
run outside the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import run_checked

from onnxrt_backend_dev import __version__

# pytest-timeout's default (pyproject) is for one test; here the first test of each
# environment also builds or installs it: the subprocess timeouts below bound each step.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "onnxrt_backend_dev" / "monitoring"
BUILD_TIMEOUT = 240.0
INSTALL_TIMEOUT = 300.0
RUN_TIMEOUT = 90.0

TIMING_EXAMPLE = """
from pprint import pprint
from math import cos
from onnxrt_backend_dev.monitoring.benchmark import measure_time

res = measure_time(lambda: cos(0.5))
pprint(res)
"""

SPY_EXAMPLE = """
from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

p = start_spying_on()
# code to measure
data = [b"x" * 2**20 for _ in range(50)]
del data
stat = p.stop()
print(stat)
"""

PROFILE_EXAMPLE = """
import time
from onnxrt_backend_dev.monitoring.profiling import profile, profile2graph


def fct0(t):
    time.sleep(t)


def fct1(t):
    time.sleep(t)


def fct2():
    fct1(0.1)
    fct1(0.01)


def fct3():
    fct0(0.2)
    fct1(0.5)


def fct4():
    fct2()
    fct3()


ps = profile(fct4)[0]
root, nodes = profile2graph(ps, clean_text=lambda x: x.split("/")[-1])
text = root.to_text()
print(text)
"""

# (code, words its output must contain)
EXAMPLES = {
    "timing": (TIMING_EXAMPLE, ["'average'", "'deviation'", "'context_size'"]),
    "memory": (SPY_EXAMPLE, ["cpu"]),
    "profile2graph": (PROFILE_EXAMPLE, ["fct4", "fct1", "sleep"]),
}

# With every extra: the optional dependencies are importable and used.
EXTRAS_EXAMPLE = """
import matplotlib
import pandas
import pynvml

matplotlib.use("Agg")
import matplotlib.pyplot as plt

fig, ax = plt.subplots()
ax.plot([0, 1], [0, 1])
fig.savefig("check.png")
print("extras ok")
"""


def _clean_env() -> dict[str, str]:
    """The environment of the installed package's commands: nothing from this checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["MPLBACKEND"] = "Agg"
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _run(cmd: Sequence[str | Path], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return run_checked(cmd, cwd, timeout, _clean_env())


# Never copied into the build's source tree: local state, caches, build outputs.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "venv", "build", "dist", "_build", "__pycache__", "*.egg-info",
    ".mypy_cache", ".ruff_cache", ".pytest_cache", "monitoring-demo", "*.pyc",
)  # fmt: skip


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Builds the sdist, then the wheel from it, into a temporary folder.

    The build runs on a copy of the checkout so that it writes nothing into the working
    tree (setuptools leaves ``*.egg-info`` beside the sources) and two runs never race.
    """
    tmp = tmp_path_factory.mktemp("dist")
    src, out = tmp / "src", tmp / "out"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCES, symlinks=True)
    _run([sys.executable, "-m", "build", "--outdir", out, src], tmp, BUILD_TIMEOUT)
    return out


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, (pattern, found)
    return found[0]


def test_build_gives_a_wheel_and_an_sdist(dist: Path) -> None:
    # A platform wheel when the allocation shim compiled, pure Python otherwise.
    wheel = _one(dist, f"onnxrt_backend_dev-{__version__}-*.whl")
    sdist = _one(dist, f"onnxrt_backend_dev-{__version__}.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in sorted(PACKAGE.rglob("*.py")):  # every subpackage's modules too
        assert f"onnxrt_backend_dev/monitoring/{module.relative_to(PACKAGE)}" in names
    if shutil.which("cc") or shutil.which("gcc"):
        assert any(n.startswith("onnxrt_backend_dev/monitoring/_alloc/_shim") for n in names)
    assert "onnxrt_backend_dev/py.typed" in names
    info = f"onnxrt_backend_dev-{__version__}.dist-info"
    with zipfile.ZipFile(wheel) as zf:
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        metadata = zf.read(f"{info}/METADATA").decode()
    assert "onnxrt-monitoring = onnxrt_backend_dev.monitoring._cli:main" in entry_points
    assert f"Version: {__version__}" in metadata
    assert "Requires-Dist: psutil" in metadata
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[-1] for m in tf.getmembers()}
    for name in ("pyproject.toml", "README.md", "onnxrt_backend_dev/__init__.py",
                 "setup.py", "onnxrt_backend_dev/monitoring/_alloc/shim.c"):  # fmt: skip
        assert name in members, name


@dataclass(frozen=True)
class Venv:
    """A virtual environment with the wheel installed."""

    bin: Path  # folder of its executables
    extras: str  # "" for the core dependencies only, "all" for every extra


@pytest.fixture(scope="module", params=["", "all"], ids=["core", "all-extras"])
def venv(
    request: pytest.FixtureRequest, dist: Path, tmp_path_factory: pytest.TempPathFactory
) -> Venv:
    """A fresh virtual environment with the wheel installed (core or ``[all]``)."""
    extras: str = request.param
    home = tmp_path_factory.mktemp(f"venv-{extras or 'core'}")
    _run([sys.executable, "-m", "venv", "--without-pip", home], home, RUN_TIMEOUT)
    bindir = home / "bin"
    wheel = _one(dist, "*.whl")
    pip: list[str | Path] = [sys.executable, "-m", "pip", "--python", bindir / "python"]
    pip += ["install", "-q"]
    _run([*pip, f"{wheel}[{extras}]" if extras else wheel], home, INSTALL_TIMEOUT)
    return Venv(bindir, extras)


def test_the_installed_package_is_the_wheel_not_this_checkout(venv: Venv, tmp_path: Path) -> None:
    code = "import onnxrt_backend_dev as m, sys; print(m.__file__); print(m.__version__)"
    out = _run([venv.bin / "python", "-c", code], tmp_path, RUN_TIMEOUT).stdout.split()
    assert Path(out[0]).is_relative_to(venv.bin.parent)
    assert out[1] == __version__


def test_core_install_has_only_the_core_dependencies(venv: Venv, tmp_path: Path) -> None:
    if venv.extras:
        pytest.skip("with all extras")
    code = (
        "import importlib.util as u\n"
        "print(sorted(m for m in ('pandas', 'matplotlib', 'pynvml', 'numpy', 'pytest')"
        " if u.find_spec(m)))"
    )
    assert _run([venv.bin / "python", "-c", code], tmp_path, RUN_TIMEOUT).stdout.strip() == "[]"


def test_console_script_and_module_help(venv: Venv, tmp_path: Path) -> None:
    script = _run([venv.bin / "onnxrt-monitoring", "--help"], tmp_path, RUN_TIMEOUT).stdout
    module = _run(
        [venv.bin / "python", "-m", "onnxrt_backend_dev.monitoring", "--help"],
        tmp_path,
        RUN_TIMEOUT,
    ).stdout
    assert script.startswith("usage:") and module.startswith("usage:")
    version = _run([venv.bin / "onnxrt-monitoring", "--version"], tmp_path, RUN_TIMEOUT).stdout
    assert __version__ in version


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_reference_example_runs(venv: Venv, tmp_path: Path, name: str) -> None:
    code, expected = EXAMPLES[name]
    script = tmp_path / f"{name}.py"
    script.write_text(code, encoding="utf-8")
    out = _run([venv.bin / "python", script], tmp_path, RUN_TIMEOUT).stdout
    for word in expected:
        assert word in out, (name, word, out)


def test_all_extras_are_usable(venv: Venv, tmp_path: Path) -> None:
    if not venv.extras:
        pytest.skip("core only")
    script = tmp_path / "extras.py"
    script.write_text(EXTRAS_EXAMPLE, encoding="utf-8")
    assert "extras ok" in _run([venv.bin / "python", script], tmp_path, RUN_TIMEOUT).stdout
    assert (tmp_path / "check.png").stat().st_size > 0


def test_demo_runs_with_all_extras(venv: Venv, tmp_path: Path) -> None:
    """What the README's first command does, from the wheel."""
    if not venv.extras:
        pytest.skip("the README installs '.[all]'")
    out_dir = tmp_path / "demo"
    cmd: list[str | Path] = [venv.bin / "python", "-m", "onnxrt_backend_dev.monitoring"]
    cmd += ["demo", "--out", out_dir]
    _run(cmd, tmp_path, RUN_TIMEOUT)
    written = sorted(p.suffix for p in out_dir.iterdir())
    for suffix in (".png", ".html", ".json"):
        assert suffix in written, (suffix, written)
