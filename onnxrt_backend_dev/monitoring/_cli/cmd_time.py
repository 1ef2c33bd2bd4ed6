"""``time``: measures a statement from the command line, as ``python -m timeit`` does.

Without ``-n``, the batch size is calibrated as timeit does (1, 2, 5, 10... executions
until a batch lasts at least 0.2 s) and 5 batches are timed; ``-n`` and ``-r`` are
obeyed exactly; ``-t`` times batches until a budget is spent. Prints one line such as
``cos(0.5): 24.1 ns ± 0.6 ns (median 24.0 ns, min 23.7 ns; 5 x 5,000,000 runs,
calibrated)``, or the result of ``measure_time`` and the numbers used as JSON with
``--json``. SIGTERM, SIGHUP or Ctrl-C stop it and print what was measured so far.

The current folder comes first on ``sys.path``, as ``python -m timeit`` has it, so that
``-s "import mymodel"`` finds ``./mymodel.py`` from the console script too. ``-s`` runs
before every batch (timeit's meaning); ``--setup-once`` runs once per process, before the
warmup, and its names are the globals of the statement and of ``-s`` (load a model once,
time its inference). ``--clock cpu`` times the process's CPU time instead of wall time; ``--counter
instructions`` counts the instructions of one execution under valgrind instead
(:mod:`.time_counted`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from .._errors import ClockError
from .._format import format_duration, format_duration_like

# Standard library only, light: imported with the command.
from ..benchmark import CompareProgress, Progress, compare, format_comparison, measure_time
from .common import EXIT_USAGE, CommandError
from .guard import Terminated, terminating_signals
from .save_result import add_save_options, check_save, save_timing

# A live status is worth it only for long runs.
_LIVE_STATUS_MIN_SECONDS = 5.0
# Above this max/min ratio the result is flagged: the machine was busy or the statement
# caches something.
_UNSTABLE_RATIO = 4.0
# Calibrated runs time this many batches (of at least 0.2 s), as python -m timeit does.
_CALIBRATED_REPEAT = 5
# Comparisons: batches per statement when -r is not given.
_COMPARE_REPEAT = 20
# How a statement of a comparison is named in an error.
_SIDES = ("the first statement", "the --compare statement")
# --clock: what each name times.
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def _counts(res: Mapping[str, Any]) -> str:
    """How many batches and executions were timed: ``10 x 50 runs`` for fixed batches,
    ``1,234 runs in 57 batches, 1.00 s measured`` for a budget, then ``in 10 processes``
    when several timed them (``--processes``)."""
    processes = int(res.get("processes", 1))
    where = f" in {processes} processes" if processes > 1 else ""
    if res.get("max_time") is not None:
        runs, batches = int(res.get("runs", 0)), int(res.get("batches", res["repeat"]))
        cpu = " of CPU time" if res.get("clock") == "cpu" else ""
        return (
            f"{runs:,} runs in {batches:,} batches{where}, "
            f"{format_duration(float(res.get('total_time', res['ttime'])))}{cpu} measured"
        )
    repeat, batches = int(res["repeat"]), int(res.get("batches", res["repeat"]))
    text = f"{batches:,} x {int(res['number']):,} runs{where}"
    if batches > repeat:  # past 65,536 batches the statistics read a sample of them
        text += f", statistics on {repeat:,} evenly spaced"
    text = text + ", calibrated" if res.get("calibrated") else text
    return text + ", CPU time" if res.get("clock") == "cpu" else text


def format_line(name: str, res: Mapping[str, Any]) -> str:
    """One line for a result of ``measure_time``.

    :param name: what was timed
    :param res: the result, with ``max_time`` (the budget or None) and ``calibrated``
        (the batch size was calibrated) when known
    :return: ``name: average ± deviation (median ..., min ...; repeat x number runs)``
    """
    avg = format_duration(float(res["average"]))
    name = name.replace("\n", "\\n")  # a multi-line statement stays on one line
    return (
        f"{name}: {avg} ± {format_duration_like(float(res['deviation']), avg)} "
        f"(median {format_duration_like(float(res['median']), avg)}, "
        f"min {format_duration_like(float(res['min_exec']), avg)}; {_counts(res)})"
    )


@dataclass
class _Stop:
    """The signal that ended a measure early, None if it ran to the end."""

    signum: int | None = None


@contextmanager
def _measuring(what: Any) -> Iterator[_Stop]:
    """Runs a measure: SIGTERM, SIGHUP and Ctrl-C end it early (recorded, what was timed
    so far is kept); the user's code failing becomes one line, never a traceback.

    :param what: names the statement(s) in the error, e.g. ``"the statement"``, or a
        callable returning that name once the error happened (which of two failed)
    :return: where the signal that ended the measure is recorded
    """
    stop = _Stop()
    try:
        # The handlers profile uses: SIGTERM and SIGHUP raise Terminated in the statement.
        with terminating_signals(interrupts=True) as signals:
            try:
                yield stop
            finally:
                signals.program_over()
    except ClockError:
        raise
    except (Terminated, KeyboardInterrupt) as e:
        stop.signum = e.signum if isinstance(e, Terminated) else signal.SIGINT
    except (Exception, SystemExit) as e:  # the user's code failed (or left): one line
        name = what() if callable(what) else what
        raise CommandError(f"{name} raised {type(e).__name__}: {e}") from e


def _option_errors(args: argparse.Namespace) -> None:
    """Refuses option values before anything runs; the message names the option."""
    checks = [
        ("-r/--repeat", args.repeat, 2 if args.compare is not None else 1),
        ("-n/--number", args.number, 1),
        ("-w/--warmup", args.warmup, 0),
    ]
    for option, value, minimum in checks:
        if value is not None and value < minimum:
            why = " with --compare (a test needs two batches a side)" if minimum == 2 else ""
            raise CommandError(f"{option} must be >= {minimum}{why}, got {value}", EXIT_USAGE)
    if args.max_time is not None and not 0 < args.max_time < float("inf"):
        raise CommandError(f"-t/--max-time must be > 0 and finite, got {args.max_time}", EXIT_USAGE)
    if args.processes < 1:
        raise CommandError(f"-p/--processes must be >= 1, got {args.processes}", EXIT_USAGE)
    if args.processes > 1 and args.compare is not None:
        raise CommandError(
            "-p/--processes cannot be combined with --compare (which interleaves the two "
            "statements in one process); time each with --processes --save, then compare",
            EXIT_USAGE,
        )
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise CommandError(f"--timeout must be > 0 and finite, got {args.timeout}", EXIT_USAGE)


def _compiled(args: argparse.Namespace, setup: str | None) -> None:
    """Compiles the user's code first: a syntax error is the user's text (named by its
    option), not something the statement raised."""
    codes = [
        ("the statement", args.stmt),
        ("--compare STMT2", args.compare),
        ("--setup", setup),
        ("--setup-once", _setup_once_code(args)),
    ]
    for name, code in codes:
        if code is None:
            continue
        try:
            compile(code, "<stmt>", "exec")
        except SyntaxError as e:
            where = f" (line {e.lineno})" if e.lineno else ""
            raise CommandError(f"SyntaxError in {name}: {e.msg}{where}") from None
        except (MemoryError, RecursionError):  # the parser's own limits
            raise CommandError(f"{name} is too deeply nested to compile") from None


def _setup_once_code(args: argparse.Namespace) -> str | None:
    """The ``--setup-once`` code (its repetitions joined), None without it."""
    return "\n".join(args.setup_once) or None


@contextmanager
def _current_folder_on_path() -> Iterator[None]:
    """Puts the current folder first on ``sys.path`` for the command's duration, as
    ``python -m timeit`` does (the console script's ``sys.path[0]`` is its own ``bin``
    folder), and takes it back out afterwards (the command may run inside a program)."""
    folder = os.getcwd()
    present = any(os.path.abspath(p or os.curdir) == folder for p in sys.path)
    if not present:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if not present and folder in sys.path:
            sys.path.remove(folder)


def _timing(args: argparse.Namespace, setup: Any, progress: Any, repeat: int) -> dict[str, Any]:
    """The keywords of ``measure_time`` and ``compare`` the options give (``repeat``: the
    batches without ``--repeat``)."""
    return {
        "clock": CLOCKS[args.clock], "repeat": args.repeat or repeat, "number": args.number or 1,
        "warmup": args.warmup, "max_time": args.max_time, "setup": setup, "progress": progress,
        "calibrate": args.max_time is None and args.number is None,
    }  # fmt: skip


def _setup_once(args: argparse.Namespace, err: TextIO) -> tuple[dict[str, Any] | None, int | None]:
    """Runs ``--setup-once`` once, in a fresh namespace: the globals of what is timed.

    :return: the namespace (None without ``--setup-once``), and the exit code when a
        signal stopped it (None otherwise)
    """
    code = _setup_once_code(args)
    if code is None:
        return None, None
    namespace: dict[str, Any] = {"__name__": "__main__"}
    with _measuring("--setup-once") as stop:  # what it raises becomes one line
        exec(compile(code, "<setup-once>", "exec"), namespace)
    if stop.signum is None:
        return namespace, None
    err.write(f"interrupted by {signal.Signals(stop.signum).name} in --setup-once\n")
    return namespace, _exit_code(stop.signum)


def _exit_code(stopped: int | None) -> int:
    """0, or 128 + the signal that stopped the timing (the shell's convention)."""
    return 0 if stopped is None else 128 + stopped


class TimeCommand:
    """The ``time`` subcommand."""

    name = "time"
    help = "measure how long a Python statement takes (like python -m timeit)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Declares the options."""
        parser.add_argument("stmt", help="the statement to time, e.g. 'cos(0.5)'")
        parser.add_argument(
            "-s",
            "--setup",
            action="append",
            default=[],
            help="setup code run before each batch, not timed (repeatable), as timeit's -s",
        )
        parser.add_argument(
            "--setup-once",
            action="append",
            default=[],
            metavar="CODE",
            help="setup code run once per process before timing (repeatable): its names "
            "are the statement's globals, e.g. load a model once and time its inference",
        )
        parser.add_argument(
            "-r",
            "--repeat",
            type=int,
            default=None,
            help=f"batches ({_CALIBRATED_REPEAT}, {_COMPARE_REPEAT} with --compare)",
        )
        parser.add_argument(
            "-n",
            "--number",
            type=int,
            default=None,
            help="executions per batch (default: as timeit, enough for a batch to last 0.2 s)",
        )
        parser.add_argument(
            "-w", "--warmup", type=int, default=1, help="executions before timing (1)"
        )
        parser.add_argument(
            "-t",
            "--max-time",
            type=float,
            default=None,
            metavar="SECONDS",
            help="time batches until this many seconds are measured (-r and -n are ignored)",
        )
        parser.add_argument(
            "--clock",
            choices=sorted(CLOCKS),
            default=None,
            help="wall: elapsed time (time.perf_counter, the default); cpu: the process's "
            "CPU time, every thread counted (time.process_time)",
        )
        parser.add_argument(
            "--counter",
            choices=("instructions",),
            default=None,
            help="count the instructions of one execution under valgrind instead of timing "
            "it (fresh interpreters, about 10 s a statement): the same count whatever the "
            "machine's load, one count a side decides a comparison; it cannot see waiting",
        )
        parser.add_argument(
            "--compare",
            metavar="STMT2",
            default=None,
            help="also time STMT2 interleaved with STMT and tell which is faster",
        )
        parser.add_argument(
            "-p",
            "--processes",
            type=int,
            default=1,
            metavar="N",
            help="time the statement in N fresh processes, one after the other (1); compare "
            "judges saved timings over their processes, so give it at least 2 a side",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            metavar="SECONDS",
            help="with --processes: seconds a process may take before it is killed (600)",
        )
        parser.add_argument(
            "--json", action="store_true", help="print the result and the numbers used as JSON"
        )
        parser.add_argument(
            "-q", "--quiet", action="store_true", help="no live status, no warnings"
        )
        add_save_options(parser)

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Times the statement and prints the result (or what was measured when stopped
        by a signal)."""
        _option_errors(args)
        if args.counter is not None:
            from .time_counted import check_options

            check_options(args)
        args.clock = args.clock or "wall"
        check_save(args)
        setup = "\n".join(args.setup) or None
        _compiled(args, setup)
        if args.counter is not None:
            from .time_counted import count_time

            return count_time(args, setup, _setup_once_code(args), out, err)
        from .._run.signals import Signals

        # Once the timing is over (stopped or not), a signal is recorded, not raised into
        # the writing of the result (a second SIGINT milliseconds after the first).
        with Signals() as late:
            if args.processes > 1 and args.compare is None:
                code = self._processes(args, out, err)
            else:
                with _current_folder_on_path():
                    if args.compare is not None:
                        code = self._compare(args, setup, out, err)
                    else:
                        code = self._time(args, setup, out, err)
        return code if code or late.exit_code is None else late.exit_code

    def _processes(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        from .time_processes import merged, time_in_processes

        series, stopped = time_in_processes(args)
        if stopped is not None and not series:
            err.write(f"interrupted by {signal.Signals(stopped).name} before a process finished\n")
            return _exit_code(stopped)
        result, counts = merged(series, args.max_time)
        res = result.to_dict()
        return self._finish(
            args,
            res,
            {
                "calibrated": args.max_time is None and args.number is None,
                "processes": len(counts),
                "clock": args.clock,
            },
            (args.stmt, result.times, result.sizes, {**res, "clock": args.clock}, counts),
            stopped,
            f"{len(counts)} of {args.processes} processes",
            out,
            err,
        )

    # --- one statement ------------------------------------------------------------------

    def _time(self, args: argparse.Namespace, setup: str | None, out: TextIO, err: TextIO) -> int:
        from .._progress import LiveStatus

        progress = Progress()
        what = "the statement or its --setup" if setup else "the statement"

        def render() -> str:
            return f"timing {args.stmt}: {status.elapsed():.1f} s, {progress.runs:,} runs"

        live = not args.quiet and (args.max_time or 0) >= _LIVE_STATUS_MIN_SECONDS
        status = LiveStatus(err, render, enabled=None if live else False)
        context, stopped_in_setup = _setup_once(args, err)
        if stopped_in_setup is not None:
            return stopped_in_setup
        with status, _measuring(what) as stop:
            measure_time(args.stmt, context, **_timing(args, setup, progress, _CALIBRATED_REPEAT))
        stopped = stop.signum
        if stopped is not None and not progress.batches:
            err.write(f"interrupted by {signal.Signals(stopped).name} before a batch was timed\n")
            return _exit_code(stopped)
        res = progress.result()
        return self._finish(
            args,
            res,
            {"calibrated": progress.calibrated, "clock": args.clock},
            (args.stmt, progress.kept.times, progress.kept.sizes, {**res, "clock": args.clock}),
            stopped,
            f"{res['runs']:,} runs in {res['batches']:,} batches",
            out,
            err,
        )

    def _finish(
        self,
        args: argparse.Namespace,
        res: Mapping[str, Any],
        numbers: Mapping[str, Any],
        saved: tuple[Any, ...],
        stopped: int | None,
        so_far: str,
        out: TextIO,
        err: TextIO,
    ) -> int:
        """Prints the result beside the numbers used (the result is left as is), saves it
        and returns the exit code, 128 + the signal when one stopped the timing.

        :param numbers: what is printed beside the result (``calibrated``...)
        :param saved: the entry given to ``--save``
        :param so_far: what was measured, said when a signal stopped the timing
        """
        name = None if stopped is None else signal.Signals(stopped).name
        if name is not None:
            err.write(f"interrupted by {name}: what was measured so far, {so_far}\n")
        shown: dict[str, Any] = {
            **res,
            "max_time": args.max_time,
            **numbers,
            **({} if name is None else {"interrupted": name}),
        }
        self._write(args, shown, out, err)
        save_timing(args, [saved])
        return _exit_code(stopped)

    def _write(
        self, args: argparse.Namespace, res: Mapping[str, Any], out: TextIO, err: TextIO
    ) -> None:
        if args.json:
            json.dump({"stmt": args.stmt, **res}, out, indent=2)
            out.write("\n")
        else:
            out.write(format_line(args.stmt, res) + "\n")
        if not args.quiet and res["max_exec"] > _UNSTABLE_RATIO * res["min_exec"]:
            err.write(
                f"warning: the slowest batch took {res['max_exec'] / res['min_exec']:.1f}x "
                "the fastest; the machine may be busy or the statement caches results\n"
            )

    # --- two statements -----------------------------------------------------------------

    def _compare(
        self, args: argparse.Namespace, setup: str | None, out: TextIO, err: TextIO
    ) -> int:
        progress = CompareProgress()
        suffix = " or its --setup" if setup else ""

        def what() -> str:
            side = progress.running
            return ("a statement" if side is None else _SIDES[side]) + suffix

        context, stopped_in_setup = _setup_once(args, err)
        if stopped_in_setup is not None:
            return stopped_in_setup
        with _measuring(what) as stop:
            compare(
                args.stmt, args.compare, context, **_timing(args, setup, progress, _COMPARE_REPEAT)
            )
        stopped = stop.signum
        if stopped is not None and len(progress.paired()[0]) < 2:
            name = signal.Signals(stopped).name
            err.write(f"interrupted by {name} before two batches of each were timed\n")
            return _exit_code(stopped)
        if stopped is not None:
            err.write(f"interrupted by {signal.Signals(stopped).name}: what was measured so far\n")
        self._write_comparison(args, progress, out)
        return _exit_code(stopped)

    def _write_comparison(
        self, args: argparse.Namespace, progress: CompareProgress, out: TextIO
    ) -> None:
        cmp = progress.comparison(confidence=0.95, alpha=0.05)
        numbers = {
            "max_time": args.max_time,
            "calibrated": progress.calibrated,
            "clock": args.clock,
        }
        sides = [
            (name, {**side, **numbers})
            for name, side in zip((args.stmt, args.compare), progress.sides(), strict=True)
        ]
        number = progress.number
        batches = [
            (name, [x * number for x in xs], [number] * len(xs), side)
            for (name, side), xs in zip(sides, progress.paired(), strict=True)
        ]
        save_timing(args, batches)
        if args.json:
            stmts = [{"stmt": name, **side} for name, side in sides]
            json.dump({"stmts": stmts, "comparison": cmp.to_dict()}, out, indent=2)
            out.write("\n")
            return
        for name, side in sides:
            out.write(format_line(name, side) + "\n")
        names = (args.stmt.replace("\n", "\\n"), args.compare.replace("\n", "\\n"))
        out.write(format_comparison(cmp, names) + "\n")


COMMAND = TimeCommand()
