"""Allocation tracking (issue 29), side by side with memray and Scalene.

Sections (``--only overhead,peak,leaks,native,gate``):

* ``overhead``: the program's own time (each script times itself from its first line to
  its last, written to ``$BENCH_TIMES``) and the command's whole wall time, for: plain
  ``python script.py``; ``run --alloc-sample 0`` (the observer, no shim); ``run`` (the
  shim sampling at its default rate, 1 per 256 KiB); ``memray run`` + ``memray stats``;
  Scalene (``scalene run``, CPU + memory). Workloads: json, ast, pandas (those of
  ``bench_observer_overhead.py``) and an allocation-heavy one (400,000 small numpy
  arrays). ``--runs`` interleaved rounds; the ratio of the minimums, the median ratio
  beside. Floor: ``run`` <= 1.05x ``run --alloc-sample 0`` on the program's time.
* ``peak``: what is live at the peak, by line, ours (``run -o report.json``) against
  memray's (its high-water-mark records, each credited to its innermost frame in the
  script, as ours), on ``np_alloc.py`` (20,000 small arrays freed, a 128 MB array,
  temporaries, a 256 MB concatenation) and an MLP trained in numpy; ``--trials`` runs
  each. Floor: the top three lines are memray's top three, each within 10 % of memray's
  bytes, in >= 9 of 10 runs.
* ``leaks``: a function appending 1 MiB to a module-level list per call must be the
  first leak candidate in 10 of 10 runs; the same program keeping nothing must name no
  candidate above 1 % of its peak.
* ``native``: an ONNX Runtime ``sess.run`` of a large batch: the bytes its line holds
  at the peak, ours over memray's (floor >= 90 %). Needs ``onnxruntime`` and ``onnx``.
* ``gate``: one pytest session loading the same ONNX Runtime model 10 times (a
  ``monitor_memory`` block each, after tests leaving other garbage): the block's
  allocations' peak and its RSS increase, their spread (floor: allocations <= 5 %).

Run: ``python benchmarks/bench_alloc.py [--runs 7] [--trials 10] [--only ...]`` (numpy,
pandas, memray, scalene; onnxruntime and onnx for native and gate).
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_observer_overhead import AST, JSON, PANDAS, make_csv

PY = sys.executable
CLI = [PY, "-m", "onnxrt_backend_dev.monitoring"]
TIMEOUT = 900
MB = 1e6

# Each script writes its own wall and CPU seconds, from its first line to its last.
HEAD = "import os as _o, time as _t\n_T0, _C0 = _t.perf_counter(), _t.process_time()\n"
TAIL = (
    "\nwith open(_o.environ['BENCH_TIMES'], 'a') as _f:\n"
    "    _f.write(f'{_t.perf_counter() - _T0} {_t.process_time() - _C0}\\n')\n"
)
OBSERVER_CPU = re.compile(r"the observer used ([0-9.]+) s of CPU")

NP_SMALL = """
import numpy as np


def churn():
    for _ in range(20):
        xs = [np.ones(100) for _ in range(20_000)]
        del xs


churn()
"""

NP_ALLOC = """\
import numpy as np


def small_arrays():
    xs = [np.ones(100) for _ in range(20_000)]
    del xs


def big_array():
    return np.ones(128 * 10**6 // 8)


def temporaries(a):
    for _ in range(5):
        t = a * 2
        del t


def concatenate(a):
    return np.concatenate([a, a])


def main():
    small_arrays()
    a = big_array()
    temporaries(a)
    c = concatenate(a)
    return float(a[0] + c[-1])


main()
"""

MLP = """\
import numpy as np

RNG = np.random.default_rng(0)


def load_data(n=60_000, d=768):
    x = RNG.standard_normal((n, d), dtype=np.float32)
    y = RNG.integers(0, 10, n)
    return x, y


class MLP:
    def __init__(self, d=768, h=1024, k=10):
        self.w1 = RNG.standard_normal((d, h), dtype=np.float32) * 0.01
        self.w2 = RNG.standard_normal((h, k), dtype=np.float32) * 0.01

    def forward(self, x):
        self.h = np.maximum(x @ self.w1, 0)
        return self.h @ self.w2

    def backward(self, x, grad, lr=1e-3):
        gw2 = self.h.T @ grad
        gh = (grad @ self.w2.T) * (self.h > 0)
        gw1 = x.T @ gh
        self.w1 -= lr * gw1
        self.w2 -= lr * gw2


def softmax_grad(logits, y):
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    return p / len(y)


def train(model, x, y, epochs=2, batch=4096):
    for _ in range(epochs):
        for i in range(0, len(x), batch):
            xb, yb = x[i : i + batch], y[i : i + batch]
            model.backward(xb, softmax_grad(model.forward(xb), yb))


def evaluate(model, x):
    model.forward(x)
    hidden = model.h
    stacked = np.concatenate([hidden, hidden])
    return float(stacked.mean())


def main():
    x, y = load_data()
    model = MLP()
    train(model, x, y)
    return evaluate(model, x)


main()
"""

LEAK = """\
import json

CACHE = []


def handle(i):
    payload = json.dumps({"i": i, "data": list(range(200))})
    CACHE.append(bytearray(2**20))
    return len(payload)


def work(i):
    buf = bytearray(3 * 2**20)
    return len(buf) + i


for i in range(100):
    handle(i)
    work(i)
"""

NO_LEAK = LEAK.replace("    CACHE.append(bytearray(2**20))\n", "    tmp = bytearray(2**20)\n")

ORT_MODEL = """\
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
w1 = numpy_helper.from_array(rng.standard_normal((256, 1024)).astype(np.float32), "W1")
w2 = numpy_helper.from_array(rng.standard_normal((1024, 256)).astype(np.float32), "W2")
nodes = [helper.make_node("MatMul", ["X", "W1"], ["H"]), helper.make_node("Relu", ["H"], ["R"]),
         helper.make_node("MatMul", ["R", "W2"], ["Y"])]
x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 256])
y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 256])
graph = helper.make_graph(nodes, "mlp", [x], [y], [w1, w2])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, "mlp.onnx")
"""

ORT_RUN = """\
import numpy as np
import onnxruntime as ort


def load(path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def infer(sess, batch):
    x = np.ones((batch, 256), dtype=np.float32)
    return sess.run(None, {"X": x})[0]


def main():
    sess = load("mlp.onnx")
    small = infer(sess, 64)
    big = infer(sess, 131072)
    return small.shape, big.shape


main()
"""

GATE_TESTS = """\
import onnxruntime as ort
import pytest

GARBAGE = []


@pytest.mark.parametrize("before", range(10))
def test_load(before, monitor_memory):
    # what other tests leave behind: freed during the load, or reused by it
    GARBAGE.extend(bytearray(50_000 + 9973 * before) for _ in range(40 * before))
    with monitor_memory("load") as m:
        GARBAGE.clear()
        sess = ort.InferenceSession("big.onnx", providers=["CPUExecutionProvider"])
    print("GATE", m.alloc_peak, m.increase)
    del sess
"""

ORT_BIG = ORT_MODEL.replace("(256, 1024)", "(4096, 4096)").replace("(1024, 256)", "(4096, 4096)")
ORT_BIG = ORT_BIG.replace('["N", 256]', '["N", 4096]').replace('"mlp.onnx"', '"big.onnx"')


def _line_of(source: str, text: str) -> int:
    """The line of ``source`` holding ``text``."""
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def _write(folder: str, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _call(cmd: list[str], folder: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-3000:]}")
    return proc.stdout


# -- overhead ------------------------------------------------------------------------


def _tools(folder: str, script: list[str]) -> dict[str, list[list[str]]]:
    out = os.path.join(folder, "out")
    tools = {
        "plain": [[PY, *script]],
        "run0": [[*CLI, "run", "-q", "--alloc-sample", "0", "-o", out + "0.json", *script]],
        "run": [[*CLI, "run", "-q", "-o", out + ".json", *script]],
    }
    if importlib.util.find_spec("memray") is not None:
        tools["memray"] = [[PY, "-m", "memray", "run", "-q", "-f", "-o", out + ".bin", *script],
                           [PY, "-m", "memray", "stats", out + ".bin"]]  # fmt: skip
    if importlib.util.find_spec("scalene") is not None:
        tools["scalene"] = [[PY, "-m", "scalene", "run", "-o", out + ".scalene.json", *script]]
    return tools


def _timed(commands: list[list[str]], folder: str) -> tuple[float, float, float, float]:
    """The program's own wall and CPU time, the commands' whole wall time, and the
    observer's CPU (from a report's notes, 0 for the other tools)."""
    times = os.path.join(folder, "times.txt")
    if os.path.exists(times):
        os.remove(times)
    env = dict(os.environ, BENCH_TIMES=times)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    for cmd in commands:
        _call(cmd, folder, env)
    wall = time.perf_counter() - start
    with open(times, encoding="utf-8") as f:
        own, cpu = (float(x) for x in f.read().split()[-2:])
    observer = 0.0
    report = next((a for a in commands[0] if a.endswith(".json") and "run" in commands[0]), "")
    if report and os.path.exists(report):
        with open(report, encoding="utf-8") as f:
            notes = " ".join(json.load(f).get("notes", ()))
        m = OBSERVER_CPU.search(notes)
        observer = float(m.group(1)) if m else 0.0
    return own, cpu, wall, observer


def _ratio(values: dict[str, list[float]], tool: str, base: str) -> str:
    low = min(values[tool]) / min(values[base])
    mid = statistics.median(values[tool]) / statistics.median(values[base])
    return f"{low:.3f}x ({mid:.3f}x)"


def overhead(folder: str, runs: int) -> None:
    make_csv(os.path.join(folder, "data.csv"))
    workloads = {"json": (JSON, []), "ast": (AST, []), "pandas": (PANDAS, ["data.csv"]),
                 "np-small": (NP_SMALL, [])}  # fmt: skip
    print("== overhead: ratios of the minimums over the plain run (of the medians beside)")
    for name, (source, extra) in workloads.items():
        script = _write(folder, f"{name.replace('-', '_')}_script.py", HEAD + source + TAIL)
        tools = _tools(folder, [script, *extra])
        figures: dict[str, dict[str, list[float]]] = {
            k: {t: [] for t in tools} for k in ("own", "cpu", "wall", "observer")
        }
        for commands in tools.values():  # caches warm
            _timed(commands, folder)
        for _ in range(runs):
            for tool, commands in tools.items():
                for key, value in zip(figures, _timed(commands, folder), strict=True):
                    figures[key][tool].append(value)
        own, cpu, wall = figures["own"], figures["cpu"], figures["wall"]
        others = [t for t in tools if t != "plain"]
        print(f"  {name}: plain {min(own['plain']):.3f} s wall, {min(cpu['plain']):.3f} s CPU")
        print("    program's wall: " + ", ".join(f"{t} {_ratio(own, t, 'plain')}" for t in others))
        print("    program's CPU:  " + ", ".join(f"{t} {_ratio(cpu, t, 'plain')}" for t in others))
        print("    command's wall: " + ", ".join(f"{t} {_ratio(wall, t, 'plain')}" for t in others))
        obs = figures["observer"]
        print(f"    sampling's own cost, run / run0: program's wall {_ratio(own, 'run', 'run0')}, "
              f"CPU {_ratio(cpu, 'run', 'run0')}; the observer's CPU "
              f"{statistics.median(obs['run0']):.3f} -> {statistics.median(obs['run']):.3f} s "
              "(median)", flush=True)  # fmt: skip


# -- live at the peak ----------------------------------------------------------------


def _key(function: str, line: int) -> str:
    """``line N (function)`` of the script: the line decides (memray names ``forward``
    what Python 3.11's qualified name calls ``MLP.forward``, and a comprehension by its
    own code object, which ours folds into its function)."""
    return f"line {line}"


def _ours(report: dict[str, Any], script: str, figure: str = "live_peak") -> dict[str, float]:
    """Our figure by line of the script (``function:line``), from a run's JSON."""
    alloc = report["allocations"]
    if alloc is None:  # not tracked: said in the notes
        print("    (no allocations: " + "; ".join(report["notes"]) + ")")
        return {}
    rows = alloc["lines"] if figure == "live_peak" else alloc["leaks"]
    out: dict[str, float] = {}
    for r in rows:
        site = r["site"]
        key = _key(site["function"], site["line"]) if site["file"] == script else "(other)"
        out[key] = out.get(key, 0.0) + r[figure]
    return out


def _memrays(path: str, script: str) -> dict[str, float]:
    """memray's bytes live at its peak by the innermost frame in the script."""
    import memray

    reader = memray.FileReader(path)
    out: collections.Counter[str] = collections.Counter()
    for rec in reader.get_high_watermark_allocation_records(merge_threads=True):
        where = "(other)"
        for function, file, line in rec.stack_trace():
            if os.path.abspath(file) == script:
                where = _key(function, line)
                break
        out[where] += rec.size
    return dict(out)


def _top(figures: dict[str, float], n: int = 3) -> list[tuple[str, float]]:
    return sorted(((k, v) for k, v in figures.items() if k != "(other)"), key=lambda kv: -kv[1])[:n]


def _agree(ours: list[tuple[str, float]], theirs: list[tuple[str, float]]) -> bool:
    mine = dict(ours)
    return {k for k, _ in ours} == {k for k, _ in theirs} and all(
        abs(mine[k] - v) <= 0.10 * v for k, v in theirs
    )


def peak(folder: str, trials: int) -> None:
    print("== live at the peak: top three lines of the script, ours and memray's "
          f"({trials} runs each)")  # fmt: skip
    for name, source in (("np_alloc.py", NP_ALLOC), ("mlp.py", MLP)):
        script = _write(folder, name, source)
        report = os.path.join(folder, "peak.json")
        strict = own_lines = 0
        first: tuple[Any, ...] = ()
        for _ in range(trials):
            _call([*CLI, "run", "-q", "-o", report, script], folder)
            with open(report, encoding="utf-8") as f:
                doc = json.load(f)
            bin_path = os.path.join(folder, "peak.bin")
            _call([PY, "-m", "memray", "run", "-q", "-f", "-o", bin_path, script], folder)
            ours, theirs = _ours(doc, script), _memrays(bin_path, script)
            strict += _agree(_top(ours), _top(theirs))
            # The program's own lines: an import's bytes are left out (memray patches a
            # library after its constructor ran: what a constructor allocates, OpenBLAS's
            # 64 MiB buffer, is not memray's).
            imports = {f"line {i}" for i, text in enumerate(source.splitlines(), 1)
                       if text.startswith(("import ", "from "))}  # fmt: skip
            no_import = {k: v for k, v in ours.items() if k not in imports}
            theirs_no = {k: v for k, v in theirs.items() if k not in imports}
            own_lines += _agree(_top(no_import), _top(theirs_no))
            if not first and doc["allocations"] is not None:
                first = (_top(ours, 4), _top(theirs, 4), doc["allocations"]["peak"],
                         doc["allocations"]["samples"])  # fmt: skip
        ours_top, theirs_top, heap, samples = first
        print(f"  {name}: heap peak {heap / MB:.0f} MB, {samples} samples (first run)")
        print("    ours:   " + ", ".join(f"{k} {v / MB:.1f} MB" for k, v in ours_top))
        print("    memray: " + ", ".join(f"{k} {v / MB:.1f} MB" for k, v in theirs_top))
        print(
            f"    top three = memray's within 10 %: {strict}/{trials} runs; "
            f"the program's own lines (imports apart): {own_lines}/{trials}",
            flush=True,
        )


# -- leaks ---------------------------------------------------------------------------


def leaks(folder: str, trials: int) -> None:
    print(f"== leaks ({trials} runs each)")
    named = clean = 0
    for _ in range(trials):
        for name, source in (("leak.py", LEAK), ("noleak.py", NO_LEAK)):
            script = _write(folder, name, source)
            report = os.path.join(folder, "leak.json")
            _call([*CLI, "run", "-q", "-o", report, script], folder)
            with open(report, encoding="utf-8") as f:
                doc = json.load(f)
            alloc = doc["allocations"]
            if alloc is None:
                print("    (no allocations: " + "; ".join(doc["notes"]) + ")")
                continue
            rows = alloc["leaks"]
            if name == "leak.py":
                top = rows[0]["site"] if rows else {}
                line = _line_of(LEAK, "CACHE.append")
                named += top.get("function") == "handle" and top.get("line") == line
            else:
                clean += not any(r["live_end"] > 0.01 * alloc["peak"] for r in rows)
    print(f"  the leaking line first among the candidates: {named}/{trials}")
    print(f"  no candidate above 1 % of the peak without a leak: {clean}/{trials}", flush=True)


# -- native --------------------------------------------------------------------------


def native(folder: str, trials: int) -> None:
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
        print("== native: skipped (onnxruntime and onnx needed)")
        return
    _call([PY, _write(folder, "make_model.py", ORT_MODEL)], folder)
    script = _write(folder, "ort_run.py", ORT_RUN)
    ratios = []
    for _ in range(trials):
        report = os.path.join(folder, "ort.json")
        _call([*CLI, "run", "-q", "-o", report, script], folder)
        with open(report, encoding="utf-8") as f:
            doc = json.load(f)
        bin_path = os.path.join(folder, "ort.bin")
        _call([PY, "-m", "memray", "run", "-q", "-f", "-o", bin_path, script], folder)
        ours, theirs = _ours(doc, script), _memrays(bin_path, script)
        key = f"line {_line_of(ORT_RUN, 'sess.run')}"
        ratios.append((ours.get(key, 0.0), theirs.get(key, 0.0)))
    line = _line_of(ORT_RUN, "sess.run")
    rows = (doc["allocations"] or {}).get("lines", ())
    lib = next((r["native"] for r in rows if r["site"]["line"] == line), "")
    print(f"== native: ONNX Runtime sess.run of a 131,072 batch ({trials} runs)")
    print(f"  ours {ratios[0][0] / MB:.0f} MB [{lib}], memray {ratios[0][1] / MB:.0f} MB; "
          f"ours / memray: min {min(o / t for o, t in ratios):.3f}, "
          f"median {statistics.median(o / t for o, t in ratios):.3f}", flush=True)  # fmt: skip


# -- gate ----------------------------------------------------------------------------


def gate(folder: str) -> None:
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
        print("== gate: skipped (onnxruntime and onnx needed)")
        return
    _call([PY, _write(folder, "make_big.py", ORT_BIG)], folder)
    _write(folder, "test_gate.py", GATE_TESTS)
    out = _call([PY, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_gate.py"],
                folder)  # fmt: skip
    pairs = [(int(a), int(b)) for a, b in re.findall(r"GATE (\d+) (-?\d+)", out)]
    alloc = [a for a, _ in pairs]
    rss = [b for _, b in pairs]
    print(f"== gate: the same ONNX Runtime model (128 MiB of weights) loaded {len(pairs)} times "
          "in one pytest session")  # fmt: skip
    print(f"  allocations' peak {min(alloc) / MB:.1f}-{max(alloc) / MB:.1f} MB: spread "
          f"{max(alloc) / min(alloc) - 1:.2%}")  # fmt: skip
    print(f"  RSS increase      {min(rss) / MB:.1f}-{max(rss) / MB:.1f} MB: spread "
          f"{max(rss) / max(min(rss), 1) - 1:.2%}", flush=True)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="interleaved rounds (7)")
    parser.add_argument("--trials", type=int, default=10, help="runs of the accuracy checks")
    parser.add_argument("--only", default="overhead,peak,leaks,native,gate")
    args = parser.parse_args(argv)
    print(f"# bench_alloc {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.platform()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
          f"Python {platform.python_version()}")  # fmt: skip
    start = time.monotonic()
    sections: dict[str, Any] = {
        "overhead": lambda d: overhead(d, args.runs),
        "peak": lambda d: peak(d, args.trials),
        "leaks": lambda d: leaks(d, args.trials),
        "native": lambda d: native(d, args.trials),
        "gate": gate,
    }
    for name in args.only.split(","):
        with tempfile.TemporaryDirectory() as folder:
            sections[name](folder)
    print(f"# total {time.monotonic() - start:.0f} s, load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
