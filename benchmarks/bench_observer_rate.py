"""The observer's own cost: a sample's CPU by stack depth (the C walk and the Python
reader), the rate it sustains at ``--interval 0.0001`` and what that costs the program,
and ``dump --pid`` beside ``py-spy dump``.

- ``depth``: a program recursing to a depth (10, 30, 100, 500), then spinning in Python;
  this process attaches the observer to it and takes samples at 1 kHz (the default) for
  a while: the observer's CPU per sample (``time.process_time`` around the loop, the
  kernel's wake-ups included), with the C walk then with the Python reader; and a loop
  that only sleeps at the same rate, the machine's cost of a wake-up, beside.
- ``rate``: ``profile --interval 0.0001`` on a program doing fixed work at depth 30
  beside a plain run of it, interleaved: the samples a second the header says, the
  observer's CPU (its note) as a share of one core, and the program's own CPU over the
  plain run's (ratio of medians); py-spy ``record --rate 10000`` beside.
- ``dump``: ``dump --pid`` and ``py-spy dump --pid`` of a program with three named
  threads, interleaved: wall time of each.

Floors (issue 38): <= 25 µs a sample at depth 30, <= 150 µs at depth 500; 10,000 samples
a second at depth 30 with the observer under 30 % of one core and the program's CPU
equal to a plain run's; ``dump`` <= 0.3 s.

Run: ``python benchmarks/bench_observer_rate.py [--runs 7] [--only depth,rate,dump]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone

PY = sys.executable
TIMEOUT = 300
RECURSE = """
import sys, time
sys.setrecursionlimit(10_000)
def down(n, work):
    if n <= 1:
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        return work()
    return down(n - 1, work)
def spin():
    x = 0
    while True:
        x += 1
def fixed():
    t0 = time.process_time()
    s = 0
    for i in range(30_000_000):
        s += i % 7
    with open(sys.argv[2], "a") as f:
        f.write(f"{time.process_time() - t0}\\n")
down(DEPTH, spin if sys.argv[1] == "spin" else fixed)
"""
THREADS = """
import sys, threading, time
def spin(stop):
    while not stop.is_set():
        sum(range(1000))
stop = threading.Event()
for name in ("spinner", "worker-1"):
    threading.Thread(target=spin, args=(stop,), name=name, daemon=True).start()
threading.Thread(target=stop.wait, name="idle", daemon=True).start()
sys.stdout.write("ready\\n"); sys.stdout.flush()
time.sleep(600)
"""


@contextmanager
def program(source: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A Python program started until it says ready."""
    proc = subprocess.Popen([PY, "-c", source, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def sample_cost(pid: int, native: bool, seconds: float, interval: float = 0.001) -> float:
    """µs of this process's CPU per sample of the observer attached to ``pid``."""
    from onnxrt_backend_dev.monitoring._observe.session import attach
    from onnxrt_backend_dev.monitoring._observe.walk import drop_native
    from onnxrt_backend_dev.monitoring._sampling.aggregate import Aggregator

    observer, target = attach(pid, interval, Aggregator())
    if not native:
        drop_native(target.reader)
    start = time.monotonic()
    observer.run(lambda: time.monotonic() - start > seconds)
    observer.close()
    return 1e6 * observer.cost / max(observer.samples, 1)


def sleep_cost(seconds: float, interval: float = 0.001) -> float:
    """µs of CPU per wake-up of a loop that only sleeps on the same grid."""
    c0, n = time.process_time(), 0
    next_t = time.monotonic()
    end = next_t + seconds
    while next_t < end:
        next_t += interval
        time.sleep(max(next_t - time.monotonic(), 0.0))
        n += 1
    return 1e6 * (time.process_time() - c0) / n


def depth(runs: int) -> None:
    print("## depth: the observer's CPU per sample at 1 kHz, µs (median of rounds, min-max)")
    wake = [sleep_cost(0.5) for _ in range(runs)]
    print(f"  a wake-up alone (a loop that only sleeps): {_stats(wake)}")
    for d in (10, 30, 100, 500):
        with program(RECURSE.replace("DEPTH", str(d)), "spin") as proc:
            time.sleep(0.1)
            c_walk, python = [], []
            for _ in range(runs):  # interleaved
                c_walk.append(sample_cost(proc.pid, True, 0.5))
                python.append(sample_cost(proc.pid, False, 0.5))
        print(f"  depth {d:>3}: C walk {_stats(c_walk)}   Python reader {_stats(python)}")


def _stats(values: list[float], digits: int = 1) -> str:
    med, low, high = statistics.median(values), min(values), max(values)
    return f"{med:7.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def rate(runs: int) -> None:
    print("## rate: profile --interval 0.0001 at depth 30, beside a plain run")
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(PY), "py-spy")
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "fixed.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(
                RECURSE.replace("DEPTH", "30").replace(
                    'sys.stdout.write("ready\\n"); sys.stdout.flush()', "pass"
                )
            )
        cpu_file = os.path.join(folder, "cpu.txt")
        cmds = {
            "plain": [PY, script, "fixed", cpu_file],
            "profile": [PY, "-m", "onnxrt_backend_dev.monitoring", "profile", "--interval",
                        "0.0001", "-o", os.path.join(folder, "p.txt"), script, "fixed",
                        cpu_file],
        }  # fmt: skip
        if os.path.exists(spy):
            cmds["py-spy"] = [spy, "record", "--rate", "10000", "-f", "raw", "-o",
                              os.path.join(folder, "s.txt"), "--", PY, script, "fixed",
                              cpu_file]  # fmt: skip
        cpu: dict[str, list[float]] = {k: [] for k in cmds}
        rates: list[float] = []
        shares: list[float] = []
        for _ in range(runs):
            for name, cmd in cmds.items():
                if os.path.exists(cpu_file):
                    os.remove(cpu_file)
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
                if proc.returncode:
                    raise RuntimeError(f"{name} failed: {proc.stderr[-2000:]}")
                with open(cpu_file, encoding="utf-8") as f:
                    cpu[name].append(float(f.read().split()[-1]))
                if name == "profile":
                    with open(os.path.join(folder, "p.txt"), encoding="utf-8") as f:
                        header = f.readline()
                    m = re.search(r"\(observer: (\d+) a second\)", header)
                    s = re.search(r"beside the program \((\d+) % of one core\)",
                                  proc.stdout + proc.stderr)  # fmt: skip
                    rates.append(float(m.group(1)) if m else 0.0)
                    shares.append(float(s.group(1)) if s else -1.0)
        base = statistics.median(cpu["plain"])
        print(f"  samples a second (header): {_stats(rates)}")
        print(f"  the observer's CPU, % of one core (its note): {_stats(shares)}")
        for name in cmds:
            print(f"  {name:<8} program's CPU {statistics.median(cpu[name]):.3f} s, "
                  f"{statistics.median(cpu[name]) / base:.3f}x plain (median)")  # fmt: skip


def dump(runs: int) -> None:
    print("## dump: wall seconds of one dump of a program with three named threads")
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(PY), "py-spy")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with program(THREADS) as proc:
        cmds = {"dump": [PY, "-m", "onnxrt_backend_dev.monitoring", "dump", "--pid",
                         str(proc.pid)]}  # fmt: skip
        if os.path.exists(spy):
            cmds["py-spy dump"] = [spy, "dump", "--pid", str(proc.pid)]
        walls: dict[str, list[float]] = {k: [] for k in cmds}
        for cmd in cmds.values():  # warm-up: bytecode caches, the checks kept
            subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, env=env)
        for _ in range(runs):
            for name, cmd in cmds.items():
                t0 = time.perf_counter()
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                                      env=env)  # fmt: skip
                walls[name].append(time.perf_counter() - t0)
                if done.returncode or "spinner" not in done.stdout:
                    raise RuntimeError(f"{name}: {done.stdout[-500:]} {done.stderr[-500:]}")
        for name, values in walls.items():
            print(f"  {name:<12} {_stats(values, 3)} s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="interleaved rounds (7)")
    parser.add_argument("--only", default="depth,rate,dump", help="sections")
    args = parser.parse_args(argv)
    print(f"# bench_observer_rate {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.platform()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
          f"Python {platform.python_version()}")  # fmt: skip
    start = time.monotonic()
    sections = {"depth": depth, "rate": rate, "dump": dump}
    for name in args.only.split(","):
        sections[name](args.runs)
    print(f"# total {time.monotonic() - start:.0f} s, load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
