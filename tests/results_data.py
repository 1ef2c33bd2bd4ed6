"""Builders of synthetic results for the tests of ``_results``: profiles whose functions'
shares and noise are chosen, timings, memory runs; seeded, no clock."""

from __future__ import annotations

import random
from typing import Any

from onnxrt_backend_dev.monitoring._results import payloads, store

ENV = {
    "python": "3.x",
    "platform": "test",
    "cpu": "fake",
    "package_version": "0",
    "git_commit": None,
}


def profile_doc(
    runs: int,
    functions: int = 50,
    slow: dict[int, float] | None = None,
    noise: float = 0.05,
    seed: int = 0,
    file: str = "prog.py",
) -> dict[str, Any]:
    """A profile of ``functions`` functions of equal share, function ``i`` multiplied by
    ``slow[i]``; each run has a machine factor (common to all functions) and per-function
    noise of relative size ``noise``."""
    rng = random.Random(seed)
    slow = slow or {}
    stats_runs = []
    for _ in range(runs):
        machine = rng.uniform(0.8, 1.25)  # the whole run faster or slower: cancels in shares
        stats: dict[Any, Any] = {}
        for i in range(functions):
            tt = 0.001 * slow.get(i, 1.0) * machine * rng.lognormvariate(0, noise)
            stats[(file, 10 * i + 1, f"f_{i:03d}")] = (3, 3, tt, tt * 1.5, {})
        stats[("~", 0, "<method 'disable' of '_lsprof.Profiler' objects>")] = (1, 1, 0.0, 0.0, {})
        wall = sum(v[2] for v in stats.values()) * 1.1
        stats_runs.append((stats, wall))
    data = payloads.profile_data(stats_runs, main=file)
    return store.make_result("profile", data, ["profile", file], ENV)


def timing_doc(
    scale: float, batches: int = 20, seed: int = 0, name: str = "x", processes: int = 1
) -> dict[str, Any]:
    """A timing of ``batches`` batches of 100 executions around ``scale`` s each, timed
    by ``processes`` processes (as many batches each; the saved counts when above 1)."""
    rng = random.Random(seed)
    times = [100 * scale * rng.lognormvariate(0, 0.02) for _ in range(batches)]
    counts = [batches // processes] * processes if processes > 1 else None
    series = payloads.timing_series(name, times, [100] * batches, {"average": scale}, counts)
    return store.make_result("timing", payloads.timing_data([series]), ["time", name], ENV)


def memory_doc(peak: float, runs: int = 10, seed: int = 0) -> dict[str, Any]:
    """A memory result of ``runs`` runs peaking around ``peak`` bytes."""
    rng = random.Random(seed)
    runs_ = [
        {"cpu": {"peak": peak * rng.uniform(0.995, 1.005), "begin": 1e6, "end": 1e6, "mean": 2e6}}
        for _ in range(runs)
    ]
    return store.make_result("memory", payloads.memory_data(runs_), ["spy"], ENV)
