"""Builds the :class:`.model.Report` from an :class:`.aggregate.Aggregator` and what
the run learnt besides (the spy's curves, CPU time, how the program ended).

Every walk over stacks and the tree uses loops and explicit stacks, never recursion.
"""

from __future__ import annotations

import linecache
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from .._stacks.frames import is_library_path
from .aggregate import Aggregator, RawFrame
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

_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")
MAX_CURVE_POINTS = 4000  # per curve: enough for a page 1400 pixels wide, twice over
MAX_SPANS = 4000
MAX_LINES = 25
MAX_PARTS = 8
FOLD_SHARE = 0.005  # tree rows under this share of time and of memory fold into "N more"


# A stack with its figures: frames, (seconds, net growth, growth to peak, highest RSS).
_Entry = tuple[Sequence[RawFrame], tuple[float, float, float, float]]
# A sampled thread: name, is it the main one, (frames, wall seconds, CPU seconds) per stack.
SampledThread = tuple[str, bool, Sequence[tuple[Sequence[RawFrame], float, float]]]


@dataclass(frozen=True)
class RunFacts:
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
    notes: Sequence[str] = field(default=())
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


def _site(frame: RawFrame, first_line: bool = False) -> Site:
    function, file, line, first = frame
    return Site(function, file, first if first_line else line, is_library_path(file))


def _innermost_user(frames: Sequence[RawFrame]) -> int:
    """Index of the innermost frame of user code, the innermost frame if all are library.
    Code compiled from a string (``<string>``) counts as the library's when a library
    frame ran it (a namedtuple's, numpy's), as the user's otherwise (a notebook cell)."""
    for i in range(len(frames) - 1, -1, -1):
        function, file = frames[i][0], frames[i][1]
        if is_library_path(file):
            continue
        if file.startswith("<") and i and is_library_path(frames[i - 1][1]):
            continue
        if function.endswith(_COMPREHENSIONS) and i and frames[i - 1][1] == file:
            continue  # the function that holds it (3.12 inlines them, PEP 709)
        return i
    return len(frames) - 1


def _called(frames: Sequence[RawFrame], user: int) -> str:
    """The library function the user line called (``numpy.ones``), empty if none."""
    if user + 1 >= len(frames):
        return ""
    function, file = frames[user + 1][0], frames[user + 1][1]
    if not is_library_path(file) or function == "<module>":
        return ""
    return f"{package_of(file)}.{function}"


def _place(agg: Aggregator, sid: int) -> tuple[Site | None, str, tuple[Site, ...]]:
    frames = agg.stacks.get(sid, ())
    if not frames:
        return None, "", ()
    user = _innermost_user(frames)
    return _site(frames[user]), _called(frames, user), tuple(_site(f) for f in frames)


def _line_key(agg: Aggregator, sid: int) -> tuple[str, str, int] | None:
    frames = agg.stacks.get(sid, ())
    if not frames:
        return None
    function, file, line, _ = frames[_innermost_user(frames)]
    return function, file, line


def _builder(agg: Aggregator, parts: dict[int, float]) -> int:
    """The stack standing for the line that built the peak: the user line with the
    largest growth up to the peak, the dated peak's line on a tie (within 1 %)."""
    by_line: dict[tuple[str, str, int] | None, float] = {}
    for sid, value in parts.items():
        key = _line_key(agg, sid)
        by_line[key] = by_line.get(key, 0.0) + value
    if not by_line:
        return agg.peak_sid
    dated = _line_key(agg, agg.peak_sid)
    best = max(by_line, key=lambda k: by_line[k])
    tie = 0.01 * max(agg.peak - agg.first_rss, 0.0)
    if dated in by_line and by_line[dated] >= by_line[best] - tie:
        return agg.peak_sid
    on_line = [sid for sid in parts if _line_key(agg, sid) == best]
    return max(on_line, key=lambda sid: parts[sid])


def _decimate(times: Sequence[float], values: Sequence[float]) -> tuple[list[float], list[float]]:
    """At most ``MAX_CURVE_POINTS`` points, the highest of each bucket kept."""
    n = len(values)
    if n <= MAX_CURVE_POINTS:
        return list(times), list(values)
    step = -(-n // MAX_CURVE_POINTS)
    out_t, out_v = [], []
    for i in range(0, n, step):
        j = max(range(i, min(i + step, n)), key=values.__getitem__)
        out_t.append(times[j])
        out_v.append(values[j])
    return out_t, out_v


def _curve(name: str, times: Sequence[float], values: Sequence[float], source: str) -> Curve:
    t, v = _decimate(times, values)
    if not v:
        return Curve(name, (), (), 0.0, 0.0, source)
    j = max(range(len(v)), key=v.__getitem__)
    return Curve(name, tuple(t), tuple(v), v[j], t[j], source)


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


class _Node:
    __slots__ = (
        "children", "hidden", "highest", "label", "net", "self_time", "site", "time", "to_peak"
    )  # fmt: skip

    def __init__(self, site: Site, label: bool = False) -> None:
        self.site = site
        self.label = label  # the root row of another thread or process
        self.children: dict[tuple[str, str, int], _Node] = {}
        self.time = self.self_time = 0.0
        self.net = self.to_peak = 0.0
        self.highest = 0.0
        self.hidden: dict[tuple[str, str], str] = {}


def _tick_entries(agg: Aggregator, label: str, timed: bool) -> list[tuple[str, _Entry]]:
    parts = agg.composition()
    entries: list[tuple[str, _Entry]] = []
    for sid, frames in agg.stacks.items():
        seconds = 0.0 if timed else agg.seconds.get(sid, 0.0)
        figures = (seconds, agg.net.get(sid, 0.0), parts.get(sid, 0.0), agg.highest.get(sid, 0.0))
        if any(figures[:3]):
            entries.append((label, (frames, figures)))
    return entries


def _entries(agg: Aggregator, facts: RunFacts) -> list[tuple[str, _Entry]]:
    """Every stack with its figures, under the thread or process it ran in (``""``: the
    program's main thread). Memory comes from the ticks; time from the sampler where it
    ran (every thread, CPU time aware), from the ticks otherwise."""
    threads = facts.threads
    entries = _tick_entries(agg, "", bool(threads))
    for label, child in facts.children:
        entries.extend(_tick_entries(child, label, False))
    for name, is_main, stacks in threads:
        label = "" if is_main else f"thread {name}"
        entries.extend((label, (frames, (wall, 0.0, 0.0, 0.0))) for frames, wall, _ in stacks)
    return entries


def _tree(entries: Sequence[tuple[str, _Entry]]) -> _Node:
    """The call tree: library frames called by library frames fold into the first one;
    other threads each under a root row of their own."""
    root = _Node(Site("", "", 0))
    for thread, (frames, figures) in entries:
        node, previous_library = root, False
        if thread:
            key = (thread, "", 0)
            node = root.children.get(key) or root.children.setdefault(
                key, _Node(Site(thread, "", 0), label=True)
            )
            _add(node, figures)
        for frame in frames:
            library = is_library_path(frame[1])
            if library and previous_library:
                node.hidden[frame[0], frame[1]] = package_of(frame[1])
                continue
            key = (frame[0], frame[1], frame[3])
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = _Node(_site(frame, first_line=True))
            node, previous_library = child, library
            _add(node, figures)
        if node is not root:
            node.self_time += figures[0]
    return root


def _add(node: _Node, figures: tuple[float, float, float, float]) -> None:
    count, net, to_peak, highest = figures
    node.time += count
    node.net += net
    node.to_peak += to_peak
    node.highest = max(node.highest, highest)


def _hidden(node: _Node) -> str:
    if not node.hidden:
        return ""
    packages = sorted(set(node.hidden.values()))
    return f"{len(node.hidden)} frames hidden ({', '.join(packages)})"


def _keep(node: _Node, total: float, span: float) -> bool:
    return (
        node.time >= FOLD_SHARE * total
        or abs(node.to_peak) >= FOLD_SHARE * span
        or abs(node.net) >= FOLD_SHARE * span
    )


def _rows(root: _Node, total: float, span: float) -> list[TreeRow]:
    """The tree in pre-order, heaviest first; small siblings fold into one row."""
    rows: list[TreeRow] = []
    todo: list[tuple[_Node, int, int]] = [(root, -1, -1)]
    while todo:
        node, parent, depth = todo.pop()
        index = parent
        if node is not root:
            index = len(rows)
            figures = (node.time, node.self_time, node.net, node.to_peak, node.highest)
            rows.append(TreeRow(parent, depth, node.site, *figures, hidden=_hidden(node)))
        # The program's main thread first, then the other threads and processes (a thread
        # waiting the whole run would otherwise come first), each heaviest first.
        children = sorted(node.children.values(), key=lambda c: (c.label, -c.time, -c.to_peak))
        kept = [c for c in children if _keep(c, total, span)]
        folded = [c for c in children if not _keep(c, total, span)]
        if folded:
            other = _Node(Site(f"{len(folded)} more", "", 0))
            for c in folded:
                _add(other, (c.time, c.net, c.to_peak, c.highest))
                other.self_time += c.time
            # A row saying under 0.1 % of the time and of the memory stands for nothing.
            if _keep(other, total * 0.2, span * 0.2):
                kept.append(other)
        todo.extend((c, index, depth + 1) for c in reversed(kept))
    return rows


def _source(file: str, line: int) -> str:
    if not file or file.startswith("<") or not os.path.isfile(file):
        return ""
    return linecache.getline(file, line).strip()[:200]


def _lines(entries: Sequence[tuple[str, _Entry]]) -> list[LineRow]:
    figures: dict[tuple[str, str, int], list[float]] = {}
    for _, (frames, (seconds, net, to_peak, _)) in entries:
        if not frames:
            continue
        function, file, line, _ = frames[_innermost_user(frames)]
        if is_library_path(file):
            continue  # all library (a pool's threads): no line of the user's to show
        row = figures.setdefault((function, file, line), [0.0, 0.0, 0.0])
        row[0] += seconds
        row[1] += net
        row[2] += to_peak
    by_time = sorted(figures.items(), key=lambda kv: -kv[1][0])[:MAX_LINES]
    by_peak = sorted(figures.items(), key=lambda kv: -kv[1][2])[: MAX_LINES // 2]
    chosen = dict(by_time)
    chosen.update(kv for kv in by_peak if kv[1][2] > 0)
    rows = [
        LineRow(Site(f, file, line, is_library_path(file)), v[0], v[1], v[2], _source(file, line))
        for (f, file, line), v in chosen.items()
    ]
    return sorted(rows, key=lambda r: (-r.time, -r.to_peak))


def _functions(
    entries: Sequence[tuple[str, _Entry]], threads: Sequence[SampledThread] = ()
) -> list[FunctionRow]:
    """Every function's flat figures: each stack's go to every distinct function on it
    (callees included), its own time and the sampler's CPU time to its innermost user
    function; all threads and processes added up."""
    figures: dict[tuple[str, str, int], list[float]] = {}
    cpu: dict[tuple[str, str, int], float] = {}
    for _, _, stacks in threads:
        for frames, _, seconds in stacks:
            if frames:
                function, file, _, first = frames[_innermost_user(frames)]
                cpu[function, file, first] = cpu.get((function, file, first), 0.0) + seconds
    for _, (frames, (seconds, net, to_peak, _)) in entries:
        if not frames:
            continue
        # Each function once (a recursion), outermost first: ties keep the stack's order.
        for function, file, first in dict.fromkeys((f[0], f[1], f[3]) for f in frames):
            row = figures.setdefault((function, file, first), [0.0, 0.0, 0.0, 0.0])
            row[0] += seconds
            row[2] += net
            row[3] += to_peak
        function, file, _, first = frames[_innermost_user(frames)]
        figures[function, file, first][1] += seconds
    rows = [
        FunctionRow(Site(*k, is_library_path(k[1])), v[0], v[1], v[2], v[3], cpu.get(k, 0.0))
        for k, v in figures.items()
    ]
    return sorted(rows, key=lambda r: (-r.time, -r.net))


def _composition(agg: Aggregator, parts: dict[int, float]) -> list[Part]:
    by_function: dict[str, float] = {}
    for sid, value in parts.items():
        frames = agg.stacks.get(sid, ())
        if frames:
            function, file, _, first = frames[_innermost_user(frames)]
            label = f"{function} ({file}:{first})"
        else:
            label = "(no Python frame)"
        by_function[label] = by_function.get(label, 0.0) + value
    ordered = sorted(by_function.items(), key=lambda kv: -kv[1])
    floor = FOLD_SHARE * abs(sum(by_function.values()))  # slivers join "other"
    shown = [Part(k, v) for k, v in ordered[:MAX_PARTS] if abs(v) >= floor and v]
    rest = sum(v for k, v in ordered if k not in {p.label for p in shown})
    if rest:
        shown.append(Part("other", rest))
    return shown


def _label(frames: Sequence[RawFrame], row: int) -> str:
    if not frames:
        return "(idle)"
    if row == 1:
        return frames[_innermost_user(frames)][0]
    for function, file, _, _ in frames:
        if function != "<module>" and not is_library_path(file):
            return function
    return frames[0][0]


def _timeline(agg: Aggregator, t0: float, end: float) -> list[Span]:
    spans: list[Span] = []
    times = list(agg.times)
    for row in (0, 1):
        current: str | None = None
        start = 0.0
        for i, t in enumerate(times):
            # A tick stands for the interval that ends with it.
            begin = (times[i - 1] if i else t) - t0
            label = _label(agg.stacks.get(agg.sids[i], ()), row)
            if label != current:
                if current is not None:
                    spans.append(Span(start, begin, row, current))
                current, start = label, begin
        if current is not None:
            spans.append(Span(start, end, row, current))
    if len(spans) > MAX_SPANS:  # keep the longest: the page shows what lasted
        spans = sorted(sorted(spans, key=lambda s: s.start - s.end)[:MAX_SPANS], key=_span_key)
    return spans


def _span_key(span: Span) -> tuple[int, float]:
    return span.row, span.start


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
    peak = Peak(
        agg.peak, agg.first_rss, agg.peak_t - t0, site, called, stack, "hwm", reached,
        facts.tool_rss,
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
    entries = _entries(agg, facts)
    total = sum(e[1][1][0] for e in entries) or 1e-9
    notes = list(facts.notes)
    if agg.dropped:
        notes.append(f"{agg.dropped} ticks were lost (a full buffer or too many stacks)")
    if facts.held is not None:  # what holds most at the peak: the line that built it
        peak = replace(peak, site=facts.held[0], called=facts.held[1], stack=facts.held[2])
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
        tree=tuple(_rows(_tree(entries), total, span)),
        lines=tuple(_lines(entries)),
        composition=tuple(_composition(agg, parts)),
        pid=facts.pid,
        started=facts.started,
        dropped=agg.dropped,
        notes=tuple(notes),
        functions=tuple(_functions(entries, facts.threads)),
        allocations=facts.allocations,
    )
