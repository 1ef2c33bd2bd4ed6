"""A fake ``pynvml`` for a dry run of ``benchmarks/gpu_check.py`` beside the fake driver
of ``fake_libcuda.c``: one GPU whose per-process usage is what each process's fake driver
published in ``FAKE_CUDA_DIR`` (its context and its allocations), and whose device-wide
usage adds 500 MiB of another process. The test copies it as ``pynvml.py``."""

from __future__ import annotations

import os
from dataclasses import dataclass

MIB = 2**20
OTHERS = 500 * MIB


class NVMLError(Exception):
    pass


@dataclass
class _Memory:
    total: int
    used: int
    free: int


@dataclass
class _Process:
    pid: int
    usedGpuMemory: int | None


def _usage() -> dict[int, int]:
    folder = os.environ.get("FAKE_CUDA_DIR", "")
    usage: dict[int, int] = {}
    for name in os.listdir(folder) if folder else ():
        if not name.isdigit() or not os.path.exists(f"/proc/{name}"):
            continue
        try:
            with open(os.path.join(folder, name), encoding="ascii") as f:
                used = int(f.read().strip() or 0)
        except (OSError, ValueError):
            continue  # being written
        if used:
            usage[int(name)] = used
    return usage


def nvmlInit() -> None:
    pass


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return 1


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    if index != 0:
        raise NVMLError("Invalid Argument")
    return 0


def nvmlDeviceGetName(handle: int) -> str:
    return "Fake GPU"


def nvmlSystemGetDriverVersion() -> str:
    return "000.00 (fake)"


def nvmlDeviceGetUUID(handle: int) -> str:
    return "GPU-00000000-0000-0000-0000-000000000000"


def nvmlDeviceGetMemoryInfo(handle: int) -> _Memory:
    used = OTHERS + sum(_usage().values())
    return _Memory(total=80 * 2**30, used=used, free=80 * 2**30 - used)


def nvmlDeviceGetComputeRunningProcesses(handle: int) -> list[_Process]:
    return [_Process(pid, used) for pid, used in _usage().items()] + [_Process(1, OTHERS)]
