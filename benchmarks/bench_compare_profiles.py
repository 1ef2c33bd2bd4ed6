"""compare of two profiles: power and false alarms over trials, with the real runner.

Run: ``python benchmarks/bench_compare_profiles.py [--trials 20] [--runs 20]``. It prints
the floors of issue 19:

1. a program of 200 functions where one holds about 5 % of the time; B makes it 10 %
   slower. Each trial runs A and B ``--runs`` times each, interleaved, in child
   processes under cProfile (``compare_programs``, the defaults of ``compare --a/--b``),
   and counts whether the slower function is significant (target >= 95 % of trials) and
   how many trials call any other function significant (target <= 1 in 20);
2. two identical programs (two copies of A): the trials where anything (a function, the
   wall time, the memory peak) is called significant (target <= 1 in 20);
3. memory: B allocates 10 % more in one function (a buffer of 50 MB, kept until the end,
   in a program of 10 functions so that its runs are short); the trials
   where the peak (``ru_maxrss`` of the run) is called significantly higher. This is
   the program's peak, not a per-function attribution (cProfile has no memory figures).

The machine is noisy and shared: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from typing import Any

from onnxrt_backend_dev.monitoring._results.runner import compare_programs

FUNCTIONS = 200
WORK = 600  # iterations of each ordinary function per call
TARGET_SHARE = 0.075  # of the functions' work: about 5 % of the run (CPU time, compile included)


def program(slow: float = 1.0, allocate: int = 0, functions: int = FUNCTIONS) -> str:
    """The source of the synthetic program: ``f_000`` is the target."""
    target = round(TARGET_SHARE * (functions - 1) * WORK / (1 - TARGET_SHARE) * slow)
    lines = ["KEEP = []", ""]
    for i in range(functions):
        k = target if i == 0 else WORK
        lines += [
            f"def f_{i:03d}():",
            "    s = 0",
            f"    for i in range({k}):",
            "        s += i * i",
        ]
        if i == 1 and allocate:
            lines.append(f"    KEEP.append(bytearray({allocate}))")
        lines += ["    return s", ""]
    lines += ["def main():", "    for _ in range(3):"]
    lines += [f"        f_{i:03d}()" for i in range(functions)]
    lines += ["", "main()", ""]
    return "\n".join(lines)


def _write(folder: str, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _trials(a: str, b: str, trials: int, runs: int, target: str | None) -> dict[str, Any]:
    hits = others = wall = memory = 0
    seconds = []
    shares = []
    missed: list[str] = []
    for _ in range(trials):
        begin = time.perf_counter()
        # cProfile, as issue 19 measured it (compare --a/--b --cprofile); the comparison is
        # issue 28's: absolute times against the run-wide factor.
        cmp, _, _ = compare_programs(
            [sys.executable, a], [sys.executable, b], repeat=runs, profiler="cprofile"
        )
        seconds.append(time.perf_counter() - begin)
        listed = [c for c in cmp.changes if c.verdict and c.file is not None]
        hits += any(c.function == target for c in listed)
        others += any(c.function != target for c in listed)
        sig = [c for c in cmp.changes if c.significant and c.file is None]
        wall += any(c.figure in ("wall", "cpu") for c in sig)
        memory += any(c.figure == "peak" and (c.change or 0) > 0 for c in sig)
        shares += [c.a["share"] for c in cmp.changes if c.function == target and c.figure == "own"]
        for c in cmp.changes:
            if c.function == target and c.figure == "own":
                missed.append(f"{c.change:+.1%} p={c.p_value} adj={c.p_adjusted}")
    return {
        "target": hits,
        "others": others,
        "detail": missed,
        "wall": wall,
        "memory": memory,
        "seconds": statistics.median(seconds),
        "share": statistics.median(shares) if shares else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--runs", type=int, default=20, help="runs a side (compare's default)")
    parser.add_argument("--cases", default="slower,identical,memory", help="which cases")
    parser.add_argument("--detail", action="store_true", help="the target's figures per trial")
    args = parser.parse_args()
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"## bench_compare_profiles ({stamp}, 2-core shared VM, Python {platform.python_version()})"
    )
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        a = _write(folder, "a.py", program())
        a2 = _write(folder, "a_copy.py", program())
        b = _write(folder, "b.py", program(slow=1.1))
        # a small program: its runs are short, the allocation is what is measured
        m_a = _write(folder, "m_a.py", program(allocate=50_000_000, functions=10))
        m_b = _write(folder, "m_b.py", program(allocate=55_000_000, functions=10))
        cases = [
            ("10 % slower f_000", a, b, "f_000"),
            ("identical programs", a, a2, None),
            ("10 % more allocated in f_001", m_a, m_b, None),
        ]
        wanted = args.cases.split(",")
        keys = ["slower", "identical", "memory"]
        cases = [c for k, c in zip(keys, cases, strict=True) if k in wanted]
        for title, x, y, target in cases:
            r = _trials(x, y, args.trials, args.runs, target)
            print(
                f"- {title}: {args.trials} trials of {args.runs} runs a side "
                f"(median {r['seconds']:.1f} s a trial); f_000's share in A "
                f"{r['share']:.2%}; target listed in "
                f"{r['target']}/{args.trials}, another function in {r['others']}/{args.trials}"
                f"; run time in "
                f"{r['wall']}/{args.trials}, memory peak higher in {r['memory']}/{args.trials}"
            )
            if args.detail:
                for line in r["detail"]:
                    print(f"    {line}")
            sys.stdout.flush()
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
