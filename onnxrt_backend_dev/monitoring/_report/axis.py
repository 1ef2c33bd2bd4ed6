"""Round ticks for the page's axes: steps of 1, 2 or 5 times a power of ten, in one
unit per axis (the one that reads best for its largest value; KiB, MiB, GiB for
bytes), so that the labels read ``0 ms, 5 ms, 10 ms`` and never ``9.99 ms``."""

from __future__ import annotations

import math

_Units = tuple[tuple[float, str], ...]
_TIME_UNITS: _Units = ((1e-6, "µs"), (1e-3, "ms"), (1.0, "s"))
_BYTE_UNITS: _Units = (
    (1.0, "B"), (1024.0, "KiB"), (1024.0**2, "MiB"), (1024.0**3, "GiB"), (1024.0**4, "TiB"),
)  # fmt: skip
MAX_TICKS = 12  # ticks at most on an axis
_EPS = 1e-9  # float noise: 0.3 / 0.1 is 2.9999999999999996


def nice_step(span: float, target: int = 8) -> float:
    """The step of 1, 2 or 5 times a power of ten nearest to ``span / target`` (on a log
    scale), enlarged until the axis has at most ``MAX_TICKS`` ticks.

    :param span: the axis' length (> 0, finite)
    :param target: intervals wanted
    :return: the step
    """
    raw = span / max(target, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    candidates = [f * power for f in (1.0, 2.0, 5.0, 10.0)]
    step = min(candidates, key=lambda c: abs(math.log(c / raw)))
    while span / step > MAX_TICKS - 1 + _EPS:
        index = candidates.index(step) + 1
        if index == len(candidates):  # the next decade
            candidates = [c * 10.0 for c in candidates]
            index = 1
        step = candidates[index]
    return step


def _ticks(top: float, target: int, units: _Units, least: float) -> list[tuple[float, str]]:
    """Ticks from 0 to at most ``top``: the unit from ``top``, the step at least
    ``least`` (in the base unit), labels with the decimals the step needs."""
    factor, symbol = units[0]
    for f, s in units:
        if top >= f * (1 - _EPS):
            factor, symbol = f, s
    step = max(nice_step(top / factor, min(target, MAX_TICKS - 1)), least / factor)
    decimals = max(0, -math.floor(math.log10(step) + _EPS))
    count = math.floor(top / factor / step + _EPS)
    return [(i * step * factor, f"{i * step:.{decimals}f} {symbol}") for i in range(count + 1)]


def time_ticks(span: float) -> list[tuple[float, str]]:
    """Ticks from 0 to at most ``span`` seconds, one unit for all (``0 ms``, ``5 ms``;
    ``0.0 s``, ``0.5 s``).

    :param span: seconds (0 or less, or not finite: a single ``0 s``)
    :return: ``(seconds, label)`` pairs
    """
    if not (math.isfinite(span) and span > 0):
        return [(0.0, "0 s")]
    return _ticks(span, 8, _TIME_UNITS, 1e-6)


def byte_ticks(top: float, target: int = 4) -> list[tuple[float, str]]:
    """Ticks from 0 to at most ``top`` bytes, one unit for all (``0 MiB``, ``20 MiB``).

    :param top: bytes (0 or less, or not finite: a single ``0 B``)
    :param target: intervals wanted, at most
    :return: ``(bytes, label)`` pairs
    """
    if not (math.isfinite(top) and top > 0):
        return [(0.0, "0 B")]
    return _ticks(top, target, _BYTE_UNITS, 1.0)
