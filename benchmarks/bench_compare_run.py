"""``run --repeat`` + ``compare`` of two saved ``run`` results: is a 10 % larger allocation
of one function found, and are two identical programs left alone?

Run: ``python benchmarks/bench_compare_run.py [--trials 20] [--runs 10]``. It prints the
floor of issue 19 "a 10 % increase of one function's allocation: reported in >= 95 % of
trials", and the false alarms between two identical programs.

The program: six functions each allocating (and keeping) 1 MiB blocks in its own loop,
with Python work between two blocks (15 to 40 MiB each, 165 MiB in all), and two
functions that only compute. In B, ``build_index`` allocates 44 MiB instead of 40 (10 %
more, 2.4 % of the program's growth). ``a2.py`` is a copy of ``a.py``.

Each trial runs A, B and A2 ``--runs`` times each, interleaved (A B A2 A B A2 ...), every
run a ``run`` in a child process exactly as ``run --repeat`` starts them
(``_results.runner.run_interleaved``), then compares A with B and A with A2 as ``compare
A.json B.json`` does (``compare_results``, its defaults). Counted per trial:

* found: ``build_index``'s memory growth significant and larger in B;
* other memory rows significant in A vs B (its callers ``main`` and ``<module>`` grew
  too: expected; any other is a false alarm);
* identical: any significant row (wall time, peak, a time share, a memory growth) in A vs
  A2 is a false alarm.

The machine is shared: the load average is printed with the figures.
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

from onnxrt_backend_dev.monitoring._report.render_json import from_json
from onnxrt_backend_dev.monitoring._results.compare import compare_results
from onnxrt_backend_dev.monitoring._results.payloads import run_data
from onnxrt_backend_dev.monitoring._results.runner import ChildRun, run_interleaved
from onnxrt_backend_dev.monitoring._results.store import load_result, make_result, save_result

PROGRAM = """
KEEP = []
BUILD_INDEX = {build_index}


def load_table():
    for _ in range(30):
        KEEP.append(b"\\x01" * (1 << 20))
        s = 0
        for i in range(4000):
            s += i


def parse_rows():
    for _ in range(25):
        KEEP.append(b"\\x02" * (1 << 20))
        s = 0
        for i in range(4000):
            s += i


def build_index():
    for _ in range(BUILD_INDEX):
        KEEP.append(b"\\x03" * (1 << 20))
        s = 0
        for i in range(4000):
            s += i


def join_tables():
    for _ in range(35):
        KEEP.append(b"\\x04" * (1 << 20))
        s = 0
        for i in range(4000):
            s += i


def cache_results():
    for _ in range(20):
        KEEP.append(b"\\x05" * (1 << 20))
        s = 0
        for i in range(4000):
            s += i


def write_report():
    for _ in range(15):
        KEEP.append(b"\\x06" * (1 << 20))
        s = 0
        for i in range(4000):
            s += i


def checksum():
    s = 0
    for i in range(400_000):
        s += i * i
    return s


def validate():
    return sum(i % 7 for i in range(300_000))


def main():
    load_table()
    parse_rows()
    checksum()
    build_index()
    join_tables()
    validate()
    cache_results()
    write_report()


main()
"""
CHANGED = "build_index"


def _load() -> str:
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _programs(folder: str) -> list[tuple[str, ChildRun, str]]:
    """(script, the run of it, its report's path) for A, B and A2."""
    out = []
    for name, size in (("a.py", 40), ("b.py", 44), ("a2.py", 40)):
        script = os.path.join(folder, name)
        with open(script, "w", encoding="utf-8") as f:
            f.write(PROGRAM.format(build_index=size))
        report = os.path.join(folder, name + ".report.json")
        argv: tuple[str, ...] = (sys.executable, "-m", "onnxrt_backend_dev.monitoring", "run")
        argv += ("-q", "--format", "json", "-o", report, "--", script)
        out.append((script, ChildRun(("run", script), real=argv), report))
    return out


def _trial(
    programs: list[tuple[str, ChildRun, str]], runs: int, keep: str | None, t: int
) -> dict[str, Any]:
    reports: list[list[Any]] = [[] for _ in programs]

    def collect(_round: int, side: int) -> None:
        path = programs[side][2]
        with open(path, encoding="utf-8") as f:
            reports[side].append(from_json(f.read()))
        os.remove(path)

    start = time.perf_counter()
    run_interleaved([p[1] for p in programs], runs, 300.0, on_run=collect)
    seconds = time.perf_counter() - start
    docs = [
        make_result("run", run_data(r, main=p[0]), ["run", p[0]])
        for p, r in zip(programs, reports, strict=True)
    ]
    if keep is not None:  # the runs, to judge again without running (--judge)
        for name, doc in zip(("a", "b", "a2"), docs, strict=True):
            save_result(os.path.join(keep, f"trial{t:02d}-{name}.json"), doc, force=True)
    return _judge(docs, seconds)


def _judge(docs: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    ab = compare_results(docs[0], docs[1], ("a.py", "b.py"))
    aa = compare_results(docs[0], docs[2], ("a.py", "a2.py"))
    changed = [c for c in ab.changes if c.figure == "growth" and c.function == CHANGED]
    others = sorted(
        c.function
        for c in ab.changes
        if c.figure == "growth" and c.significant and c.function != CHANGED
    )
    expected = {"main", "<module>"}
    return {
        "seconds": seconds,
        "found": bool(changed and changed[0].significant and (changed[0].change or 0) > 0),
        "change": changed[0].change if changed else None,
        "ci": (changed[0].ci_low, changed[0].ci_high) if changed else (None, None),
        "callers": [f for f in others if f in expected],
        "false_ab": [f for f in others if f not in expected],
        "time_ab": sorted(
            c.function
            for c in ab.changes
            if c.figure == "share" and c.significant and c.function != CHANGED
        ),
        "false_aa": [f"{c.figure}:{c.function}" for c in aa.changes if c.significant],
    }


def main() -> None:
    """Runs the trials and prints the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10, help="runs of each program a trial")
    parser.add_argument("--keep", default=None, help="save each trial's three results here")
    parser.add_argument("--judge", default=None, help="judge the results kept in this folder")
    args = parser.parse_args()
    if args.judge is not None:
        _print_rows(args, _judged(args.judge))
        return
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"## bench_compare_run ({now}, 2-core shared VM, Python {platform.python_version()})")
    print(f"load average at start: {_load()}")
    print(f"{args.trials} trials, {args.runs} runs of each program a trial, interleaved")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-compare-run-") as folder:
        programs = _programs(folder)
        for t in range(args.trials):
            rows.append(_trial(programs, args.runs, args.keep, t))
            _print_row(t, rows[-1])
    _print_rows(args, rows)


def _judged(folder: str) -> list[dict[str, Any]]:
    """The trials kept by ``--keep``, judged again (seconds unknown: 0)."""
    names = sorted(n for n in os.listdir(folder) if n.endswith("-a.json"))
    rows = []
    for t, name in enumerate(names):
        stem = os.path.join(folder, name[: -len("-a.json")])
        docs = [load_result(f"{stem}-{side}.json", "run") for side in ("a", "b", "a2")]
        rows.append(_judge(docs, 0.0))
        _print_row(t, rows[-1])
    return rows


def _print_row(t: int, row: dict[str, Any]) -> None:
    low, high = row["ci"]
    ci = "n/a" if low is None else f"[{low:+.1%}, {high:+.1%}]"
    change = "n/a" if row["change"] is None else f"{row['change']:+.1%}"
    print(
        f"trial {t + 1:2d}: {row['seconds']:5.1f} s; {CHANGED} growth {change} {ci} "
        f"{'found' if row['found'] else 'MISSED'}; callers {row['callers']}; "
        f"other memory rows {row['false_ab'] or 'none'}; other time shares "
        f"{row.get('time_ab') or 'none'}; identical: "
        f"{row['false_aa'] or 'none'}",
        flush=True,
    )


def _print_rows(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    n = len(rows)
    found = sum(r["found"] for r in rows)
    false_ab = sum(bool(r["false_ab"]) for r in rows)
    false_aa = sum(bool(r["false_aa"]) for r in rows)
    seconds = [r["seconds"] for r in rows]
    changes = [r["change"] for r in rows if r["change"] is not None]
    print(
        f"- 10 % more allocation in {CHANGED} (+4 MiB, 2.4 % of the growth) found in "
        f"{found}/{n} trials ({found / n:.0%}; floor >= 95 %: "
        f"{'met' if found >= 0.95 * n else 'NOT met'}); median change measured "
        f"{statistics.median(changes):+.1%}"
    )
    time_ab = sum(bool(r.get("time_ab")) for r in rows)
    print(f"- A vs B: another function's memory flagged (not a caller) in {false_ab}/{n} trials")
    print(f"- A vs B: another function's time share flagged in {time_ab}/{n} trials")
    print(
        f"- identical programs (A vs A2): any significant row in {false_aa}/{n} trials "
        f"({1 - false_aa / n:.0%} clean; floor >= 95 %: "
        f"{'met' if false_aa <= 0.05 * n else 'NOT met'})"
    )
    if seconds and max(seconds) > 0:
        print(
            f"- {args.runs} runs a side (3 programs interleaved): a trial took median "
            f"{statistics.median(seconds):.1f} s (min {min(seconds):.1f}, max "
            f"{max(seconds):.1f}), {statistics.median(seconds) / (3 * args.runs):.2f} s a run "
            "(its child's start included)"
        )
    print(f"load average at end: {_load()}")


if __name__ == "__main__":
    main()
