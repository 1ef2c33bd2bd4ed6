"""A run observed from outside, as the report's model (:mod:`.._report.build`): the
memory ticks per stack (already folded by the observer into an aggregator), the sampled
threads' time per stack, the devices, how the program ended and its exact peak.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from .._errors import signal_name
from .._format import format_bytes, format_duration
from .._memory.devices import DeviceSampler
from .._observe.build import decode_stacks, native_threads, thread_label, totals_of
from .._observe.launch import DEATHS, ObservedRun, signal_ending
from .._observe.observer import ProcessRecord
from .._run.supervise import shell_code as exit_code
from .._sampling.aggregate import Aggregator
from .build import build_report
from .model import Ending, Report
from .session import facts_of


def ending_of_run(run: ObservedRun) -> Ending:
    """How an observed program ended: from its wait status, or said of the signal the
    command received when that signal decided it (see :func:`.launch.signal_ending`).

    :param run: the run
    :return: the ending (128 + N for the signal N the program or the command received)
    """
    decided = signal_ending(run)
    if decided is not None:
        code, words = decided
        return Ending("interrupted" if code == 130 else "signal", code, words)
    code = exit_code(run.status)
    if os.WIFSIGNALED(run.status):
        name = signal_name(os.WTERMSIG(run.status))
        kind = "interrupted" if name == "SIGINT" else "signal"
        return Ending(kind, code, DEATHS.get(name, f"killed by {name}"))
    if code == 1:
        return Ending("exit", 1, "exited with code 1 (an uncaught exception exits so)")
    return Ending("exit", code, f"exited with code {code}")


def declare_stacks(record: ProcessRecord, agg: Aggregator) -> list[Any]:
    """Gives the aggregator every stack of the process as the report's frames, a user's
    file under the current folder relative to it (``python prog.py`` makes its path
    absolute: a saved run compares with one made in another checkout); returns the
    decoded stacks.

    :param record: the process
    :param agg: its memory ticks
    """
    stacks = decode_stacks(record)
    try:
        under = os.getcwd() + os.sep
    except OSError:
        under = ""
    for sid, frames in enumerate(stacks):
        agg.add_stack(sid, tuple(_relative(f, under) for f in frames))
    return stacks


def _relative(frame: Any, under: str) -> Any:
    if under and frame.file.startswith(under):
        return frame._replace(file=frame.file[len(under) :])
    return frame


def sampled_threads(record: ProcessRecord, stacks: Sequence[Any]) -> list[Any]:
    """Each thread's wall and CPU seconds per stack id, as the report takes them.

    :param record: the process
    :param stacks: its decoded stacks
    """
    out = []
    for index, key in enumerate(record.order):
        th = record.threads[key]
        rows = totals_of(th.rows, stacks)
        if rows:
            out.append((thread_label(record, key, index), th.is_main, rows))
    out.sort(key=lambda t: not t[1])
    return out


def observed_report(
    run: ObservedRun,
    name: str,
    interval: float,
    notes: list[str],
    floor: float,
    devices: DeviceSampler | None = None,
) -> tuple[Report, int]:
    """The report of an observed run.

    :param run: what the observer saw
    :param name: the program's name
    :param interval: seconds between samples
    :param notes: sentences for the reader
    :param floor: ``ru_maxrss`` at or under this says nothing of the program (the mark
        of this process before the child's exec)
    :param devices: the device probes read, if any
    :return: the report and the exit code to return
    """
    record = run.record
    agg, stacks, facts = _facts(run.observer.t0, record, run.wall, notes)
    ending = ending_of_run(run)
    usage = run.rusage
    if record.alloc is not None:
        facts["allocations"], facts["held"], lost = _allocations(run, stacks)
        facts["notes"].extend(lost)
    peak = agg.last_hwm
    if usage is not None:
        facts["cpu"] = usage.ru_utime + usage.ru_stime
        maxrss = float(usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024))
        # The program's own mark (else the command's, before exec), unless it waited for
        # a child: wait4 then gives the highest of the family, a child's peak is not its.
        if maxrss > floor and not (len(run.observer.processes) > 1 or record.reaped):
            peak = max(peak, maxrss - record.tool_rss)
    facts["exact_peak"] = peak
    if devices is not None:
        facts["curves"] = devices.curves()
        facts["devices"] = devices.devices()
        facts["notes"].extend(f"device probe: {e}" for e in devices.errors)
    children = []
    for child in run.observer.processes[1:]:
        if isinstance(child.sink, Aggregator):
            declare_stacks(child, child.sink)
            if child.sink.n:
                children.append((child.label, child.sink))
    report = build_report(agg, facts_of(name, interval, ending, facts, children=children))
    return report, ending.code


def _facts(
    t0: float, record: ProcessRecord, wall: float, notes: list[str]
) -> tuple[Aggregator, list[Any], dict[str, Any]]:
    """The process's ticks, its decoded stacks and the facts every observed run has."""
    agg = record.sink
    assert isinstance(agg, Aggregator)
    stacks = declare_stacks(record, agg)
    notes = list(notes)
    # The pools by name: the hot lines' pool column says what the program ran meanwhile.
    pools = sorted((p for p in native_threads(record) if p[2] > 0), key=lambda p: -p[2])
    if pools:
        named = ", ".join(
            f"{n}{f' ({c} threads)' if c > 1 else ''} {format_duration(s)}" for n, c, s in pools
        )
        notes.append(f"threads Python does not know (native pools), CPU: {named}")
    facts = {
        "t0": t0,
        "wall": wall,
        "pid": record.pid,
        "started": _iso(t0),
        "notes": notes,
        "threads": sampled_threads(record, stacks),
        "tool_rss": record.tool_rss,
    }
    return agg, stacks, facts


def _allocations(run: ObservedRun, stacks: Sequence[Any]) -> tuple[Any, Any, list[str]]:
    """The allocations section of the report (the shim's records read by the tracker),
    the line holding the most at the peak, and the notes when there is no section."""
    from .._alloc.report import alloc_facts, tracking_notes
    from .allocations import build_allocations, peak_place

    tracker = run.record.alloc
    notes = tracking_notes(tracker, len(run.observer.processes) - 1, tracker.preloaded)
    facts = alloc_facts(tracker, stacks, run.observer.t0, notes)
    if facts is None:  # nothing was read
        return None, None, notes
    return build_allocations(facts), peak_place(facts), []


def _iso(monotonic_t: float) -> str:
    import time

    local = time.localtime(time.time() - (time.monotonic() - monotonic_t))
    zone = time.strftime("%z", local)  # datetime's isoformat, datetime not imported for it
    return time.strftime("%Y-%m-%dT%H:%M:%S", local) + zone[:3] + ":" + zone[3:]


def attached_report(attached: Any, notes: list[str], interval: float) -> Report:
    """The report of a process observed for a while (it may still run).

    :param attached: an :class:`.attach.Attached`
    :param notes: sentences for the reader
    :param interval: seconds between samples
    :return: the report
    """
    from .._observe.session import command_line_of

    record = attached.observer.root
    agg, _, facts = _facts(attached.observer.t0, record, attached.wall, notes)
    facts["tool_rss"] = 0.0  # no tool started in the process
    facts["cpu"] = sum(sum(r[2] for r in t.rows.values()) for t in record.threads.values())
    still = "still running" if attached.why != "ended" else "ended"
    ending = Ending("exit", 0, f"observed for {attached.wall:.1f} s ({still})")
    if agg.before > agg.peak:  # the high-water mark says more: a past no line is credited
        facts["notes"].append(
            f"the process's high-water mark was {format_bytes(agg.before)} at the attach: a "
            "peak reached before it was observed, credited to no line; the peak here is "
            "the observation's"
        )
    name = command_line_of(record.pid) or f"process {record.pid}"
    name = " ".join(name.split())[:120]
    return build_report(agg, facts_of(name, interval, ending, facts))
