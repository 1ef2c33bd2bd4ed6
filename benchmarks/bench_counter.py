"""The floors of the instruction counter (issue 35), side by side in one run, beside two
busy loops (started here, ended at the end).

Run: ``python benchmarks/bench_counter.py [--cases statement,program,whole,pytest,cost]
[--trials N] [--python312 PATH]``. Each case prints one line of counts, with the load
average at its start and end. Every counted run is one valgrind run a side.

* ``statement``: ``time --counter instructions --save`` of ``f(1000)`` (a loop of 1,000
  additions) and of ``f(1020)`` (2 % more), then ``compare --fail-above 1%``: exit 1
  (floor 20/20); and of ``f(1000)`` twice: exit 0 (floor 20/20). Beside it, in the same
  trials: pyperf (``pyperf timeit --fast`` both into files, ``compare_to``: slower and
  not "Not significant!", and its estimate within 1.00x-1.05x) and pytest-benchmark
  (``--benchmark-compare-fail=min:1%``: its exit code).
* ``program``: six functions in a loop (about 0.3 s), ``c`` passing 2 % more work in B,
  ``compare --a/--b --counter instructions --fail-above 1%`` on Python >= 3.12: ``c``
  listed as worse and no other function (floor 20/20); identical programs: exit 0 and
  nothing listed (20/20).
* ``whole``: the same on this interpreter (3.11: the whole run), ``c`` holding most of
  the run and 2 % slower, ``--fail-above 0.5%``: exit 1 (20/20); identical: exit 0
  (20/20).
* ``pytest``: a suite of three tests with counted blocks saved, then compared unchanged
  (0/N failed) and with one test's block 1.5 times the work (that test alone failed).
* ``cost``: the CPU of a counted run over a plain run's (children's CPU, ratio of medians
  over 7 interleaved rounds): the whole run (floor <= 30x), each function (<= 110x).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

CLI = [sys.executable, "-m", "onnxrt_backend_dev.monitoring"]
TIMEOUT = 1800
SETUP = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s"
PROGRAM = """
import json

def a(n):
    return sum(i * i for i in range(n))

def b(n):
    d = {{}}
    for i in range(n):
        d[str(i)] = i
    return len(d)

def c(n):
    s = 0
    for i in range(n):
        s += i % 7
    return s

def d(n):
    return json.dumps([{{"k": i, "v": [i, i + 1]}} for i in range(n)])

def e(n):
    return sorted(range(n, 0, -1))[:3]

def f(n):
    return max([float(i) for i in range(n)])

def main():
    for _ in range(10):
        a(20000); b(8000); c({c}); d(3000); e(30000); f(20000)

main()
"""


def _run(argv: Sequence[str], cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=TIMEOUT,
                          cwd=cwd, check=False)  # fmt: skip


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _write(folder: str, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _trials(n: int, one: Callable[[int], dict[str, bool]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in range(n):
        for key, ok in one(i).items():
            counts[key] = counts.get(key, 0) + int(ok)
        print(f"  trial {i + 1}/{n}: {counts}", file=sys.stderr, flush=True)
    return counts


def case_statement(folder: str, trials: int) -> None:
    start = _load()
    pyperf = shutil.which("pyperf") or os.path.join(os.path.dirname(sys.executable), "pyperf")

    def count(stmt: str, out: str) -> None:
        done = _run([*CLI, "time", "-q", "--counter", "instructions", "-s", SETUP, stmt,
                     "--save", out, "--force"])  # fmt: skip
        assert done.returncode == 0, done.stderr

    def one(i: int) -> dict[str, bool]:
        a, a2, b = (os.path.join(folder, f"{x}.json") for x in ("a", "a2", "b"))
        count("f(1000)", a)
        count("f(1000)", a2)
        count("f(1020)", b)
        slower = _run([*CLI, "compare", a, b, "--fail-above", "1%"]).returncode
        same = _run([*CLI, "compare", a, a2, "--fail-above", "1%"]).returncode
        found = {"slower exit 1": slower == 1, "identical exit 0": same == 0}
        if os.path.exists(pyperf):
            pa, pb = os.path.join(folder, "pa.json"), os.path.join(folder, "pb.json")
            for stmt, out in (("f(1000)", pa), ("f(1020)", pb)):
                _run([pyperf, "timeit", "-q", "--fast", "-s", SETUP, stmt, "-o", out])
            said = _run([pyperf, "compare_to", pa, pb]).stdout
            # compare_to says "Not significant!" or "1.02x slower" (its estimate kept)
            found["pyperf: significant slower"] = "slower" in said and "Not significant" not in said
            found["pyperf: within 1.00x-1.05x"] = any(f"1.0{d}x slower" in said for d in range(6))
            for p in (pa, pb):
                os.remove(p)
        found.update(_pytest_benchmark(folder))
        return found

    counts = _trials(trials, one)
    print(f"statement ({start} -> {_load()}): {counts} of {trials}")


def _pytest_benchmark(folder: str) -> dict[str, bool]:
    """pytest-benchmark on the same statement: saved, then the 2 % slower one compared
    with --benchmark-compare-fail=min:1%."""
    try:
        import pytest_benchmark  # noqa: F401
    except ImportError:
        return {}
    test = _write(folder, "test_pb.py", f"{SETUP}\n\nN = int(open('n.txt').read())\n\n"
                  "def test_f(benchmark):\n    benchmark(f, N)\n")  # fmt: skip
    store = os.path.join(folder, ".benchmarks")
    shutil.rmtree(store, ignore_errors=True)
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test,
            f"--benchmark-storage={store}", "-p", "no:onnxrt_monitoring"]  # fmt: skip
    _write(folder, "n.txt", "1000")
    _run([*base, "--benchmark-autosave"], cwd=folder)
    _write(folder, "n.txt", "1020")
    slower = _run([*base, "--benchmark-compare", "--benchmark-compare-fail=min:1%"], cwd=folder)
    return {"pytest-benchmark: slower failed": slower.returncode != 0}


def _listed(out: str) -> list[str]:
    return re.findall(r"\s(\S+) \(\S+:\d+\)  \[(?:worse|better)\]", out)


def case_program(folder: str, trials: int, python: str | None, threshold: str, main: int,
                 name: str) -> None:  # fmt: skip
    if python is None:
        print(f"{name}: skipped (no such interpreter)")
        return
    start = _load()
    a = _write(folder, "a.py", PROGRAM.format(c=main))
    a2 = _write(folder, "a2.py", PROGRAM.format(c=main))
    b = _write(folder, "b.py", PROGRAM.format(c=int(main * 1.02)))

    def compare(x: str, y: str) -> tuple[int, str]:
        done = _run([*CLI, "compare", "--a", f"{python} {x}", "--b", f"{python} {y}", "--counter",
                     "instructions", "--fail-above", threshold, "--top", "60"])  # fmt: skip
        return done.returncode, done.stdout

    def one(i: int) -> dict[str, bool]:
        code, out = compare(a, b)
        listed = _listed(out)
        same, out2 = compare(a, a2)
        found = {"slower exit 1": code == 1,
                 "identical exit 0, nothing listed": same == 0 and not _listed(out2)}  # fmt: skip
        if "functions (" in out:  # counted per function
            found["c named and no other"] = listed == ["c"]
        return found

    counts = _trials(trials, one)
    print(
        f"{name} ({python}, --fail-above {threshold}; {start} -> {_load()}): {counts} of {trials}"
    )


PYTEST_SUITE = """
def work(n):
    return sum(i * i for i in range(n))

def test_a(monitor_time):
    with monitor_time("a"):
        work({a})

def test_b(monitor_time):
    with monitor_time("b"):
        work(30000)

def test_c(monitor_time):
    monitor_time.measure("work(2000)", {{"work": work}}, repeat=5, number=4)
"""


def case_pytest(folder: str, trials: int) -> None:
    start = _load()
    test = os.path.join(folder, "test_suite.py")
    saved = os.path.join(folder, "base.json")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test,
            "--monitoring-counter", "instructions"]  # fmt: skip
    _write(folder, "test_suite.py", PYTEST_SUITE.format(a=20000))
    assert _run([*argv, "--monitoring-save", saved, "--monitoring-force"]).returncode == 0

    def one(i: int) -> dict[str, bool]:
        _write(folder, "test_suite.py", PYTEST_SUITE.format(a=20000))
        same = _run([*argv, "--monitoring-compare", saved])
        _write(folder, "test_suite.py", PYTEST_SUITE.format(a=30000))
        slow = _run([*argv, "--monitoring-compare", saved])
        failed = re.findall(r"FAILED \S+::(test_\w+)", slow.stdout)
        return {
            "unchanged passed": same.returncode == 0,
            "test_a alone failed": failed == ["test_a"],
        }

    counts = _trials(trials, one)
    print(f"pytest gate ({start} -> {_load()}): {counts} of {trials}")


def _children_cpu(argv: Sequence[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = _run(argv)
    assert done.returncode == 0, done.stderr
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def case_cost(folder: str, rounds: int, python: str | None) -> None:
    start = _load()
    for name, interpreter in (("whole run", sys.executable), ("per function", python)):
        if interpreter is None:
            continue
        prog = _write(folder, "cost.py", PROGRAM.format(c=400000))  # about 0.35 s
        plain, counted = [], []
        for _ in range(rounds):
            plain.append(_children_cpu([interpreter, prog]))
            counted.append(_counted_cpu(interpreter, prog))
        ratio_min = min(counted) / min(plain)
        ratio_med = statistics.median(counted) / statistics.median(plain)
        print(f"cost, {name} ({interpreter}): plain {statistics.median(plain):.3f} s CPU, "
              f"counted {statistics.median(counted):.2f} s: {ratio_min:.1f}x (median "
              f"{ratio_med:.1f}x)")  # fmt: skip
    print(f"cost ({start} -> {_load()})")


def _counted_cpu(python: str, prog: str) -> float:
    """The CPU of one counted run of ``prog`` by ``python`` (the tool's own start apart)."""
    code = (
        "import sys\n"
        "from onnxrt_backend_dev.monitoring._results.runner import Program, count_program\n"
        "from onnxrt_backend_dev.monitoring._run.supervise import Supervisor\n"
        "with Supervisor() as s, s.folder('bench-') as f:\n"
        "    c = count_program(Program((sys.argv[1], sys.argv[2]), sys.argv[1], 'path',"
        " sys.argv[2]), f, s)\n"
        "print(c.total, c.functions is not None)\n"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = _run([sys.executable, "-c", code, python, prog])
    assert done.returncode == 0, done.stderr
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    tool = _children_cpu(
        [sys.executable, "-c", "import onnxrt_backend_dev.monitoring._results.runner"]
    )
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) - tool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="statement,program,whole,pytest,cost")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--python312", default=None, help="a Python >= 3.12 (per function)")
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside (2)")
    args = parser.parse_args()
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {args.busy} busy loops, "
          f"Python {sys.version.split()[0]}")  # fmt: skip
    try:
        with tempfile.TemporaryDirectory(prefix="bench-counter-") as folder:
            cases = args.cases.split(",")
            if "statement" in cases:
                case_statement(folder, args.trials)
            if "program" in cases:
                case_program(folder, args.trials, args.python312, "1%", 40000, "program")
            if "whole" in cases:
                case_program(folder, args.trials, sys.executable, "0.5%", 400000, "whole run")
            if "pytest" in cases:
                case_pytest(folder, args.trials)
            if "cost" in cases:
                case_cost(folder, args.rounds, args.python312)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


if __name__ == "__main__":
    main()
