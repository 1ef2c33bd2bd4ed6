"""What observing costs the program: its own run time under each tool against a plain
run, on the json, pandas and ast workloads of ``bench_sampling.py``.

Each workload script times itself (``time.perf_counter`` from its first line to its
last, written to the file ``$BENCH_TIMES``): that is the program's wall time, what a
collector slows down; the command's whole wall time (the tool's start, its report) is
printed beside. Tools: plain ``python script.py``; ours ``profile`` (the observer, the
default) and ``run`` (the observer, memory too); ours ``profile --collector in-process``
(the signal sampler inside the program); py-spy ``record`` (outside, at 100 Hz, its
default); pyinstrument (inside). ``--runs`` rounds, every tool once per round in turn
(interleaved); the ratio of the minimums, the ratio of the medians beside; the
observer's own CPU time (from its note) beside, as a share of one core.

Floors (issue 27): ``profile`` <= 1.03x and ``run`` <= 1.05x on the program's time.

Run: ``python benchmarks/bench_observer_overhead.py [--runs 7] [--only json,ast]``
(pandas, pyinstrument, py-spy).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
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
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(PY), "py-spy")
    if os.path.exists(spy):
        out["py-spy"] = [spy, "record", "-f", "raw", "-o", os.path.join(folder, "s.txt"),
                         "--", PY, *script]  # fmt: skip
    return out


def _once(cmd: list[str], folder: str) -> tuple[float, float, float, float | None]:
    """The program's own wall and CPU time, the command's wall time, the observer's CPU
    (if said)."""
    times = os.path.join(folder, "times.txt")
    if os.path.exists(times):
        os.remove(times)
    env = dict(os.environ, BENCH_TIMES=times)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)  # fmt: skip
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-2000:]}")
    with open(times, encoding="utf-8") as f:
        own, cpu = (float(x) for x in f.read().split()[-2:])
    m = re.search(r"the observer used ([0-9.]+) s of CPU", proc.stderr)
    return own, cpu, wall, float(m.group(1)) if m else None


def bench(name: str, folder: str, script: list[str], runs: int) -> dict[str, float]:
    cmds = tools(folder, script)
    own: dict[str, list[float]] = {t: [] for t in cmds}
    cpus: dict[str, list[float]] = {t: [] for t in cmds}
    wall: dict[str, list[float]] = {t: [] for t in cmds}
    cost: dict[str, list[float]] = {t: [] for t in cmds}
    for _ in range(runs):
        for tool, cmd in cmds.items():
            o, u, w, c = _once(cmd, folder)
            own[tool].append(o)
            cpus[tool].append(u)
            wall[tool].append(w)
            if c is not None:
                cost[tool].append(c)
    base, base_w = min(own["plain"]), min(wall["plain"])
    print(f"## {name}: plain program {base:.3f} s (min), median "
          f"{statistics.median(own['plain']):.3f} s, {runs} rounds")  # fmt: skip
    print(
        "  tool          program's time: min ratio (median)   program's CPU   command's wall"
        "   observer CPU"
    )
    ratios = {}
    for tool in cmds:
        if tool == "plain":
            continue
        r = min(own[tool]) / base
        r_med = statistics.median(own[tool]) / statistics.median(own["plain"])
        w = min(wall[tool]) / base_w
        u = min(cpus[tool]) / min(cpus["plain"])
        said = ""
        if cost[tool]:
            used = statistics.median(cost[tool])
            share = 100 * used / statistics.median(own[tool])
            said = f"{used:.2f} s ({share:.0f} % of a core)"
        ratios[tool] = r
        print(
            f"  {tool:<13} {r:5.3f}x (median {r_med:.3f}x)        {u:5.3f}x          "
            f"{w:5.2f}x          {said}"
        )
    return ratios


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
            "# summary, program's time (ratio of minimums): "
            + json.dumps({k: {t: round(r, 3) for t, r in v.items()} for k, v in summary.items()})
        )
    print(f"# total {time.monotonic() - start:.0f} s, load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
