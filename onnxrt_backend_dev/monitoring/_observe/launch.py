"""Running a program under the observer: start it, sample it until it ends, forward the
signals the command receives, reap it, and keep what was measured whatever happens.

The program is a plain child (``python script.py``): it shares the command's process
group, so a Ctrl-C on the terminal reaches both; the command then waits for it to end
(a Ctrl-C the program did not get is forwarded after a second). SIGTERM and SIGHUP are
forwarded at once; a program still running ``grace`` seconds later is killed. The
program dies with the command (``PR_SET_PDEATHSIG``), so nothing is left running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any, NamedTuple

from .observer import Observer, ProcessRecord
from .session import start_program

SIGINT_FORWARD = 1.0
GRACE = 10.0


class Forwarder:
    """The signals the command received while the program runs.

    :param pid: the program
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.received: list[int] = []
        self.sigint_at: float | None = None
        self.term_at: float | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        """Records a signal; SIGTERM and SIGHUP go on to the program at once."""
        self.received.append(signum)
        if signum == signal.SIGINT:
            if self.sigint_at is None:
                self.sigint_at = time.monotonic()
            return
        self.term_at = self.term_at or time.monotonic()
        with contextlib.suppress(OSError):
            os.kill(self.pid, signum)

    def poll(self, grace: float) -> None:
        """Forwards a SIGINT that waited long enough; kills a program that outlived a
        forwarded SIGTERM/SIGHUP by ``grace`` seconds."""
        now = time.monotonic()
        if self.sigint_at is not None and now - self.sigint_at > SIGINT_FORWARD:
            self.sigint_at = None
            self.term_at = self.term_at or now
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGINT)
        if self.term_at is not None and now - self.term_at > grace:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)


@contextlib.contextmanager
def forwarding(pid: int) -> Iterator[Forwarder]:
    """Installs a :class:`Forwarder` for SIGTERM, SIGHUP and SIGINT (main thread only;
    a signal the command ignores stays ignored)."""
    fwd = Forwarder(pid)
    if threading.current_thread() is not threading.main_thread():
        yield fwd
        return
    wanted = [s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None), signal.SIGINT) if s]
    wanted = [s for s in wanted if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {s: signal.signal(s, fwd.handler) for s in wanted}
    try:
        yield fwd
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class ObservedRun(NamedTuple):
    """A program run under the observer.

    :param observer: what sampled it (its records: the program, its descendants)
    :param why: why there are no stacks (empty when there are)
    :param status: its wait status
    :param rusage: its resource usage (CPU, ``ru_maxrss``)
    :param wall: seconds from its start to its end
    :param received: signals the command received meanwhile
    """

    observer: Observer
    why: str
    status: int
    rusage: Any
    wall: float
    received: list[int]

    @property
    def record(self) -> ProcessRecord:
        """The program's own record."""
        return self.observer.root


def observe_program(
    argv: Sequence[str],
    interval: float,
    sink: Any,
    follow: Callable[[int], ProcessRecord | bool | None] | None = None,
    on_sample: Callable[[], None] | None = None,
    grace: float = GRACE,
    devices: Any = None,
    env: dict[str, str] | None = None,
    alloc: Any = None,
) -> ObservedRun:
    """Runs ``argv`` under the observer until it ends.

    :param argv: the command line
    :param interval: seconds between samples
    :param sink: the memory ticks' sink of the program
    :param follow: makes the record of a new descendant (None: not followed)
    :param on_sample: called after each sample
    :param grace: seconds a program has to end after a forwarded SIGTERM/SIGHUP
    :param devices: device probes read in the same loop
    :param env: the program's environment (this process's by default)
    :param alloc: reads the program's allocations at each sample (an
        ``_alloc.tracker.AllocTracker``, made with the pid), None: not tracked
    :return: what was seen
    :raises OSError: the command cannot start
    """
    start = time.monotonic()
    started = start_program(argv, interval, sink, follow, env=env, devices=devices)
    proc = started.process
    if alloc is not None:
        started.observer.root.alloc = alloc(proc.pid)
    reaped: list[tuple[int, Any]] = []

    def done() -> bool:
        if not reaped:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                reaped.append((status, usage))
        return bool(reaped)

    try:
        with forwarding(proc.pid) as fwd:

            def tick() -> None:
                fwd.poll(grace)
                if on_sample is not None:
                    on_sample()

            started.observer.run(done, tick)
    finally:
        if not reaped:  # the command failed here: no program left running
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
            _, status, usage = os.wait4(proc.pid, 0)
            reaped.append((status, usage))
        proc.returncode = 0  # reaped here: Popen must not wait for it again
        started.observer.close()
    status, usage = reaped[0]
    why = "; ".join(started.why)
    return ObservedRun(started.observer, why, status, usage, time.monotonic() - start,
                       fwd.received)  # fmt: skip


def exit_code(status: int) -> int:
    """The conventional exit code of a wait status (128 + N on signal N).

    :param status: from ``wait4``
    """
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
