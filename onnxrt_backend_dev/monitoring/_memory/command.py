"""Spying on a command: the gated start, signal forwarding and reaping behind ``spy --
COMMAND``, and the attached measure of a running process behind ``spy --pid``.

:func:`spy_command` starts the command behind a closed gate (a shell blocked on a pipe),
attaches a :class:`MemorySpy <.spy.MemorySpy>` to its pid, opens the gate, waits for it,
forwards SIGTERM and SIGHUP to it and reaps it; the result then holds the command's end
(its exit time, the peak of the last interval from its ``ru_maxrss``), ``max_rss`` and
``ru_maxrss`` for one process, and ``signal`` when one was forwarded. Nothing is printed:
the CLI says what happened from what is returned.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from .series import SpyResult
from .spy import MemorySpy

# Seconds between two checks of the spied process in --pid mode.
_POLL = 0.2
# Seconds to let the command exit on its own after Ctrl-C before killing it (and to reap
# it once killed).
_INTERRUPT_GRACE = 5.0
# Seconds a command interrupted with the CLI (Ctrl-C on the terminal reaches both) has to
# exit on its own before the CLI forwards SIGINT (the CLI alone was interrupted).
_OWN_EXIT = 0.5
# Signals forwarded to the command; the CLI then exits with 128 + the signal's number.
_FORWARDED = (signal.SIGTERM, signal.SIGHUP)
# The gate: the command starts as a POSIX shell blocked on reading a pipe (descriptor fd)
# until the spy is attached to its pid, then ``exec``s the command in that same pid. Even a
# command shorter than the spy's start (``true``) is measured. A shell rather than
# Popen's preexec_fn, which is unsafe in a process with threads. ``exec`` gives the command
# a fresh address space, so the high-water mark covers the command only; ``begin`` (the
# first tick, before the gate opens) is the shell's RSS, 1-2 MiB. ``read`` fails at
# end-of-file: the CLI died before opening the gate, and the command does not run
# unmeasured (125, as env and timeout when they cannot run one). A command that cannot be
# run makes ``exec`` exit 127 (not found) or 126, the shell's codes.
_SHELL = "/bin/sh"
_GATE = 'read _ <&{fd} || exit 125; exec {fd}<&-; exec "$@"'
# dash takes single-digit descriptors only: above 9 the shell opens the pipe by path, and
# the command inherits the descriptor (a pipe nobody writes to any more).
_GATE_BY_PATH = 'read _ < /dev/fd/{fd} || exit 125; exec "$@"'


def _exit_code(returncode: int) -> int:
    """The shell's convention: 128 + N for a command killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def _start_gated(cmd: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """Starts the command behind a closed gate (see ``_GATE``).

    :param cmd: the command and its arguments
    :return: the process, still the shell blocked on the gate, and the gate's write end
    """
    # os.pipe takes the lowest free descriptors: single digits unless 3-9 are all taken.
    fd, gate = os.pipe()
    script = (_GATE if fd <= 9 else _GATE_BY_PATH).format(fd=fd)
    try:
        proc = subprocess.Popen([_SHELL, "-c", script, "spy", *cmd], pass_fds=(fd,))
    except BaseException:
        os.close(gate)
        raise
    finally:
        os.close(fd)
    return proc, gate


def _open_gate(gate: int) -> None:
    """Lets the command run: the shell reads the line, then execs it.

    :param gate: the gate's write end, closed here
    """
    try:
        with contextlib.suppress(OSError):  # the shell was killed: _wait reports how
            os.write(gate, b"\n")
    finally:
        os.close(gate)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kills and reaps the command (the shell on the gate, before it opens).

    :param proc: the process
    """
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(_INTERRUPT_GRACE)


def _wait(proc: subprocess.Popen[bytes]) -> float | None:
    """Waits for the command and reaps it (no zombie).

    :param proc: the process
    :return: the kernel's peak of the command since the spy's last reset, in bytes
        (``ru_maxrss``), None after Ctrl-C
    """
    try:
        # Waits without reaping: a Ctrl-C raised as the command ends (the terminal sends
        # SIGINT to both) must not lose its exit status, Popen.wait then reaps it.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:  # reaped by someone else (SIGCHLD ignored): no figure
        proc.wait(_INTERRUPT_GRACE)  # Popen's own answer to this case: exit code 0
        return None
    except KeyboardInterrupt:
        _stop_interrupted(proc)
        return None
    # wait4, not Popen.wait: its rusage holds the last interval's peak (see _add_end),
    # which is gone from /proc once the command exited. It ended: this does not block.
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait
    return float(usage.ru_maxrss) * 1024  # KiB on Linux


def _stop_interrupted(proc: subprocess.Popen[bytes]) -> None:
    """Ends the command after a Ctrl-C of the CLI, and reaps it.

    Ctrl-C on a terminal reaches the command too: it gets a moment to exit on its own.
    Still running, only the CLI was interrupted (``kill -INT``): SIGINT is forwarded,
    then SIGKILL after a grace.

    :param proc: the command
    """
    steps = (
        (None, _OWN_EXIT),
        (signal.SIGINT, _INTERRUPT_GRACE),
        (signal.SIGKILL, _INTERRUPT_GRACE),
    )
    for sig, wait in steps:
        if sig is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)
            return


class _Forwarder:
    """Catches SIGTERM and SIGHUP while the spy measures, so that the measure is still
    written, and forwards them to the command the CLI started.

    The first signal received decides the CLI's exit code (``128 + signum``); the command
    is killed if it still runs ``grace`` seconds after it, so that it never outlives the
    CLI (reparented to pid 1). Without a command (``--pid``: not ours) the signal is only
    recorded. Handlers are set in the main thread only (Python's rule).

    :param proc: the command, None to forward nothing
    :param grace: seconds the command has to exit once a signal was forwarded
    """

    def __init__(self, proc: subprocess.Popen[bytes] | None, grace: float) -> None:
        self.proc = proc
        self.grace = grace
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._timer: threading.Timer | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
        if self.proc is None:
            return
        if self.proc.returncode is None:  # not reaped yet: the pid is still the command's
            with contextlib.suppress(OSError):
                os.kill(self.proc.pid, signum)
        if self._timer is None:
            self._timer = threading.Timer(self.grace, self._kill_late)
            self._timer.daemon = True
            self._timer.start()

    def _kill_late(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(OSError):
                os.kill(self.proc.pid, signal.SIGKILL)

    def __enter__(self) -> _Forwarder:
        if threading.current_thread() is threading.main_thread():
            for signum in _FORWARDED:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        if self._timer is not None:
            self._timer.cancel()


def _own_peak() -> float:
    """This process's memory high-water mark (``VmHWM``) in bytes.

    Forking (or vforking) then exec'ing records the forked memory's high-water mark in
    the child's ``ru_maxrss``, which ``exec`` never lowers: the command's ``ru_maxrss``
    starts at up to this figure, read once Popen returned (the mark only grows). Not this
    process's own ``ru_maxrss``: that one holds what its parent (a test runner, a
    notebook) had at the fork, often far more.

    :return: bytes
    """
    from .probes import read_status

    hwm = read_status(os.getpid())[1]
    if hwm is not None:
        return float(hwm)
    import resource  # no VmHWM shown: the safe, higher figure

    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux


def _add_end(result: SpyResult, peak: float, floor: float, ended: float) -> None:
    """Adds the end of the command: its exit time, and the peak of the last interval.

    The duration runs until the command was reaped, not until the spy's last tick.

    The last interval runs from the spy's last tick to the exit. An allocation in it (a
    command that allocates then exits within ``delay``) never reaches the spy: the exited
    process has no ``/proc/PID/status`` memory left. The kernel keeps it for the parent:
    the child's ``ru_maxrss`` is the high-water mark it had when it ended (the spy's
    resets lowered it), or more: the marks recorded at each ``exec``, the shell's (tiny)
    and the CLI's at the fork (see :func:`_own_peak`). Only a figure above the CLI's is
    used: then it is the command's, and a spike in the last interval smaller than the
    CLI's own peak (tens of MiB) is not recovered.
    With ``--children`` it is one process's peak, a lower bound of the tree's: still a
    true figure, merged the same way.

    :param result: the spy's result, updated
    :param peak: the command's ``ru_maxrss`` in bytes
    :param floor: this process's ``ru_maxrss`` once the command started, in bytes
    :param ended: ``time.monotonic()`` when the command was reaped
    """
    cpu = result["cpu"]
    if not cpu.n_measures:
        return  # no tick: no origin to date the end from (the shell was killed at start)
    result["duration"] = max(result["duration"], ended - result.t0)
    if peak > floor:
        cpu.add_final_peak(peak, ended)  # the curve shows what max_peak says


# A hook run around the measure (the CLI's live status line), given the spy.
During = Callable[[MemorySpy], AbstractContextManager[Any]]


@dataclass
class CommandRun:
    """What :func:`spy_command` measured.

    :param result: the spy's result, with the command's end merged in
    :param exit_code: the command's, in the shell's convention (128 + N when killed by N)
    :param forwarded: the signal forwarded to the command (SIGTERM, SIGHUP), None if none
    """

    result: SpyResult
    exit_code: int
    forwarded: int | None = None


def spy_command(
    cmd: list[str],
    make_spy: Callable[[int], MemorySpy],
    during: During | None = None,
    children: bool = False,
) -> CommandRun:
    """Runs a command under the spy, from its first instruction to its exit.

    :param cmd: the command and its arguments (checked to be runnable by the caller)
    :param make_spy: builds the spy for a pid (the caller's options)
    :param during: a context manager wrapped around the measure (a status line), or None
    :param children: the spy counts the whole tree: ``max_rss``/``ru_maxrss`` are one
        process's figures and are then left out
    :return: the measure, the exit code, the signal forwarded
    """
    proc, gate = _start_gated(cmd)
    floor = _own_peak()  # what the command's ru_maxrss may hold from this process
    try:
        # The spy is returned once ready: probes open, first tick taken, high-water mark
        # reset. Until the gate opens, the command cannot have run.
        spy = make_spy(proc.pid)
    except BaseException:
        os.close(gate)
        _kill(proc)  # never leave it blocked on the gate, nor run it unmeasured
        raise
    forwarder = _Forwarder(proc, _INTERRUPT_GRACE)
    try:
        with forwarder, spy, (during or _nothing)(spy):
            try:
                _open_gate(gate)
                last_peak = _wait(proc)
            except KeyboardInterrupt:  # before _wait could catch it: same answer
                _stop_interrupted(proc)
                last_peak = None
            ended = time.monotonic()
            if forwarder.received:
                spy.note_signal(forwarder.received)
    finally:
        _kill(proc)  # a second Ctrl-C, an error: the command never outlives the caller
    result = spy.stop()
    if last_peak is not None:  # reaped by _wait, not interrupted
        _add_end(result, last_peak, floor, ended)
        if not children:  # one process: its maximum beside its ru_maxrss
            result["max_rss"] = result["cpu"].max_peak
            result["ru_maxrss"] = last_peak
    assert proc.returncode is not None  # reaped above
    return CommandRun(result, _exit_code(proc.returncode), forwarder.received)


def spy_process(spy: MemorySpy, during: During | None = None) -> SpyResult:
    """Measures a running process (not ours) until it ends, Ctrl-C, SIGTERM or SIGHUP.

    The signals end the measure, not the spied process; the one received is in the
    result's ``'signal'``.

    :param spy: the spy attached to it
    :param during: a context manager wrapped around the measure, or None
    :return: the spy's result
    """
    caught = _Forwarder(None, _INTERRUPT_GRACE)
    with caught, spy, (during or _nothing)(spy):
        try:
            while caught.received is None and not spy.wait(_POLL):
                pass
        except KeyboardInterrupt:
            pass
        if caught.received:
            spy.note_signal(caught.received)
    return spy.stop()


def _nothing(spy: MemorySpy) -> AbstractContextManager[Any]:
    return contextlib.nullcontext()
