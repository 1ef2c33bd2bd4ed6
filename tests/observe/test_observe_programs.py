"""Programs run under the observer as a plain interpreter: exec, their own signal
handlers and threads, the CPU split in the outputs, commands that do not exist."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._observe.session import availability

pytestmark = pytest.mark.skipif(
    not availability().ok, reason=f"the observer cannot run here: {availability().reason}"
)
TIMEOUT = 120


def _cli(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", *argv],
        cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip


EXECS = """\
import os, sys, time


def before_exec():
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:
        pass


def after_exec():
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:
        pass
    sys.exit(5)


if len(sys.argv) > 1:
    after_exec()
before_exec()
os.execv(sys.executable, [sys.executable, __file__, "again"])
"""


@pytest.mark.parametrize("command", ["profile", "run"])
def test_a_program_that_execs_is_read_anew(tmp_path: Path, command: str) -> None:
    # GIVEN a program replacing itself with os.execv (the same interpreter, anew)
    (tmp_path / "execs.py").write_text(EXECS)
    out = tmp_path / "out.json"
    # WHEN observed
    proc = _cli(tmp_path, command, "-q", "-o", str(out), "execs.py")
    # THEN it runs to its end (no timer of the tool's left to kill it), its exit code is
    # the exec'd program's, and both sides of the exec are in the output
    assert proc.returncode == 5, proc.stderr
    text = out.read_text()
    assert "before_exec" in text and "after_exec" in text


OWN_WAYS = """\
import signal, sys, threading, time

calls = []
signal.signal(signal.SIGALRM, lambda s, f: calls.append(s))
signal.signal(signal.SIGPROF, lambda s, f: calls.append(s))
signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)
sys.setrecursionlimit(200)
sys.setprofile(lambda *a: None)


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


t = threading.Thread(target=spin, args=(0.2,), name="its-own-thread")
t.start()
spin(0.2)
t.join()
sys.setprofile(None)
signal.setitimer(signal.ITIMER_REAL, 0, 0)
print("alarms", len(calls) > 0)
"""


def test_a_program_with_its_own_handlers_threads_and_profiler_is_observed_as_it_is(
    tmp_path: Path,
) -> None:
    (tmp_path / "own.py").write_text(OWN_WAYS)
    out = tmp_path / "p.json"
    proc = _cli(tmp_path, "profile", "-q", "-o", str(out), "own.py")
    assert proc.returncode == 0, proc.stderr
    assert "alarms True" in proc.stdout  # its SIGALRM handler got its alarms
    doc = json.loads(out.read_text())
    names = {t["name"] for t in doc["threads"]}
    assert {"MainThread", "its-own-thread"} <= names


SPLIT = """\
import time


def computing():
    end = time.perf_counter() + 0.4
    x = 0
    while time.perf_counter() < end:
        x += 1


def sleeping():
    time.sleep(0.4)


computing()
sleeping()
"""


def test_the_cpu_split_and_waiting_are_in_the_json_of_profile_and_run(tmp_path: Path) -> None:
    (tmp_path / "split.py").write_text(SPLIT)
    prof, rep = tmp_path / "p.json", tmp_path / "r.json"
    assert _cli(tmp_path, "profile", "-q", "-o", str(prof), "split.py").returncode == 0
    assert _cli(tmp_path, "run", "-q", "-o", str(rep), "split.py").returncode == 0
    doc = json.loads(prof.read_text())
    assert doc["split_known"] is True
    lines = {h["line"]: h["split"] for f in doc["hot_lines"] for h in f["lines"]}
    # the sleeping line waits; the computing loop is on the CPU (generous at any load)
    assert lines[12]["waiting"] > 0.8
    assert min(lines[k]["waiting"] for k in (7, 8) if k in lines) < 0.9
    for split in lines.values():
        assert sum(split.values()) == pytest.approx(1.0, abs=0.01)
    report = json.loads(rep.read_text())
    assert any(any(r["split"]) for r in report["lines"])


def test_a_command_that_does_not_exist_is_one_line_and_127(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "run", "-q", "--", "/nonexistent/cmd")
    assert proc.returncode == 127
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1 and "/nonexistent/cmd" in lines[0], proc.stderr


FORKS = """\
import multiprocessing as mp, time


def child():
    block = bytearray(120 * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(0.2)


if __name__ == "__main__":
    time.sleep(0.1)
    p = mp.get_context("fork").Process(target=child)
    p.start()
    p.join()
"""


def test_a_child_process_peak_is_its_own_not_the_programs(tmp_path: Path) -> None:
    # GIVEN a program whose multiprocessing child holds 120 MiB (the parent: ~15 MiB)
    (tmp_path / "forks.py").write_text(FORKS)
    out = tmp_path / "out.json"
    # WHEN run (wait4's ru_maxrss is the family's highest: the child's)
    proc = _cli(tmp_path, "run", "-o", str(out), "forks.py")
    # THEN the program's peak is its own, the child's is on its own curve and line
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["peak"]["value"] < 80 * 2**20
    child = [c for c in doc["curves"] if c["name"].startswith("rss process")]
    assert child and child[0]["peak"] > 110 * 2**20
    assert "its own peak RSS" in proc.stdout + proc.stderr


POOL = """\
import os
import time

import numpy as np

a = np.random.rand(500, 500)
end = time.perf_counter() + 0.8
while time.perf_counter() < end:
    b = a @ a
time.sleep(0.3)  # the pool idles: its threads block, and are named by their library
print("threads", len(os.listdir("/proc/self/task")))
"""


def test_a_native_pools_cpu_is_on_the_line_that_runs_it(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    # GIVEN a program multiplying matrices with OpenBLAS's threads (a pool started from C)
    (tmp_path / "pool.py").write_text(POOL)
    out = tmp_path / "r.json"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    # WHEN run
    proc = subprocess.run(
        [sys.executable, "-m", "onnxrt_backend_dev.monitoring", "run", "-q", "-o", str(out),
         "pool.py"], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    if "threads 1" in proc.stdout:
        pytest.skip("this numpy multiplies in the calling thread only: no pool")
    # THEN the pool's CPU (the 5th figure of a line's split) is on the matmul line most
    pools = {r["site"]["line"]: r["split"][4] for r in json.loads(out.read_text())["lines"]
             if len(r["split"]) > 4}  # fmt: skip
    assert pools.get(9, 0.0) > 0 and max(pools, key=lambda k: pools[k]) == 9, pools
    # AND the page names the pool by the library on its threads' stacks, with its CPU
    notes = [n for n in json.loads(out.read_text())["notes"] if "native pools" in n]
    assert notes and "numpy (" in notes[0], notes
