"""compare(): its cost in ``repeat`` and its power within a time budget, in one run.

Run: ``python benchmarks/bench_compare_power.py [--trials 20]``. It prints the floors of
issue 11:

1. cost: ``compare(a, b, repeat=N, number=1)`` for N up to 10,000 (target <= 2 s and
   <= 50 MB more memory at 10,000), next to the former Hodges-Lehmann (every pairwise
   ratio, sorted: quadratic), reconstructed here as the anchor;
2. power: over ``--trials`` trials at ``max_time`` 0.5 s and 1 s, how often a 2 % and a
   1 % difference are detected (``sum`` over 2,000 vs 2,040 and 2,020 ints: significant
   and in the right direction) and how often two equal statements are called different
   (targets: 2 % detected in >= 95 % of trials at 1 s, equal called different <= 10 %).

The machine is noisy and shared: the trials interleave the cases, and the load average
is printed with the figures.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from onnxrt_backend_dev.monitoring._timing import stats as _stats
from onnxrt_backend_dev.monitoring.benchmark import compare, format_comparison


def _old_hodges_lehmann(
    a: list[float], b: list[float], confidence: float
) -> tuple[float, float, float]:
    """The former implementation: every pairwise difference, sorted (O(n m))."""
    diffs = sorted(math.log(x) - math.log(y) for x in a for y in b)
    m = len(diffs)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)
    k = math.floor(m / 2.0 - z * math.sqrt(len(a) * len(b) * (len(a) + len(b) + 1) / 12.0))
    k = min(max(k, 0), (m - 1) // 2)
    return math.exp(statistics.median(diffs)), math.exp(diffs[k]), math.exp(diffs[m - 1 - k])


def _cost(fn: Callable[[], Any]) -> tuple[float, float]:
    """Seconds of one call (without tracing), then its traced peak in MB (another call)."""
    begin = time.perf_counter()
    fn()
    seconds = time.perf_counter() - begin
    tracemalloc.start()
    try:
        fn()
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    return seconds, peak


def bench_cost() -> None:
    print("== 1. cost of compare() in repeat (target at 10,000: <= 2 s, <= 50 MB)")
    data = list(range(300))
    ctx = {"data": data}
    for n in (1000, 3000, 10_000):
        for stmt in ("pass", "sum(data)"):
            seconds, peak = _cost(functools.partial(compare, stmt, stmt, ctx, repeat=n, number=1))
            print(
                f"  compare({stmt!r}, {stmt!r}, repeat={n:>6,}, number=1): "
                f"{seconds:6.2f} s  peak {peak:6.1f} MB"
            )
    # The statistics alone, on continuous samples, against the former quadratic one.
    import random

    rng = random.Random(0)
    for n in (1000, 3000, 10_000):
        a = [rng.uniform(1.0, 1.1) for _ in range(n)]
        b = [rng.uniform(1.0, 1.1) for _ in range(n)]
        new_s, new_mb = _cost(functools.partial(_stats.hodges_lehmann_ratio, a, b, 0.95))
        line = f"  Hodges-Lehmann n={n:>6,}: selection {new_s:6.2f} s {new_mb:6.1f} MB"
        if n <= 3000:
            old_s, old_mb = _cost(functools.partial(_old_hodges_lehmann, a, b, 0.95))
            same = _old_hodges_lehmann(a, b, 0.95) == _stats.hodges_lehmann_ratio(a, b, 0.95)
            line += (
                f" | all pairs sorted {old_s:6.2f} s {old_mb:6.1f} MB"
                f" | time ratio {old_s / new_s:5.1f}x, same result: {same}"
            )
        print(line)


CASES = {
    "2 %": ("sum(big)", "sum(small)", 1),
    "1 %": ("sum(mid)", "sum(small)", 1),
    "equal": ("sum(small)", "sum(small)", 0),
}


def bench_power(trials: int) -> None:
    if trials <= 0:
        return
    print(f"== 2. power of compare(max_time=...) over {trials} trials")
    ctx = {"small": list(range(2000)), "mid": list(range(2020)), "big": list(range(2040))}
    budgets = (0.5, 1.0)
    hits: dict[tuple[str, float], list[bool]] = {(c, t): [] for c in CASES for t in budgets}
    ratios: dict[tuple[str, float], list[float]] = {(c, t): [] for c in CASES for t in budgets}
    walls: list[float] = []
    last = ""
    for trial in range(trials):
        names = list(CASES) if trial % 2 == 0 else list(reversed(CASES))
        for budget in budgets:
            for case in names:
                baseline, candidate, direction = CASES[case]
                begin = time.perf_counter()
                cmp = compare(baseline, candidate, ctx, max_time=budget)
                walls.append((time.perf_counter() - begin) / budget)
                # A difference counts when found in the right direction.
                hit = cmp.significant and (cmp.speedup > 1 or not direction)
                hits[case, budget].append(hit)
                ratios[case, budget].append(cmp.speedup)
                last = format_comparison(cmp, (baseline, candidate))
    for case in CASES:
        for budget in budgets:
            h = hits[case, budget]
            word = "called different" if case == "equal" else "detected"
            print(
                f"  {case:>5s} at {budget:.1f} s: {word} in {sum(h):2d}/{len(h)} trials "
                f"({sum(h) / len(h):4.0%}); "
                f"median speedup {statistics.median(ratios[case, budget]):.4f}"
            )
    print(f"  wall / max_time: median {statistics.median(walls):.2f}, max {max(walls):.2f}")
    print(f"  last line: {last}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--skip-cost", action="store_true")
    args = parser.parse_args()
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# bench_compare_power  python {platform.python_version()}  {platform.machine()}  "
        f"{os.cpu_count()} cpus  {now}  load {load:.2f}"
    )
    begin = time.perf_counter()
    if not args.skip_cost:
        bench_cost()
    bench_power(args.trials)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# total {time.perf_counter() - begin:.0f} s, load {load:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
