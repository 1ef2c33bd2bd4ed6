"""``spy``: the memory peak of a command, or of a running process.

``spy [--delay S] [--cuda] [--children] [--json FILE] [--csv FILE] [--plot FILE.png]
-- COMMAND ARGS...`` runs the command under the memory spy, prints peak, mean, begin and
end with units and the duration, writes the series where asked and exits with the
command's own exit code. ``spy --pid PID`` attaches to a running process until it ends
or Ctrl-C.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import time
from typing import Any, TextIO

from ._cli import EXIT_USAGE, CommandError

# Seconds between two checks of the spied process in --pid mode.
_POLL = 0.2
# Seconds to let the command exit on its own after Ctrl-C before killing it.
_INTERRUPT_GRACE = 5.0


def _exit_code(returncode: int) -> int:
    """The shell's convention: 128 + N for a command killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class SpyCommand:
    """The ``spy`` subcommand."""

    name = "spy"
    help = "measure the memory peak of a command or a running process (CPU, and GPU with --cuda)"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Declares the options."""
        parser.add_argument("--delay", type=float, default=0.01, help="seconds between measures")
        parser.add_argument("--cuda", action="store_true", help="measure the GPUs too (NVML)")
        parser.add_argument("--children", action="store_true", help="count the whole process tree")
        parser.add_argument("--pid", type=int, default=None, help="attach to a running process")
        parser.add_argument("--json", metavar="FILE", help="write the result and series as JSON")
        parser.add_argument("--csv", metavar="FILE", help="write the series as CSV")
        parser.add_argument("--plot", metavar="FILE.png", help="draw the series (plot extra)")
        parser.add_argument("-q", "--quiet", action="store_true", help="no live status")
        parser.add_argument(
            "cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS", help="the command to run"
        )

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Spies on the command or the process and reports."""
        cmd = list(args.cmd)
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        if args.pid is not None and cmd:
            raise CommandError("give either --pid PID or -- COMMAND, not both", EXIT_USAGE)
        if args.pid is None and not cmd:
            raise CommandError("nothing to spy on: give -- COMMAND ARGS or --pid PID", EXIT_USAGE)
        if not args.delay > 0:
            raise CommandError(f"--delay must be > 0, got {args.delay}", EXIT_USAGE)
        if cmd:
            result, code, what = self._run_command(cmd, args, err)
        else:
            result, code, what = self._attach(args.pid, args, err), 0, f"pid {args.pid}"
        out.write(f"{what}\n{result}\n")
        if code:
            out.write(f"exit code {code}\n")
        self._write_files(result, args, what, code)
        return code

    def _spy(self, pid: int, args: argparse.Namespace) -> Any:
        from .memory_peak import MemorySpy

        return MemorySpy(pid, delay=args.delay, cuda=args.cuda, include_children=args.children)

    def _status(self, spy: Any, what: str, args: argparse.Namespace, err: TextIO) -> Any:
        from ._format import format_bytes
        from ._progress import LiveStatus

        def render() -> str:
            peak = spy.peak_so_far()
            shown = "..." if peak is None else format_bytes(peak)
            return f"spying on {what}: {status.elapsed():.1f} s, peak so far {shown}"

        status = LiveStatus(err, render, enabled=False if args.quiet else None, delay=0.5)
        return status

    def _run_command(
        self, cmd: list[str], args: argparse.Namespace, err: TextIO
    ) -> tuple[Any, int, str]:
        what = "command: " + subprocess.list2cmdline(cmd)
        try:
            proc = subprocess.Popen(cmd)
        except FileNotFoundError:
            raise CommandError(f"command not found: {cmd[0]}", 127) from None
        except PermissionError:
            raise CommandError(f"command not executable: {cmd[0]}", 126) from None
        try:
            spy = self._spy(proc.pid, args)
        except ProcessLookupError:
            code = _exit_code(proc.wait(_INTERRUPT_GRACE))
            raise CommandError(
                f"the command ended (exit code {code}) before the spy started: nothing measured",
                code,
            ) from None
        except BaseException:
            proc.kill()
            proc.wait(_INTERRUPT_GRACE)
            raise
        with spy, self._status(spy, what, args, err):
            try:
                proc.wait()
            except KeyboardInterrupt:
                # The terminal sent SIGINT to the command too; give it time to exit.
                try:
                    proc.wait(_INTERRUPT_GRACE)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(_INTERRUPT_GRACE)
        result = spy.result
        cpu = result["cpu"]
        # The command started just before the spy: its high-water mark from before the
        # first reset belongs to it too.
        if cpu.previous_peak is not None and cpu.previous_peak > cpu.max_peak:
            cpu.max_peak = cpu.previous_peak
        return result, _exit_code(proc.returncode), what

    def _attach(self, pid: int, args: argparse.Namespace, err: TextIO) -> Any:
        spy = self._spy(pid, args)
        with spy, self._status(spy, f"pid {pid}", args, err):
            try:
                while not spy.wait(_POLL):
                    pass
            except KeyboardInterrupt:
                pass  # Ctrl-C ends the measure, not the spied process
        return spy.result

    def _write_files(self, result: Any, args: argparse.Namespace, what: str, code: int) -> None:
        rows = result.to_rows()
        if args.json:
            doc = {
                "spied": what,
                "exit_code": code,
                "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "duration": result["duration"],
                "target_exited": result["target_exited"],
                "peak_source": result["cpu"].peak_source,
                **{m.name: m.to_dict() for m in result.monitors()},
                "marks": result["marks"],
                "series": rows,
            }
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1)
        if args.csv:
            with open(args.csv, "w", newline="", encoding="utf-8") as f:
                writer = csv.DictWriter(f, fieldnames=["time", "channel", "bytes", "label"])
                writer.writeheader()
                writer.writerows(rows)
        if args.plot:
            from ._optional import require
            from ._plot_memory import plot_memory

            figure = require("matplotlib.figure", "plot", "--plot")
            fig = figure.Figure(figsize=(8, 4))  # no pyplot: no GUI backend, no global state
            plot_memory(result, ax=fig.subplots())
            fig.savefig(args.plot)


COMMAND = SpyCommand()
