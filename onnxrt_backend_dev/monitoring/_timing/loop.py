"""The timing machinery behind :func:`onnxrt_backend_dev.monitoring.benchmark.measure_time`.

* :func:`build_timer` compiles the statement into a timing loop, as :mod:`timeit` does:
  a str statement is pasted into the loop body (no call per execution), a callable is
  called from the loop through a local name.
* :func:`measure` runs the warmup and the batches (a fixed ``repeat x number`` or, with
  ``max_time``, batches planned by :func:`plan_next_batch` to end right after the budget)
  and returns a :class:`TimingResult`, the one value of this capability.
* :func:`measure_interleaved` times several statements batch by batch in turn, for
  :func:`.stats.compare_samples`.

The statistics of the results (summaries, comparisons) live in :mod:`.stats`.

Standard library only: nothing heavy is imported.
"""

from __future__ import annotations

import gc
import itertools
import math
import operator
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from .._errors import ClockError
from .stats import summarize

Clock = Callable[[], float]
# Runs one batch: (iterator over the executions, clock) -> seconds measured.
Inner = Callable[[Any, Clock], float]

# The template of timeit, byte for byte: the statement is pasted in the loop, nothing
# else is timed; the trailing pass keeps a comment-only statement valid (and makes the
# loop cost exactly what timeit's costs).
_TEMPLATE = """
def inner(_it, _timer{init}):
    {setup}
    _t0 = _timer()
    for _i in _it:
        {stmt}
        pass
    _t1 = _timer()
    return _t1 - _t0
"""

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
# The batch the command line calibrates (as python -m timeit): at least this long.
AUTORANGE_SECONDS = 0.2


@dataclass
class Progress:
    """Counters updated after each batch, read by a live status from another thread.

    :param batches: batches timed so far
    :param runs: executions timed so far
    :param measured: seconds measured so far (the future ``ttime``)
    :param times: seconds of each batch timed so far, so that a run stopped midway (a
        signal) can still report what it measured
    :param sizes: executions of each of those batches
    :param warmup_time: seconds taken by the warmup, once done
    """

    batches: int = 0
    runs: int = 0
    measured: float = 0.0
    times: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    warmup_time: float = 0.0


@dataclass(frozen=True)
class TimingResult:
    """What one measurement produced.

    :param times: measured seconds of each batch kept for the statistics
    :param sizes: executions in each of those batches
    :param div_by_number: statistics per execution (True) or per batch (False)
    :param ttime: seconds measured over all timed batches, warmup excluded
    :param batches: number of timed batches, including those left out of the statistics
    :param runs: number of timed executions, including those left out of the statistics
    :param warmup_time: seconds taken by the warmup executions, all together
    :param context_size: ``sys.getsizeof(context)``
    :param max_time: the time budget, None for a fixed ``repeat x number``
    """

    times: tuple[float, ...]
    sizes: tuple[int, ...]
    div_by_number: bool
    ttime: float
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
        stats = summarize(self.values())
        return {
            "average": stats["average"],
            "deviation": stats["deviation"],
            "min_exec": stats["min_exec"],
            "max_exec": stats["max_exec"],
            "repeat": len(self.times),
            "number": self.number,
            "ttime": float(self.ttime),
            "context_size": int(self.context_size),
            "warmup_time": float(self.warmup_time),
            "median": stats["median"],
            "iqr": stats["iqr"],
            "mad": stats["mad"],
            "batches": int(self.batches),
            "runs": int(self.runs),
        }


# --- validation ---------------------------------------------------------------------


def _check_int(name: str, value: Any, minimum: int) -> None:
    # operator.index accepts numpy integers too, refuses floats.
    try:
        if isinstance(value, bool):
            raise TypeError
        operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")


def validate(
    stmt: Any,
    repeat: Any,
    number: Any,
    warmup: Any,
    div_by_number: bool,
    max_time: Any,
    *,
    context: Any = None,
    setup: Any = None,
    clock: Any = None,
) -> None:
    """Checks the arguments of ``measure_time``; messages name the parameter and value.

    :raises TypeError: a value of the wrong type (``stmt`` neither str nor callable,
        ``context`` not a dict, ``setup`` not a str, ``clock`` not callable...)
    :raises ValueError: a value out of range, or ``max_time`` without ``div_by_number``
    """
    if not isinstance(stmt, str) and not callable(stmt):
        raise TypeError(f"stmt must be a str or a callable, got {type(stmt).__name__}")
    if context is not None and not isinstance(context, Mapping):
        raise TypeError(f"context must be a dict or None, got {type(context).__name__}")
    if setup is not None and not isinstance(setup, str):
        raise TypeError(f"setup must be a str or None, got {type(setup).__name__}")
    if clock is not None and not callable(clock):
        raise TypeError(f"clock must be a callable or None, got {type(clock).__name__}")
    _check_int("repeat", repeat, 1)
    _check_int("number", number, 1)
    _check_int("warmup", warmup, 0)
    if max_time is None:
        return
    if isinstance(max_time, bool) or not isinstance(max_time, (int, float)):
        raise TypeError(f"max_time must be a float or None, got {type(max_time).__name__}")
    if not max_time > 0 or math.isinf(max_time):
        raise ValueError(f"max_time must be > 0 and finite, got {max_time!r}")
    if not div_by_number:
        raise ValueError(f"div_by_number must be True when max_time is set, got {div_by_number!r}")


# --- the timing loop ----------------------------------------------------------------


def _reindent(src: str, indent: int) -> str:
    return src.replace("\n", "\n" + " " * indent)


def build_timer(
    stmt: str | Callable[[], Any],
    context: Mapping[str, Any] | None = None,
    setup: str | None = None,
) -> Inner:
    """Compiles the timing loop for ``stmt``, as :class:`timeit.Timer` does.

    :param stmt: a str, compiled into the loop with a copy of ``context`` as its
        globals (the caller's dictionary is left untouched), or a callable, called from
        the loop through a local name
    :param context: the globals of a str statement (and of ``setup``)
    :param setup: code run before each batch, outside the timed region; its names are
        local to the loop, as with ``timeit -s``
    :return: ``inner(iterator, clock) -> seconds`` running one batch
    :raises SyntaxError: ``stmt`` or ``setup`` is not valid Python
    """
    setup_src = setup or "pass"
    # Compiled alone first, so that the error points at the user's code and so that
    # code that would escape the template (a bare return, a dedent) is rejected.
    compile(setup_src, "<setup>", "exec")
    namespace: dict[str, Any] = {}
    init = ""
    if isinstance(stmt, str):
        compile(stmt, "<stmt>", "exec")
        stmt_src = stmt
    else:
        namespace["_stmt"] = stmt
        init = ", _stmt=_stmt"
        stmt_src = "_stmt()"
    src = _TEMPLATE.format(init=init, setup=_reindent(setup_src, 4), stmt=_reindent(stmt_src, 8))
    global_ns = dict(context) if context is not None else {}
    exec(compile(src, "<measure_time>", "exec"), global_ns, namespace)
    inner: Inner = namespace["inner"]
    return inner


def batch_target(max_time: float) -> float:
    """Seconds a batch aims at when the budget is ``max_time``."""
    return min(max_time / _BATCHES_PER_BUDGET, _MAX_BATCH_SECONDS)


def plan_next_batch(last_size: int, last_time: float, total: float, max_time: float) -> int:
    """Sizes the next batch so that the run ends right after ``max_time``.

    While batches are shorter than the target (:func:`batch_target`), the size grows
    (at most tenfold) towards it. Then the remaining budget is split into even batches of
    about the target; the last one aims a little over the remainder to end the run.
    Predictions use the time per execution of the last batch.

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


class _GcOff:
    """Disables the garbage collector unless told to keep it, then restores it."""

    def __init__(self, keep_gc: bool) -> None:
        self.keep_gc = keep_gc
        self.was_enabled = True

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        if not self.keep_gc:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()


def _checked(seconds: Any, size: int) -> float:
    """The seconds a batch of ``size`` executions measured, refused when the clock cannot
    have measured them: NaN, infinite or negative (a clock that went backwards)."""
    t = float(seconds)
    if math.isnan(t) or math.isinf(t):
        raise ClockError(f"the clock returned {t!r}: a batch of {size} executions measured {t!r} s")
    if t < 0:
        raise ClockError(f"the clock went backwards: a batch of {size} executions measured {t!r} s")
    return t


def _check_clock(clock: Clock) -> None:
    """Refuses a clock that does not return a real number, before anything runs."""
    value = clock()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"clock must return a float, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ClockError(f"the clock returned {value!r}")


def _still_error(still: int, size: int) -> ClockError:
    return ClockError(
        f"the clock did not advance over {still} batches in a row (the last one of {size:,} "
        "executions): it cannot time this statement"
    )


def _run_batch(inner: Inner, clock: Clock, size: int, progress: Progress) -> float:
    t = _checked(inner(itertools.repeat(None, size), clock), size)
    progress.batches += 1
    progress.runs += size
    progress.measured += t
    progress.times.append(t)
    progress.sizes.append(size)
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


def result_from(
    progress: Progress,
    div_by_number: bool = True,
    context_size: int = 0,
    max_time: float | None = None,
) -> TimingResult:
    """The result of the batches timed so far: at the end of :func:`measure`, or after
    a run stopped midway (a signal) when at least one batch was timed.

    :param progress: the counters the run filled
    :param div_by_number: statistics per execution (True) or per batch (False)
    :param context_size: ``sys.getsizeof(context)``
    :param max_time: the budget of the run, None for a fixed ``repeat x number``
    :return: the result
    :raises ValueError: no batch was timed
    """
    if not progress.times:
        raise ValueError("no batch was timed")
    kept: Sequence[float] = progress.times
    sizes: Sequence[int] = progress.sizes
    if max_time is not None:
        kept, sizes = _keep_long_batches(progress.times, progress.sizes, max_time)
    return TimingResult(
        times=tuple(float(t) for t in kept),
        sizes=tuple(sizes),
        div_by_number=div_by_number,
        ttime=float(math.fsum(progress.times)),
        batches=len(progress.times),
        runs=sum(progress.sizes),
        warmup_time=progress.warmup_time,
        context_size=context_size,
        max_time=max_time,
    )


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
    progress: Progress | None = None,
) -> TimingResult:
    """Times ``stmt``; see ``measure_time`` for the parameters.

    :param setup: code run before each batch, outside the timed region
    :param keep_gc: leave the garbage collector enabled while timing
    :param clock: returns seconds, ``time.perf_counter`` by default
    :param progress: counters updated after each batch (for a live status, or to
        report what was measured when the run is stopped midway)
    :return: the result
    :raises ClockError: the clock went backwards, returned NaN or did not advance
    """
    validate(
        stmt,
        repeat,
        number,
        warmup,
        div_by_number,
        max_time,
        context=context,
        setup=setup,
        clock=clock,
    )
    # Plain Python numbers from here on (numpy integers are accepted on input).
    repeat, number, warmup = operator.index(repeat), operator.index(number), operator.index(warmup)
    inner = build_timer(stmt, context, setup)
    clock = perf_counter if clock is None else clock
    _check_clock(clock)
    progress = Progress() if progress is None else progress
    with _GcOff(keep_gc):
        if warmup:
            progress.warmup_time = _checked(inner(itertools.repeat(None, warmup), clock), warmup)
        if max_time is None:
            _run_fixed(inner, clock, repeat, number, progress)
        else:
            _run_budget(inner, clock, float(max_time), progress)
    return result_from(
        progress,
        div_by_number,
        sys.getsizeof({} if context is None else context),
        None if max_time is None else float(max_time),
    )


def autorange(
    stmt: str | Callable[[], Any],
    context: Mapping[str, Any] | None = None,
    *,
    setup: str | None = None,
    keep_gc: bool = False,
    clock: Clock | None = None,
    seconds: float = AUTORANGE_SECONDS,
) -> int:
    """The executions per batch that make a batch last at least ``seconds``, found as
    :meth:`timeit.Timer.autorange` does: 1, 2, 5, 10, 20, 50... executions until one
    batch is long enough.

    :param seconds: the least duration of a batch
    :return: the batch size
    :raises ClockError: the clock went backwards, returned NaN or did not advance
    """
    validate(stmt, 1, 1, 0, True, None, context=context, setup=setup, clock=clock)
    inner = build_timer(stmt, context, setup)
    clock = perf_counter if clock is None else clock
    _check_clock(clock)
    still = 0
    with _GcOff(keep_gc):
        for size in (f * 10**e for e in itertools.count() for f in (1, 2, 5)):
            t = _checked(inner(itertools.repeat(None, size), clock), size)
            if t >= seconds:
                return size
            still = still + 1 if t == 0 else 0
            # Three sizes per tenfold growth: stop at 10**7 executions, as with a budget.
            if still >= 3 * _MAX_STILL_BATCHES - 2:
                raise _still_error(still, size)
    raise AssertionError("unreachable: itertools.count() never ends")


def _interleaved_round(
    inners: list[Inner], clock: Clock, number: int, order: list[int]
) -> list[float]:
    """One batch of each statement in ``order``; seconds by statement index."""
    times = [0.0] * len(inners)
    for i in order:
        times[i] = _checked(inners[i](itertools.repeat(None, number), clock), number)
    order.reverse()  # the next round runs them the other way round
    return times


def _calibrate_interleaved(
    inners: list[Inner], clock: Clock, target: float, order: list[int]
) -> tuple[int, float]:
    """Grows the batch size (at most tenfold a round) until the slowest statement's batch
    lasts about ``target``; returns the size and the seconds the rounds measured."""
    number, spent, still = 1, 0.0, 0
    while True:
        times = _interleaved_round(inners, clock, number, order)
        spent += sum(times)
        slowest = max(times)
        if slowest >= target * 0.8:
            return number, spent
        still = still + 1 if slowest == 0 else 0
        if still >= _MAX_STILL_BATCHES:
            raise _still_error(still, number)
        growth = _MAX_GROWTH if slowest == 0 else min(_MAX_GROWTH, target / slowest)
        number = max(number + 1, math.ceil(number * growth))


@dataclass
class Interleaved:
    """What :func:`measure_interleaved` timed so far, kept by the caller when the run is
    stopped midway (a signal).

    :param samples: seconds per execution, one list per statement
    :param number: executions per batch (calibrated with ``max_time``)
    :param measured: seconds measured, all statements, calibration included
    """

    samples: list[list[float]]
    number: int = 0
    measured: float = 0.0


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
    into: Interleaved | None = None,
) -> list[list[float]]:
    """Times several statements batch by batch in turn, so that a drift of the machine
    (frequency, another process) weighs on all of them alike; the order alternates.

    With ``max_time``, ``repeat`` and ``number`` are ignored: the batch size grows until
    the slowest statement's batch lasts about ``max_time / (2 * 500)`` seconds (at most
    0.2 s), then rounds of one batch of each statement run until the seconds measured,
    calibration included, reach ``max_time``, and at least 5 rounds.

    :param into: filled batch by batch (its samples lists are replaced), for a caller
        that reports what was measured when the run is stopped midway
    :return: seconds per execution, one list of samples per statement
    :raises ClockError: the clock went backwards, returned NaN or did not advance
        during a batch (a sample of 0 s cannot be compared)
    """
    for stmt in stmts:
        validate(
            stmt, repeat, number, warmup, True, max_time, context=context, setup=setup, clock=clock
        )
    inners = [build_timer(stmt, context, setup) for stmt in stmts]
    clock = perf_counter if clock is None else clock
    _check_clock(clock)
    state = Interleaved([]) if into is None else into
    samples: list[list[float]] = [[] for _ in inners]
    state.samples = samples
    order = list(range(len(inners)))
    rounds = repeat
    with _GcOff(keep_gc):
        if warmup:
            for i in order:
                _checked(inners[i](itertools.repeat(None, warmup), clock), warmup)
        if max_time is not None:
            target = min(max_time / (len(inners) * _COMPARE_BATCHES), _MAX_BATCH_SECONDS)
            number, state.measured = _calibrate_interleaved(inners, clock, target, order)
            rounds = _COMPARE_MIN_BATCHES
        state.number = number
        done = 0
        while done < rounds or (max_time is not None and state.measured < max_time):
            times = _interleaved_round(inners, clock, number, order)
            if min(times) == 0:
                raise _still_error(1, number)
            for i, t in enumerate(times):
                samples[i].append(t / number)
            state.measured += sum(times)
            done += 1
    return samples
