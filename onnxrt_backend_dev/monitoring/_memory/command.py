"""Spying on a command: the gated start, signal forwarding and reaping behind ``spy --
COMMAND``, and the attached measure of a running process behind ``spy --pid``.

:func:`spy_command` starts the command behind a closed gate under the supervision of
``_run.supervise`` (a group of its own, signals forwarded, nothing left running),
attaches a :class:`MemorySpy <.spy.MemorySpy>` to its pid, opens the gate, waits for it
and reaps it; the result then holds the command's end (its exit time, the peak of the
last interval from its ``ru_maxrss``), ``max_rss`` and ``ru_maxrss`` for one process, and
``signal`` when one was received. Nothing is printed: the CLI says what happened from
what is returned.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from .._run.program import supervised
from .._run.signals import Signals
from .series import SpyResult
from .spy import MemorySpy

# Seconds between two checks of the spied process in --pid mode.
_POLL = 0.2
# Seconds the command has to end after a signal forwarded to it before it is killed.
_INTERRUPT_GRACE = 5.0


def _own_peak() -> float:
    """This process's memory high-water mark (``VmHWM``) in bytes.

    Forking then exec'ing records the forked memory's high-water mark in the child's
    ``ru_maxrss``, which ``exec`` never lowers: the command's ``ru_maxrss`` starts at up
    to this figure, read once Popen returned. Not this process's own ``ru_maxrss``: that
    one holds what its parent (a test runner, a notebook) had at the fork, often more.
    """
    from .probes import ProcessProbe

    probe = ProcessProbe(os.getpid(), reset_peak=False)
    probe.close()
    hwm = probe.previous_peak  # the mark, read before any reset
    if hwm is not None:
        return float(hwm)
    import resource  # no VmHWM shown: the safe, higher figure

    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux


def _add_end(result: SpyResult, peak: float, floor: float, ended: float) -> None:
    """Adds the end of the command: the duration up to its reaping, and the peak of the
    last interval (from the spy's last tick to the exit).

    An allocation in that interval never reaches the spy (the exited process has no
    ``/proc/PID/status`` memory left), but the child's ``ru_maxrss`` keeps it: the
    high-water mark it had when it ended (the spy's resets lowered it), or more: the
    marks recorded at each ``exec``, the shell's (tiny) and the CLI's at the fork (see
    :func:`_own_peak`). Only a figure above the CLI's is the command's, so a spike there
    smaller than the CLI's own peak (tens of MiB) is not recovered. With ``--children``
    it is one process's peak, a lower bound of the tree's, merged the same way.

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
    :param end: how it ended (its wait status, its resource usage)
    """

    result: SpyResult
    exit_code: int
    forwarded: int | None = None
    end: Any = None


def spy_command(
    cmd: list[str],
    make_spy: Callable[[int], MemorySpy],
    during: During | None = None,
    children: bool = False,
) -> CommandRun:
    """Runs a command under the spy, from its first instruction to its exit (see the
    module). SIGINT, SIGTERM and SIGHUP are forwarded to it (killed
    ``_INTERRUPT_GRACE`` seconds later if still there); the measure is kept either way.

    :param cmd: the command and its arguments (checked to be runnable by the caller)
    :param make_spy: builds the spy for a pid (the caller's options)
    :param during: a context manager wrapped around the measure (a status line), or None
    :param children: the spy counts the whole tree: ``max_rss``/``ru_maxrss`` are one
        process's figures and are then left out
    :return: the measure, the exit code, the signal forwarded
    """
    with supervised(grace=_INTERRUPT_GRACE) as supervisor:
        child = supervisor.start(cmd, gate=True)
        floor = _own_peak()  # what the command's ru_maxrss may hold from this process
        # The spy is returned once ready: probes open, first tick taken, high-water mark
        # reset. Until the gate opens, the command cannot have run; if this fails, the
        # supervisor ends it at its closed gate.
        spy = make_spy(child.pid)
        with spy, (during or _nothing)(spy):
            if supervisor.stopped is None:  # a signal during the spy's start: never run
                child.release()
            supervisor.wait(child)
            ended = time.monotonic()
            if supervisor.stopped is not None:
                spy.note_signal(supervisor.stopped)
        result = spy.stop()
    assert child.exit is not None  # reaped above
    # The kernel's peak of the command since the spy's last reset (KiB on Linux).
    usage = child.exit.rusage
    if usage is not None:
        last_peak = float(usage.ru_maxrss) * 1024
        _add_end(result, last_peak, floor, ended)
        if not children:  # one process: its maximum beside its ru_maxrss
            result["max_rss"] = result["cpu"].max_peak
            result["ru_maxrss"] = last_peak
    return CommandRun(result, child.exit.code, supervisor.stopped, child.exit)


def spy_process(spy: MemorySpy, during: During | None = None) -> SpyResult:
    """Measures a running process (not ours) until it ends, Ctrl-C, SIGTERM or SIGHUP:
    the signals end the measure, not the process; SIGTERM or SIGHUP is the result's
    ``'signal'`` (Ctrl-C, the usual way to end it, is not).

    :param spy: the spy attached to it
    :param during: a context manager wrapped around the measure, or None
    """
    with Signals(interrupts=True) as signals, spy, (during or _nothing)(spy):
        while signals.first is None and not spy.wait(_POLL):
            pass
        if signals.first is not None and signals.first != signal.SIGINT:
            spy.note_signal(signals.first)
    return spy.stop()


def _nothing(spy: MemorySpy) -> AbstractContextManager[Any]:
    return contextlib.nullcontext()
