"""The sampler's rules with a fake clock and fake frames: weighting by the real gap, the
delayed sample credited to the call that held the GIL, per-thread CPU, interning, the
bounded timeline, and the checks of the interval."""

from __future__ import annotations

import dis
import math
import threading
from dataclasses import dataclass
from types import CodeType
from typing import Any

import pytest
from fakes import FakeClock

from onnxrt_backend_dev.monitoring._errors import BadType, BadValue, StateError
from onnxrt_backend_dev.monitoring._report.sampling import Sampling, check_interval, sample
from onnxrt_backend_dev.monitoring._sampling.frames import (
    StackTable,
    call_offset,
    line_of,
    walk,
)
from onnxrt_backend_dev.monitoring._sampling.recorder import Recorder, ThreadLine, _thread_name


@dataclass
class FakeFrame:
    """What the walk reads of a frame."""

    f_code: CodeType
    f_lasti: int
    f_back: FakeFrame | None = None


def _outer() -> None:
    _inner()


def _inner() -> None:
    x = sorted(range(3))
    y = len(x)
    del y


def _stack(lasti_inner: int = 0) -> FakeFrame:
    outer = FakeFrame(_outer.__code__, 2)
    return FakeFrame(_inner.__code__, lasti_inner, outer)


def _recorder(
    clock: FakeClock, frames: dict[int, Any], cpu: dict[int, float] | None = None
) -> Recorder:
    def cpu_clock(ident: int) -> Any:
        if cpu is None:
            return None
        return lambda: cpu[ident]

    rec = Recorder(0.002, clock, lambda: dict(frames), cpu_clock=cpu_clock,
                   thread_name=lambda i: f"t{i}")  # fmt: skip
    rec.main_ident = 1
    return rec


def test_each_sample_weighs_the_real_gap_since_the_previous_one(fake_clock: FakeClock) -> None:
    # GIVEN one thread, sampled after 2 ms, then after 4 ms (both on time)
    frames = {1: _stack()}
    rec = _recorder(fake_clock, frames)
    fake_clock.advance(0.002)
    rec.sample()
    fake_clock.advance(0.004)
    rec.sample()
    # THEN the one stack holds 6 ms over 2 samples
    totals = rec.threads[1][1]
    assert len(totals) == 1
    wall, _cpu, count = next(iter(totals.values()))
    assert math.isclose(wall, 0.006) and count == 2


def test_a_zero_gap_sample_is_not_counted(fake_clock: FakeClock) -> None:
    # GIVEN a sample at the very time of the previous one (the last one, at stop)
    rec = _recorder(fake_clock, {1: _stack()})
    rec.sample()
    # THEN nothing is recorded
    assert rec.samples == 0 and rec.threads == {}


def _call_and_next_line() -> tuple[int, int, int]:
    """Offsets in _inner: the sorted() call, an instruction of the next line after it."""
    first = _inner.__code__.co_firstlineno
    code = _inner.__code__
    lines = {start: line for start, _end, line in code.co_lines()}
    ins = [(i, lines.get(i.offset)) for i in dis.get_instructions(code)]
    call = [i for i, n in ins if i.opname.startswith("CALL") and n == first + 1][-1]
    after = next(i for i, n in ins if n == first + 2)
    return call.offset, after.offset, _inner.__code__.co_firstlineno


def test_a_delayed_sample_goes_to_the_call_that_held_the_gil(fake_clock: FakeClock) -> None:
    # GIVEN the main thread caught on the line after a call, by a sample 20 ms late
    call, after, first = _call_and_next_line()
    frames = {1: _stack(after)}
    rec = _recorder(fake_clock, frames)
    fake_clock.advance(0.020)
    rec.sample()
    # THEN the time goes to the call's line (x = sorted(...)), not to the next one
    stack = rec.table.decode()[0]
    assert stack[-1].name == "_inner"
    assert stack[-1].line == first + 1
    assert line_of(_inner.__code__, after) == first + 2  # on time, it is the next line
    assert call_offset(_inner.__code__, after) == call


def test_an_on_time_sample_keeps_its_line(fake_clock: FakeClock) -> None:
    # GIVEN the same frame sampled on time
    _call, after, first = _call_and_next_line()
    rec = _recorder(fake_clock, {1: _stack(after)})
    fake_clock.advance(0.002)
    rec.sample()
    # THEN the line running is kept
    assert rec.table.decode()[0][-1].line == first + 2


def test_with_cpu_clocks_the_late_thread_is_the_one_that_ran(fake_clock: FakeClock) -> None:
    # GIVEN two threads over a 20 ms gap: thread 2 ran 19 ms of CPU, the main one none
    _call, after, first = _call_and_next_line()
    cpu = {1: 0.0, 2: 0.0}
    rec = _recorder(fake_clock, {1: _stack(after), 2: _stack(after)}, cpu)
    fake_clock.advance(0.002)
    rec.sample()  # the threads are seen (their CPU clocks read) at the start
    fake_clock.advance(0.020)
    cpu[2] = 0.019
    rec.sample()
    # THEN thread 2's time goes to the call, the main thread's stays on its line
    stacks = rec.table.decode()
    main_sid = list(rec.threads[1][1])[-1]
    other_sid = list(rec.threads[2][1])[-1]
    assert stacks[other_sid][-1].line == first + 1
    assert stacks[main_sid][-1].line == first + 2
    # AND each thread's CPU time is its own
    assert rec.threads[2][1][other_sid][1] == pytest.approx(0.019)
    assert rec.threads[1][1][main_sid][1] == 0.0


def test_stacks_are_interned_and_decoded_outermost_first() -> None:
    # GIVEN the same stack walked twice, and another one
    table = StackTable()
    a = table.intern_frame(_stack(0))  # type: ignore[arg-type]
    b = table.intern_frame(_stack(0))  # type: ignore[arg-type]
    c = table.intern_frame(FakeFrame(_outer.__code__, 2))  # type: ignore[arg-type]
    # THEN one id per distinct stack, frames outermost first with qualified names
    assert a == b != c
    decoded = table.decode()
    assert [f.name for f in decoded[a]] == ["_outer", "_inner"]
    assert decoded[a][0].file.endswith("test_sampling_core.py")


def test_a_full_table_keeps_new_stacks_as_their_outer_frames() -> None:
    # GIVEN a table of 1 stack, then deeper, distinct stacks
    table = StackTable(max_stacks=1)
    table.intern_frame(FakeFrame(_outer.__code__, 2))  # type: ignore[arg-type]
    deep = _stack(0)
    for i in range(40):
        deep = FakeFrame(_inner.__code__, 2 * i, deep)
    sid = table.intern_frame(deep)  # type: ignore[arg-type]
    # THEN it is merged, counted, and cut to the outermost frames
    assert table.merged == 1
    assert len(table.decode()[sid]) == 16


def test_the_walk_is_a_loop_and_keeps_the_innermost_frames() -> None:
    # GIVEN a 5,000-deep stack (deeper than the recursion limit)
    frame = None
    for _ in range(5000):
        frame = FakeFrame(_inner.__code__, 0, frame)
    key = walk(frame, {}, max_depth=100)  # type: ignore[arg-type]
    # THEN 100 frames kept
    assert len(key) == 200


def test_the_timeline_halves_itself_and_keeps_the_time() -> None:
    # GIVEN a timeline of at most 8 entries fed 100 samples of 1 ms
    line = ThreadLine()
    for i in range(100):
        line.add((i + 1) * 0.001, i % 3, 0.001, 8)
    # THEN it stays bounded and the time still adds up
    assert len(line.times) < 8
    assert sum(line.weights) == pytest.approx(0.1)
    assert line.stride > 1


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        (0, BadValue, "interval must be >= 0.0001, got 0"),
        (-1.0, BadValue, "interval must be >= 0.0001, got -1.0"),
        (float("nan"), BadValue, "interval must be a finite number, got nan"),
        (float("inf"), BadValue, "interval must be a finite number, got inf"),
        (1e-9, BadValue, "interval must be >= 0.0001, got 1e-09"),
        (3600, BadValue, "interval must be <= 1, got 3600"),
        ("1", BadType, "interval must be a number, got str"),
        (True, BadType, "interval must be a number, got bool"),
    ],
)
def test_bad_intervals_are_refused_in_one_line(value: Any, error: type, text: str) -> None:
    # WHEN a bad interval is given THEN one line names it, its value and the rule
    with pytest.raises(error) as info:
        check_interval(value)
    assert str(info.value) == text
    with pytest.raises(error):
        Sampling(interval=value)


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"timer": "cpu"}, "timer"),
        ({"max_points": 1}, "max_points must be >= 2, got 1"),
        ({"program": 3}, "program"),
    ],
)
def test_bad_options_are_refused(kwargs: dict[str, Any], text: str) -> None:
    # WHEN a bad option is given THEN the error names it
    with pytest.raises((BadValue, BadType)) as info:
        Sampling(**kwargs)
    assert text in str(info.value)


def test_sample_refuses_what_is_not_callable() -> None:
    with pytest.raises(BadType) as info:
        sample(3)  # type: ignore[arg-type]
    assert "fct" in str(info.value)


def test_a_thread_threading_does_not_know_is_named_by_its_id() -> None:
    # (the views say "thread NAME": no "thread thread 1234")
    assert _thread_name(1234567) == "1234567"
    assert _thread_name(threading.get_ident()) == threading.current_thread().name


def test_stop_from_another_thread_says_so_and_removes_the_handler() -> None:
    import signal
    import threading

    # GIVEN a sampling started in the main thread (its SIGPROF handler and timer)
    before = signal.getsignal(signal.SIGPROF)
    s = Sampling(collector="in-process").start()
    sum(range(100_000))
    errors: list[BaseException] = []

    def stop() -> None:
        try:
            s.stop()
        except BaseException as e:
            errors.append(e)

    # WHEN stopped from another thread
    thread = threading.Thread(target=stop, name="stopper")
    thread.start()
    thread.join(30)
    for _ in range(100):  # the main thread's handler removes itself on its last tick
        if signal.getsignal(signal.SIGPROF) == before:
            break
        sum(range(10_000))
    # THEN an error of the family naming both threads, the result kept, nothing left
    assert len(errors) == 1 and isinstance(errors[0], StateError), errors
    assert "MainThread" in str(errors[0]) and "stopper" in str(errors[0])
    assert s.result is not None
    assert signal.getsignal(signal.SIGPROF) == before
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    assert not any(t.name == "onnxrt-sampler" for t in threading.enumerate())
