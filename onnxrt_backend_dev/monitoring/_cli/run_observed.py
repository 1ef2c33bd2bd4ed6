"""``run script.py`` / ``run -m mod`` / ``run -- COMMAND`` under the observer: the
program runs unmodified (nothing of this tool in it), this process samples its stacks,
threads, CPU, memory and devices from outside in one loop, follows its child processes,
and writes the report whatever happens to the program (the flight recorder).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, TextIO

from .._run.program import Target
from .common import CommandError


def run_observed(
    args: argparse.Namespace, target: Target, err: TextIO, emit: Callable[[Any], None]
) -> int:
    """Runs a program under the observer and emits its report.

    :param args: the parsed options of ``run``
    :param target: the program (in a fresh interpreter when Python)
    :param err: the error stream
    :param emit: writes the report
    :return: the program's exit code (128 + N on signal N)
    """
    from .._alloc.program import AllocPlan, plan
    from .._memory.devices import DeviceSampler
    from .._observe.launch import observe_program
    from .._observe.session import follower
    from .._progress import elapsed_status
    from .._report.observed import observed_report
    from .._report.recording import resident
    from .._sampling.aggregate import Aggregator
    from .profile_observed import observer_notes

    devices = None
    if args.probe:
        try:
            devices = DeviceSampler(args.probe)
        except Exception as e:
            raise CommandError(f"--probe: {e}") from e
    argv, name = target.fresh(), target.shown
    status = elapsed_status(err, f"running {name}", args.quiet)
    floor = resident() or 0.0  # the child's pre-exec mark is at most this
    # A Python program run by this interpreter gets the allocation shim, sampling one
    # allocation per --alloc-sample bytes (0: off); another command does not.
    mean = int(getattr(args, "alloc_sample", 0) or 0)
    python = bool(argv) and argv[0] == sys.executable  # a command may name it too
    alloc = plan(mean) if python else AllocPlan(None, None, "", "")
    with status:
        try:
            run = observe_program(argv, args.interval, Aggregator(), follow=follower(Aggregator),
                                  devices=devices, env=alloc.env, alloc=alloc.make)  # fmt: skip
        except (CommandError, OSError) as e:
            if devices is not None:
                devices.close()
            if isinstance(e, CommandError):  # not found (127), not executable (126)
                raise
            raise CommandError(f"cannot run {argv[0]!r}: {e.strerror or e}") from e
    notes = observer_notes(run)
    if alloc.note:
        notes.append(alloc.note)
    report, rc = observed_report(run, name, args.interval, notes, floor, devices)
    emit(report)
    return rc


def run_attached(args: argparse.Namespace, emit: Callable[[Any], None]) -> int:
    """``run --pid PID``: the report of a running process, until it ends, ``--duration``
    passes or Ctrl-C.

    :param args: the parsed options of ``run``
    :param emit: writes the report
    :return: 0
    """
    from .._observe.attach import Attached
    from .._report.observed import attached_report
    from .._sampling.aggregate import Aggregator
    from .profile_observed import attach_notes, attach_observer

    attached = attach_observer(args, args.interval, Aggregator(attached=True))
    assert isinstance(attached, Attached)
    emit(attached_report(attached, attach_notes(attached), args.interval))
    return 0
