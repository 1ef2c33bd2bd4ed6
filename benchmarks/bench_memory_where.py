"""Where the memory peak happened: ``stacks=True`` side by side with memray, in one run.

Run: ``python benchmarks/bench_memory_where.py [--repeat 5] [--rounds 3]`` (numpy, pandas
and memray needed: ``pip install -e ".[test,bench]"``; about 5 minutes on 2 cores). Each
workload below holds its peak in one function, by construction (``TRUTH`` in
``WORKLOADS``); the others allocate less around it.

1. The function named. Every run is a fresh ``python`` process, so the memory state never
   carries over: ``plain`` (the workload alone, the call timed) and ``spy`` (under
   ``start_spying_on(delay=0.01, stacks=True)``; the function we name is the innermost
   frame of this file in ``peak_stack``, a comprehension counting as the function around
   it) in turn, ``--repeat`` times; ``memray run`` once per workload: its function is the
   innermost frame of this file in the stack of the biggest record of
   ``FileReader.get_high_watermark_allocation_records()``, its wall time is the call's
   under memray, against the median of ``PLAIN_RUNS`` fresh plain runs.
2. The overhead. In one process per workload (after a first run), ``--rounds`` times in
   turn: the call alone, under the spy, under the spy with ``stacks=True``: the three see
   the same load and the same allocator state. Sums over the workloads of the minimum
   wall time (the least disturbed by other work on the machine) and of the median CPU
   time of the process (what the sampler thread costs the program itself).

Floors (issue 10): the function holding the peak is named in >= 95 % of the runs of the
workloads whose peak lasts >= 2 x delay (shorter ones are reported apart); the wall time
with ``stacks=True`` is within 2 % of the plain one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

MIB = 2**20
DELAY = 0.01
HERE = os.path.abspath(__file__)
PLAIN_RUNS = 3  # fresh plain runs per workload, memray's reference
COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


# -- workloads: each returns after its peak is gone ------------------------------------------


def numpy_alloc() -> float:
    import numpy as np

    a = np.ones(150 * MIB // 8)
    time.sleep(0.3)
    return float(a[0])


def prelude() -> int:
    """A smaller allocation before the peak: a decoy."""
    import numpy as np

    b = np.ones(40 * MIB // 8)
    time.sleep(0.1)
    return int(b[0])


def w_numpy() -> None:
    prelude()
    numpy_alloc()
    prelude()


def pandas_groupby() -> float:
    import numpy as np
    import pandas as pd

    n = 3_000_000
    df = pd.DataFrame({"k": np.arange(n) % 1000, "a": np.ones(n), "b": np.ones(n)})
    total = df.groupby("k").sum()
    time.sleep(0.2)
    return float(total["a"].sum())


def w_pandas() -> None:
    prelude()
    pandas_groupby()


def bytes_blob() -> int:
    blob = b"x" * (200 * MIB)
    time.sleep(0.3)
    return len(blob)


def w_bytes() -> None:
    prelude()
    bytes_blob()


def gil_c_call() -> int:
    # The peak (two 150 MiB buffers) is reached and gone inside bytes.upper(), one C call
    # holding the GIL: no Python code (and no sampler) runs until it returns.
    return len((b"x" * (150 * MIB)).upper())


def w_gil_c_call() -> None:
    prelude()
    gil_c_call()
    prelude()


def build_objects() -> int:
    rows = [(i, str(i), float(i)) for i in range(600_000)]
    time.sleep(0.2)
    return len(rows)


def w_list_objects() -> None:
    prelude()
    build_objects()


def build_index() -> int:
    index = {f"key-{i}": [i] for i in range(500_000)}
    time.sleep(0.2)
    return len(index)


def w_dict_objects() -> None:
    prelude()
    build_index()


def inner_alloc() -> int:
    import numpy as np

    a = np.ones(150 * MIB // 8)
    time.sleep(0.2)
    return int(a[0])


def middle() -> int:
    return inner_alloc() + 1


def outer() -> int:
    return middle() + 1


def w_nested() -> None:
    prelude()
    outer()


def thread_alloc() -> None:
    import numpy as np

    a = np.ones(150 * MIB // 8)
    time.sleep(0.3)
    del a


def w_thread() -> None:
    prelude()
    t = threading.Thread(target=thread_alloc)
    t.start()
    t.join()


def spike_5ms() -> int:
    import numpy as np

    a = np.ones(200 * MIB // 8)
    time.sleep(0.005)
    return int(a[0])


def spike_20ms() -> int:
    import numpy as np

    a = np.ones(200 * MIB // 8)
    time.sleep(0.02)
    return int(a[0])


def spike_50ms() -> int:
    import numpy as np

    a = np.ones(200 * MIB // 8)
    time.sleep(0.05)
    return int(a[0])


def long_hold() -> int:
    import numpy as np

    a = np.ones(200 * MIB // 8)
    time.sleep(2.0)
    return int(a[0])


def w_spike_5ms() -> None:
    prelude()
    spike_5ms()
    prelude()


def w_spike_20ms() -> None:
    prelude()
    spike_20ms()
    prelude()


def w_spike_50ms() -> None:
    prelude()
    spike_50ms()
    prelude()


def w_long_2s() -> None:
    prelude()
    long_hold()


def plateau() -> Any:
    import numpy as np

    return np.ones(120 * MIB // 8)


def later_spike() -> int:
    import numpy as np

    a = np.ones(100 * MIB // 8)
    time.sleep(0.1)
    return int(a[0])


def w_plateau_then_spike() -> None:
    kept = plateau()  # held for the whole run: a first high
    time.sleep(0.3)
    later_spike()  # the true peak: plateau + spike
    del kept


def grow_chunks() -> int:
    chunks = []
    for _ in range(150):
        chunks.append(b"y" * MIB)
        time.sleep(0.001)
    time.sleep(0.1)
    return len(chunks)


def w_gradual() -> None:
    prelude()
    grow_chunks()


# name -> (workload, function holding the peak, how long the peak lasts in seconds)
WORKLOADS: dict[str, tuple[Callable[[], None], str, float]] = {
    "numpy": (w_numpy, "numpy_alloc", 0.3),
    "pandas groupby": (w_pandas, "pandas_groupby", 0.2),
    "bytes": (w_bytes, "bytes_blob", 0.3),
    "C call holding the GIL": (w_gil_c_call, "gil_c_call", 0.1),
    "list of tuples": (w_list_objects, "build_objects", 0.2),
    "dict of lists": (w_dict_objects, "build_index", 0.2),
    "nested helpers": (w_nested, "inner_alloc", 0.2),
    "worker thread": (w_thread, "thread_alloc", 0.3),
    "spike 5 ms": (w_spike_5ms, "spike_5ms", 0.005),
    "spike 20 ms": (w_spike_20ms, "spike_20ms", 0.02),
    "spike 50 ms": (w_spike_50ms, "spike_50ms", 0.05),
    "hold 2 s": (w_long_2s, "long_hold", 2.0),
    "plateau then spike": (w_plateau_then_spike, "later_spike", 0.1),
    "gradual growth": (w_gradual, "grow_chunks", 0.1),
}


# -- naming the function ------------------------------------------------------------------------


def function_of(frames: list[tuple[str, str]]) -> str | None:
    """The function a tool names: the innermost frame of this file, innermost first, a
    comprehension counting as the function around it.

    :param frames: ``(function, file)`` innermost first
    :return: a name or None
    """
    for function, filename in frames:
        if os.path.abspath(filename) != HERE:
            continue
        name = function.split(".")[-1]
        if name in COMPREHENSIONS or function.endswith(COMPREHENSIONS):
            continue
        return name
    return None


def _ours(where: Any) -> str | None:
    """The function our attribution names: from the stack at the peak (its frames carry
    the full file name; the ``peak_stack`` labels only its base name)."""
    if where is None or not where.peak_stack:
        return None
    return function_of([(f.name, f.file) for f in reversed(where.peak_stack)])


def _pairs(work: Callable[[], None], n: int) -> dict[str, list[list[float]]]:
    """Times the workload alone, under the spy, and under the spy with stacks, in turn,
    in this process (after a first run): the three see the same load and the same
    allocator state. Wall time and this process's CPU time (the sampler's own cost, less
    sensitive to what else runs on the machine)."""
    from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

    work()
    times: dict[str, list[list[float]]] = {"plain": [], "nostacks": [], "stacks": []}
    for _ in range(n):
        for mode in times:
            spy = None if mode == "plain" else start_spying_on(stacks=mode == "stacks")
            start, cpu = time.perf_counter(), time.process_time()
            work()
            times[mode].append([time.perf_counter() - start, time.process_time() - cpu])
            if spy is not None:
                spy.stop()
    return times


def child(name: str, mode: str) -> None:
    """Runs one workload in this process and prints one JSON line."""
    import numpy  # noqa: F401 -- imported before timing, in every mode

    if name == "pandas groupby":
        import pandas  # noqa: F401

    work = WORKLOADS[name][0]
    doc: dict[str, Any] = {}
    if mode.startswith("pairs"):
        print(json.dumps(_pairs(work, int(mode[5:]))))
        return
    if mode == "spy":
        from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

        spy = start_spying_on(delay=DELAY, stacks=True)
        start = time.perf_counter()
        work()
        doc["elapsed"] = time.perf_counter() - start
        cpu = spy.stop()["cpu"]
        doc["named"] = _ours(cpu.where)
        doc["peak"] = cpu.max_peak
        doc["peak_stack"] = list(cpu.peak_stack or ())
    else:
        start = time.perf_counter()
        work()
        doc["elapsed"] = time.perf_counter() - start
    print(json.dumps(doc))


# -- the parent ---------------------------------------------------------------------------------


def _run(name: str, mode: str, prefix: list[str] | None = None) -> dict[str, Any]:
    cmd = [*(prefix or [sys.executable]), HERE, "--child", name, mode]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} {mode} failed: {proc.stderr[-2000:]}")
    doc: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return doc


def _memray(name: str, folder: str) -> dict[str, Any]:
    import memray

    out = os.path.join(folder, "run.bin")
    if os.path.exists(out):
        os.remove(out)
    memray_cmd = [sys.executable, "-m", "memray", "run", "-q", "-o", out]
    doc = _run(name, "plain", memray_cmd)
    reader = memray.FileReader(out)
    records = list(reader.get_high_watermark_allocation_records(merge_threads=True))
    top = max(records, key=lambda r: r.size)
    frames = [(function, filename) for function, filename, _ in top.stack_trace()]
    doc["named"] = function_of(frames)
    doc["peak"] = reader.metadata.peak_memory
    return doc


def _accuracy(repeat: int) -> None:
    """Section 1: the function named, fresh processes; memray's beside."""
    print(f"== 1. function named at the peak: delay={DELAY}, {repeat} runs per workload")
    print(f"{'workload':24} {'truth':15} {'ours':>6} {'memray':>14} {'plain':>8} {'memray':>7}")
    hits = {"long": 0, "short": 0}
    runs = {"long": 0, "short": 0}
    memray_hits = n_long = 0
    plain_sum = memray_sum = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for name, (_, truth, lasts) in WORKLOADS.items():
            plain_runs, named = [], []
            for i in range(repeat):  # interleaved: both modes see the same load
                if i < PLAIN_RUNS:  # only memray's reference
                    plain_runs.append(_run(name, "plain")["elapsed"])
                named.append(_run(name, "spy")["named"])
            mem = _memray(name, folder)
            plain = statistics.median(plain_runs)
            plain_sum += plain
            memray_sum += mem["elapsed"]
            kind = "long" if lasts >= 2 * DELAY else "short"
            hits[kind] += sum(n == truth for n in named)
            runs[kind] += len(named)
            if kind == "long":
                memray_hits, n_long = memray_hits + (mem["named"] == truth), n_long + 1
            wrong = sorted({str(n) for n in named if n != truth})
            print(
                f"{name:24} {truth:15} {sum(n == truth for n in named):>2}/{len(named):<3} "
                f"{'ok' if mem['named'] == truth else str(mem['named']):>14} "
                f"{plain * 1e3:6.0f}ms {mem['elapsed'] / plain - 1:+7.1%}"
                + (f"  (ours also named: {', '.join(wrong)})" if wrong else "")
            )
    print(
        f"named, peaks >= 2 x delay: ours {hits['long']}/{runs['long']} = "
        f"{hits['long'] / runs['long']:.1%} (floor 95 %), memray {memray_hits}/{n_long} workloads"
    )
    if runs["short"]:
        print(
            f"named, peaks < 2 x delay: ours {hits['short']}/{runs['short']} = "
            f"{hits['short'] / runs['short']:.1%}"
        )
    print(
        f"memray, wall time of the call: {memray_sum:.2f} s for {plain_sum:.2f} s plain "
        f"(sum of medians, fresh processes): {memray_sum / plain_sum - 1:+.1%}"
    )


def _overhead(rounds: int) -> None:
    """Section 2: the call alone, under the spy, under the spy with stacks, in turn in one
    process per workload: the minimum wall time and the median CPU time of the process."""
    print(f"== 2. overhead: {rounds} rounds of plain, spy, spy with stacks, in one process")
    print(f"{'':24} {'wall time, min':>24}   {'CPU time, median':>24}")
    columns = f"{'plain':>8} {'spy':>7} {'stacks':>7}"
    print(f"{'workload':24} {columns}   {columns}")
    modes = ("plain", "nostacks", "stacks")
    wall = dict.fromkeys(modes, 0.0)
    cpu = dict.fromkeys(modes, 0.0)
    for name in WORKLOADS:
        times = _run(name, f"pairs{rounds}")
        w = {m: min(v[0] for v in times[m]) for m in modes}
        c = {m: statistics.median(v[1] for v in times[m]) for m in modes}
        for m in modes:
            wall[m] += w[m]
            cpu[m] += c[m]
        print(
            f"{name:24} {w['plain'] * 1e3:6.0f}ms {w['nostacks'] / w['plain'] - 1:+7.1%} "
            f"{w['stacks'] / w['plain'] - 1:+7.1%}   {c['plain'] * 1e3:6.0f}ms "
            f"{c['nostacks'] / c['plain'] - 1:+7.1%} {c['stacks'] / c['plain'] - 1:+7.1%}"
        )
    for label, sums in (("wall time, sum of minima", wall), ("CPU time, sum of medians", cpu)):
        print(
            f"{label}: plain {sums['plain']:.2f} s, spy {sums['nostacks']:.2f} s "
            f"({sums['nostacks'] / sums['plain'] - 1:+.1%}), stacks=True {sums['stacks']:.2f} s "
            f"({sums['stacks'] / sums['plain'] - 1:+.1%}; "
            f"{sums['stacks'] / sums['nostacks'] - 1:+.1%} over the spy alone)"
        )
    print("floor: stacks=True within 2 % of plain (wall time)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="spied runs per workload")
    parser.add_argument("--rounds", type=int, default=4, help="overhead rounds per workload")
    parser.add_argument("--child", nargs=2, metavar=("NAME", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.platform()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}"
    )
    start = time.perf_counter()
    _accuracy(args.repeat)
    _overhead(args.rounds)
    print(f"benchmark run time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
