"""Guards of the commands that run a program or a measure in this process (``profile``,
``time``, ``spy --where``), so that they still report whatever the program does: its
stdout kept when the program closes ``sys.stdout``, and SIGTERM or SIGHUP turned into
an exception in the program (through the one handler of ``_run.signals``), so that the
measure is written before the command exits with the conventional ``128 + signum``.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from .._errors import Terminated
from .._run.signals import Signals

__all__ = ["KeptOutput", "Signals", "Terminated", "kept_output", "terminating_signals"]


# The handlers of SIGTERM and SIGHUP (and SIGINT with ``interrupts=True``) for a program
# run in this process: they raise in it (:class:`Terminated`, ``KeyboardInterrupt``) until
# ``program_over()``, then only record, so that a signal coming once the program is over
# (a second Ctrl-C) is not raised into the writing of the report.
terminating_signals = functools.partial(Signals, interrupts=False, running=True)


class KeptOutput:
    """The command's stdout, kept usable for the profile whatever the program does to
    ``sys.stdout``: its file descriptor is duplicated before the program runs.

    :param out: the command's output stream
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.fd: int | None = None
        with contextlib.suppress(AttributeError, OSError, ValueError):  # StringIO in tests
            self.fd = os.dup(out.fileno())

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

    def __enter__(self) -> KeptOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        """Closes the duplicated descriptor."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


kept_output = KeptOutput  # for the time of a run: ``with kept_output(out) as kept``
