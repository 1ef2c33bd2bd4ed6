"""``spy``: the memory peak of a command, or of a running process.

``spy [--delay S] [--cuda] [--children] [--no-reset-peak] [--json FILE] [--csv FILE]
[--plot FILE.png] -- COMMAND ARGS...`` runs the command under the memory spy, prints
peak, mean, begin and end with units and the duration, writes the series where asked and
exits with the command's own exit code. ``spy --pid PID`` attaches to a running process
until it ends or Ctrl-C.

Exact peaks reset the spied process's high-water mark at every tick, and with it its
``ru_maxrss`` (what ``/usr/bin/time`` and ``getrusage`` report); the command's true
maximum is still reported (``max RSS``, the highest of the spy's readings) beside the
lowered ``ru_maxrss``. ``--no-reset-peak`` only samples and writes nothing to
``/proc/PID/clear_refs``. SIGTERM and SIGHUP are forwarded to the command, which is
waited for (then killed after a grace); the measure is still written and the exit code
is ``128 + signal``. A Ctrl-C to the CLI alone reaches the command as SIGINT.
``spy --where script.py [args]`` (or ``-m module [args]``) runs a Python program in this
process with the stacks sampled: where the peak happened, memory growth per function, a
memory flame graph with ``--flame FILE`` (see ``spy_where``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from types import FrameType
from typing import Any, TextIO

from .common import EXIT_USAGE, PLOT_SUFFIXES, CommandError, check_outputs, save_outputs
from .save_result import add_save_options, check_save, save_memory

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
_RESET_NOTE = (
    "exact peaks reset the spied process's high-water mark, so its ru_maxrss "
    "(/usr/bin/time, getrusage) reads lower; --no-reset-peak leaves them alone"
)
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


def _check_command(name: str) -> None:
    """Fails as a shell would (127 not found, 126 not executable), before starting anything.

    The gate's ``exec`` would fail the same way, but only after the spy started, with the
    shell's message and a measure of the shell itself: checking first keeps it one clear line.

    :param name: the command, a name looked up in ``PATH`` or a path
    """
    if "/" not in name:
        if not name or shutil.which(name) is None:
            raise CommandError(f"command not found: {name}", 127)
        return
    if not os.path.exists(name):
        raise CommandError(f"command not found: {name}", 127)
    if os.path.isdir(name) or not os.access(name, os.X_OK):
        raise CommandError(f"command not executable: {name}", 126)


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
    from .._memory.probes import read_status

    hwm = read_status(os.getpid())[1]
    if hwm is not None:
        return float(hwm)
    import resource  # no VmHWM shown: the safe, higher figure

    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux


def _add_end(result: Any, peak: float, floor: float, ended: float) -> None:
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


class SpyCommand:
    """The ``spy`` subcommand."""

    name = "spy"
    help = "measure the memory peak of a command or a running process (CPU, and GPU with --cuda)"
    exit_codes = (
        "Exit codes: the command's own (128 + N if killed by signal N; 127 not found, 126 "
        "not executable), 1 an error of the spy, 2 a bad argument or output path (checked "
        "before the command starts), 130 interrupted."
    )

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Declares the options."""
        parser.add_argument("--delay", type=float, default=0.01, help="seconds between measures")
        parser.add_argument("--cuda", action="store_true", help="measure the GPUs too (NVML)")
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
            "-m",
            dest="module",
            nargs=argparse.REMAINDER,
            default=None,
            metavar="MODULE ARGS",
            help="with --where: run a module as a script, the rest is its arguments",
        )
        parser.add_argument("--top", type=int, default=10, help="functions shown with --where")
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
        from .spy_where import check_where_args

        check_where_args(cmd, args)
        if args.pid is not None and cmd:
            raise CommandError("give either --pid PID or -- COMMAND, not both", EXIT_USAGE)
        if args.pid is None and not cmd and not args.where:
            raise CommandError("nothing to spy on: give -- COMMAND ARGS or --pid PID", EXIT_USAGE)
        self._check_numbers(args)
        self._check_outputs(args, cmd)
        if args.where:
            from .spy_where import run_where

            result, code, what = run_where(cmd, args, err, self._status)
            out.write(result["cpu"].where.to_text(args.top) + "\n")
        elif cmd:
            result, code, what = self._run_command(cmd, args, err)
        else:
            result, code, what = self._attach(args.pid, args, err), 0, f"pid {args.pid}"
        out.write(f"{what}\n{result}\n")
        if "max_rss" in result:
            out.write(_max_rss_line(result) + "\n")
        if code:
            out.write(f"exit code {code}\n")
        self._write_files(result, args, what, code)
        signum = result.get("signal")
        return 128 + signum if signum else code

    @staticmethod
    def _check_numbers(args: argparse.Namespace) -> None:
        """Refuses a delay under the spy's floor and what cannot be a pid, as usage errors."""
        from ..memory_peak import MIN_DELAY, _check_pid_value

        if not args.delay >= MIN_DELAY:
            raise CommandError(f"--delay must be >= {MIN_DELAY} s, got {args.delay}", EXIT_USAGE)
        if args.pid is not None:
            try:
                _check_pid_value(args.pid)
            except ValueError as e:
                raise CommandError(f"--{e}", EXIT_USAGE) from None

    def _spy(self, pid: int, args: argparse.Namespace) -> Any:
        from ..memory_peak import MemorySpy

        return MemorySpy(
            pid,
            delay=args.delay,
            cuda=args.cuda,
            include_children=args.children,
            reset_peak=not args.no_reset_peak,
        )

    def _status(self, spy: Any, what: str, args: argparse.Namespace, err: TextIO) -> Any:
        from .._format import format_bytes
        from .._progress import LiveStatus

        def render() -> str:
            peak = spy.peak_so_far()
            shown = "..." if peak is None else format_bytes(peak)
            line = f"spying on {what}: {status.elapsed():.1f} s, peak so far {shown}"
            if spy._resets and not drawn:  # the first line says what the resets do
                drawn.append(True)
                return f"{line} ({_RESET_NOTE})"
            return line

        drawn: list[bool] = []

        status = LiveStatus(err, render, enabled=False if args.quiet else None, delay=0.5)
        return status

    def _run_command(
        self, cmd: list[str], args: argparse.Namespace, err: TextIO
    ) -> tuple[Any, int, str]:
        what = "command: " + subprocess.list2cmdline(cmd)
        _check_command(cmd[0])
        proc, gate = _start_gated(cmd)
        floor = _own_peak()  # what the command's ru_maxrss may hold from this process
        try:
            # MemorySpy returns once the spy is ready: probes open, first tick taken,
            # high-water mark reset. Until the gate opens, the command cannot have run.
            spy = self._spy(proc.pid, args)
        except BaseException:
            os.close(gate)
            _kill(proc)  # never leave it blocked on the gate, nor run it unmeasured
            raise
        try:
            forwarder = _Forwarder(proc, _INTERRUPT_GRACE)
            with forwarder, spy, self._status(spy, what, args, err):
                try:
                    _open_gate(gate)
                    last_peak = _wait(proc)
                except KeyboardInterrupt:  # before _wait could catch it: same answer
                    _stop_interrupted(proc)
                    last_peak = None
                ended = time.monotonic()
        finally:
            _kill(proc)  # a second Ctrl-C, an error: the command never outlives the CLI
        result = spy.result
        if last_peak is not None:  # reaped by _wait, not interrupted
            _add_end(result, last_peak, floor, ended)
            if not args.children:  # one process: its maximum beside its ru_maxrss
                result["max_rss"] = result["cpu"].max_peak
                result["ru_maxrss"] = last_peak
        if forwarder.received:
            err.write(f"spy: {signal.Signals(forwarder.received).name} forwarded to the command\n")
            result["signal"] = forwarder.received
        return result, _exit_code(proc.returncode), what

    def _attach(self, pid: int, args: argparse.Namespace, err: TextIO) -> Any:
        spy = self._spy(pid, args)
        if spy._resets:  # not our process: its owner may read ru_maxrss
            err.write(f"spy: pid {pid} was not started by the spy; {_RESET_NOTE}\n")
        # Ctrl-C, SIGTERM and SIGHUP end the measure, not the spied process.
        caught = _Forwarder(None, _INTERRUPT_GRACE)
        with caught, spy, self._status(spy, f"pid {pid}", args, err):
            try:
                while caught.received is None and not spy.wait(_POLL):
                    pass
            except KeyboardInterrupt:
                pass
        if caught.received:
            spy.result["signal"] = caught.received
        return spy.result

    @staticmethod
    def _check_outputs(args: argparse.Namespace, cmd: list[str]) -> None:
        """Refuses unwritable output files and a missing plot extra before the command
        runs: the measurement of a long command must not be lost at the end, nor
        overwrite the command or a file named in its arguments."""
        program = shutil.which(cmd[0]) if cmd else None
        check_outputs(
            {"--json": args.json, "--csv": args.csv, "--plot": args.plot, "--flame": args.flame},
            inputs=[*cmd, *([program] if program else [])],
            suffixes={"--plot": PLOT_SUFFIXES},
        )
        check_save(args, inputs=[*cmd, *([program] if program else [])])
        # Looked up, not imported: with --where, an import here would be measured.
        if args.plot and importlib.util.find_spec("matplotlib") is None:
            from .._optional import require

            require("matplotlib.figure", "plot", "--plot")  # raises, naming the extra

    def _write_files(self, result: Any, args: argparse.Namespace, what: str, code: int) -> None:
        if args.flame:
            from .spy_where import write_flame

            write_flame(result, args.flame)
        rows = result.to_rows()
        if args.json:
            doc = {
                "spied": what,
                "exit_code": code,
                "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "duration": result["duration"],
                "target_exited": result["target_exited"],
                "peak_source": result["cpu"].peak_source,
                **{k: result[k] for k in ("max_rss", "ru_maxrss", "signal") if k in result},
                **{m.name: m.to_dict() for m in result.monitors()},
                "marks": result["marks"],
                "series": rows,
            }

        def write_json(path: str) -> None:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1)

        def write_csv(path: str) -> None:
            with open(path, "w", newline="", encoding="utf-8") as f:
                writer = csv.DictWriter(f, fieldnames=["time", "channel", "bytes", "label"])
                writer.writeheader()
                writer.writerows(rows)

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
