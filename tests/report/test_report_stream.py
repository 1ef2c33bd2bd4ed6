"""The ticks' way to the flight recorder: frames on a pipe, checked when read."""

from __future__ import annotations

import marshal
import os

import pytest

from onnxrt_backend_dev.monitoring._report.aggregate import Aggregator
from onnxrt_backend_dev.monitoring._report.stream import MAX_FRAME, StreamReader, StreamSink


def _pipe_round_trip(write: object) -> StreamReader:
    rfd, wfd = os.pipe()
    try:
        sink = StreamSink(wfd)
        assert callable(write)
        write(sink)
        assert sink.drain(5.0)
        os.close(wfd)
        wfd = -1
        reader = StreamReader(Aggregator())
        reader.read_until(rfd, lambda: True)
        return reader
    finally:
        os.close(rfd)
        if wfd >= 0:
            os.close(wfd)


def test_stacks_ticks_and_facts_arrive_in_order() -> None:
    # GIVEN a stack, two ticks, the start and end facts written to the pipe
    def write(sink: StreamSink) -> None:
        sink.send("M", {"t0": 1.0})
        sink.add_stack(0, (("f", "a.py", 3, 1),))
        sink.add_tick(1.0, 10.0, 10.0, 0)
        sink.add_tick(1.1, 30.0, 40.0, 0)
        sink.send("E", {"ending": ("exit", 0, "ok")})

    # WHEN read THEN the aggregator has them and the facts are kept
    reader = _pipe_round_trip(write)
    assert reader.start == {"t0": 1.0} and reader.end == {"ending": ("exit", 0, "ok")}
    assert reader.agg.n == 2 and reader.agg.peak == 40.0
    assert reader.agg.stacks[0] == (("f", "a.py", 3, 1),) and not reader.bad


@pytest.mark.parametrize(
    ("data", "bad"),
    [
        ((MAX_FRAME + 1).to_bytes(4, "little"), "a frame of"),
        (b"\x03\x00\x00\x00xyz", "an unreadable frame"),
        (marshal.dumps(("T", "a", 1, 1, 0)), "non-numbers"),
        (marshal.dumps(("S", 0, (("f", "a.py", "3", 1),))), "non-frames"),
        (marshal.dumps(("Z", 1)), "unknown message"),
        (marshal.dumps([1, 2]), "not a tuple"),
    ],
)
def test_a_bad_frame_stops_the_reading_and_keeps_what_came_before(data: bytes, bad: str) -> None:
    # GIVEN a good tick then a bad frame
    reader = StreamReader(Aggregator())
    good = marshal.dumps(("T", 0.0, 1.0, 1.0, -1))
    reader.feed(len(good).to_bytes(4, "little") + good)
    raw = data[:4] == (MAX_FRAME + 1).to_bytes(4, "little") or data.startswith(b"\x03\x00")
    reader.feed(data if raw else len(data).to_bytes(4, "little") + data)
    reader.feed(len(good).to_bytes(4, "little") + good)  # ignored once bad
    # THEN the reading says why it stopped and keeps the first tick
    assert bad in reader.bad and reader.agg.n == 1


def test_a_full_pipe_drops_ticks_never_stacks_and_never_blocks() -> None:
    # GIVEN nobody reading a pipe
    rfd, wfd = os.pipe()
    try:
        sink = StreamSink(wfd)
        sink.add_stack(0, (("f", "a.py", 3, 1),))
        # WHEN far more ticks than the pipe and the pending bound hold are sent
        for i in range(300_000):
            sink.add_tick(float(i), 1.0, 1.0, 0)
        sink.add_stack(1, (("g", "a.py", 9, 8),))
        # THEN some ticks were dropped, the stack waits, nothing blocked
        assert sink.dropped > 0
        assert b"g" in bytes(sink.pending) or sink.pending == bytearray()
    finally:
        os.close(rfd)
        os.close(wfd)


def test_a_reader_gone_breaks_the_sink_quietly() -> None:
    rfd, wfd = os.pipe()
    os.close(rfd)
    try:
        sink = StreamSink(wfd)
        sink.add_tick(0.0, 1.0, 1.0, 0)
        assert sink.broken
        sink.add_tick(0.0, 1.0, 1.0, 0)  # no error
    finally:
        os.close(wfd)
