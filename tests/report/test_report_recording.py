"""The memory ticks of the one in-process sampler: the main thread's stack cut at the
root, bounded, the handlers and timers restored, the mark read right."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

import pytest

from onnxrt_backend_dev.monitoring._report.recording import (
    ProcMemory,
    Recording,
    Ticks,
    reset_high_water_mark,
)
from onnxrt_backend_dev.monitoring._sampling.aggregate import NO_STACK
from onnxrt_backend_dev.monitoring._sampling.frames import (
    TRUNCATED_DEPTH,
    SampledFrame,
    StackTable,
)
from onnxrt_backend_dev.monitoring._sampling.recorder import Recorder


class ListSink:
    """Keeps what the ticks send."""

    def __init__(self) -> None:
        self.stacks: dict[int, tuple[SampledFrame, ...]] = {}
        self.ticks: list[tuple[float, float, float, int]] = []

    def add_stack(self, sid: int, frames: tuple[SampledFrame, ...]) -> None:
        self.stacks[sid] = frames

    def add_tick(self, t: float, rss: float, hwm: float, sid: int) -> None:
        self.ticks.append((t, rss, hwm, sid))


def _sampler(sink: ListSink, root: object = None, max_stacks: int = 100) -> Recorder:
    """A sampler of the main thread only, on a clock of whole seconds, its table holding
    ``max_stacks``, ticking into ``sink`` (memory: always 1 and 2 bytes)."""
    clock: Iterator[float] = iter(float(i) for i in range(1000))
    rec = Recorder(0.005, lambda: next(clock), dict, cpu_clock=lambda i: None,
                   table=StackTable(max_stacks))  # fmt: skip
    ticks = Ticks(sink, lambda: (1.0, 2.0), root)  # type: ignore[arg-type]
    rec.listener = ticks.bind(rec)
    return rec


def outer(rec: Recorder) -> None:
    inner(rec)


def inner(rec: Recorder) -> None:
    rec.sample(sys._getframe())


def test_a_tick_keeps_the_stack_from_the_root_with_running_lines() -> None:
    # GIVEN the sampler's ticks rooted at this test's code
    sink = ListSink()
    rec = _sampler(sink, sys._getframe().f_code)
    # WHEN samples are taken twice from the same place
    for _ in range(2):
        outer(rec)
    # THEN one stack, outermost first, starting at this frame, declared once
    assert len(sink.stacks) == 1 and [t[3] for t in sink.ticks] == [0, 0]
    names = [f.name for f in sink.stacks[0]]
    assert names[0].endswith("test_a_tick_keeps_the_stack_from_the_root_with_running_lines")
    assert names[1:] == ["outer", "inner"]
    assert sink.stacks[0][-1].line == inner.__code__.co_firstlineno + 1  # the line running
    assert sink.ticks[0][1:3] == (1.0, 2.0)


def test_a_tick_outside_the_root_code_has_no_stack() -> None:
    # GIVEN a root code that is not running
    sink = ListSink()
    rec = _sampler(sink, outer.__code__)
    # WHEN a sample is taken from here THEN its tick has no stack; from outer(), it
    # starts there
    rec.sample(sys._getframe())
    outer(rec)
    assert sink.ticks[0][3] == NO_STACK
    assert [f.name for f in sink.stacks[sink.ticks[1][3]]] == ["outer", "inner"]


def test_a_tick_is_on_the_sampler_s_stack_id_its_outer_frames_when_the_table_is_full() -> None:
    # GIVEN a sampler whose table holds one stack
    sink = ListSink()
    rec = _sampler(sink, max_stacks=1)
    # WHEN two distinct stacks are sampled
    outer(rec)
    rec.sample(sys._getframe())
    # THEN each tick is on the sampler's own id (no second table), the second stack kept
    # as its outer frames and declared so
    assert [t[3] for t in sink.ticks] == [0, 1] and rec.table.merged == 1
    assert len(sink.stacks[1]) == TRUNCATED_DEPTH < len(sink.stacks[0]) + TRUNCATED_DEPTH


def _mine(signum: int, frame: FrameType | None) -> None:
    pass


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="POSIX timers")
@pytest.mark.parametrize("taken", [(), ("SIGALRM",), ("SIGPROF",), ("SIGALRM", "SIGPROF")])
def test_the_program_s_signals_are_left_alone_and_the_ticks_still_come(
    taken: tuple[str, ...],
) -> None:
    # GIVEN signals the program took
    saved = {s: signal.signal(getattr(signal, s), _mine) for s in taken}
    try:
        # WHEN a recording runs and stops
        sink = ListSink()
        recording = Recording(sink, 0.001, spy=False)
        sum(range(300_000))
        facts = recording.finish()
        # THEN ticks came (by the signal, or the sampler's thread), the program's
        # handlers are its own, ours are gone and no timer is left running
        assert len(sink.ticks) >= 2 and facts["wall"] > 0
        for name in taken:
            assert signal.getsignal(getattr(signal, name)) is _mine
        if "SIGPROF" not in taken:
            assert signal.getsignal(signal.SIGPROF) in (signal.SIG_DFL, None)
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    finally:
        for name, handler in saved.items():
            signal.signal(getattr(signal, name), handler)


def test_a_recording_started_outside_the_main_thread_is_sampled_by_a_thread() -> None:
    # GIVEN a recording started and finished in another thread
    found: list[object] = []

    def target() -> None:
        sink = ListSink()
        recording = Recording(sink, 0.001, spy=False)
        sum(range(200_000))
        recording.finish()
        found.append(len(sink.ticks))

    t = threading.Thread(target=target)
    t.start()
    t.join(30)
    # THEN it recorded (no signal handler from there: the watchdog thread took the ticks)
    assert found and found[0] >= 1  # type: ignore[operator]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="procfs")
def test_real_ticks_see_an_allocation_rise_the_mark() -> None:
    # GIVEN the mark reset, a real recording and 50 MB allocated in a loop of small steps
    assert reset_high_water_mark()
    sink = ListSink()
    recording = Recording(sink, 0.001, spy=False)
    try:
        chunks = []
        for _ in range(50):
            chunks.append(bytearray(2**20))
            sum(range(20_000))  # pure Python: the handler runs often
    finally:
        recording.finish()
    # THEN ticks came, the mark rose
    assert len(sink.ticks) > 1, "no tick in about 50 ms of pure Python"
    hwm = [t[2] for t in sink.ticks]
    assert hwm == sorted(hwm) and hwm[-1] > hwm[0]
    del chunks


def test_proc_memory_reads_positive_figures() -> None:
    memory = ProcMemory()
    try:
        rss, hwm = memory()
    finally:
        memory.close()
    assert rss > 0 and hwm > 0


def test_proc_memory_takes_its_offset_off_both_figures() -> None:
    # GIVEN two readings, one with an offset of 1 MiB
    plain, shifted = ProcMemory(), ProcMemory(offset=2**20)
    try:
        # WHEN both are read
        rss, hwm = plain()
        rss2, hwm2 = shifted()
    finally:
        plain.close()
        shifted.close()
    # THEN the offset is taken off (a few pages may come and go between the readings)
    assert abs((rss - rss2) - 2**20) < 2**19 and abs((hwm - hwm2) - 2**20) < 2**19


# A process started by a parent holding 200 MiB: its ru_maxrss keeps the parent's mark
# across the exec; ProcMemory must see through it to VmHWM.
_AFTER_EXEC = """
import json, resource, sys
from onnxrt_backend_dev.monitoring._report.recording import ProcMemory, reset_high_water_mark
reset_high_water_mark()
memory = ProcMemory()
hwm = memory.high_water_mark()
status = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"floor": memory.floor, "hwm": hwm, "vmhwm": int(status.split()[1]) * 1024,
                  "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
memory.close()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM, exec's ru_maxrss")
def test_proc_memory_sees_through_the_mark_inherited_across_exec() -> None:
    import json
    import os
    import subprocess

    # GIVEN a parent whose memory peaked at 200 MiB starting a fresh interpreter
    parent = (
        "import subprocess, sys\n"
        "big = bytearray(200 * 2**20)\n"
        "sys.exit(subprocess.run([sys.executable, '-c', sys.argv[1]]).returncode)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    # WHEN the child reads its high-water mark
    proc = subprocess.run(
        [sys.executable, "-c", parent, _AFTER_EXEC],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # THEN ru_maxrss still says the parent's 200 MiB, ProcMemory the child's own mark
    assert doc["maxrss"] > 150 * 2**20 and doc["floor"] == doc["maxrss"]
    assert doc["hwm"] < 100 * 2**20 and abs(doc["hwm"] - doc["vmhwm"]) < 2**20
