"""The payload of each command's saved result (the ``data`` of :mod:`.schema`), built from
what the command measured: the raw figures, never only the summary. :func:`timing_data`
(``time``'s batches), :func:`memory_data` (``spy``'s peaks), :func:`report_data`; one
profile table (``_table``, its columns filled by ``_row_major``) from cProfile's
stats (:func:`profile_data`), the sampler's stacks (:func:`sampled_data`,
:func:`merge_sampled`; :func:`sampled_profile` the model back, to render) and the ``run``
command's reports (:func:`run_data`).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import ResultFormatError
from .._profiling.builder import is_artifact
from .schema import PROFILERS, TICKS, check_memory, check_profile, check_report, check_timing


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
    :param processes: batches timed by each process, in order, None for one process
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


def timing_data(series: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The payload of a timing result, checked.

    :param series: from :func:`timing_series`
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
    """One run's figures from a spy's result: per monitor (``cpu``, devices), its
    ``peak``, ``begin``, ``end`` and ``mean`` in bytes.

    :param result: what ``MemorySpy`` or ``spy`` returns
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
    """The payload of a memory result from one or several runs, checked.

    :param runs: each from :func:`memory_run`
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


def _site(row: Any) -> tuple[str, int, str]:  # a report row's function
    return str(row.site.file), int(row.site.line), str(row.site.function)


def profile_data(
    runs: Sequence[tuple[Mapping[Any, Any], float]],
    main: str | None = None,
    timer: str = "wall",
    unit: float = 1e9,
) -> dict[str, Any]:
    """The payload of a profile result from cProfile's stats dictionaries: its table
    (:mod:`.schema`) of integer figures (nanoseconds and counts), its stacks the edges.

    :param runs: ``(stats, wall seconds)`` per run, ``stats`` as ``pstats.Stats.stats``
        (the profiler's own entries left out)
    :param main: the program's script, matched with the other side's when compared
    :param timer: cProfile's clock, ``wall`` or ``cpu``
    :param unit: the integers saved per unit of the stats' times (1 for instructions)
    :return: the payload, checked
    :raises ResultFormatError: a figure is not a finite number
    """
    index: dict[tuple[str, int, str], int] = {}
    for stats, _ in runs:
        for func in stats:
            if not is_artifact(func):
                index.setdefault(_key(func), len(index))
    per_run = [s for s, _ in runs]
    edges, edge_times = _edges(per_run, index, unit)
    figures = {  # cProfile's (cc, nc, tt, ct, callers): tt own, ct cumulative, nc calls
        "own": _integers("own", _per_function(per_run, index, 2), unit),
        "inclusive": _integers("cumulative", _per_function(per_run, index, 3), unit),
        "calls": _integers("calls", _per_function(per_run, index, 1), 1.0),
    }
    walls = [float(wall) for _, wall in runs]
    tables = {"function_figures": figures, "stack_figures": {"time": edge_times}}
    return _table("cprofile", index, edges, walls, main, timer=timer, unit="ns", **tables)


def _table(
    profiler: str,
    functions: Iterable[tuple[Any, ...]],
    stacks: Iterable[Sequence[int]],
    walls: list[float],
    main: str | None,
    **rest: Any,
) -> dict[str, Any]:
    """A profile table (:mod:`.schema`), checked: ``rest`` its head (``timer``,
    ``unit``, ...) and its figures per run, per function and per stack."""
    data: dict[str, Any] = {
        "profiler": profiler,
        **rest,
        "functions": [list(f) for f in functions],
        "stacks": [list(s) for s in stacks],
        "wall": walls,
    }
    if main is not None:
        data["main"] = str(main)
    check_profile("data", data, TICKS if profiler == TICKS[0] else PROFILERS)
    return data


def _row_major(runs: Sequence[Iterable[tuple[int | None, float]]], rows: int) -> list[float]:
    """Each run's ``(row, figure)`` pairs added up (a None row left out) in one
    row-major column: row ``i``'s run ``r`` at ``i * len(runs) + r``."""
    count = len(runs)
    values = [0.0] * (rows * count)
    for r, pairs in enumerate(runs):
        for i, x in pairs:
            if i is not None:  # several keys may fold into one text: added up
                values[i * count + r] += x
    return values


def _per_function(
    runs: Sequence[Mapping[Any, Any]], index: Mapping[tuple[str, int, str], int], at: int | None
) -> list[float]:
    """Each run's figure per function (its value, or item ``at`` of its value: cProfile's
    ``(cc, nc, tt, ct, callers)``), added up in one function-major column."""
    return _row_major(
        [
            ((index.get(_key(f)), float(v if at is None else v[at])) for f, v in figures.items())
            for figures in runs
        ],
        len(index),
    )


def _edge_figures(stats: Mapping[Any, Any], index: Mapping[tuple[str, int, str], int]) -> Any:
    """``((caller index, callee index), seconds)`` of each edge of one run's stats."""
    for func, figures in stats.items():
        j = index.get(_key(func))
        callers = figures[4] if len(figures) > 4 else None
        if j is None or not isinstance(callers, Mapping):
            continue
        for caller, value in callers.items():
            i = index.get(_key(caller)) if isinstance(caller, tuple) else None
            if i is not None and isinstance(value, (tuple, list)) and len(value) >= 4:
                yield (i, j), float(value[3])


# An edge is saved when it holds at least this share of its run's profiled time in one
# run at least: half the smallest share a comparison tests by default (a
# 20,000-function profile has 220,000 edges, almost all of them far below it).
MIN_EDGE_SHARE = 5e-4


def _edges(
    runs: Sequence[Mapping[Any, Any]], index: Mapping[tuple[str, int, str], int], unit: float
) -> tuple[list[list[int]], list[int]]:
    """cProfile's call paths of length two: for each (caller, callee) holding at least
    :data:`MIN_EDGE_SHARE` of a run, the callee's inclusive time when that caller called
    it, edge-major (in ``unit``)."""
    edges: dict[tuple[int, int], int] = {}
    per_run = [list(_edge_figures(stats, index)) for stats in runs]
    for stats, figures in zip(runs, per_run, strict=True):
        total = math.fsum(float(v[2]) for v in stats.values() if len(v) > 2)
        least = MIN_EDGE_SHARE * total
        for edge, seconds in figures:
            if seconds >= least:
                edges.setdefault(edge, len(edges))
    times = _row_major([((edges.get(e), x) for e, x in figures) for figures in per_run], len(edges))
    return [list(e) for e in edges], _integers("edge", times, unit)


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
    """The payload of a report, checked: the parts it holds.

    :param timing: from :func:`timing_data`
    :param memory: from :func:`memory_data`
    :param profile: from :func:`profile_data`
    """
    parts = {"timing": timing, "memory": memory, "profile": profile}
    data = {k: dict(v) for k, v in parts.items() if v is not None}
    check_report("data", data)
    return data


def _is_fold(site: Any) -> bool:
    """A tree row standing for folded rows (``12 more``), no function."""
    return not site.file and int(site.line) == 0 and str(site.function).endswith(" more")


def _tree_paths(
    report: Any, index: dict[tuple[str, int, str], int]
) -> dict[tuple[int, ...], list[float]]:
    """The report's call tree as paths of function indices (outermost first), each with
    its seconds (callees included) and its own; folded rows left out, new functions added
    to ``index``. One pass over the pre-order rows, no recursion."""
    paths: dict[tuple[int, ...], list[float]] = {}
    row_path: list[tuple[int, ...] | None] = []
    for row in getattr(report, "tree", ()):
        parent = row_path[row.parent] if 0 <= row.parent < len(row_path) else ()
        if parent is None or _is_fold(row.site):
            row_path.append(None)
            continue
        path = (*parent, index.setdefault(_site(row), len(index)))
        row_path.append(path)
        if len(path) <= 1024:
            figures = paths.setdefault(path, [0.0, 0.0])
            figures[0] += max(float(row.time), 0.0)
            figures[1] += max(float(row.self_time), 0.0)
    return paths


# A run's figures per function (``own``: where it was the innermost user function;
# ``own_cpu``: its thread's CPU time over those samples), from the report's rows.
_RUN_COLUMNS = {
    "own": lambda row: max(float(row.self_time), 0.0),
    "own_cpu": lambda row: max(float(row.self_cpu), 0.0),
    "inclusive": lambda row: max(float(row.time), 0.0),
    "growth": lambda row: float(row.net),
    "to_peak": lambda row: float(row.to_peak),
}


def _run_figures(reports: Sequence[Any]) -> dict[str, list[Any]]:
    """Each run's exact peak, its RSS at the start and the end, its exit code and (when
    every run read it) its CPU seconds."""
    figures: dict[str, list[Any]] = {
        "peak": [max(float(r.peak.value), 0.0) for r in reports],
        "start": [max(float(r.peak.start), 0.0) for r in reports],
        "end": [max(float(r.end_rss), 0.0) for r in reports],
        "exit": [int(r.ending.code) for r in reports],
    }
    if all(r.cpu is not None and math.isfinite(r.cpu) for r in reports):
        figures["cpu"] = [max(float(r.cpu), 0.0) for r in reports]
    return figures


def run_data(reports: Sequence[Any], main: str | None = None) -> dict[str, Any]:
    """The payload of a ``run`` result, a profile table (:mod:`.schema`) in seconds: per
    run, the wall time, the exact peak, each function's times and memory growth and the
    call tree's paths (its stacks).

    :param reports: the ``_report.model.Report`` of each run (at least one)
    :param main: the program's script, matched with the other side's when compared
    :return: the payload, checked
    """
    index: dict[tuple[str, int, str], int] = {}
    for report in reports:
        for row in report.functions:
            index.setdefault(_site(row), len(index))
    trees = [_tree_paths(report, index) for report in reports]
    paths: dict[tuple[int, ...], int] = {}
    for tree in trees:
        for path in tree:
            paths.setdefault(path, len(paths))
    functions = {
        name: _row_major(
            [((index[_site(row)], figure(row)) for row in report.functions) for report in reports],
            len(index),
        )
        for name, figure in _RUN_COLUMNS.items()
    }
    stacks = {
        name: _row_major(
            [((paths[p], v[k]) for p, v in tree.items()) for tree in trees], len(paths)
        )
        for k, name in enumerate(("time", "self"))
    }
    interval = float(reports[0].interval) if reports else 0.0
    walls = [max(float(report.wall), 1e-9) for report in reports]
    head = {"timer": "wall", "unit": "s", "interval": interval if interval > 0 else 0.005}
    tables = {"function_figures": functions, "stack_figures": stacks}
    return _table(
        "ticks", index, paths, walls, main, **head, **tables, run_figures=_run_figures(reports)
    )


# The function a thread other than the main one roots its stacks at.
THREAD_FILE = "<thread>"
# A sampled stack's figures in each run: its own wall and CPU nanoseconds, its samples.
SAMPLED = ("wall", "cpu", "samples")


def _sampled_stacks(profile: Any) -> Any:
    """``(stack as (file, line, name) tuples, [wall, cpu, samples])`` of a profile, each
    thread other than the main one rooted at its own function."""
    for thread in profile.threads:
        root = () if thread.is_main else ((THREAD_FILE, 0, str(thread.name)),)
        for frames, totals in profile.thread_stacks(thread):
            if not frames and thread.is_main:
                continue
            stack = root + tuple((str(f.file), int(f.first_line), str(f.name)) for f in frames)
            yield stack, totals


def sampled_data(profiles: Sequence[Any], main: str | None = None) -> dict[str, Any]:
    """The payload of a sampled profile, one run per model.

    :param profiles: ``_sampling.model.SampledProfile`` of each run (at least one), read
        through its public shape only
    :param main: the program's script
    :return: the payload, checked
    """
    runs = [
        [(stack, [max(float(x), 0.0) for x in totals[:3]]) for stack, totals in _sampled_stacks(p)]
        for p in profiles
    ]
    cpu = all(bool(getattr(p, "cpu_known", False)) for p in profiles)
    head = {
        "timer": "cpu" if cpu else "wall",
        "sampler": str(profiles[0].timer) if profiles else "",
        "interval": float(profiles[0].interval) if profiles else 0.002,
    }
    walls = [max(float(p.duration), 1e-9) for p in profiles]
    return _sampled_payload(head, {}, runs, walls, main, 1e9)


def _sampled_payload(
    head: Mapping[str, Any],
    functions: dict[tuple[str, int, str], int],
    runs: Sequence[Sequence[tuple[tuple[Any, ...], Sequence[float]]]],
    walls: list[float],
    main: str | None,
    scale: float,
) -> dict[str, Any]:
    """A sampled payload, checked: ``head`` (timer, sampler, interval), each run's ``(stack
    of functions, [wall, cpu, samples])`` added up per stack (times in ``1 / scale``
    ns), ``functions`` the index they extend."""
    stacks: dict[tuple[int, ...], int] = {}
    per_run: list[dict[int, list[float]]] = []
    for run in runs:
        sums: dict[int, list[float]] = {}
        for stack, figures in run:
            ids = tuple(functions.setdefault(f, len(functions)) for f in stack)
            acc = sums.setdefault(stacks.setdefault(ids, len(stacks)), [0.0, 0.0, 0.0])
            for k in range(3):
                acc[k] += figures[k]
        per_run.append(sums)
    columns = {}
    for k, name in enumerate(SAMPLED):
        values = _row_major([((j, v[k]) for j, v in sums.items()) for sums in per_run], len(stacks))
        columns[name] = _integers(name, values, scale if k < 2 else 1.0)
    return _table(
        "sampled", functions, stacks, walls, main, **head, unit="ns", stack_figures=columns
    )


def merge_sampled(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One payload of the runs of several sampled payloads, re-indexed.

    :param parts: checked sampled payloads
    :return: the payload, checked
    """
    functions: dict[tuple[str, int, str], int] = {}
    runs: list[list[tuple[tuple[Any, ...], list[int]]]] = []
    walls: list[float] = []
    for part in parts:
        n = len(part["wall"])
        keys = [(str(f[0]), int(f[1]), str(f[2])) for f in part["functions"]]
        for key in keys:  # in the part's order, as they were indexed
            functions.setdefault(key, len(functions))
        stacks = [tuple(keys[i] for i in ids) for ids in part["stacks"]]
        columns = [part["stack_figures"][name] for name in SAMPLED]
        for r in range(n):
            runs.append([(s, [c[j * n + r] for c in columns]) for j, s in enumerate(stacks)])
        walls.extend(float(w) for w in part["wall"])
    first = parts[0]
    head = {
        "timer": "cpu" if all(p.get("timer") == "cpu" for p in parts) else "wall",
        "sampler": first.get("sampler", ""),
        "interval": first["interval"],
    }
    return _sampled_payload(head, functions, runs, walls, first.get("main"), 1.0)


def sampled_profile(data: Mapping[str, Any], program: str = "") -> Any:
    """The ``SampledProfile`` of a sampled payload, its runs added up, to render.

    :param data: a checked sampled payload
    :param program: what ran, for the headers
    """
    from .._sampling.model import SampledProfile, ThreadProfile
    from .._stacks.frames import SampledFrame

    frames = [SampledFrame(str(f[2]), str(f[0]), int(f[1]), int(f[1])) for f in data["functions"]]
    n = len(data["wall"])
    columns = data["stack_figures"]
    stacks: list[tuple[Any, ...]] = []
    threads: dict[str, ThreadProfile] = {}
    for j, ids in enumerate(data["stacks"]):
        first = data["functions"][ids[0]]
        name = str(first[2]) if first[0] == THREAD_FILE else "MainThread"
        body = ids[1:] if first[0] == THREAD_FILE else ids
        thread = threads.get(name)
        if thread is None:
            thread = threads[name] = ThreadProfile(len(threads), name, name == "MainThread", {})
        stacks.append(tuple(frames[i] for i in body))
        figures = [
            sum(columns[c][j * n : (j + 1) * n]) / (1e9 if c != "samples" else 1.0) for c in SAMPLED
        ]
        thread.totals[len(stacks) - 1] = figures
    ordered = sorted(threads.values(), key=lambda t: not t.is_main)
    notes = [f"{n} runs added up"] if n > 1 else []
    notes.append("saved runs keep functions, not lines")
    return SampledProfile(
        stacks=stacks,
        threads=ordered,
        interval=float(data["interval"]),
        timer=str(data.get("sampler") or "prof"),
        duration=sum(data["wall"]),
        cpu_time=sum(columns["cpu"]) / 1e9,
        samples=int(sum(columns["samples"])),
        notes=notes,
        program=program,
        cpu_known=data.get("timer") == "cpu",
        lines_known=False,
    )


def counted_series(
    name: str,
    per_execution: float,
    executions: int,
    noise: float = 0.0,
    summary: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A statement (or a whole run, one execution) counted by valgrind.

    :param name: the statement, or the program's command
    :param per_execution: instructions per execution
    :param executions: executions counted
    :param noise: instructions per execution within which a change is no change
    :param summary: the ``measure_time``-shaped summary kept beside
    :return: the series (``times``: the instructions counted)
    """
    series = timing_series(name, [per_execution * executions], [executions], summary)
    series["counter"] = "instructions"
    series["noise"] = float(noise)
    return series


def counted_profile_data(
    runs: Sequence[tuple[Mapping[Any, Any], int, float]],
    main: str | None = None,
    allocations: Sequence[Mapping[Any, int]] | None = None,
    alloc_bytes: Sequence[Mapping[Any, int]] | None = None,
) -> dict[str, Any]:
    """The payload of a profile counted by valgrind, per Python function.

    :param runs: ``(stats, total, wall)`` per run: cProfile-shaped instructions
        (``_count.callgraph``), the whole run's, valgrind's wall seconds
    :param main: the program's script
    :param allocations: per run, each function's calls to the allocators
    :param alloc_bytes: per run, each function's allocated bytes
    :return: the payload, checked
    """
    # Instructions where a timed profile stores nanoseconds (callgrind's figures are lists).
    data = profile_data([(stats, wall) for stats, _, wall in runs], main=main, unit=1.0)
    data["counter"] = "instructions"
    data["run_figures"] = {"total": [float(total) for _, total, _ in runs]}
    index = {(f[0], f[1], f[2]): i for i, f in enumerate(data["functions"])}
    for column, per_run in (("alloc_calls", allocations), ("alloc_bytes", alloc_bytes)):
        if per_run is not None:
            figures = _integers(column, _per_function(per_run, index, None), 1.0)
            data["function_figures"][column] = figures
    check_profile("data", data)
    return data
