"""The flight recorder: a child in a fresh interpreter streams its ticks, the parent
writes the report however the child ends (real processes)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._cli.run_child import command_line
from onnxrt_backend_dev.monitoring._report.model import Report
from onnxrt_backend_dev.monitoring._report.runner import ending_of_status, run_fresh
from onnxrt_backend_dev.monitoring._report.session import monitor
from onnxrt_backend_dev.monitoring._run.program import Target
from onnxrt_backend_dev.monitoring.memory_peak import register_probe

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
MIB = 2**20

# Fresh anonymous pages, each written: a bytearray may reuse the free, already resident
# heap of the interpreter (the RSS then grew 75 MiB for 120 MiB allocated).
GROW_UNTIL = """
import mmap, os, signal, sys, time

MIB = 2**20


def grow_until(how):
    chunks = []
    for _ in range(15):
        chunk = mmap.mmap(-1, 8 * MIB)
        for offset in range(0, 8 * MIB, mmap.PAGESIZE):
            chunk[offset] = 1
        chunks.append(chunk)
        time.sleep(0.01)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "exit":
        os._exit(3)


grow_until(sys.argv[1] if len(sys.argv) > 1 else "")
"""

MAKE_PEAK = """
def make_peak():
    a = bytearray(100 * 2**20)
    b = bytearray(100 * 2**20)
    del a, b


make_peak()
"""


def run_script(
    tmp_path: Path,
    source: str,
    args: tuple[str, ...] = (),
    interval: float = 0.005,
    probes: tuple[str, ...] = (),
) -> tuple[Report, int]:
    """Runs ``source`` as a script the way ``run`` does (:func:`run_fresh`, its child)."""
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source), encoding="utf-8")
    target = Target("script", str(script), args)
    return run_fresh(lambda fd: command_line(fd, interval, target), "prog", interval, probes)


@pytest.mark.parametrize(
    ("how", "kind", "code"), [("kill", "signal", 137), ("exit", "os_exit", 3), ("", "exit", 0)]
)
def test_the_report_is_written_however_the_child_ends(
    how: str, kind: str, code: int, tmp_path: Path
) -> None:
    # WHEN a child growing its memory in grow_until ends in each way
    report, rc = run_script(tmp_path, GROW_UNTIL, (how,), interval=0.002)
    # THEN the report says how it ended, with the conventional code
    assert (report.ending.kind, rc) == (kind, code), report.ending
    # AND names grow_until as what was allocating at the end and as the peak's builder
    assert report.ending.last_site is not None
    assert report.ending.last_site.function == "grow_until"
    assert report.peak.site is not None and report.peak.site.function == "grow_until"
    # AND the exact peak (wait4's ru_maxrss) is at least what was allocated
    assert report.peak.value - report.peak.start >= 100 * MIB
    assert report.cpu is not None and report.cpu > 0


def make_peak() -> None:
    a = bytearray(100 * MIB)
    b = bytearray(100 * MIB)
    del a, b


def test_a_peak_shorter_than_a_tick_is_credited_to_the_function_that_built_it() -> None:
    with monitor("peak", interval=0.05) as m:
        make_peak()
    report = m.report
    assert report is not None and report.ending.kind == "exit"
    assert report.peak.site is not None and report.peak.site.function == "make_peak"
    assert sum(p.bytes for p in report.composition) == pytest.approx(
        report.peak.value - report.peak.start
    )


def test_a_device_probe_gives_one_curve_and_peak_per_device(tmp_path: Path) -> None:
    # GIVEN the fake AMD probe (two devices, 1 and 3 GiB)
    register_probe("fakeamd", "fakes:FakeAmdProbe", package="fake-amdsmi", extra="amd")
    report, rc = run_script(tmp_path, MAKE_PEAK, probes=("fakeamd",))
    assert rc == 0
    assert [(d.name, d.peak) for d in report.devices] == [
        ("fakeamd:amd0", 1024 * MIB),
        ("fakeamd:amd1", 3072 * MIB),
    ]
    assert {c.name for c in report.curves} == {"rss", "fakeamd:amd0", "fakeamd:amd1"}


@pytest.mark.parametrize(
    ("status", "kind", "code", "words"),
    [
        (signal.SIGKILL, "signal", 137, "OOM killer"),
        (signal.SIGSEGV, "signal", 139, "segmentation fault"),
        (signal.SIGTERM, "signal", 143, "SIGTERM"),
        (3 << 8, "os_exit", 3, "os._exit(3)"),
    ],
)
def test_ending_of_a_wait_status(status: int, kind: str, code: int, words: str) -> None:
    ending = ending_of_status(int(status))
    assert (ending.kind, ending.code) == (kind, code) and words in ending.detail


def test_the_library_context_manager_reports_the_block() -> None:
    # WHEN a block allocates under monitor()
    with monitor("block", interval=0.002, spy=False) as m:
        data = bytearray(120 * MIB)  # over glibc's largest mmap threshold: new pages
        del data
    # THEN its report names this test as the root, the block's end as normal
    report = m.report
    assert report is not None and report.ending.kind == "exit"
    assert report.peak.value - report.peak.start >= 100 * MIB
    assert report.tree and report.tree[0].site.function.startswith("test_the_library")


def test_the_context_manager_reports_an_exception_and_lets_it_through() -> None:
    with pytest.raises(KeyError), monitor(spy=False) as m:
        raise KeyError("x")
    assert m.report is not None and m.report.ending.kind == "exception"
    assert "KeyError" in m.report.ending.detail


def test_the_context_manager_refuses_a_bad_interval() -> None:
    with pytest.raises(ValueError, match=r"interval must be >= 0\.001"), monitor(interval=0.0):
        pass


def hash_for(seconds: float) -> None:
    import hashlib

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hashlib.sha256(b"x" * 10_000).digest()


def test_threads_get_their_own_tree_from_the_time_sampler() -> None:
    import threading

    # WHEN a worker thread hashes while the main thread waits, under monitor()
    with monitor("threads", spy=False) as m:
        worker = threading.Thread(target=hash_for, args=(0.4,), name="hasher")
        worker.start()
        worker.join()
    report = m.report
    assert report is not None
    # THEN the worker has a root row of its own, with hash_for under it; no tool thread
    roots = {r.site.function: r for r in report.tree if r.parent < 0}
    assert "thread hasher" in roots, list(roots)
    assert any(r.site.function == "hash_for" for r in report.tree)
    assert not any("memory-spy" in name or "onnxrt-sampler" in name for name in roots)


POOL = """
import hashlib, multiprocessing, time


def hash_for(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hashlib.sha256(b"x" * 10_000).digest()


def pool_work(n):
    hash_for(0.3)
    return n


with multiprocessing.get_context("fork").Pool(2) as pool:
    pool.map(pool_work, range(2))
"""


def test_forked_children_appear_as_their_own_trees(tmp_path: Path) -> None:
    # WHEN the program runs a fork pool of 2 workers hashing for 0.3 s each
    report, rc = run_script(tmp_path, POOL)
    assert rc == 0
    # THEN each worker that ran is a root of its own, with hash_for under it
    roots = [r for r in report.tree if r.parent < 0 and r.site.function.startswith("process ")]
    assert roots, [r.site.function for r in report.tree if r.parent < 0]
    names = {r.site.function for r in report.tree}
    assert "hash_for" in names and "pool_work" in names


def test_a_ctrl_c_while_the_spy_starts_still_ends_in_the_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from onnxrt_backend_dev.monitoring._report import runner

    # GIVEN a spy slow to start (a loaded machine) and a Ctrl-C reaching the parent then,
    # once the program is in its sleep (a gate file: under load the forked child may not
    # have reached it yet, and a Ctrl-C before the program is another ending)
    gate = tmp_path / "in-program"

    def slow_spy_start(pid: int, probes: object) -> tuple[None, list[str]]:
        deadline = time.monotonic() + 60
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the signal's handler runs in here
        return None, []

    monkeypatch.setattr(runner, "_start_spy", slow_spy_start)

    sleepy = f"""
import pathlib, time

pathlib.Path({str(gate)!r}).touch()
time.sleep(60)
"""

    # WHEN the program runs THEN the parent forwards the Ctrl-C to the program, which
    # ends, and the report is made (the parent does not die of a KeyboardInterrupt)
    try:
        report, rc = run_script(tmp_path, sleepy, interval=0.01)
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C during the spy's start killed the parent: no report")
    assert (report.ending.kind, rc) == ("interrupted", 130)


def test_a_child_whose_command_died_before_its_death_signal_was_armed_ends_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxrt_backend_dev.monitoring._report import runner

    # GIVEN the child sees another parent than the command (the command died between
    # the fork and the arming of the death signal: a Ctrl-C on a loaded machine)
    marker = tmp_path / "ran"
    monkeypatch.setattr(runner.os, "getppid", lambda: 1)
    # WHEN a program is started in a fresh interpreter
    _, rc = runner.run_fresh(
        lambda fd: [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"], "prog"
    )
    # THEN the child kills itself before its exec: the program never runs, nothing is
    # left, and the report says how it ended
    assert rc == 128 + signal.SIGKILL and not marker.exists()
