"""Device probes (GPUs) read in the observer's loop, on its clock: opened before the
program starts (a 10 ms program still gets its device peak), read every few samples,
each channel a bounded series and its peak.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .worker import DeviceSet

MAX_POINTS = 20_000


class DeviceSampler(DeviceSet):
    """The device probes of a run, by registry name.

    :param names: the probes (``["nvml"]``)
    :param every: samples between two readings
    :raises Exception: a probe cannot open (its message says why)
    """

    def __init__(self, names: Sequence[str], every: int = 2) -> None:
        from .registry import get_spec, split_probes

        super().__init__(MAX_POINTS)
        # The pids whose own usage is wanted (the program and its descendants): set by
        # the observer once the program started; none before.
        self.pid_source: Callable[[], set[int]] = set
        self.every = max(int(every), 1)
        self.errors: list[str] = []
        self._n = 0
        # The probes read inside the program are not read from here.
        args = [get_spec(name).to_arg() for name in split_probes(names)[0]]
        self.open_all(args, lambda: self.pid_source())

    def sample(self, t: float, force: bool = False) -> None:
        """Reads every probe at time ``t``, every ``every`` calls (now with ``force``: the
        first and the last sample); a device lost mid-run is said once, the rest kept."""
        self._n += 1
        if force or not self._n % self.every:
            self.read(t, self.errors)

    def curves(self) -> list[tuple[str, list[float], list[float], str]]:
        """Every channel's series (times on the observer's clock)."""
        from .inprocess import device_facts

        return device_facts(self.all())[0]

    def devices(self) -> list[tuple[str, float, float, float, dict[str, Any]]]:
        """``(name, peak, begin, end, extras)`` of every channel read at least once
        (see :func:`.inprocess.device_facts`)."""
        from .inprocess import device_facts

        return device_facts([mon for mon in self.all() if mon.n_measures])[1]
