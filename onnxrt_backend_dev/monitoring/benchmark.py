"""Measuring computing time: :func:`measure_time` and :func:`compare`.

The machinery lives in :mod:`onnxrt_backend_dev.monitoring._timing`; this module is its
public face. It imports nothing beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._timing.loop import (
    Clock,
    ClockError,
    CompareProgress,
    Progress,
    measure,
    measure_interleaved,
)
from ._timing.stats import (
    Comparison,
    check_arguments,
    compare_results,
    compare_samples,
    format_comparison,
)

__all__ = [
    "ClockError",
    "CompareProgress",
    "Comparison",
    "Progress",
    "compare",
    "format_comparison",
    "measure_time",
]


def measure_time(
    stmt: str | Callable[[], Any],
    context: dict[str, Any] | None = None,
    repeat: int = 10,
    number: int = 50,
    warmup: int = 1,
    div_by_number: bool = True,
    max_time: float | None = None,
    keep_gc: bool = False,
    setup: str | None = None,
    clock: Clock | None = None,
    calibrate: bool = False,
    progress: Progress | None = None,
    counter: str | None = None,
) -> dict[str, Any]:
    """Measures a statement and returns the results as a dictionary.

    The statement runs in batches of ``number`` executions, ``repeat`` times, after
    ``warmup`` executions that are timed apart. A str statement is compiled into the
    timing loop itself, as :mod:`timeit` does, so nothing but the statement and the loop
    is timed; a callable is called from that loop.

    :param stmt: string or callable; a string is compiled with a copy of ``context`` as
        its globals (``context`` itself is never modified)
    :param context: variable to know in a dictionary (globals of a str statement;
        unused by a callable)
    :param repeat: average over repeat experiment (number of batches)
    :param number: number of executions in one row (one batch)
    :param warmup: number of iteration to do before starting the real measurement
    :param div_by_number: divide by the number of executions: the statistics describe
        one execution (True) or one batch of ``number`` executions (False)
    :param max_time: execute the statement until the measured total goes beyond this
        time in seconds, ``repeat`` and ``number`` ignored: batches of about ``max_time
        / 50`` seconds (at most 0.2 s), the last ones shrinking so that the total ends
        just past it; ``div_by_number`` must be True; the budget bounds the timed
        batches, never the warmup nor one execution (a 2 s statement with
        ``max_time=1`` takes 4 s, 2 s with ``warmup=0``)
    :param keep_gc: keep the garbage collector enabled while timing (it is disabled by
        default, as :mod:`timeit` does, and restored afterwards)
    :param setup: code run before each batch, outside the timed region, whose names are
        local to the timing loop (as ``timeit -s``); a str only
    :param clock: returns seconds, :func:`time.perf_counter` (wall time) by default;
        :func:`time.process_time` for the process's CPU time (``time --clock cpu``)
    :param calibrate: ``number`` is ignored and picked after the warmup as
        :meth:`timeit.Timer.autorange` does (1, 2, 5, 10... executions until a batch
        lasts at least 0.2 s; those trials not counted); not with ``max_time``
    :param progress: a :class:`Progress` filled batch by batch: a live status reads its
        ``runs``, and when the run is stopped midway (Ctrl-C, a signal) its
        ``result()`` is this dictionary for the batches timed so far
    :param counter: ``"instructions"`` counts one execution's instructions under valgrind
        in fresh interpreters instead of timing it (docs: "Gating CI on performance"): a
        str with ``setup`` and a picklable ``context``, or an importable function;
        ``repeat``, ``number`` unused, ``max_time``, ``clock``, ``calibrate``,
        ``progress`` refused; the same keys in instructions per execution, plus
        ``counter``, ``noise``, ``counts``, ``unseen``
    :return: a dictionary of plain ints and floats, seconds for durations (annotated
        ``dict[str, Any]`` so that code written against the reference's
        ``Dict[str, str | int | float]`` and code doing arithmetic both type-check):

        * ``average``, ``deviation`` (population standard deviation, never NaN),
          ``min_exec``, ``max_exec``: over the batches, per execution if
          ``div_by_number`` else per batch
        * ``repeat``: number of batches the statistics describe; ``number``:
          executions per batch (with ``max_time``, their rounded mean size)
        * ``ttime``: ``average * repeat``, as in the reference
        * ``total_time``: seconds measured over all timed batches, warmup excluded
          (with ``max_time``, calibration batches included: at least ``max_time``)
        * ``context_size``: ``sys.getsizeof(context)`` (of ``{}`` when None)
        * ``warmup_time``: seconds taken by the ``warmup`` executions together
        * extras: ``median``, ``iqr`` (third minus first quartile), ``mad`` (median
          absolute deviation, unscaled); ``batches`` and ``runs`` really timed (with
          ``max_time``, batches shorter than a quarter of the target count there and
          in ``total_time``, not in the statistics; past 65,536 batches the statistics
          describe an evenly spaced sample, so memory stays bounded)
    :raises TypeError: a parameter of the wrong type (the message names it; a flag must
        be a bool: ``'no'`` is refused), or a clock not returning a number
    :raises ValueError: ``repeat < 1``, ``number < 1``, ``warmup < 0``, ``max_time``
        not > 0 and finite, or ``max_time`` with ``div_by_number=False`` or
        ``calibrate=True``
    :raises SyntaxError: a str ``stmt`` or ``setup`` is not valid Python (at call time)
    :raises ClockError: (a RuntimeError) a batch measured a negative time, NaN or
        infinity, or the clock did not advance (over the ``repeat`` batches; with
        ``max_time``, over 8 growing batches in a row): no statistic is ever negative or
        NaN, and a frozen clock never makes ``max_time`` loop forever

    Any exception raised by the statement propagates unchanged.

    ::

        from pprint import pprint
        from math import cos
        from onnxrt_backend_dev.monitoring.benchmark import measure_time

        res = measure_time(lambda: cos(0.5))
        pprint(res)

    See :meth:`timeit.Timer.repeat` for a better understanding of parameters
    ``repeat`` and ``number``.

    The defaults (the reference's) run a statement 501 times: 50 s at 0.1 s each. For a
    slow one, let the batch size be found (batches of at least 0.2 s) or give a budget::

        res = measure_time(step, repeat=5, calibrate=True)  # 5 batches of >= 0.2 s
        res = measure_time(step, max_time=3.0)  # about 3 s measured
    """
    if counter is not None:  # counted by valgrind, not timed
        from ._count.statement import count_measure

        return count_measure(stmt, context, counter, warmup, div_by_number, max_time, keep_gc,
                             setup, clock, calibrate, progress, repeat * number)  # fmt: skip
    return measure(
        stmt, context, repeat, number, warmup, div_by_number, max_time, setup=setup,
        keep_gc=keep_gc, clock=clock, calibrate=calibrate, progress=progress,
    ).to_dict()  # fmt: skip


def compare(
    baseline: str | Callable[[], Any] | Mapping[str, Any],
    candidate: str | Callable[[], Any] | Mapping[str, Any],
    context: dict[str, Any] | None = None,
    repeat: int = 20,
    number: int = 50,
    warmup: int = 1,
    confidence: float = 0.95,
    alpha: float = 0.05,
    keep_gc: bool = False,
    setup: str | None = None,
    clock: Clock | None = None,
    max_time: float | None = None,
    calibrate: bool = False,
    progress: CompareProgress | None = None,
) -> Comparison:
    """Tells how much faster ``candidate`` is than ``baseline``, and whether it is
    significant, in process (what ``pyperf compare_to`` does across files).

    * Two statements (str or callable) are timed interleaved, batch by batch with the
      order alternating, so that a drift of the machine weighs on both alike: the
      Hodges-Lehmann ratio of the per-execution times and Mann-Whitney U. With
      ``max_time``, ``repeat`` and ``number`` are ignored: a batch of the slower
      statement lasts about ``max_time / 1000`` (at most 0.2 s), and batches alternate
      until ``max_time`` seconds are measured, calibration included (at least 5 each).
    * Two results of :func:`measure_time` (or loaded back from JSON) are compared on
      their ``average``, ``deviation`` and ``repeat`` with Welch's t-test.

    :param baseline: the reference: a statement or a result of :func:`measure_time`
    :param candidate: the other one, of the same kind
    :param context: globals of str statements (see :func:`measure_time`)
    :param repeat: batches per statement
    :param number: executions per batch
    :param warmup: executions of each statement before timing
    :param confidence: level of the interval of the speedup
    :param alpha: the difference is significant when the p-value is below it
    :param keep_gc: keep the garbage collector enabled while timing
    :param setup: code run before each batch, outside the timed region
    :param clock: returns seconds, :func:`time.perf_counter` by default
    :param max_time: time budget in seconds for two statements (see above)
    :param calibrate: for two statements, ``number`` is ignored: the smaller of their
        autorange sizes, so the slower statement's batch lasts at least 20 ms
    :param progress: for two statements, a :class:`CompareProgress` filled round by
        round: ``running`` tells which statement was at work when one raised,
        ``sides()`` and ``comparison()`` read what was timed when stopped midway
    :return: a :class:`Comparison` (``speedup`` above 1: the candidate is faster);
        ``format_comparison(cmp)`` reads it as one line
    :raises TypeError: the two sides are not both statements or both results, or as
        :func:`measure_time`
    :raises ValueError: as :func:`measure_time`, ``repeat < 2`` for statements, or a
        result's key missing or out of range (the message names the key)
    :raises ClockError: as :func:`measure_time`; also when a batch measured 0 s
    """
    check_arguments(baseline, candidate, confidence, alpha, repeat, max_time)  # before timing
    if isinstance(baseline, Mapping) and isinstance(candidate, Mapping):
        return compare_results(baseline, candidate, confidence, alpha)
    assert not isinstance(baseline, Mapping) and not isinstance(candidate, Mapping)
    samples = measure_interleaved(
        [baseline, candidate], context, repeat=repeat, number=number, warmup=warmup,
        setup=setup, keep_gc=keep_gc, clock=clock, max_time=max_time, calibrate=calibrate,
        into=progress,
    )  # fmt: skip
    return compare_samples(samples[0], samples[1], confidence, alpha)
