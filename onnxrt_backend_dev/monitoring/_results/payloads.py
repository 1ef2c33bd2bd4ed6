"""The payload of each command's saved result (the ``data`` of :mod:`.schema`), built from
what the command measured: the raw figures, never only the summary.

* :func:`timing_data`: batches of ``time`` (one series, or two with ``--compare``);
* :func:`memory_data`: the peaks of ``spy`` (one run, or several merged);
* :func:`profile_data`: cProfile stats dictionaries of one or several runs, the functions
  aligned across runs;
* :func:`report_data`: the parts of a report;
* :func:`run_data`: the per-function figures of the ``run`` command's reports.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import ResultFormatError
from .._profiling.builder import is_artifact
from .schema import check_memory, check_profile, check_report, check_run, check_timing


def timing_series(
    name: str,
    times: Sequence[float],
    sizes: Sequence[int],
    summary: Mapping[str, Any] | None = None,
    processes: Sequence[int] | None = None,
) -> dict[str, Any]:
    """One timed statement: seconds of each batch and executions in each.

    :param name: the statement
    :param times: seconds of each batch
    :param sizes: executions of each batch (as many as ``times``)
    :param summary: the ``measure_time`` dictionary, kept beside the raw figures
    :param processes: batches timed by each process, in order (``time --processes``),
        None for one process
    :return: the series
    """
    series: dict[str, Any] = {
        "name": str(name),
        "times": [float(t) for t in times],
        "sizes": [int(n) for n in sizes],
    }
    if summary is not None:
        series["summary"] = {k: v for k, v in summary.items() if _plain(v)}
    if processes is not None:
        series["processes"] = [int(k) for k in processes]
    return series


def timing_from_samples(
    name: str, per_execution: Sequence[float], number: int, summary: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A series from seconds per execution of batches of ``number`` executions (what
    ``measure_interleaved`` returns).

    :param name: the statement
    :param per_execution: seconds per execution, one per batch
    :param number: executions per batch
    :param summary: the summary kept beside
    :return: the series
    """
    return timing_series(
        name, [x * number for x in per_execution], [number] * len(per_execution), summary
    )


def timing_data(series: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The payload of a timing result.

    :param series: from :func:`timing_series`
    :return: ``{"series": [...]}``, checked
    """
    data = {"series": [dict(s) for s in series]}
    check_timing("data", data)
    return data


def _plain(value: Any) -> bool:
    """JSON-ready and finite: NaN never enters a file."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (bool, int, str))


def memory_run(result: Any) -> dict[str, dict[str, float]]:
    """The figures of one run from a spy's result: per monitor (``cpu``, devices), its
    ``peak``, ``begin``, ``end`` and ``mean`` in bytes.

    :param result: what ``MemorySpy`` or ``spy`` returns (has ``monitors()``)
    :return: channel -> figures
    """
    run: dict[str, dict[str, float]] = {}
    for monitor in result.monitors():
        run[str(monitor.name)] = {
            "peak": float(monitor.max_peak),
            "begin": float(monitor.begin),
            "end": float(monitor.end),
            "mean": float(monitor.mean),
        }
    return run


def memory_data(runs: Sequence[Mapping[str, Mapping[str, float]]]) -> dict[str, Any]:
    """The payload of a memory result from one or several runs.

    :param runs: each from :func:`memory_run`
    :return: ``{"channels": {name: [figures per run]}}``, checked
    """
    channels: dict[str, list[dict[str, float]]] = {}
    for run in runs:
        for name, figures in run.items():
            channels.setdefault(name, []).append(dict(figures))
    data = {"channels": channels}
    check_memory("data", data)
    return data


def _key(func: tuple[Any, ...]) -> tuple[str, int, str]:
    # The profile module stores code objects for the code it is given: their text.
    return str(func[0]), int(func[1]), str(func[2])


def profile_data(
    runs: Sequence[tuple[Mapping[Any, Any], float]],
    memory: Sequence[Mapping[tuple[str, int, str], float]] | None = None,
    main: str | None = None,
    timer: str = "wall",
) -> dict[str, Any]:
    """The payload of a profile result from cProfile's stats dictionaries, in the columns
    of version 2 (see :mod:`.schema`): nanoseconds and counts, function-major.

    :param runs: ``(stats, wall seconds)`` per run; ``stats`` is ``pstats.Stats.stats``
        or a validated dictionary from ``_profiling.load`` (``{(file, line, name):
        (cc, nc, tt, ct, callers)}``); the profiler's own entries are left out
    :param memory: per run, bytes of growth per function, when measured
    :param main: the file of the program's script, matched with the other side's script
        when two profiles are compared
    :param timer: cProfile's clock, ``wall`` (its default) or ``cpu`` (the thread's CPU
        time); two profiles of different clocks are not compared
    :return: the payload, checked
    :raises ResultFormatError: a figure is not a finite number
    """
    index: dict[tuple[str, int, str], int] = {}
    for stats, _ in runs:
        for func in stats:
            if not is_artifact(func):
                index.setdefault(_key(func), len(index))
    data: dict[str, Any] = {
        "profiler": "cprofile",
        "timer": timer,
        "functions": [list(k) for k in index],
        "wall": [float(wall) for _, wall in runs],
        **_columns([stats for stats, _ in runs], index, memory),
    }
    if main is not None:
        data["main"] = str(main)
    check_profile("data", data)
    return data


def _columns(
    runs: Sequence[Mapping[Any, Any]],
    index: Mapping[tuple[str, int, str], int],
    memory: Sequence[Mapping[tuple[str, int, str], float]] | None,
) -> dict[str, list[int]]:
    """The figures of every run in columns: function ``j`` of run ``r`` at ``j * R + r``."""
    count = len(runs)
    size = len(index) * count
    own, cum, calls = [0.0] * size, [0.0] * size, [0.0] * size
    for r, stats in enumerate(runs):
        for func, (_, nc, tt, ct, _callers) in stats.items():
            j = index.get(_key(func))
            if j is not None:  # several keys may fold into one text: add them up
                k = j * count + r
                own[k] += float(tt)
                cum[k] += float(ct)
                calls[k] += float(nc)
    columns = {
        "own_ns": _integers("own", own, 1e9),
        "cumulative_ns": _integers("cumulative", cum, 1e9),
        "calls": _integers("calls", calls, 1.0),
    }
    if memory is not None:
        grown = [0.0] * size
        for r, figures in enumerate(memory):
            for func, value in figures.items():
                j = index.get(_key(func))
                if j is not None:
                    grown[j * count + r] += float(value)
        columns["memory_bytes"] = _integers("memory", grown, 1.0)
    return columns


def _integers(name: str, values: list[float], scale: float) -> list[int]:
    """``round(x * scale)`` of each value (in C: map), refusing NaN and infinities."""
    try:
        return list(map(round, map(operator.mul, values, itertools.repeat(scale))))
    except (ValueError, OverflowError):
        raise ResultFormatError(f"a {name} figure is not a finite number") from None


def report_data(
    timing: Mapping[str, Any] | None = None,
    memory: Mapping[str, Any] | None = None,
    profile: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The payload of a report: the parts it holds.

    :param timing: from :func:`timing_data`
    :param memory: from :func:`memory_data`
    :param profile: from :func:`profile_data`
    :return: the payload, checked
    """
    parts = {"timing": timing, "memory": memory, "profile": profile}
    data = {k: dict(v) for k, v in parts.items() if v is not None}
    check_report("data", data)
    return data


def _run_entry(report: Any, index: Mapping[tuple[str, int, str], int]) -> dict[str, Any]:
    """One report's figures, its functions aligned with ``index``."""
    n = len(index)
    own, cumulative, growth, to_peak = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
    own_cpu = [0.0] * n
    for row in report.functions:
        j = index[(str(row.site.file), int(row.site.line), str(row.site.function))]
        own[j] += max(float(row.self_time), 0.0)
        own_cpu[j] += max(float(row.self_cpu), 0.0)
        cumulative[j] += max(float(row.time), 0.0)
        growth[j] += float(row.net)
        to_peak[j] += float(row.to_peak)
    run: dict[str, Any] = {
        "wall": max(float(report.wall), 1e-9),
        "peak": max(float(report.peak.value), 0.0),
        "start": max(float(report.peak.start), 0.0),
        "end": max(float(report.end_rss), 0.0),
        "own": own,
        "own_cpu": own_cpu,
        "cumulative": cumulative,
        "growth": growth,
        "to_peak": to_peak,
        "exit": int(report.ending.code),
    }
    if report.cpu is not None and math.isfinite(report.cpu):
        run["cpu"] = max(float(report.cpu), 0.0)
    return run


def run_data(reports: Sequence[Any], main: str | None = None) -> dict[str, Any]:
    """The payload of a ``run`` result: per run, the wall time, the exact peak, and each
    function's time (own and cumulative) and memory growth while it ran (its flat
    figures, ``Report.functions``).

    :param reports: the ``_report.model.Report`` of each run (at least one)
    :param main: the file of the program's script, matched with the other side's script
        when two results are compared
    :return: the payload, checked
    """
    index: dict[tuple[str, int, str], int] = {}
    for report in reports:
        for row in report.functions:
            key = (str(row.site.file), int(row.site.line), str(row.site.function))
            index.setdefault(key, len(index))
    interval = float(reports[0].interval) if reports else 0.0
    data: dict[str, Any] = {
        "sampler": "ticks",
        "interval": interval if interval > 0 else 0.005,
        "functions": [list(k) for k in index],
        "runs": [_run_entry(report, index) for report in reports],
    }
    if main is not None:
        data["main"] = str(main)
    check_run("data", data)
    return data
