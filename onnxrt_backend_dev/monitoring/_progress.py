"""A live one-line status for long operations, shown only on a terminal."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TextIO

from ._errors import BadValue


class LiveStatus:
    """Redraws ``render()`` on one line of ``stream`` every ``interval`` seconds, erased
    on exit. Used as a context manager::

        with LiveStatus(sys.stderr, lambda: f"{n} runs"):
            ...

    :param stream: where to draw (usually ``sys.stderr``)
    :param render: returns the text to show; called from a background thread
    :param interval: seconds between two redraws
    :param enabled: force on or off; None means "when stream is a terminal"
    :param delay: seconds before the first draw, so short operations show nothing
    """

    def __init__(
        self,
        stream: TextIO,
        render: Callable[[], str],
        interval: float = 0.25,
        enabled: bool | None = None,
        delay: float = 1.0,
    ) -> None:
        if interval <= 0:
            raise BadValue(f"interval must be > 0, got {interval!r}")
        self.stream, self.render, self.interval, self.delay = stream, render, interval, delay
        if enabled is None:
            isatty = getattr(stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0
        self.start_time = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the status was created."""
        return time.perf_counter() - self.start_time

    def _draw(self, text: str) -> None:
        pad = max(self._width - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._width = len(text)

    def _loop(self) -> None:
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            try:
                self._draw(self.render())
            except Exception:  # a status line must never break the work it reports on
                return
            self._stop.wait(self.interval)

    def __enter__(self) -> LiveStatus:
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, name="live-status", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            if self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()


def elapsed_status(stream: TextIO, what: str, quiet: bool) -> LiveStatus:
    """``WHAT: 1.23 s``, the time since now, redrawn on a terminal (never with ``quiet``).

    :param stream: where to draw
    :param what: what runs (``profiling script.py``)
    :param quiet: draw nothing
    :return: the status, to enter
    """
    from ._format import format_duration

    start = time.perf_counter()
    return LiveStatus(stream, lambda: f"{what}: {format_duration(time.perf_counter() - start)}",
                      enabled=False if quiet else None)  # fmt: skip
