"""``profile script.py`` / ``profile -m mod`` under the sampler (the default; ``--cprofile``
runs cProfile instead). The program runs as ``__main__`` exactly as under cProfile, with
the same guarantees (:mod:`.cmd_profile`, :mod:`.guard`): its exit code is returned, an
exception it raises is reported, and the profile is still delivered after ``os._exit``,
a closed stdout, SIGTERM or SIGHUP.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, TextIO

from .._run.program import Target, target_of
from .common import EXIT_ERROR, EXIT_USAGE, CommandError, emit_text, unknown_suffix
from .guard import Terminated, kept_output, terminating_signals

SAMPLED_FORMATS = ("text", "json", "html", "speedscope", "collapsed")


# A program to run: its code, its ``__main__`` module, its ``sys.argv``, its ``sys.path[0]``.
Program = tuple[types.CodeType, types.ModuleType, list[str], str]


def resolve_format(args: argparse.Namespace) -> str:
    """The output format: ``--format``, else guessed from ``-o``'s suffix, else text.

    :param args: the parsed options
    :return: a format of :data:`.._profiling.formats.FORMATS`
    :raises CommandError: exit code 2, an unknown suffix or a binary format without ``-o``
    """
    from .._profiling.formats import FORMATS, guess_format

    fmt: str = args.format if args.format is not None else guess_format(args.output or "", "")
    if not fmt:  # no suffix of ours (the package's one table): text for a bare name
        if os.path.splitext(args.output or "")[1]:
            raise unknown_suffix(args.output, FORMATS)
        fmt = "text"
    if FORMATS[fmt].binary and not args.output:
        raise CommandError(f"--format {fmt} writes a binary file and needs -o FILE", EXIT_USAGE)
    return fmt


def can_encode(stream: Any, text: str) -> bool:
    """Tells if ``stream`` can write ``text`` (its encoding, utf-8 if it has none)."""
    try:
        text.encode(getattr(stream, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def add_options(parser: argparse.ArgumentParser) -> None:
    """The sampler's options of ``profile``.

    :param parser: the ``profile`` parser
    """
    parser.add_argument(
        "--cprofile",
        action="store_true",
        help="profile with cProfile (exact call counts, the call graph) instead of sampling; "
        "implied by --view reference, --sort, --focus, --hide-stdlib, --min-share, "
        "--save and -o FILE.prof",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="sampling: seconds between samples (0.001 read by the observer, 0.002 in the "
        "program; at least 0.0001)",
    )
    parser.add_argument(
        "--timer",
        choices=("prof", "real", "thread"),
        default=None,
        help="the in-process sampler (given, it is chosen): what ticks, the CPU-time signal "
        "SIGPROF backed by a watchdog thread (prof, default), the wall-time SIGALRM (real) "
        "or a thread only (thread)",
    )
    parser.add_argument(
        "--pid",
        type=int,
        default=None,
        help="profile a process already running instead of starting one (read from "
        "outside: it is not stopped or changed), until it ends, --duration passes or "
        "Ctrl-C",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --pid: stop after this many seconds",
    )
    parser.add_argument(
        "--collector",
        choices=("auto", "observer", "in-process"),
        default="auto",
        help="sampling: who reads the stacks: the observer, another process reading the "
        "program from outside (nothing of this tool in the program; the right line inside "
        "C calls), or the in-process sampler (signal handlers and a thread in the "
        "program); auto (default) takes the observer where this machine allows it",
    )
    parser.add_argument(
        "--show-library",
        action="store_true",
        help="the call tree (sampled or --cprofile): show every library frame (no folding "
        "of the standard library and installed packages)",
    )


def uses_cprofile(args: argparse.Namespace) -> bool:
    """Whether the options ask for cProfile (explicitly or through a cProfile-only
    option).

    :param args: the parsed options
    :return: True for cProfile
    """
    if args.cprofile or args.view == "reference" or args.target == "show":
        return True
    # Saved profiles (and their comparisons) hold cProfile's exact per-function figures.
    if getattr(args, "save", None) is not None:
        return True
    if args.sort != "cumulative" or args.focus or args.hide_stdlib or args.min_share:
        return True
    try:
        return resolve_format(args) == "prof"
    except CommandError:
        return False  # reported by the caller


def check_combinations(args: argparse.Namespace, cprofile: bool) -> Target | None:
    """Refuses the options ``profile`` would ignore together (exit 2, before any work).

    :param args: the parsed options
    :param cprofile: cProfile was asked for, or implied
    :return: the program or the process (:func:`.._run.program.target_of`), None for none
    """
    from .common import refuse_ignored

    traced = "--cprofile (given, or implied by --view reference, --sort, --focus, "
    traced += "--hide-stdlib, --min-share, -o FILE.prof) traces every call"
    target = target_of(args)  # the rules of --pid and --duration
    pid, observer = args.pid is not None, args.collector == "observer"
    refuse_ignored([
        (pid and cprofile, f"--pid is sampled from outside, and {traced} of a program it starts"),
        (cprofile and observer, f"--collector observer samples, and {traced}: drop one"),
        (cprofile and args.interval is not None,
         f"--interval is the sampler's, and {traced}: drop one"),
        (cprofile and args.timer is not None, f"--timer is the sampler's, and {traced}: drop one"),
        (args.timer is not None and (observer or pid),
         "--timer is the in-process sampler's: the observer reads the program from outside "
         "on its own clock (drop --timer, or give --collector in-process)"),
    ])  # fmt: skip
    if args.repeat is None and args.clock is not None and not cprofile:
        args.rank, args.clock = args.clock, None  # one sampled run: what ranks the rows
    return target


def observer_reason(args: argparse.Namespace, extra: str = "") -> str:
    """Why the observer will not run (empty when it will): :func:`.._observe.session.choose`.

    :param args: the parsed options
    :param extra: another reason the program must be sampled inside ('' if none)
    :return: the reason in words
    """
    from .._observe.session import choose

    timer = getattr(args, "timer", None)  # what ticks in the program: its sampler
    inside = f"--timer {timer} (the in-process sampler's)" if timer is not None else extra
    try:
        return choose(getattr(args, "collector", "auto"), inside, name="--collector").why
    except ValueError as e:
        raise CommandError(str(e)) from None


def check_sampled(args: argparse.Namespace) -> float:
    """Checks the sampler's options before the program runs.

    :param args: the parsed options
    :return: the interval
    """
    from .._sampling.rates import DEFAULT_INTERVAL, OBSERVER_INTERVAL, check_interval

    # None given: the observer's (1 ms) when it runs, the in-process sampler's (2 ms) else.
    inside = getattr(args, "collector", "auto") == "in-process" or getattr(
        args, "collector_note", ""
    )
    interval = args.interval
    if interval is None:
        interval = DEFAULT_INTERVAL if inside else OBSERVER_INTERVAL
    try:
        return check_interval(interval, "--interval")
    except ValueError as e:
        raise CommandError(str(e), EXIT_USAGE) from e


def _emit(result: Any, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    fmt = resolve_format(args)
    opts: dict[str, Any] = {}
    if fmt in ("text", "json", "html"):
        opts = {"fold_share": args.fold_share, "show_all": args.show_library}
    rank = getattr(args, "rank", None) or "wall"
    if fmt == "html" and rank == "cpu":
        opts["order"] = by_cpu
    if fmt == "text":
        opts["max_depth"] = args.max_depth
        opts["rank"] = rank
        if args.output is None and not can_encode(sys.stdout, "├─│└"):
            opts["guides"] = "ascii"
    render: Callable[..., str] = getattr(result, f"to_{fmt}")
    text = render(**opts)
    if emit_text(text, args.output, out) and not args.quiet:
        err.write(f"profile written to {args.output} ({fmt})\n")
    if args.output is not None or fmt != "text":  # else the text printed holds them
        for note in result.profile.notes:
            err.write(f"note: {note}\n")


def by_cpu(row: Any) -> float:
    """The order of ``--clock cpu``: the rows that used the most CPU first."""
    return float(-row.cpu)


def run_sampled(program: Program, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Runs the program under the sampler and writes its profile (see :func:`run_profiled`).

    :return: the exit code
    """
    interval = check_sampled(args)
    fmt = resolve_format(args)
    if fmt not in SAMPLED_FORMATS:
        raise CommandError(f"--format {fmt} needs --cprofile", EXIT_USAGE)
    from .._report.sampling import Sampling

    # Chosen, or taken where the observer cannot run: its first note says which and why.
    name = args.program or os.path.basename(program[2][0])
    sampler = Sampling(interval, args.timer or "prof", program=name, collector="in-process")
    why = getattr(args, "collector_note", "")
    if why:
        from .._observe.session import Choice

        sampler.note = Choice(False, why).note()

    def emit(result: Any, stream: TextIO) -> bool:
        _emit(result, args, stream, err)
        return True

    return run_profiled(program, args, out, err, sampler, emit)


def run_profiled(
    program: Program,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    profiler: Any,
    emit: Callable[[Any, TextIO], bool],
) -> int:
    """Runs the program in this process under a profiler (the sampler, cProfile) and
    delivers its profile whatever happens: an exception (reported), ``os._exit`` (from
    the program's thread), a closed stdout, SIGTERM or SIGHUP (128 + N).

    :param program: its code, its ``__main__`` module, ``sys.argv`` and ``sys.path[0]``
    :param args: the parsed options (``quiet``)
    :param out: the output stream
    :param err: the error stream
    :param profiler: ``start(skip_outer)`` (the frames above the program's to leave out)
        and ``stop()`` (the profile; again: the same)
    :param emit: writes a profile to a stream, False when it could not be written
    :return: the exit code
    """
    from .._progress import elapsed_status
    from .._run.program import as_main, before_os_exit, exit_code, report_raised
    from .._sampling.frames import depth

    code, module, argv, path0 = program
    name = os.path.basename(argv[0])
    status = elapsed_status(err, f"profiling {name}", args.quiet)
    ident = threading.get_ident()

    def on_os_exit(code: int) -> None:
        try:
            if threading.get_ident() != ident:
                err.write(f"error: {name} called os._exit({code}) from a thread: "
                          "the profile was not written\n")  # fmt: skip
                return
            try:
                emit(profiler.stop(), out)
            except CommandError as e:  # os._exit would swallow it: say where it went
                err.write(f"error: {e}\n")
            err.write(f"{name} exited with os._exit({code})\n")
        finally:
            out.flush()  # os._exit flushes nothing
            err.flush()

    failure: BaseException | None = None
    with kept_output(out) as kept, terminating_signals(interrupts=True) as signals:
        with status, as_main(module, argv, path0), before_os_exit(on_os_exit):
            # The root of the main thread's tree is the program's <module>.
            profiler.start(depth(sys._getframe()))
            try:
                exec(code, module.__dict__)
            except BaseException as e:  # handled below, with the profiler stopped
                failure = e
            finally:
                result = profiler.stop()
                signals.program_over()
        rc = exit_code(failure, err) if isinstance(failure, SystemExit) else 0
        failure = None if isinstance(failure, SystemExit) else failure
        with kept.stream(err) as stream:
            shown = emit(result, stream)
    if isinstance(failure, KeyboardInterrupt):
        raise failure
    if signals.exit_code is not None:
        why = failure if isinstance(failure, Terminated) else Terminated(signals.received[0])
        err.write(f"{name} {why}\n")
        return signals.exit_code
    if failure is not None:
        return report_raised(name, failure, err)
    if rc and not args.quiet:
        err.write(f"{name} exited with code {rc}\n")
    return rc if rc or shown else EXIT_ERROR
