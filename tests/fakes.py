"""Fakes shared by the tests: a clock for the timing tests (the statement under test
advances it, so every figure is exact and no test depends on the speed of the machine);
for the memory spy a probe, a fake procfs, a fake NVML module and a second device probe
(what adding, say, AMD through amdsmi would look like).

The fake NVML module is this very module: the spy process imports it by name
(``nvml_module="fakes"``) and reads its behaviour from the environment variable
``FAKE_NVML`` (``ok``, or the name of an NVML error to raise at ``nvmlInit``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from onnxrt_backend_dev.monitoring import _errors
from onnxrt_backend_dev.monitoring._errors import SpyError
from onnxrt_backend_dev.monitoring._memory.probes import Probe, TargetGone
from onnxrt_backend_dev.monitoring._memory.registry import Channel, DeviceProbe

GIB = 2**30


class FakeClock:
    """A clock that only moves when told: the statement under test advances it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def costing(self, seconds: float) -> Callable[[], None]:
        """A statement that takes ``seconds`` on this clock."""
        return lambda: self.advance(seconds)

    def costing_each(self, costs: Iterator[float]) -> Callable[[], None]:
        """A statement whose successive executions take ``next(costs)`` seconds."""
        return lambda: self.advance(next(costs))


class FakeProbe(Probe):
    """A probe replaying ``(current, peak)`` readings, then the target is gone."""

    def __init__(
        self,
        readings: Iterable[tuple[float, float]],
        source: str = "hwm",
        previous_peak: float | None = 123.0,
    ) -> None:
        self.readings = list(readings)
        self.source = source
        self.previous_peak = previous_peak
        self.closed = False

    def read(self) -> tuple[float, float]:
        if not self.readings:
            raise TargetGone(0)
        return self.readings.pop(0)

    def close(self) -> None:
        self.closed = True


def write_status(
    root: Path, pid: int, rss_kb: int | None, hwm_kb: int | None, ppid: int = 1
) -> None:
    """Writes a fake ``/proc/PID/{status,stat,clear_refs}`` under ``root``."""
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    lines = [f"Name:\tfake\nPid:\t{pid}\n"]
    if hwm_kb is not None:
        lines.append(f"VmHWM:\t{hwm_kb:8d} kB\n")
    if rss_kb is not None:
        lines.append(f"VmRSS:\t{rss_kb:8d} kB\n")
    (d / "status").write_text("".join(lines))
    (d / "stat").write_text(f"{pid} (a (weird) name) S {ppid} 0 0\n")
    (d / "clear_refs").touch()


# --- the fake NVML module -------------------------------------------------------------


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_DriverNotLoaded(NVMLError):
    pass


class NVMLError_NoPermission(NVMLError):
    pass


@dataclass
class _MemoryInfo:
    total: int
    used: int
    free: int


@dataclass
class _Process:
    pid: int
    usedGpuMemory: int | None


def _mode() -> str:
    return os.environ.get("FAKE_NVML", "ok")


def nvmlInit() -> None:
    errors = {
        "LibraryNotFound": NVMLError_LibraryNotFound,
        "DriverNotLoaded": NVMLError_DriverNotLoaded,
        "NoPermission": NVMLError_NoPermission,
    }
    if _mode() in errors:
        raise errors[_mode()]("fake NVML failure")


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return 0 if _mode() == "nogpu" else 2


def nvmlDeviceGetHandleByIndex(i: int) -> int:
    return i


def nvmlDeviceGetUUID(handle: int) -> str:
    # The UUIDs of fake_torch_cuda's GPUs, as NVML spells them.
    return f"GPU-00000000-0000-0000-0000-00000000000{handle}"


def nvmlDeviceGetMemoryInfo(handle: int) -> _MemoryInfo:
    used = (handle + 1) * GIB
    return _MemoryInfo(total=80 * GIB, used=used, free=80 * GIB - used)


def _targets() -> list[int]:
    """``FAKE_NVML_PID``: a pid, or ``children-of:PID`` for every child of PID (the
    command a ``spy`` run in the test's process started: its pid is not known before)."""
    value = os.environ.get("FAKE_NVML_PID", "0")
    if value.startswith("children-of:"):
        from onnxrt_backend_dev.monitoring._memory.probes import children_map

        return children_map().get(int(value.partition(":")[2]), [])
    return [int(value)]


def nvmlDeviceGetComputeRunningProcesses(handle: int) -> list[_Process]:
    # The spied process uses 256 MiB on GPU 0 and nothing on GPU 1; another one is there.
    if handle == 0:
        return [*(_Process(t, 256 * 2**20) for t in _targets()), _Process(999999, GIB)]
    return [_Process(999999, GIB)]


# --- a second device probe ------------------------------------------------------------


class FakeAmdProbe(DeviceProbe):
    """Two devices of 1 and 3 GiB in use, one figure each, under the group 'amd_gpus'.

    ``FAKE_AMD=fail`` makes it fail to open, as a missing driver would.
    """

    source = "fake-amd"

    def __init__(self, lib: object, pids: object) -> None:
        if os.environ.get("FAKE_AMD") == "fail":
            raise RuntimeError("fake AMD driver not loaded")
        self.lib = lib
        self.channels = [Channel(f"amd{i}", "amd_gpus", i) for i in range(2)]
        self.closed = False

    def read(self) -> list[float | None]:
        return [float(GIB), 3.0 * GIB]

    def close(self) -> None:
        self.closed = True


class NotAProbe:
    """A class the registry may name by mistake: the spy refuses it."""


# --- a probe failing with an error of the family ---------------------------------------


class FailingProbe(DeviceProbe):
    """Raises the error ``FAKE_PROBE_ERROR`` names (``open:BadValue``, ``read:TargetGone``,
    ``read:SubSpyError``...) when opened or at its first read: what crosses the spy's pipe.
    Its one channel reads NaN otherwise (the spy must skip it, not poison the peak)."""

    source = "failing"

    def __init__(self, lib: object, pids: object) -> None:
        self.when, _, self.error = os.environ.get("FAKE_PROBE_ERROR", "").partition(":")
        self.channels = [Channel("bad0", "bad_gpus", 0)]
        if self.when == "open":
            self._raise()

    def _raise(self) -> None:
        if self.error == "SubSpyError":
            raise SubSpyError("a vendor's own kind of spy error")
        raise getattr(_errors, self.error)(f"{self.error} from the probe")

    def read(self) -> list[float | None]:
        if self.when == "read":
            self._raise()
        return [float("nan")]

    def close(self) -> None:
        pass


class SubSpyError(SpyError):
    """A vendor's subclass of an error of the family: it arrives as its nearest ancestor."""
