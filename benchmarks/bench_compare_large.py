"""compare of two saved 20,000-function profiles: seconds from the files to the rendered
comparison (the command in process: loading, checking, testing, rendering).

Run: ``python benchmarks/bench_compare_large.py [--runs 7]``. The profiles come from the
synthetic generator of ``bench_profiling.py`` (20,000 functions, 11 callers each); a
result holds one run (what ``profile --save`` writes) or 20 runs, each run's own times
drawn around the generator's (lognormal, 10 %). Floor (issue 19): <= 2 s for two
20,000-function profiles. ``--min-share 0`` tests every function (the worst case:
20,000 Mann-Whitney tests and Hodges-Lehmann intervals); the default tests those above
0.1 % of the run. Minimum and median of ``--runs`` repetitions, cases interleaved, and
the minimum CPU time of the process (on a shared machine the wall time also holds the
time other processes took).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_profiling import synthetic_stats

from onnxrt_backend_dev.monitoring._cli.dispatch import main as cli
from onnxrt_backend_dev.monitoring._results import payloads, store

FLOOR = 2.0


def _runs(stats: dict[Any, Any], runs: int, slow: float, seed: int) -> list[tuple[Any, float]]:
    rng = random.Random(seed)
    out = []
    for _ in range(runs):
        run = {}
        for i, (key, (cc, nc, tt, ct, callers)) in enumerate(stats.items()):
            factor = rng.lognormvariate(0, 0.1) * (slow if i == 7 else 1.0)
            run[key] = (cc, nc, tt * factor, ct * factor, callers)
        out.append((run, sum(v[2] for v in run.values())))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"## bench_compare_large ({stamp}, 2-core shared VM, Python {platform.python_version()})")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    stats = synthetic_stats(20_000)
    env = {"python": platform.python_version()}
    with tempfile.TemporaryDirectory() as folder:
        files = {}
        for runs in (1, 20):
            for side, slow in (("a", 1.0), ("b", 1.5)):
                data = payloads.profile_data(_runs(stats, runs, slow, seed=hash(side) % 1000))
                path = os.path.join(folder, f"{side}{runs}.json")
                store.save_result(path, store.make_result("profile", data, ["bench"], env))
                files[(side, runs)] = path
        cases = [
            (f"{runs} run(s) a side, {fmt}{extra}", [files[("a", runs)], files[("b", runs)],
             "--format", fmt, "-o", os.devnull, "-q", *options])
            for runs in (1, 20)
            for fmt in ("text", "json", "html")
            for extra, options in (("", []), (", --min-share 0", ["--min-share", "0"]))
            if not (runs == 1 and extra)
        ]  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name, _ in cases}
        cpu: dict[str, list[float]] = {name: [] for name, _ in cases}
        for _ in range(args.runs):
            for name, argv in cases:
                begin, begin_cpu = time.perf_counter(), time.process_time()
                code = cli(["compare", *argv])
                times[name].append(time.perf_counter() - begin)
                cpu[name].append(time.process_time() - begin_cpu)
                assert code in (0, 1, 3), (name, code)
        mb = {runs: os.path.getsize(files[("a", runs)]) / 1e6 for runs in (1, 20)}
        print(f"- file sizes: {mb[1]:.1f} MB (1 run), {mb[20]:.1f} MB (20 runs)")
        for name, _ in cases:
            best, med = min(times[name]), statistics.median(times[name])
            verdict = "met" if best <= FLOOR else "NOT met"
            print(
                f"- {name}: min {best:.3f} s, median {med:.3f} s (floor {FLOOR} s: {verdict}); "
                f"CPU time min {min(cpu[name]):.3f} s (the load's share removed)"
            )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
