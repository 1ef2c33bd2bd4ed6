"""Observing a process already running, by its pid: until it ends, a duration passes or
the command is interrupted (Ctrl-C, SIGTERM, SIGHUP), then what was seen. Nothing is
stopped or changed in the process: it goes on when the observer leaves.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NamedTuple

from .._errors import BadValue
from .observer import Observer
from .session import Target, alive, attach


def check_duration(value: Any, name: str = "--duration") -> float | None:
    """A duration in seconds: positive and finite, or None (until the process ends).

    :param value: what the user gave
    :param name: the option, for the message
    :return: the seconds
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
    :return: the pid
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


@contextlib.contextmanager
def _stopping() -> Iterator[list[int]]:
    """SIGINT, SIGTERM and SIGHUP end the observation (main thread only)."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    wanted = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s]
    previous = {s: signal.signal(s, handler) for s in wanted}
    try:
        yield received
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


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
    :return: what was seen
    :raises ObserveError: it cannot be read (gone, not Python, refused...)
    """
    observer, target = attach(pid, interval, sink)
    observer.root.collector = ""
    start = time.monotonic()
    why = ["ended"]
    with _stopping() as received:

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
