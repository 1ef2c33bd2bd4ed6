"""The online folding of ticks: the columns' sums, the peak's moment and builder."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from onnxrt_backend_dev.monitoring._sampling.aggregate import NO_STACK, Aggregator
from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame

MIB = 2**20


def _feed(agg: Aggregator, ticks: Sequence[tuple[float, float, float, int]]) -> None:
    for sid in {t[3] for t in ticks}:
        agg.add_stack(sid, (SampledFrame(f"f{sid}", "user.py", 1, sid + 1),))
    for t in ticks:
        agg.add_tick(*t)


def test_net_growth_adds_up_to_last_minus_first_and_to_peak_to_peak_minus_start() -> None:
    # GIVEN ticks rising in stack 1, a peak in stack 2, a fall in stack 3
    agg = Aggregator()
    _feed(
        agg,
        [
            (0.0, 10 * MIB, 10 * MIB, 0),
            (0.1, 50 * MIB, 50 * MIB, 1),
            (0.2, 120 * MIB, 120 * MIB, 2),
            (0.3, 30 * MIB, 120 * MIB, 3),
            (0.4, 40 * MIB, 120 * MIB, 1),
        ],
    )
    # THEN net growth sums to last - first, the composition to peak - start
    assert sum(agg.net.values()) == pytest.approx(30 * MIB)
    parts = agg.composition()
    assert sum(parts.values()) == pytest.approx(agg.peak - agg.first_rss) == 110 * MIB
    assert parts == {0: 0.0, 1: 40 * MIB, 2: 70 * MIB}
    # AND the peak is dated at the tick that saw it, in stack 2
    assert (agg.peak_t, agg.peak_sid, agg.peak) == (0.2, 2, 120 * MIB)


def test_a_peak_shorter_than_a_tick_is_credited_to_the_stack_that_saw_the_mark_rise() -> None:
    # GIVEN a spike of 600 MiB between two ticks: the RSS is back down, the mark rose
    agg = Aggregator()
    _feed(
        agg,
        [
            (0.0, 20 * MIB, 20 * MIB, 0),
            (0.1, 25 * MIB, 620 * MIB, 7),  # make_peak built and freed it
            (0.2, 25 * MIB, 620 * MIB, 0),
        ],
    )
    # THEN the peak is exact and stack 7 holds the whole excess
    assert agg.peak == 620 * MIB and agg.peak_sid == 7
    parts = agg.composition()
    assert parts[7] == pytest.approx(600 * MIB)
    assert sum(parts.values()) == pytest.approx(600 * MIB)
    assert agg.highest[7] == 620 * MIB


def test_a_plateau_gaining_a_few_pages_keeps_its_first_moment() -> None:
    # GIVEN a peak reached at 0.1 s, then the mark creeping up by a few KiB
    agg = Aggregator()
    _feed(
        agg,
        [(0.0, 10 * MIB, 10 * MIB, 0), (0.1, 500 * MIB, 500 * MIB, 1)]
        + [(0.1 + i / 10, 500 * MIB, 500 * MIB + i * 4096, 2) for i in range(1, 5)],
    )
    # THEN the peak is the highest mark, dated and credited at 0.1 s, still adding up
    assert agg.peak == 500 * MIB + 4 * 4096
    assert (agg.peak_t, agg.peak_sid) == (0.1, 1)
    assert sum(agg.composition().values()) == pytest.approx(agg.peak - 10 * MIB)


def test_an_exact_peak_from_outside_raises_the_peak_and_still_adds_up() -> None:
    # GIVEN ticks, then a higher peak from wait4's ru_maxrss
    agg = Aggregator()
    _feed(agg, [(0.0, 10 * MIB, 10 * MIB, 0), (0.1, 90 * MIB, 90 * MIB, 1)])
    agg.raise_peak(100 * MIB)
    # THEN the excess goes to the stack of the dated peak
    assert agg.peak == 100 * MIB
    assert agg.composition()[1] == pytest.approx(90 * MIB)


def test_the_last_rise_names_the_stack_allocating_at_the_end() -> None:
    # GIVEN a growth in stack 3, then small noise in stack 4
    agg = Aggregator()
    _feed(
        agg,
        [(0.0, 10 * MIB, 10 * MIB, 0), (0.1, 30 * MIB, 30 * MIB, 3), (0.2, 30 * MIB + 4096, 0, 4)],
    )
    # THEN stack 3 was the last to allocate
    assert agg.last_rise_sid == 3 and agg.last_sid == 4


def test_the_timeline_stays_bounded_and_the_time_per_stack_is_exact() -> None:
    # GIVEN 1000 ticks 10 ms apart in a bound of 64 points
    agg = Aggregator(max_points=64)
    agg.add_stack(0, ())
    for i in range(1000):
        agg.add_tick(i / 100, float(i), float(i), 0 if i < 500 else NO_STACK)
    # THEN the timeline is bounded, the per-stack seconds are not decimated
    assert len(agg.times) < 64 and agg.stride > 1
    assert agg.seconds[0] + agg.seconds[NO_STACK] == pytest.approx(9.99)
    assert agg.n == 1000


def test_max_points_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="max_points must be >= 2, got 1"):
        Aggregator(max_points=1)


def test_a_tick_that_knows_its_own_highest_memory_dates_a_peak_between_ticks() -> None:
    # GIVEN the spy's ticks (its high-water mark reset at each: the mark of the process
    # never rises past the first), one interval of which held a 100 MiB spike
    agg = Aggregator()
    agg.add_tick(0.0, 10 * MIB, 10 * MIB, NO_STACK)
    agg.add_tick(1.0, 20 * MIB, 20 * MIB, 0, high=20 * MIB)
    agg.add_tick(2.0, 20 * MIB, 20 * MIB, 1, high=100 * MIB)
    agg.add_tick(3.0, 25 * MIB, 20 * MIB, 0, high=25 * MIB)
    # THEN the spike is the peak, dated in its interval's stack, which built it
    assert (agg.peak, agg.peak_sid, agg.peak_t) == (100 * MIB, 1, 2.0)
    assert agg.composition() == {NO_STACK: 0.0, 0: 10 * MIB, 1: 80 * MIB}
    # AND the highest memory of each stack is its intervals' highest
    assert (agg.highest[0], agg.highest[1]) == (25 * MIB, 100 * MIB)


def test_a_mark_reached_before_an_attach_is_its_past_not_a_peak_of_the_observation() -> None:
    # GIVEN a process attached to after it peaked at 200 MiB, then flat at 10 MiB
    agg = Aggregator(attached=True)
    _feed(agg, [(0.0, 10 * MIB, 200 * MIB, 1), (0.1, 10 * MIB, 200 * MIB, 2)])
    # THEN that mark is kept apart, and nothing is credited with it
    assert agg.before == 200 * MIB and agg.peak == 10 * MIB
    assert sum(agg.composition().values()) == 0
    # AND a mark rising past it while observed is a peak of the observation
    agg.add_tick(0.2, 20 * MIB, 230 * MIB, 2)
    assert agg.peak == 230 * MIB and agg.peak_sid == 2
