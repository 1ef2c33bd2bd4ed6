"""The ticks' way to the flight recorder: chunks on a pipe, checked when read."""

from __future__ import annotations

import marshal
import os

import pytest

from onnxrt_backend_dev.monitoring._report.stream import PIPE_BUF, StreamReader, StreamSink
from onnxrt_backend_dev.monitoring._sampling.aggregate import Aggregator
from onnxrt_backend_dev.monitoring._stacks.frames import SampledFrame


def _chunk(body: bytes, pid: int = 7, more: int = 0) -> bytes:
    return len(body).to_bytes(4, "little") + pid.to_bytes(4, "little") + bytes([more]) + body


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
    # GIVEN a stack (deep: several chunks), two ticks, the start and end facts
    deep = tuple(SampledFrame(f"f{i}", "/some/long/path/to/a/module.py", 1, i) for i in range(300))

    def write(sink: StreamSink) -> None:
        sink.send("M", {"t0": 1.0})
        sink.add_stack(0, deep)
        sink.add_tick(1.0, 10.0, 10.0, 0)
        sink.add_tick(1.1, 30.0, 40.0, 0)
        sink.send("E", {"ending": ("exit", 0, "ok")})

    # WHEN read THEN the aggregator has them and the facts are kept
    reader = _pipe_round_trip(write)
    assert reader.start == {"t0": 1.0} and reader.end == {"ending": ("exit", 0, "ok")}
    assert reader.agg.n == 2 and reader.agg.peak == 40.0
    assert reader.agg.stacks[0] == deep and not reader.bad


def test_chunks_of_two_writers_interleaved_are_read_apart() -> None:
    # GIVEN the program (pid 7) and a forked child (pid 8), their chunks mixed
    a = marshal.dumps(("F", 0, ("a" * 20_000, "a.py", 1, 1)))
    b = marshal.dumps(("T", 0.0, 5.0, 5.0, -1))
    size = PIPE_BUF - 9
    parts = [a[i : i + size] for i in range(0, len(a), size)]
    assert len(parts) >= 2
    reader = StreamReader(Aggregator(), pid=7)
    # WHEN they arrive interleaved, the child's chunk after the program's first one
    chunks = [_chunk(p, 7, int(i + 1 < len(parts))) for i, p in enumerate(parts)]
    reader.feed(b"".join([chunks[0], _chunk(b, 8), *chunks[1:]]))
    reader.feed(_chunk(marshal.dumps(("S", 0, (0,))), 7))
    # THEN the program's frame is whole, the child's tick is the child's
    assert not reader.bad
    assert reader.agg.stacks[0][0].name == "a" * 20_000 and reader.agg.n == 0
    assert reader.children[8].n == 1


@pytest.mark.parametrize(
    ("data", "bad"),
    [
        ((PIPE_BUF + 1).to_bytes(4, "little") + bytes(5), "a chunk of"),
        (_chunk(b"xyz"), "an unreadable message"),
        (_chunk(marshal.dumps(("T", "a", 1, 1, 0))), "non-numbers"),
        (_chunk(marshal.dumps(("F", 0, ("f", "a.py", 1, "3")))), "a non-frame"),
        (_chunk(marshal.dumps(("S", 0, (5,)))), "unknown frames"),
        (_chunk(marshal.dumps(("Z", 1))), "unknown message"),
        (_chunk(marshal.dumps([1, 2])), "not a tuple"),
    ],
)
def test_a_bad_chunk_stops_the_reading_and_keeps_what_came_before(data: bytes, bad: str) -> None:
    # GIVEN a good tick then a bad chunk
    reader = StreamReader(Aggregator(), pid=7)
    good = _chunk(marshal.dumps(("T", 0.0, 1.0, 1.0, -1)))
    reader.feed(good)
    reader.feed(data)
    reader.feed(good)  # ignored once bad
    # THEN the reading says why it stopped and keeps the first tick
    assert bad in reader.bad and reader.agg.n == 1


def test_a_full_pipe_drops_ticks_never_stacks_and_never_blocks() -> None:
    # GIVEN nobody reading a pipe
    rfd, wfd = os.pipe()
    try:
        sink = StreamSink(wfd)
        sink.add_stack(0, (SampledFrame("f", "a.py", 1, 3),))
        # WHEN far more ticks than the pipe and the pending bound hold are sent
        for i in range(200_000):
            sink.add_tick(float(i), 1.0, 1.0, 0)
        sink.add_stack(1, (SampledFrame("g", "a.py", 8, 9),))
        # THEN some ticks were dropped, the last stack waits, nothing blocked
        assert sink.dropped > 0
        assert b"g" in b"".join(sink.pending)
        assert all(len(chunk) <= PIPE_BUF for chunk in sink.pending)
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


def test_a_tick_interrupting_a_flush_is_queued_not_written_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a write that a tick's handler interrupts (the tick sends too)
    rfd, wfd = os.pipe()
    try:
        sink = StreamSink(wfd)
        real_write = os.write
        interrupted: list[bool] = []

        def write(fd: int, data: bytes) -> int:
            n = real_write(fd, data)
            if not interrupted:
                interrupted.append(True)
                sink.add_tick(2.0, 2.0, 2.0, -1)  # what the handler would do here
            return n

        monkeypatch.setattr(os, "write", write)
        # WHEN a message is sent
        sink.send("M", {"t0": 1.0})
        monkeypatch.undo()
        # THEN both arrive once each, in order, and nothing is left waiting
        reader = StreamReader(Aggregator())
        reader.feed(os.read(rfd, 1 << 16))
        assert reader.start == {"t0": 1.0} and reader.agg.n == 1 and not sink.pending
    finally:
        os.close(rfd)
        os.close(wfd)
