"""The timing loop behind ``benchmark.measure_time`` (:func:`measure`, a fixed
``repeat x number`` or batches planned to end right after ``max_time``) and ``compare``
(:func:`measure_interleaved`). Standard library only.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from .._errors import BadType, BadValue, ClockError
from .._gc import gc_paused
from .._validate import check_bool, check_callable, check_int, check_str
from .stats import Comparison, compare_samples, summarize
from .template import _TEMPLATE as _TEMPLATE  # re-exported: the tests compare it with timeit's
from .template import Clock, Inner, build_timer

# With max_time, a batch aims at max_time / _BATCHES_PER_BUDGET seconds (at most
# _MAX_BATCH_SECONDS): enough samples for a median and a spread, and the last batch is
# too short for a wrong prediction to overshoot the budget by much.
_BATCHES_PER_BUDGET = 50
_MAX_BATCH_SECONDS = 0.2
# A calibration batch grows at most this much: estimates from short batches are rough.
_MAX_GROWTH = 10
# The last batch aims this much over the remaining budget so that it ends the run
# instead of leaving a sliver for one more tiny batch.
_LAST_BATCH_MARGIN = 1.02
# Batches shorter than this fraction of the target are timed and counted in ttime but
# left out of the statistics: the clock's own cost weighs too much on them.
_SHORT_BATCH_FRACTION = 0.25
# A clock that did not advance over this many batches in a row (while their size grows
# tenfold, up to 10**7 executions) cannot time the statement: the run stops there.
_MAX_STILL_BATCHES = 8
# With a budget, compare() aims at this many batches of each statement: short batches
# (1 ms for a 1 s budget) are rarely hit by another process taking the CPU, and the rank
# test shrugs off those that are (benchmarks/bench_compare_power.py: 50 batches of 10 ms
# detected a 2 % difference in 0 of 6 trials on a busy machine, 500 in 6 of 6)...
_COMPARE_BATCHES = 500
# ...and times at least this many, even past the budget (a test needs samples).
_COMPARE_MIN_BATCHES = 5
# A calibrated batch (calibrate=True, as python -m timeit) lasts at least this long...
AUTORANGE_SECONDS = 0.2
# ...and, comparing two statements, the slower one's batch at least this long (20 batches
# a side by default: a comparison needs more batches than one timing).
COMPARE_AUTORANGE_SECONDS = 0.02
# At most this many batches are kept for the statistics (see BatchSample): a few MiB.
MAX_KEPT_BATCHES = 2**16


class BatchSample:
    """The seconds and sizes of the batches kept for the statistics, in bounded memory.

    Past ``capacity``, every other kept batch is dropped and only every 2nd (then 4th...)
    new one kept: an evenly spaced sample, so that ``time pass -n 1 -r 1000000000``
    neither grows without limit nor takes seconds to summarize when a signal stops it.
    Each change is one store: a signal raising in :meth:`add` leaves a consistent sample.

    :param capacity: the most batches kept (at least 2), :data:`MAX_KEPT_BATCHES` if None
    """

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = max(2, MAX_KEPT_BATCHES if capacity is None else capacity)
        self.pairs: list[tuple[float, int]] = []
        self.stride = 1
        self.seen = 0

    @property
    def times(self) -> list[float]:
        """Seconds of the kept batches."""
        return [t for t, _ in self.pairs]

    @property
    def sizes(self) -> list[int]:
        """Executions of the kept batches."""
        return [n for _, n in self.pairs]

    def add(self, seconds: float, size: int) -> None:
        """Records one batch (kept or not, as the stride says)."""
        index, self.seen = self.seen, self.seen + 1
        if index % self.stride:
            return
        self.pairs.append((seconds, size))
        if len(self.pairs) > self.capacity:
            self.pairs = self.pairs[::2]
            self.stride *= 2

    def __len__(self) -> int:
        return len(self.pairs)


class Progress:
    """What a measure timed so far, filled batch by batch: read by a live status, and
    by a caller whose run a signal stopped midway (:meth:`result`).

    ``batches``, ``runs`` and ``measured`` change together in one store: a signal never
    leaves a batch counted in one and not the others. ``div_by_number``,
    ``context_size`` and ``max_time`` are set when the measure starts; ``calibrated``
    says that the batch size was calibrated.
    """

    def __init__(self) -> None:
        self._totals: tuple[int, int, float] = (0, 0, 0.0)
        self.warmup_time = 0.0
        self.kept = BatchSample()
        self.div_by_number = True
        self.context_size = sys.getsizeof({})
        self.max_time: float | None = None
        self.calibrated = False

    @property
    def batches(self) -> int:
        """Batches timed so far."""
        return self._totals[0]

    @property
    def runs(self) -> int:
        """Executions timed so far."""
        return self._totals[1]

    @property
    def measured(self) -> float:
        """Seconds measured so far, all timed batches."""
        return self._totals[2]

    def record(self, seconds: float, size: int) -> None:
        """Counts one timed batch of ``size`` executions that measured ``seconds``."""
        batches, runs, measured = self._totals
        self._totals = (batches + 1, runs + size, measured + seconds)
        self.kept.add(seconds, size)

    def timing(self) -> TimingResult:
        """The result of the batches timed so far (BadValue when none was)."""
        if not self.kept:
            raise BadValue("no batch was timed")
        times: Sequence[float] = self.kept.times
        sizes: Sequence[int] = self.kept.sizes
        if self.max_time is not None:
            times, sizes = _keep_long_batches(times, sizes, self.max_time)
        return TimingResult(
            times=tuple(float(t) for t in times),
            sizes=tuple(int(n) for n in sizes),
            div_by_number=self.div_by_number,
            total_time=float(self.measured),
            batches=self.batches,
            runs=self.runs,
            warmup_time=self.warmup_time,
            context_size=self.context_size,
            max_time=self.max_time,
        )

    def result(self) -> dict[str, int | float]:
        """``measure_time``'s dictionary of the batches timed so far."""
        return self.timing().to_dict()


@dataclass(frozen=True)
class TimingResult:
    """What one measurement produced.

    :param times: measured seconds of each batch kept for the statistics
    :param sizes: executions in each of those batches
    :param div_by_number: statistics per execution (True) or per batch (False)
    :param total_time: seconds measured over all timed batches, warmup excluded
    :param batches: number of timed batches, including those left out of the statistics
    :param runs: number of timed executions, including those left out of the statistics
    :param warmup_time: seconds taken by the warmup executions, all together
    :param context_size: ``sys.getsizeof(context)``
    :param max_time: the time budget, None for a fixed ``repeat x number``
    """

    times: tuple[float, ...]
    sizes: tuple[int, ...]
    div_by_number: bool
    total_time: float
    batches: int
    runs: int
    warmup_time: float
    context_size: int
    max_time: float | None = None

    def values(self) -> list[float]:
        """The samples the statistics describe: seconds per execution or per batch."""
        if self.div_by_number:
            return [t / n for t, n in zip(self.times, self.sizes, strict=True)]
        return list(self.times)

    @property
    def number(self) -> int:
        """Executions per batch (the rounded mean when batch sizes vary, as with max_time)."""
        return max(1, round(sum(self.sizes) / len(self.sizes)))

    def to_dict(self) -> dict[str, int | float]:
        """The dictionary returned by ``measure_time``: plain ints and floats only."""
        values = self.values()
        stats = summarize(values)
        return {
            "average": stats["average"],
            "deviation": stats["deviation"],
            "min_exec": stats["min_exec"],
            "max_exec": stats["max_exec"],
            "repeat": len(self.times),
            "number": self.number,
            # The reference's meaning: the sum of the per-batch figures (average x repeat).
            "ttime": float(math.fsum(values)),
            "context_size": int(self.context_size),
            "warmup_time": float(self.warmup_time),
            "median": stats["median"],
            "iqr": stats["iqr"],
            "mad": stats["mad"],
            "batches": int(self.batches),
            "runs": int(self.runs),
            "total_time": float(self.total_time),
        }


def validate(
    stmt: Any,
    repeat: Any,
    number: Any,
    warmup: Any,
    div_by_number: Any,
    max_time: Any,
    *,
    context: Any = None,
    setup: Any = None,
    clock: Any = None,
    keep_gc: Any = False,
    calibrate: Any = False,
) -> tuple[int, int, int, float | None]:
    """Checks the arguments of ``measure_time`` (messages name the parameter).

    :return: ``repeat``, ``number``, ``warmup`` as ints and ``max_time`` as a float
    """
    if not isinstance(stmt, str) and not callable(stmt):
        raise BadType(f"stmt must be a str or a callable, got {type(stmt).__name__}")
    if context is not None and not isinstance(context, Mapping):
        raise BadType(f"context must be a dict or None, got {type(context).__name__}")
    check_str("setup", setup, optional=True)
    check_callable("clock", clock, optional=True)
    check_bool("div_by_number", div_by_number)
    check_bool("keep_gc", keep_gc)
    check_bool("calibrate", calibrate)
    counts = (
        check_int("repeat", repeat, 1),
        check_int("number", number, 1),
        check_int("warmup", warmup, 0),
    )
    if max_time is None:
        return (*counts, None)
    if isinstance(max_time, bool) or not isinstance(max_time, (int, float)):
        raise BadType(f"max_time must be a float or None, got {type(max_time).__name__}")
    if not max_time > 0 or math.isinf(max_time):  # NaN fails the first test
        raise BadValue(f"max_time must be > 0 and finite, got {max_time!r}")
    budget = float(max_time)
    if not div_by_number:
        raise BadValue(f"div_by_number must be True when max_time is set, got {div_by_number!r}")
    if calibrate:
        raise BadValue(
            "calibrate must be False when max_time is set (max_time sizes its batches itself)"
        )
    return (*counts, budget)


def batch_target(max_time: float) -> float:
    """Seconds a batch aims at when the budget is ``max_time``."""
    return min(max_time / _BATCHES_PER_BUDGET, _MAX_BATCH_SECONDS)


def plan_next_batch(last_size: int, last_time: float, total: float, max_time: float) -> int:
    """Sizes the next batch so that the run ends right after ``max_time``: growing (at
    most tenfold) towards :func:`batch_target`, then splitting the remaining budget into
    even batches, from the time per execution of the last batch.

    :param last_size: executions in the last batch
    :param last_time: seconds measured for the last batch
    :param total: seconds measured so far, all batches
    :param max_time: the budget
    :return: executions in the next batch, 0 when the budget is spent
    """
    remaining = max_time - total
    if remaining <= 0:
        return 0
    target = batch_target(max_time)
    # A clock that did not tick says only that an execution is very cheap.
    per_exec = max(last_time, 1e-9) / last_size
    if last_time < target:
        size = min(last_size * _MAX_GROWTH, math.ceil(target / per_exec))
        return max(1, min(size, math.ceil(remaining * _LAST_BATCH_MARGIN / per_exec)))
    left = max(1, round(remaining / target))
    share = remaining / left
    if left == 1:
        share *= _LAST_BATCH_MARGIN
    return max(1, math.ceil(share / per_exec))


def _timed(inner: Inner, clock: Clock, size: int) -> float:
    """The seconds a batch of ``size`` executions measured, refused when the clock cannot
    have measured them: NaN, infinite or negative (a clock that went backwards)."""
    t = float(inner(itertools.repeat(None, size), clock))
    if math.isnan(t) or math.isinf(t):
        raise ClockError(f"the clock returned {t!r}: a batch of {size} executions measured {t!r} s")
    if t < 0:
        raise ClockError(f"the clock went backwards: a batch of {size} executions measured {t!r} s")
    return t


def _check_clock(clock: Clock) -> None:
    """Refuses a clock that does not return a real number, before anything runs."""
    value = clock()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadType(f"clock must return a float, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ClockError(f"the clock returned {value!r}")


def _still_error(still: int, size: int) -> ClockError:
    return ClockError(
        f"the clock did not advance over {still} batches in a row (the last one of {size:,} "
        "executions): it cannot time this statement"
    )


def _run_batch(inner: Inner, clock: Clock, size: int, progress: Progress) -> float:
    t = _timed(inner, clock, size)
    progress.record(t, size)
    return t


def _run_fixed(inner: Inner, clock: Clock, repeat: int, number: int, progress: Progress) -> None:
    for _ in range(repeat):
        _run_batch(inner, clock, number, progress)
    if progress.measured == 0:
        raise _still_error(repeat, number)


def _run_budget(inner: Inner, clock: Clock, max_time: float, progress: Progress) -> None:
    size, total, still = 1, 0.0, 0
    while size > 0:
        t = _run_batch(inner, clock, size, progress)
        still = still + 1 if t == 0 else 0
        if still >= _MAX_STILL_BATCHES:
            raise _still_error(still, size)
        total += t
        size = plan_next_batch(size, t, total, max_time)


def _keep_long_batches(
    times: Sequence[float], sizes: Sequence[int], max_time: float
) -> tuple[Sequence[float], Sequence[int]]:
    threshold = batch_target(max_time) * _SHORT_BATCH_FRACTION
    kept = [(t, n) for t, n in zip(times, sizes, strict=True) if t >= threshold]
    if not kept:  # a tiny budget: everything is short, keep everything
        return times, sizes
    return [t for t, _ in kept], [n for _, n in kept]


def _autorange(inner: Inner, clock: Clock, seconds: float) -> int:
    """The batch size :meth:`timeit.Timer.autorange` finds: 1, 2, 5, 10, 20, 50...
    executions until one batch lasts at least ``seconds``."""
    still = 0
    for size in (f * 10**e for e in itertools.count() for f in (1, 2, 5)):
        t = _timed(inner, clock, size)
        if t >= seconds:
            return size
        still = still + 1 if t == 0 else 0
        # Three sizes per tenfold growth: stop at 10**7 executions, as with a budget.
        if still >= 3 * _MAX_STILL_BATCHES - 2:
            raise _still_error(still, size)
    raise AssertionError("unreachable: itertools.count() never ends")


def measure(
    stmt: str | Callable[[], Any],
    context: Mapping[str, Any] | None = None,
    repeat: int = 10,
    number: int = 50,
    warmup: int = 1,
    div_by_number: bool = True,
    max_time: float | None = None,
    *,
    setup: str | None = None,
    keep_gc: bool = False,
    clock: Clock | None = None,
    calibrate: bool = False,
    progress: Progress | None = None,
) -> TimingResult:
    """Times ``stmt``; the parameters are ``measure_time``'s."""
    repeat, number, warmup, budget = validate(
        stmt, repeat, number, warmup, div_by_number, max_time, context=context, setup=setup,
        clock=clock, keep_gc=keep_gc, calibrate=calibrate,
    )  # fmt: skip
    if progress is not None and not isinstance(progress, Progress):
        raise BadType(f"progress must be a Progress or None, got {type(progress).__name__}")
    inner = build_timer(stmt, context, setup)
    clock = perf_counter if clock is None else clock
    _check_clock(clock)
    progress = Progress() if progress is None else progress
    progress.div_by_number = div_by_number
    progress.context_size = sys.getsizeof({} if context is None else context)
    progress.max_time = budget
    with gc_paused(keep_gc):
        if warmup:
            progress.warmup_time = _timed(inner, clock, warmup)
        if calibrate:
            number = _autorange(inner, clock, AUTORANGE_SECONDS)
            progress.calibrated = True
        if budget is None:
            _run_fixed(inner, clock, repeat, number, progress)
        else:
            _run_budget(inner, clock, budget, progress)
    return progress.timing()


@dataclass
class CompareProgress:
    """What :func:`measure_interleaved` timed so far, filled round by round (past
    :data:`MAX_KEPT_BATCHES` rounds, an evenly spaced sample, as :class:`BatchSample`).

    :param samples: seconds per execution, one list per statement
    :param number: executions per batch (calibrated with ``max_time`` or ``calibrate``)
    :param measured: seconds measured, all statements, calibration included
    :param running: the index of the statement being run (compiled, warmed up,
        calibrated or timed), None when none is: tells whose error an exception is
    :param calibrated: the batch size was calibrated
    """

    samples: list[list[float]] = field(default_factory=list)
    number: int = 0
    measured: float = 0.0
    running: int | None = None
    calibrated: bool = False
    rounds: int = 0
    stride: int = 1

    def add_round(self, times: Sequence[float]) -> None:
        """Records one round (seconds of each statement's batch of ``number``)."""
        self.measured += math.fsum(times)
        index, self.rounds = self.rounds, self.rounds + 1
        if index % self.stride:
            return
        for xs, t in zip(self.samples, times, strict=True):
            xs.append(t / self.number)
        if len(self.samples[0]) > MAX_KEPT_BATCHES:
            self.samples = [xs[::2] for xs in self.samples]
            self.stride *= 2

    def paired(self) -> list[list[float]]:
        """The samples of the complete rounds (a round stopped midway is dropped)."""
        n = min((len(xs) for xs in self.samples), default=0)
        return [xs[:n] for xs in self.samples]

    def sides(self) -> list[dict[str, int | float]]:
        """One summary per statement, keyed as ``measure_time``'s dictionary, over the
        complete rounds kept."""
        return [
            {
                **summarize(xs),
                "repeat": len(xs),
                "number": self.number,
                "ttime": math.fsum(xs),
                "batches": len(xs),
                "runs": len(xs) * self.number,
                "total_time": math.fsum(xs) * self.number,
            }
            for xs in self.paired()
        ]

    def comparison(self, confidence: float = 0.95, alpha: float = 0.05) -> Comparison:
        """The comparison of the first two statements' complete rounds."""
        first, second = self.paired()[:2]
        return compare_samples(first, second, confidence, alpha)


def _interleaved_round(
    inners: list[Inner], clock: Clock, number: int, order: list[int], state: CompareProgress
) -> list[float]:
    """One batch of each statement in ``order``; seconds by statement index."""
    times = [0.0] * len(inners)
    for i in order:
        state.running = i
        times[i] = _timed(inners[i], clock, number)
    state.running = None
    order.reverse()  # the next round runs them the other way round
    return times


def _calibrate_interleaved(
    inners: list[Inner], clock: Clock, target: float, order: list[int], state: CompareProgress
) -> tuple[int, float]:
    """Grows the batch size (at most tenfold a round) until the slowest statement's batch
    lasts about ``target``; returns the size and the seconds the rounds measured."""
    number, spent, still = 1, 0.0, 0
    while True:
        times = _interleaved_round(inners, clock, number, order, state)
        spent += sum(times)
        slowest = max(times)
        if slowest >= target * 0.8:
            return number, spent
        still = still + 1 if slowest == 0 else 0
        if still >= _MAX_STILL_BATCHES:
            raise _still_error(still, number)
        growth = _MAX_GROWTH if slowest == 0 else min(_MAX_GROWTH, target / slowest)
        number = max(number + 1, math.ceil(number * growth))


def _each(state: CompareProgress, items: Sequence[Any], action: Callable[[Any], Any]) -> list[Any]:
    """``action`` on each statement's item, ``state.running`` naming the one at work
    (whose error it is)."""
    done = []
    for i, item in enumerate(items):
        state.running = i
        done.append(action(item))
    state.running = None
    return done


def measure_interleaved(
    stmts: Sequence[str | Callable[[], Any]],
    context: Mapping[str, Any] | None = None,
    repeat: int = 20,
    number: int = 50,
    warmup: int = 1,
    *,
    setup: str | None = None,
    keep_gc: bool = False,
    clock: Clock | None = None,
    max_time: float | None = None,
    calibrate: bool = False,
    into: CompareProgress | None = None,
) -> list[list[float]]:
    """Times several statements batch by batch in turn, the order alternating, so that
    a drift of the machine weighs on all alike (see ``benchmark.compare``).

    :param into: filled round by round, for a caller that reports what was measured
        when the run is stopped midway, or whose statement failed (``running``)
    :return: seconds per execution, one list of samples per statement
    """
    for stmt in stmts:
        repeat, number, warmup, max_time = validate(
            stmt, repeat, number, warmup, True, max_time, context=context, setup=setup,
            clock=clock, keep_gc=keep_gc, calibrate=calibrate,
        )  # fmt: skip
    if into is not None and not isinstance(into, CompareProgress):
        raise BadType(f"progress must be a CompareProgress or None, got {type(into).__name__}")
    timer = perf_counter if clock is None else clock
    state = CompareProgress() if into is None else into
    state.samples = [[] for _ in stmts]
    inners = _each(state, stmts, lambda stmt: build_timer(stmt, context, setup))
    _check_clock(timer)
    order = list(range(len(inners)))
    rounds = repeat
    with gc_paused(keep_gc):
        if warmup:
            _each(state, inners, lambda inner: _timed(inner, timer, warmup))
        if calibrate:
            sizes = _each(state, inners, lambda i: _autorange(i, timer, COMPARE_AUTORANGE_SECONDS))
            number, state.calibrated = min(sizes), True
        if max_time is not None:
            target = min(max_time / (len(inners) * _COMPARE_BATCHES), _MAX_BATCH_SECONDS)
            number, state.measured = _calibrate_interleaved(inners, timer, target, order, state)
            state.calibrated = True
            rounds = _COMPARE_MIN_BATCHES
        state.number = number
        done = 0
        while done < rounds or (max_time is not None and state.measured < max_time):
            times = _interleaved_round(inners, timer, number, order, state)
            if min(times) == 0:
                raise _still_error(1, number)
            state.add_round(times)
            done += 1
    state.running = None
    return [list(xs) for xs in state.samples]
