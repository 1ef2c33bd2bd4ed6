"""Where the memory went: the spy's memory series joined with the sampled stacks.

The spy (another process) knows when memory rose: its tick ``k`` at ``t[k]`` saw the
highest memory ``v[k]`` of the interval ``(t[k-1], t[k]]`` (the kernel's high-water mark
with ``reset_peak``) and the memory ``e[k]`` at its end. The sampler in the spied process
(:mod:`.stacks`) knows which code ran when. Both use ``time.monotonic``. Each interval is
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
the peak's date and its composition everywhere; this module is its per-function view. No figure adds
the rises without the falls (a loop allocating and freeing 100 MiB a thousand times does
not show 100 GiB). The memory flame graph weighs each stack by its growth up to the peak
(the stacks whose growth is not positive are left out: a flame graph has no negative
width). This module is the model: the text and the flame files are :mod:`.where_render`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._sampling.frames import SampledFrame
from .._stacks.frames import StackFrame
from .frames import frame_label, innermost_user, user_view
from .stacks import NO_STACK, StackSamples


@dataclass
class FunctionRow:
    """Memory attributed to one function, in bytes (see the module)."""

    function: str
    filename: str
    first_line: int
    net: float = 0.0  # net growth while the innermost user frame
    to_peak: float = 0.0  # growth up to the peak while the innermost user frame
    highest: float = 0.0  # highest memory while on the stack
    ticks: int = 0  # intervals on the stack

    def to_dict(self, unit: float = 1.0) -> dict[str, Any]:
        """Plain values, bytes divided by ``unit``."""
        return {
            "function": self.function,
            "file": self.filename,
            "line": self.first_line,
            "growth_to_peak": self.to_peak / unit,
            "net_growth": self.net / unit,
            "highest": self.highest / unit,
            "ticks": self.ticks,
        }


@dataclass
class StackAttribution:
    """The per-function table, the weighted stacks behind the flame graphs and the stack
    at the peak. Built by :func:`attribute`; drawn by :mod:`.where_render`."""

    functions: list[FunctionRow]  # by decreasing growth up to the peak
    stacks: list[tuple[SampledFrame, ...]]  # every sampled stack, outermost first
    weights: dict[int, float]  # stack index -> growth up to the peak attributed to it
    peak_stack: tuple[SampledFrame, ...] | None
    samples: int = 0
    dropped: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    #: ``(net, to_peak)`` of the intervals no user stack was sampled for
    unattributed: tuple[float, float] = (0.0, 0.0)

    def peak_labels(self) -> tuple[str, ...] | None:
        """The stack at the peak as ``function (file.py:line)`` labels, outermost first."""
        return None if self.peak_stack is None else tuple(frame_label(f) for f in self.peak_stack)

    def totals(self) -> tuple[float, float]:
        """``(net, to_peak)`` summed over the functions and the unattributed intervals:
        ``end - begin`` and ``peak - begin`` of the series."""
        net = sum(r.net for r in self.functions) + self.unattributed[0]
        to_peak = sum(r.to_peak for r in self.functions) + self.unattributed[1]
        return net, to_peak

    def to_dict(self, unit: float = 1.0, top: int | None = None) -> dict[str, Any]:
        """JSON-able: ``peak_stack`` and ``functions`` (bytes divided by ``unit``).

        :param unit: divisor of byte figures
        :param top: rows kept, all if None
        """
        rows = self.functions if top is None else self.functions[:top]
        return {
            "peak_stack": list(self.peak_labels() or ()) if self.peak_stack else None,
            "functions": [r.to_dict(unit) for r in rows],
            "unattributed": {
                "net_growth": self.unattributed[0] / unit,
                "growth_to_peak": self.unattributed[1] / unit,
            },
            "stack_samples": self.samples,
        }

    def weighted_stacks(self) -> list[tuple[list[StackFrame], float]]:
        """The stacks with a positive growth up to the peak, in bytes (rounded), for the
        stack exporters."""
        return [
            ([f.function() for f in self.stacks[index]], size)
            for index, weight in sorted(self.weights.items())
            if (size := round(weight)) > 0
        ]


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
) -> StackAttribution:
    """Joins the memory series and the stack samples, through the one model of memory
    per stack (:class:`Aggregator <.._sampling.aggregate.Aggregator>`, what ``run``'s
    report reads): each interval is a tick of the stack given to it.

    :param points: the spy's ``(time, peak, end)`` points: the peak of each interval
        and the memory at its end
    :param samples: what :class:`StackSampler <.stacks.StackSampler>` recorded (or the
        observer, see :func:`.stacks.from_observer`)
    :param peak_after: time of the tick before the one that saw the peak (the spy knows
        it); None: the stack of the interval the model dates the peak in
    """
    from .._sampling.aggregate import Aggregator  # its NO_STACK is this one's (-1)

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
    return _from_model(agg, stacks, samples, peak)


def _from_model(
    agg: Any, stacks: list[tuple[SampledFrame, ...]], samples: StackSamples, peak: int
) -> StackAttribution:
    """The per-function view of the model's per-stack figures: net growth and growth up
    to the peak to each stack's innermost user frame, the highest memory and the ticks
    to every function on it (once: recursion counts once)."""
    composition = agg.composition() if agg.n > 1 else {}
    rows: dict[tuple[str, str, int], FunctionRow] = {}
    for sid in sorted(agg.count):
        if sid == NO_STACK or not 0 <= sid < len(stacks):
            continue
        stack = stacks[sid]
        for key in dict.fromkeys((f.file, f.name, f.first_line) for f in stack):
            row = rows.setdefault(key, FunctionRow(key[1], key[0], key[2]))
            row.highest = max(row.highest, agg.highest.get(sid, 0.0))
            row.ticks += agg.count[sid]
        inner = stack[innermost_user(stack)]
        row = rows[(inner.file, inner.name, inner.first_line)]
        row.net += agg.net.get(sid, 0.0)
        row.to_peak += composition.get(sid, 0.0)
    weights = {sid: w for sid, w in composition.items() if sid != NO_STACK and sid in agg.count}
    lost = (agg.net.get(NO_STACK, 0.0), composition.get(NO_STACK, 0.0))
    functions = sorted(rows.values(), key=lambda r: (-r.to_peak, -r.net, r.function))
    return StackAttribution(
        functions,
        stacks,
        weights,
        stacks[peak] if 0 <= peak < len(stacks) else None,
        len(samples.times),
        samples.dropped,
        unattributed=lost,
    )


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
