"""Where the memory went: the spy's memory series joined with the sampled stacks.

The spy (another process) knows when memory rose: its tick ``k`` at ``t[k]`` saw the
highest memory ``v[k]`` of the interval ``(t[k-1], t[k]]`` (the kernel's high-water mark
with ``reset_peak``) and the memory ``e[k]`` at its end. The spy's observer, or the
in-process recorder where it cannot run (:mod:`.._sampling.recorder`), knows which code ran
when. Both use ``time.monotonic``. Each interval is
given the stack of the first sample taken after it began: that sample is inside the
interval, or, when a C call held the GIL through the whole interval (the sampler could not
run), the first one taken as that call returned, which still shows the function that made
it.

Per function, over the intervals where it was the innermost user frame (not the standard
library, an installed package or this tool):

- ``net`` (net growth): ``e[k] - e[k-1]``, rises and falls alike; over every function
  (plus what no stack was sampled for, ``unattributed``) it sums to ``end - begin``;
- ``to_peak`` (growth up to the peak): the same up to the interval that reached the peak,
  whose figure is ``v[p] - e[p-1]``; it sums to ``peak - begin``: what the peak is made of;

and ``highest``, the highest memory seen while it was anywhere on the stack. The figures
per stack come from the one model of memory per stack, ``_sampling.aggregate.Aggregator``
(each interval is a tick of its stack), which ``run``'s report reads too: one rule for
the peak's date and its composition everywhere. They become the rows of the one model of
a sampled run, a :class:`SampledProfile <.._sampling.model.SampledProfile>` whose
columns ``NET``, ``TO_PEAK`` and ``HIGHEST`` are those ``run``'s tree shows; the
per-function table is a view of it. No figure adds the rises without the falls (a loop
allocating and freeing 100 MiB a thousand times does not show 100 GiB). The memory flame
graph weighs each stack by its growth up to the peak (the stacks whose growth is not
positive are left out: a flame graph has no negative width). The views (the growth table,
the flame files) are functions returning strings, bound as the model's methods too.
"""

from __future__ import annotations

import bisect
import functools
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

from .._format import format_bytes, one_line
from .._sampling.aggregate import NO_STACK, Aggregator
from .._sampling.model import (
    HIGHEST,
    NCOLUMNS,
    NET,
    SAMPLES,
    TO_PEAK,
    WALL,
    SampledProfile,
    ThreadProfile,
)
from .._sampling.view import function_figures
from .._stacks.frames import SampledFrame
from .._validate import check_int, check_str
from .frames import frame_label, innermost_user, user_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._sampling.recorder import StackSamples


class FunctionRow(NamedTuple):
    """One row of the per-function view, in bytes (see the module)."""

    function: str
    filename: str
    first_line: int
    net: float  # net growth while the innermost user frame
    to_peak: float  # growth up to the peak while the innermost user frame
    highest: float  # highest memory while on the stack
    ticks: int  # intervals on the stack


class MemoryProfile(SampledProfile):
    """The spy's intervals as a sampled profile: one thread whose rows carry the ticks,
    their seconds and the memory columns per stack (the stack ``()`` stands for the
    intervals no user stack was sampled for), the stack at the peak, and the views the
    spy's results give (the per-function table, the flame graphs). Built by
    :func:`attribute`.

    :param agg: the intervals as ticks, per stack
    :param stacks: the stacks the ticks name, outermost first
    :param peak: the stack id at the peak, ``NO_STACK`` if none
    :param samples: what the stacks were sampled from
    """

    def __init__(
        self,
        agg: Aggregator,
        stacks: list[tuple[SampledFrame, ...]],
        peak: int,
        samples: StackSamples,
    ) -> None:
        totals: dict[int, list[float]] = {}
        for sid, row in tick_rows(agg, agg.composition() if agg.n > 1 else {}).items():
            if sid == NO_STACK:  # the intervals without a user stack: a row without frames
                sid = len(stacks)
                stacks = [*stacks, ()]
            totals[sid] = row
        duration = agg.last_t - agg.first_t
        notes = []
        if samples.dropped:
            notes.append(f"stack table full: {samples.dropped} samples kept as their outer frames")
        super().__init__(
            stacks,
            [ThreadProfile(0, "MainThread", True, totals)],
            interval=duration / max(agg.n - 1, 1),
            timer="ticks",
            duration=duration,
            cpu_time=0.0,
            samples=len(samples.times),
            notes=notes,
            cpu_known=False,
            memory_known=True,
        )
        self.peak = peak

    @property
    def peak_stack(self) -> tuple[SampledFrame, ...] | None:
        """The stack at the peak, outermost first (None if none was sampled)."""
        return None if self.peak == NO_STACK else self.stacks[self.peak]

    def peak_labels(self) -> tuple[str, ...] | None:
        """The stack at the peak as ``function (file.py:line)`` labels, outermost first."""
        stack = self.peak_stack
        return None if stack is None else tuple(frame_label(f) for f in stack)

    @functools.cached_property
    def functions(self) -> list[FunctionRow]:
        """The per-function view, by decreasing growth up to the peak: net growth and
        growth up to the peak to each stack's innermost user frame, the highest memory
        and the ticks to every function on it (once: recursion counts once)."""
        found = [
            FunctionRow(k[0], k[1], k[2], own[NET], own[TO_PEAK], on[HIGHEST], int(on[SAMPLES]))
            for k, (on, own) in function_figures(self, innermost_user).items()
        ]
        return sorted(found, key=lambda r: (-r.to_peak, -r.net, r.function))

    @property
    def unattributed(self) -> tuple[float, float]:
        """``(net, to_peak)`` of the intervals no user stack was sampled for."""
        row = next((t for sid, t in self.threads[0].totals.items() if not self.stacks[sid]), None)
        return (0.0, 0.0) if row is None else (row[NET], row[TO_PEAK])

    def totals(self) -> tuple[float, float]:
        """``(net, to_peak)`` summed over the functions and the unattributed intervals:
        ``end - begin`` and ``peak - begin`` of the series."""
        lost = self.unattributed
        net = sum(r.net for r in self.functions) + lost[0]
        to_peak = sum(r.to_peak for r in self.functions) + lost[1]
        return net, to_peak

    def growth_stacks(self) -> list[tuple[list[SampledFrame], float]]:
        """The stacks with a positive growth up to the peak, in bytes (rounded), for the
        stack exporters."""
        return [
            ([f.function() for f in self.stacks[sid]], size)
            for sid, totals in self.threads[0].totals.items()
            if self.stacks[sid] and (size := round(totals[TO_PEAK])) > 0
        ]

    def to_dict(self, unit: float = 1.0, top: int | None = None) -> dict[str, Any]:
        """JSON-able: ``peak_stack`` and ``functions`` (bytes divided by ``unit``).

        :param unit: divisor of byte figures
        :param top: rows kept, all if None
        """
        rows = self.functions if top is None else self.functions[:top]
        lost = self.unattributed
        return {
            "peak_stack": list(self.peak_labels() or ()) if self.peak_stack else None,
            "functions": [
                {
                    "function": r.function,
                    "file": r.filename,
                    "line": r.first_line,
                    "growth_to_peak": r.to_peak / unit,
                    "net_growth": r.net / unit,
                    "highest": r.highest / unit,
                    "ticks": r.ticks,
                }
                for r in rows
            ],
            "unattributed": {"net_growth": lost[0] / unit, "growth_to_peak": lost[1] / unit},
            "stack_samples": self.samples,
        }

    def to_text(self, top: int = 10) -> str:
        """See :func:`where_text`."""
        return where_text(self, top)

    def to_collapsed(self) -> str:
        """See :func:`where_collapsed`."""
        return where_collapsed(self)

    def to_speedscope(self, name: str = "memory growth") -> str:
        """See :func:`where_speedscope`."""
        return where_speedscope(self, name)


def tick_rows(agg: Aggregator, parts: dict[int, float]) -> dict[int, list[float]]:
    """The ticks' row of the model per stack (what ``run``'s report and the attribution
    read): their seconds and count, the net growth, the growth up to the peak, the
    highest memory.

    :param agg: the ticks
    :param parts: the growth up to the peak per stack (``agg.composition()``)
    :return: the stack id of ``agg`` -> the model's columns, by stack id
    """
    rows: dict[int, list[float]] = {}
    for sid in sorted(agg.count):
        row = rows[sid] = [0.0] * NCOLUMNS
        row[WALL], row[SAMPLES] = agg.seconds[sid], agg.count[sid]
        row[NET], row[TO_PEAK] = agg.net[sid], parts.get(sid, 0.0)
        row[HIGHEST] = agg.highest[sid]
    return rows


def stack_at(samples: StackSamples, after: float) -> int:
    """The stack index (or ``NO_STACK``) of the first sample taken after ``after`` on the
    spy's clock (the last sample if none)."""
    if not samples.times:
        return NO_STACK
    j = bisect.bisect_right(samples.times, after)
    return int(samples.ids[min(j, len(samples.ids) - 1)])


def attribute(
    points: Sequence[tuple[float, float, float]],
    samples: StackSamples,
    peak_after: float | None = None,
) -> MemoryProfile:
    """Joins the memory series and the stack samples, through the one model of memory
    per stack (:class:`Aggregator <.._sampling.aggregate.Aggregator>`, what ``run``'s
    report reads): each interval is a tick of the stack given to it.

    :param points: the spy's ``(time, peak, end)`` points: the peak of each interval
        and the memory at its end
    :param samples: the running thread's stacks, from the in-process recorder
        (:meth:`.._sampling.recorder.Recorder.running_samples`) or the observer
        (:func:`.observed.from_observer`)
    :param peak_after: time of the tick before the one that saw the peak (the spy knows
        it); None: the stack of the interval the model dates the peak in
    """
    stacks, view_of = _user_views(samples.stacks)
    agg = Aggregator(max_points=2)  # the per-stack tables are what is read here
    high = 0.0
    for k, (t, v, end) in enumerate(points):
        view = view_of[stack_at(samples, points[k - 1][0])] if k else NO_STACK
        high = max(high, v)  # the high-water mark the spy's resets hide
        agg.add_tick(t, end, high, view, v if k else 0.0)
    if peak_after is not None:
        peak = view_of[stack_at(samples, peak_after)]
    else:
        peak = int(agg.peak_sid) if agg.n > 1 else NO_STACK
    return MemoryProfile(agg, stacks, peak, samples)


def _user_views(
    raw: Sequence[tuple[SampledFrame, ...]],
) -> tuple[list[tuple[SampledFrame, ...]], dict[int, int]]:
    """The distinct :func:`user_view` of the stacks and, per stack index, the index of its
    view (``NO_STACK`` for a stack of this tool only, and for ``NO_STACK``)."""
    index: dict[tuple[SampledFrame, ...], int] = {}
    view_of = {NO_STACK: NO_STACK}
    for i, stack in enumerate(raw):
        view = user_view(stack)
        view_of[i] = index.setdefault(view, len(index)) if view else NO_STACK
    return list(index), view_of


# -- the views ---------------------------------------------------------------------------


def where_text(where: MemoryProfile, top: int = 10) -> str:
    """The ``top`` functions by growth up to the peak as a table with units: growth up to
    the peak and net growth (both the function's own, summing to ``peak - begin`` and
    ``end - begin`` with the unattributed line), and the highest RSS reached while it ran.

    :param where: the attribution
    :param top: rows shown
    """
    top = check_int("top", top, minimum=1)
    head = f"{'to peak':>10} {'net':>10} {'highest':>10}  function"
    count = len(where.functions)
    shown = f"top {top} of {count}" if count > top else f"{count} function{'s' * (count != 1)}"
    lines = [f"memory growth by function ({shown})", head]
    for r in where.functions[:top]:
        name = f"{r.function} ({os.path.basename(r.filename)}:{r.first_line})"
        lines.append(_row(r.to_peak, r.net, format_bytes(r.highest), one_line(name)))
    if not where.functions:
        lines.append("(no stack sampled while memory grew)")
    lost_net, lost_peak = where.unattributed
    if lost_net or lost_peak:
        lines.append(_row(lost_peak, lost_net, "", "(no stack sampled)"))
    net, to_peak = where.totals()
    lines.append(_row(to_peak, net, "", "total: peak - begin, end - begin"))
    return "\n".join(lines)


def _row(to_peak: float, net: float, highest: str, label: str) -> str:
    return f"{format_bytes(to_peak):>10} {format_bytes(net):>10} {highest:>10}  {label}"


def where_collapsed(where: MemoryProfile) -> str:
    """Collapsed stacks ``a;b;c BYTES``, one line per stack with growth up to the peak: a
    memory flame graph for flamegraph.pl, speedscope, inferno.

    :param where: the attribution
    """
    from .._stacks.export import to_collapsed

    return to_collapsed(where.growth_stacks())


def where_speedscope(where: MemoryProfile, name: str = "memory growth") -> str:
    """A speedscope document (``sampled``, unit ``bytes``): one sample per stack with
    growth up to the peak, weighted by it.

    :param where: the attribution
    :param name: the profile's name
    """
    from .._stacks.export import to_speedscope

    return str(to_speedscope(where.growth_stacks(), check_str("name", name), "bytes"))
