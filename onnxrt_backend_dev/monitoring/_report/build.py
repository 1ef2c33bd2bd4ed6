"""Builds the :class:`.model.Report` from an :class:`.aggregate.Aggregator` and what
the run learnt besides (the spy's curves, CPU time, how the program ended).

Every walk over stacks and the tree uses loops and explicit stacks, never recursion.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from .._format import format_bytes, format_duration
from .._memory.where import tick_rows
from .._sampling.aggregate import NO_STACK, RISE_NOISE, Aggregator
from .._sampling.model import (
    CPU,
    HIGHEST,
    NCOLUMNS,
    NET,
    POOL,
    PYTHON,
    SAMPLES,
    TO_PEAK,
    WALL,
    SampledProfile,
    ThreadProfile,
)
from .._sampling.view import (
    FOLD_SHARE,
    build_tree,
    function_figures,
    innermost_user,
    line_figures,
    short_file,
    source_line,
    visible_rows,
)
from .._stacks.frames import SampledFrame, is_library_path
from .model import (
    Allocations,
    Curve,
    Device,
    Ending,
    FunctionRow,
    LineRow,
    Part,
    Peak,
    Report,
    Site,
    Span,
    TreeRow,
)

MAX_CURVE_POINTS = 4000  # per curve: enough for a page 1400 pixels wide, twice over
MAX_SPANS = 4000
MAX_LINES = 25
MAX_PARTS = 8
# A stack of a thread other than the main one is a wait below this CPU share of its wall.
WAITING_CPU = 0.02


# A sampled thread: name, is it the main one, and per stack id of the aggregator's
# (``NO_STACK``: no frame) the model's first columns (wall, CPU, samples and, where the
# collector splits it, Python, native, system and queued seconds).
SampledThread = tuple[str, bool, dict[int, Sequence[float]]]


class RunFacts(NamedTuple):
    """What the run knows beside the ticks.

    :param program: what ran
    :param ending: how it ended
    :param interval: seconds between ticks
    :param cpu: CPU seconds, None if unknown
    :param wall: seconds, the ticks' span if None
    :param t0: the start on the ticks' clock (the first tick's time if None)
    :param curves: extra curves (times on the ticks' clock): the spy's RSS, the devices
    :param devices: each device's peak
    :param exact_peak: a peak known from outside (the spy, ``wait4``), bytes
    :param pid: the process
    :param started: ISO 8601 start time
    :param notes: sentences for the reader
    :param threads: the time sampler's stacks per thread (the time columns come from
        them when given, from the ticks otherwise)
    :param children: forked children of the program, labelled, with their own ticks
    :param tool_rss: bytes of the tool's own start-up memory already taken off the RSS
        figures (0: none)
    :param allocations: the allocations section (:mod:`.allocations`; None: the shim
        did not run)
    :param held: the line holding the most allocated bytes at the peak, the library
        function it called and its stack (:func:`.allocations.peak_place`): the peak's
        builder, instead of the largest growth up to the peak
    """

    program: str
    ending: Ending
    interval: float
    cpu: float | None = None
    wall: float | None = None
    t0: float | None = None
    curves: Sequence[tuple[str, Sequence[float], Sequence[float], str]] = ()
    devices: Sequence[Device] = ()
    exact_peak: float | None = None
    pid: int = 0
    started: str = ""
    notes: Sequence[str] = ()
    threads: Sequence[SampledThread] = ()
    children: Sequence[tuple[str, Aggregator]] = ()
    tool_rss: float = 0.0
    allocations: Allocations | None = None
    held: tuple[Site, str, tuple[Site, ...]] | None = None


def package_of(filename: str) -> str:
    """The package a library file belongs to (``numpy``), ``"stdlib"`` otherwise."""
    name = filename.replace("\\", "/")
    for marker in ("site-packages/", "dist-packages/"):
        if marker in name:
            rest = name.split(marker, 1)[1]
            return rest.split("/", 1)[0].removesuffix(".py")
    return "stdlib" if name and not name.startswith("<") else "built-in"


def _site(frame: SampledFrame) -> Site:
    return Site(frame.name, frame.file, frame.line, is_library_path(frame.file))


def _line_of(frames: Sequence[SampledFrame]) -> tuple[tuple[str, str, int] | None, str]:
    """The innermost user line of a stack (function, file, line) and the library
    function it called (``numpy.ones``, empty if none); None and "" for no frame."""
    if not frames:
        return None, ""
    user = innermost_user(frames, last=True)
    line = (frames[user].name, frames[user].file, frames[user].line)
    callee = frames[user + 1] if user + 1 < len(frames) else None
    if callee is None or not is_library_path(callee.file) or callee.name == "<module>":
        return line, ""
    return line, f"{package_of(callee.file)}.{callee.name}"


def _place(agg: Aggregator, sid: int) -> tuple[Site | None, str, tuple[Site, ...]]:
    frames = agg.stacks.get(sid, ())
    line, called = _line_of(frames)
    if line is None:
        return None, "", ()
    return Site(*line, is_library_path(line[1])), called, tuple(_site(f) for f in frames)


def _builder(agg: Aggregator, parts: dict[int, float]) -> int:
    """The stack standing for the line that built the peak: the line running when the
    peak was reached, unless another user line grew the memory more than twice as much
    up to the peak (then that one)."""

    def line_key(sid: int) -> tuple[str, str, int] | None:
        return _line_of(agg.stacks.get(sid, ()))[0]

    by_line: defaultdict[tuple[str, str, int] | None, float] = defaultdict(float)
    for sid, value in parts.items():
        by_line[line_key(sid)] += value
    if not by_line:
        return agg.peak_sid
    dated = line_key(agg.peak_sid)
    best = max(by_line, key=lambda k: by_line[k])
    # The line that completed the peak built it when it holds at least half as much as
    # the line holding the most (two arrays of one size: sampled from outside, the
    # interval where one ends and the next begins goes to one of them, so their figures
    # differ by up to a tick's growth); a small temporary tipping a large load over the
    # top did not: the load did.
    if dated in by_line and by_line[dated] >= 0.5 * by_line[best]:
        return agg.peak_sid
    on_line = [sid for sid in parts if line_key(sid) == best]
    return max(on_line, key=lambda sid: parts[sid])


def _curve(name: str, times: Sequence[float], values: Sequence[float], source: str) -> Curve:
    """At most ``MAX_CURVE_POINTS`` points, the highest of each bucket kept."""
    n = len(values)
    step = max(-(-n // MAX_CURVE_POINTS), 1)
    kept = [max(range(i, min(i + step, n)), key=values.__getitem__) for i in range(0, n, step)]
    t, v = tuple(times[j] for j in kept), tuple(values[j] for j in kept)
    if not v:
        return Curve(name, (), (), 0.0, 0.0, source)
    j = max(range(len(v)), key=v.__getitem__)
    return Curve(name, t, v, v[j], t[j], source)


def _rss_curve(agg: Aggregator, facts: RunFacts, t0: float) -> Curve:
    """The RSS curve: the ticks' and the spy's together (the spy's fill long C calls,
    when no tick runs; the ticks' cover the start, before the spy, another process, has
    its first sample), from the program's start (``t0``: times before it are the tool's
    own start), with the exact peak as one more point at its moment."""
    spy = [c for c in facts.curves if c[0] == "rss"]
    points = [(t - t0, v) for t, v in zip(agg.times, agg.rss, strict=True)]
    if spy:
        points.extend((t - t0, v) for t, v in zip(spy[0][1], spy[0][2], strict=True))
    if agg.n:
        points.append((agg.peak_t - t0, agg.peak))
        points.append((agg.last_t - t0, agg.last_rss))
        points.append((max(agg.first_t - t0, 0.0), agg.first_rss))
    points = sorted(p for p in points if p[0] >= 0.0)
    if points and points[0][0] > 0.0 and agg.n:  # the curve starts with the program
        points.insert(0, (0.0, agg.first_rss))
    curve = _curve("rss", [p[0] for p in points], [p[1] for p in points], "ticks")
    source = spy[0][3] if spy else "ticks"
    return Curve("rss", curve.times, curve.values, agg.peak, agg.peak_t - t0, source)


def model_of(agg: Aggregator, facts: RunFacts) -> SampledProfile:
    """The run's stack model on the aggregator's stack ids: each thread's (and each child
    process's) columns per stack: time and CPU from the time sampler (or the ticks' time
    where no sampler ran), memory from the ticks (growth, growth up to the peak, highest
    RSS), given to the thread that ran that stack (the main thread first).

    :param agg: the main process's ticks, folded, its stacks declared
    :param facts: the rest of the run (its sampled threads, its child processes)
    :return: the model
    """
    stacks = _stack_list(agg)
    no_frame = -1  # the id of the empty stack (time outside the code measured), if used
    threads: list[ThreadProfile] = []
    # A stack of another thread that got (almost) no CPU is a wait (IPython's history
    # thread, a pool's idle worker): not the program's time. Only when CPU was measured.
    cpu_known = any(float(e[1]) > 0 for _, _, rows in facts.threads for e in rows.values())
    for name, is_main, rows in facts.threads:
        totals: dict[int, list[float]] = {}
        for sid, entry in rows.items():
            if not is_main and cpu_known and float(entry[1]) <= WAITING_CPU * float(entry[0]):
                continue
            if sid == NO_STACK:
                if no_frame < 0:
                    no_frame = len(stacks)
                    stacks.append(())
                sid = no_frame
            elif not 0 <= sid < len(stacks):
                continue
            totals[sid] = [float(v) for v in entry] + [0.0] * (NCOLUMNS - len(entry))
        threads.append(ThreadProfile(0, name, bool(is_main), totals))
    if not any(t.is_main for t in threads):
        threads.insert(0, ThreadProfile(0, "MainThread", True, {}))
    threads.sort(key=lambda t: not t.is_main)
    _memory_columns(agg, threads, 0, timed=bool(facts.threads))
    for label, child in facts.children:
        # A child process's ids are its own: its stacks follow the program's.
        name = label[len("process ") :] if label.startswith("process ") else label
        process = ThreadProfile(0, name, False, {}, kind="process")
        _memory_columns(child, [process], len(stacks), timed=False)
        stacks.extend(_stack_list(child))
        threads.append(process)
    return SampledProfile(stacks, threads, facts.interval, "ticks", facts.wall or 0.0,
                          facts.cpu or 0.0, agg.n, memory_known=True,
                          split_known=any(len(r) > PYTHON for _, _, rs in facts.threads
                                          for r in rs.values()))  # fmt: skip


def _stack_list(agg: Aggregator) -> list[tuple[SampledFrame, ...]]:
    """The aggregator's stacks by id (an id never declared: no frame)."""
    return [agg.stacks.get(sid, ()) for sid in range(max(agg.stacks, default=-1) + 1)]


def _memory_columns(
    agg: Aggregator, threads: list[ThreadProfile], offset: int, timed: bool
) -> None:
    """Adds the ticks' memory (and, unless ``timed`` by a sampler, their time) to the
    thread that has the stack, the first one (the main thread) otherwise; ``offset`` is
    the model's id of the aggregator's stack 0."""
    ticks = tick_rows(agg, agg.composition())
    added = (NET, TO_PEAK) if timed else (NET, TO_PEAK, WALL, SAMPLES)
    for tick_sid, frames in agg.stacks.items():
        if not frames:
            continue
        sid = offset + tick_sid
        owner = next((t for t in threads if sid in t.totals), threads[0])
        row = owner.totals.setdefault(sid, [0.0] * NCOLUMNS)
        tick = ticks.get(tick_sid, [0.0] * NCOLUMNS)  # a stack declared, never ticked
        for column_index in added:
            row[column_index] += tick[column_index]
        row[HIGHEST] = max(row[HIGHEST], tick[HIGHEST])


def _tree_rows(model: SampledProfile, total: float, span: float) -> list[TreeRow]:
    """The call tree in pre-order, heaviest first, through the views' one fold (library
    frames folded, imports named, small siblings by time and by memory folded into one
    row): the main thread's rows at the top, each other thread and child process under a
    row of its own."""
    rows: list[TreeRow] = []
    for thread in model.threads:
        root = build_tree(model, thread)
        if not (thread.is_main or root.wall or root.net or root.to_peak):
            continue
        root.label, root.file = f"{thread.kind} {thread.name}", ""
        parents = [-1]  # per depth, the index of the row the next one at that depth is under
        # An "N more" row saying under a fifth of the share stands for nothing.
        drawn = visible_rows(root, FOLD_SHARE, min_more=FOLD_SHARE * 0.2, span=span, total=total)
        for depth, node, _ in drawn:
            if thread.is_main:  # its rows are the tree's top, the thread's row not drawn
                if node is root:
                    continue
                depth -= 1
            del parents[depth + 1 :]
            site = Site(node.label, node.file, node.line, is_library_path(node.file))
            rows.append(TreeRow(parents[-1], depth, site, node.wall, node.self_wall, node.net,
                                node.to_peak, node.highest, hidden=node.hidden_text()))  # fmt: skip
            parents.append(len(rows) - 1)
    return rows


def _lines(model: SampledProfile) -> list[LineRow]:
    """The hot lines: the innermost user line of each stack, by time, and the lines
    that grew the memory most up to the peak."""
    figures = line_figures(model)
    by_time = sorted(figures.items(), key=lambda kv: -kv[1][WALL])[:MAX_LINES]
    by_peak = sorted(figures.items(), key=lambda kv: -kv[1][TO_PEAK])[: MAX_LINES // 2]
    chosen = dict(by_time)
    chosen.update(kv for kv in by_peak if kv[1][TO_PEAK] > 0)
    rows = [
        LineRow(
            Site(f, file, line, is_library_path(file)),
            v[WALL],
            v[NET],
            v[TO_PEAK],
            source_line(file, line) if os.path.isfile(file) else "",
            split=tuple(v[3:7]) + ((v[POOL],) if v[POOL] else ()),
        )
        for (f, file, _first, line), v in chosen.items()
        if v[WALL] or v[NET] or v[TO_PEAK]
    ]
    return sorted(rows, key=lambda r: (-r.time, -r.to_peak))


def _functions(model: SampledProfile) -> list[FunctionRow]:
    """Every function's flat figures: each stack's go to every distinct function on it
    (callees included), its own time and CPU to its innermost user function; all
    threads and processes added up."""
    rows = [
        FunctionRow(
            Site(*k, is_library_path(k[1])), on[WALL], own[WALL], on[NET], on[TO_PEAK], own[CPU]
        )
        for k, (on, own) in function_figures(model).items()
    ]
    return sorted(rows, key=lambda r: (-r.time, -r.net))


def _composition(agg: Aggregator, parts: dict[int, float]) -> list[Part]:
    by_function: defaultdict[str, float] = defaultdict(float)
    for sid, value in parts.items():
        frames = agg.stacks.get(sid, ())
        if frames:
            f = frames[innermost_user(frames, last=True)]
            label = f"{f.name} ({short_file(f.file)}:{f.first_line})"  # as every view shows paths
        else:
            label = "(no Python frame)"
        by_function[label] += value
    ordered = sorted(by_function.items(), key=lambda kv: -kv[1])
    floor = FOLD_SHARE * abs(sum(by_function.values()))  # slivers join "other"
    shown = [Part(k, v) for k, v in ordered[:MAX_PARTS] if abs(v) >= floor and v]
    rest = sum(v for k, v in ordered if k not in {p.label for p in shown})
    if rest:
        shown.append(Part("other", rest))
    return shown


def _label(frames: Sequence[SampledFrame], row: int) -> str:
    if not frames:
        return "(idle)"
    if row == 1:
        return frames[innermost_user(frames, last=True)].name
    for f in frames:
        if f.name != "<module>" and not is_library_path(f.file):
            return f.name
    return frames[0].name


def _timeline(agg: Aggregator, t0: float, end: float) -> list[Span]:
    times = list(agg.times)
    # A tick stands for the interval that ends with it.
    begins = [(times[i - 1] if i else t) - t0 for i, t in enumerate(times)]
    spans: list[Span] = []
    for row in (0, 1):
        labels = [_label(agg.stacks.get(agg.sids[i], ()), row) for i in range(len(times))]
        # A span from the first tick of a label to the first tick of the next one.
        firsts = [i for i, label in enumerate(labels) if not i or label != labels[i - 1]]
        ends = [*(begins[i] for i in firsts[1:]), end]
        spans.extend(Span(begins[i], e, row, labels[i]) for i, e in zip(firsts, ends, strict=False))
    if len(spans) > MAX_SPANS:  # keep the longest: the page shows what lasted
        longest = sorted(spans, key=lambda s: s.start - s.end)[:MAX_SPANS]
        spans = sorted(longest, key=lambda s: (s.row, s.start))
    return spans


def _two_peaks(peak: Peak, alloc: Any, wall: float) -> list[str]:
    """Why the heap's peak and the RSS's differ, when they do (in size or in time)."""
    if alloc is None or alloc.peak <= 0:
        return []
    apart = abs(alloc.peak_time - peak.time) > max(0.5, 0.1 * wall)
    if not apart and alloc.peak <= 1.1 * peak.value:  # the heap is part of the RSS
        return []
    return [
        f"the heap peak ({format_bytes(alloc.peak)} at {format_duration(alloc.peak_time)}) "
        f"is not the RSS peak ({format_bytes(peak.value)} at {format_duration(peak.time)}): "
        "the heap counts the bytes asked for (a buffer mapped and never touched too), the "
        "RSS the pages touched and not given back (memory freed but kept by the allocator)"
    ]


def build_report(agg: Aggregator, facts: RunFacts) -> Report:
    """The report of one run.

    :param agg: the ticks, folded
    :param facts: the rest of what the run knows
    :return: the report
    """
    if facts.exact_peak is not None:
        agg.raise_peak(facts.exact_peak)
    t0 = agg.first_t if facts.t0 is None else facts.t0
    wall = facts.wall if facts.wall is not None else max(agg.last_t - t0, 0.0)
    parts = agg.composition()
    site, called, stack = _place(agg, _builder(agg, parts))
    reached = _place(agg, agg.peak_sid)[0]
    if agg.peak - agg.first_rss <= RISE_NOISE:  # nothing grew: no line built the peak
        site, called, stack, reached = None, "", (), None
    peak = Peak(
        agg.peak, agg.first_rss, agg.peak_t - t0 if agg.n else 0.0, site, called, stack, "hwm",
        reached, facts.tool_rss,
    )  # fmt: skip
    last_site, _, last_stack = _place(agg, agg.last_rise_sid)
    e = facts.ending
    ending = Ending(e.kind, e.code, e.detail, last_site, last_stack)
    curves = [_rss_curve(agg, facts, t0)]
    curves.extend(
        _curve(f"rss {label}", [t - t0 for t in child.times], list(child.rss), "ticks")
        for label, child in facts.children
        if child.n
    )
    curves.extend(
        _curve(name, [t - t0 for t in times], values, source)
        for name, times, values, source in facts.curves
        if name != "rss"
    )
    span = abs(agg.peak - agg.first_rss) or 1.0
    model = model_of(agg, facts)
    total = sum(t[WALL] for th in model.threads for _, t in model.thread_stacks(th)) or 1e-9
    notes = list(facts.notes)
    if agg.dropped:
        notes.append(f"{agg.dropped} ticks were lost (a full buffer or too many stacks)")
    if not agg.n:
        notes.append("no memory tick: the program ended before the first one")
    if facts.held is not None:  # what holds most at the peak: the line that built it
        peak = replace(peak, site=facts.held[0], called=facts.held[1], stack=facts.held[2])
    notes.extend(_two_peaks(peak, facts.allocations, wall))
    return Report(
        program=facts.program,
        wall=wall,
        cpu=facts.cpu,
        interval=facts.interval,
        n_ticks=agg.n,
        peak=peak,
        end_rss=agg.last_rss,
        ending=ending,
        curves=tuple(curves),
        devices=tuple(facts.devices),
        timeline=tuple(_timeline(agg, t0, wall)),
        tree=tuple(_tree_rows(model, total, span)),
        lines=tuple(_lines(model)),
        composition=tuple(_composition(agg, parts)),
        pid=facts.pid,
        started=facts.started,
        dropped=agg.dropped,
        notes=tuple(notes),
        functions=tuple(_functions(model)),
        allocations=facts.allocations,
    )
