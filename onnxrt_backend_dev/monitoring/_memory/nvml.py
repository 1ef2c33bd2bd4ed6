"""GPU memory through NVML (nvidia-ml-py's ``pynvml``), the ``"nvml"`` device probe.

Registered in :mod:`.registry`; ``cuda=True`` asks for it. The NVML module is given as
an object so that tests can pass a fake.
"""

from __future__ import annotations

from .._errors import ProbeError
from .registry import Channel, DeviceProbe

TYPE_CHECKING = False  # typing is not imported at run time: the spy process stays small
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


# NVML exception class name (nvidia-ml-py) -> the cause in words.
_NVML_CAUSES: dict[str, str] = {
    "LibraryNotFound": "the NVML library (libnvidia-ml.so) was not found; is the NVIDIA driver "
    "installed?",
    "DriverNotLoaded": "the NVIDIA driver is not loaded",
    "NoPermission": "no permission to query the GPUs through NVML",
    "InsufficientPower": "a GPU reports insufficient power",
    "Uninitialized": "NVML could not be initialized",
}


def nvml_cause(exc: BaseException) -> str:
    """The cause of an NVML failure (the exception it raised) in words."""
    name = type(exc).__name__
    for key, cause in _NVML_CAUSES.items():
        if key in name:
            return cause
    return f"{name}: {exc}"


class NvmlProbe(DeviceProbe):
    """GPU memory through NVML: device-wide used memory per GPU and, where the driver
    reports it, the memory used by the spied processes on each GPU.

    :param nvml: the NVML module (``pynvml`` from nvidia-ml-py) or a fake
    :param pids: returns the pids whose own usage is wanted
    """

    source = "nvml"

    def __init__(self, nvml: Any, pids: Callable[[], set[int]]) -> None:
        self.nvml = nvml
        self.pids = pids
        try:
            nvml.nvmlInit()
        except Exception as e:
            raise ProbeError(f"cuda=True but NVML is unusable: {nvml_cause(e)}") from None
        try:
            count = int(nvml.nvmlDeviceGetCount())
            self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as e:
            self.close()
            raise ProbeError(f"cuda=True but NVML is unusable: {nvml_cause(e)}") from None
        if not self.handles:
            self.close()
            raise ProbeError("cuda=True but NVML sees no GPU")
        uuids = [self._uuid(h) for h in self.handles]
        self.channels = [Channel(f"gpu{i}", "gpus", i, "device", u) for i, u in enumerate(uuids)]
        self.channels += [
            Channel(f"gpu{i}:process", "gpus_process", i, "process", u) for i, u in enumerate(uuids)
        ]

    def _uuid(self, handle: Any) -> str | None:
        """The GPU's UUID (``GPU-0b42...``), None if the driver does not say."""
        try:
            uuid = self.nvml.nvmlDeviceGetUUID(handle)
        except Exception:
            return None
        if isinstance(uuid, bytes):  # older nvidia-ml-py
            uuid = uuid.decode("ascii", "replace")
        return uuid if isinstance(uuid, str) else None

    def _process_usage(self, handle: Any, pids: set[int]) -> float | None:
        try:
            procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except Exception:
            return None  # not supported by this driver or GPU
        used = [p.usedGpuMemory for p in procs if p.pid in pids]
        if any(u is None for u in used):
            return None  # the driver does not report it (e.g. under MIG, or without rights)
        return float(sum(used))

    def read(self) -> list[float | None]:
        """Returns device-wide used bytes per GPU, then the processes' bytes per GPU."""
        device: list[float | None] = []
        for handle in self.handles:
            try:
                device.append(float(self.nvml.nvmlDeviceGetMemoryInfo(handle).used))
            except Exception:
                device.append(None)
        pids = self.pids()
        return device + [self._process_usage(h, pids) for h in self.handles]

    def close(self) -> None:
        """Shuts NVML down."""
        try:  # noqa: SIM105
            self.nvml.nvmlShutdown()
        except Exception:
            pass
