"""Saved timings compared: ours (``time --save`` twice, then ``compare``) beside pyperf's
(``pyperf timeit -o`` twice, then ``pyperf compare_to``), on the same two statements, in
one run: the wall time of each tool from nothing to its verdict, and the verdicts.

Run: ``python benchmarks/bench_compare_pyperf.py [--rounds 1]`` (needs ``pip install
pyperf``). Cases: ``sum(range(2000))`` against ``sum(range(2200))`` (10 % more work),
and against itself (no difference). The tools alternate, case by case. Both compare files
saved one after the other: a drift of the machine between the two is in the figures of
both tools alike.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

TIMEOUT = 600
OURS = [sys.executable, "-m", "onnxrt_backend_dev.monitoring"]
PYPERF = [sys.executable, "-m", "pyperf"]
CASES = [
    ("10 % more work", "sum(range(2000))", "sum(range(2200))"),
    ("identical", "sum(range(2000))", "sum(range(2000))"),
]


def _run(cmd: list[str], cwd: str) -> tuple[float, str, int]:
    begin = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    return time.perf_counter() - begin, (proc.stdout + proc.stderr).strip(), proc.returncode


def ours(a: str, b: str, cwd: str) -> tuple[float, str]:
    total = 0.0
    for stmt, name in ((a, "a.json"), (b, "b.json")):
        seconds, text, code = _run(
            [*OURS, "time", stmt, "-r", "20", "-q", "--save", name, "--force"], cwd
        )
        total += seconds
        assert code == 0, text
    seconds, text, code = _run([*OURS, "compare", "a.json", "b.json"], cwd)
    verdict = next(
        (line for line in text.splitlines() if line.strip().startswith(("+", "-"))), text
    )
    return total + seconds, f"exit {code}: {verdict.strip()}"


def theirs(a: str, b: str, cwd: str) -> tuple[float, str]:
    total = 0.0
    for stmt, name in ((a, "pa.json"), (b, "pb.json")):
        if os.path.exists(os.path.join(cwd, name)):
            os.remove(os.path.join(cwd, name))
        seconds, text, code = _run([*PYPERF, "timeit", stmt, "-o", name, "--quiet"], cwd)
        total += seconds
        assert code == 0, text
    seconds, text, code = _run([*PYPERF, "compare_to", "pa.json", "pb.json"], cwd)
    return total + seconds, f"exit {code}: {' / '.join(text.splitlines()[-2:])}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"## bench_compare_pyperf ({stamp}, 2-core shared VM, Python {platform.python_version()})"
    )
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as cwd:
        for r in range(args.rounds):
            for title, a, b in CASES:
                tools = [("ours", ours), ("pyperf", theirs)]
                for name, tool in tools if r % 2 == 0 else tools[::-1]:
                    seconds, verdict = tool(a, b, cwd)
                    print(f"- {title}, {name}: {seconds:.1f} s, {verdict}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
