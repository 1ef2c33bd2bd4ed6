"""The observer (the stacks read from outside) against the in-process sampler and
py-spy: the line credited inside C calls and operators, and the sampling rate it keeps.

Workloads (each a script run as a child by every tool):

- ``matmul``: a loop of ``c = a @ b`` (600x600) then ``d = tiny(c)``, where ``tiny``
  returns its argument: the time is in the matmul; a sampler that runs in the program
  (a signal handler runs after the C call returns) credits it to ``def tiny``;
- ``mlp``: a numpy MLP training loop: the matmul lines first, ``def softmax`` never a
  hot line;
- ``threads``: 8 busy Python threads for ~1.5 s: every worker seen, none called waiting.

Measured per run: the share of the workload function's samples on the line that does
the work and on ``tiny`` (``matmul``), the hot lines in order (``mlp``), the threads and
their CPU (``threads``), and the samples per second the tool took, for ours (observer,
the default), ours ``--collector in-process`` and py-spy (``record -f raw``, its line
numbers with ``--nonblocking``... it stops the program by default: we use its default).

Floors (issue 27): ``matmul`` >= 60 % of ``work``'s samples on ``c = a @ b`` and <= 5 %
on ``tiny``, py-spy's figure beside.

Run: ``python benchmarks/bench_observer.py [--runs 5]`` (numpy, py-spy).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

PY = sys.executable
CLI = [PY, "-m", "onnxrt_backend_dev.monitoring"]
TIMEOUT = 600

MATMUL = """\
import numpy as np


def tiny(x):
    return x


def work(n):
    a = np.random.rand(600, 600)
    b = np.random.rand(600, 600)
    for _ in range(n):
        c = a @ b
        d = tiny(c)
    return d


work(150)
"""
MATMUL_LINE = 12  # c = a @ b
TINY_LINE = 5  # return x; its def is line 4

MLP = """\
import numpy as np


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def train(X, y, epochs=25):
    rng = np.random.default_rng(0)
    W1 = rng.normal(size=(X.shape[1], 256)) * 0.01
    b1 = np.zeros(256)
    W2 = rng.normal(size=(256, 10)) * 0.01
    for _ in range(epochs):
        H = np.maximum(X @ W1 + b1, 0)
        P = softmax(H @ W2)
        G = P.copy()
        G[np.arange(len(y)), y] -= 1
        dW2 = H.T @ G
        dH = G @ W2.T
        dH[H <= 0] = 0
        dW1 = X.T @ dH
        db1 = dH.sum(axis=0)
        W1 -= 1e-3 * dW1
        b1 -= 1e-3 * db1
        W2 -= 1e-3 * dW2
    return W1


X = np.random.rand(4000, 784)
y = np.random.randint(0, 10, 4000)
train(X, y)
"""

THREADS = """\
import threading, time


def busy(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


ts = [threading.Thread(target=busy, args=(1.5,), name=f"w{i}") for i in range(8)]
for t in ts:
    t.start()
for t in ts:
    t.join()
"""


def _run(cmd: Sequence[str], cwd: str) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-2000:]}")


def _ours(folder: str, script: str, collector: str) -> dict[str, Any]:
    out = os.path.join(folder, f"ours-{collector}.json")
    _run([*CLI, "profile", "-q", "--collector", collector, "-o", out, script], folder)
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def _py_spy(folder: str, script: str) -> list[tuple[list[tuple[str, int]], int]] | None:
    """py-spy's samples: ``([(function, line)...] outermost first, count)``."""
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(PY), "py-spy")
    if not os.path.exists(spy):
        return None
    out = os.path.join(folder, "spy.txt")
    _run([spy, "record", "-f", "raw", "-o", out, "--", PY, script], folder)
    stacks = []
    with open(out, encoding="utf-8") as f:
        for line in f:
            path, _, count = line.rstrip("\n").rpartition(" ")
            frames = []
            for frame in path.split(";"):
                name, _, rest = frame.partition(" (")
                line_no = rest.rsplit(":", 1)[-1].rstrip(")") if rest else "0"
                frames.append((name, int(line_no) if line_no.isdigit() else 0))
            stacks.append((frames, int(count)))
    return stacks


def _shares_spy(stacks: list[tuple[list[tuple[str, int]], int]]) -> tuple[float, float]:
    """Of the samples with ``work`` on the stack: the share on the matmul line (work's
    frame at that line, innermost user frame) and the share inside ``tiny``."""
    total = on_line = in_tiny = 0
    for frames, count in stacks:
        names = [n for n, _ in frames]
        if "work" not in names:
            continue
        total += count
        j = names.index("work")
        if "tiny" in names[j:]:
            in_tiny += count
        elif frames[j][1] == MATMUL_LINE:
            on_line += count
    return (on_line / total, in_tiny / total) if total else (0.0, 0.0)


def _shares_ours(doc: dict[str, Any]) -> tuple[float, float]:
    """The same, from our JSON's hot lines (``work``'s lines, ``tiny``'s as a function)."""
    funcs = {f["function"]: f for f in doc["hot_lines"]}
    work = funcs.get("work")
    tiny = funcs.get("tiny")
    total = (work["seconds"] if work else 0.0) + (tiny["seconds"] if tiny else 0.0)
    if total <= 0:
        return 0.0, 0.0
    on_line = sum(h["seconds"] for h in work["lines"] if h["line"] == MATMUL_LINE) if work else 0
    return on_line / total, (tiny["seconds"] / total if tiny else 0.0)


def matmul(folder: str, runs: int) -> dict[str, Any]:
    script = os.path.join(folder, "matmul.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(MATMUL)
    rows: dict[str, list[tuple[float, float, float]]] = {"observer": [], "in-process": [],
                                                         "py-spy": []}  # fmt: skip
    for _ in range(runs):
        for collector in ("observer", "in-process"):
            doc = _ours(folder, script, collector)
            rate = doc["samples"] / doc["duration"] if doc["duration"] else 0.0
            rows[collector].append((*_shares_ours(doc), rate))
        spy = _py_spy(folder, script)
        if spy is not None:
            rows["py-spy"].append((*_shares_spy(spy), 0.0))
    print("matmul: share of work's samples on `c = a @ b` / in tiny (median, min-max)")
    for tool, values in rows.items():
        if not values:
            continue
        line = [v[0] for v in values]
        tiny = [v[1] for v in values]
        rate = [v[2] for v in values]
        med_line, med_tiny = 100 * statistics.median(line), 100 * statistics.median(tiny)
        speed = f"  {statistics.median(rate):.0f} samples/s" if any(rate) else ""
        print(
            f"  {tool:11s} matmul line {med_line:5.1f} % ({100 * min(line):.1f}-"
            f"{100 * max(line):.1f})  tiny {med_tiny:4.1f} % ({100 * min(tiny):.1f}-"
            f"{100 * max(tiny):.1f}){speed}"
        )
    return {k: v for k, v in rows.items() if v}


def mlp(folder: str) -> None:
    script = os.path.join(folder, "mlp.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(MLP)
    for collector in ("observer", "in-process"):
        doc = _ours(folder, script, collector)
        train = next((f for f in doc["hot_lines"] if f["function"] == "train"), None)
        order = [h["line"] for h in train["lines"]] if train else []
        softmax = [f for f in doc["hot_lines"] if f["function"] == "softmax"]
        def_line = [h for f in softmax for h in f["lines"] if h["line"] == 4]
        print(f"mlp {collector:11s}: train's lines by time {order[:6]} "
              f"(matmuls: 16, 23); 'def softmax' a hot line: {bool(def_line)}")  # fmt: skip
    spy = _py_spy(folder, script)
    if spy:
        by_line: dict[int, int] = {}
        for frames, count in spy:
            names = [n for n, _ in frames]
            if "train" in names:
                j = len(names) - 1 - names[::-1].index("train")
                by_line[frames[j][1]] = by_line.get(frames[j][1], 0) + count
        order = sorted(by_line, key=lambda k: -by_line[k])[:6]
        print(f"mlp py-spy     : train's lines by time {order}")


def threads(folder: str) -> None:
    script = os.path.join(folder, "threads.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(THREADS)
    for collector in ("observer", "in-process"):
        doc = _ours(folder, script, collector)
        workers = [t for t in doc["threads"] if t["name"].startswith("w")]
        waiting = sum(1 for t in workers for r in t["rows"] if r["name"] == "busy" and r["waiting"])
        print(f"threads {collector:11s}: {len(workers)} of 8 workers shown, {waiting} busy rows "
              f"marked waiting; {doc['samples'] / doc['duration']:.0f} samples/s")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of matmul per tool (5)")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
        f"{os.cpu_count()} CPUs, load {load:.1f}, Python {platform.python_version()}"
    )
    with tempfile.TemporaryDirectory() as folder:
        matmul(folder, args.runs)
        mlp(folder)
        threads(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
