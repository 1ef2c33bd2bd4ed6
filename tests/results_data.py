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


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson count (normal approximation above 30, Knuth's product below)."""
    if mean > 30:
        return max(0, round(rng.gauss(mean, mean**0.5)))
    limit, k, p = pow(2.718281828459045, -mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def sampled_doc(
    runs: int,
    stacks: dict[tuple[str, ...], float],
    slow: dict[tuple[str, ...], float] | None = None,
    machine: float = 0.05,
    rate: float = 250.0,
    seed: int = 0,
    file: str = "prog.py",
    uniform: float = 0.0,
    lumpy: float = 0.0,
) -> dict[str, Any]:
    """A sampled profile of ``runs`` runs: each stack (function names, outermost first)
    takes ``stacks[s]`` CPU seconds a run (times ``slow[s]``), the whole run multiplied
    by a machine factor (lognormal of spread ``machine``, or uniform in ``1 ± uniform``
    when given), its samples Poisson at ``rate`` a second (the kernel's CPU timer ticks
    every 4 ms). ``lumpy``: the CPU time each sample is charged with spreads (gamma, mean
    one interval, ``lumpy`` its relative spread), as a sampler late on a busy machine
    charges the CPU time since its last sample to the stack it finds."""
    rng = random.Random(seed)
    slow = slow or {}
    names = sorted({name for stack in stacks for name in stack})
    index = {name: i for i, name in enumerate(names)}
    order = list(stacks)
    columns: list[list[int]] = [[0] * (len(order) * runs) for _ in range(3)]
    walls = []
    for r in range(runs):
        factor = (
            rng.uniform(1 - uniform, 1 + uniform) if uniform else rng.lognormvariate(0, machine)
        )
        total = 0.0
        charged: list[float] = []
        for j, stack in enumerate(order):
            mean = stacks[stack] * slow.get(stack, 1.0) * factor * rate
            k = _poisson(rng, mean)
            seconds = k / rate
            cpu = seconds
            if lumpy and k:
                shape = k / lumpy**2
                cpu = rng.gammavariate(shape, 1 / shape) * seconds
            total += seconds
            charged.append(cpu)
            columns[0][j * runs + r] = round(seconds * 1.05e9)
            columns[2][j * runs + r] = k
        # The run's CPU time is right, only its split among the stacks is lumpy.
        scale = total / sum(charged) if sum(charged) > 0 else 1.0
        for j, cpu in enumerate(charged):
            columns[1][j * runs + r] = round(cpu * scale * 1e9)
        walls.append(max(total * 1.05, 1e-3))
    data = {
        "profiler": "sampled",
        "timer": "cpu",
        "sampler": "prof",
        "interval": 0.001,
        "unit": "ns",
        "functions": [[file, 10 * i + 1, name] for name, i in index.items()],
        "stacks": [[index[name] for name in stack] for stack in order],
        "wall": walls,
        "stack_figures": dict(zip(("wall", "cpu", "samples"), columns, strict=True)),
        "main": file,
    }
    return store.make_result("profile", data, ["profile", file], ENV)


def shared_callee_stacks(callers: int = 20, each: float = 0.1) -> dict[tuple[str, ...], float]:
    """``main`` calls ``f00``..``f19``, each calls ``spin`` (``each`` seconds a run)."""
    stacks: dict[tuple[str, ...], float] = {("<module>", "main"): 0.002}
    for k in range(callers):
        stacks[("<module>", "main", f"f{k:02d}", "spin")] = each
        stacks[("<module>", "main", f"f{k:02d}")] = each * 0.02
    return stacks


def six_stacks() -> dict[tuple[str, ...], float]:
    """``main`` calls six functions in a loop, ``c`` about 40 % of the run (0.5 s)."""
    stacks: dict[tuple[str, ...], float] = {("<module>", "main"): 0.01}
    for name in "abdef":
        stacks[("<module>", "main", name)] = 0.06
    stacks[("<module>", "main", "c")] = 0.2
    return stacks


def graph_doc(
    runs: int, slow: float = 1.0, noise: float = 0.02, seed: int = 0, callers: int = 20
) -> dict[str, Any]:
    """A cProfile profile with its edges: ``main`` calls ``f00``..``f19``, each calls
    ``spin``, ``f07``'s calls ``slow`` times the work of the others."""
    rng = random.Random(seed)
    stats_runs = []
    main, spin = ("prog.py", 1, "main"), ("prog.py", 5, "spin")
    for _ in range(runs):
        machine = rng.lognormvariate(0, 0.05)
        stats: dict[Any, Any] = {}
        spin_callers: dict[Any, Any] = {}
        main_callees_ct = 0.0
        for k in range(callers):
            f = ("prog.py", 10 + k, f"f{k:02d}")
            work = 0.1 * (slow if k == 7 else 1.0) * machine * rng.lognormvariate(0, noise)
            own = 0.001 * machine * rng.lognormvariate(0, noise)
            spin_callers[f] = (10, 10, work, work)
            stats[f] = (1, 1, own, own + work, {main: (1, 1, own, own + work)})
            main_callees_ct += own + work
        spin_tt = sum(v[2] for v in spin_callers.values())
        stats[spin] = (200, 200, spin_tt, spin_tt, spin_callers)
        stats[main] = (1, 1, 0.001, 0.001 + main_callees_ct, {})
        stats_runs.append((stats, 0.002 + main_callees_ct))
    data = payloads.profile_data(stats_runs, main="prog.py")
    return store.make_result("profile", data, ["profile", "prog.py"], ENV)
