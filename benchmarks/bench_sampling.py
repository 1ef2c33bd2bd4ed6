"""The sampler (``profile script.py``) side by side with pyinstrument, py-spy and cProfile,
whole scripts, on the three workloads of issue 17.

Workloads (each one script, run as a child process by every tool):

- ``json``: ``json.dumps(obj, indent=2)`` of 40,000 nested records;
- ``pandas``: ``import pandas`` then ``read_csv`` of a generated 200,000-row CSV and a
  ``groupby().agg()`` (``main > load / agg``);
- ``ast``: ``ast.parse`` + ``ast.unparse`` of the 5 largest standard-library modules.

Measured:

- overhead: whole-script wall time under each tool / plain, as the ratio of the minimums
  of ``--runs`` interleaved runs, the ratio of the medians beside (a shared machine);
  ours at its default interval (2 ms, SIGPROF) through the command and through the
  library around ``runpy`` (the sampler without the command's start), and with
  ``--timer thread`` (a sampling thread, the design the SIGPROF timer replaces);
- hottest path: from the workload function down, built-ins left out, consecutive
  repeats folded; ours against py-spy's and pyinstrument's: how many of their
  functions ours names in the same order;
- pandas: the rows of our default text, the names it must show, and the pandas and
  numpy import times against pyinstrument's (medians over the runs), beside the truth
  without a profiler: ``python -X importtime`` (cumulative time of each top-level
  import) and the wall time ``python -c`` gains with each import;
- threads: three workers hashing ~1 s each, the share of each worker's time its
  function got; a 50 ms program's tree.

Run: ``python benchmarks/bench_sampling.py [--runs N] [--only NAME]`` (needs pyinstrument,
py-spy, pandas).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

PY = sys.executable
CLI = [PY, "-m", "onnxrt_backend_dev.monitoring", "profile", "-q"]
TIMEOUT = 600
# Bytecode caches on (as for an installed package), kept apart from the sources: with
# PYTHONDONTWRITEBYTECODE every run would compile the tools' modules again.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "bench_sampling_pycache")

JSON_SCRIPT = """
import json, random

def make():
    rnd = random.Random(0)
    return [{"id": i, "name": f"record-{i}", "score": rnd.random(),
             "tags": [f"t{rnd.randrange(50)}" for _ in range(3)],
             "owner": {"login": f"user{i % 997}", "active": i % 3 == 0, "quota": i * 7}}
            for i in range(40_000)]

def workload_json(obj):
    return len(json.dumps(obj, indent=2))

workload_json(make())
"""

PANDAS_SCRIPT = """
import sys
import numpy as np
import pandas as pd

def load(path):
    return pd.read_csv(path)

def agg(df):
    return df.groupby(["city", "key"]).agg({"value": ["mean", "max"], "count": "sum"})

def main(path):
    df = load(path)
    return len(agg(df))

main(sys.argv[1])
"""

AST_SCRIPT = """
import ast, os, sysconfig

def sources(n=5):
    stdlib = sysconfig.get_paths()["stdlib"]
    files = [os.path.join(stdlib, f) for f in os.listdir(stdlib) if f.endswith(".py")]
    files.sort(key=os.path.getsize, reverse=True)
    out = []
    for path in files[:n]:
        with open(path, encoding="utf-8") as f:
            out.append(f.read())
    return out

def workload_ast(srcs):
    return sum(len(ast.unparse(ast.parse(src))) for src in srcs)

workload_ast(sources())
"""

THREADS_SCRIPT = """
import hashlib, threading, time

def hasher(seconds):
    end = time.perf_counter() + seconds
    h = hashlib.sha256()
    while time.perf_counter() < end:
        h.update(b"x" * 256)

def main():
    workers = [threading.Thread(target=hasher, args=(1.0,), name=f"worker{i}") for i in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()

main()
"""

SHORT_SCRIPT = """
import time

def short_work():
    end = time.perf_counter() + 0.05
    n = 0
    while time.perf_counter() < end:
        n += sum(range(200))
    return n

short_work()
"""

ENTRIES = {"json": "workload_json", "pandas": "main", "ast": "workload_ast"}


def make_csv(path: str, rows: int = 200_000) -> None:
    import numpy
    import pandas

    rnd = numpy.random.default_rng(1)
    pandas.DataFrame(
        {
            "key": rnd.integers(0, 1000, rows),
            "city": numpy.char.add("c", rnd.integers(0, 40, rows).astype(str)),
            "value": rnd.random(rows).round(6),
            "count": rnd.integers(0, 100, rows),
        }
    ).to_csv(path, index=False)


# With --baseline TREE: the environment of "ours@baseline", the command run from that
# source tree (PYTHONPATH), beside this one's in the same rounds.
BASELINE_ENV: dict[str, str] = {}


def _run(cmd: Sequence[str], cwd: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Runs a command: its wall time and the CPU time of it and its children (less
    sensitive than wall time to other users of a shared machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=TIMEOUT,
        env=ENV if env is None else env,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


# The sampler through the library, around runpy: the sampler's own cost, without the
# command line's start (argument parsing, the commands' imports).
LIBRARY_RUNNER = """
import runpy, sys
from onnxrt_backend_dev.monitoring._report.sampling import Sampling
out, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
s = Sampling(program=script)
s.start()
try:
    runpy.run_path(script, run_name="__main__")
finally:
    s.stop().export(out)
"""


def tools(folder: str, script: list[str]) -> dict[str, list[str]]:
    """The command of each tool for one script (its outputs go into ``folder``)."""
    out = {
        "plain": [PY, *script],
        "sampler-lib": [PY, "-c", LIBRARY_RUNNER, os.path.join(folder, "lib.collapsed"), *script],
        "ours": [*CLI, "-o", os.path.join(folder, "ours.collapsed"), *script],
        "ours-inprocess": [
            *CLI,
            "--collector",
            "in-process",
            "-o",
            os.path.join(folder, "oi.collapsed"),
            *script,
        ],
        "run": [
            PY,
            "-m",
            "onnxrt_backend_dev.monitoring",
            "run",
            "-q",
            "-o",
            os.path.join(folder, "run.json"),
            *script,
        ],
        "pyinstrument": [
            PY,
            "-m",
            "pyinstrument",
            "-r",
            "session",
            "-o",
            os.path.join(folder, "pyi.pyisession"),
            *script,
        ],
        "cProfile": [PY, "-m", "cProfile", "-o", os.path.join(folder, "cp.prof"), *script],
    }
    if BASELINE_ENV:
        out["ours@baseline"] = [*CLI, "-o", os.path.join(folder, "base.collapsed"), *script]
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(PY), "py-spy")
    if os.path.exists(spy) and _ptrace_allowed(spy, folder):
        out["py-spy"] = [spy, "record", "-r", "250", "-f", "raw", "-o",
                         os.path.join(folder, "spy.txt"), "--", PY, *script]  # fmt: skip
    return out


def _ptrace_allowed(spy: str, folder: str) -> bool:
    try:
        proc = subprocess.run(
            [spy, "record", "-o", os.path.join(folder, "probe.txt"), "-f", "raw", "--", PY,
             "-c", "sum(range(10**6))"],
            capture_output=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


# ---------------------------------------------------------------- hottest paths


class Trie:
    """Stacks merged by function name from the workload's entry function down (stacks
    not under it left out), own time as a ``[self]`` child so a path stops where a
    function's own time is the largest part."""

    def __init__(self, entry: str = "") -> None:
        self.entry = entry
        self.weight = 0.0
        self.children: dict[str, Trie] = {}

    def add(self, path: Sequence[str], weight: float) -> None:
        if self.entry:
            short = [p.rsplit(".", 1)[-1] for p in path]
            if self.entry not in short:
                return
            path = path[short.index(self.entry) :]
        node = self
        node.weight += weight
        for name in [*path, "[self]"]:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = Trie()
            child.weight += weight
            node = child

    def hottest(self) -> list[str]:
        path, node = [], self
        while node.children:
            name, node = max(node.children.items(), key=lambda kv: kv[1].weight)
            path.append(name)
        return path


def _collapsed_names(line: str) -> tuple[list[str], float]:
    stack, _, count = line.rstrip("\n").rpartition(" ")
    names = [part.rsplit(" (", 1)[0] for part in stack.split(";")]
    return names, float(count)


def trie_of_collapsed(trie: Trie, path: str, thread: str | None = "thread MainThread") -> Trie:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            names, weight = _collapsed_names(line)
            if thread is not None:
                if not names or names[0] != thread:
                    continue
                names = names[1:]
            trie.add(names, weight)
    return trie


def trie_of_pyinstrument(trie: Trie, path: str) -> Trie:
    from pyinstrument.session import Session

    root = Session.load(path).root_frame()
    todo: list[tuple[Any, list[str]]] = [(root, [])] if root is not None else []
    while todo:
        frame, prefix = todo.pop()
        if frame.is_synthetic:  # [self]: counted in its parent's own time below
            continue
        if "pyinstrument" in (frame.file_path or ""):  # its own main, above the script
            todo.extend((c, prefix) for c in frame.children)
            continue
        name = str(frame.function)
        if frame.file_path == "<built-in>":
            name = f"<built-in> {name}"
        stack: list[str] = [*prefix, name]
        own = frame.time - sum(c.time for c in frame.children if not c.is_synthetic)
        if own > 0:
            trie.add(stack, own)
        todo.extend((c, stack) for c in frame.children)
    return trie


def normalized(path: Sequence[str], entry: str) -> list[str]:
    """From the entry down, built-ins and [self] out, repeats folded, names compared by
    their last dotted part (py-spy and pyinstrument qualify differently)."""
    names = [p.rsplit(".", 1)[-1] if not p.startswith("<") else p for p in path]
    if entry in names:
        names = names[names.index(entry) :]
    out: list[str] = []
    for name in names:
        if name == "[self]" or name.startswith(("<built-in>", "<method ")):
            continue
        if not out or out[-1] != name:
            out.append(name)
    return out


def first_split(trie: Trie, entry: str) -> str:
    """The first near-tie down the hottest path: the first node whose second heaviest
    child holds at least a quarter of its time, as ``a 52% / b 45%`` (where the hottest
    path of one run may go either way)."""
    node = trie
    while node.children:
        kids = sorted(node.children.items(), key=lambda kv: -kv[1].weight)
        if len(kids) > 1 and kids[1][1].weight >= 0.25 * node.weight:
            total = node.weight or 1.0
            (a, na), (b, nb) = kids[0], kids[1]
            return f"{a} {na.weight / total:.0%} / {b} {nb.weight / total:.0%}"
        node = kids[0][1]
    return "-"


def agreement(ours: list[str], theirs: list[str]) -> str:
    same = 0
    while same < min(len(ours), len(theirs)) and ours[same] == theirs[same]:
        same += 1
    return f"{same}/{len(theirs)}"


# ---------------------------------------------------------------- pandas floors


def import_times_collapsed(path: str, skip: int = 2, unit: float = 1e-6) -> dict[str, float]:
    """Seconds under the first ``<module>`` of pandas and numpy reached from the script.

    :param path: collapsed stacks (ours: a thread frame first; py-spy's: none)
    :param skip: frames before the first one the script runs (the thread, its <module>)
    :param unit: seconds per count (ours: microseconds; py-spy: one sample)
    """
    out = {"pandas": 0.0, "numpy": 0.0}
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            parts = stack.split(";")
            for part in parts[skip:]:
                if "importlib" in part:
                    continue
                for mod in out:
                    file = part.rsplit(" (", 1)[-1]
                    init = f"{mod}/__init__.py"
                    if part.startswith("<module> (") and (
                        file.startswith(init) or f"/{init}" in file
                    ):
                        out[mod] += float(count) * unit
                break
    return out


def import_times_pyinstrument(path: str) -> dict[str, float]:
    from pyinstrument.session import Session

    out = {"pandas": 0.0, "numpy": 0.0}
    root = Session.load(path).root_frame()
    todo = list(root.children) if root is not None else []
    while todo:  # down to the first pandas or numpy module, the user's own imports
        frame = todo.pop()
        found = [
            mod
            for mod in out
            if frame.function == "<module>" and f"/{mod}/__init__.py" in (frame.file_path or "")
        ]
        if found:
            out[found[0]] += frame.time
        else:
            todo.extend(frame.children)
    return out


def pandas_text(folder: str, script: list[str]) -> dict[str, Any]:
    out = os.path.join(folder, "pandas.txt")
    _run([*CLI, "-o", out, *script], folder)
    with open(out, encoding="utf-8") as f:
        text = f.read()
    tree = text.split("hot lines", 1)[0]
    rows = [line for line in tree.splitlines() if " %  " in line]
    wanted = ["main", "load", "read_csv", "agg", "DataFrameGroupBy.aggregate",
              "import pandas", "import numpy"]  # fmt: skip
    return {
        "text": text,
        "rows": len(rows),
        "missing": [w for w in wanted if f"  {w}  " not in tree],
    }


# The imports of the pandas script, in its order (numpy first, then pandas).
IMPORT_STEPS = {"pass": "pass", "numpy": "import numpy", "pandas": "import numpy; import pandas"}


def importtime_cumulative(code: str) -> dict[str, float]:
    """Seconds of the ``numpy`` and ``pandas`` imports (cumulative column) in ``python -X
    importtime -c code``: the interpreter's own account, no profiler (numpy nested under
    pandas when pandas imports it)."""
    proc = subprocess.run(
        [PY, "-X", "importtime", "-c", code], capture_output=True, text=True, timeout=TIMEOUT,
        env=ENV, check=True,
    )  # fmt: skip
    out = {"pandas": 0.0, "numpy": 0.0}
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[2].strip() in out:  # each module is imported once
            out[parts[2].strip()] = int(parts[1]) * 1e-6
    return out


def import_truth_once(folder: str, truth: dict[str, list[dict[str, float]]]) -> None:
    """One round of the import times without any profiler, run between the profiled
    runs (interleaved): ``-X importtime`` of the script's imports (numpy, then pandas)
    and of ``import pandas`` alone, and the wall time of ``python -c`` with each import
    added (the difference is the import's time). Appends to ``truth``'s lists."""
    walls = {key: _run([PY, "-c", code], folder)[0] for key, code in IMPORT_STEPS.items()}
    truth["importtime (script order)"].append(importtime_cumulative(IMPORT_STEPS["pandas"]))
    truth["importtime (import pandas alone)"].append(importtime_cumulative("import pandas"))
    truth["wall gained per import"].append(
        {"numpy": walls["numpy"] - walls["pass"], "pandas": walls["pandas"] - walls["numpy"]}
    )


def importtime_beside_ours(folder: str, script: list[str]) -> dict[str, float]:
    """Ours over ``-X importtime`` for numpy and pandas in the same process: the script
    run by ``profile`` with the interpreter's import timer on (the same imports, timed
    by both: whether the sampler loses or adds time inside an import)."""
    out = os.path.join(folder, "same.collapsed")
    proc = subprocess.run(
        [PY, "-X", "importtime", *CLI[1:], "-o", out, *script], capture_output=True,
        text=True, timeout=TIMEOUT, env=ENV, check=True, cwd=folder,
    )  # fmt: skip
    timed = {"pandas": 0.0, "numpy": 0.0}
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[2] in (" numpy", " pandas"):  # the script's own
            timed[parts[2].strip()] = int(parts[1]) * 1e-6
    ours = import_times_collapsed(out)
    return {m: ours[m] / timed[m] if timed[m] else float("nan") for m in timed}


TRUTHS = ("importtime (script order)", "importtime (import pandas alone)", "wall gained per import")


def _print_truth(truth: dict[str, list[dict[str, float]]], imports: dict[str, Any]) -> None:
    runs = len(truth[TRUTHS[0]])
    print(f"  import times without a profiler (medians of {runs}, interleaved with the runs):")
    for label in TRUTHS:
        cells = ", ".join(
            f"{mod} {statistics.median(d[mod] for d in truth[label]):.3f} s"
            for mod in ("numpy", "pandas")
        )
        print(f"    {label:<34} {cells}")
    reference = {m: statistics.median(d[m] for d in truth[TRUTHS[0]]) for m in ("numpy", "pandas")}
    for tool in ("ours", "pyinstrument", "py-spy"):
        if not imports[tool]:
            continue
        found = []
        for mod in ("numpy", "pandas"):
            value = statistics.median(d[mod] for d in imports[tool])
            ratio = value / reference[mod] if reference[mod] else float("nan")
            found.append(f"{mod} {value:.3f} s = {ratio:.2f}x importtime")
        print(f"    {tool + ' (profiled runs)':<34} {', '.join(found)}")


# ---------------------------------------------------------------- runs


def _print_imports(imports: dict[str, list[dict[str, float]]], runs: int) -> None:
    for mod in ("pandas", "numpy"):
        o = statistics.median(d[mod] for d in imports["ours"])
        p = statistics.median(d[mod] for d in imports["pyinstrument"])
        s = statistics.median(d[mod] for d in imports["py-spy"]) if imports["py-spy"] else 0
        ratio = o / p if p else float("nan")
        ratio_spy = o / s if s else float("nan")
        print(f"  import {mod}: ours {o:.3f} s, pyinstrument {p:.3f} s, py-spy {s:.3f} s "
              f"(ours / pyinstrument {ratio:.2f}, ours / py-spy {ratio_spy:.2f}, "
              f"medians of {runs})")  # fmt: skip


def _read_tries(tries: list[dict[str, Trie]], folder: str, spy: bool) -> None:
    """Adds the stacks of the last run of each tool to each set of tries."""
    for trie in tries:
        trie_of_collapsed(trie["ours"], os.path.join(folder, "ours.collapsed"))
        trie_of_pyinstrument(trie["pyinstrument"], os.path.join(folder, "pyi.pyisession"))
        if spy:
            trie_of_collapsed(trie["py-spy"], os.path.join(folder, "spy.txt"), None)


def bench(name: str, folder: str, script: list[str], runs: int) -> dict[str, Any]:
    cmds = tools(folder, script)
    entry = ENTRIES[name]
    tries = {t: Trie(entry) for t in ("ours", "pyinstrument", "py-spy")}
    times: dict[str, list[float]] = {t: [] for t in cmds}
    cpus: dict[str, list[float]] = {t: [] for t in cmds}
    imports: dict[str, list[dict[str, float]]] = {"ours": [], "pyinstrument": [], "py-spy": []}
    per_run: list[dict[str, Trie]] = []
    truth: dict[str, list[dict[str, float]]] = {label: [] for label in TRUTHS}
    same: list[dict[str, float]] = []
    _run(cmds["plain"], folder)  # warm-up: file cache, .pyc
    for _ in range(runs):  # interleaved: a busy minute hits every tool
        for tool, cmd in cmds.items():
            wall, cpu = _run(cmd, folder, BASELINE_ENV if tool == "ours@baseline" else None)
            times[tool].append(wall)
            cpus[tool].append(cpu)
        # The hottest paths of all runs together: a deep recursion has near ties. Each
        # run's own too, to see how often one run's path agrees.
        this_run = {t: Trie(entry) for t in tries}
        _read_tries([tries, this_run], folder, "py-spy" in cmds)
        per_run.append(this_run)
        if name == "pandas":
            import_truth_once(folder, truth)
            same.append(importtime_beside_ours(folder, script))
            imports["ours"].append(import_times_collapsed(os.path.join(folder, "ours.collapsed")))
            imports["pyinstrument"].append(
                import_times_pyinstrument(os.path.join(folder, "pyi.pyisession"))
            )
            if "py-spy" in cmds:  # 250 samples a second; its stacks start at the script
                spy_file = os.path.join(folder, "spy.txt")
                imports["py-spy"].append(import_times_collapsed(spy_file, 1, 1 / 250))
    base_min, base_med = min(times["plain"]), statistics.median(times["plain"])
    cpu_min = min(cpus["plain"])
    print(f"## {name}  (plain: min {base_min:.3f} s, median {base_med:.3f} s, {runs} runs)")
    print("  tool          wall: ratio of minimums (of medians)   CPU: ratio of minimums")
    ratios = {}
    for tool, values in times.items():
        if tool == "plain":
            continue
        r_min, r_med = min(values) / base_min, statistics.median(values) / base_med
        ratios[tool] = r_min
        print(f"  {tool:<13} {r_min:5.2f}x  (median {r_med:.2f}x)"
              f"                   {min(cpus[tool]) / cpu_min:5.2f}x")  # fmt: skip
    ours = normalized(tries["ours"].hottest(), entry)
    pyi = normalized(tries["pyinstrument"].hottest(), entry)
    print(f"  hottest, ours:         {' > '.join(ours)}")
    print(f"  hottest, pyinstrument: {' > '.join(pyi)}  -> ours agree {agreement(ours, pyi)}")
    result = {"name": name, "ratios": ratios, "pyi": agreement(ours, pyi)}
    if "py-spy" in cmds:
        spy = normalized(tries["py-spy"].hottest(), entry)
        print(f"  hottest, py-spy:       {' > '.join(spy)}  -> ours agree {agreement(ours, spy)}")
        result["spy"] = agreement(ours, spy)
    _print_per_run(per_run, entry, "py-spy" in cmds)
    if name == "pandas":
        _print_imports(imports, runs)
        _print_truth(truth, imports)
        cells = ", ".join(
            f"{m} {min(d[m] for d in same):.2f}-{max(d[m] for d in same):.2f}x"
            for m in ("numpy", "pandas")
        )
        print(f"    ours / -X importtime in the same process ({len(same)} runs): {cells}")
        txt = pandas_text(folder, script)
        print(f"  default text: {txt['rows']} rows, missing names: {txt['missing'] or 'none'}")
        print("  " + txt["text"].replace("\n", "\n  ").rstrip())
    return result


def _print_per_run(per_run: list[dict[str, Trie]], entry: str, spy: bool) -> None:
    """How often one run's hottest path agrees, and the near-tie that decides it."""
    others = ["pyinstrument", "py-spy"] if spy else ["pyinstrument"]
    paths = [{t: normalized(r[t].hottest(), entry) for t in r} for r in per_run]
    for other in others:
        cells = [agreement(p["ours"], p[other]) for p in paths]
        full = sum(p["ours"] == p[other] for p in paths)
        print(f"  per run, ours vs {other}: {', '.join(cells)} (same path in {full}/{len(paths)})")
    for tool in ["ours", *others]:
        splits = "; ".join(first_split(r[tool], entry) for r in per_run)
        print(f"  per run, first near-tie on {tool}'s path: {splits}")


def in_process(runs: int) -> None:
    """The sampler's own cost, in this process: the main thread's CPU time (where the
    SIGPROF handler runs; less sensitive than wall time to a loaded machine) of
    json.dumps(indent=2) of the 40,000 records and of the ast workload, plain and
    sampled at 1, 2 (default) and 5 ms, interleaved, ratio of minimums."""
    from onnxrt_backend_dev.monitoring._report.sampling import Sampling

    env: dict[str, Any] = {}
    exec(compile(JSON_SCRIPT.replace("workload_json(make())", ""), "json", "exec"), env)
    exec(compile(AST_SCRIPT.replace("workload_ast(sources())", ""), "ast", "exec"), env)
    obj, srcs = env["make"](), env["sources"]()
    work = {"json": lambda: env["workload_json"](obj), "ast": lambda: env["workload_ast"](srcs)}
    print("## in process: main-thread CPU time, sampled / plain (ratio of minimums, median)")
    for name, fct in work.items():
        modes = [0.0, 0.001, 0.002, 0.005]
        cpu: dict[float, list[float]] = {m: [] for m in modes}
        samples: dict[float, int] = {}
        for _ in range(runs):
            for m in modes:
                s = Sampling(m) if m else None
                t0 = time.thread_time()
                if s is not None:
                    s.start()
                fct()
                if s is not None:
                    samples[m] = s.stop().profile.samples
                cpu[m].append(time.thread_time() - t0)
        base, med = min(cpu[0.0]), statistics.median(cpu[0.0])
        cells = ", ".join(
            f"{1000 * m:g} ms {min(cpu[m]) / base:.3f}x ({statistics.median(cpu[m]) / med:.3f}x,"
            f" {samples[m]} samples)"
            for m in modes[1:]
        )
        print(f"  {name}: plain {base:.3f} s CPU; {cells}")


def threads_and_short(folder: str) -> None:
    path = os.path.join(folder, "threads.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(THREADS_SCRIPT)
    out = os.path.join(folder, "threads.json")
    _run([*CLI, "-o", out, path], folder)
    with open(out, encoding="utf-8") as f:
        doc = json.load(f)
    print("## threads (3 workers hashing 1 s each, the main thread joining)")
    for th in doc["threads"]:
        if not th["name"].startswith("worker"):
            continue
        share = sum(r["wall"] for r in th["rows"] if r["name"] == "hasher") / (th["wall"] or 1)
        print(f"  {th['name']}: {th['wall']:.3f} s sampled, hasher {100 * share:.1f} %")
    short = os.path.join(folder, "short.py")
    with open(short, "w", encoding="utf-8") as f:
        f.write(SHORT_SCRIPT)
    txt = os.path.join(folder, "short.txt")
    _run([*CLI, "-o", txt, short], folder)
    with open(txt, encoding="utf-8") as f:
        print("## a 50 ms program, default text\n  " + f.read().replace("\n", "\n  ").rstrip())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="interleaved runs per tool (7)")
    parser.add_argument(
        "--only", choices=["json", "pandas", "ast", "threads", "inprocess"], default=None
    )
    parser.add_argument(
        "--baseline",
        metavar="TREE",
        default=None,
        help="also run the command from this source tree (PYTHONPATH), as ours@baseline",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    if args.baseline is not None:
        BASELINE_ENV.update(ENV, PYTHONPATH=os.path.abspath(args.baseline))
    start = time.perf_counter()
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# bench_sampling  {now}")
    print(f"# {platform.platform()}, python {platform.python_version()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")  # fmt: skip
    results = []
    with tempfile.TemporaryDirectory() as folder:
        csv = os.path.join(folder, "data.csv")
        scripts: dict[str, Callable[[], list[str]]] = {}
        for name, source in (("json", JSON_SCRIPT), ("pandas", PANDAS_SCRIPT), ("ast", AST_SCRIPT)):
            path = os.path.join(folder, f"{name}_script.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
            extra = [csv] if name == "pandas" else []
            scripts[name] = lambda path=path, extra=extra: [path, *extra]  # type: ignore[misc]
        for name, script in scripts.items():
            if args.only and name != args.only:
                continue
            if name == "pandas":
                make_csv(csv)
            results.append(bench(name, folder, script(), args.runs))
        if args.only in (None, "threads"):
            threads_and_short(folder)
        if args.only in (None, "inprocess"):
            in_process(args.runs)
    print("# summary (ratio of minimums)")
    for r in results:
        cells = ", ".join(f"{t} {v:.2f}x" for t, v in r["ratios"].items())
        paths = f"path vs pyinstrument {r['pyi']}" + (
            f", vs py-spy {r['spy']}" if "spy" in r else ""
        )
        print(f"  {r['name']:<7} {cells}; {paths}")
    print(f"# total {time.perf_counter() - start:.0f} s, load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
