"""Tests for the spy process's program (``_memory/worker.py``): its loop and protocol,
in-process."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from typing import Any

from fakes import FakeProbe
from helpers import TESTS as _TESTS

from onnxrt_backend_dev.monitoring._memory import worker as _spy_worker
from onnxrt_backend_dev.monitoring._memory.series import Monitor

TESTS = _TESTS
REAL_TIMEOUT = 30  # seconds for any child process of these tests


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(REAL_TIMEOUT)
    return proc.pid


# --- the spy's loop and protocol, in-process ------------------------------------------


def _decode_frame(data: bytes) -> tuple[dict[str, Any], bytes, bytes]:
    """The header, the payload and what follows of the frame ``data`` starts with."""
    n_head = int.from_bytes(data[:8], "little")
    n_payload = int.from_bytes(data[8:16], "little")
    end = 16 + n_head + n_payload
    return marshal.loads(data[16 : 16 + n_head]), data[16 + n_head : end], data[end:]


def test_loop_feeds_the_monitor_and_reports_the_target_gone() -> None:
    ticks = iter(range(100))
    loop = _spy_worker.SpyLoop(
        FakeProbe([(10.0, 10.0), (10.0, 90.0), (20.0, 20.0)]), clock=lambda: float(next(ticks))
    )
    assert [loop.tick() for _ in range(4)] == [True, True, True, False]
    header, payload = loop.result(target_exited=True)
    mon = Monitor.from_state(header["monitors"][0], payload)
    assert mon.to_dict() == {
        "peak": 90.0,
        "mean": 40 / 3,
        "n": 3,
        "begin": 10.0,
        "end": 20.0,
        "peak_time": 1.0,
    }
    assert (mon.peak_source, mon.previous_peak) == ("hwm", 123.0)
    assert (header["t0"], header["duration"], header["target_exited"]) == (0.0, 2.0, True)


def _serve(readings: list[tuple[float, float]], message: bytes, parent: int = 1) -> bytes:
    """Runs serve() with a fake probe, sends ``message`` then closes; returns the output."""
    loop = _spy_worker.SpyLoop(FakeProbe(readings))
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    os.write(w_in, message)
    os.close(w_in)
    code = _spy_worker.serve(loop, r_in, w_out, 0.001, parent, getppid=lambda: 1)
    os.close(w_out)
    with os.fdopen(r_out, "rb") as f:
        out = f.read()
    os.close(r_in)
    assert code == 0
    return out


def test_serve_answers_stop_with_the_result() -> None:
    out = _serve([(1.0, 1.0)] * 1000, b"peek\nstop\n")
    header, payload, rest = _decode_frame(out)
    if header["kind"] == "peek":  # both lines may come in one read or in two
        assert header["peak"] == 1.0
        header, payload, rest = _decode_frame(rest)
    assert (header["kind"], header["target_exited"], rest) == ("result", False, b"")
    assert Monitor.from_state(header["monitors"][0], payload).max_peak == 1.0


def test_serve_exits_silently_at_end_of_file() -> None:
    assert _serve([(1.0, 1.0)] * 1000, b"") == b""


def test_serve_exits_silently_when_its_parent_changes() -> None:
    loop = _spy_worker.SpyLoop(FakeProbe([(1.0, 1.0)] * 1000))
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    assert _spy_worker.serve(loop, r_in, w_out, 0.001, parent=12345, getppid=lambda: 1) == 0
    for fd in (r_in, w_in, r_out, w_out):
        os.close(fd)


def test_serve_sends_the_result_when_the_target_ends() -> None:
    r_in, w_in = os.pipe()  # the parent stays silent
    loop = _spy_worker.SpyLoop(FakeProbe([(1.0, 1.0)] * 3))
    r_out, w_out = os.pipe()
    assert _spy_worker.serve(loop, r_in, w_out, 0.001, 1, getppid=lambda: 1) == 0
    os.close(w_out)
    with os.fdopen(r_out, "rb") as f:
        header, _, rest = _decode_frame(f.read())
    assert (header["kind"], header["target_exited"], rest) == ("result", True, b"")
    os.close(r_in)
    os.close(w_in)


def test_write_frame_gives_up_when_nobody_reads() -> None:
    r, w = os.pipe()
    assert not _spy_worker.write_frame(w, {"kind": "result"}, b"x" * 2**20, timeout=0.05)
    os.close(r)
    os.close(w)
