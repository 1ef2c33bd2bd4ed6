"""Tests for the live status line."""

from __future__ import annotations

import io
import threading

import pytest

from onnxrt_backend_dev.monitoring._progress import LiveStatus


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_nothing_is_written_off_a_terminal() -> None:
    stream = io.StringIO()
    with LiveStatus(stream, lambda: "busy", interval=0.001, delay=0.0):
        threading.Event().wait(0.05)
    assert stream.getvalue() == ""


def test_a_terminal_gets_the_line_then_a_clean_line() -> None:
    stream = _Tty()
    drawn = threading.Event()

    def render() -> str:
        drawn.set()
        return "12 runs"

    with LiveStatus(stream, render, interval=0.001, delay=0.0):
        assert drawn.wait(5.0)
    text = stream.getvalue()
    assert "\r12 runs" in text
    assert text.endswith("\r" + " " * len("12 runs") + "\r")


def test_disabled_explicitly_even_on_a_terminal() -> None:
    stream = _Tty()
    with LiveStatus(stream, lambda: "x", interval=0.001, delay=0.0, enabled=False):
        threading.Event().wait(0.02)
    assert stream.getvalue() == ""


def test_a_failing_render_never_breaks_the_work() -> None:
    stream = _Tty()
    called = threading.Event()

    def render() -> str:
        called.set()
        raise RuntimeError("boom")

    with LiveStatus(stream, render, interval=0.001, delay=0.0):
        assert called.wait(5.0)
    assert "boom" not in stream.getvalue()


def test_interval_is_validated() -> None:
    with pytest.raises(ValueError, match="interval must be > 0, got 0"):
        LiveStatus(io.StringIO(), lambda: "", interval=0)
