"""The ticks taken inside the program: stacks cut at the root, bounded, handlers restored."""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

import pytest

from onnxrt_backend_dev.monitoring._report.aggregate import NO_STACK, RawFrame
from onnxrt_backend_dev.monitoring._report.recorder import (
    ProcMemory,
    TickRecorder,
    reset_high_water_mark,
)


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
