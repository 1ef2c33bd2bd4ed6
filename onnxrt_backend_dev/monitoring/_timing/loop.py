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
from dataclasses import dataclass
from time import perf_counter
from typing import Any

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


@dataclass
class Progress:
    """Counters updated after each batch, read by a live status from another thread.

    :param batches: batches timed so far
    :param runs: executions timed so far
    :param measured: seconds measured so far (the future ``ttime``)
    """

    batches: int = 0
    runs: int = 0
    measured: float = 0.0


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
) -> None:
    """Checks the arguments of ``measure_time``; messages name the parameter and value.

    :raises TypeError: a value of the wrong type (``stmt`` neither str nor callable...)
    :raises ValueError: a value out of range, or ``max_time`` without ``div_by_number``
    """
    if not isinstance(stmt, str) and not callable(stmt):
        raise TypeError(f"stmt must be a str or a callable, got {type(stmt).__name__}")
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


def _run_batch(inner: Inner, clock: Clock, size: int, progress: Progress) -> float:
    t = float(inner(itertools.repeat(None, size), clock))
    progress.batches += 1
    progress.runs += size
    progress.measured += t
    return t


def _run_budget(
    inner: Inner, clock: Clock, max_time: float, progress: Progress
) -> tuple[list[float], list[int]]:
    times: list[float] = []
    sizes: list[int] = []
    size, total = 1, 0.0
    while size > 0:
        t = _run_batch(inner, clock, size, progress)
        times.append(t)
        sizes.append(size)
        total += t
        size = plan_next_batch(size, t, total, max_time)
    return times, sizes


def _keep_long_batches(
    times: list[float], sizes: list[int], max_time: float
) -> tuple[list[float], list[int]]:
    threshold = batch_target(max_time) * _SHORT_BATCH_FRACTION
    kept = [(t, n) for t, n in zip(times, sizes, strict=True) if t >= threshold]
    if not kept:  # a tiny budget: everything is short, keep everything
        return times, sizes
    return [t for t, _ in kept], [n for _, n in kept]


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
    :param progress: counters updated after each batch (for a live status)
    :return: the result
    """
    validate(stmt, repeat, number, warmup, div_by_number, max_time)
    # Plain Python numbers from here on (numpy integers are accepted on input).
    repeat, number, warmup = operator.index(repeat), operator.index(number), operator.index(warmup)
    inner = build_timer(stmt, context, setup)
    clock = perf_counter if clock is None else clock
    progress = Progress() if progress is None else progress
    with _GcOff(keep_gc):
        warmup_time = float(inner(itertools.repeat(None, warmup), clock)) if warmup else 0.0
        if max_time is None:
            times = [_run_batch(inner, clock, number, progress) for _ in range(repeat)]
            all_sizes = [number] * repeat
            kept, sizes = times, all_sizes
        else:
            times, all_sizes = _run_budget(inner, clock, float(max_time), progress)
            kept, sizes = _keep_long_batches(times, all_sizes, float(max_time))
    return TimingResult(
        times=tuple(float(t) for t in kept),
        sizes=tuple(sizes),
        div_by_number=div_by_number,
        ttime=float(math.fsum(times)),
        batches=len(times),
        runs=sum(all_sizes),
        warmup_time=warmup_time,
        context_size=sys.getsizeof({} if context is None else context),
        max_time=None if max_time is None else float(max_time),
    )


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
) -> list[list[float]]:
    """Times several statements batch by batch in turn, so that a drift of the machine
    (frequency, another process) weighs on all of them alike; the order alternates.

    :return: seconds per execution, one list of ``repeat`` samples per statement
    """
    for stmt in stmts:
        validate(stmt, repeat, number, warmup, True, None)
    inners = [build_timer(stmt, context, setup) for stmt in stmts]
    clock = perf_counter if clock is None else clock
    samples: list[list[float]] = [[] for _ in inners]
    order = list(range(len(inners)))
    with _GcOff(keep_gc):
        if warmup:
            for inner in inners:
                inner(itertools.repeat(None, warmup), clock)
        for _ in range(repeat):
            for i in order:
                samples[i].append(float(inners[i](itertools.repeat(None, number), clock)) / number)
            order.reverse()
    return samples
