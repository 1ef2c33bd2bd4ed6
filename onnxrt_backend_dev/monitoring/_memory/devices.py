"""Device probes (GPUs) read in the observer's loop, on its clock: opened before the
program starts (a 10 ms program still gets its device peak), read every few samples,
each channel a bounded series and its peak.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

MAX_POINTS = 20_000


class Channel:
    """One series of a device probe.

    :param name: ``probe:channel`` (``nvml:gpu0``)
    :param source: where its figures come from
    """

    def __init__(self, name: str, source: str, role: str = "", uuid: str | None = None) -> None:
        self.name = name
        self.source = source
        self.role = role
        self.uuid = uuid
        self.times: list[float] = []
        self.values: list[float] = []
        self.peak = 0.0
        self.begin: float | None = None
        self.end = 0.0
        self._stride = 1
        self._skip = 0

    def add(self, t: float, value: float) -> None:
        """Adds a reading (the peak is exact over the readings, the series bounded)."""
        if self.begin is None:
            self.begin = value
        self.end = value
        self.peak = max(self.peak, value)
        if self._skip:
            self._skip -= 1
            return
        self._skip = self._stride - 1
        self.times.append(t)
        self.values.append(value)
        if len(self.times) >= MAX_POINTS:
            self.times, self.values = self.times[::2], self.values[::2]
            self._stride *= 2


class DeviceSampler:
    """The device probes of a run, by registry name.

    :param names: the probes (``["nvml"]``)
    :param every: samples between two readings
    :raises Exception: a probe cannot open (its message says why)
    """

    def __init__(self, names: Sequence[str], every: int = 2) -> None:
        from .registry import get_spec, open_probe

        # The pids whose own usage is wanted (the program and its descendants): set by
        # the observer once the program started; none before.
        self.pid_source: Callable[[], set[int]] = set

        def pids() -> set[int]:
            return self.pid_source()

        self.every = max(int(every), 1)
        self.probes: list[Any] = []
        self.channels: list[list[Channel]] = []
        self.errors: list[str] = []
        self._n = 0
        try:
            for name in names:
                if get_spec(name).inprocess:  # read inside the program: not from here
                    continue
                probe = open_probe(get_spec(name).to_arg(), pids)
                self.probes.append(probe)
                self.channels.append(
                    [
                        Channel(f"{name}:{c.name}", str(probe.source), c.role, c.uuid)
                        for c in probe.channels
                    ]
                )
        except BaseException:
            self.close()
            raise

    def sample(self, t: float, force: bool = False) -> None:
        """Reads every probe at time ``t``, every ``every`` calls (now with ``force``: the
        first and the last sample)."""
        self._n += 1
        if not force and self._n % self.every:
            return
        for probe, channels in zip(self.probes, self.channels, strict=True):
            try:
                values = probe.read()
            except Exception as e:  # a device lost mid-run: say it once, keep the rest
                if str(e) not in self.errors:
                    self.errors.append(f"{probe.name}: {e}")
                continue
            for channel, value in zip(channels, values, strict=False):
                if value is not None:
                    channel.add(t, float(value))

    def curves(self) -> list[tuple[str, list[float], list[float], str]]:
        """Every channel's series (times on the observer's clock)."""
        return [
            (c.name, list(c.times), list(c.values), c.source)
            for channels in self.channels
            for c in channels
        ]

    def devices(self) -> list[tuple[str, float, float, float, dict[str, Any]]]:
        """``(name, peak, begin, end, extras)`` of every channel read at least once
        (``extras``: its ``role`` and device ``uuid``, where the probe says)."""
        return [
            (c.name, c.peak, c.begin, c.end, {"role": c.role, "uuid": c.uuid})
            for channels in self.channels
            for c in channels
            if c.begin is not None
        ]

    def close(self) -> None:
        """Releases the devices (never raises)."""
        for probe in self.probes:
            with contextlib.suppress(Exception):
                probe.close()
        self.probes = []
