"""``profile script.py`` / ``profile -m mod`` under the observer: the program runs
unmodified in its own interpreter (nothing of this tool in it: no signal handler, no
thread, no import), and this process reads its stacks from outside
(:mod:`.._observe`). Used where :func:`.._observe.session.availability` says it can
run; ``profile_sampled`` (the in-process sampler) runs otherwise, saying why.
"""

from __future__ import annotations

import argparse
import os
from typing import TextIO

from .common import EXIT_USAGE, CommandError
from .profile_sampled import SAMPLED_FORMATS, check_sampled, resolve_format
from .profile_sampled import _emit as emit_profile


def observer_notes(run: object) -> list[str]:
    """What the reader must know of an observed run: the collector, reads that moved.

    :param run: an :class:`.._observe.launch.ObservedRun`
    :return: the sentences
    """
    from .._observe.launch import ObservedRun

    assert isinstance(run, ObservedRun)
    rec = run.record
    if rec.reader is not None:
        notes = [f"collector: the observer, outside the program ({rec.collector})"]
    else:
        why = "; ".join(run.why) or "no Python stacks"
        notes = [f"collector: the observer, memory only: {why}"]
    return notes + reading_notes(run.observer, run.wall)


def reading_notes(observer: object, wall: float) -> list[str]:
    """What the reader must know of how the observer read: reads that moved, a fault of
    the C walk, its own cost, samples skipped, a full stack table.

    :param observer: an :class:`.._observe.observer.Observer`
    :param wall: seconds observed
    :return: the sentences
    """
    from .._observe.observer import Observer

    assert isinstance(observer, Observer)
    rec = observer.root
    notes = [f"{fault}; the Python reader read on" for fault in rec.faults]
    if rec.reader is not None:
        torn, partial, failed = rec.reader.counts()
        if partial or failed:
            notes.append(f"{torn} stack reads moved under the read and were read again; "
                         f"{partial} kept as their outer frames, {failed} lost")  # fmt: skip
    # Its own cost: it runs beside the program, not in it.
    cost, samples = observer.cost, observer.samples
    share = 100 * cost / wall if wall > 0 else 0.0
    each = 1e6 * cost / samples if samples else 0.0
    notes.append(
        f"the observer used {cost:.2f} s of CPU beside the program ({share:.0f} % of one "
        f"core), {each:.0f} µs a sample"
    )
    if observer.late:
        notes.append(f"{observer.late} samples came late and were skipped (a busy machine)")
    if rec.overflow:
        notes.append(f"stack table full: {rec.overflow} samples kept as outer frames")
    return notes


def run_observed(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Runs the program under the observer and writes its profile.

    :param args: the parsed options
    :param out: the output stream
    :param err: the error stream
    :return: the program's exit code (128 + N on signal N)
    """
    from .._observe.build import to_profile
    from .._observe.launch import observe_program, signal_ending
    from .._progress import elapsed_status
    from .._run.program import target_of
    from .._run.supervise import shell_code
    from .._sampling.aggregate import Aggregator
    from .._sampling.result import SamplingResult

    interval = check_sampled(args)
    fmt = resolve_format(args)
    if fmt not in SAMPLED_FORMATS:
        raise CommandError(f"--format {fmt} needs --cprofile", EXIT_USAGE)
    # Missing, not compiling: one line before anything starts, as run and the in-process
    # sampler say it (Python would print its error, and the profile its start-up).
    target = target_of(args)
    assert target is not None  # checked by cmd_profile
    target.check()
    argv = target.fresh()
    name = os.path.basename(target.name)
    status = elapsed_status(err, f"profiling {name}", args.quiet)
    with status:
        try:
            run = observe_program(argv, interval, Aggregator())
        except OSError as e:  # not found and not executable are CommandNotFound's
            raise CommandError(f"cannot start {argv[0]!r}: {e.strerror or e}") from e
    rec = run.record
    usage = run.rusage
    cpu = (usage.ru_utime + usage.ru_stime) if usage is not None else 0.0
    profile = to_profile(rec, interval, run.wall, args.program or name,
                         observer_notes(run), cpu, run.observer.samples)  # fmt: skip
    emit_profile(SamplingResult(profile), args, out, err)
    code, words = signal_ending(run) or (shell_code(run.status), ending_words(run.status))
    if code:  # said even with -q: the program failed (its own traceback is above)
        err.write(f"{name} {words}\n")
    return code


def ending_words(status: int) -> str:
    """How a program ended, in words: ``exited with code 3``, ``terminated by SIGTERM``.

    :param status: its wait status
    :return: the words
    """
    from .._errors import signal_name

    if os.WIFSIGNALED(status):
        return f"terminated by {signal_name(os.WTERMSIG(status))}"
    return f"exited with code {os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1}"


def attach_observer(args: argparse.Namespace, interval: float, sink: object) -> object:
    """Observes ``--pid`` until it ends, ``--duration`` passes or a signal comes.

    :param args: the parsed options
    :param interval: seconds between samples
    :param sink: its memory ticks' sink
    :return: an :class:`.._observe.attach.Attached`
    """
    from .._errors import ObserveError
    from .._observe.attach import check_duration, check_pid, observe_pid

    try:  # checked before anything runs (exit 2)
        pid = check_pid(args.pid)
        duration = check_duration(args.duration)
    except ValueError as e:
        raise CommandError(str(e), EXIT_USAGE) from e
    try:
        return observe_pid(pid, interval, sink, duration)
    except ObserveError as e:
        raise CommandError(f"--pid {pid}: {e}") from e


def attach_notes(attached: object) -> list[str]:
    """The notes of an attached observation.

    :param attached: an :class:`.._observe.attach.Attached`
    :return: sentences
    """
    from .._observe.attach import Attached
    from .._observe.session import describe

    assert isinstance(attached, Attached)
    ends = {"ended": "until it ended", "duration": "for --duration",
            "interrupted": "until interrupted"}  # fmt: skip
    notes = [
        f"collector: the observer, attached to process {attached.observer.root.pid} "
        f"{ends[attached.why]} ({describe(attached.target)})"
    ]
    return notes + reading_notes(attached.observer, attached.wall)


def run_attached(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``profile --pid PID``: the profile of a running process.

    :param args: the parsed options
    :param out: the output stream
    :param err: the error stream
    :return: 0
    """
    from .._observe.attach import Attached
    from .._observe.build import to_profile
    from .._sampling.aggregate import Aggregator
    from .._sampling.result import SamplingResult

    interval = check_sampled(args)
    if resolve_format(args) not in SAMPLED_FORMATS:
        raise CommandError("--pid profiles by sampling: --cprofile formats do not apply",
                           EXIT_USAGE)  # fmt: skip
    attached = attach_observer(args, interval, Aggregator())
    assert isinstance(attached, Attached)
    rec = attached.observer.root
    name = f"process {rec.pid}"
    cpu = sum(sum(r[2] for r in t.rows.values()) for t in rec.threads.values())
    profile = to_profile(rec, interval, attached.wall, name, attach_notes(attached), cpu,
                         attached.observer.samples)  # fmt: skip
    emit_profile(SamplingResult(profile), args, out, err)
    return 0
