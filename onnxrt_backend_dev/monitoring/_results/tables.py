"""One side of a comparison of profiles, read from their saved table (:mod:`.schema`)
whatever measured them: each function's own and inclusive seconds and each call path's
inclusive seconds, in every run, keyed by :mod:`.keys`.

* cProfile: exact own and inclusive times; its paths are its edges, its stacks (the
  callee's inclusive time when called from there);
* a sampled profile: each stack's wall and CPU seconds per run; a function's own time is
  that of the stacks it ends, its inclusive time that of the stacks holding it (once, in
  a recursion), a path's that of the stacks starting with it;
* a ``run`` result: the report's functions and call tree's paths (its stacks), and each
  function's memory growth.

Sampled figures are *counted* (samples times an interval, possibly absent from a run):
the comparison adds half a sample before taking logs.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from .._stats.multiple import median
from .keys import Key, match_keys

Path = tuple[Key, ...]
Rows = dict[Any, list[float]]
# The kinds of call paths a side holds: whole stacks from the root, cProfile's edges, none.
STACKS, EDGES, NO_PATHS = "stacks", "edges", "none"


def _add(rows: Rows, key: Any, values: Sequence[float]) -> None:
    row = rows.get(key)
    if row is None:
        rows[key] = list(values)
    else:
        rows[key] = list(map(operator.add, row, values))


class SideTable:
    """One side's figures, seconds per run.

    :param profiler: ``cprofile``, ``sampled`` or ``ticks`` (a ``run`` result)
    :param clock: ``cpu`` or ``wall``, the clock of the figures
    :param walls: each run's wall seconds
    """

    def __init__(self, profiler: str, clock: str, walls: Sequence[float]) -> None:
        self.profiler = profiler
        self.clock = clock
        self.walls = [float(w) for w in walls]
        self.runs = len(self.walls)
        self.counted = False  # figures are samples times an interval
        # Samples a second of the figures (the kernel's CPU timer may tick every 4 ms
        # whatever the interval asked): counts are seconds times this.
        self.rate = 0.0
        # The run cut into disjoint pieces (a sampled profile's stacks, else the
        # functions' own times): what the run-wide factor is estimated from.
        self.pieces: Rows = {}
        self.where: dict[Key, tuple[str, int, str]] = {}
        self.own: Rows = {}
        self.inclusive: Rows = {}
        self.paths: Rows = {}
        self.path_kind = NO_PATHS
        self.growth: Rows = {}
        # Calls to the allocators and bytes allocated per function (a profile counted by
        # valgrind).
        self.allocs: Rows = {}
        self.bytes: Rows = {}
        self.rise = 0.0
        self.peaks: list[float] = []
        self.failed = 0

    def totals(self) -> list[float]:
        """Each run's profiled seconds (the sum of the own times; 1.0 for an empty run)."""
        sums = [math.fsum(col) for col in zip(*self.own.values(), strict=True)] or [0.0]
        sums = sums if len(sums) == self.runs else [0.0] * self.runs
        return [t if t > 0 else 1.0 for t in sums]

    def _keys(self, functions: Sequence[Sequence[Any]], main: str | None) -> list[Key]:
        keys = match_keys(functions, main)
        for key, f in zip(keys, functions, strict=True):
            self.where.setdefault(key, (str(f[0]), int(f[1]), str(f[2])))
        return keys


def split(values: Sequence[float], runs: int) -> list[Sequence[float]]:
    """The function-major list cut into one row of ``runs`` figures per function.

    :param values: ``functions x runs`` figures
    :param runs: figures per function
    """
    size = len(values)
    return list(
        map(values.__getitem__, map(slice, range(0, size, runs), range(runs, size + 1, runs)))
    )


def _by_key(keys: Sequence[Key], rows: Sequence[Sequence[float]]) -> Rows:
    """Each function's row by its key, the rows of functions alike added up."""
    if len(set(keys)) == len(keys):  # nothing folds: the rows as they are
        return dict(zip(keys, map(list, rows), strict=True))
    out: Rows = {}
    for key, row in zip(keys, rows, strict=True):
        _add(out, key, row)
    return out


def _seconds(values: Sequence[float], scale: float, runs: int) -> list[Sequence[float]]:
    """A function-major column in seconds (in C: map), cut into rows of ``runs``."""
    return split(list(map(operator.truediv, values, itertools.repeat(scale))), runs)


def _functions(data: Mapping[str, Any], clock: str | None) -> SideTable:
    """cProfile's table or a run's: the functions' times as saved, the stacks' (edges, the
    call tree's paths) as paths; a run's ticks see CPU time for own times only, compared
    alone on the CPU clock (asked for, and held)."""
    figures, stacks = data["function_figures"], data.get("stack_figures", {})
    ticks = data["profiler"] == "ticks"
    runs = len(data["wall"])
    side = SideTable(
        data["profiler"], _clock(data, clock) if ticks else data.get("timer", "wall"), data["wall"]
    )
    keys = side._keys(data["functions"], data.get("main"))
    scale = 1e9 if data["unit"] == "ns" else 1.0
    wall = not ticks or side.clock == "wall"  # a run's inclusive times and paths: wall
    side.own = _by_key(keys, _seconds(figures["own_cpu" if not wall else "own"], scale, runs))
    if wall:
        side.inclusive = _by_key(keys, _seconds(figures["inclusive"], scale, runs))
    side.pieces = side.own
    counts = {"growth": "growth", "alloc_calls": "allocs", "alloc_bytes": "bytes"}
    for column, name in counts.items():
        if column in figures:
            rows = [list(map(float, row)) for row in split(figures[column], runs)]
            setattr(side, name, _by_key(keys, rows))
    if wall and "time" in stacks:
        side.path_kind = STACKS if ticks else EDGES
        _paths(side, data, keys, scale)
    if ticks:
        _run_figures(side, data)
    return side


def _clock(data: Mapping[str, Any], clock: str | None) -> str:
    """A run's clock: the CPU clock where asked for and every run holds CPU times."""
    own_cpu, runs = data["function_figures"].get("own_cpu"), len(data["wall"])
    held = own_cpu is not None and all(math.fsum(own_cpu[r::runs]) > 0 for r in range(runs))
    return "cpu" if clock == "cpu" and held else "wall"


def _paths(side: SideTable, data: Mapping[str, Any], keys: Sequence[Key], scale: float) -> None:
    """Each stack's inclusive time as a path, its own (a run's) as a piece."""
    runs, stacks = side.runs, data["stack_figures"]
    pieces: Rows = {}
    alone = split(stacks["self"], runs) if "self" in stacks else None
    for j, (ids, row) in enumerate(zip(data["stacks"], split(stacks["time"], runs), strict=True)):
        path = tuple(keys[i] for i in ids)
        if side.path_kind == EDGES and path[0] == path[1]:
            continue  # a function calling itself is not a path to compare
        _add(side.paths, path, [x / scale for x in row])
        if alone is not None:
            _add(pieces, path, [x / scale for x in alone[j]])
    side.pieces = pieces or side.own


def _run_figures(side: SideTable, data: Mapping[str, Any]) -> None:
    """A run's peaks, typical rise (peak - start), failed runs and ticks' rate."""
    figures = data["run_figures"]
    side.counted = True
    side.rate = 1 / float(data["interval"])
    side.peaks = [float(x) for x in figures["peak"]]
    rises = sorted(map(operator.sub, side.peaks, map(float, figures["start"])))
    rise = rises[len(rises) // 2]
    side.rise = rise if rise > 0 else 1.0
    side.failed = sum(1 for code in figures.get("exit", ()) if code != 0)


def _sampled(data: Mapping[str, Any], clock: str | None) -> SideTable:
    clock = clock or data.get("timer", "wall")
    side = SideTable("sampled", clock, data["wall"])
    side.counted = True
    side.path_kind = STACKS
    keys = side._keys(data["functions"], data.get("main"))
    n = side.runs
    columns = data["stack_figures"]
    column = columns["cpu" if clock == "cpu" else "wall"]
    seconds = math.fsum(column) / 1e9
    side.rate = math.fsum(columns["samples"]) / seconds if seconds > 0 else 1 / data["interval"]
    rows = split(column, n)
    if clock == "cpu" and n > 1:
        leaves = [keys[ids[-1]] if ids else None for ids in data["stacks"]]
        rows = smooth_cpu(rows, split(columns["samples"], n), leaves)
    zeros = [0.0] * n
    for ids, row in zip(data["stacks"], rows, strict=True):
        values = [x / 1e9 for x in row]
        if not any(values):
            continue
        stack = [keys[i] for i in ids]
        _add(side.own, stack[-1], values)
        _add(side.pieces, tuple(stack), values)
        for key in dict.fromkeys(stack):  # once each, in a recursion
            _add(side.inclusive, key, values)
            if key not in side.own:
                side.own[key] = list(zeros)
        for depth in range(1, len(stack) + 1):
            _add(side.paths, tuple(stack[:depth]), values)
    return side


def smooth_cpu(
    cpu: Sequence[Sequence[float]], samples: Sequence[Sequence[float]], leaves: Sequence[Any]
) -> list[Sequence[float]]:
    """The CPU time of the stacks ending in one function, in each run, shared among them
    by their samples (each function's own time kept). A sampler charges the CPU time
    since its last sample to the stack it finds: a sample late by a preemption charges
    milliseconds to one caller (twenty callers of one ``spin``: each caller's path spread
    by 0.30 to 0.50 in log from run to run, its samples by 0.20). What a sample of a
    function carries is the function's, whoever called it.

    :param cpu: per stack, its CPU time in each run
    :param samples: per stack, its samples in each run
    :param leaves: per stack, the function it ends in
    :return: per stack, its CPU time in each run (a stack alone in ending where it ends,
        or a run without samples there, as it was)
    """
    groups: dict[Any, list[int]] = {}
    for j, leaf in enumerate(leaves):
        groups.setdefault(leaf, []).append(j)
    out = list(cpu)
    groups.pop(None, None)  # an empty stack ends nowhere
    for members in groups.values():
        if len(members) < 2:
            continue
        # Per run, in bulk (a large profile has 20,000 stacks): the function's CPU time
        # and its samples, then the CPU a sample carried.
        spent = list(map(math.fsum, zip(*(cpu[j] for j in members), strict=True)))
        seen = list(map(math.fsum, zip(*(samples[j] for j in members), strict=True)))
        each = [c / n if n > 0 else 0.0 for c, n in zip(spent, seen, strict=True)]
        empty = [r for r, n in enumerate(seen) if n <= 0]
        for j in members:
            row = out[j] = list(map(operator.mul, samples[j], each))
            for r in empty:  # a run without samples there keeps its figure
                row[r] = cpu[j][r]
    return out


def side_table(kind: str, data: Mapping[str, Any], clock: str | None = None) -> SideTable:
    """The table of a checked profile table (:mod:`.schema`).

    :param kind: ``profile`` or ``run``, the result's kind (its profiler, ``ticks`` for a
        run, says how it reads)
    :param data: the payload
    :param clock: ``cpu`` or ``wall`` for the sampled figures (the payload's own when
        None); a cProfile profile's clock is the one it was profiled with
    """
    if data["profiler"] == "sampled":
        return _sampled(data, clock)
    return _functions(data, clock)


def medians(rows: Rows) -> dict[Any, float]:
    """The median over the runs of each row.

    :param rows: key -> values per run
    """
    if not rows:
        return {}
    ordered = list(map(sorted, rows.values()))
    n = len(ordered[0])
    if all(len(row) == n for row in ordered):  # one length (the runs): itemgetter, in C
        if n % 2:
            mids: Any = map(operator.itemgetter(n // 2), ordered)
        else:
            low = map(operator.itemgetter(n // 2 - 1), ordered)
            high = map(operator.itemgetter(n // 2), ordered)
            mids = map(operator.truediv, map(operator.add, low, high), itertools.repeat(2.0))
        return dict(zip(rows, mids, strict=True))
    return {key: median(s) for key, s in zip(rows, ordered, strict=True)}


def located(key: Key, sa: SideTable, sb: SideTable) -> tuple[str, int, str]:
    """``(file, line, name)`` of a function, B's place first.

    :param key: the function's key
    :param sa: A's table
    :param sb: B's table
    :return: its place (its key's file and name, line 0, when neither side has one)
    """
    return sb.where.get(key) or sa.where.get(key) or (key[0], 0, key[1])


def union(*keys: Any) -> list[Any]:
    """The keys of several tables, in first-seen order.

    :param keys: iterables of keys
    :return: one list, no repeats
    """
    return list(dict.fromkeys(itertools.chain(*keys)))
