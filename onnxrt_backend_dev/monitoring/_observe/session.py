"""Observing a program from outside, from its start (a command this process starts) or
from now (a process already running, by its pid).

:func:`availability` says once whether this machine and this interpreter allow it (the
platform, ``process_vm_readv``, this interpreter's layout checked against itself); the
callers fall back to the in-process sampler otherwise and say why.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .._errors import ObserveError
from .observer import Observer, ProcessRecord
from .process import state_of
from .reader import StackReader
from .target import Interpreter, locate
from .verify import Verified, verify

LOCATE_TIMEOUT = 5.0  # seconds for a fresh interpreter to map its library


class Availability(NamedTuple):
    """Whether the observer can run here.

    :param ok: it can
    :param reason: why not (empty when it can)
    """

    ok: bool
    reason: str


_AVAILABLE: list[Availability] = []


def availability() -> Availability:
    """Whether programs run by this interpreter can be observed from outside (checked
    once: this interpreter's layout read and compared with its own view).

    :return: yes, or no with the reason in words
    """
    if _AVAILABLE:
        return _AVAILABLE[0]
    if not sys.platform.startswith("linux"):
        found = Availability(False, f"reading another process is not implemented on {sys.platform}")
    elif os.environ.get("ONNXRT_MONITORING_OBSERVER", "") == "0":
        found = Availability(False, "ONNXRT_MONITORING_OBSERVER=0 turns it off")
    else:
        try:
            verify(locate(os.getpid()))
            found = Availability(True, "")
        except ObserveError as e:
            found = Availability(False, str(e))
    _AVAILABLE.append(found)
    return found


class Target(NamedTuple):
    """A process ready to be read.

    :param interpreter: where its interpreter is
    :param verified: the layout's check
    :param reader: its stacks' reader
    """

    interpreter: Interpreter
    verified: Verified
    reader: StackReader


def open_target(pid: int) -> Target:
    """Locates, checks and opens a Python process for reading.

    :param pid: the process
    :return: it, ready
    :raises ObserveError: see :func:`.target.locate` and :func:`.verify.verify`
    """
    from .memory import ProcessMemory

    interp = locate(pid)
    checked = verify(interp)
    reader = StackReader(ProcessMemory(pid), interp.layout, interp.runtime, interp.types,
                         checked.pthread_tid)  # fmt: skip
    return Target(interp, checked, reader)


def wait_for_interpreter(pid: int, alive: Callable[[], bool], timeout: float) -> Target | None:
    """Opens a process that just started an interpreter: its library may not be mapped
    yet. Retries until it is, the process ends, or ``timeout`` seconds pass.

    :param pid: the process
    :param alive: whether it still runs
    :param timeout: seconds
    :return: the target, None if the process ended first
    :raises ObserveError: it is not Python, or cannot be read
    """
    deadline = time.monotonic() + timeout
    pause = 0.0005
    while True:
        try:
            return open_target(pid)
        except ObserveError as e:
            if not alive():
                return None
            if e.reason not in ("not-python", "unsupported") or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.01)


def _die_with_parent() -> None:
    """In the child, before exec: killed if this process dies (``kill -9`` of the
    command must not leave the program running, unreported)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Started(NamedTuple):
    """A program started under the observer.

    :param process: the child
    :param observer: samples it
    :param target: its interpreter (None: not Python, or not readable: memory only)
    :param why: why there are no stacks, when there are none
    """

    process: subprocess.Popen[bytes]
    observer: Observer
    target: Target | None
    why: str


def start_program(
    argv: Sequence[str],
    interval: float,
    sink: Any,
    follow: Callable[[int], ProcessRecord | None] | None = None,
    env: dict[str, str] | None = None,
) -> Started:
    """Starts ``argv`` as a child (its own interpreter, nothing of this tool in it) and
    its observer; the first sample is taken before this returns.

    :param argv: the command line (a Python interpreter and its arguments)
    :param interval: seconds between samples
    :param sink: where the main process's memory ticks go
    :param follow: makes the record of a new descendant (None: not followed)
    :param env: the child's environment (this one's by default)
    :return: the child and its observer
    :raises OSError: the command cannot start
    """
    parent = os.getpid()

    def prepare() -> None:
        _die_with_parent()
        if os.getppid() != parent:  # the command died before the death signal was armed
            os._exit(127)

    sys.stdout.flush()
    sys.stderr.flush()
    proc = subprocess.Popen(list(argv), preexec_fn=prepare, env=env)
    record = ProcessRecord(proc.pid, None, bytes(256), sink)
    observer = Observer(record, interval, follow=follow)
    observer.sample()  # the memory from the start
    why = ""
    target: Target | None = None
    try:
        target = wait_for_interpreter(proc.pid, lambda: proc.poll() is None, LOCATE_TIMEOUT)
    except ObserveError as e:
        why = str(e)
    if target is not None:
        record.reader = target.reader
        record.flags = target.verified.native_flags
    elif not why:
        why = "the program ended before its interpreter could be read"
    return Started(proc, observer, target, why)


def attach(pid: int, interval: float, sink: Any) -> tuple[Observer, Target]:
    """An observer of a process already running.

    :param pid: the process
    :param interval: seconds between samples
    :param sink: where its memory ticks go
    :return: the observer (nothing sampled yet) and the target
    :raises ObserveError: see :func:`open_target`
    """
    if pid == os.getpid():
        raise ObserveError("--pid is this command's own process", "refused")
    target = open_target(pid)
    record = ProcessRecord(pid, target.reader, target.verified.native_flags, sink)
    return Observer(record, interval), target


def alive(pid: int) -> bool:
    """Whether a process runs (not gone, not a zombie).

    :param pid: the process
    """
    state = state_of(pid)
    return state is not None and state not in ("Z", "X")


def stop_child(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Ends a child: SIGTERM, then SIGKILL after ``grace`` seconds; reaped.

    :param proc: the child
    :param grace: seconds
    """
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait()
