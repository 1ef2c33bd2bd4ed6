"""Tests for the NVML probe (``_memory/nvml.py``), through a fake NVML."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import TESTS as _TESTS

from onnxrt_backend_dev.monitoring._memory import nvml as _nvml

MIB = 2**20
TESTS = _TESTS
REAL_TIMEOUT = 30  # seconds for any child process of these tests


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(REAL_TIMEOUT)
    return proc.pid


# --- NVML, through a fake -------------------------------------------------------------


def test_nvml_probe_reads_devices_and_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import fakes

    monkeypatch.setenv("FAKE_NVML", "ok")
    monkeypatch.setenv("FAKE_NVML_PID", "42")
    probe = _nvml.NvmlProbe(fakes, lambda: {42})
    assert [c.name for c in probe.channels] == ["gpu0", "gpu1", "gpu0:process", "gpu1:process"]
    assert [(c.group, c.device) for c in probe.channels[1:3]] == [("gpus", 1), ("gpus_process", 0)]
    assert probe.read() == [2**30, 2 * 2**30, 256 * MIB, 0.0]
    probe.close()


@pytest.mark.parametrize(
    ("mode", "cause"),
    [
        ("LibraryNotFound", "NVML library"),
        ("DriverNotLoaded", "driver is not loaded"),
        ("NoPermission", "no permission"),
        ("nogpu", "no GPU"),
    ],
)
def test_nvml_failures_name_their_cause(
    monkeypatch: pytest.MonkeyPatch, mode: str, cause: str
) -> None:
    import fakes

    monkeypatch.setenv("FAKE_NVML", mode)
    with pytest.raises(RuntimeError, match=cause):
        _nvml.NvmlProbe(fakes, set)
