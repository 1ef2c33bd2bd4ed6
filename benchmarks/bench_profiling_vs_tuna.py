"""Rendering a large ``.prof`` through the library, beside tuna reading the same file
(issue 17, item 4).

Writes the synthetic cProfile file of :mod:`bench_profiling` (20,000 functions, about
220,000 call edges), then runs, interleaved, each in a fresh interpreter (so each
figure holds the start-up, the imports and reading the file, as tuna's does):

- ours, text: ``profile2graph(FILE)`` then ``root.to_text()``;
- ours, html: ``to_html(FILE)`` (the reference view, the default);
- tuna: ``tuna.main.read(FILE)`` (the tree it serves, built without the web server).

Printed: the minimum and the median of each, and the ratios ours/tuna of the minimums
(the median ratio beside). Floor: each ratio of minimums <= 1.0.

Run: ``python benchmarks/bench_profiling_vs_tuna.py [--runs N] [--functions N]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from bench_profiling import synthetic_stats, write_profile

TIMEOUT = 300.0
TOOLS = {
    "ours profile2graph+to_text": (
        "from onnxrt_backend_dev.monitoring.profiling import profile2graph\n"
        "root = profile2graph({path!r})[0]\nlen(root.to_text())"
    ),
    "ours to_html": (
        "from onnxrt_backend_dev.monitoring.profiling import to_html\nlen(to_html({path!r}))"
    ),
    "tuna read": "import tuna.main as m\nm.read({path!r})",
}


def timed(code: str) -> float | None:
    """Wall time of ``python -c code``, None if it failed."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=TIMEOUT, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        print(f"  failed: {proc.stderr.decode(errors='replace').strip()[-300:]}")
        return None
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="interleaved runs of each")
    parser.add_argument("--functions", type=int, default=20_000)
    args = parser.parse_args()
    print(f"# bench_profiling_vs_tuna  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(
        f"# {platform.platform()}, python {platform.python_version()}, "
        f"{os.cpu_count()} cores (shared); {args.runs} interleaved runs, fresh interpreters"
    )
    with tempfile.TemporaryDirectory() as tmp:
        stats = synthetic_stats(args.functions)
        edges = sum(len(v[4]) for v in stats.values())
        path = os.path.join(tmp, "synthetic.prof")
        write_profile(stats, path)
        del stats
        print(f"# {args.functions} functions, {edges} edges, {os.path.getsize(path) // 1024} KiB")
        times: dict[str, list[float]] = {name: [] for name in TOOLS}
        for _ in range(args.runs):
            for name, code in TOOLS.items():
                t = timed(code.format(path=path))
                if t is not None:
                    times[name].append(t)
    tuna = times["tuna read"]
    ok = bool(tuna)
    for name, values in times.items():
        if not values:
            print(f"{name:<28} failed")
            ok = False
            continue
        line = f"{name:<28} min {min(values):6.3f} s  median {statistics.median(values):6.3f} s"
        if tuna and name != "tuna read":
            ratio = min(values) / min(tuna)
            median_ratio = statistics.median(values) / statistics.median(tuna)
            line += f"  ours/tuna = {ratio:.2f} (median {median_ratio:.2f})"
            passed = ratio <= 1.0
            ok &= passed
            line += "  PASS" if passed else "  FAIL"
        print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
