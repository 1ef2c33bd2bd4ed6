"""The figures of a saved profile per function, in bulk, whichever layout it was saved in
(version 2's integer columns or version 1's rows per run, see :mod:`.schema`).

A comparison of two 20,000-function profiles of 20 runs reads 800,000 figures a side and
takes medians of four figures per function: done function by function in Python that
took seconds. Here each figure is one flat function-major list (function ``i``'s run
``r`` at ``i * runs + r``), and the work goes through ``map``, slices and ``sorted``, whose
loops run in C: a median of every function is one ``sorted`` per function and two
``itemgetter`` passes.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any


def _function_major(rows: Sequence[Sequence[float]]) -> list[float]:
    """Rows of runs (``rows[r][i]``) into one function-major list."""
    return list(itertools.chain.from_iterable(zip(*rows, strict=True)))


def split(values: Sequence[float], runs: int) -> list[Sequence[float]]:
    """The function-major list cut into one row of ``runs`` figures per function.

    :param values: ``functions x runs`` figures
    :param runs: figures per function
    :return: one slice per function
    """
    size = len(values)
    return list(
        map(values.__getitem__, map(slice, range(0, size, runs), range(runs, size + 1, runs)))
    )


def medians(
    values: Sequence[float], runs: int, unit: float = 1.0, constant: bool = False
) -> list[float]:
    """The median over the runs of every function, divided by ``unit``.

    :param values: ``functions x runs`` figures, function-major
    :param runs: figures per function (>= 1)
    :param unit: what one of the result is in the figures (1e9 nanoseconds a second): a
        division by a power of ten keeps ``802632 ns`` ``0.000802632`` (a product by
        1e-9 gives ``0.0008026320000000001``, longer to write and to read)
    :param constant: the figures are likely the same in every run (calls): check that
        first, which costs a fifth of the sorts it saves
    :return: one median per function
    """
    units = itertools.repeat(unit)
    if runs == 1:
        return list(map(operator.truediv, values, units))
    rows = split(values, runs)
    if constant:
        firsts = values[::runs]
        if list(map(operator.countOf, rows, firsts)).count(runs) == len(rows):
            return list(map(operator.truediv, firsts, units))
    ordered = list(map(sorted, rows))
    mid = runs // 2
    if runs % 2:
        return list(map(operator.truediv, map(operator.itemgetter(mid), ordered), units))
    low = map(operator.itemgetter(mid - 1), ordered)
    high = map(operator.itemgetter(mid), ordered)
    pairs = map(operator.add, low, high)
    return list(map(operator.truediv, pairs, itertools.repeat(2 * unit)))


class Columns:
    """One profile's figures, function-major.

    :param data: a checked profile payload, of version 1 or 2
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.functions: list[list[Any]] = data["functions"]
        if "runs" in data:  # version 1: one object per run, seconds as floats
            runs = data["runs"]
            self.runs = len(runs)
            self.walls = [float(r["wall"]) for r in runs]
            self.own = _function_major([r["own"] for r in runs])
            self.cumulative = _function_major([r["cumulative"] for r in runs])
            self.calls = _function_major([r["calls"] for r in runs])
            has_memory = all("memory" in r for r in runs)
            memory = _function_major([r["memory"] for r in runs]) if has_memory else None
            self.memory: list[float] | None = memory
            self.per_second = 1.0  # the unit of own and cumulative
        else:  # version 2: integer columns, nanoseconds
            self.runs = len(data["wall"])
            self.walls = [float(w) for w in data["wall"]]
            self.own = data["own_ns"]
            self.cumulative = data["cumulative_ns"]
            self.calls = data["calls"]
            self.memory = data.get("memory_bytes")
            self.per_second = 1e9

    def totals(self) -> list[float]:
        """Each run's total own time, in the columns' unit (1 for an empty run: its
        shares are 0, not a division by zero)."""
        r = self.runs
        totals = [math.fsum(self.own[i::r]) for i in range(r)]
        return [t if t > 0 else 1.0 for t in totals]

    def shares(self) -> list[float]:
        """Each function's share of its run's own time, function-major."""
        totals = self.totals() * len(self.functions)
        return list(map(operator.truediv, self.own, totals))

    def row(self, values: Sequence[float], i: int) -> Sequence[float]:
        """Function ``i``'s figures over the runs.

        :param values: one of the columns (``own``, ``shares()``...)
        :param i: the function's index
        :return: its ``runs`` figures
        """
        return values[i * self.runs : (i + 1) * self.runs]
