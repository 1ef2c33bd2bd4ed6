"""``spy --where script.py [args]`` and ``spy --where -m module [args]``: the program runs
in this process, as ``profile`` runs one, under a memory spy with ``stacks=True``.

In-process, not in a child: the stack sampler must run inside the program, and the spy
attached to this process still resets its kernel high-water mark, so the peaks stay
exact. What this process held before the program ran (the tool itself, a few tens of
MiB) is ``begin``. The program runs as ``__main__`` with its own ``sys.argv``; its exit
code is returned (``sys.exit``), 1 if it raised (its traceback goes to stderr), and the
measure is reported either way. Ctrl-C stops the program and the measure, reported and
written as asked, then exits with 130.
"""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Callable
from typing import Any, TextIO

from .common import EXIT_USAGE, CommandError


def flame_format(path: str) -> str:
    """``speedscope`` for ``*.json`` (a flame graph in JSON is speedscope's), ``collapsed``
    otherwise (``.collapsed``, ``.folded``, ``.txt``...), from the package's one table of
    suffixes (``_export.SUFFIXES``).

    :param path: the --flame file
    :return: the format
    """
    from .._errors import BadValue
    from .._export import guess_format

    try:
        fmt = guess_format(path, ("speedscope", "json", "collapsed"))
    except BadValue:
        return "collapsed"
    return "speedscope" if fmt == "json" else fmt


def check_where_args(cmd: list[str], args: argparse.Namespace) -> None:
    """Refuses the options --where does not go with, before anything runs.

    :param cmd: the positional arguments (script and its arguments)
    :param args: the parsed options
    """
    if not args.where:
        for option, value in (("-m", args.module), ("--flame", args.flame)):
            if value:
                raise CommandError(f"{option} needs --where", EXIT_USAGE)
        return
    if args.pid is not None:
        raise CommandError("--where runs a Python program: it does not go with --pid", EXIT_USAGE)
    if args.module is not None and cmd:
        raise CommandError("give either --where script.py or --where -m module", EXIT_USAGE)
    if args.module is not None and not args.module:
        raise CommandError("-m needs a module name", EXIT_USAGE)
    if not cmd and not args.module:
        raise CommandError("--where needs script.py [args] or -m module [args]", EXIT_USAGE)
    if args.top < 1:
        raise CommandError(f"--top must be >= 1, got {args.top}", EXIT_USAGE)


def run_where(
    cmd: list[str],
    args: argparse.Namespace,
    err: TextIO,
    status: Callable[[Any, str, argparse.Namespace, TextIO], Any],
    report: Callable[[Any, int, str], None],
) -> tuple[Any, int, str]:
    """Runs the program under the spy with ``stacks=True``.

    :param cmd: the script and its arguments (empty with ``-m``)
    :param args: the parsed options
    :param err: the error stream (the program's traceback, the status line)
    :param status: makes the live status line for a spy
    :param report: prints and writes the measure ``(result, exit code, what)``; called
        here only when the program ends with ``os._exit`` (nothing returns then)
    :return: the spy's result, the exit code, what was spied on
    """
    from .._memory.spy import MemorySpy
    from .._run.program import Target, as_main, before_os_exit
    from .guard import terminating_signals

    if args.module:
        target = Target("module", args.module[0], tuple(args.module[1:]))
    else:
        target = Target("script", cmd[0], tuple(cmd[1:]))
    code, module, argv, path0 = target.code()
    what = f"{target.kind}: {target.name}"
    name = os.path.basename(argv[0])
    shim, why = _start_alloc(args)
    try:
        spy = MemorySpy(
            os.getpid(),
            delay=args.delay,
            cuda=args.cuda,
            include_children=args.children,
            stacks=True,
            probes=tuple(args.probe),
            alloc=shim or "",
        )
    except BaseException:
        _stop_alloc(shim)
        raise

    def on_os_exit(rc: int) -> None:
        # os._exit ends the process at once: the measure is reported before it does.
        if threading.get_ident() == ident:
            err.write(f"{name} exited with os._exit({rc})\n")
            report(spy.stop(), rc, what)
        err.flush()

    ident = threading.get_ident()
    failure: BaseException | None = None
    # SIGTERM and SIGHUP end the program as an exception, SIGINT as KeyboardInterrupt
    # (once: a second one milliseconds later is only recorded); once the program is over
    # they are recorded, so the measure is still reported and written, then the command
    # exits with 128 + signum (as profile does).
    with terminating_signals(interrupts=True) as signals:
        try:
            with (
                status(spy, what, args, err),
                as_main(module, argv, path0),
                before_os_exit(on_os_exit),
            ):
                try:
                    if signals.first is None:  # else received while the spy started
                        exec(code, module.__dict__)
                except BaseException as e:  # reported below, once the measure is taken
                    failure = e
                finally:
                    signals.program_over()
        finally:
            if signals.first is not None:
                spy.note_signal(signals.first)
            result = spy.stop()  # also on Ctrl-C: the sampler thread must not outlive it
            _stop_alloc(shim)
            _attach_allocations(result, spy, code, why)
    return (result, _ending(name, signals.received, failure, err), what)


def _ending(name: str, received: list[int], failure: BaseException | None, err: TextIO) -> int:
    """The exit code of the program, said on ``err`` when it did not end by itself: 128 + N
    for SIGTERM or SIGHUP, 130 when Ctrl-C ended it (or came once it was over)."""
    import signal

    from .._errors import Terminated
    from .._run.program import exit_code, report_raised

    ending = [s for s in received if s != signal.SIGINT]
    if ending:
        err.write(f"{name} {Terminated(ending[0])}\n")
        return 128 + ending[0]
    if isinstance(failure, SystemExit):
        return exit_code(failure, err)
    if isinstance(failure, KeyboardInterrupt) or received:  # what was measured is reported
        err.write(f"{name} interrupted\n")
        return 130
    if failure is not None:
        return report_raised(name, failure, err)
    return 0


def _start_alloc(args: argparse.Namespace) -> tuple[str | None, str]:
    """Starts sampling this process's allocations (the program runs here), read by the
    spy's observer; ``(None, why)`` when it cannot (or ``--alloc-sample 0``)."""
    mean = int(getattr(args, "alloc_sample", 0) or 0)
    if mean <= 0:
        return None, ""
    from .._alloc.block import start_sampling
    from .._observe.session import choose

    found = choose()
    if not found.observer:
        return None, f"allocation tracking off: {found.why}"
    return start_sampling(mean)


def _stop_alloc(shim: str | None) -> None:
    if shim is not None:
        from .._alloc.block import stop_sampling

        stop_sampling()


# Why ``spy --where``'s heap peak can be lower than ``run``'s (as memray's is).
NOT_SEEN = (
    "allocations are followed once the program's libraries are loaded: what a library "
    "allocates while it loads (OpenBLAS maps a 64 MiB buffer) is not seen, as with "
    "memray; run, loading the shim first, sees it"
)


def _attach_allocations(result: Any, spy: Any, code: Any, why: str) -> None:
    """What is live at the peak of the program's allocations, by line, into the result
    (``result["allocations"]``, a :class:`.._report.model.Allocations`), the stacks cut
    at the program's code (the tool's own allocations left out)."""
    observed = spy.observed or {}
    doc = observed.get("allocations")
    if doc is None:
        if why:
            result["allocations_note"] = why
        return
    from .._alloc.report import facts_from_doc
    from .._memory.observed import root_key, stacks_of
    from .._report.allocations import build_allocations

    facts = facts_from_doc(doc, stacks_of(observed, root_key(code)))
    if facts is not None:
        facts = facts._replace(notes=(*facts.notes, NOT_SEEN))
        result["allocations"] = build_allocations(facts)


def write_flame(result: Any, path: str) -> None:
    """Writes the memory flame graph (collapsed or speedscope, see :func:`flame_format`).

    :param result: the spy's result, sampled with stacks
    :param path: the file
    """
    from .._memory.where import where_collapsed, where_speedscope

    where = result["cpu"].where
    if where is None:
        return
    speedscope = flame_format(path) == "speedscope"
    text = where_speedscope(where) if speedscope else where_collapsed(where)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
