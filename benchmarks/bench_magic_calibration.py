"""``%measure_time`` beside ``%timeit`` on a slow statement (issue 30, item 3).

Run: ``python benchmarks/bench_magic_calibration.py [runs]``. Both magics time a 20 ms
statement (``time.sleep(0.02)``) with their defaults, interleaved ``runs`` times (7): the
wall time of each whole magic, its minimum and median, and the ratio of minimums. Before
the magic calibrated, ``%measure_time`` ran 10 x 50 executions (10 s here); the floor is
3 s. Needs IPython (the test extra).
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import statistics
import sys
import time

from IPython.core.interactiveshell import InteractiveShell

STATEMENT = "time.sleep(0.02)"


def main(runs: int = 7) -> None:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "onnxrt_backend_dev.monitoring")
    shell.run_cell("import time")
    walls: dict[str, list[float]] = {"measure_time": [], "timeit": []}
    lines: dict[str, str] = {}
    for _ in range(runs):
        for magic in walls:
            out = io.StringIO()
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(out):
                shell.run_line_magic(magic, STATEMENT)
            walls[magic].append(time.perf_counter() - t0)
            lines[magic] = out.getvalue().strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()[0]
    print(f"{when}, Python {platform.python_version()}, load {load:.1f}, {runs} runs")
    for magic, values in walls.items():
        print(f"%{magic:<13} min {min(values):.2f} s, median {statistics.median(values):.2f} s"
              f"  ({lines[magic]})")  # fmt: skip
    ratio = min(walls["measure_time"]) / min(walls["timeit"])
    print(f"ratio of minimums %measure_time / %timeit: {ratio:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
