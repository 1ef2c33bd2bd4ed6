"""The floors of issue 28 (diffs you can trust), side by side in one run.

Run: ``python benchmarks/bench_compare_floors.py [--cases shared,pipeline,identical,five,
gate,cost,pytest] [--trials N]`` (``five`` needs ``pip install pyperf``). Each case prints
one line of counts; the load average is printed at the start and the end (the machine is
shared: the timings of a loaded machine are noisier, so these are the figures of that
load).

* ``shared``: twenty functions each call one shared ``spin(n)``; in B ``f07`` passes 40 %
  more work. 5 runs a side, sampled (``compare --a/--b`` at ``--repeat 5``) and
  ``--cprofile``. Counted per trial: the path ``f07 → spin`` listed where the change
  starts (floor: >= 19/20), another caller listed (floor: <= 1/20).
* ``pipeline``: a three-stage pipeline (``load`` parses JSON, ``score`` computes,
  ``save`` dumps JSON; about 0.6 s of CPU a run), ``score`` 15 % slower in B, 10 runs a
  side, sampled and ``--cprofile``: ``score`` named (>= 18/20) and no unchanged function
  listed as worse or better (>= 19/20 clean; ``math.sqrt``, which ``score`` calls 15 %
  more often, is not unchanged).
* ``identical``: two copies of the pipeline at ``compare --a/--b``'s defaults: trials with
  any listed change or a non-zero exit (<= 1/20).
* ``five``: a whole program made 5 % slower (one of its two functions 10 % slower, about
  118 -> 123 ms a run), ``compare --a/--b`` at its default repeats: found (exit 1 and the
  slowed function listed) in >= 25/30, false alarms on identical programs <= 1/30;
  beside it, in the same trials, ``time -p 10 --compare`` of the two runs and pyperf
  (``pyperf command`` then ``compare_to``).
* ``gate``: ``time -q "sum(range(1000))" --save a.json``, the same with ``range(1100)``
  into ``b.json``, ``compare a.json b.json --fail-above 5%``: the exit code (never 0).
* ``cost``: ``compare --a/--b --repeat 10`` of two scripts of about 1 s: its wall time
  over the 20 plain runs' own (floor: <= 1.3), interleaved with the plain runs.
* ``pytest``: a suite (a measured CPU-bound block on ``--monitoring-clock cpu`` and a
  block timed once) saved, then compared unchanged ``--trials`` times beside two busy
  loops: sessions with a failed test (floor: <= 1/20), and those with an undecided figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

CLI = [sys.executable, "-m", "onnxrt_backend_dev.monitoring"]
TIMEOUT = 1800


def _write(folder: str, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def shared_program(slow: float, n: int = 200_000, rounds: int = 15) -> str:
    """Twenty callers of one ``spin``; ``f07`` passes ``slow`` times the work."""
    lines = [
        "def spin(n):",
        "    t = 0",
        "    for i in range(n):",
        "        t += i",
        "    return t",
        "",
    ]
    for k in range(20):
        work = round(n * slow) if k == 7 else n
        lines += [f"def f{k:02d}():", f"    return spin({work})", ""]
    lines += ["def main():", f"    for _ in range({rounds}):"]
    lines += [f"        f{k:02d}()" for k in range(20)]
    lines += ["", "main()", ""]
    return "\n".join(lines)


def pipeline_program(slow: float) -> str:
    """load (JSON parsing), score (arithmetic), save (JSON dumping): about 0.15 s each."""
    return f"""import json, math

TEXT = json.dumps([{{"id": i, "x": i * 0.5, "tags": ["a", "b", str(i)]}} for i in range(8000)])

def load():
    rows = []
    for _ in range(12):
        rows = json.loads(TEXT)
    return rows

def score(rows):
    total = 0.0
    for _ in range({round(300 * slow)}):
        for row in rows:
            total += math.sqrt(row["x"] + 1.0)
    return total

def save(rows):
    out = ""
    for _ in range(6):
        out = json.dumps(rows, indent=1)
    return len(out)

def main():
    rows = load()
    score(rows)
    save(rows)

main()
"""


def five_program(slow: float) -> str:
    """Two functions of about 50 ms each; ``slowed`` is ``slow`` times as long."""
    return f"""def slowed():
    s = 0
    for i in range({round(1_300_000 * slow)}):
        s += i
    return s

def steady():
    s = 0
    for i in range(1_300_000):
        s += i * 2
    return s

slowed()
steady()
"""


def _compare(a: str, b: str, *argv: str) -> tuple[int, dict]:
    cmd = [*CLI, "compare", "--a", f"{sys.executable} {a}", "--b", f"{sys.executable} {b}"]
    done = subprocess.run(
        [*cmd, "--format", "json", "-q", *argv], capture_output=True, text=True,
        timeout=TIMEOUT, check=False,
    )  # fmt: skip
    if done.returncode == 2:
        raise SystemExit(f"compare failed: {done.stderr.strip()}")
    return done.returncode, json.loads(done.stdout)


def _listed(doc: dict) -> list[str]:
    return [
        " → ".join(e["shown"]) if e["shown"] else e["function"]
        for e in doc["entries"]
        if e["verdict"] and e["file"] is not None
    ]


def case_shared(folder: str, trials: int) -> None:
    a = _write(folder, "shared_a.py", shared_program(1.0))
    b = _write(folder, "shared_b.py", shared_program(1.4))
    for how in ([], ["--cprofile"]):
        named = others = 0
        seconds = []
        for _ in range(trials):
            begin = time.perf_counter()
            _, doc = _compare(a, b, "--repeat", "5", *how)
            seconds.append(time.perf_counter() - begin)
            listed = _listed(doc)
            named += "f07 → spin" in listed
            others += any(x.startswith("f") and x != "f07 → spin" for x in listed)
        what = "cProfile" if how else "sampled"
        print(
            f"- shared callee, {what}, 5 runs a side: f07 → spin named in {named}/{trials}, "
            f"another caller listed in {others}/{trials} (median {statistics.median(seconds):.0f}"
            " s a trial)",
            flush=True,
        )


# score's own callee (called 15 % more often): listed with it, as spin with f07.
_SCORE = ("score", "math.sqrt")


def case_pipeline(folder: str, trials: int) -> None:
    a = _write(folder, "pipe_a.py", pipeline_program(1.0))
    b = _write(folder, "pipe_b.py", pipeline_program(1.15))
    for how in ([], ["--cprofile"]):
        named = clean = 0
        for _ in range(trials):
            _, doc = _compare(a, b, "--repeat", "10", *how)
            listed = _listed(doc)
            named += any("score" in x for x in listed)
            clean += not [x for x in listed if not any(s in x for s in _SCORE)]
        what = "cProfile" if how else "sampled"
        print(
            f"- pipeline, score 15 % slower, 10 runs a side ({what}): score named in "
            f"{named}/{trials}, no unchanged function listed in {clean}/{trials}",
            flush=True,
        )


def case_identical(folder: str, trials: int) -> None:
    a = _write(folder, "same_a.py", pipeline_program(1.0))
    b = _write(folder, "same_b.py", pipeline_program(1.0))
    alarms = 0
    for _ in range(trials):
        code, doc = _compare(a, b)
        alarms += code != 0 or bool(_listed(doc))
    print(
        f"- identical programs, compare --a/--b defaults (20 runs a side, sampled): false "
        f"alarms (a listed change or a non-zero exit) in {alarms}/{trials}",
        flush=True,
    )


def _pyperf_significant(folder: str, a: str, b: str) -> bool:
    outs = []
    for name, script in (("pa.json", a), ("pb.json", b)):
        out = os.path.join(folder, name)
        if os.path.exists(out):
            os.remove(out)
        subprocess.run(
            [sys.executable, "-m", "pyperf", "command", "-q", "-o", out, "--",
             sys.executable, script], check=True, capture_output=True, timeout=TIMEOUT,
        )  # fmt: skip
        outs.append(out)
    done = subprocess.run(
        [sys.executable, "-m", "pyperf", "compare_to", *outs], capture_output=True, text=True,
        timeout=TIMEOUT, check=False,
    )  # fmt: skip
    return "Not significant" not in done.stdout


def _time_compare(a: str, b: str) -> bool:
    setup = f"import subprocess, sys; A = [sys.executable, {a!r}]; B = [sys.executable, {b!r}]"
    done = subprocess.run(
        [*CLI, "time", "subprocess.run(A)", "--compare", "subprocess.run(B)", "-s", setup,
         "-n", "1", "-q"], capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    return "significant" in done.stdout and "no significant" not in done.stdout


def case_five(folder: str, trials: int) -> None:
    a = _write(folder, "five_a.py", five_program(1.0))
    b = _write(folder, "five_b.py", five_program(1.1))
    a2 = _write(folder, "five_a2.py", five_program(1.0))
    counts = {
        "compare --a/--b (sampled)": [0, 0],
        "compare --a/--b --cprofile": [0, 0],
        "time --compare": [0, 0],
        "pyperf compare_to": [0, 0],
    }
    for _ in range(trials):
        for k, other in enumerate((b, a2)):
            for name, how in (("compare --a/--b (sampled)", []),
                              ("compare --a/--b --cprofile", ["--cprofile"])):  # fmt: skip
                code, doc = _compare(a, other, "--fail-above", "1%", *how)
                listed = _listed(doc)
                if other == b:  # found: exit 1, the slowed function named
                    counts[name][k] += code == 1 and any("slowed" in x for x in listed)
                else:  # a false alarm: a regression (exit 1) or a listed change
                    counts[name][k] += code == 1 or bool(listed)
            counts["time --compare"][k] += _time_compare(a, other)
            counts["pyperf compare_to"][k] += _pyperf_significant(folder, a, other)
    print(
        "- a program 5 % slower (slowed() 10 %), defaults (compare --fail-above 1%): found "
        "(with the function named) and false alarms on identical programs: "
        + "; ".join(f"{k}: {v[0]}/{trials} and {v[1]}/{trials}" for k, v in counts.items()),
        flush=True,
    )


def case_gate(folder: str, trials: int) -> None:
    codes = []
    for _ in range(trials):
        for path in ("ga.json", "gb.json"):
            if os.path.exists(os.path.join(folder, path)):
                os.remove(os.path.join(folder, path))
        for stmt, path in (("sum(range(1000))", "ga.json"), ("sum(range(1100))", "gb.json")):
            subprocess.run([*CLI, "time", "-q", stmt, "--save", path], cwd=folder, check=True,
                           capture_output=True, timeout=TIMEOUT)  # fmt: skip
        done = subprocess.run(
            [*CLI, "compare", "ga.json", "gb.json", "--fail-above", "5%"], cwd=folder,
            capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip
        codes.append(done.returncode)
    print(
        f"- the timing gate (time -q --save twice, +10 % work, compare --fail-above 5%): exit "
        f"codes {sorted(codes)}; 0 in {codes.count(0)}/{trials}",
        flush=True,
    )


def _plain(script: str) -> float:
    begin = time.perf_counter()
    subprocess.run([sys.executable, script], check=True, timeout=TIMEOUT)
    return time.perf_counter() - begin


def case_cost(folder: str, trials: int) -> None:
    a = _write(folder, "cost_a.py", shared_program(1.0, n=200_000, rounds=6))
    b = _write(folder, "cost_b.py", shared_program(1.1, n=200_000, rounds=6))
    ratios = []
    for _ in range(max(trials, 1)):
        plain = sum(_plain(a) + _plain(b) for _ in range(10))
        begin = time.perf_counter()
        _compare(a, b, "--repeat", "10")
        ratios.append((time.perf_counter() - begin) / plain)
    print(
        f"- cost: compare --a/--b --repeat 10 of two scripts of about "
        f"{_plain(a):.2f} s: wall over the 20 plain runs' own, min {min(ratios):.2f}, "
        f"median {statistics.median(ratios):.2f} over {len(ratios)} interleaved rounds",
        flush=True,
    )


_SUITE = """
import time

def test_cpu(monitor_time):
    monitor_time.measure("sum(range(20000))", repeat=15, number=50, label="sum")

def test_once(monitor_time):
    with monitor_time("block"):
        sum(range(300000))
"""


def _busy() -> list[subprocess.Popen[bytes]]:
    loop = "while True:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(2)]


def case_pytest(folder: str, trials: int) -> None:
    _write(folder, "test_suite.py", _SUITE)
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_suite.py"]
    for clock in ("cpu", "wall"):
        busy = _busy()
        try:
            base = f"base_{clock}.json"
            subprocess.run([*pytest, "--monitoring-clock", clock, "--monitoring-save", base,
                            "--monitoring-force"], cwd=folder, check=True, capture_output=True,
                           timeout=TIMEOUT)  # fmt: skip
            failed = undecided = 0
            for _ in range(trials):
                done = subprocess.run(
                    [*pytest, "--monitoring-clock", clock, "--monitoring-compare", base],
                    cwd=folder, capture_output=True, text=True, timeout=TIMEOUT, check=False,
                )  # fmt: skip
                failed += done.returncode != 0
                undecided += "monitoring: undecided" in done.stdout
                if done.returncode != 0:
                    why = [ln for ln in done.stdout.splitlines() if ln.startswith("  time ")]
                    print(f"    failed: {' | '.join(why) or done.stdout[-300:]}", flush=True)
        finally:
            for proc in busy:
                proc.kill()
                proc.wait()
        print(
            f"- pytest gate, unchanged suite beside two busy loops, --monitoring-clock "
            f"{clock}: sessions failed {failed}/{trials}, with an undecided figure "
            f"{undecided}/{trials}",
            flush=True,
        )


CASES: dict[str, Callable[[str, int], None]] = {
    "shared": case_shared,
    "pipeline": case_pipeline,
    "identical": case_identical,
    "five": case_five,
    "gate": case_gate,
    "cost": case_cost,
    "pytest": case_pytest,
}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--trials", type=int, default=20, help="trials of each case (20)")
    args = parser.parse_args(argv)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"## bench_compare_floors ({stamp}, 2-core shared VM, Python {platform.python_version()})"
    )
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-floors-") as folder:
        for name in args.cases.split(","):
            trials = 30 if name == "five" and args.trials == 20 else args.trials
            CASES[name](folder, trials)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
