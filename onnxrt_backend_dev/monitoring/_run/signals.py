"""The one handler of the signals that end a command: SIGINT, SIGTERM and SIGHUP.

A command that runs something installs :class:`Signals` for that time. Each signal is
recorded (the first decides the exit code, ``128 + N``), passed to every listener (the
supervisor forwards it to its children) and, while a program runs in this process,
raised in it once (:class:`Terminated <.._errors.Terminated>`, ``KeyboardInterrupt`` for
SIGINT). Anything else is only recorded: a second signal a few milliseconds after the
first (``timeout``, a CI runner) must not break the unwinding or the report.

Handlers run in the main thread only: elsewhere nothing is installed. A signal inherited
ignored (``nohup``'s SIGHUP) stays ignored. They nest without a gap: an inner one starts
with what the outer one received and hands what it received back when removed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from .._errors import Terminated

__all__ = ["DEBOUNCE", "Signals", "ending_signals"]

# Seconds after a signal raised in the program during which the next ones are recorded,
# not raised: two SIGINTs 2 ms apart stop the program once, and the second one cannot hit
# the tool's own code after the program gave up (a traceback, a report never written).
DEBOUNCE = 0.5

Listener = Callable[[int], None]

# The installed handlers, innermost last (main thread only).
_INSTALLED: list[Signals] = []


def _forked_child() -> None:
    """A process forked from here (a ``multiprocessing`` worker of the measured program)
    gets back the handlers it had before this tool: its pool's ``terminate`` must end it
    as it would without the tool, not raise in it (a worker interrupted holding its
    queue's lock left the pool waiting forever)."""
    while _INSTALLED:
        installed = _INSTALLED.pop()
        installed._listeners.clear()  # the parent's children are not this process's
        for signum, previous in installed._previous.items():
            if signal.getsignal(signum) == installed.handler:
                with contextlib.suppress(ValueError, OSError):
                    signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        installed._previous.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked_child)


def ending_signals(interrupts: bool = True) -> tuple[int, ...]:
    """The signals that end a command on this platform.

    :param interrupts: SIGINT too
    :return: signal numbers
    """
    names = ("SIGINT", "SIGTERM", "SIGHUP") if interrupts else ("SIGTERM", "SIGHUP")
    found = (getattr(signal, name, None) for name in names)
    return tuple(int(s) for s in found if s is not None)


class Signals:
    """Catches SIGINT (with ``interrupts``), SIGTERM and SIGHUP while installed (a
    context manager), restoring the previous handlers afterwards.

    :param interrupts: catch SIGINT too; without, Ctrl-C keeps Python's default
        (``KeyboardInterrupt`` wherever the main thread is)
    :param running: a program runs in this process from the start (it is then raised in,
        see :meth:`program_over`); False when the command only supervises children
    :param clock: seconds, monotonic (tests inject one)
    """

    def __init__(
        self,
        interrupts: bool = True,
        running: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interrupts = interrupts
        self.running = running
        self.received: list[int] = []
        self._clock = clock
        self._raised_at: float | None = None
        self._listeners: list[Listener] = []
        self._previous: dict[int, Any] = {}
        self._inherited = 0

    @property
    def first(self) -> int | None:
        """The first signal received, None without one."""
        return self.received[0] if self.received else None

    @property
    def exit_code(self) -> int | None:
        """``128 + signum`` of the first signal received (130 for SIGINT), None without
        one."""
        return 128 + self.received[0] if self.received else None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        """Records the signal, tells the listeners, and raises it in a running program
        (once per :data:`DEBOUNCE`)."""
        self.received.append(signum)
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):  # never an error of the tool in the program
                listener(signum)
        if not self.running:
            return
        now = self._clock()
        if self._raised_at is not None and now - self._raised_at < DEBOUNCE:
            return
        self._raised_at = now
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    def listen(self, listener: Listener) -> None:
        """Calls ``listener(signum)`` for each signal from now on (in the main thread,
        inside the handler: it must be quick and raise nothing).

        :param listener: the function
        """
        self._listeners.append(listener)

    def forget(self, listener: Listener) -> None:
        """Stops calling a listener.

        :param listener: as given to :meth:`listen`
        """
        if listener in self._listeners:
            self._listeners.remove(listener)

    def program_over(self) -> None:
        """From now on, a signal is recorded, not raised."""
        self.running = False

    def install(self) -> Signals:
        """Installs the handlers (main thread only; an ignored signal stays ignored).

        :return: self
        """
        if threading.current_thread() is not threading.main_thread() or self in _INSTALLED:
            return self
        if _INSTALLED:  # what the outer one received stops what this one guards
            self.received[:0] = [s for s in _INSTALLED[-1].received if s not in self.received]
        self._inherited = len(self.received)
        for signum in ending_signals(self.interrupts):
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN or signum in self._previous:
                continue
            self._previous[signum] = signal.signal(signum, self.handler)
        _INSTALLED.append(self)
        return self

    def uninstall(self) -> None:
        """Puts the previous handlers back, and hands what was received to the outer
        :class:`Signals`, if any."""
        while self._previous:
            signum, previous = self._previous.popitem()
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        if self in _INSTALLED:
            _INSTALLED.remove(self)
            if _INSTALLED:
                _INSTALLED[-1].received.extend(self.received[self._inherited :])

    def __enter__(self) -> Signals:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.running = False
        self.uninstall()
