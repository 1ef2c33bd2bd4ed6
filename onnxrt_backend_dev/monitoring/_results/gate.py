"""The figures a pytest session measured, as a saved result, and the gate comparing a
test's figures with a baseline's (``--monitoring-save`` / ``--monitoring-compare``).

Each measured block of a test is one *figure*, a JSON-ready dictionary:

* ``{"kind": "time", "label", "times": [seconds per batch], "sizes": [executions per
  batch]}``: a block timed once (one batch of one execution) or ``measure`` (its batches);
* ``{"kind": "memory", "label", "peak", "begin", "end", "mean"}``: bytes of the resident
  memory of the process, and ``alloc_peak`` when the block counted its allocations (the
  peak of the bytes live of its own allocations).

A session saves as a ``report`` result: a timing series per timed figure, a memory
channel (one run) per memory figure, named ``test id::label`` (``#2``, ``#3``... when a
label repeats in a test).

The gate, per test:

* a time figure with at least two batches on both sides is tested as ``compare`` tests a
  timing (Mann-Whitney at alpha 0.05, each figure on its own, with the Hodges-Lehmann
  interval): it regresses when the change is significant **and** larger than the
  threshold;
* a figure with a single run on a side (a block timed once, every memory block) cannot
  be judged significant: it regresses on the *plain threshold* alone, when it grew by
  more than the threshold and by more than an absolute floor (:data:`TIME_FLOOR`,
  :data:`MEMORY_FLOOR`) below which a figure is the clock's or the allocator's noise.
  Memory is judged on the block's allocations' peak when both sides counted it (the
  same code allocates the same bytes, whatever ran before), on the RSS increase (peak -
  begin) otherwise, not on the RSS peak, which holds the whole interpreter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._format import format_bytes, format_duration
from .payloads import memory_data, report_data, timing_data, timing_series

# Below these absolute growths, a single-run figure is not called a regression: a block
# timed once moves by milliseconds on a loaded machine (sleep(0) took 4 ms at load 8).
TIME_FLOOR = 0.01
MEMORY_FLOOR = 2**20
SEPARATOR = "::"
MEMORY_KEYS = ("peak", "begin", "end", "mean", "alloc_peak")


def figure_names(nodeid: str, figures: Sequence[Mapping[str, Any]]) -> list[str]:
    """The name of each figure of a test: ``test id::label``, numbered when repeated.

    :param nodeid: the test's id
    :param figures: its figures, in order
    :return: one name per figure
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
    """The payload of a session's result.

    :param rows: ``(test id, figures)`` per test
    :return: a ``report`` payload, None when nothing was measured
    """
    series, runs = [], {}
    for nodeid, figures in rows:
        for name, f in zip(figure_names(nodeid, figures), figures, strict=True):
            if f["kind"] == "time":
                series.append(timing_series(name, f["times"], f["sizes"]))
            else:
                runs[name] = {k: float(f[k]) for k in MEMORY_KEYS if k in f}
    if not series and not runs:
        return None
    timing = timing_data(series) if series else None
    memory = memory_data([runs]) if runs else None
    return report_data(timing=timing, memory=memory)


@dataclass(frozen=True)
class Regression:
    """A figure of a test worse than the baseline's.

    :param name: the figure (``test id::label``)
    :param message: what grew, by how much, and how it was judged
    """

    name: str
    message: str


class Baseline:
    """A saved session's figures, by name.

    :param doc: a loaded ``report`` result (``load_result``)
    """

    def __init__(self, doc: Mapping[str, Any]) -> None:
        data = doc["data"] if doc["kind"] == "report" else {doc["kind"]: doc["data"]}
        self.series = {s["name"]: s for s in data.get("timing", {}).get("series", [])}
        channels = data.get("memory", {}).get("channels", {})
        self.memory = {name: runs[-1] for name, runs in channels.items()}

    def check(
        self, nodeid: str, figures: Sequence[Mapping[str, Any]], threshold: float
    ) -> list[Regression]:
        """The figures of a test that regressed beyond ``threshold``.

        :param nodeid: the test's id
        :param figures: what it measured now
        :param threshold: the relative growth allowed (0.1 for 10 %)
        :return: the regressions, empty when none (or nothing in the baseline)
        """
        found = []
        for name, f in zip(figure_names(nodeid, figures), figures, strict=True):
            label = name[len(nodeid) + len(SEPARATOR) :]
            if f["kind"] == "time" and name in self.series:
                r = _time_regression(label, self.series[name], f, threshold)
            elif f["kind"] == "memory" and name in self.memory:
                r = _memory_regression(label, self.memory[name], f, threshold)
            else:
                r = None
            if r is not None:
                found.append(Regression(name, r))
        return found


def _per_execution(times: Sequence[float], sizes: Sequence[int]) -> list[float]:
    return [t / n for t, n in zip(times, sizes, strict=True)]


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _time_regression(
    label: str, base: Mapping[str, Any], now: Mapping[str, Any], threshold: float
) -> str | None:
    xs = _per_execution(base["times"], base["sizes"])
    ys = _per_execution(now["times"], now["sizes"])
    a, b = _median(xs), _median(ys)
    if a <= 0 or min(ys) <= 0:
        return None
    change = b / a - 1
    if len(xs) >= 2 and len(ys) >= 2:
        from .compare import small_sample_test

        # The sorted n m differences: measure's batches are few (10 by default).
        _, low, high, p = small_sample_test(xs[:500], ys[:500], 0.95)
        if p >= 0.05 or change <= threshold:
            return None
        return (
            f"time {label}: {format_duration(b)} per run, was {format_duration(a)}: "
            f"{change:+.1%} [{low:+.1%}, {high:+.1%}], p = {p:.2g} over {len(xs)} and "
            f"{len(ys)} batches (significant, above the {threshold:.0%} threshold)"
        )
    if change <= threshold or b - a <= TIME_FLOOR:
        return None
    return (
        f"time {label}: {format_duration(b)}, was {format_duration(a)}: {change:+.1%}, above "
        f"the plain {threshold:.0%} threshold (one run on a side: significance not judged)"
    )


def _memory_regression(
    label: str, base: Mapping[str, Any], now: Mapping[str, Any], threshold: float
) -> str | None:
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
    return (
        f"memory {label}: {what} {format_bytes(b)}, was {format_bytes(a)}: {change}, above "
        f"the plain {threshold:.0%} threshold (one run on a side: significance not judged)"
    )


def parse_threshold(text: str) -> float:
    """Reads ``10%`` or ``0.1``.

    :param text: the option's value
    :return: the fraction
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
