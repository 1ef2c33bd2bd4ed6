"""torch's caching allocator, per CUDA device: the ``"torch"`` device probe.

Registered in :mod:`.registry` with ``inprocess=True``: torch keeps its counters in the
program's own memory, so a thread of the measured process reads them (:mod:`.inprocess`),
on the spy's clock. For each device ``d`` two channels:

- ``cuda{d}`` (group ``"torch"``): ``memory_allocated`` at each tick, and the exact peak
  from ``max_memory_allocated`` (the allocator's high-water mark): a spike between two
  ticks is never missed. The mark is reset (``reset_peak_memory_stats``) when the measure
  starts, so the peak is the block's, as ``torch.cuda.max_memory_allocated()`` read after
  the block by the user would be (that reset is the user's counter too: read it after
  the block, not across it);
- ``cuda{d}:reserved`` (group ``"torch_reserved"``): ``memory_reserved``, the caching
  allocator's blocks (what NVML sees of them), its peak from ``max_memory_reserved``.

Nothing here initializes CUDA (which would create a context of hundreds of MiB on a
device the program may not use): before the program initializes it the figures are 0
(nothing allocated), the reset and the devices' UUIDs wait until it did. The UUIDs join
these channels with NVML's of the same GPU: NVML's usage of this process less torch's
reserved memory is the CUDA context and the libraries' own memory, named as such.

The module is given as an object (``torch.cuda`` or a fake with the same functions).
"""

from __future__ import annotations

from .._errors import ProbeError
from .registry import Channel, DeviceProbe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

# memory_stats() keys: (current, peak) of the allocated and the reserved bytes.
_ALLOCATED = ("allocated_bytes.all.current", "allocated_bytes.all.peak")
_RESERVED = ("reserved_bytes.all.current", "reserved_bytes.all.peak")


def _unusable(e: BaseException) -> ProbeError:
    return ProbeError(f"probe 'torch': torch.cuda is unusable ({type(e).__name__}: {e})")


class TorchProbe(DeviceProbe):
    """Allocated and reserved bytes of torch's CUDA caching allocator, per device, with
    exact peaks (see the module).

    :param cuda: the ``torch.cuda`` module, or a fake
    :param pids: unused (the counters are this process's)
    """

    source = "torch"

    def __init__(self, cuda: Any, pids: Callable[[], set[int]]) -> None:
        self.cuda = cuda
        try:
            available = bool(cuda.is_available())
            count = int(cuda.device_count()) if available else 0
        except Exception as e:
            raise _unusable(e) from None
        if count < 1:
            raise ProbeError(
                "probe 'torch': torch sees no CUDA device (torch.cuda.is_available() is False)"
            )
        self.count = count
        self.channels = [Channel(f"cuda{d}", "torch", d, "allocated") for d in range(count)]
        self.channels += [
            Channel(f"cuda{d}:reserved", "torch_reserved", d, "reserved") for d in range(count)
        ]
        self._uuids_known = False
        # The allocator's marks at the previous read, per channel: a move dates a peak.
        self._marks = [0.0] * len(self.channels)

    @classmethod
    def ready(cls, cuda: Any) -> bool:
        """Tells if the program initialized CUDA (a probe opened for a program that
        imports torch waits for it: opening earlier would cost a CPU-only program the
        driver's start).

        :param cuda: the ``torch.cuda`` module
        """
        try:
            return bool(cuda.is_initialized())
        except Exception:
            return False

    def _stats(self, device: int) -> Mapping[str, Any]:
        stats = self.cuda.memory_stats(device)
        return stats if hasattr(stats, "get") else {}

    def read_peaks(self) -> list[tuple[float | None, float | None]]:
        """Allocated ``(now, peak)`` per device, then reserved ``(now, peak)`` per device;
        zeros before CUDA is initialized, None for a device whose counters cannot be read."""
        if not self.ready(self.cuda):
            return [(0.0, None)] * (2 * self.count)
        readings: list[tuple[float | None, float | None]] = [(None, None)] * (2 * self.count)
        for device in range(self.count):
            try:
                stats = self._stats(device)
                figures = [float(stats.get(key, 0)) for key in (*_ALLOCATED, *_RESERVED)]
            except Exception:  # a device lost, a counter of another shape: unknown at this tick
                continue
            readings[device] = self._interval(device, *figures[:2])
            readings[self.count + device] = self._interval(self.count + device, *figures[2:])
        if not self._uuids_known:
            self._learn_uuids()
        return readings

    def _interval(self, channel: int, current: float, mark: float) -> tuple[float, float | None]:
        """``(current, peak of the interval since the previous read)``: the mark when it
        moved (it rose, or a reset of someone else's restarted it during the interval),
        None when it did not (the interval's peak is then unknown: sampled)."""
        if mark == self._marks[channel]:
            return current, None
        self._marks[channel] = mark
        return current, max(current, mark)

    def read(self) -> list[float | None]:
        """The allocated then the reserved bytes per device."""
        return [value for value, _ in self.read_peaks()]

    def _learn_uuids(self) -> None:
        """The devices' UUIDs, once CUDA is initialized (asking earlier would initialize it)."""
        self._uuids_known = True
        for device in range(self.count):
            try:
                uuid = self.cuda.get_device_properties(device).uuid
            except Exception:
                continue
            for channel in self.channels[device :: self.count]:
                channel.uuid = None if uuid is None else str(uuid)

    def reset_peaks(self) -> None:
        """Resets the allocator's high-water marks of every device (once CUDA is
        initialized; before, they are 0 anyway)."""
        if not self.ready(self.cuda):
            return
        for device in range(self.count):
            try:
                self.cuda.reset_peak_memory_stats(device)
            except Exception:
                continue  # that device's peak then counts from CUDA's start
            self._marks[device] = self._marks[self.count + device] = -1.0  # read anew

    def close(self) -> None:
        """Nothing to release: the counters are torch's."""
