"""Overhead of ``run`` (the one-page report) beside Scalene and memray, whole scripts.

Run: ``python benchmarks/bench_report.py [--rounds 7] [--only json,peak]`` (numpy,
pandas, scalene and memray needed). Four workloads, each a fresh script: ``json``
(``json.dumps(indent=2)`` of 40,000 nested records), ``pandas`` (``read_csv`` and a
``groupby`` of a generated 200k-row CSV), ``ast`` (``ast.parse`` + ``ast.unparse`` of the 5
largest standard library modules), ``peak`` (70 MB of dicts freed, then two 300 MiB numpy
arrays alive together in one function). Each round runs, in turn: the plain script,
``onnxrt-monitoring run -q -o report.json`` (the ticks, the time sampler, the memory spy,
the report written), Scalene (``scalene run -o``, CPU + memory, its default) and memray
(``memray run`` then ``memray stats``, as a user reads its numbers). The figures are the
ratio of the minimums of the whole-script wall times to the plain one, over the rounds,
the ratio of the medians beside (the machine is shared: the minimum is the least
disturbed run). Bytecode is cached (``PYTHONDONTWRITEBYTECODE`` is dropped), as for an
installed package.

Floor (issue 18): ``run`` at most 1.10x on each workload.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKLOADS = {
    "json": """\
import json


def workload_json():
    data = [{"id": i, "name": f"item {i}", "tags": ["a", "b"], "pos": {"x": i, "y": -i}}
            for i in range(40_000)]
    return len(json.dumps(data, indent=2))


workload_json()
""",
    "pandas": """\
import pandas as pd


def load(path):
    return pd.read_csv(path)


def agg(df):
    return df.groupby("key").agg({"a": "sum", "b": "mean"})


def main():
    df = load({csv!r})
    return len(agg(df))


main()
""",
    "ast": """\
import ast
import os
import sysconfig


def largest_modules(n=5):
    folder = sysconfig.get_paths()["stdlib"]
    files = [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py")]
    return sorted(files, key=os.path.getsize)[-n:]


def roundtrip(path):
    with open(path, encoding="utf-8") as f:
        return len(ast.unparse(ast.parse(f.read())))


def main():
    return sum(roundtrip(p) for p in largest_modules())


main()
""",
    "peak": """\
import numpy as np


def build_dicts():
    return [{"i": i, "s": str(i)} for i in range(300_000)]


def make_peak():
    a = np.ones(300 * 2**20 // 8)
    b = np.ones(300 * 2**20 // 8)
    return float(a[0] + b[0])


def main():
    d = build_dicts()
    del d
    return make_peak()


main()
""",
}


def _write_csv(path: str) -> None:
    import random

    rng = random.Random(0)
    with open(path, "w", encoding="utf-8") as f:
        f.write("key,a,b\n")
        for i in range(200_000):
            f.write(f"k{rng.randrange(100)},{i},{rng.random():.6f}\n")


def _commands(script: str, folder: str) -> dict[str, list[list[str]]]:
    py = sys.executable
    out = os.path.join(folder, "out")
    tools: dict[str, list[list[str]]] = {
        "plain": [[py, script]],
        "run": [
            [py, "-m", "onnxrt_backend_dev.monitoring", "run", "-q", "-o", out + ".json", script]
        ],
    }
    if importlib.util.find_spec("scalene") is not None:
        tools["scalene"] = [[py, "-m", "scalene", "run", "-o", out + ".scalene.json", script]]
    if importlib.util.find_spec("memray") is not None:
        tools["memray"] = [
            [py, "-m", "memray", "run", "-q", "-f", "-o", out + ".bin", script],
            [py, "-m", "memray", "stats", out + ".bin"],
        ]
    return tools


def _time(commands: list[list[str]], env: dict[str, str]) -> float:
    start = time.perf_counter()
    for cmd in commands:
        subprocess.run(
            cmd,
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=600,
        )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default=",".join(WORKLOADS))
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # Bytecode cached, as an installed package has it (the warm-up run writes it): without,
    # every run compiles the tool's modules again (0.35 s here), which no user pays.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    print(
        f"# bench_report: {platform.python_version()}, {os.cpu_count()} cores, "
        f"{args.rounds} interleaved rounds, whole-script wall time"
    )
    with tempfile.TemporaryDirectory() as folder:
        csv = os.path.join(folder, "data.csv")
        _write_csv(csv)
        for name in args.only.split(","):
            script = os.path.join(folder, f"w_{name}.py")
            with open(script, "w", encoding="utf-8") as f:
                f.write(WORKLOADS[name].replace("{csv!r}", repr(csv)))
            tools = _commands(script, folder)
            times: dict[str, list[float]] = {tool: [] for tool in tools}
            for commands in tools.values():  # a first run of each: caches warm
                _time(commands, env)
            for _ in range(args.rounds):
                for tool, commands in tools.items():
                    times[tool].append(_time(commands, env))
            base_min, base_med = min(times["plain"]), statistics.median(times["plain"])
            cells = [f"plain {base_min:.2f} s (median {base_med:.2f})"]
            for tool in tools:
                if tool != "plain":
                    ratio = min(times[tool]) / base_min
                    median = statistics.median(times[tool]) / base_med
                    cells.append(f"{tool} {ratio:.2f}x ({median:.2f}x)")
            print(f"{name:7} " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
