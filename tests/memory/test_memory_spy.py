"""Tests for the spy's orchestration (``_memory/spy.py``) and the public face
(``memory_peak``): the pipe reader, errors, bad input, real spies and their failure modes."""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import TESTS as _TESTS

from onnxrt_backend_dev.monitoring._memory import worker as _spy_worker
from onnxrt_backend_dev.monitoring._memory.spy import START_TIMEOUT, _raise_error, _Reader
from onnxrt_backend_dev.monitoring.memory_peak import (
    MemorySpy,
    get_memory_rss,
    spied,
    spy_call,
    start_spying_on,
)

MIB = 2**20
TESTS = _TESTS
REAL_TIMEOUT = 30  # seconds for any child process of these tests


def _run_python(
    code: str, *, env: dict[str, str] | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=REAL_TIMEOUT,
        env=env,
        cwd=cwd,
    )


def _gone_or_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(b")") + 2 :].split()[0] == b"Z"


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone_or_zombie(pid):
            return True
        time.sleep(0.02)
    return False


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(REAL_TIMEOUT)
    return proc.pid


class _FakeProc:
    """Stands for the spy process: its stdout is a pipe the test writes to."""

    def __init__(self, fd: int) -> None:
        self.stdout = open(fd, "rb", buffering=0)  # noqa: SIM115 (closed by the test)

    def wait(self, timeout: float | None = None) -> int:
        return 0


def test_reader_reassembles_large_frames_from_short_reads() -> None:
    # GIVEN a 1 MiB payload, far more than a pipe holds, written in odd-sized pieces
    r, w = os.pipe()
    data = _spy_worker.encode_frame({"kind": "ready", "t0": 1.0})
    data += _spy_worker.encode_frame({"kind": "result"}, bytes(range(256)) * 4096)
    proc = _FakeProc(r)
    reader = _Reader(proc)  # type: ignore[arg-type]
    for i in range(0, len(data), 7777):
        os.write(w, data[i : i + 7777])
    os.close(w)
    # THEN both frames arrive whole
    assert reader.done.wait(REAL_TIMEOUT)
    reader.thread.join(REAL_TIMEOUT)
    proc.stdout.close()
    assert reader.ready_frame == {"kind": "ready", "t0": 1.0}
    assert reader.final is not None and reader.final[1] == bytes(range(256)) * 4096


def test_errors_reported_by_the_spy_keep_their_type() -> None:
    with pytest.raises(PermissionError, match="advice"):
        _raise_error({"type": "PermissionError", "message": "advice"})
    with pytest.raises(RuntimeError, match="odd"):
        _raise_error({"type": "SomethingElse", "message": "odd"})


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"delay": 0}, ValueError, "delay must be >= 0.001 s and finite, got 0"),
        ({"delay": -1.0}, ValueError, "delay must be >= 0.001 s and finite, got -1.0"),
        ({"delay": 1e-6}, ValueError, "delay must be >= 0.001 s and finite, got 1e-06"),
        ({"delay": float("nan")}, ValueError, "got nan"),
        ({"delay": float("inf")}, ValueError, "got inf"),
        ({"delay": "0.1"}, TypeError, "delay must be a number of seconds, got str"),
        ({"pid": 0}, ValueError, "pid must be > 0, got 0"),
        ({"pid": "12"}, TypeError, "pid must be an int, got str"),
        ({"pid": 2**63}, ValueError, "pid must be <= [0-9]+ \\(this system's pid_max\\), got 92"),
        ({"pid": 2**22 + 1}, ValueError, "pid must be <= [0-9]+ \\(this system's pid_max\\)"),
        ({"max_points": 1}, ValueError, "max_points must be >= 2, got 1"),
        ({"max_points": "10"}, TypeError, "max_points must be an int, got str"),
        ({"max_points": 10.0}, TypeError, "max_points must be an int, got float"),
        ({"start_timeout": 0}, ValueError, "start_timeout must be > 0 and finite, got 0"),
        ({"start_timeout": "5"}, TypeError, "start_timeout must be a number of seconds, got str"),
        ({"stop_timeout": -1}, ValueError, "stop_timeout must be > 0 and finite, got -1"),
        ({"probes": ("nope",)}, ValueError, "unknown probe 'nope'"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, object], exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        start_spying_on(**kwargs)  # type: ignore[arg-type]


@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_pid_that_does_not_exist_is_refused_at_once() -> None:
    pid = _dead_pid()
    begin = time.perf_counter()
    with pytest.raises(ProcessLookupError, match=f"pid {pid}"):
        start_spying_on(pid)
    # no spy is even started: far from a spy's start timeout, even on a loaded machine
    assert time.perf_counter() - begin < 5.0
    with pytest.raises(ProcessLookupError, match=str(pid)):
        get_memory_rss(pid)


def test_get_memory_rss_of_this_process() -> None:
    assert 1 * MIB < get_memory_rss(os.getpid()) < 100 * 2**30


@pytest.mark.parametrize(
    ("pid", "exc", "match"),
    [
        (None, TypeError, "pid must be an int, got NoneType"),
        ("1", TypeError, "pid must be an int, got str"),
        (-3, ValueError, "pid must be > 0, got -3"),
        (2**64, ValueError, "pid must be <= [0-9]+ \\(this system's pid_max\\)"),
    ],
)
def test_get_memory_rss_refuses_what_is_not_a_pid(pid: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        get_memory_rss(pid)  # type: ignore[arg-type]


# --- real spies -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_reference_example_runs_verbatim() -> None:
    code = (
        "from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on\n"
        "p = start_spying_on()\n# ...\n# code to measure\n# ...\n"
        "stat = p.stop()\nprint(stat)\n"
    )
    res = _run_python(code)
    assert res.returncode == 0, res.stderr
    assert "cpu: peak" in res.stdout and "iB" in res.stdout
    assert res.stderr == ""


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_spike_shorter_than_delay_sets_the_peak() -> None:
    # GIVEN a spy ticking every 0.5 s WHEN 100 MiB live for a few ms between two ticks
    spy = start_spying_on(delay=0.5)
    block = b"\x01" * (100 * MIB)
    del block
    stat = spy.stop()
    cpu = stat["cpu"]
    # THEN the high-water mark still caught it
    assert cpu.peak_source == "hwm"
    assert 90 * MIB < cpu.max_peak - cpu.begin < 140 * MIB
    assert cpu.n_measures >= 2 and stat["target_exited"] is False
    assert cpu.previous_peak is not None


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_stop_twice_returns_the_same_result_and_leaves_no_process() -> None:
    spy = start_spying_on()
    assert spy.start() is spy
    stat = spy.stop()
    assert spy.stop() is stat
    assert spy._proc is not None and spy._proc.returncode is not None
    # start() after stop() measures anew
    again = spy.start().stop()
    assert again is not stat and again["cpu"].n_measures >= 1


def _touch_new_pages(n: int) -> int:
    """``n`` bytes of pages new to the process (a bytes object of 20 MiB may reuse the
    heap a test before it freed: glibc raises its mmap threshold after such a free)."""
    with mmap.mmap(-1, n) as m:
        m.write(b"\x01" * 4096 * (n // 4096))
        return len(m)


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_context_manager_helper_and_decorator() -> None:
    with start_spying_on() as spy:
        spy.mark("inside")
    assert spy.result is not None and spy.result["marks"][0][1] == "inside"
    value, stat = spy_call(_touch_new_pages, (20 * MIB,))
    assert value == 20 * MIB and stat["cpu"].delta_peak > 15 * MIB

    @spied(delay=0.05)
    def work() -> int:
        return 7

    assert work() == 7 and work.memory["cpu"].n_measures >= 1  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_spy_ends_on_its_own_when_the_target_exits() -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    spy = MemorySpy(target.pid, delay=0.01)
    target.wait(REAL_TIMEOUT)
    assert spy.wait(10.0)
    assert spy._proc is not None
    deadline = time.monotonic() + 10.0
    while os.path.exists(f"/proc/{spy._proc.pid}") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(f"/proc/{spy._proc.pid}")  # ended and reaped before stop()
    stat = spy.stop()
    assert stat["target_exited"] is True and stat["cpu"].n_measures >= 1
    assert spy._proc.returncode == 0


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
@pytest.mark.parametrize("ending", ["os._exit(0)", "sys.exit(0)", "os.kill(os.getpid(), 9)"])
def test_the_spy_ends_when_its_parent_dies_without_stop(ending: str) -> None:
    code = textwrap.dedent(
        f"""
        import os, sys
        from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on
        spy = start_spying_on()
        print(spy._proc.pid, flush=True)
        {ending}
        """
    )
    res = _run_python(code)
    worker = int(res.stdout.split()[0])
    assert _wait_gone(worker), f"the spy {worker} outlived its parent"
    assert res.stderr == ""


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_spy_ends_when_its_parent_dies_even_if_a_fork_holds_the_pipe() -> None:
    # A forked child keeps the pipe open: no end-of-file; the spy sees its parent change.
    code = textwrap.dedent(
        """
        import os, time
        from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on
        spy = start_spying_on()
        print(spy._proc.pid, flush=True)
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        os._exit(0)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    worker = int(proc.stdout.readline())
    proc.wait(REAL_TIMEOUT)
    assert _wait_gone(worker, timeout=3.0), f"the spy {worker} outlived its parent"
    proc.stdout.close()


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_works_from_a_script_without_main_guard(tmp_path: Path, method: str) -> None:
    # A spy built on multiprocessing would re-run this script (spawn, forkserver).
    script = tmp_path / "no_guard.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import multiprocessing
            multiprocessing.set_start_method({method!r}, force=True)
            from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on
            print("script body runs")
            spy = start_spying_on()
            data = b"x" * (30 * 2**20)
            stat = spy.stop()
            print("delta", int(stat["cpu"].delta_peak > 20 * 2**20))
            """
        )
    )
    res = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=REAL_TIMEOUT
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("script body runs") == 1
    assert "delta 1" in res.stdout


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_spy_never_copies_a_large_parent() -> None:
    block = b"\x01" * (200 * MIB)
    spy = start_spying_on()
    assert spy._proc is not None
    try:
        assert get_memory_rss(spy._proc.pid) < 40 * MIB  # a fresh small interpreter
    finally:
        spy.stop()
    del block


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_works_from_an_ipython_shell() -> None:
    pytest.importorskip("IPython")
    code = textwrap.dedent(
        """
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        cell = (
            "from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on\\n"
            "p = start_spying_on()\\n"
            "data = b'x' * (30 * 2**20)\\n"
            "stat = p.stop()\\n"
        )
        res = shell.run_cell(cell)
        print(res.success, shell.user_ns["stat"]["cpu"].delta_peak > 20 * 2**20)
        """
    )
    res = _run_python(code)
    assert res.stdout.split()[-2:] == ["True", "True"], res.stderr


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_children_are_counted_and_the_spy_is_not() -> None:
    alone = start_spying_on(include_children=True, delay=0.02).stop()["cpu"]
    assert alone.max_peak < get_memory_rss(os.getpid()) + 8 * MIB  # the spy is not counted
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; b = b'x' * (80 * 2**20); time.sleep(30)"]
    )
    try:
        deadline = time.monotonic() + REAL_TIMEOUT
        while get_memory_rss(child.pid) < 80 * MIB and time.monotonic() < deadline:
            time.sleep(0.02)
        stat = start_spying_on(include_children=True, delay=0.02).stop()
    finally:
        child.kill()
        child.wait(REAL_TIMEOUT)
    assert stat["cpu"].max_peak > get_memory_rss(os.getpid()) + 75 * MIB


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_cuda_through_a_fake_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML", "ok")
    monkeypatch.setenv("FAKE_NVML_PID", str(os.getpid()))
    stat = start_spying_on(cuda=True, probe_libs={"nvml": "fakes"}).stop()
    assert [m.max_peak for m in stat["gpus"]] == [2**30, 2 * 2**30]
    assert [m.max_peak for m in stat["gpus_process"]] == [256 * MIB, 0.0]
    assert stat["gpus"][0].peak_source == "nvml"
    assert "gpu1: peak 2.00 GiB" in str(stat)


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_cuda_failure_is_a_clear_error_well_before_the_start_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAKE_NVML", "DriverNotLoaded")
    begin = time.perf_counter()
    with pytest.raises(RuntimeError, match="driver is not loaded"):
        start_spying_on(cuda=True, probe_libs={"nvml": "fakes"})
    # the spy's answer, not its start timeout (10 s): a margin that holds at load 8
    assert time.perf_counter() - begin < START_TIMEOUT / 2


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
@pytest.mark.skipif(_has_gpu(), reason="a GPU driver is present")
def test_real_nvml_without_a_driver_raises_runtime_error() -> None:
    pytest.importorskip("pynvml")
    res = _run_python(
        "from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on\n"
        "try:\n    start_spying_on(cuda=True)\n"
        "except RuntimeError as e:\n    print('RuntimeError', e)\n"
    )
    assert res.returncode == 0 and res.stdout.startswith("RuntimeError cuda=True")
    assert res.stderr == ""  # no traceback from the spy


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU and its driver")
def test_real_gpu() -> None:
    pytest.importorskip("pynvml")
    stat = start_spying_on(cuda=True).stop()
    assert len(stat["gpus"]) >= 1 and stat["gpus"][0].max_peak > 0


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_importing_the_module_stays_light() -> None:
    res = _run_python(
        "import sys\nimport onnxrt_backend_dev.monitoring.memory_peak\n"
        "print(sorted({'pandas', 'matplotlib', 'pynvml', 'numpy'} & set(sys.modules)))"
    )
    assert res.stdout.strip() == "[]", res.stderr


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_real_series_exports_rows() -> None:
    spy = start_spying_on(delay=0.005)
    time.sleep(0.05)
    spy.mark("half")
    time.sleep(0.05)
    stat = spy.stop()
    rows = stat.to_rows()
    cpu_rows = [r for r in rows if r["channel"] == "cpu"]
    assert len(cpu_rows) == stat["cpu"].n_measures
    assert max(r["bytes"] for r in cpu_rows) == stat["cpu"].max_peak
    assert [r["label"] for r in rows if r["channel"] == "mark"] == ["half"]
    assert 0.0 < stat["marks"][0][0] < stat["duration"] + 0.05


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_a_nested_spy_follows_the_outer_resets_and_both_see_the_spike() -> None:
    # GIVEN a resetting spy with a slow tick, and a second, faster spy started inside it
    outer = start_spying_on(delay=0.05)
    inner = start_spying_on(delay=0.002)
    try:
        # THEN only the first one resets the high-water mark
        assert outer._resets and not inner._resets
        # WHEN a short 200 MiB spike happens, several times
        for _ in range(3):
            spike = b"x" * (200 * MIB)
            del spike
            time.sleep(0.06)
    finally:
        inner_res = inner.stop()
        outer_res = outer.stop()
    # THEN the outer spy's peak is exact, and the inner one sees the spike too
    assert outer_res["cpu"].peak_source == "hwm"
    assert inner_res["cpu"].peak_source == "sampling+hwm"
    for res in (outer_res, inner_res):
        added = res["cpu"].max_peak - res["cpu"].begin
        assert added >= 0.97 * 200 * MIB, (res["cpu"].peak_source, added / MIB)
    # AND once the outer one stopped, a new spy resets again
    alone = start_spying_on()
    try:
        assert alone._resets
    finally:
        alone.stop()


# --- faults: Ctrl-C, a dead or frozen spy, concurrent stop() ----------------------------

# Interrupts start_spying_on() with a real SIGINT after delays from 10 us to 100 ms (the
# spy starts in tens of ms), then checks that no spy is left, not even a zombie.
INTERRUPTED_STARTS = """
import os, signal, time
import psutil
from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

signal.signal(signal.SIGALRM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
outcomes = {"interrupted": 0, "started": 0}
for k in range(40):
    spy = None
    try:
        signal.setitimer(signal.ITIMER_REAL, 1e-5 * 1.3**k)
        spy = start_spying_on(delay=0.05)
        signal.setitimer(signal.ITIMER_REAL, 0)
        outcomes["started"] += 1
    except KeyboardInterrupt:
        outcomes["interrupted"] += 1
    if spy is not None:
        spy.stop()
me = psutil.Process()
deadline = time.monotonic() + 10
while me.children() and time.monotonic() < deadline:
    time.sleep(0.02)
print(outcomes["interrupted"], outcomes["started"], len(me.children()), os.getpid())
"""


def _spies_of(parent: int) -> list[int]:
    """Spy processes started by ``parent`` (their argv names it), wherever they are now."""
    marker = f"\0--parent\0{parent}\0".encode()
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue  # gone meanwhile
    return found


@pytest.mark.slow
@pytest.mark.timeout(2 * REAL_TIMEOUT)
def test_ctrl_c_at_any_moment_of_the_start_leaves_no_spy() -> None:
    # GIVEN a process interrupting its own start_spying_on() at 40 moments
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_STARTS],
        capture_output=True,
        text=True,
        timeout=2 * REAL_TIMEOUT,
    )
    # THEN some starts were interrupted, some not, no spy is left and nothing was printed
    assert proc.returncode == 0, proc.stderr
    interrupted, started, children, pid = map(int, proc.stdout.split())
    assert interrupted > 0 and started > 0 and children == 0, proc.stdout
    assert proc.stderr == ""  # no "Exception ignored in ... __del__", no traceback
    # AND no orphan (reparented to pid 1) once the process is gone
    assert _spies_of(pid) == []
    spy = start_spying_on()
    try:  # (the scan does find a live spy by its parent)
        assert spy._proc is not None and spy._proc.pid in _spies_of(os.getpid())
    finally:
        spy.stop()


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_concurrent_stop_calls_all_get_the_same_result() -> None:
    import threading

    spy = start_spying_on(delay=0.005)
    barrier = threading.Barrier(8)
    results: list[object] = []

    def stop() -> None:
        barrier.wait()
        results.append(spy.stop())

    threads = [threading.Thread(target=stop) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(REAL_TIMEOUT)
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert spy.stop() is results[0]


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_after_the_spy_died_every_stop_raises_the_same_error() -> None:
    import signal

    spy = start_spying_on()
    assert spy._proc is not None
    os.kill(spy._proc.pid, signal.SIGKILL)
    assert spy.wait(10.0)
    errors = []
    for _ in range(3):
        with pytest.raises(RuntimeError, match=r"ended without its measures \(exit code -9\)") as e:
            spy.stop()
        errors.append(e.value)
    assert errors[0] is errors[1] is errors[2]


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_frozen_spy_is_reported_as_not_answering_and_killed() -> None:
    import signal

    spy = start_spying_on(stop_timeout=0.5)
    assert spy._proc is not None
    os.kill(spy._proc.pid, signal.SIGSTOP)
    with pytest.raises(RuntimeError, match=r"did not answer within 0.5 s \(killed\)") as e:
        spy.stop()
    assert "exit code" not in str(e.value)
    assert _wait_gone(spy._proc.pid)
    with pytest.raises(RuntimeError) as again:
        spy.stop()
    assert again.value is e.value
