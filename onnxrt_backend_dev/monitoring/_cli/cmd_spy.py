"""``spy``: the memory peak of a command (``spy -- COMMAND ARGS``), of a running process
(``--pid``), or of a Python program run here with its stacks sampled (``--where``, see
:mod:`.spy_where`): peak, mean, begin and end, the series written where asked, the
command's own exit code. Its ``--help`` says what the resets of the peak change.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, TextIO

from .common import (
    ALLOC_DEFAULT,
    EXIT_USAGE,
    PLOT_SUFFIXES,
    CommandError,
    alloc_size,
    check_alloc_switch,
    check_outputs,
    check_probes_open,
    save_outputs,
)
from .save_result import add_save_options, check_save, save_memory

_RESET_NOTE = (
    "exact peaks reset the spied process's high-water mark, so its ru_maxrss "
    "(/usr/bin/time, getrusage) reads lower; --no-reset-peak leaves them alone"
)


def _max_rss_line(result: Any) -> str:
    """The command's true maximum RSS beside its ``ru_maxrss``, and why they differ.

    ``max_rss`` is the highest of the spy's readings: each high-water mark read before a
    reset is the peak since the previous one, and ``ru_maxrss`` at the exit covers the last
    interval. ``ru_maxrss`` is what ``/usr/bin/time`` and ``getrusage`` show: lowered by
    the resets, or raised by this CLI's own high-water mark, which a forked child keeps.

    :param result: the spy's result with ``max_rss`` and ``ru_maxrss``
    :return: one line
    """
    from .._format import format_bytes

    true_max, ru_maxrss = result["max_rss"], result["ru_maxrss"]
    line = f"max RSS {format_bytes(true_max)} (ru_maxrss {format_bytes(ru_maxrss)}"
    if ru_maxrss < true_max and result["cpu"].peak_source == "hwm":
        return f"{line}: lowered by the spy's resets; --no-reset-peak keeps it)"
    if ru_maxrss > true_max:
        return f"{line}: includes the spy CLI's own memory, inherited at the fork)"
    return f"{line})"


def _python_script(name: str) -> bool:
    """A Python script given as the command, that cannot run as one (not executable):
    ``spy train.py`` measures ``python train.py``."""
    return name.endswith((".py", ".pyw")) and os.path.isfile(name) and not os.access(name, os.X_OK)


class SpyCommand:
    """The ``spy`` subcommand."""

    name = "spy"
    help = (
        "measure the memory peak of a command or a running process (CPU, and devices with "
        "--probe NAME or --cuda)"
    )
    exit_codes = (
        "Exit codes: the command's own (128 + N if killed by signal N; 127 not found, 126 "
        "not executable), 1 an error of the spy, 2 a bad argument or output path (checked "
        "before the command starts), 130 interrupted."
    )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Declares the options."""
        parser.add_argument(
            "--delay", type=float, default=0.01, help="seconds between measures (0.01)"
        )
        parser.add_argument(
            "--cuda", action="store_true", help="measure the GPUs too (NVML): --probe nvml"
        )
        parser.add_argument(
            "--probe",
            action="append",
            default=[],
            metavar="NAME",
            help="measure the devices of this registered probe too (repeatable; nvml: NVIDIA; "
            "torch, read inside a program, is refused here)",
        )
        parser.add_argument("--children", action="store_true", help="count the whole process tree")
        parser.add_argument(
            "--no-reset-peak",
            action="store_true",
            help="sample only: leave the spied process's high-water mark and ru_maxrss alone "
            "(by default, exact peaks reset them at every tick, so /usr/bin/time and "
            "getrusage read lower; spikes shorter than --delay may then be missed)",
        )
        parser.add_argument("--pid", type=int, default=None, help="attach to a running process")
        parser.add_argument("--json", metavar="FILE", help="write the result and series as JSON")
        parser.add_argument("--csv", metavar="FILE", help="write the series as CSV")
        parser.add_argument("--plot", metavar="FILE.png", help="draw the series (plot extra)")
        parser.add_argument("-q", "--quiet", action="store_true", help="no live status")
        parser.add_argument(
            "--where",
            action="store_true",
            help="run a Python program (script.py or -m module) here and sample its stacks: "
            "where the peak happened, memory growth per function",
        )
        parser.add_argument(
            "-m", dest="module", nargs=argparse.REMAINDER, default=None, metavar="MODULE ARGS",
            help="with --where: run a module as a script, the rest is its arguments",
        )  # fmt: skip
        parser.add_argument("--top", type=int, default=10, help="functions shown with --where (10)")
        parser.add_argument(
            "--alloc-sample", type=alloc_size, default=ALLOC_DEFAULT, metavar="SIZE",
            help="with --where: track the program's allocations, one sampled per SIZE bytes "
            "on average (256KiB): what is live at the peak, by line; 0 turns it off",
        )  # fmt: skip
        parser.add_argument(
            "--flame",
            metavar="FILE",
            help="with --where: memory flame graph, speedscope (*.json) or collapsed stacks",
        )
        add_save_options(parser)
        parser.add_argument(
            "cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS", help="the command to run"
        )
        parser.epilog = (
            "Exact peaks reset the spied process's high-water mark (VmHWM) and its ru_maxrss "
            "at every tick; the command's true maximum is still reported (max RSS). "
            "SIGTERM and SIGHUP are forwarded to the command; the exit code is then "
            "128 + the signal's number. " + self.exit_codes
        )

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Spies on the command or the process and reports."""
        cmd = list(args.cmd)
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        elif cmd and not args.where and _python_script(cmd[0]):  # spy train.py
            cmd = [sys.executable, *cmd]
        from .spy_where import check_where_args

        check_where_args(cmd, args)
        if args.pid is not None and cmd:
            raise CommandError("give either --pid PID or -- COMMAND, not both", EXIT_USAGE)
        if args.pid is None and not cmd and not args.where:
            raise CommandError("nothing to spy on: give -- COMMAND ARGS or --pid PID", EXIT_USAGE)
        self._check_numbers(args)
        if args.where:
            check_alloc_switch(args)
        self._check_outputs(args, cmd)
        from .._run.signals import Signals

        # Around the whole command: a signal that comes once the measure is over (a second
        # SIGINT milliseconds after the first) is recorded, and the measure still written.
        with Signals():
            if args.where:
                from .spy_where import run_where

                report = functools.partial(self._report, args=args, out=out)
                result, code, what = run_where(cmd, args, err, self._status, report)
            elif cmd:
                result, code, what = self._run_command(cmd, args, err)
            else:
                result, code, what = self._attach(args.pid, args, err), 0, f"pid {args.pid}"
            self._report(result, code, what, args, out)
        signum = result.get("signal")
        return 128 + signum if signum else code

    def _report(
        self, result: Any, code: int, what: str, args: argparse.Namespace, out: TextIO
    ) -> None:
        """Prints the measure and writes the files asked for."""
        if args.where and result["cpu"].where is not None:
            from .._memory.where import where_text

            out.write(where_text(result["cpu"].where, args.top) + "\n")
        if args.where and "allocations" in result:
            from .._report.render_text import allocation_lines

            alloc = result["allocations"]
            out.write("\n".join(allocation_lines(alloc)) + "\n")
            out.write("".join(f"note: {n}\n" for n in alloc.notes))
        if args.where and result.get("allocations_note"):
            out.write(f"note: {result['allocations_note']}\n")
        out.write(f"{what}\n{result}\n")
        if "max_rss" in result:
            out.write(_max_rss_line(result) + "\n")
        if code:
            out.write(f"exit code {code}\n")
        out.flush()  # os._exit flushes nothing
        self._write_files(result, args, what, code)

    @staticmethod
    def _check_numbers(args: argparse.Namespace) -> None:
        """Refuses a delay under the spy's floor (or not finite), what cannot be a pid and
        an unknown probe, as usage errors naming the option."""
        from .._memory.registry import get_spec
        from .._memory.spy import check_delay, check_pid_value

        try:
            check_delay(args.delay, "--delay")
            if args.pid is not None:
                check_pid_value(args.pid, "--pid")
            for name in args.probe:
                get_spec(name)
        except ValueError as e:
            message = str(e).replace("probes: unknown", "--probe: unknown")
            raise CommandError(message, EXIT_USAGE) from None
        check_probes_open(
            [*args.probe, *(["nvml"] if args.cuda and "nvml" not in args.probe else [])]
        )
        inside = [name for name in args.probe if get_spec(name).inprocess]
        if inside:
            raise CommandError(
                f"--probe {inside[0]} is read inside the measured program (its counters live "
                "there) and spy measures another process: read it from the program, with "
                f"start_spying_on(probes=[{inside[0]!r}]), monitor(probes=({inside[0]!r},)) "
                f"or %%spy --probe {inside[0]}",
                EXIT_USAGE,
            )

    def _spy(self, pid: int, args: argparse.Namespace) -> Any:
        from .._memory.spy import MemorySpy

        return MemorySpy(
            pid,
            delay=args.delay,
            cuda=args.cuda,
            include_children=args.children,
            reset_peak=not args.no_reset_peak,
            probes=tuple(args.probe),
        )

    def _status(self, spy: Any, what: str, args: argparse.Namespace, err: TextIO) -> Any:
        from .._format import format_bytes
        from .._progress import LiveStatus

        def render() -> str:
            peak = spy.peak_so_far()
            shown = "..." if peak is None else format_bytes(peak)
            line = f"spying on {what}: {status.elapsed():.1f} s, peak so far {shown}"
            if spy.resets and not drawn:  # the first line says what the resets do
                drawn.append(True)
                return f"{line} ({_RESET_NOTE})"
            return line

        drawn: list[bool] = []

        status = LiveStatus(err, render, enabled=False if args.quiet else None, delay=0.5)
        return status

    def _run_command(
        self, cmd: list[str], args: argparse.Namespace, err: TextIO
    ) -> tuple[Any, int, str]:
        from .._memory.command import spy_command
        from .._run.program import Target

        what = "command: " + subprocess.list2cmdline(cmd)
        Target("command", cmd[0]).check()  # 127 or 126 and one line, as a shell
        run = spy_command(
            cmd,
            lambda pid: self._spy(pid, args),
            lambda spy: self._status(spy, what, args, err),
            children=args.children,
        )
        if run.forwarded == signal.SIGINT:  # Ctrl-C on a terminal reaches the command too
            err.write("spy: interrupted (SIGINT): the command was stopped\n")
        elif run.forwarded:
            err.write(f"spy: {signal.Signals(run.forwarded).name} forwarded to the command\n")
        return run.result, run.exit_code, what

    def _attach(self, pid: int, args: argparse.Namespace, err: TextIO) -> Any:
        from .._memory.command import spy_process

        spy = self._spy(pid, args)
        if spy.resets:  # not our process: its owner may read ru_maxrss
            err.write(f"spy: pid {pid} was not started by the spy; {_RESET_NOTE}\n")
        return spy_process(spy, lambda s: self._status(s, f"pid {pid}", args, err))

    @staticmethod
    def _check_outputs(args: argparse.Namespace, cmd: list[str]) -> None:
        """Refuses unwritable output files and a missing plot extra before the command
        runs: the measurement of a long command must not be lost at the end, nor
        overwrite the command or a file named in its arguments."""
        program = shutil.which(cmd[0]) if cmd else None
        inputs = [*cmd, *([program] if program else [])]
        check_outputs(
            {"--json": args.json, "--csv": args.csv, "--plot": args.plot, "--flame": args.flame},
            inputs=inputs,
            suffixes={"--plot": PLOT_SUFFIXES},
        )
        check_save(args, inputs=inputs)
        # Looked up, not imported: with --where, an import here would be measured.
        if args.plot and importlib.util.find_spec("matplotlib") is None:
            from .._optional import require

            require("matplotlib.figure", "plot", "--plot")  # raises, naming the extra

    def _write_files(self, result: Any, args: argparse.Namespace, what: str, code: int) -> None:
        if args.flame:
            from .spy_where import write_flame

            write_flame(result, args.flame)
        if args.json:
            date = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            doc = {"spied": what, "exit_code": code, "date": date, **result.to_dict()}
            if "allocations" in result:
                from .._report.render_json import allocations_dict

                doc["allocations"] = allocations_dict(result["allocations"])

        def write_json(path: str) -> None:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1)

        def write_csv(path: str) -> None:
            with open(path, "w", newline="", encoding="utf-8") as f:
                f.write(result.to_csv())

        def write_plot(path: str) -> None:
            from .._memory.plot import plot_memory
            from .._optional import require

            figure = require("matplotlib.figure", "plot", "--plot")
            fig = figure.Figure(figsize=(8, 4))  # no pyplot: no GUI backend, no global state
            plot_memory(result, ax=fig.subplots())
            fig.savefig(path)

        writes = [("--json", args.json, write_json), ("--csv", args.csv, write_csv)]
        save_outputs([*writes, ("--plot", args.plot, write_plot)])
        save_memory(args, result)


COMMAND = SpyCommand()
