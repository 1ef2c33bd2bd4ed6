"""What observing costs: the whole process tree's CPU and the command's wall time under
each tool against a plain run, and the program's own time, on the json, pandas and ast
workloads of ``bench_sampling.py``.

Each workload script times itself (``time.perf_counter`` and ``time.process_time`` from
its first line to its last, written to the file ``$BENCH_TIMES``): that is the
program's own time, what a collector inside it slows down. The whole process tree's CPU
(user and system, ``wait4`` of the command: the tool, the program, what they reaped)
is what the machine pays. Tools: plain ``python script.py``; ours ``profile`` (the
observer, the default) and ``run`` (the observer, memory too), and ``profile
--collector in-process`` (the signal sampler inside the program); py-spy ``record``
(outside, 100 Hz, its default); pyinstrument (inside); Scalene ``run --cpu-only``
(inside). ``--runs`` rounds, every tool once per round in turn (interleaved); ratios of
the medians over the plain run's median, the ratio of the minimums beside.

Floors (issue 38): ``profile`` <= 1.05x whole tree CPU and <= 1.05x command wall; ``run``
<= 1.10x tree CPU.

Run: ``python benchmarks/bench_observer_overhead.py [--runs 7] [--only json,ast]``
(pandas, pyinstrument, py-spy, scalene where installed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone

PY = sys.executable
TIMEOUT = 600
HEAD = "import os as _o, time as _t\n_T0, _C0 = _t.perf_counter(), _t.process_time()\n"
TAIL = (
    "\nwith open(_o.environ['BENCH_TIMES'], 'a') as _f:\n"
    "    _f.write(f'{_t.perf_counter() - _T0} {_t.process_time() - _C0}\\n')\n"
)

JSON = """
import json, random


def make():
    rnd = random.Random(0)
    return [{"id": i, "name": f"n{i}", "tags": [rnd.random() for _ in range(5)],
             "nested": {"a": i, "b": [i, i + 1, {"c": str(i)}]}} for i in range(40_000)]


def workload_json(obj):
    return len(json.dumps(obj, indent=2))


workload_json(make())
"""

AST = """
import ast, os, sysconfig


def sources(n=5):
    lib = sysconfig.get_paths()["stdlib"]
    files = sorted((os.path.getsize(os.path.join(lib, f)), f) for f in os.listdir(lib)
                   if f.endswith(".py"))[-n:]
    return [open(os.path.join(lib, f), encoding="utf-8").read() for _, f in files]


def workload_ast(srcs):
    return sum(len(ast.unparse(ast.parse(src))) for src in srcs)


workload_ast(sources())
"""

PANDAS = """
import sys
import pandas as pd


def load(path):
    return pd.read_csv(path)


def agg(df):
    return df.groupby("city").agg({"value": ["mean", "sum"], "count": "max"})


def main(path):
    return len(agg(load(path)))


main(sys.argv[1])
"""


def make_csv(path: str, rows: int = 200_000) -> None:
    import numpy
    import pandas

    rnd = numpy.random.default_rng(0)
    pandas.DataFrame(
        {
            "city": numpy.char.add("c", rnd.integers(0, 40, rows).astype(str)),
            "value": rnd.random(rows),
            "count": rnd.integers(0, 100, rows),
        }
    ).to_csv(path, index=False)


def tools(folder: str, script: list[str]) -> dict[str, list[str]]:
    cli = [PY, "-m", "onnxrt_backend_dev.monitoring"]
    out = {
        "plain": [PY, *script],
        "profile": [*cli, "profile", "-o", os.path.join(folder, "p.json"), *script],
        "run": [*cli, "run", "-q", "-o", os.path.join(folder, "r.json"), *script],
        "in-process": [*cli, "profile", "-q", "--collector", "in-process", "-o",
                       os.path.join(folder, "i.json"), *script],
        "pyinstrument": [PY, "-m", "pyinstrument", "-r", "session", "-o",
                         os.path.join(folder, "pyi.pyisession"), *script],
    }  # fmt: skip
    if importlib.util.find_spec("scalene") is not None:
        out["scalene"] = [PY, "-m", "scalene", "run", "--cpu-only", "-o",
                          os.path.join(folder, "scalene.json"), script[0], *(
                              ["---", *script[1:]] if script[1:] else [])]  # fmt: skip
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(PY), "py-spy")
    if os.path.exists(spy):
        out["py-spy"] = [spy, "record", "-f", "raw", "-o", os.path.join(folder, "s.txt"),
                         "--", PY, *script]  # fmt: skip
    return out


def _once(cmd: list[str], folder: str) -> dict[str, float]:
    """One run: the program's own wall and CPU time, the command's wall time, the whole
    process tree's CPU, the observer's CPU (when its note says it)."""
    times = os.path.join(folder, "times.txt")
    if os.path.exists(times):
        os.remove(times)
    env = dict(os.environ, BENCH_TIMES=times)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    wall = time.perf_counter() - t0
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    tree = children.ru_utime + children.ru_stime - _once.reaped  # type: ignore[attr-defined]
    _once.reaped += tree  # type: ignore[attr-defined]
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err[-2000:]}")
    with open(times, encoding="utf-8") as f:
        own, cpu = (float(x) for x in f.read().split()[-2:])
    m = re.search(r"the observer used ([0-9.]+) s of CPU", err)
    out = {"own": own, "cpu": cpu, "wall": wall, "tree": tree}
    if m:
        out["observer"] = float(m.group(1))
    return out


_once.reaped = 0.0  # type: ignore[attr-defined]


def _ratio(mine: list[float], plain: list[float]) -> str:
    med = statistics.median(mine) / statistics.median(plain)
    return f"{med:5.3f}x ({min(mine) / min(plain):5.3f}x)"


def bench(name: str, folder: str, script: list[str], runs: int) -> dict[str, dict[str, float]]:
    cmds = tools(folder, script)
    got: dict[str, list[dict[str, float]]] = {t: [] for t in cmds}
    for _ in range(runs):
        for tool, cmd in cmds.items():
            got[tool].append(_once(cmd, folder))

    def col(tool: str, key: str) -> list[float]:
        return [r[key] for r in got[tool] if key in r]

    print(f"## {name}: plain program {statistics.median(col('plain', 'own')):.3f} s (median), "
          f"tree CPU {statistics.median(col('plain', 'tree')):.3f} s, {runs} rounds")  # fmt: skip
    print("  tool          tree CPU: median ratio (min)   command wall         program's CPU"
          "        observer CPU")  # fmt: skip
    summary = {}
    for tool in cmds:
        if tool == "plain":
            continue
        said = ""
        if col(tool, "observer"):
            used = statistics.median(col(tool, "observer"))
            share = 100 * used / statistics.median(col(tool, "own"))
            said = f"{used:.3f} s ({share:.1f} % of a core)"
        print(f"  {tool:<13} {_ratio(col(tool, 'tree'), col('plain', 'tree'))}     "
              f"{_ratio(col(tool, 'wall'), col('plain', 'wall'))}   "
              f"{_ratio(col(tool, 'cpu'), col('plain', 'cpu'))}   {said}")  # fmt: skip
        summary[tool] = {
            key: round(statistics.median(col(tool, key)) / statistics.median(col("plain", key)), 3)
            for key in ("tree", "wall", "cpu")
        }
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="interleaved rounds (7)")
    parser.add_argument("--only", default="json,ast,pandas", help="workloads")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    print(f"# bench_observer_overhead {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.platform()}, {os.cpu_count()} cores, load {load:.2f}, "
          f"Python {platform.python_version()}")  # fmt: skip
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        workloads = {"json": (JSON, []), "ast": (AST, []), "pandas": (PANDAS, ["data.csv"])}
        summary = {}
        for name in args.only.split(","):
            source, extra = workloads[name]
            path = os.path.join(folder, f"{name}_script.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write(HEAD + source + TAIL)
            if name == "pandas":
                make_csv(os.path.join(folder, "data.csv"))
            summary[name] = bench(name, folder, [path, *extra], args.runs)
        print(
            "# summary, ratios of medians (tree CPU, command wall, program's CPU): "
            + json.dumps(summary)
        )
    print(f"# total {time.monotonic() - start:.0f} s, load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
