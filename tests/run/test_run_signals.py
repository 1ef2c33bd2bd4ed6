"""The one handler of SIGINT, SIGTERM and SIGHUP (``_run.signals``): what it records,
raises, forwards, and how it nests."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from fakes import FakeClock

from onnxrt_backend_dev.monitoring._errors import Terminated
from onnxrt_backend_dev.monitoring._run.signals import DEBOUNCE, Signals, ending_signals


def test_outside_a_program_signals_are_recorded_never_raised() -> None:
    # GIVEN a handler of a command that only supervises (nothing runs in this process)
    signals = Signals()
    # WHEN three signals come THEN each is recorded, the first decides the exit code
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signals.handler(signum, None)
    assert signals.received == [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]
    assert (signals.first, signals.exit_code) == (signal.SIGTERM, 143)


@pytest.mark.parametrize(
    ("signum", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)]
)
def test_in_a_program_the_first_signal_raises_and_one_within_the_debounce_is_recorded(
    fake_clock: FakeClock, signum: int, raised: type[BaseException]
) -> None:
    signals = Signals(running=True, clock=fake_clock)
    # WHEN two signals 2 ms apart (timeout, a CI runner)
    with pytest.raises(raised):
        signals.handler(signum, None)
    fake_clock.advance(0.002)
    signals.handler(signum, None)  # recorded only: the program is already unwinding
    # AND another one past the debounce: the program still runs, it is raised again
    fake_clock.advance(DEBOUNCE)
    with pytest.raises(raised):
        signals.handler(signum, None)
    assert signals.received == [signum] * 3


def test_a_program_run_through_the_handler_is_raised_in_then_no_more(
    fake_clock: FakeClock,
) -> None:
    signals = Signals(clock=fake_clock, running=True)

    def program() -> None:
        signals.handler(signal.SIGHUP, None)

    with pytest.raises(Terminated, match="terminated by SIGHUP"):
        program()
    signals.program_over()
    fake_clock.advance(10 * DEBOUNCE)
    signals.handler(signal.SIGHUP, None)  # the program is over: recorded
    assert signals.exit_code == 129 and not signals.running


def test_listeners_hear_every_signal_and_their_errors_stay_theirs() -> None:
    heard: list[int] = []

    def broken(signum: int) -> None:
        raise OSError("gone")

    signals = Signals()
    signals.listen(broken)
    signals.listen(heard.append)
    signals.handler(signal.SIGTERM, None)  # the broken listener does not stop the others
    signals.forget(heard.append)
    signals.handler(signal.SIGHUP, None)
    assert heard == [signal.SIGTERM]


def test_install_puts_the_previous_handlers_back_and_keeps_an_ignored_one() -> None:
    before = signal.getsignal(signal.SIGTERM)
    old_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with Signals() as signals:
            assert signal.getsignal(signal.SIGTERM) == signals.handler
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGHUP, old_hup)


def test_without_interrupts_ctrl_c_keeps_python_s_default() -> None:
    before = signal.getsignal(signal.SIGINT)
    with Signals(interrupts=False):
        assert signal.getsignal(signal.SIGINT) is before
    assert ending_signals(False) == (signal.SIGTERM, signal.SIGHUP)


def test_nested_handlers_inherit_and_hand_back_what_they_received() -> None:
    with Signals() as outer:
        outer.handler(signal.SIGTERM, None)  # during the start of the command
        with Signals() as inner:
            # THEN what is about to run sees the signal already received
            assert inner.first == signal.SIGTERM
            inner.handler(signal.SIGHUP, None)
        # AND the outer one knows what the inner one received, once
        assert outer.received == [signal.SIGTERM, signal.SIGHUP]


def test_outside_the_main_thread_nothing_is_installed() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def run() -> None:
        with Signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert seen == [before]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_the_handlers_it_had_before_the_tool() -> None:
    # A multiprocessing worker of the measured program: its pool's terminate (SIGTERM)
    # must end it, not raise in it (a worker interrupted holding its queue's lock hung
    # the pool under run's in-process recorder, 2 runs in 15).
    before = signal.getsignal(signal.SIGTERM)
    heard: list[int] = []
    with Signals(running=True) as signals:
        signals.listen(heard.append)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report its SIGTERM handler, then end without cleanup
            same = signal.getsignal(signal.SIGTERM) == before and not signals._listeners
            os.write(write, b"1" if same else b"0")
            os._exit(0)
        os.close(write)
        answer = os.read(read, 1)
        os.close(read)
        os.waitpid(pid, 0)
        assert signal.getsignal(signal.SIGTERM) == signals.handler  # the parent's stays
    assert answer == b"1"
    assert heard == []
