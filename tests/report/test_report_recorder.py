"""The ticks taken inside the program: stacks cut at the root, bounded, handlers restored."""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

import pytest

from onnxrt_backend_dev.monitoring._report.recorder import (
    ProcMemory,
    TickRecorder,
    reset_high_water_mark,
)
from onnxrt_backend_dev.monitoring._sampling.aggregate import NO_STACK, RawFrame


class ListSink:
    """Keeps what the recorder sends."""

    def __init__(self) -> None:
        self.stacks: dict[int, tuple[RawFrame, ...]] = {}
        self.ticks: list[tuple[float, float, float, int]] = []

    def add_stack(self, sid: int, frames: tuple[RawFrame, ...]) -> None:
        self.stacks[sid] = frames

    def add_tick(self, t: float, rss: float, hwm: float, sid: int) -> None:
        self.ticks.append((t, rss, hwm, sid))


def _recorder(sink: ListSink, **kwargs: object) -> TickRecorder:
    clock = iter(float(i) for i in range(1000))
    return TickRecorder(sink, 0.005, clock=lambda: next(clock), memory=lambda: (1.0, 2.0), **kwargs)  # type: ignore[arg-type]


def outer(rec: TickRecorder) -> None:
    inner(rec)


def inner(rec: TickRecorder) -> None:
    rec.tick(sys._getframe())


def test_a_tick_keeps_the_stack_from_the_root_frame_with_running_lines() -> None:
    # GIVEN a recorder rooted at this test's frame
    sink = ListSink()
    rec = _recorder(sink, root_frame=sys._getframe())
    # WHEN ticks are taken twice from the same place
    for _ in range(2):
        outer(rec)
    # THEN one stack, outermost first, starting at this frame, interned once
    assert len(sink.stacks) == 1 and [t[3] for t in sink.ticks] == [0, 0]
    names = [f[0] for f in sink.stacks[0]]
    assert names[0].endswith("test_a_tick_keeps_the_stack_from_the_root_frame_with_running_lines")
    assert names[1:] == ["outer", "inner"]
    assert sink.stacks[0][-1][2] == inner.__code__.co_firstlineno + 1  # the line running
    assert sink.ticks[0][1:3] == (1.0, 2.0)


def test_a_tick_outside_the_root_code_has_no_stack() -> None:
    # GIVEN a root code that is not running
    sink = ListSink()
    rec = _recorder(sink, root_code=outer.__code__)
    # WHEN a tick is taken from here THEN it has no stack; from outer(), it starts there
    rec.tick(sys._getframe())
    outer(rec)
    assert sink.ticks[0][3] == NO_STACK
    assert [f[0] for f in sink.stacks[0]] == ["outer", "inner"]


def test_too_many_distinct_stacks_count_as_dropped() -> None:
    sink = ListSink()
    rec = _recorder(sink, max_stacks=1)
    outer(rec)
    rec.tick(sys._getframe())
    assert sink.ticks[-1][3] == NO_STACK and rec.dropped == 1
    # AND the ticks at the start and the end are credited to the last stack seen
    rec.edge_tick()
    assert sink.ticks[-1][3] == NO_STACK


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="POSIX timers")
def test_start_and_stop_restore_the_handlers_and_the_timer() -> None:
    # GIVEN SIGALRM taken by the program
    def mine(signum: int, frame: FrameType | None) -> None:
        pass

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        rec = TickRecorder(ListSink(), 0.005).start()
        # THEN the recorder took SIGPROF instead, and gives it back
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getsignal(signal.SIGPROF) == rec._handler
        rec.stop()
        rec.stop()  # idempotent
        assert signal.getsignal(signal.SIGPROF) is signal.SIG_DFL
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="POSIX timers")
def test_both_timer_signals_taken_is_an_error_naming_them() -> None:
    def mine(signum: int, frame: FrameType | None) -> None:
        pass

    saved = {s: signal.signal(s, mine) for s in (signal.SIGALRM, signal.SIGPROF)}
    try:
        with pytest.raises(RuntimeError, match="SIGALRM and SIGPROF both have a handler"):
            TickRecorder(ListSink(), 0.005).start()
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


def test_start_outside_the_main_thread_is_refused() -> None:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            TickRecorder(ListSink(), 0.005).start()
        except RuntimeError as e:
            errors.append(e)

    t = threading.Thread(target=target)
    t.start()
    t.join(10)
    assert errors and "main thread" in str(errors[0])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="procfs")
def test_real_ticks_see_an_allocation_rise_the_mark() -> None:
    # GIVEN the mark reset, a real recorder and 50 MB allocated in a loop of small steps
    assert reset_high_water_mark()
    sink = ListSink()
    rec = TickRecorder(sink, 0.001).start()
    try:
        chunks = []
        for _ in range(50):
            chunks.append(bytearray(2**20))
            sum(range(20_000))  # pure Python: the handler runs often
    finally:
        rec.stop()
    # THEN ticks came, the mark rose by about what was allocated
    assert sink.ticks, "no tick in about 50 ms of pure Python"
    hwm = [t[2] for t in sink.ticks]
    assert hwm == sorted(hwm)
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
from onnxrt_backend_dev.monitoring._report.recorder import ProcMemory, reset_high_water_mark
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
