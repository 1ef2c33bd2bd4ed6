"""The time-based floors of issue 35 (verdicts a CI can gate on), side by side with pyperf's
``compare_to`` and pytest-benchmark's ``--benchmark-compare-fail`` on the same cases.

Run: ``python benchmarks/bench_gate_floors.py [--cases six,shared,pytest] [--trials N]
[--busy] [--no-anchors] [--json FILE]`` (the anchors need ``pip install pyperf
pytest-benchmark``). The load average is printed beside each case (the machine is shared:
a loaded machine's timings are noisier, so these are the figures of that load).

* ``six``: a program of six functions called in a loop (about 0.5 s of CPU), ``c``
  holding about 40 % of it. Against it, ``compare --a/--b`` at its defaults (20 runs a
  side, sampled, CPU clock, ``--fail-above 5%``) of: ``c`` 25 % faster (floor: exit 1 in
  0/N), ``c`` twice slower (floor: no unchanged function listed better or worse in
  >= 19/20), an identical copy (floor: exit 1 in <= 1/20). Beside it, pyperf (``command
  --fast`` a side, then ``compare_to``: significant, and which way) and pytest-benchmark
  (the program's ``main`` benchmarked, saved, then compared with
  ``--benchmark-compare-fail=median:5%``).
* ``shared``: twenty callers ``f00``..``f19`` of one ``spin(n)``, ``f07`` passing 40 %
  more work in B: ``compare --a/--b`` at its defaults and the issue's recipe (``profile
  --repeat 5 --save`` a side, then ``compare``): ``f07 → spin`` named or exit 3, never
  exit 0 (floor: 20/20).
* ``pytest``: an unchanged test file (measured pure-Python blocks and a block timed
  once), saved then compared, N sessions a configuration: ``--monitoring-clock cpu`` and
  the default wall clock, quiet and beside two busy loops: sessions with a failed test
  (floor: 0/20); pytest-benchmark on the same work with ``--benchmark-compare-fail
  median:10%`` beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

CLI = [sys.executable, "-m", "onnxrt_backend_dev.monitoring"]
TIMEOUT = 1800
# The six functions' work: c holds about 40 % of the run's 0.5 s of CPU.
SIX = {"a": 61000, "b": 68000, "c": 120000, "d": 103000, "e": 52000, "f": 34000}
UNCHANGED = ("a", "b", "d", "e", "f", "main")

SIX_TEXT = """import sys


def a(n):
    s = 0
    for i in range(n):
        s += i
    return s


def b(n):
    return [i * 2 for i in range(n)]


def c(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def d(n):
    return sorted(range(n, 0, -1))


def e(n):
    return sum(i % 3 for i in range(n))


def f(n):
    x = {{}}
    for i in range(n):
        x[i] = i
    return len(x)


def main():
    for _ in range(40):
        a({a}); b({b}); c({c}); d({d}); e({e}); f({f})


if __name__ == "__main__":
    main()
"""


def six_program(c: float = 1.0) -> str:
    """The six functions, ``c`` doing ``c`` times its work."""
    return SIX_TEXT.format(**{**SIX, "c": int(SIX["c"] * c)})


def shared_program(slow: float, n: int = 5000, loops: int = 240) -> str:
    """Twenty callers of one ``spin``, ``f07`` passing ``slow`` times the work."""
    lines = [
        "def spin(n):",
        "    s = 0",
        "    for i in range(n):",
        "        s += i",
        "    return s",
    ]
    for k in range(20):
        lines += [
            "",
            "",
            f"def f{k:02d}():",
            f"    return spin({int(n * (slow if k == 7 else 1))})",
        ]
    lines += ["", "", "def main():", f"    for _ in range({loops}):"]
    lines += [f"        f{k:02d}()" for k in range(20)]
    return "\n".join([*lines, "", "", 'if __name__ == "__main__":', "    main()", ""])


SUITE = """
def squares(n):
    return sum(i * i for i in range(n))


def words(n):
    return " ".join(str(i) for i in range(n))


def table(n):
    return {i: i % 7 for i in range(n)}


def test_squares(monitor_time):
    monitor_time.measure(lambda: squares(20000), repeat=15, number=5, label="squares")


def test_words(monitor_time):
    monitor_time.measure(lambda: words(10000), repeat=15, number=5, label="words")


def test_table(monitor_time):
    monitor_time.measure(lambda: table(20000), repeat=15, number=5, label="table")


def test_sorted(monitor_time):
    data = list(range(50000, 0, -1))
    monitor_time.measure(lambda: sorted(data), repeat=15, number=5, label="sorted")


def test_once(monitor_time):
    with monitor_time("block"):
        squares(300000)
"""

BENCH_SUITE = """
import importlib.util, os

def _main():
    spec = importlib.util.spec_from_file_location("prog", os.environ["PROG"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main

def test_program(benchmark):
    benchmark(_main())
"""

BENCH_UNCHANGED = """
def squares(n):
    return sum(i * i for i in range(n))


def test_squares(benchmark):
    benchmark(squares, 20000)


def test_table(benchmark):
    benchmark(lambda: {i: i % 7 for i in range(20000)})
"""


def load() -> str:
    """The load averages, one, five and fifteen minutes."""
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def _write(folder: str, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _run(cmd: Sequence[str], cwd: str | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(cmd), cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, check=False,
        env={**os.environ, **env},
    )  # fmt: skip


def ours(a: str, b: str) -> tuple[int, list[str], str]:
    """``compare --a/--b`` at its defaults: the exit code, the listed changes, the
    verdict."""
    done = _run([*CLI, "compare", "--a", f"{sys.executable} {a}", "--b", f"{sys.executable} {b}",
                 "--format", "json", "-q", *EXTRA])  # fmt: skip
    if done.returncode == 2:
        raise SystemExit(f"compare failed: {done.stderr.strip()}")
    doc = json.loads(done.stdout)
    return done.returncode, _listed(doc), doc["verdict"]["text"] + _f07(doc)


def _f07(doc: dict[str, Any]) -> str:
    """The test of the path ``f07 → spin``, when the comparison has it."""
    for e in doc["entries"]:
        if e["figure"] == "path" and e["path"][-2:] == ["f07", "spin"] and e["tested"]:
            return (
                f" [f07 → spin {e['change']:+.1%}, p = {e['p_value']:.2g}, "
                f"{e['p_adjusted']:.2g} corrected]"
            )
    return ""


def recipe(folder: str, a: str, b: str) -> tuple[int, list[str], str]:
    """The issue's recipe: ``profile --repeat 5 --save`` a side, then ``compare``."""
    saved = []
    for name, script in (("ra.json", a), ("rb.json", b)):
        out = os.path.join(folder, name)
        done = _run([*CLI, "profile", "--repeat", "5", "--save", out, "--force", script])
        if done.returncode != 0:
            raise SystemExit(f"profile failed: {done.stderr.strip()[-300:]}")
        saved.append(out)
    done = _run([*CLI, "compare", *saved, "--format", "json", "-q"])
    if done.returncode == 2:
        raise SystemExit(f"compare failed: {done.stderr.strip()}")
    doc = json.loads(done.stdout)
    return done.returncode, _listed(doc), doc["verdict"]["text"] + _f07(doc)


def _listed(doc: dict[str, Any]) -> list[str]:
    return [
        (" → ".join(e["shown"]) if e["shown"] else e["function"]) + f" {e['verdict']}"
        for e in doc["entries"]
        if e["verdict"] and e["file"] is not None
    ]


def pyperf(folder: str, a: str, b: str) -> str:
    """pyperf ``command --fast`` a side, then ``compare_to``: ``slower``, ``faster`` (when
    significant) or ``same``."""
    outs = []
    for name, script in (("pa.json", a), ("pb.json", b)):
        out = os.path.join(folder, name)
        if os.path.exists(out):
            os.remove(out)
        done = _run([sys.executable, "-m", "pyperf", "command", "--fast", "-q", "-o", out, "--",
                     sys.executable, script])  # fmt: skip
        if done.returncode != 0:
            return "error"
        outs.append(out)
    text = _run([sys.executable, "-m", "pyperf", "compare_to", *outs]).stdout
    if "Not significant" in text:
        return "same"
    return "slower" if "slower" in text else ("faster" if "faster" in text else "same")


def pytest_benchmark(folder: str, a: str, b: str, fail: str = "median:5%") -> int:
    """pytest-benchmark: A's ``main`` saved, B's compared with
    ``--benchmark-compare-fail``: its exit code (1 a failure)."""
    storage = os.path.join(folder, "pbstore")
    shutil.rmtree(storage, ignore_errors=True)
    _write(folder, "test_prog_bench.py", BENCH_SUITE)
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
            "no:onnxrt_monitoring", "test_prog_bench.py",
            f"--benchmark-storage={storage}"]  # fmt: skip
    _run([*base, "--benchmark-save=a"], cwd=folder, PROG=a)
    compare = [*base, "--benchmark-compare", f"--benchmark-compare-fail={fail}"]
    return _run(compare, cwd=folder, PROG=b).returncode


@contextmanager
def busy(on: bool) -> Iterator[None]:
    """Two busy loops beside, when ``on``."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"])
        for _ in range(2 if on else 0)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def case_six(folder: str, trials: int, anchors: bool, out: dict[str, Any]) -> None:
    base = _write(folder, "six_a.py", six_program())
    variants = {
        "faster": _write(folder, "six_faster.py", six_program(0.75)),
        "slower": _write(folder, "six_slower.py", six_program(2.0)),
        "identical": _write(folder, "six_same.py", six_program()),
    }
    for name, other in variants.items():
        start = load()
        rows: list[dict[str, Any]] = []
        for _ in range(trials):
            row: dict[str, Any] = {"exit": None, "listed": [], "verdict": ""}
            if not ANCHORS_ONLY:
                code, listed, text = ours(base, other)
                row = {"exit": code, "listed": listed, "verdict": text}
            if anchors:
                row["pyperf"] = pyperf(folder, base, other)
                row["pytest-benchmark"] = pytest_benchmark(folder, base, other)
            rows.append(row)
            print(f"    {name}: {row}", flush=True)
        out[f"six {name}"] = {"load": [start, load()], "trials": rows}
        exits = [r["exit"] for r in rows]
        wrong = sum(1 for r in rows if any(_function(x) in UNCHANGED for x in r["listed"]))
        line = f"- six/{name} (load {start} -> {load()})" + (
            ""
            if ANCHORS_ONLY
            else f": exit 1 in {exits.count(1)}/{trials}, 3 in {exits.count(3)}/{trials}, 0 in "
            f"{exits.count(0)}/{trials}; an unchanged function listed better or worse in "
            f"{wrong}/{trials}"
        )
        if anchors:
            perf = [r["pyperf"] for r in rows]
            bench = [r["pytest-benchmark"] for r in rows]
            line += (
                f"; pyperf compare_to slower {perf.count('slower')}, faster "
                f"{perf.count('faster')}, not significant {perf.count('same')}; "
                f"pytest-benchmark --benchmark-compare-fail=median:5% failed "
                f"{sum(1 for x in bench if x != 0)}/{trials}"
            )
        print(line, flush=True)


def _function(listed: str) -> str:
    """The function a listed change is about: ``c`` of ``main → c worse``, ``b`` of
    ``b.<locals>.<listcomp> (six.py:8) better``."""
    return listed.rsplit(" ", 1)[0].split(" → ")[-1].split(" ")[0].split(".")[0]


def _names_f07(listed: list[str]) -> bool:
    return any(re.match(r"(.* → )?f07 → spin worse", x) for x in listed)


def case_shared(folder: str, trials: int, anchors: bool, out: dict[str, Any]) -> None:
    a = _write(folder, "shared_a.py", shared_program(1.0, loops=SHARED_LOOPS))
    b = _write(folder, "shared_b.py", shared_program(1.4, loops=SHARED_LOOPS))
    for name, run in (("defaults", lambda: ours(a, b)), ("recipe", lambda: recipe(folder, a, b))):
        if name in SKIP:
            continue
        start = load()
        rows: list[dict[str, Any]] = []
        for _ in range(trials):
            code, listed, text = run()
            rows.append(
                {"exit": code, "listed": listed, "f07": _names_f07(listed), "verdict": text}
            )
            print(f"    shared {name}: {rows[-1]}", flush=True)
        out[f"shared {name}"] = {"load": [start, load()], "trials": rows}
        ok = sum(1 for r in rows if r["f07"] or r["exit"] == 3)
        others = sum(1 for r in rows if any(re.search(r"f(?!07)\d\d", x) for x in r["listed"]))
        print(
            f"- shared/{name} (load {start} -> {load()}): f07 → spin named or exit 3 in "
            f"{ok}/{trials} (named {sum(r['f07'] for r in rows)}, exit 0 in "
            f"{sum(1 for r in rows if r['exit'] == 0)}); another caller listed in "
            f"{others}/{trials}",
            flush=True,
        )


def case_pytest(folder: str, trials: int, anchors: bool, out: dict[str, Any]) -> None:
    _write(folder, "test_suite.py", SUITE)
    _write(folder, "test_unchanged_bench.py", BENCH_UNCHANGED)
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    for loaded in (x == "busy" for x in LOADS):
        with busy(loaded):
            for clock in CLOCKS:
                start = load()
                rows: list[dict[str, Any]] = []
                for _ in range(trials):
                    args = [*pytest, "test_suite.py", "--monitoring-clock", clock]
                    _run([*args, "--monitoring-save", "base.json", "--monitoring-force"],
                         cwd=folder)  # fmt: skip
                    done = _run([*args, "--monitoring-compare", "base.json", "--monitoring-save",
                                 "now.json", "--monitoring-force"], cwd=folder)  # fmt: skip
                    why = [ln.strip() for ln in done.stdout.splitlines()
                           if ln.strip().startswith(("time ", "undecided: "))]  # fmt: skip
                    rows.append({"exit": done.returncode, "lines": why, **_moved(folder)})
                out[f"pytest {clock} busy={loaded}"] = {"load": [start, load()], "trials": rows}
                failed = sum(1 for r in rows if r["exit"] != 0)
                undecided = sum(1 for r in rows if any("undecided" in x for x in r["lines"]))
                print(
                    f"- pytest gate, unchanged file, --monitoring-clock {clock}, "
                    f"{'beside two busy loops' if loaded else 'quiet'} (load {start} -> "
                    f"{load()}): sessions failed {failed}/{trials}, with a figure undecided "
                    f"{undecided}/{trials}",
                    flush=True,
                )
                for r in rows:
                    if r["exit"] != 0:
                        print(f"    failed: {' | '.join(r['lines'])[:400]}", flush=True)
                print(f"    {_spread(rows)}", flush=True)
            if anchors:
                start = load()
                storage = os.path.join(folder, "pbstore_unchanged")
                fails = 0
                for _ in range(trials):
                    shutil.rmtree(storage, ignore_errors=True)
                    base = [*pytest, "-p", "no:onnxrt_monitoring", "test_unchanged_bench.py",
                            f"--benchmark-storage={storage}"]  # fmt: skip
                    _run([*base, "--benchmark-save=a"], cwd=folder)
                    done = _run([*base, "--benchmark-compare",
                                 "--benchmark-compare-fail=median:10%"], cwd=folder)  # fmt: skip
                    fails += done.returncode != 0
                print(
                    f"- pytest-benchmark, unchanged file, --benchmark-compare-fail=median:10%, "
                    f"{'beside two busy loops' if loaded else 'quiet'} (load {start} -> "
                    f"{load()}): sessions failed {fails}/{trials}",
                    flush=True,
                )
                out[f"pytest-benchmark busy={loaded}"] = {"load": [start, load()], "failed": fails}


def _spread(rows: list[dict[str, Any]]) -> str:
    """The spread of the figures' log ratios between two sessions, before and after the
    machine's shift the references showed."""
    raw, after = [], []
    for r in rows:
        found = re.search(r"was ([-+]\d+\.\d)% slower", r.get("shift") or "")
        shift = math.log1p(float(found.group(1)) / 100) if found else 0.0
        for x in (r.get("moved") or {}).values():
            raw.append(x)
            after.append(x - shift)
    if len(raw) < 2:
        return "figures moved: n/a"
    return (
        f"figures' log ratio between sessions: sd {statistics.stdev(raw):.3f}, "
        f"{statistics.stdev(after):.3f} once the references' shift is out "
        f"({len(raw)} figures)"
    )


def _moved(folder: str) -> dict[str, Any]:
    """How each figure of two saved sessions moved (the medians' log ratio, before the
    machine's shift is taken out) and the shift ``compare`` took out."""
    done = _run([*CLI, "compare", "base.json", "now.json", "--format", "json", "-q"], cwd=folder)
    if done.returncode == 2:
        return {"moved": None}
    doc = json.loads(done.stdout)
    moved = {
        e["function"].rsplit("::", 1)[0]: round(math.log(e["b"]["median"] / e["a"]["median"]), 4)
        for e in doc["entries"]
        if e["figure"] == "time" and e["a"].get("median") and e["b"].get("median")
    }
    notes = [n for n in doc["notes"] if n.startswith("the machine was")]
    return {"moved": moved, "shift": notes[0] if notes else ""}


CASES = {"six": case_six, "shared": case_shared, "pytest": case_pytest}
# --anchors-only: the six cases' pyperf and pytest-benchmark alone.
ANCHORS_ONLY = False
# The shared case's rounds (240: about 0.5 s of CPU, 25 ms a caller).
SHARED_LOOPS = 240
# More options for compare --a/--b (--compare-args "--clock wall").
EXTRA: list[str] = []
SKIP: list[str] = []
# The pytest case's clocks and loads.
CLOCKS = ["cpu", "wall"]
LOADS = ["quiet", "busy"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--no-anchors", action="store_true", help="ours only")
    parser.add_argument("--json", default=None, help="write every trial's figures here")
    parser.add_argument("--anchors-only", action="store_true", help="six: the anchors alone")
    parser.add_argument("--shared-loops", type=int, default=240, help="shared: its rounds")
    parser.add_argument("--compare-args", default="", help="more options of compare --a/--b")
    parser.add_argument("--skip", default="", help="shared: defaults or recipe, to skip")
    parser.add_argument("--clocks", default="cpu,wall", help="pytest: the clocks")
    parser.add_argument("--loads", default="quiet,busy", help="pytest: quiet, busy or both")
    args = parser.parse_args(argv)
    EXTRA[:] = args.compare_args.split()
    CLOCKS[:] = args.clocks.split(",")
    LOADS[:] = args.loads.split(",")
    SKIP[:] = args.skip.split(",")
    global ANCHORS_ONLY, SHARED_LOOPS
    ANCHORS_ONLY, SHARED_LOOPS = args.anchors_only, args.shared_loops
    print(
        f"# {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load {load()}",
        flush=True,
    )
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in args.cases.split(","):
            CASES[name](folder, args.trials, not args.no_anchors, out)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
