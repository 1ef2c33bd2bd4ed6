"""The flight recorder: the program runs in a child process (:mod:`.child`) streaming
its ticks, the memory spy runs from here. This process folds the ticks as they arrive,
so when the child dies without a word (SIGKILL from the OOM killer, a segfault,
``os._exit``) the report still has everything up to the last tick; ``wait4`` then says
how it ended and gives its CPU time and its exact peak (``ru_maxrss``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import signal_name
from .._sampling.aggregate import Aggregator
from .stream import StreamReader

if TYPE_CHECKING:
    from .._run.supervise import Child, Exit, Supervisor
    from .model import Ending, Report

# What the child runs (.child, .recording: the recorder and the sampler) and the report's
# model are imported where used: ``run`` starts its child sooner, and imports the model
# while the program runs (see _import_report_machinery).
__all__ = ["ending_of_status", "run_command", "run_fresh", "signal_name"]

# Seconds the child has to end after a forwarded SIGTERM/SIGHUP before it is killed.
GRACE = 10.0


_DEATHS = {
    "SIGKILL": "killed by SIGKILL (the OOM killer, a memory limit or kill -9)",
    "SIGSEGV": "crashed: SIGSEGV (segmentation fault)",
    "SIGABRT": "aborted: SIGABRT",
    "SIGBUS": "crashed: SIGBUS",
}


def ending_of_status(status: int) -> Ending:
    """How a child ended without sending its end, from its ``wait`` status.

    :param status: as ``os.wait4`` returns it
    :return: the ending, its code the conventional one (128 + N on signal N)
    """
    from .model import Ending

    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        name = signal_name(signum)
        return Ending("signal", 128 + signum, _DEATHS.get(name, f"killed by {name}"))
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    return Ending("os_exit", code, f"ended without unwinding (os._exit({code}) or a fatal error)")


def run_fresh(
    command: Callable[[int], Sequence[str]],
    name: str,
    interval: float = 0.005,
    probes: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> tuple[Report, int]:
    """Runs a program in a fresh interpreter under the ticks and the spy (POSIX only):
    the child carries none of this process's memory, and takes its own start-up memory
    off its figures (see :mod:`.child`), so that the peak is the program's.

    :param command: given the pipe's write end (a file descriptor the child inherits),
        the command line of the child; it runs the program through :func:`.child.record`
    :param name: the program's name in the report
    :param interval: seconds between ticks
    :param probes: device probes, by registry name
    :param env: the child's environment, None for this process's
    :return: the report and the exit code to return
    """
    from .._run.program import supervised

    with supervised(janitor=False) as supervisor:
        rfd, wfd = os.pipe()
        try:
            # Not found and not executable are said before anything runs (127, 126).
            child = supervisor.start(command(wfd), pass_fds=(wfd,), env=env)
        except BaseException:
            os.close(rfd)
            raise
        finally:
            os.close(wfd)
        return _follow(supervisor, child, rfd, name, interval, probes)


def _follow(
    supervisor: Supervisor,
    child: Child,
    rfd: int,
    name: str,
    interval: float,
    probes: Sequence[str],
) -> tuple[Report, int]:
    """Reads the child's stream until it ends (the supervisor forwards the signals
    received meanwhile) and makes the report; no child left running whatever happens."""
    agg = Aggregator()
    reader = StreamReader(agg, child.pid)
    spying: Any = None
    notes: list[str] = []
    try:
        spying, notes = _start_spy(child.pid, probes)  # while the program already runs
        importing = [_import_report_machinery]

        def after_read() -> None:
            # Once the program started (its start read): the imports then share the CPU
            # with the program, not with the start of the child's interpreter.
            if importing and reader.start:
                importing.pop()()

        reader.read_until(rfd, lambda: child.poll() is not None, after_read=after_read)
        # The child's end is read: it exits at once, or is ended after a grace.
        supervisor.wait(child, GRACE)
    finally:
        os.close(rfd)
        if child.exit is None:  # the parent failed: no orphan left running
            child.end(signal.SIGKILL, 1.0)
        from .recording import stop_spy

        spied = stop_spy(spying, notes)
    assert child.exit is not None
    return _report(agg, reader, child.exit, name, interval, spied, notes)


def _import_report_machinery() -> None:
    """Imports what builds the report and the spy's result (tens of milliseconds) while
    the program runs, not once it ended: its report comes sooner."""
    from .._memory import views  # noqa: F401  (imported early: used by the spy's stop)
    from . import build, session  # noqa: F401  (imported early: used by _report)


def _start_spy(pid: int, probes: Sequence[str]) -> tuple[Any, list[str]]:
    """The memory spy of the child; it follows the high-water mark the child resets (two
    resetting would erase peaks)."""
    from .._memory.spy import MemorySpy
    from .recording import SPY_DELAY

    try:
        return MemorySpy(pid, delay=SPY_DELAY, reset_peak=False, probes=tuple(probes)), []
    except Exception as e:  # the ticks still report
        return None, [f"the memory spy could not start: {e}"]


def _report(
    agg: Aggregator,
    reader: StreamReader,
    child: Exit,
    name: str,
    interval: float,
    spied: Any = None,
    notes: Sequence[str] = (),
) -> tuple[Report, int]:
    from .build import build_report
    from .model import Ending
    from .session import facts_of, spy_facts

    end = reader.end
    facts: dict[str, Any] = dict(end) if end is not None else dict(reader.start)
    facts["notes"] = [*facts.get("notes", ()), *notes]
    if end is not None:
        kind, code, detail = end["ending"]
        ending = Ending(str(kind), int(code), str(detail))
    else:
        ending = ending_of_status(child.status)
        facts["notes"].append(
            "the program ended without unwinding: the report comes from what it streamed"
        )
    tool = _number(reader.start.get("tool_rss"))
    floor = _number(reader.start.get("maxrss_floor"))
    facts["tool_rss"] = tool
    if spied is not None:
        spy_facts(spied, facts, offset=tool)
    usage = child.rusage
    if usage is not None:
        cpu0 = _number(reader.start.get("cpu0"))
        facts["cpu"] = max(usage.ru_utime + usage.ru_stime - cpu0, 0.0)
        peak = float(usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024))
        if peak > floor:  # else the mark of the command before its exec, not the child's
            facts["exact_peak"] = max(peak - tool, float(facts.get("exact_peak") or 0.0))
    if end is None:
        facts["wall"] = max(agg.last_t - float(facts.get("t0", agg.first_t)), 0.0)
    if reader.bad:
        facts.setdefault("notes", []).append(f"the stream stopped at {reader.bad}")
    code = ending.code
    if end is not None and os.WIFSIGNALED(child.status):  # died after sending its end
        code = 128 + os.WTERMSIG(child.status)
    # ``process PID``, and its command line when it said it (a followed process).
    commands = reader.commands
    children = [
        (f"process {pid}: {commands[pid]}" if commands.get(pid) else f"process {pid}", ticks)
        for pid, ticks in sorted(reader.children.items())
    ]
    report = build_report(agg, facts_of(name, interval, ending, facts, children=children))
    return report, code


def _number(value: Any) -> float:
    """A size the child sent, 0 if it is not a finite non-negative number."""
    if isinstance(value, (int, float)) and 0 <= value < float("inf"):
        return float(value)
    return 0.0


def run_command(argv: Sequence[str], name: str, probes: Sequence[str] = ()) -> tuple[Report, int]:
    """Runs a command that is not Python code under the memory spy alone (its process
    tree, through :func:`.._memory.command.spy_command`): the report has the curves, the
    exact peak, the CPU time and the ending, no stacks.

    :param argv: the command line
    :param name: its name in the report
    :param probes: device probes, by registry name
    :return: the report and the command's exit code (128 + N on signal N)
    """
    from .._memory.command import spy_command
    from .._memory.spy import MemorySpy
    from .build import build_report
    from .model import Ending
    from .session import facts_of

    started = time.monotonic()

    def make_spy(pid: int) -> MemorySpy:
        return MemorySpy(pid, delay=0.01, include_children=True, probes=tuple(probes))

    ran = spy_command(list(argv), make_spy, children=True)
    facts: dict[str, Any] = {"t0": started, "wall": time.monotonic() - started}
    agg = Aggregator()
    _spy_facts(ran.result, agg, facts)
    end = ran.end
    if end.rusage is not None:
        facts["cpu"] = end.rusage.ru_utime + end.rusage.ru_stime
    if os.WIFSIGNALED(end.status):
        ending = ending_of_status(end.status)
    else:
        ending = Ending("exit", end.code, f"exited with code {end.code}")
    facts["notes"] = ["a command, not Python code: memory of its process tree, no stacks"]
    return build_report(agg, facts_of(name, 0.01, ending, facts)), ending.code


def _spy_facts(result: Any, agg: Aggregator, facts: dict[str, Any]) -> None:
    """The spy's measures of a command as ticks without stacks, curves and devices."""
    cpu = result["cpu"]
    for t, v in cpu.series:
        agg.add_tick(t, v, v, -1)
    facts["exact_peak"] = cpu.max_peak
    devices = result.get("devices", {})
    facts["devices"] = [(n, m.max_peak, m.begin, m.end) for n, m in devices.items()]
    facts["curves"] = [
        (n, [t for t, _ in m.series], [v for _, v in m.series], str(m.peak_source))
        for n, m in devices.items()
    ]
