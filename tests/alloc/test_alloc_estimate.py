"""The estimator on synthetic allocation streams, sampled as the shim samples them (a
Poisson process over each thread's bytes, seeded): unbiased, with error bars that
cover, and the right sets (live at the peak, still live at the end, temporary)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Sequence

import pytest

from onnxrt_backend_dev.monitoring._alloc.estimate import (
    Estimator,
    half_width,
    inclusion,
    weight,
)

# An event of a stream: ("alloc", key, size, address, tid) or ("free", address, tid).
Event = tuple


def sample_stream(
    events: Sequence[Event], mean: float, rng: random.Random, final_from: int | None = None
) -> Estimator:
    """Feeds an estimator what the shim would record of ``events``: the sampled
    allocations (exponential gaps of ``mean`` bytes per thread, as shim.c draws them),
    the frees of the sampled ones, and the exact live total at every new peak.

    :param final_from: events from this index on happen during finalization
    """
    est = Estimator(mean)
    countdown: dict[int, float] = {}
    nallocs: dict[int, int] = {}
    sizes: dict[int, int] = {}
    sampled: set[int] = set()
    live = peak = 0
    for i, event in enumerate(events):
        final = final_from is not None and i >= final_from
        seq = 2 * i  # the shim's order: a peak record comes after the allocation
        if event[0] == "alloc":
            _, key, size, address, tid = event
            nallocs[tid] = nallocs.get(tid, 0) + 1
            left = countdown.get(tid)
            if left is None:
                left = rng.expovariate(1.0 / mean)
            left -= size
            if left <= 0:
                left = rng.expovariate(1.0 / mean)
                sampled.add(address)
                est.alloc(seq, seq, key, size, address, tid, nallocs[tid], final)
            countdown[tid] = left
            sizes[address] = size
            live += size
            if live > peak:
                peak = live
                est.peak(seq + 1, seq, live)
        else:
            _, address, tid = event
            live -= sizes.pop(address)
            if address in sampled:
                sampled.discard(address)
                est.free(seq, seq, address, tid, nallocs.get(tid, 0), final)
    return est


def _stream(rng: random.Random) -> tuple[list[Event], dict[int, float]]:
    """Three sites: many small allocations (A), fewer medium ones (B), one big (C); half
    of A and all of B freed before the peak, which the big one makes. Returns the events
    and the truth of what is live at the peak, per site."""
    events: list[Event] = []
    address = 0x1000
    a_live, b_live = [], []
    for _ in range(3000):
        size = rng.randrange(200, 2000)
        events.append(("alloc", (1, -1), size, address, 1))
        a_live.append((address, size))
        address += 4096
    for _ in range(40):
        events.append(("alloc", (2, -1), 150_000, address, 2))
        b_live.append((address, 150_000))
        address += 1 << 20
    for addr, _ in a_live[::2]:
        events.append(("free", addr, 1))
    for addr, _ in b_live:
        events.append(("free", addr, 2))
    events.append(("alloc", (3, -1), 64 << 20, address, 1))
    truth = {1: float(sum(s for _, s in a_live[1::2])), 2: 0.0, 3: float(64 << 20)}
    return events, truth


def test_inclusion_and_weight_follow_the_poisson_sampling() -> None:
    assert inclusion(1000, 1000) == pytest.approx(1 - math.exp(-1))
    assert inclusion(0, 1000) == 0.0
    assert inclusion(123, 1) == 1.0  # every allocation recorded
    w, var = weight(1000, 1000)
    assert w == pytest.approx(1000 / (1 - math.exp(-1)))
    assert var == pytest.approx(1000**2 * math.exp(-1) / (1 - math.exp(-1)) ** 2)
    # A big allocation is always sampled and counts exactly its size.
    assert weight(100 << 20, 256 << 10) == (pytest.approx(100 << 20), pytest.approx(0.0))
    assert half_width(4.0) == pytest.approx(1.96 * 2, rel=1e-3)


def test_the_live_at_the_peak_estimates_are_unbiased_and_their_error_bars_cover() -> None:
    # GIVEN 200 seeded replications of one stream, sampled 1 per 16 KiB
    rng = random.Random(1234)
    events, truth = _stream(random.Random(7))
    mean = 16 * 1024
    estimates: dict[int, list[float]] = {1: [], 2: [], 3: []}
    covered = dict.fromkeys(estimates, 0)
    runs = 200
    for _ in range(runs):
        sites = {s.key[0]: s for s in sample_stream(events, mean, rng).estimates().sites}
        for key in estimates:
            site = sites.get(key)
            value = site.live_peak if site is not None else 0.0
            err = half_width(site.live_peak_var) if site is not None else 0.0
            estimates[key].append(value)
            covered[key] += abs(value - truth[key]) <= err
    # THEN each site's mean estimate is within 3 standard errors of the truth
    for key, values in estimates.items():
        se = statistics.pstdev(values) / math.sqrt(runs)
        assert abs(statistics.fmean(values) - truth[key]) <= 3 * se + 1e-6 * truth[key], key
    # and the 95 % error bars cover the truth about 95 % of the time (exact when exact)
    assert 0.88 <= covered[1] / runs <= 0.995
    assert covered[2] == runs and covered[3] == runs
    assert estimates[3] == [float(64 << 20)] * runs  # the big one: always, exactly


def test_allocated_bytes_and_counts_are_unbiased() -> None:
    rng = random.Random(99)
    events: list[Event] = [("alloc", (1, 0), 300, 0x10 * i, 1) for i in range(20_000)]
    events += [("free", 0x10 * i, 1) for i in range(20_000)]
    mean = 64 * 1024
    allocated, counts = [], []
    for _ in range(100):
        (site,) = sample_stream(events, mean, rng).estimates().sites
        allocated.append(site.allocated)
        counts.append(site.count)
    se = statistics.pstdev(allocated) / 10
    assert abs(statistics.fmean(allocated) - 6_000_000) <= 3 * se
    assert abs(statistics.fmean(counts) - 20_000) <= 3 * statistics.pstdev(counts) / 10


def _every(events: Iterable[Event]) -> Estimator:
    """Every allocation recorded (mean 1): the figures are exact."""
    return sample_stream(list(events), 1.0, random.Random(0))


def test_the_peak_is_the_highest_exact_total_and_a_later_lower_one_does_not_move_it() -> None:
    # GIVEN A (100) and B (50), then B freed and C (120) allocated: 220, a new peak; then
    # C freed and D (10) allocated: 110, lower
    est = _every(
        [
            ("alloc", (1, 0), 100, 0xA, 1),
            ("alloc", (2, 0), 50, 0xB, 1),
            ("free", 0xB, 1),
            ("alloc", (3, 0), 120, 0xC, 1),
            ("free", 0xC, 1),
            ("alloc", (4, 0), 10, 0xD, 1),  # 110: lower than 220, not a peak
        ]
    )
    result = est.estimates()
    live = {s.key[0]: s.live_peak for s in result.sites}
    assert result.peak == 220
    assert live == {1: 100, 2: 0, 3: 120, 4: 0}


def test_what_was_live_at_the_peak_and_freed_after_it_is_still_counted_at_the_peak() -> None:
    est = _every(
        [
            ("alloc", (1, 0), 100, 0xA, 1),
            ("alloc", (2, 0), 200, 0xB, 1),  # the peak: 300
            ("free", 0xB, 1),
            ("free", 0xA, 1),
            ("alloc", (3, 0), 50, 0xC, 1),
        ]
    )
    live = {s.key[0]: s.live_peak for s in est.estimates().sites}
    assert live == {1: 100, 2: 200, 3: 0}


def test_still_live_at_the_end_counts_what_only_finalization_frees() -> None:
    events: list[Event] = [
        ("alloc", (1, 0), 100, 0xA, 1),  # freed by the program: not live at the end
        ("alloc", (2, 0), 200, 0xB, 1),  # freed at finalization: live at the end
        ("alloc", (3, 0), 300, 0xC, 1),  # never freed
        ("free", 0xA, 1),
        ("free", 0xB, 1),
        ("alloc", (4, 0), 400, 0xD, 1),  # allocated by the finalization itself: left out
    ]
    est = sample_stream(events, 1.0, random.Random(0), final_from=4)
    end = {s.key[0]: s.live_end for s in est.estimates().sites}
    assert end == {1: 0, 2: 200, 3: 300, 4: 0}


def test_temporary_allocations_follow_memrays_threshold() -> None:
    # A freed at once (0 allocations between), B after one other (C), D after two: with
    # threshold 1 A and B are temporary; a free from another thread is not.
    events: list[Event] = [
        ("alloc", (1, 0), 100, 0xA, 1),
        ("free", 0xA, 1),
        ("alloc", (2, 0), 100, 0xB, 1),
        ("alloc", (3, 0), 100, 0xC, 1),
        ("free", 0xB, 1),
        ("alloc", (4, 0), 100, 0xD, 1),
        ("alloc", (5, 0), 100, 0xE, 1),
        ("alloc", (6, 0), 100, 0xF, 1),
        ("free", 0xD, 1),
        ("alloc", (7, 0), 100, 0x10, 1),
        ("free", 0x10, 2),
    ]
    sites = {s.key[0]: s for s in _every(events).estimates().sites}
    assert {k for k, s in sites.items() if s.temporary} == {1, 2}
    assert sites[1].temporary_count == 1


def test_a_free_of_an_unknown_address_is_counted_and_a_reused_address_ends_the_old() -> None:
    est = Estimator(1.0)
    est.free(0, 0.0, 0x99)
    est.alloc(1, 0.0, (1, 0), 100, 0xA)
    est.alloc(2, 0.0, (2, 0), 50, 0xA)  # its free was lost: the first ends there
    est.peak(3, 0.0, 150)
    result = est.estimates()
    assert result.unmatched == 1
    assert {s.key[0]: s.live_peak for s in result.sites} == {1: 0, 2: 50}


def test_the_estimators_memory_holds_only_what_can_still_be_at_the_peak() -> None:
    # GIVEN a long stream of allocations freed at once, after an early peak
    est = Estimator(1.0)
    est.alloc(0, 0.0, (1, 0), 10_000, 0x1)
    est.peak(1, 0.0, 10_000)
    for i in range(2, 20_000, 2):
        est.alloc(i, 0.0, (2, 0), 10, 0x100 + i)
        est.free(i + 1, 0.0, 0x100 + i)
    # THEN nothing of them is kept, beyond the running sums
    assert len(est.live) == 1 and not est.at_peak_freed
    (site,) = [s for s in est.estimates().sites if s.key[0] == 2]
    assert site.allocated == 10 * 9999


def test_a_bad_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="threshold must be >= 0, got -1"):
        Estimator(1.0, threshold=-1)
