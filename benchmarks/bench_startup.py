"""The fixed cost of ``profile`` (sampled) and ``run`` on an empty script, two source trees
side by side (issues 17 and 18): what the commands add to a program that does nothing.

Each round runs, for every tree, ``python empty.py``, ``python -m onnxrt_backend_dev.monitoring
profile --format json -o out.json empty.py`` and ``... run -q -o out.json empty.py``,
interleaved (a busy minute hits every command), the tree chosen by ``PYTHONPATH``. For
each command: the wall time and the CPU time (user and system) of the whole process tree
(``wait4``: the child and what it reaped, the program's interpreter and the memory spy or
the observer for ``run``),
minimum and median; and, from two time stamps the script writes (its first and its last
line), the time before the program's first line and after its last (to the command's
exit), minimum and median.

Bytecode caches on (as for an installed package), kept apart from the sources: with
``PYTHONDONTWRITEBYTECODE`` every run would compile the tools' modules again.

With ``--workload json`` the script runs bench_sampling.py's json workload between its
stamps, for the whole-script ratio beside the fixed cost.

Run: ``python benchmarks/bench_startup.py --tree main=/work/main --tree new=. [--runs 9]
[--workload json]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone

PY = sys.executable
CLI = [PY, "-m", "onnxrt_backend_dev.monitoring"]
TIMEOUT = 120
# The script: its first and its last line stamp the wall clock; between them nothing
# (``empty``), or the json workload of bench_sampling.py (``--workload json``).
HEAD = "import time; _first = time.time()\n"
TAIL = """
import sys
with open(sys.argv[1], "w") as f: f.write(f"{_first!r} {time.time()!r}")
"""


def script_text(workload: str) -> str:
    """The script's source for a workload (``empty`` or ``json``)."""
    if workload == "empty":
        return HEAD + TAIL
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_sampling import JSON_SCRIPT

    return HEAD + JSON_SCRIPT + TAIL


def commands(folder: str, script: str, stamps: str) -> dict[str, list[str]]:
    """The command line of each measured command."""
    out = os.path.join(folder, "out.json")
    return {
        "plain": [PY, script, stamps],
        "profile": [*CLI, "profile", "--format", "json", "-o", out, script, stamps],
        "run": [*CLI, "run", "-q", "-o", out, script, stamps],
    }


def run_once(cmd: Sequence[str], env: dict[str, str], stamps: str) -> tuple[float, ...]:
    """One run: wall, CPU of the process tree, before the first line, after the last.
    It runs in the stamps' folder: ``-m`` puts the working folder first in ``sys.path``,
    where a checkout would win over ``PYTHONPATH``.

    :param cmd: the command line
    :param env: its environment
    :param stamps: the file the script writes its two stamps into
    :return: seconds
    """
    if os.path.exists(stamps):
        os.unlink(stamps)
    t0, w0 = time.time(), time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, cwd=os.path.dirname(stamps), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:
        proc.kill()
        proc.wait(TIMEOUT)
        raise
    wall, t1 = time.perf_counter() - w0, time.time()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err[-2000:]}")
    with open(stamps, encoding="utf-8") as f:
        first, last = (float(x) for x in f.read().split())
    return wall, usage.ru_utime + usage.ru_stime, first - t0, t1 - last


def _cell(values: list[float]) -> str:
    return f"{1000 * min(values):6.1f} ({1000 * statistics.median(values):6.1f})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="a source tree (the folder holding onnxrt_backend_dev), repeatable; this "
        "checkout if none",
    )
    parser.add_argument("--runs", type=int, default=9, help="interleaved rounds (9)")
    parser.add_argument(
        "--workload",
        choices=("empty", "json"),
        default="empty",
        help="what runs between the stamps: nothing (empty) or json.dumps of 40,000 records",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = dict(t.split("=", 1) for t in args.tree) if args.tree else {"this": here}
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# bench_startup  {now}")
    print(f"# {platform.platform()}, python {platform.python_version()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, {args.runs} rounds, "
          f"workload {args.workload}")  # fmt: skip
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "bench_startup_pycache")
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, f"{args.workload}_script.py")  # not json.py: json
        stamps = os.path.join(folder, "stamps.txt")
        with open(script, "w", encoding="utf-8") as f:
            f.write(script_text(args.workload))
        cmds = commands(folder, script, stamps)
        envs = {
            label: {**base, "PYTHONPATH": os.path.abspath(path)} for label, path in trees.items()
        }
        keys = [(label, name) for label in trees for name in cmds]
        results: dict[tuple[str, str], list[tuple[float, ...]]] = {k: [] for k in keys}
        for label, name in keys:  # warm-up: file cache, bytecode caches
            run_once(cmds[name], envs[label], stamps)
        for _ in range(args.runs):
            for label, name in keys:
                results[label, name].append(run_once(cmds[name], envs[label], stamps))
    print("# ms, minimum (median): wall, CPU (user + system) of the process tree, before "
          "the first line, after the last")  # fmt: skip
    print(f"  {'tree':<8} {'command':<8} {'wall':>15} {'CPU':>15} {'before':>15} "
          f"{'after':>15}")  # fmt: skip
    for label, name in keys:
        columns = list(zip(*results[label, name], strict=True))
        cells = " ".join(f"{_cell(list(c)):>15}" for c in columns)
        print(f"  {label:<8} {name:<8} {cells}")
    print("# over plain: ms, difference of minimums (of medians), wall and CPU; and the "
          "wall ratio of minimums (of medians)")  # fmt: skip
    for label in trees:
        plain = list(zip(*results[label, "plain"], strict=True))
        for name in cmds:
            if name == "plain":
                continue
            mine = list(zip(*results[label, name], strict=True))
            cells = ", ".join(
                f"{1000 * (min(mine[i]) - min(plain[i])):.1f} "
                f"({1000 * (statistics.median(mine[i]) - statistics.median(plain[i])):.1f})"
                for i in (0, 1)
            )
            ratio = f"{min(mine[0]) / min(plain[0]):.3f}x "
            ratio += f"({statistics.median(mine[0]) / statistics.median(plain[0]):.3f}x)"
            print(f"  {label:<8} {name:<8} {cells}; {ratio}")
    print(f"# load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
