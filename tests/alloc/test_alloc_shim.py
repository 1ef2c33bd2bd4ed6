"""The shim with real allocations, end to end: a program run under it and the observer,
its records read from outside, the estimates checked against what the program did; the
hostile cases (fork in a threaded program, 200 threads, a preloaded allocator,
subprocesses, a shim that is not loaded) run to the end and say what was not tracked."""

from __future__ import annotations

import ctypes.util
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from onnxrt_backend_dev.monitoring._alloc.program import plan
from onnxrt_backend_dev.monitoring._alloc.report import alloc_facts, tracking_notes
from onnxrt_backend_dev.monitoring._alloc.shim import shim_status
from onnxrt_backend_dev.monitoring._alloc.tracker import AllocTracker
from onnxrt_backend_dev.monitoring._observe.build import decode_stacks
from onnxrt_backend_dev.monitoring._observe.launch import observe_program
from onnxrt_backend_dev.monitoring._observe.session import availability
from onnxrt_backend_dev.monitoring._report.allocations import AllocFacts, build_allocations
from onnxrt_backend_dev.monitoring._sampling.aggregate import Aggregator

MiB = 2**20
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shim_status().path is None, reason="the shim is not built"),
    pytest.mark.skipif(not availability().ok, reason="the observer cannot run here"),
]


def observe(
    tmp_path: Path, source: str, mean: int = 1, env: dict[str, str] | None = None
) -> tuple[Any, AllocFacts]:
    """Runs ``source`` under the shim and the observer; its run and its figures."""
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    environ = dict(os.environ if env is None else env)
    alloc = plan(mean, environ=environ, seed=1234)
    assert alloc.env is not None and alloc.make is not None
    run = observe_program([sys.executable, str(script)], 0.005, Aggregator(), env=alloc.env,
                          alloc=alloc.make)  # fmt: skip
    assert os.WIFEXITED(run.status) and os.WEXITSTATUS(run.status) == 0, run.status
    tracker = run.record.alloc
    facts = alloc_facts(tracker, decode_stacks(run.record), run.observer.t0)
    assert facts is not None, tracker.why
    return run, facts


def by_line(facts: AllocFacts, figure: str = "live_peak") -> dict[int, float]:
    """A figure of the program's own lines (``prog.py``), by line number."""
    section = build_allocations(facts)
    rows = {*section.lines, *section.allocating, *section.temporaries, *section.leaks}
    return {r.site.line: getattr(r, figure) for r in rows if r.site.file.endswith("prog.py")}


PEAK = """
import numpy as np

def small():
    return [np.ones(1000) for _ in range(2000)]

def big():
    return np.ones(16 * 2**20 // 8)

def main():
    xs = small()
    del xs
    a = big()
    b = np.concatenate([a, a])
    del b
    return a

keep = main()
"""


def test_allocations_sampled_finely_give_the_live_bytes_at_the_peak(tmp_path: Path) -> None:
    # GIVEN one sample per 16 KiB: every allocation of 1 MiB or more is exact
    run, facts = observe(tmp_path, PEAK, mean=16384)
    live = by_line(facts)
    # THEN the peak holds big()'s 16 MiB and the concatenation's 32 MiB, by their lines
    assert live[8] == pytest.approx(16 * MiB, rel=0.01)
    assert live[14] == pytest.approx(32 * MiB, rel=0.01)
    # freed before the peak (the interpreter's arenas its objects opened may stay: 1 MiB
    # each on 3.13)
    assert live.get(5, 0.0) <= 2 * MiB
    allocated = by_line(facts, "allocated")
    assert allocated[5] == pytest.approx(2000 * 8000, rel=0.15)  # 2,000 arrays of 8,000 B
    assert facts.peak >= 48 * MiB and facts.count > 2000
    assert facts.lost == 0 and run.record.alloc.header.table_full == 0


def test_sampled_at_the_default_rate_big_allocations_are_exact(tmp_path: Path) -> None:
    _, facts = observe(tmp_path, PEAK, mean=256 * 1024)
    live = by_line(facts)
    assert live[8] == pytest.approx(16 * MiB, rel=0.01)
    assert live[14] == pytest.approx(32 * MiB, rel=0.01)
    section = build_allocations(facts)
    # numpy's import holds OpenBLAS's buffer (64 MiB, mapped by its constructor), then
    # the concatenation, then big()
    assert [r.site.line for r in section.lines[:3]] == [2, 14, 8]
    assert section.lines[1].native.startswith("numpy")


LEAK = """
KEEP = []

def leaky():
    KEEP.append(bytearray(2**20))

def clean():
    x = bytearray(2**20)
    return len(x)

for _ in range(40):
    leaky()
    clean()
"""


def test_what_is_still_live_at_the_end_names_the_leak(tmp_path: Path) -> None:
    _, facts = observe(tmp_path, LEAK, mean=64 * 1024)
    section = build_allocations(facts)
    assert section.leaks and section.leaks[0].site.line == 5
    assert section.leaks[0].live_end == pytest.approx(40 * MiB, rel=0.05)
    assert all(r.site.line != 8 for r in section.leaks)
    assert by_line(facts, "temporary").get(8, 0.0) >= 20 * MiB  # clean()'s: freed at once


FORK = """
import os, threading

stop = False

def churn():
    while not stop:
        xs = [bytearray(5000) for _ in range(50)]
        del xs

threads = [threading.Thread(target=churn) for _ in range(4)]
for t in threads:
    t.start()
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        data = [bytearray(10000) for _ in range(100)]
        os._exit(0 if len(data) == 100 else 1)
    _, status = os.waitpid(pid, 0)
    assert status == 0, status
stop = True
for t in threads:
    t.join()
"""


@pytest.mark.timeout(120)
def test_fork_in_a_threaded_allocating_program_neither_deadlocks_nor_mixes_records(
    tmp_path: Path,
) -> None:
    run, facts = observe(tmp_path, FORK, mean=4096)
    header = run.record.alloc.header
    assert header.pid == run.record.pid and header.generation == 0
    assert facts.samples > 0


THREADS = """
import threading

barrier = threading.Barrier(200)

def work():
    barrier.wait()
    keep = []
    for i in range(200):
        keep.append(bytearray(1000 + i))
        if len(keep) > 20:
            keep.pop(0)

threads = [threading.Thread(target=work) for _ in range(200)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


@pytest.mark.timeout(120)
def test_two_hundred_threads_allocating_at_once_run_to_the_end(tmp_path: Path) -> None:
    run, facts = observe(tmp_path, THREADS, mean=1)
    tracker = run.record.alloc
    # Every allocation recorded by 200 threads at once: more than the ring holds between
    # two reads; what is lost is counted, nothing hangs, the tracker's memory is bounded.
    assert facts.samples + facts.lost >= 200 * 200
    assert len(tracker.estimator.live) <= 32768 and not tracker.pending


def test_subprocesses_do_not_inherit_the_shim(tmp_path: Path) -> None:
    out = tmp_path / "child_env.txt"
    source = f"""
    import os, subprocess, sys
    print(os.environ.get("LD_PRELOAD", ""), file=open({str(tmp_path / "own_env.txt")!r}, "w"))
    code = "import os; print(os.environ.get('LD_PRELOAD', ''))"
    text = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    open({str(out)!r}, "w").write(text)
    """
    env = dict(os.environ, LD_PRELOAD="/nonexistent/libother.so")
    observe(tmp_path, source, mean=1024, env=env)
    shim = str(shim_status().path)
    assert shim not in (tmp_path / "own_env.txt").read_text()
    assert out.read_text().strip() == "/nonexistent/libother.so"


@pytest.mark.parametrize("name", ["jemalloc", "tcmalloc_minimal"])
def test_a_preloaded_allocator_is_tracked_through(tmp_path: Path, name: str) -> None:
    found = ctypes.util.find_library(name)
    if found is None:
        pytest.skip(f"no {name} here")
    path = next(
        (os.path.join(d, found) for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")
         if os.path.exists(os.path.join(d, found))),
        found,
    )  # fmt: skip
    env = dict(os.environ, LD_PRELOAD=path)
    run, facts = observe(tmp_path, PEAK, mean=256 * 1024, env=env)
    live = by_line(facts)
    # Its own mmap calls are not counted twice: the figures are the program's.
    assert live[14] == pytest.approx(32 * MiB, rel=0.01)
    assert facts.peak < 160 * MiB
    notes = tracking_notes(run.record.alloc, 0, run.record.alloc.preloaded)
    assert any("preloaded" in n for n in notes)


def test_a_shim_that_is_not_loaded_says_so(tmp_path: Path) -> None:
    # GIVEN a tracker waiting for a shim the program never loads
    script = tmp_path / "prog.py"
    script.write_text("import time\nx = [bytearray(100) for _ in range(1000)]\ntime.sleep(0.2)\n")

    def make(pid: int) -> AllocTracker:
        return AllocTracker(pid, str(tmp_path / "absent.so"))

    run = observe_program([sys.executable, str(script)], 0.005, Aggregator(), alloc=make)
    tracker = run.record.alloc
    assert tracker.failed and "not loaded" in tracker.why
    assert alloc_facts(tracker, [], 0.0) is None
    assert "nothing was read" in tracking_notes(tracker)[0]
