"""A fake ``torch.cuda``: a caching allocator on two GPUs whose counters the tests drive.

The ``torch`` probe reads it as it reads ``torch.cuda`` (the tests name it through the
registry, ``lib="fake_torch_cuda"``, as the fake NVML is named ``fakes``). It keeps what
torch's allocator keeps: allocated and reserved bytes per device and their high-water
marks (``max_memory_allocated``), reset by ``reset_peak_memory_stats``; nothing is
counted before CUDA is initialized. :func:`spike` allocates and frees at once: a peak no
sampling can see, which only the high-water mark keeps.

The GPUs' UUIDs are those of the fake NVML of ``fakes.py`` (torch spells them without
NVML's ``GPU-`` prefix), so that the two probes can be joined.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

MIB = 2**20
BLOCK = 2 * MIB  # reserved memory grows by blocks, as the caching allocator's segments


@dataclass
class _Device:
    allocated: int = 0
    reserved: int = 0
    peak_allocated: int = 0
    peak_reserved: int = 0


@dataclass
class _Properties:
    name: str
    uuid: str
    total_memory: int


_lock = threading.Lock()
_devices: list[_Device] = [_Device(), _Device()]
_initialized = True
_available = True
calls: list[str] = []  # the functions called that would create a context or reset marks


def uuid_of(device: int) -> str:
    """The device's UUID as torch prints it (NVML prefixes it with ``GPU-``)."""
    return f"00000000-0000-0000-0000-00000000000{device}"


def reset(devices: int = 2, initialized: bool = True, available: bool = True) -> None:
    """Starts afresh: ``devices`` GPUs, nothing allocated."""
    global _devices, _initialized, _available
    with _lock:
        _devices = [_Device() for _ in range(devices)]
        _initialized = initialized
        _available = available
        calls.clear()


def init() -> None:
    """What the program's first CUDA call does."""
    global _initialized
    _initialized = True


def alloc(nbytes: int, device: int = 0) -> None:
    """Allocates ``nbytes`` on ``device`` (reserving blocks as needed)."""
    with _lock:
        d = _devices[device]
        d.allocated += nbytes
        d.peak_allocated = max(d.peak_allocated, d.allocated)
        while d.reserved < d.allocated:
            d.reserved += BLOCK
        d.peak_reserved = max(d.peak_reserved, d.reserved)


def free(nbytes: int, device: int = 0) -> None:
    """Frees ``nbytes`` (the reserved blocks stay cached, as torch's)."""
    with _lock:
        _devices[device].allocated -= nbytes


def empty_cache() -> None:
    """Releases the cached blocks nothing uses."""
    with _lock:
        for d in _devices:
            d.reserved = -(-d.allocated // BLOCK) * BLOCK


def spike(nbytes: int, device: int = 0) -> None:
    """Allocates and frees at once: between two ticks of any sampler."""
    alloc(nbytes, device)
    free(nbytes, device)


# --- the functions of torch.cuda the probe calls ------------------------------------------


def is_available() -> bool:
    return _available


def is_initialized() -> bool:
    return _initialized


def device_count() -> int:
    return len(_devices) if _available else 0


def _check(device: Any) -> _Device:
    if not isinstance(device, int) or not 0 <= device < len(_devices):
        raise RuntimeError(f"Invalid device argument {device!r}")
    return _devices[device]


def memory_stats(device: int = 0) -> dict[str, int]:
    if not _initialized:
        return {}
    with _lock:
        d = _check(device)
        return {
            "allocated_bytes.all.current": d.allocated,
            "allocated_bytes.all.peak": d.peak_allocated,
            "reserved_bytes.all.current": d.reserved,
            "reserved_bytes.all.peak": d.peak_reserved,
            "num_alloc_retries": 0,
        }


def memory_allocated(device: int = 0) -> int:
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: int = 0) -> int:
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: int = 0) -> int:
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: int = 0) -> int:
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device: int = 0) -> None:
    calls.append(f"reset_peak_memory_stats({device})")
    if not _initialized:
        raise RuntimeError("the caching allocator is not initialized")  # as torch's assert
    with _lock:
        d = _check(device)
        d.peak_allocated = d.allocated
        d.peak_reserved = d.reserved


def get_device_properties(device: int) -> _Properties:
    calls.append(f"get_device_properties({device})")
    if not _initialized:  # torch would initialize CUDA here: the probe must not ask then
        raise AssertionError("get_device_properties before CUDA was initialized")
    return _Properties(f"Fake GPU {device}", uuid_of(device), 80 * 2**30)
