"""Where the memory went: the spy's memory series joined with the sampled stacks.

The spy (another process) knows when memory rose: its tick ``k`` at ``t[k]`` saw the
highest memory ``v[k]`` of the interval ``(t[k-1], t[k]]`` (the kernel's high-water mark
with ``reset_peak``). The sampler in the spied process (:mod:`.stacks`) knows which code
ran when. Both use ``time.monotonic``. Each interval is given the stack of the first
sample taken after it began: that sample is inside the interval, or, when a C call held
the GIL through the whole interval (the sampler could not run), the first one taken as
that call returned, which still shows the function that made it.

Per function: ``inclusive`` is the memory growth ``max(0, v[k] - e[k-1])`` (``e``: the
memory at the end of an interval) summed over
the intervals where it was on the stack, ``self`` over those where it was the innermost
user frame (not the standard library, an installed package or this tool), ``highest`` the
highest memory seen while it was on the stack. The memory flame graph weighs each stack
by the growth attributed to it, in bytes.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._stacks.export import to_collapsed, to_speedscope
from .._stacks.frames import StackFrame, is_library_path
from .stacks import NO_STACK, Frame, StackSamples

# Frames of this tool (the spy's own calls, stop()) are never the user's code.
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_user_frame(frame: Frame) -> bool:
    """Tells if a frame is the user's code (not a library, not this tool).

    :param frame: the frame
    :return: True for the user's code
    """
    return not (is_library_path(frame.filename) or frame.filename.startswith(_OWN_DIR))


def is_own_frame(frame: Frame) -> bool:
    """Tells if a frame is this tool's (the spy's start and stop, the CLI running a script).

    :param frame: the frame
    :return: True for this tool's frames
    """
    return frame.filename.startswith(_OWN_DIR)


def user_view(stack: Sequence[Frame]) -> tuple[Frame, ...]:
    """The stack as the user sees it: without the outer frames that lead to the user's
    code (a runner, runpy, and everything down to this tool when it runs the user's
    script) when there is user code, and without this tool's frames at the inner end
    (the spy starting or stopping).

    :param stack: outermost first
    :return: the frames kept, none for this tool's own work (no user frame, one of this
        tool's frames)
    """
    end = len(stack)
    while end > 0 and is_own_frame(stack[end - 1]):
        end -= 1
    # This tool calling the user's code (spy --where running a script): it starts there.
    first = next((i + 1 for i in range(end - 1, -1, -1) if is_own_frame(stack[i])), 0)
    start = first
    while start < end and not is_user_frame(stack[start]):
        start += 1
    if start < end:
        return tuple(stack[start:end])
    if 0 < first < end:  # this tool ran library code only (spy --where -m json.tool)
        return tuple(f for f in stack[first:end] if not _is_runner(f))
    return () if any(is_own_frame(f) for f in stack) else tuple(stack)


def _is_runner(frame: Frame) -> bool:
    """Tells if a frame is runpy's, which runs a module or a script for this tool."""
    name = frame.filename.replace("\\", "/")
    return name.endswith("/runpy.py") or name == "<frozen runpy>"


def innermost_user(stack: Sequence[Frame]) -> int:
    """Index of the innermost user frame of a stack, the innermost frame if none is.

    :param stack: outermost first, not empty
    :return: an index
    """
    for i in range(len(stack) - 1, -1, -1):
        if is_user_frame(stack[i]):
            return i
    return len(stack) - 1


@dataclass
class FunctionRow:
    """Memory attributed to one function, in bytes."""

    function: str
    filename: str
    first_line: int
    inclusive: float = 0.0  # growth while on the stack
    self: float = 0.0  # growth while the innermost user frame
    highest: float = 0.0  # highest memory while on the stack
    ticks: int = 0  # intervals on the stack

    def to_dict(self, unit: float = 1.0) -> dict[str, Any]:
        """Plain values, bytes divided by ``unit``."""
        return {
            "function": self.function,
            "file": self.filename,
            "line": self.first_line,
            "inclusive": self.inclusive / unit,
            "self": self.self / unit,
            "highest": self.highest / unit,
            "ticks": self.ticks,
        }


@dataclass
class StackAttribution:
    """The per-function table, the weighted stacks behind the flame graphs and the stack
    at the peak. Built by :func:`attribute`."""

    functions: list[FunctionRow]  # by decreasing inclusive growth
    stacks: list[tuple[Frame, ...]]  # every sampled stack, outermost first
    weights: dict[int, float]  # stack index -> growth attributed to it
    peak_stack: tuple[Frame, ...] | None
    samples: int = 0
    dropped: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def peak_labels(self) -> tuple[str, ...] | None:
        """The stack at the peak as ``file:line:function`` strings, outermost first."""
        return None if self.peak_stack is None else tuple(f.label() for f in self.peak_stack)

    def to_dict(self, unit: float = 1.0, top: int | None = None) -> dict[str, Any]:
        """JSON-able: ``peak_stack`` and ``functions`` (bytes divided by ``unit``).

        :param unit: divisor of byte figures
        :param top: rows kept, all if None
        :return: the dictionary
        """
        rows = self.functions if top is None else self.functions[:top]
        return {
            "peak_stack": list(self.peak_labels() or ()) if self.peak_stack else None,
            "functions": [r.to_dict(unit) for r in rows],
            "stack_samples": self.samples,
        }

    def to_text(self, top: int = 10) -> str:
        """The ``top`` functions by inclusive growth as a table with units.

        :param top: rows shown
        :return: text
        """
        from .._format import format_bytes

        if top < 1:
            raise ValueError(f"top must be >= 1, got {top!r}")
        head = f"{'inclusive':>10} {'self':>10} {'highest':>10}  function"
        count = len(self.functions)
        shown = f"top {top} of {count}" if count > top else f"{count} function{'s' * (count != 1)}"
        lines = [f"memory growth by function ({shown})", head]
        for r in self.functions[:top]:
            where = f"{r.function} ({os.path.basename(r.filename)}:{r.first_line})"
            lines.append(
                f"{format_bytes(r.inclusive):>10} {format_bytes(r.self):>10} "
                f"{format_bytes(r.highest):>10}  {where}"
            )
        if not self.functions:
            lines.append("(no stack sampled while memory grew)")
        return "\n".join(lines)

    def weighted_stacks(self) -> list[tuple[list[StackFrame], float]]:
        """The stacks with growth, in bytes (rounded), for the stack exporters."""
        return [
            ([StackFrame(f.function, f.filename, f.first_line) for f in self.stacks[index]], size)
            for index, weight in sorted(self.weights.items())
            if (size := round(weight)) > 0
        ]

    def to_collapsed(self) -> str:
        """Collapsed stacks ``a;b;c BYTES``, one line per stack with growth: a memory
        flame graph for flamegraph.pl, speedscope, inferno."""
        return to_collapsed(self.weighted_stacks())

    def to_speedscope(self, name: str = "memory growth") -> str:
        """A speedscope document (``sampled``, unit ``bytes``): one sample per stack with
        growth, weighted by it.

        :param name: the profile's name
        :return: JSON text
        """
        return str(to_speedscope(self.weighted_stacks(), name, "bytes"))


def stack_at(samples: StackSamples, after: float) -> int:
    """The stack index of the first sample taken after ``after`` (the last sample if none).

    :param samples: the sampler's records
    :param after: a time on the spy's clock
    :return: a stack index, or ``NO_STACK``
    """
    if not samples.times:
        return NO_STACK
    j = bisect.bisect_right(samples.times, after)
    return int(samples.ids[min(j, len(samples.ids) - 1)])


def _add_interval(
    rows: dict[tuple[str, str, int], FunctionRow],
    stack: tuple[Frame, ...],
    growth: float,
    level: float,
) -> None:
    seen = set()
    for f in stack:
        key = (f.filename, f.function, f.first_line)
        if key in seen:
            continue  # recursion: a function counts once per interval
        seen.add(key)
        row = rows.get(key)
        if row is None:
            row = rows[key] = FunctionRow(f.function, f.filename, f.first_line)
        row.inclusive += growth
        row.highest = max(row.highest, level)
        row.ticks += 1
    inner = stack[innermost_user(stack)]
    rows[(inner.filename, inner.function, inner.first_line)].self += growth


def attribute(
    points: Sequence[tuple[float, float, float]],
    samples: StackSamples,
    peak_after: float | None = None,
) -> StackAttribution:
    """Joins the memory series and the stack samples.

    :param points: the spy's ``(time, peak, end)`` points: the peak of each interval
        and the memory at its end
    :param samples: what :class:`StackSampler <.stacks.StackSampler>` recorded
    :param peak_after: time of the tick before the one that saw the peak, None if unknown
    :return: the attribution
    """
    stacks, view_of = _user_views(samples.stacks)
    rows: dict[tuple[str, str, int], FunctionRow] = {}
    weights: dict[int, float] = {}
    previous: tuple[float, float] | None = None
    for t, v, end in points:
        if previous is not None:
            index = stack_at(samples, previous[0])
            view = view_of[index] if index != NO_STACK else NO_STACK
            if view != NO_STACK:
                growth = max(0.0, v - previous[1])
                _add_interval(rows, stacks[view], growth, v)
                if growth > 0:
                    weights[view] = weights.get(view, 0.0) + growth
        previous = (t, end)
    peak_stack = None
    if peak_after is not None:
        index = stack_at(samples, peak_after)
        view = view_of[index] if index != NO_STACK else NO_STACK
        peak_stack = stacks[view] if view != NO_STACK else None
    functions = sorted(rows.values(), key=lambda r: (-r.inclusive, -r.self, r.function))
    return StackAttribution(
        functions, stacks, weights, peak_stack, len(samples.times), samples.dropped
    )


def _user_views(raw: Sequence[tuple[Frame, ...]]) -> tuple[list[tuple[Frame, ...]], list[int]]:
    """The distinct :func:`user_view` of the stacks and, per stack, the index of its view
    (``NO_STACK`` for a stack of this tool only)."""
    stacks: list[tuple[Frame, ...]] = []
    index: dict[tuple[Frame, ...], int] = {}
    view_of: list[int] = []
    for stack in raw:
        view = user_view(stack)
        if not view:
            view_of.append(NO_STACK)
            continue
        if view not in index:
            index[view] = len(stacks)
            stacks.append(view)
        view_of.append(index[view])
    return stacks, view_of


def peak_line(peak: float, peak_time: float, stack: Sequence[Frame] | None, depth: int = 3) -> str:
    """``peak 427 MiB at 1.25 s in groupby_sum (script.py:12) <- main (script.py:30)``:
    the innermost user frames at the peak, innermost first.

    :param peak: bytes
    :param peak_time: seconds since the start
    :param stack: the stack at the peak, outermost first
    :param depth: user frames shown at most
    :return: one line
    """
    from .._format import format_bytes

    line = f"peak {format_bytes(peak)} at {peak_time:.2f} s"
    if not stack:
        return line + " (no stack sampled)"
    users = _fold_comprehensions([f for f in stack if is_user_frame(f)] or [stack[-1]])
    shown = [f"{f.function} ({os.path.basename(f.filename)}:{f.line})" for f in users[::-1][:depth]]
    return f"{line} in {' <- '.join(shown)}"


_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def _fold_comprehensions(stack: list[Frame]) -> list[Frame]:
    """A comprehension shown as the function around it, at the comprehension's line (as
    Python 3.12 inlines them).

    :param stack: outermost first
    :return: the frames, outermost first
    """
    folded: list[Frame] = []
    for f in stack:
        outer = folded[-1] if folded else None
        if (
            outer is not None
            and f.function.endswith(_COMPREHENSIONS)
            and f.filename == outer.filename
        ):
            folded[-1] = outer._replace(line=f.line)
            continue
        folded.append(f)
    return folded


def attach(monitor: Any, samples: StackSamples) -> None:
    """Sets ``where`` and ``peak_stack`` of the CPU monitor from the samples.

    :param monitor: the spy's CPU :class:`Monitor <.series.Monitor>`
    :param samples: the sampler's records
    """
    where = attribute(list(monitor.series.with_ends()), samples, monitor.peak_prev_timestamp)
    monitor.where = where
    monitor.peak_stack = where.peak_labels()
