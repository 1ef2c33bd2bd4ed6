"""Speed of profile2graph + to_text against gprof2dot (and tuna) on synthetic profiles.

Writes two synthetic cProfile files, 5,000 functions / ~55,000 call edges and 20,000 /
~220,000 (each function called from up to 11 earlier ones), then times, side by side in
this run:

- ours: ``profile2graph(Stats) + root.to_text()`` in process (file already loaded; the
  load time is printed apart), median of several runs, the two sizes interleaved;
- gprof2dot: ``gprof2dot -f pstats FILE -o /dev/null`` as a subprocess (its usual use;
  the bare interpreter start-up is printed too, to read the figure fairly);
- tuna: ``tuna.main.read(FILE)`` (the tree it serves, built without the web server) in a
  subprocess with a time limit, as it may recurse or blow up on dense graphs.

Floors (issue 4): small <= 0.2 s, large <= 1.0 s and <= 4.5x the small case.

The call tree view (issue 9, ``--tree`` runs only this part): on the large profile,
``profile2graph + to_tree_text`` (median), the size of its HTML page, and the time the
page takes in headless Chromium to show the tree opened along its hottest path (the
page writes ``data-ready-ms``, milliseconds from navigation start, read back with
``--dump-dom``); the same with every row (``fold_share=0``, capped at 100,000 rows).
Floors: text <= 1.5 s, HTML <= 5 MB, shown in Chromium <= 2 s.

The growth (large / small) is set beside the machine's own growth for the same 4x more
data, measured in the same run without any call graph: ``marshal.loads`` of the two
files (C code only), and formatting the same number of lines of the same length as our
text from figures held in a list, joined into one string the way ``to_text`` returns
it. With ``--instructions`` (needs valgrind), both sizes also run under cachegrind to
count the instructions executed, which no cache or neighbour changes: their ratio is
the growth of the work itself.

Run: ``python benchmarks/bench_profiling.py [--runs N] [--instructions] [--tree]``.
"""

from __future__ import annotations

import argparse
import gc
import marshal
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pstats import Stats
from typing import Any

from onnxrt_backend_dev.monitoring.profiling import profile2graph

FLOOR_SMALL = 0.2
FLOOR_LARGE = 1.0
FLOOR_RATIO = 4.5
TOOL_TIMEOUT = 60.0
FLOOR_TREE_TEXT = 1.5
FLOOR_TREE_HTML_MB = 5.0
FLOOR_TREE_BROWSER = 2.0


def synthetic_stats(n_functions: int, fan_in: int = 11, seed: int = 0) -> dict[Any, Any]:
    """A cProfile-shaped stats dict: function i is called by up to ``fan_in`` functions
    among 0..i-1; times are consistent (a callee's time is split among its callers)."""
    rnd = random.Random(seed)
    keys = [(f"/src/pkg/mod_{i % 97}.py", 10 + i, f"func_{i}") for i in range(n_functions)]
    callers: list[dict[int, int]] = []
    for i in range(n_functions):
        picked = rnd.sample(range(i), min(i, fan_in))
        callers.append({c: rnd.randint(1, 5) for c in picked})
    tin = [rnd.uniform(1e-6, 1e-3) for _ in range(n_functions)]
    tall = list(tin)
    calls_to: list[list[int]] = [[] for _ in range(n_functions)]
    for i, cs in enumerate(callers):
        for c in cs:
            calls_to[c].append(i)
    for i in range(n_functions - 1, -1, -1):
        tall[i] = tin[i] + sum(tall[c] / len(callers[c]) for c in calls_to[i])
    stats: dict[Any, Any] = {}
    for i, key in enumerate(keys):
        ncalls = sum(callers[i].values()) or 1
        share = 1.0 / max(len(callers[i]), 1)
        edges = {keys[c]: (n, n, tin[i] * share, tall[i] * share) for c, n in callers[i].items()}
        stats[key] = (ncalls, ncalls, tin[i], tall[i], edges)
    return stats


def write_profile(stats: dict[Any, Any], path: str) -> None:
    with open(path, "wb") as f:
        marshal.dump(stats, f)


def ours(paths: dict[int, str], runs: int) -> dict[int, tuple[float, float, float, int, int]]:
    """Times ``profile2graph + to_text`` on each file, the sizes interleaved run by run
    (small, large, small, ...) so that both see the same machine: a quiet or busy
    minute does not favour one of them.

    :return: by size: median, min, pstats load time, text length, text lines
    """
    loaded = {}
    for n, path in paths.items():
        t0 = time.perf_counter()
        loaded[n] = Stats(path), time.perf_counter() - t0
    times: dict[int, list[float]] = {n: [] for n in paths}
    shape: dict[int, tuple[int, int]] = {}
    for _ in range(runs):
        for n, (ps, _) in loaded.items():
            # The previous run's graph (cyclic: callers <-> callees) is collected here,
            # not inside the next timed run, so every run starts from a clean heap.
            gc.collect()
            t0 = time.perf_counter()
            root, _ = profile2graph(ps)
            text = root.to_text()
            times[n].append(time.perf_counter() - t0)
            shape[n] = len(text), text.count("\n") + 1
            del root, text
    return {n: (statistics.median(t), min(t), loaded[n][1], *shape[n]) for n, t in times.items()}


def median_time(fct: Any, runs: int) -> float:
    """Median time of ``fct()``; the previous run's garbage is collected outside the
    timing, as in :func:`ours`."""
    times = []
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        result = fct()
        times.append(time.perf_counter() - t0)
        del result
    return statistics.median(times)


def format_only(n_lines: int, line_chars: int) -> Any:
    """A function formatting ``n_lines`` lines of about ``line_chars`` characters (the
    figures of our lines, with a constant name column) from a list built beforehand, in
    chunks of 2,048 lines joined into one string, as ``to_text`` writes its text; no
    graph, no walk: what producing that much text costs on this machine."""
    template = "%s -- % 3d % 3d -- %1.5f %1.5f -- %.1f%%"
    name = "x" * max(1, line_chars - len(template % ("", 1, 1, 0.5, 0.5, 0.5)))
    rnd = random.Random(1)
    figures = [
        (name, rnd.randint(1, 5), rnd.randint(1, 5), rnd.random(), rnd.random(), rnd.random())
        for _ in range(n_lines)
    ]

    def run() -> str:
        chunks = []
        for i in range(0, n_lines, 2048):
            part = figures[i : i + 2048]
            args = tuple(x for f in part for x in f)
            chunks.append("\n".join([template] * len(part)) % args)
        return "\n".join(chunks)

    return run


INSTRUCTIONS_SCRIPT = """
import sys
from pstats import Stats
from onnxrt_backend_dev.monitoring.profiling import profile2graph
ps = Stats(sys.argv[1])
if sys.argv[2] == "1":
    root, _ = profile2graph(ps)
    text = root.to_text()
"""


def instructions(path: str) -> int | None:
    """Instructions executed by ``profile2graph`` + ``to_text`` on ``path``: cachegrind's
    count for a run loading the file and doing the work, minus one only loading it."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        return None
    counts = []
    for work in ("0", "1"):
        cmd = [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
        cmd += [sys.executable, "-c", INSTRUCTIONS_SCRIPT, path, work]
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=600, text=True)
        except subprocess.TimeoutExpired:
            return None
        found = [ln for ln in proc.stderr.splitlines() if "I refs:" in ln or "I   refs:" in ln]
        if proc.returncode != 0 or not found:
            return None
        counts.append(int(found[-1].split(":")[-1].replace(",", "").strip()))
    return counts[1] - counts[0]


def subprocess_time(cmd: list[str], runs: int) -> tuple[float | None, str]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=TOOL_TIMEOUT, text=True)
        except subprocess.TimeoutExpired:
            return None, f"did not finish in {TOOL_TIMEOUT:.0f} s"
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            return None, f"failed: {last[:100]}"
        times.append(time.perf_counter() - t0)
    return statistics.median(times), "ok"


def browser_ready_ms(path: str) -> float | None:
    """Milliseconds from navigation start to the tree shown, as the page records it,
    in headless Chromium (None without a browser)."""
    import re

    browser = next(
        (shutil.which(b) for b in ("chromium", "chromium-browser") if shutil.which(b)), None
    )
    if browser is None:
        return None
    with tempfile.TemporaryDirectory() as profile_dir:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic"]
        cmd += ["--no-first-run", "--disable-background-networking", "--disable-component-update"]
        cmd += ["--disable-sync", f"--user-data-dir={profile_dir}", "--dump-dom"]
        proc = subprocess.run(
            [*cmd, "file://" + path], capture_output=True, timeout=TOOL_TIMEOUT, text=True
        )
    found = re.search(r'data-ready-ms="(\d+)"', proc.stdout)
    return float(found.group(1)) if found else None


def tree_view(path: str, runs: int, tmp: str) -> list[tuple[bool, str]]:
    """Times and sizes of the call tree view on one profile file, printed; the checks."""
    from onnxrt_backend_dev.monitoring.profiling import to_html, to_tree_text

    ps = Stats(path)
    times = []
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        root, _ = profile2graph(ps)
        text = to_tree_text(root)
        times.append(time.perf_counter() - t0)
    t_text = statistics.median(times)
    print(f"\n## call tree view, {os.path.basename(path)}")
    print(f"profile2graph+to_tree_text:   {fmt(t_text)} s  ({text.count(chr(10)) + 1} lines)")
    checks = [(t_text <= FLOOR_TREE_TEXT, f"tree text {t_text:.3f} s <= {FLOOR_TREE_TEXT} s")]
    for label, fold in (("default", 0.005), ("every row", 0.0)):
        t0 = time.perf_counter()
        page = to_html(root, view="tree", fold_share=fold)
        t_html = time.perf_counter() - t0
        page_path = os.path.join(tmp, f"tree_{label.replace(' ', '_')}.html")
        with open(page_path, "w", encoding="utf-8") as f:
            f.write(page)
        size = len(page.encode("utf-8")) / 1e6
        shown = [v for v in (browser_ready_ms(page_path) for _ in range(3)) if v is not None]
        ready = statistics.median(shown) / 1e3 if shown else None
        print(
            f"html ({label}): {size:6.2f} MB in {t_html:.3f} s, shown in Chromium after "
            f"{fmt(ready)} s"
        )
        checks.append((size <= FLOOR_TREE_HTML_MB, f"tree html ({label}) {size:.2f} MB <= 5 MB"))
        if ready is not None:
            text_ok = f"tree html ({label}) shown in {ready:.3f} s <= {FLOOR_TREE_BROWSER} s"
            checks.append((ready <= FLOOR_TREE_BROWSER, text_ok))
    return checks


def fmt(t: float | None) -> str:
    return "   n/a" if t is None else f"{t:6.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per measure (median)")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the instructions of both sizes under valgrind (about 2 minutes)",
    )
    parser.add_argument("--tree", action="store_true", help="only the call tree view (issue 9)")
    args = parser.parse_args()
    if args.tree:
        return main_tree(args.runs)
    print(f"# bench_profiling  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(
        f"# {platform.platform()}, python {platform.python_version()}, "
        f"{os.cpu_count()} cores; medians of {args.runs} runs"
    )
    startup, _ = subprocess_time([sys.executable, "-c", "pass"], args.runs)
    print(f"# interpreter start-up (python -c pass): {fmt(startup)} s")
    gprof2dot = shutil.which("gprof2dot")
    results: dict[int, float] = {}
    baselines: dict[int, dict[str, float]] = {}
    counts: dict[int, int | None] = {}
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        paths, edges = {}, {}
        for n in (5_000, 20_000):
            stats = synthetic_stats(n)
            edges[n] = sum(len(v[4]) for v in stats.values())
            paths[n] = os.path.join(tmp, f"synthetic_{n}.prof")
            write_profile(stats, paths[n])
            del stats
        timed = ours(paths, args.runs)
        for n, path in paths.items():
            t_ours, t_min, load, size, lines = timed[n]
            results[n] = t_ours
            with open(path, "rb") as f:
                raw = f.read()
            baselines[n] = {
                "marshal.loads of the file": median_time(partial(marshal.loads, raw), args.runs),
                "the same text from a list": median_time(
                    format_only(lines, round(size / lines)), args.runs
                ),
            }
            if args.instructions:
                counts[n] = instructions(path)
            print(f"\n## {n} functions, {edges[n]} edges ({os.path.getsize(path) // 1024} KiB)")
            print(
                f"ours   profile2graph+to_text: {fmt(t_ours)} s  (min {t_min:.3f} s; "
                f"pstats load {load:.3f} s, text {size / 1e6:.1f} MB)"
            )
            if gprof2dot:
                t_g, status = subprocess_time(
                    [gprof2dot, "-f", "pstats", path, "-o", os.devnull], max(1, args.runs // 2)
                )
                ratio = f"ours/gprof2dot = {t_ours / t_g:.2f}" if t_g else status
                print(f"gprof2dot (subprocess):       {fmt(t_g)} s  {ratio}")
            t_t, status2 = subprocess_time(
                [sys.executable, "-c", f"import tuna.main as m; m.read({path!r})"], 1
            )
            ratio = f"ours/tuna = {t_ours / t_t:.2f}" if t_t else status2
            print(f"tuna read (subprocess):       {fmt(t_t)} s  {ratio}")
    growth = results[20_000] / results[5_000]
    print(f"\nlarge/small = {growth:.2f}  (floor <= {FLOOR_RATIO})")
    print("the machine's own growth for the same 4x more data, no call graph:")
    for name in baselines[5_000]:
        small, large = baselines[5_000][name], baselines[20_000][name]
        print(f"  {name:<27} {small:6.3f} s -> {large:6.3f} s  = {large / small:.2f}")
    if args.instructions:
        if counts.get(5_000) and counts.get(20_000):
            small_i, large_i = counts[5_000], counts[20_000]
            assert small_i is not None and large_i is not None
            print(
                f"  instructions (cachegrind)   {small_i / 1e9:.3f} G -> {large_i / 1e9:.3f} G"
                f" = {large_i / small_i:.2f} (the work itself)"
            )
        else:
            print("  instructions: valgrind is missing or failed")
    checks = [
        (results[5_000] <= FLOOR_SMALL, f"small {results[5_000]:.3f} s <= {FLOOR_SMALL} s"),
        (results[20_000] <= FLOOR_LARGE, f"large {results[20_000]:.3f} s <= {FLOOR_LARGE} s"),
        (growth <= FLOOR_RATIO, f"large/small {growth:.2f} <= {FLOOR_RATIO}"),
    ]
    for passed, text in checks:
        ok &= passed
        print(f"{'PASS' if passed else 'FAIL'}  {text}")
    return 0 if ok else 1


def main_tree(runs: int) -> int:
    """The call tree view part alone."""
    print(f"# bench_profiling --tree  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(
        f"# {platform.platform()}, python {platform.python_version()}, "
        f"{os.cpu_count()} cores; medians of {runs} runs"
    )
    with tempfile.TemporaryDirectory() as tmp:
        stats = synthetic_stats(20_000)
        edges = sum(len(v[4]) for v in stats.values())
        path = os.path.join(tmp, "synthetic_20000.prof")
        write_profile(stats, path)
        print(f"# synthetic profile: 20000 functions, {edges} edges")
        checks = tree_view(path, runs, tmp)
    ok = True
    for passed, text in checks:
        ok &= passed
        print(f"{'PASS' if passed else 'FAIL'}  {text}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
