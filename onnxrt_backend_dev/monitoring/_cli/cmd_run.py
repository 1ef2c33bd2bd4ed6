"""``run``: runs a program once under the report's ticks and the memory spy and writes
one report: time, memory and GPU, exact peak and where it was built.

``run [options] script.py [args...]``, ``run [options] -m module [args...]`` and
``run [options] -- COMMAND [args...]`` (any other program: its process tree's memory,
no stacks). The program runs in a child process, a fresh interpreter (its memory is the
program's, not this command's), while this process records what it streams, so the
report is written even when the program is killed (SIGKILL, a segfault, ``os._exit``).
"""

from __future__ import annotations

import argparse
import os
from typing import Any, TextIO

from .._run.program import Target, target_of
from .common import (
    ALLOC_DEFAULT,
    EXIT_USAGE,
    CommandError,
    alloc_size,
    check_alloc_switch,
    check_outputs,
    check_probes_open,
    emit_text,
    program_inputs,
    unknown_suffix,
)

_FORMATS = ("text", "json", "html")
_MISSING = "give a script, -m module, -- COMMAND, or --pid PID"
_REPEAT_HELP = (
    "run the program N times, each a run of its own in a child process (its output "
    "discarded, the end of its stderr shown if it fails); the report shown is the run of "
    "the median wall time, --save keeps every run (for compare)"
)
_EPILOG = (
    "The program runs as __main__ with its own sys.argv in a fresh interpreter; this process "
    "receives its ticks as they are taken and writes the report in every case: a normal "
    "exit, an exception, SIGINT (130), SIGTERM (143) or SIGHUP (129) forwarded to it, and "
    "also when it dies without a word (SIGKILL from the OOM killer 137, a segfault 139, "
    "os._exit), naming then the code that was allocating at the end. The exit code is "
    "the program's. The report goes to stdout (a summary of at most 30 lines) unless -o "
    "is given (its format guessed from the suffix: .html, .json, .txt), the summary then "
    "going to stderr unless -q. Before the program runs, a usage error or an -o that "
    "cannot be written (or is an input) exits with 2; an -o failing after the run exits "
    "with 1, the report saved in a file named on stderr. --save FILE.json keeps the "
    "figures of the run (wall time, exact peak, each function's time and memory growth) "
    "for compare; --repeat N runs the program N times, each in a child process (killed "
    "past --timeout, no new run after --max-time), shows the report of the median run "
    "and saves them all."
)


def _format(args: argparse.Namespace) -> str:
    if args.format is not None:
        return str(args.format)
    from .._errors import BadValue
    from .._export import guess_format

    try:  # the package's one table of suffixes; a name without one is text
        return guess_format(args.output or "", _FORMATS, default="text")
    except BadValue:
        raise unknown_suffix(args.output, _FORMATS) from None


def _check(args: argparse.Namespace) -> Target:
    """Refuses bad options and an unwritable -o before anything runs; returns the
    program."""
    from .._sampling.rates import check_interval
    from .profile_repeat import wants_repeat
    from .save_result import check_save

    try:
        check_interval(args.interval, "--interval", minimum=0.001)
    except ValueError as e:
        raise CommandError(str(e), EXIT_USAGE) from None
    target = target_of(args, commands=True, missing=_MISSING)
    assert target is not None
    if target.kind == "pid" and args.save is not None:
        raise CommandError("--save keeps the runs of a program started here", EXIT_USAGE)
    check_alloc_switch(args)
    if args.probe:  # the registry only when a probe is named
        from .._memory.registry import get_spec

        for name in args.probe:
            try:
                get_spec(name)
            except ValueError as e:
                raise CommandError(f"--probe {name!r}: {e}", EXIT_USAGE) from None
        check_probes_open(args.probe)
    _format(args)
    if target.kind == "command":
        target.check()  # 127 or 126 and one line, as a shell and spy say
    if args.output is not None:
        check_outputs({"-o": args.output}, inputs=program_inputs(args))
        args.output = os.path.abspath(args.output)  # the program may change folder
    if args.save is not None and args.output is not None:  # --save is never -o
        check_outputs({"-o": args.output, "--save": args.save}, suffixes={"--save": (".json",)})
    check_save(args, program_inputs(args))
    wants_repeat(args)
    return target


def _collector_said(report: Any, args: argparse.Namespace) -> Any:
    """The report with its first note saying the in-process recorder ran, and why."""
    why = getattr(args, "collector_note", "")
    if not why:
        return report
    import dataclasses

    from .._observe.session import Choice
    from .._report.session import FALLBACK

    note = Choice(False, why).note(FALLBACK)
    return dataclasses.replace(report, notes=(note, *report.notes))


def _split(names: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The probes read beside the program, and those read inside it (torch's counters)."""
    if not names:
        return (), ()
    from .._memory.registry import split_probes

    return split_probes(names)


def render(report: Any, fmt: str) -> str:
    """The report in a format of ``_FORMATS``."""
    if fmt == "json":
        from .._report.render_json import to_json

        return to_json(report, indent=1) + "\n"
    if fmt == "html":
        from .._report.render_html import to_html

        return to_html(report)
    from .._report.render_text import to_text

    return to_text(report)


class RunCommand:
    """The ``run`` subcommand."""

    name = "run"
    help = "run a program once and report its time, memory and GPU on one page"
    #: The program runs in a child process, never in this one (see :func:`.dispatch.main`).
    user_code_in_process = False

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Declares the options."""
        parser.usage = (
            "%(prog)s [options] script.py [args...] | -m module [args...] | -- COMMAND [args...]"
        )
        parser.epilog = _EPILOG
        parser.add_argument("-o", "--output", metavar="FILE", default=None, help="write to FILE")
        parser.add_argument("--format", choices=_FORMATS, default=None, help="text, json, html")
        parser.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
        parser.add_argument(
            "--interval", type=float, default=0.005, metavar="SECONDS",
            help="seconds between two ticks (0.005)",
        )  # fmt: skip
        parser.add_argument(
            "--probe", action="append", default=[], metavar="NAME",
            help="a device probe to read beside the process (nvml), repeatable",
        )  # fmt: skip
        parser.add_argument(
            "--alloc-sample", type=alloc_size, default=ALLOC_DEFAULT, metavar="SIZE",
            help="track the program's allocations (a small shim loaded into it): one "
            "sampled allocation per SIZE allocated bytes on average (256KiB); 1 records "
            "every allocation, 0 turns tracking off (also ONNXRT_MONITORING_ALLOC=0)",
        )  # fmt: skip
        parser.add_argument(
            "--pid", type=int, default=None,
            help="report on a process already running instead of starting one (read from "
            "outside: not stopped, not changed), until it ends, --duration passes or Ctrl-C",
        )  # fmt: skip
        parser.add_argument(
            "--duration", type=float, default=None, metavar="SECONDS",
            help="with --pid: stop after this many seconds",
        )  # fmt: skip
        parser.add_argument(
            "--collector", choices=("auto", "observer", "in-process"), default="auto",
            help="who records: the observer, another process reading the program from "
            "outside (nothing of this tool in the program), or the in-process recorder "
            "(signal handlers in the program); auto (default) takes the observer where "
            "this machine allows it",
        )  # fmt: skip
        parser.add_argument(
            "-m", dest="module", nargs=argparse.REMAINDER, default=None,
            help="run a module as a script, the rest is its arguments",
        )  # fmt: skip
        self._add_save_and_repeat(parser)
        parser.add_argument("target", nargs="?", default=None, help="the script or command")
        parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")

    @staticmethod
    def _add_save_and_repeat(parser: argparse.ArgumentParser) -> None:
        from .profile_repeat import add_repeat_options
        from .save_result import add_save_options

        add_save_options(parser)
        add_repeat_options(parser, clock=False, repeat_help=_REPEAT_HELP)

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Runs the program and writes the report: SIGINT, SIGTERM and SIGHUP are
        recorded from the start to the end (the supervisor forwards them to the program;
        one coming while the command starts stops the program before its first line, one
        coming while the report is written does not lose it)."""
        from .._run.signals import Signals

        with Signals():
            return self._run(args, out, err)

    def _run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        from .profile_sampled import observer_reason
        from .run_repeat import run_repeated_reports, save_run

        target = _check(args)
        if target.kind == "pid":
            from .run_observed import run_attached

            return run_attached(args, lambda report: self._emit(report, args, out, err))
        if not hasattr(os, "fork"):
            raise CommandError("run needs os.fork (Linux, macOS)")
        if args.repeat is not None:
            return run_repeated_reports(args, out, err, self._emit)
        spy_side, inside = _split(args.probe)
        extra = f"--probe {inside[0]} reads counters inside the program" if inside else ""
        # Where the observer cannot run, the in-process recorder does, saying why.
        args.collector_note = observer_reason(args, extra)
        main = target.check() if target.python else None  # a command was checked
        name = target.shown

        def emit(report: Any) -> None:
            self._emit(report, args, out, err)
            save_run(args, [report], main)

        if not args.collector_note:
            from .run_observed import run_observed

            return run_observed(args, target, err, emit)
        from .._report.runner import run_command, run_fresh  # the in-process recorder's
        from .run_child import command_line

        if not target.python:
            report, rc = run_command(target.argv(), name, args.probe)
            emit(report)
            return rc

        def command_of(fd: int) -> list[str]:
            return command_line(fd, args.interval, target)

        from .._memory.registry import get_spec
        from .._report.child import INPROCESS_ENV

        # The probes read inside the program (torch's counters) are opened by the child,
        # which learns them from its environment (see _report.child.record).
        inner = ";".join(get_spec(n).to_arg() for n in inside)
        env = {**os.environ, INPROCESS_ENV: inner} if inner else None
        report, rc = run_fresh(command_of, name, args.interval, spy_side, env)
        emit(_collector_said(report, args))
        return rc

    def _emit(self, report: Any, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        fmt = _format(args)
        text = render(report, fmt)
        if emit_text(text, args.output, out) and not args.quiet:
            if fmt != "text":  # the summary still reaches the terminal
                emit_text(render(report, "text"), None, err)
            err.write(f"report written to {args.output} ({fmt})\n")


COMMAND = RunCommand()
