"""The figures a pytest session measured, as a saved result, and the gate comparing a
test's figures with a baseline's (``--monitoring-save`` / ``--monitoring-compare``).

Each measured block of a test is one *figure*, a JSON-ready dictionary:
``{"kind": "time", "label", "times", "sizes", "clock"}`` (a block timed once or by
``measure``) or ``{"kind": "memory", "label", "peak", "begin", "end", "mean"}`` in bytes
(and ``alloc_peak``, the peak of the block's own live allocations, when counted). A
session saves as a ``report``: a timing series per time figure, a memory channel per
memory figure, named ``test id::label`` (``#2``... when a label repeats).

The gate, per test, with the statistics of ``compare`` (:mod:`.decide`):

* a time figure is judged as one process a side (weaker evidence: a session's batches
  cannot show how much a figure moves between sessions, :data:`.decide.BETWEEN_PROCESSES`
  is added), after the machine's shift between the sessions (the reference work timed
  beside each figure, never the figures, whose common change may be the code's). It
  *regresses* when significant and above the threshold; it is *undecided* when its
  estimate is above and the evidence cannot decide (never a silent pass, never a
  failure). A block timed once regresses only when it more than doubled
  (:data:`SINGLE_RUN_CHANGE`), and by 10 ms. Figures of different clocks are not
  compared (undecided);
* a memory figure regresses on the plain threshold, beyond :data:`MEMORY_FLOOR` (below,
  the allocator's noise): its allocations' peak when both sides counted it (the same
  code allocates the same bytes), else its RSS increase, never the RSS peak, which holds
  the whole interpreter.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._format import format_bytes, format_duration
from .decide import (
    REGRESSED,
    UNDECIDED,
    Decision,
    Shift,
    gate,
    judge,
    machine_shift,
    per_execution,
    reference_ratio,
)
from .payloads import memory_data, report_data, timing_data, timing_series

# Below this growth of a block's memory increase, its figure is the allocator's noise.
MEMORY_FLOOR = 2**20
# A block timed once regresses only when it more than doubled, and by TIME_FLOOR: between
# two sessions on a loaded machine it moves by +50 % (sleep(0) took 4 ms at load 8).
# Between the threshold and this, it is undecided.
SINGLE_RUN_CHANGE = 1.0
TIME_FLOOR = 0.01
SEPARATOR = "::"
MEMORY_KEYS = ("peak", "begin", "end", "mean", "alloc_peak")


def figure_names(nodeid: str, figures: Sequence[Mapping[str, Any]]) -> list[str]:
    """The name of each figure of a test: ``test id::label``, numbered when repeated.

    :param nodeid: the test's id
    :param figures: its figures, in order
    """
    seen: dict[tuple[str, str], int] = {}
    names = []
    for f in figures:
        key = (str(f["kind"]), str(f["label"]))
        seen[key] = seen.get(key, 0) + 1
        suffix = "" if seen[key] == 1 else f"#{seen[key]}"
        names.append(f"{nodeid}{SEPARATOR}{f['label']}{suffix}")
    return names


def session_data(rows: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> dict[str, Any] | None:
    """The ``report`` payload of a session, None when nothing was measured.

    :param rows: ``(test id, figures)`` per test
    """
    series, runs = [], {}
    for nodeid, figures in rows:
        for name, f in zip(figure_names(nodeid, figures), figures, strict=True):
            if f["kind"] == "time":
                one = timing_series(name, f["times"], f["sizes"])
                if f.get("counter"):
                    one["counter"], one["noise"] = f["counter"], 0.0
                elif f.get("clock", "wall") != "wall":
                    one["clock"] = f["clock"]
                if f.get("reference"):
                    one["reference"] = float(f["reference"])
                if f.get("stolen") is not None:
                    one["stolen"] = float(f["stolen"])
                series.append(one)
            else:
                runs[name] = {k: float(f[k]) for k in MEMORY_KEYS if k in f}
    if not series and not runs:
        return None
    timing = timing_data(series) if series else None
    memory = memory_data([runs]) if runs else None
    return report_data(timing=timing, memory=memory)


@dataclass(frozen=True)
class Regression:
    """A figure of a test worse than the baseline's, or undecided.

    :param name: the figure (``test id::label``)
    :param message: what grew, by how much, and how it was judged
    :param state: ``regressed`` (the test fails) or ``undecided`` (said, not failed)
    """

    name: str
    message: str
    state: str = REGRESSED


class Baseline:
    """A saved session's figures, by name.

    :param doc: a loaded ``report`` result (``load_result``)
    """

    def __init__(self, doc: Mapping[str, Any]) -> None:
        data = doc["data"] if doc["kind"] == "report" else {doc["kind"]: doc["data"]}
        self.series = {s["name"]: s for s in data.get("timing", {}).get("series", [])}
        channels = data.get("memory", {}).get("channels", {})
        self.memory = {name: runs[-1] for name, runs in channels.items()}
        # The log ratios of the reference work beside each time figure judged so far in
        # this session, by clock: the machine's shift from the baseline's session.
        self.references: dict[str, list[float]] = {}

    def check(
        self, nodeid: str, figures: Sequence[Mapping[str, Any]], threshold: float
    ) -> list[Regression]:
        """The figures of a test that regressed beyond ``threshold``, or are undecided.

        :param nodeid: the test's id
        :param figures: what it measured now
        :param threshold: the relative growth allowed (0.1 for 10 %)
        """
        found = []
        for name, f in zip(figure_names(nodeid, figures), figures, strict=True):
            label = name[len(nodeid) + len(SEPARATOR) :]
            if f["kind"] == "time" and name in self.series:
                r = self._time_finding(label, self.series[name], f, threshold)
            elif f["kind"] == "memory" and name in self.memory:
                r = _memory_regression(label, self.memory[name], f, threshold)
            else:
                r = None
            if r is not None:
                found.append(Regression(name, r[1], r[0]))
        return found

    def _time_finding(
        self, label: str, base: Mapping[str, Any], now: Mapping[str, Any], threshold: float
    ) -> tuple[str, str] | None:
        """``(state, message)`` of a time figure, None when it passes."""
        if base.get("counter") or now.get("counter"):
            return _counted_finding(label, base, now, threshold)
        clocks = (base.get("clock", "wall"), now.get("clock", "wall"))
        if clocks[0] != clocks[1]:
            return UNDECIDED, (
                f"time {label}: timed with the {clocks[1]} clock, the baseline with the "
                f"{clocks[0]} clock: not compared (save the baseline with the same clock)"
            )
        xs, ys = per_execution(base), per_execution(now)
        if not xs or not ys:
            return None
        ratios = self.references.setdefault(clocks[0], [])
        ratio = reference_ratio(base, now)
        if ratio is not None:
            ratios.append(ratio)
        shift = machine_shift(ratios).with_stolen(base, now)
        d = judge(xs, ys, weaker=True, clock=clocks[0], shift=shift)
        # Undecided when the estimate is above the threshold: a test's figure whose
        # interval merely reaches above it (most, one session a side) is not listed.
        state, runs = gate(d, threshold, strict=False)
        shifted = [y * math.exp(-shift.value) for y in ys]
        if not d.tested and state == UNDECIDED and _clearly_worse(xs, shifted, threshold):
            state = REGRESSED
        if state not in (REGRESSED, UNDECIDED) or d.change is None:
            return None
        return state, _time_message(label, xs, ys, d, shift, state, threshold, runs)


def _time_message(
    label: str,
    xs: Sequence[float],
    ys: Sequence[float],
    d: Decision,
    shift: Shift,
    state: str,
    threshold: float,
    runs: int | None,
) -> str:
    """What was measured (the medians, their change), then what was judged."""
    a, b = statistics.median(xs), statistics.median(ys)
    text = (
        f"time {label}: {format_duration(b)} per run, was {format_duration(a)} ({b / a - 1:+.1%})"
    )
    if shift.references or shift.stolen:
        text += f"; {shift.describe()}, taken out: {d.change:+.1%}"
    if d.tested:
        text += (
            f" [{d.low:+.1%}, {d.high:+.1%}], p = {d.p_value:.2g} over {len(xs)} and "
            f"{len(ys)} batches"
        )
    if state == REGRESSED and not d.tested:
        return (
            f"{text}: more than doubled (and by {TIME_FLOOR * 1e3:g} ms), above the "
            f"{threshold:.0%} threshold (one run on a side: significance not judged, weaker "
            "evidence)"
        )
    if state == REGRESSED:
        return (
            f"{text} (significant, above the {threshold:.0%} threshold; weaker evidence: one "
            "session a side)"
        )
    why = (
        "a single run on a side: significance not judged"
        if not d.tested
        else ("not significant" if not d.significant else "its interval reaches above it")
    )
    more = (
        f"; about {runs} batches a side would decide it"
        if runs
        else ("; measure it with monitor_time.measure to judge it" if not d.tested else "")
    )
    return f"{text}: undecided, it may be above the {threshold:.0%} threshold ({why}){more}"


def _counted_finding(
    label: str, base: Mapping[str, Any], now: Mapping[str, Any], threshold: float
) -> tuple[str, str] | None:
    """A counted figure: one run a side decides; a count beside a time is undecided."""
    from .._format import format_count
    from .counted import counted_change

    if base.get("counter") != now.get("counter"):
        how = ["counted" if f.get("counter") else "timed" for f in (base, now)]
        return UNDECIDED, (
            f"time {label}: {how[1]} now, {how[0]} in the baseline: not compared (save the "
            "baseline the same way)"
        )
    if not base["times"] or not now["times"]:
        return None
    a, b = (sum(f["times"]) / sum(f["sizes"]) for f in (base, now))
    c = counted_change("timing", label, "count", a, b)
    if not (c.significant and c.change is not None and c.change > threshold):
        return None
    return REGRESSED, (
        f"instructions {label}: {format_count(b)} per run, was {format_count(a)}: "
        f"{c.change:+.1%}, above the {threshold:.0%} threshold (counted by valgrind, "
        f"{c.note})"
    )


def _clearly_worse(xs: Sequence[float], ys: Sequence[float], threshold: float) -> bool:
    """A block timed once that more than doubled (see :data:`SINGLE_RUN_CHANGE`)."""
    a, b = statistics.median(xs), statistics.median(ys)
    return b > a * (1 + max(SINGLE_RUN_CHANGE, threshold)) and b - a > TIME_FLOOR


def _memory_regression(
    label: str, base: Mapping[str, Any], now: Mapping[str, Any], threshold: float
) -> tuple[str, str] | None:
    what = "allocations' peak"
    if "alloc_peak" in base and "alloc_peak" in now:
        a, b = float(base["alloc_peak"]), float(now["alloc_peak"])
    else:
        what = "increase"
        a = max(float(base["peak"]) - float(base["begin"]), 0.0)
        b = max(float(now["peak"]) - float(now["begin"]), 0.0)
    if b - a <= MEMORY_FLOOR or (a > 0 and b / a - 1 <= threshold):
        return None
    change = f"{b / a - 1:+.1%}" if a > 0 else "from nothing"
    return REGRESSED, (
        f"memory {label}: {what} {format_bytes(b)}, was {format_bytes(a)}: {change}, above "
        f"the plain {threshold:.0%} threshold (one run on a side: significance not judged, "
        "weaker evidence)"
    )


def parse_threshold(text: str) -> float:
    """The fraction ``10%`` or ``0.1`` says.

    :param text: the option's value
    :raises BadValue: not a finite number >= 0
    """
    from .._errors import BadValue

    raw = text.strip()
    percent = raw.endswith("%")
    try:
        value = float(raw[:-1] if percent else raw)
    except ValueError:
        value = math.nan
    value = value / 100 if percent else value
    if not (math.isfinite(value) and value >= 0):
        raise BadValue(f"threshold must be a number >= 0 such as 10% or 0.1, got {text!r}")
    return value
