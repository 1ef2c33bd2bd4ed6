"""Real runs of the sampler, with bounds generous enough for a loaded 2-core machine: the
hot function found, worker threads sampled, the signal, timer and thread restored
(on exceptions too), and a program using the signal itself left working."""

from __future__ import annotations

import hashlib
import json
import signal
import threading
import time

import pytest

from onnxrt_backend_dev.monitoring._report.sampling import Sampling, sample, sampling
from onnxrt_backend_dev.monitoring._sampling.view import trees


def _busy(seconds: float) -> int:
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += len(json.dumps(list(range(50))))
    return n


def _hash_for(seconds: float) -> None:
    end = time.perf_counter() + seconds
    h = hashlib.sha256()
    while time.perf_counter() < end:
        h.update(b"x" * 4096)


def _state() -> tuple[object, tuple[float, float], set[str]]:
    return (
        signal.getsignal(signal.SIGPROF),
        signal.getitimer(signal.ITIMER_PROF),
        {t.name for t in threading.enumerate()},
    )


def test_the_hot_function_gets_most_of_the_time() -> None:
    # GIVEN 0.3 s in _busy under the sampler
    before = _state()
    result = sample(_busy, 0.3)
    # THEN _busy is the root and most of the samples' time is there
    root = trees(result.profile)[0]
    top = max(root.children.values(), key=lambda r: r.wall)
    assert top.label == "_busy"
    assert top.wall >= 0.5 * root.wall
    assert result.value > 0
    # AND nothing is left behind: handler, timer, thread
    assert _state() == before


@pytest.mark.parametrize("timer", ["prof", "real", "thread"])
def test_every_timer_sees_a_sleep_and_restores_everything(timer: str) -> None:
    # GIVEN a sleep then some work, under each timer
    before = _state()
    alarm = signal.getsignal(signal.SIGALRM)
    with sampling(timer=timer) as s:
        time.sleep(0.15)
        _busy(0.1)
    # THEN the sleep is counted in wall time (the watchdog samples while it waits)
    assert s.result is not None
    assert s.result.profile.duration >= 0.2
    root = trees(s.result.profile)[0]
    assert root.wall >= 0.2
    assert _state() == before and signal.getsignal(signal.SIGALRM) == alarm


def test_an_exception_inside_restores_everything() -> None:
    before = _state()
    with pytest.raises(ZeroDivisionError), sampling():
        _busy(0.02)
        _ = 1 / 0
    assert _state() == before


def test_worker_threads_are_sampled_each_in_its_own_tree() -> None:
    # GIVEN three threads hashing 0.4 s each while the main thread joins them
    workers = [threading.Thread(target=_hash_for, args=(0.4,), name=f"w{i}") for i in range(3)]
    with sampling() as s:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert s.result is not None
    roots = trees(s.result.profile)
    names = [r.label for r in roots]
    # THEN the main thread first, then one tree per worker
    assert names[0] == "thread MainThread"
    for i in range(3):
        root = next(r for r in roots if r.label == f"thread w{i}")
        # AND each worker's function holds >= 90 % of that worker's time
        found = [0.0]
        todo = [root]
        while todo:
            row = todo.pop()
            if row.label == "_hash_for":
                found[0] += row.wall
                continue
            todo.extend(row.children.values())
        assert found[0] >= 0.9 * root.wall, (i, found[0], root.wall)
    # AND the main thread's join is marked as waiting
    text = s.result.to_text()
    assert "join" in text and "[waiting]" in text


def test_a_program_handler_installed_before_is_left_alone_and_told() -> None:
    # GIVEN the program's own SIGPROF handler
    calls: list[int] = []
    previous = signal.signal(signal.SIGPROF, lambda s, f: calls.append(s))
    try:
        with sampling(collector="in-process") as s:
            _busy(0.1)
        # THEN sampling still works (by the thread) and a note says why
        assert s.result is not None
        assert any("SIGPROF" in n for n in s.result.profile.notes)
        assert s.result.profile.samples > 0
        assert signal.getsignal(signal.SIGPROF) is not previous  # still the program's
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGPROF, previous)


def test_a_program_taking_the_signal_during_the_run_keeps_it() -> None:
    # GIVEN a program installing its own SIGPROF handler and timer in the middle
    calls: list[int] = []

    def mine(signum: int, frame: object) -> None:
        calls.append(signum)

    before = signal.getsignal(signal.SIGPROF)  # restored at the end (not the sampler's)
    with sampling(collector="in-process") as s:
        _busy(0.05)
        signal.signal(signal.SIGPROF, mine)
        signal.setitimer(signal.ITIMER_PROF, 0.01, 0.01)
        _busy(0.2)
    try:
        # THEN its handler and timer are still there after the sampler stopped
        assert signal.getsignal(signal.SIGPROF) is mine
        assert signal.getitimer(signal.ITIMER_PROF)[1] == pytest.approx(0.01)
        assert calls
        assert s.result is not None
        assert any("during the run" in n for n in s.result.profile.notes)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0.0, 0.0)
        signal.signal(signal.SIGPROF, before)


def test_a_50_ms_program_still_gets_a_tree() -> None:
    # GIVEN 50 ms of work THEN a tree naming it (a few samples even on a loaded machine)
    result = sample(_busy, 0.05)
    assert result.profile.samples >= 2
    assert "_busy" in result.to_text()
    assert "no sample taken" not in result.to_text()


def test_start_twice_and_stop_before_start_are_refused() -> None:
    s = Sampling()
    with pytest.raises(RuntimeError):
        s.stop()
    s.start()
    try:
        with pytest.raises(RuntimeError):
            s.start()
    finally:
        s.stop()
    assert s.stop() is s.result  # idempotent
