"""Observing a process already running, by its pid: until it ends, a duration passes or
the command is interrupted (Ctrl-C, SIGTERM, SIGHUP), then what was seen. Nothing is
stopped or changed in the process: it goes on when the observer leaves.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from .._errors import BadValue
from .observer import Observer
from .session import Target, alive, attach


def check_duration(value: Any, name: str = "--duration") -> float | None:
    """A duration in seconds: positive and finite, or None (until the process ends).

    :param value: what the user gave
    :param name: the option, for the message
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadValue(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise BadValue(f"{name} must be > 0 and finite, got {value!r}")
    return float(value)


def check_pid(value: Any, name: str = "--pid") -> int:
    """A process id: a positive integer.

    :param value: what the user gave
    :param name: the option, for the message
    """
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise BadValue(f"{name} must be a positive process id, got {value!r}")
    return value


class Attached(NamedTuple):
    """A process observed for a while.

    :param observer: what sampled it
    :param target: its interpreter
    :param wall: seconds observed
    :param why: why the observation ended (``ended``, ``duration``, ``interrupted``)
    """

    observer: Observer
    target: Target
    wall: float
    why: str


def observe_pid(
    pid: int,
    interval: float,
    sink: Any,
    duration: float | None = None,
    on_sample: Callable[[], None] | None = None,
) -> Attached:
    """Samples a running process.

    :param pid: the process
    :param interval: seconds between samples
    :param sink: its memory ticks' sink
    :param duration: seconds at most (None: until it ends or a signal comes)
    :param on_sample: called after each sample
    :raises ObserveError: it cannot be read (gone, not Python, refused...)
    """
    from .._run.signals import Signals

    observer, target = attach(pid, interval, sink)
    observer.root.collector = ""
    start = time.monotonic()
    why = ["ended"]
    with Signals() as signals:  # recorded: they end the observation, never raised
        received = signals.received

        def done() -> bool:
            if received:
                why[0] = "interrupted"
                return True
            if duration is not None and time.monotonic() - start >= duration:
                why[0] = "duration"
                return True
            return not alive(pid)

        try:
            observer.run(done, on_sample)
        finally:
            observer.close()
    return Attached(observer, target, time.monotonic() - start, why[0])
