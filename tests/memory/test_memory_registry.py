"""Tests for the device probe registry and the spy's option table (``_memory/registry.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from helpers import TESTS as _TESTS

from onnxrt_backend_dev.monitoring._memory import registry as _registry
from onnxrt_backend_dev.monitoring._memory import worker as _spy_worker
from onnxrt_backend_dev.monitoring.memory_peak import (
    register_probe,
    start_spying_on,
)

MIB = 2**20
TESTS = _TESTS
REAL_TIMEOUT = 30  # seconds for any child process of these tests


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(REAL_TIMEOUT)
    return proc.pid


# --- the device probe registry --------------------------------------------------------


@pytest.fixture
def fake_amd() -> Iterator[_registry.ProbeSpec]:
    """The second device probe, registered (through the public face) for the test only."""
    register_probe("fakeamd", "fakes:FakeAmdProbe", package="fake-amdsmi", extra="amd")
    spec = _registry.get_spec("fakeamd")
    try:
        yield spec
    finally:
        _registry.unregister(spec.name)


def test_registry_lists_nvml_and_refuses_unknown_names() -> None:
    assert _registry.get_spec("nvml").lib == "pynvml"
    with pytest.raises(
        ValueError, match=r"probes: unknown probe 'rocm', choose from \['nvml', 'torch'\]"
    ):
        start_spying_on(probes=("rocm",))
    with pytest.raises(TypeError, match="probes must be a sequence of names"):
        start_spying_on(probes="nvml")
    with pytest.raises(ValueError, match="probe target must be 'module:Class'"):
        _registry.ProbeSpec("x", "no_colon")


def test_a_second_device_probe_is_opened_from_its_registry_entry(
    fake_amd: _registry.ProbeSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML", "ok")
    # GIVEN the spy's options asking for NVML and the fake AMD probe, as the parent writes them
    probes = [_registry.get_spec("nvml").to_arg("fakes"), fake_amd.to_arg()]
    opts = _registry.parse_args(
        _registry.to_argv({"pid": os.getpid(), "delay": 0.01, "parent": 1, "probes": probes})
    )
    loop = _spy_worker.build_loop(opts)
    opened = loop.devices.probes
    try:
        # THEN both are open behind the one interface, their monitors named by probe and device
        assert all(isinstance(p, _registry.DeviceProbe) for p in opened)
        assert [m.qualname for m in loop.monitors] == [
            "cpu", "nvml:gpu0", "nvml:gpu1", "nvml:gpu0:process", "nvml:gpu1:process",
            "fakeamd:amd0", "fakeamd:amd1",
        ]  # fmt: skip
        assert loop.tick()
        amd = loop.monitors[-1]
        assert (amd.max_peak, amd.peak_source, amd.device, amd.group) == (
            3.0 * 2**30, "fake-amd", 1, "amd_gpus"
        )  # fmt: skip
    finally:
        loop.close()
    assert all(getattr(p, "closed", True) for p in opened)
    # AND a class that does not implement the interface is refused by name
    with pytest.raises(RuntimeError, match="fakes:NotAProbe is not a DeviceProbe"):
        _registry.open_probe("bad=fakes:NotAProbe,", set)


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_second_device_probe_end_to_end_through_the_spy(
    fake_amd: _registry.ProbeSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the fake AMD probe registered beside NVML (faked too)
    monkeypatch.setenv("FAKE_NVML", "ok")
    monkeypatch.setenv("FAKE_NVML_PID", str(os.getpid()))
    # WHEN a real spy measures both
    stat = start_spying_on(cuda=True, probe_libs={"nvml": "fakes"}, probes=("fakeamd",)).stop()
    # THEN the reference's keys are unchanged, the new probe's monitors sit beside them
    assert [m.name for m in stat["gpus"]] == ["gpu0", "gpu1"]
    assert [m.max_peak for m in stat["gpus_process"]] == [256 * MIB, 0.0]
    assert [m.max_peak for m in stat["amd_gpus"]] == [2**30, 3 * 2**30]
    assert list(stat["devices"]) == [
        "nvml:gpu0", "nvml:gpu1", "nvml:gpu0:process", "nvml:gpu1:process",
        "fakeamd:amd0", "fakeamd:amd1",
    ]  # fmt: skip
    assert "amd1: peak 3.00 GiB" in str(stat)
    # AND its failure to open is the spy's error, as NVML's is
    monkeypatch.setenv("FAKE_AMD", "fail")
    with pytest.raises(RuntimeError, match="fake AMD driver not loaded"):
        start_spying_on(probes=("fakeamd",))


def test_worker_arguments_are_validated() -> None:
    assert _registry.parse_args(["--pid", "3", "--delay", "0.5", "--parent", "1"])["pid"] == 3
    with pytest.raises(ValueError, match="missing spy argument --parent"):
        _registry.parse_args(["--pid", "3", "--delay", "0.5"])
    with pytest.raises(ValueError, match="unexpected spy argument '--bogus'"):
        _registry.parse_args(["--bogus"])
    with pytest.raises(ValueError, match="unexpected spy argument '--pid'"):
        _registry.parse_args(["--pid"])


def test_worker_argv_is_built_and_parsed_from_one_table() -> None:
    # GIVEN every option of the table set to a non-default value
    opts = {
        "pid": 12,
        "delay": 0.1 + 0.2,  # repr keeps every digit
        "parent": 7,
        "max_points": 99,
        "children": True,
        "no_reset": True,
        "stacks": True,
        "alloc": "/x/_shim.so",
        "probes": ["nvml=a.b:C,pynvml", "fake=x:Y,"],
    }
    # WHEN written by the parent then read by the spy THEN nothing is lost
    argv = _registry.to_argv(opts)
    assert _registry.parse_args(argv) == opts
    assert [o for o in argv if o.startswith("--")] == [o for o, *_ in _registry.WORKER_OPTIONS] + [
        "--probe"
    ]
    # AND the defaults round-trip too, and a key outside the table is refused
    minimal = {"pid": 1, "delay": 0.5, "parent": 2}
    assert _registry.parse_args(_registry.to_argv(minimal)) == {
        **minimal, "max_points": 65536, "children": False, "no_reset": False, "stacks": False,
        "alloc": "", "probes": []
    }  # fmt: skip
    with pytest.raises(ValueError, match="unexpected spy options \\['bogus'\\]"):
        _registry.to_argv({**minimal, "bogus": 1})


def test_the_observer_reads_its_devices_every_few_samples_and_says_a_lost_one_once(
    fake_nvml: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxrt_backend_dev.monitoring._memory.devices import DeviceSampler

    # GIVEN NVML, a probe failing at each read, and torch (read inside the program)
    monkeypatch.setenv("FAKE_PROBE_ERROR", "read:BadValue")
    _registry.register(_registry.ProbeSpec("failing", "fakes:FailingProbe"))
    try:
        sampler = DeviceSampler([fake_nvml, "failing", "torch"], every=2)
    finally:
        _registry.unregister("failing")
    # WHEN the observer samples five times, the first one forced
    try:
        for i in range(5):
            sampler.sample(float(i), force=i == 0)
    finally:
        sampler.close()
    # THEN NVML is read at the first sample then every second one, torch not from here
    curves = {name: times for name, times, _, _ in sampler.curves()}
    assert curves == {
        "nvml:gpu0": [0.0, 1.0, 3.0], "nvml:gpu1": [0.0, 1.0, 3.0],
        "nvml:gpu0:process": [0.0, 1.0, 3.0], "nvml:gpu1:process": [0.0, 1.0, 3.0],
        "failing:bad0": [],
    }  # fmt: skip
    assert [d[0] for d in sampler.devices()] == [
        "nvml:gpu0", "nvml:gpu1", "nvml:gpu0:process", "nvml:gpu1:process"
    ]  # fmt: skip
    # AND the failing probe is said once, not at every reading
    assert sampler.errors == ["failing: BadValue from the probe"]
