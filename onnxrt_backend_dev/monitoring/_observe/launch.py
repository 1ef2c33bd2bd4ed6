"""Running a program under the observer: start it under the one supervisor of the
command's children (:mod:`.._run.supervise`: its own process group unless it reads the
terminal, dying with the command, SIGINT, SIGTERM and SIGHUP forwarded, SIGKILL after
the grace, what it left of its group ended with it), sample it until it ends, and keep
what was measured whatever happens.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .._run.supervise import shell_code
from .observer import Observer, ProcessRecord, has_user_code
from .session import LOCATE_TIMEOUT, opener, reopen_after_exec

# How a program ended by a signal reads in a report.
DEATHS = {
    "SIGKILL": "killed by SIGKILL (the OOM killer, a memory limit or kill -9)",
    "SIGSEGV": "crashed: SIGSEGV (segmentation fault)",
    "SIGABRT": "aborted: SIGABRT",
    "SIGBUS": "crashed: SIGBUS",
    "SIGINT": "interrupted (SIGINT)",
    "SIGTERM": "stopped by SIGTERM",
    "SIGHUP": "stopped by SIGHUP",
}


class ObservedRun(NamedTuple):
    """A program run under the observer.

    :param observer: what sampled it (its records: the program, its descendants)
    :param why: why there are no stacks (empty when there are)
    :param status: its wait status
    :param rusage: its resource usage (CPU, ``ru_maxrss``)
    :param wall: seconds from its start to its end
    :param received: signals the command received meanwhile
    :param timed_out: its timeout ended it
    """

    observer: Observer
    why: list[str]
    status: int
    rusage: Any
    wall: float
    received: list[int]
    timed_out: bool = False

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
    devices: Any = None,
    env: dict[str, str] | None = None,
    alloc: Any = None,
    supervisor: Any = None,
    timeout: float | None = None,
    **popen: Any,
) -> ObservedRun:
    """Runs ``argv`` under the observer until it ends: it starts under the command's
    supervisor (its own interpreter, nothing of this tool in it), its first sample taken
    at once.

    :param argv: the command line
    :param interval: seconds between samples
    :param sink: the memory ticks' sink of the program
    :param follow: makes the record of a new descendant (None: not followed)
    :param on_sample: called after each sample
    :param devices: device probes read in the same loop
    :param env: the program's environment (this process's by default)
    :param alloc: reads the program's allocations at each sample (an
        ``_alloc.tracker.AllocTracker``, made with the pid), None: not tracked
    :param supervisor: the command's (``_run.program.supervised``), None for one here
    :param timeout: seconds before the program is ended (one of repeated runs: a
        signal then ends it at once), None to follow it to its end
    :param popen: more of ``Supervisor.start``'s options (``stdin``, ``stdout``,
        ``stderr``, ``cwd``, ``group``)
    :raises CommandNotFound: the command cannot start (127, 126)
    """
    from .._run.program import supervised

    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    why: list[str] = []  # why there are no stacks, filled while it runs
    with supervised(supervisor, janitor=False) as sup:
        sys.stdout.flush()
        sys.stderr.flush()
        child = sup.start(list(argv), env=env, **popen)
        record = ProcessRecord(child.pid, None, bytes(256), sink)
        record.opener = opener(child.pid, LOCATE_TIMEOUT, why)
        record.on_exec = reopen_after_exec
        observer = Observer(record, interval, follow=follow, devices=devices)
        if devices is not None:
            devices.pid_source = observer.pids
        observer.sample()  # the memory from the start, a first try at the interpreter
        if alloc is not None:
            record.alloc = alloc(child.pid)

        def over() -> bool:
            if child.poll() is not None:
                return True
            return deadline is not None and (sup.stopped is not None or time.monotonic() > deadline)

        try:
            observer.run(over, on_sample)
            # Still running, no signal: the deadline stopped the loop.
            timed_out = child.exit is None and sup.stopped is None
        finally:
            ended = child.exit or child.end()  # past the timeout, a signal, a failure here
            observer.close()
        received = list(sup.signals.received)
    return ObservedRun(observer, why, ended.status, ended.rusage,
                       time.monotonic() - start, received, timed_out)  # fmt: skip


def signal_ending(run: ObservedRun) -> tuple[int, str] | None:
    """The exit code and the words of a run the signal the command received decided:
    the program killed by the supervisor's SIGKILL (it did not end within the grace, or
    never started), or ended before its first line (its interpreter's start interrupted:
    Python's own exit 1); None when the program's own ending stands.

    :param run: the run
    :return: ``(128 + N, words)``, or None
    """
    import os
    import signal

    if not run.received:
        return None
    code = shell_code(run.status)
    killed = os.WIFSIGNALED(run.status) and os.WTERMSIG(run.status) == signal.SIGKILL
    # Its own code ran (not only the interpreter's start: site, the imports it makes).
    record = run.record
    started = record.python_seen and any(has_user_code(record, k) for k in record.key_list)
    if not killed and (started or code in (0, *(128 + s for s in run.received))):
        return None
    first = run.received[0]
    name = signal.Signals(first).name if first in signal.valid_signals() else str(first)
    words = DEATHS.get(name, f"stopped by {name}")
    when = ", then killed (SIGKILL)" if killed and started else " before its first line"
    return 128 + first, words + when
