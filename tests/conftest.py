"""Shared fixtures. This folder is put on ``sys.path`` by pytest (it holds this file and no
``__init__.py``), so every test imports the shared modules by name: ``helpers`` (CLI runs,
subprocesses, headless chromium, the data folder) and ``fakes`` (clock, probes, procfs,
NVML); the spy process imports ``fakes`` by name too, as its fake NVML module."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from fakes import FakeClock

# The observer's layout checks are kept between runs in the user's cache folder: the
# suite keeps its own (every command it starts inherits this; removed at the end), the
# user's is not touched.
if "ONNXRT_MONITORING_CACHE_DIR" not in os.environ:
    _CACHE_DIR = tempfile.mkdtemp(prefix="onnxrt-monitoring-cache-")
    os.environ["ONNXRT_MONITORING_CACHE_DIR"] = _CACHE_DIR
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock at 0 s that only moves when the statement under test advances it."""
    return FakeClock()


@pytest.fixture
def fake_torch() -> Iterator[Any]:
    """The ``torch`` probe reading the fake ``torch.cuda`` of ``fake_torch_cuda`` (two
    GPUs, CUDA initialized, nothing allocated), registered by name for the test only:
    every entry point that chooses probes by name then reads it."""
    import fake_torch_cuda

    from onnxrt_backend_dev.monitoring._memory import registry

    fake_torch_cuda.reset()
    real = registry.get_spec("torch")
    registry.register(
        registry.ProbeSpec(
            "torch", real.target, "fake_torch_cuda", real.package, real.extra, inprocess=True
        )
    )
    try:
        yield fake_torch_cuda
    finally:
        registry.register(real)
        fake_torch_cuda.reset()


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The ``nvml`` probe reading the fake NVML of ``fakes`` (two GPUs; the spied process,
    or any child of this one, uses 256 MiB on GPU 0), registered by name for the test
    only: ``cuda=True``, ``--cuda`` and ``--probe nvml`` then read it everywhere."""
    import os

    from onnxrt_backend_dev.monitoring._memory import registry

    monkeypatch.setenv("FAKE_NVML", "ok")
    monkeypatch.setenv("FAKE_NVML_PID", str(os.getpid()))
    real = registry.get_spec("nvml")
    registry.register(registry.ProbeSpec("nvml", real.target, "fakes", real.package, real.extra))
    try:
        yield "nvml"
    finally:
        registry.register(real)


def pytest_configure(config: Any) -> None:
    """Starts the session from the default dispositions of the terminal's signals.

    The signal tests send SIGINT, SIGHUP and SIGQUIT to the commands they start, and the
    commands rightly keep a signal ignored that they inherited ignored (``nohup``). A
    suite launched in the background (``nohup``, ``cmd &`` in a script) inherits those
    three ignored, and an ignored signal stays ignored across ``exec``: every such test
    then failed (12 of them, in a fresh-clone run launched with ``setsid nohup``).
    """
    defaults: dict[str, Any] = {"SIGINT": signal.default_int_handler}
    defaults.update(SIGHUP=signal.SIG_DFL, SIGQUIT=signal.SIG_DFL)
    for name, handler in defaults.items():
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is signal.SIG_IGN:
            signal.signal(signum, handler)
