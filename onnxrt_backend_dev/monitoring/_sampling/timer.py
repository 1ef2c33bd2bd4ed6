"""When samples are taken: a CPU-time signal timer, backed by a watchdog thread.

The default, ``timer="prof"``: ``setitimer(ITIMER_PROF)`` sends ``SIGPROF`` each
``interval`` of CPU time of the process; the handler runs in the main thread between
two bytecodes and samples every thread there. No thread wakes up while the program
computes, so no GIL hand-off: that is what keeps the cost near 1.0x (a sampling thread
takes the GIL from the program at each sample, measured at 1.3-1.6x).

``ITIMER_PROF`` never ticks while the process sleeps or waits, and only the main thread
runs Python signal handlers: when it sleeps, waits (``join``, ``select``...) or is
blocked in a C call, no handler runs. A watchdog thread covers those gaps: it wakes
every ``WATCH_FACTOR`` intervals and, when no sample came for more than two intervals,
samples every thread itself each interval until the handler ticks again. Each sample
is weighted by the real time since the previous one, whoever took it, so wall time
adds up whatever mode sampled it.

``timer="real"`` uses ``ITIMER_REAL``/``SIGALRM`` instead (ticks in wall time; it
interrupts sleeps, which Python retries, PEP 475); ``timer="thread"`` only the thread
(as pyinstrument's and the memory spy's samplers). A program that already uses the
signal or its timer is detected before the run and sampled by the thread (a note
says so); one that installs its own handler or timer during the run keeps it (a note
says so) and the thread takes over. On stop, the handler, the timer and the
interruption flag are restored, only where they are still this sampler's.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from .recorder import OWN_CODES, Recorder

WATCH_FACTOR = 10  # the watchdog checks every 10 intervals while the handler ticks
TIMERS = ("prof", "real", "thread")
_SIGNALS = {"prof": ("SIGPROF", "ITIMER_PROF"), "real": ("SIGALRM", "ITIMER_REAL")}


class Ticker:
    """Starts and stops the sampling of a :class:`Recorder`.

    :param recorder: what samples
    :param timer: ``prof``, ``real`` or ``thread`` (see the module's docstring)
    """

    def __init__(self, recorder: Recorder, timer: str = "prof") -> None:
        self.recorder = recorder
        self.timer = timer
        self.notes: list[str] = []
        self.signal_samples = 0
        self.last_signal = recorder.start  # when the handler last sampled
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._signum: int | None = None
        self._which: int | None = None
        self._previous: Any = None
        self._signal_on = False
        self._retired = False  # stopped from another thread: the handler removes itself

    # -- the signal side ----------------------------------------------------------------
    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self._retired:  # stopped from another thread: only the main thread (here) can
            self._remove_handler()  # put the previous handler back
            return
        # Never blocks: if the watchdog is sampling right now, this tick is skipped.
        if self._lock.acquire(False):
            try:
                self.recorder.sample(frame)
                self.signal_samples += 1
                self.last_signal = self.recorder.last
            finally:
                self._lock.release()

    def _start_signal(self) -> None:
        names = _SIGNALS.get(self.timer)
        if names is None:
            return
        signum, which = getattr(signal, names[0], None), getattr(signal, names[1], None)
        if signum is None or which is None or not hasattr(signal, "setitimer"):
            self.notes.append(f"{names[1]} is not available here: sampled by a thread")
            return
        name = signal.Signals(signum).name
        if threading.current_thread() is not threading.main_thread():
            self.notes.append(f"not started from the main thread: no {name}, sampled by a thread")
            return
        current = signal.getsignal(signum)
        if current not in (signal.SIG_DFL, None) or signal.getitimer(which) != (0.0, 0.0):
            self.notes.append(
                f"the program already uses {name} or its timer: left alone, sampled by a thread"
            )
            return
        self._previous = current
        self._signum, self._which = int(signum), int(which)
        signal.signal(signum, self._handler)
        # SA_RESTART: a system call interrupted by a tick resumes, in C extensions too.
        signal.siginterrupt(signum, False)
        interval = self.recorder.interval
        signal.setitimer(which, interval, interval)
        self._signal_on = True

    def _signal_still_ours(self) -> bool:
        """False (once, with a note) when the program took the signal or its timer."""
        if not self._signal_on or self._signum is None or self._which is None:
            return False
        name = signal.Signals(self._signum).name
        off = abs(signal.getitimer(self._which)[1] - self.recorder.interval)
        if signal.getsignal(self._signum) != self._handler:
            what = f"installed its own {name} handler"
            self._signum = None  # not ours any more: nothing to restore
            if off < 1e-6:
                signal.setitimer(self._which, 0.0, 0.0)  # our ticks are not theirs
        elif off > 1e-6:
            what = f"changed the {name} timer"  # the program's now; the handler goes at stop
        else:
            return True
        self.notes.append(
            f"the program {what} during the run: kept, sampled by a thread from then on"
        )
        self._signal_on = False
        self._which = None
        return False

    def rearm(self) -> None:
        """Arms the signal timer again (in a forked child, which does not inherit it)."""
        if self._signal_on and self._which is not None:
            signal.setitimer(self._which, self.recorder.interval, self.recorder.interval)

    def _stop_signal(self) -> None:
        self._signal_on = False
        if self._which is not None:
            signal.setitimer(self._which, 0.0, 0.0)  # from any thread: the process's timer
            self._which = None
        if self._signum is None:
            return
        main = threading.main_thread()
        if threading.current_thread() is main:
            self._remove_handler()
            return
        # Stopped from another thread: one last tick to the main thread, whose handler
        # then removes itself (Python sets handlers from the main thread only).
        self._retired = True
        if main.ident is not None:
            signal.pthread_kill(main.ident, self._signum)

    def _remove_handler(self) -> None:
        """Puts the previous handler back (main thread only)."""
        signum, self._signum = self._signum, None
        if signum is None:
            return
        if signal.getsignal(signum) == self._handler:
            signal.signal(signum, self._previous)
        signal.siginterrupt(signum, True)  # Python's default for its handlers

    # -- the thread side ----------------------------------------------------------------
    def _watch(self) -> None:
        self.recorder.skip_ident = threading.get_ident()
        interval = self.recorder.interval
        clock = self.recorder.clock
        wait = self._stop.wait
        first = True  # a program that waits from its start is sampled from its start
        while True:
            signal_on = self._signal_on and self._signal_still_ours()
            # Stalled while the handler has not ticked for two intervals: the watchdog
            # then samples every interval itself until it ticks again.
            stalled = first or not signal_on or clock() - self.last_signal > 2 * interval
            first = False
            if wait(interval if stalled else WATCH_FACTOR * interval):
                return
            if stalled and clock() - self.recorder.last >= interval and self._lock.acquire(False):
                try:
                    self.recorder.sample()
                finally:
                    self._lock.release()

    # -- both ---------------------------------------------------------------------------
    def start(self) -> None:
        """Installs the signal timer (where it can) and starts the watchdog thread."""
        if self.timer != "thread":
            self._start_signal()
        self._thread = threading.Thread(target=self._watch, name="onnxrt-sampler", daemon=True)
        try:
            self._thread.start()
        except BaseException:
            self._stop_signal()
            raise

    def stop(self, timeout: float = 2.0) -> None:
        """Stops sampling (idempotent): the timer and handler restored, the thread joined,
        one last sample taken so the end of the run is counted.

        :param timeout: seconds to wait for the thread
        """
        try:
            if self._signal_on:
                self._signal_still_ours()  # a takeover during the run gets its note
            self._stop_signal()
        finally:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._stop.set()
                if thread is not threading.current_thread():
                    thread.join(timeout)
                with self._lock:
                    self.recorder.sample(final=True)


OWN_CODES.add(Ticker._handler.__code__)
