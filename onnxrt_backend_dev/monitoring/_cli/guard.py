"""Guards of the commands that run a program or a measure in this process (``profile``,
``time``, ``spy --where``), so that they still report whatever the program does: its
stdout kept when the program closes ``sys.stdout``, and SIGTERM or SIGHUP turned into
an exception in the program, so that the measure is written before the command exits
with the conventional ``128 + signum``.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TextIO


class Terminated(BaseException):
    """Raised in the profiled program when the command receives SIGTERM or SIGHUP
    (a BaseException, as KeyboardInterrupt: ``except Exception`` does not catch it).

    :param signum: the signal received
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


class SignalState:
    """The terminating signals received, and whether the program still runs."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.running = True

    def handler(self, signum: int, frame: FrameType | None) -> None:
        """Raises :class:`Terminated` in the program; once it is over, only remembers
        the signal until the profile is written."""
        self.received.append(signum)
        if self.running:
            self.running = False
            raise Terminated(signum)

    def program_over(self) -> None:
        """From now on, a signal is remembered, not raised."""
        self.running = False

    @property
    def exit_code(self) -> int | None:
        """``128 + signum`` of the first signal received, None without one."""
        return 128 + self.received[0] if self.received else None


def _terminating_signals() -> list[int]:
    return [s for s in (getattr(signal, n, None) for n in ("SIGTERM", "SIGHUP")) if s]


@contextmanager
def terminating_signals() -> Iterator[SignalState]:
    """Installs the handlers of SIGTERM and SIGHUP (main thread only: Python delivers
    signals there; not for a signal already ignored), restoring the previous ones
    afterwards.

    :return: the state the handlers fill
    """
    state = SignalState()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    # An ignored signal stays ignored (``nohup`` ignores SIGHUP).
    wanted = [s for s in _terminating_signals() if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {s: signal.signal(s, state.handler) for s in wanted}
    try:
        yield state
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class KeptOutput:
    """The command's stdout, kept usable for the profile whatever the program does to
    ``sys.stdout``: its file descriptor is duplicated before the program runs.

    :param out: the command's output stream
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.fd: int | None = None
        try:
            self.fd = os.dup(out.fileno())
        except (AttributeError, OSError, ValueError):  # not a file (StringIO in tests)
            self.fd = None

    @contextmanager
    def stream(self, err: TextIO) -> Iterator[TextIO]:
        """The stream to write the profile to: ``out`` if still open, else the original
        stdout through the duplicated descriptor, else ``err`` after a note.

        :param err: the error stream
        :return: a writable stream
        """
        if not getattr(self.out, "closed", False):
            yield self.out
            return
        if self.fd is None:
            err.write("note: the program closed stdout: the profile follows on stderr\n")
            yield err
            return
        encoding = getattr(self.out, "encoding", None) or "utf-8"
        with os.fdopen(os.dup(self.fd), "w", encoding=encoding, errors="replace") as f:
            yield f
            f.flush()

    def close(self) -> None:
        """Closes the duplicated descriptor."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@contextmanager
def kept_output(out: TextIO) -> Iterator[KeptOutput]:
    """:class:`KeptOutput` for the time of a run.

    :param out: the command's output stream
    :return: the kept output
    """
    kept = KeptOutput(out)
    try:
        yield kept
    finally:
        kept.close()
