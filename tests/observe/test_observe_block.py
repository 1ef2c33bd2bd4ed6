"""Blocks of code observed from outside: the memory spy reads this process's stacks at
its ticks (``sampling()``, ``sample()``, ``report.monitor()``, ``start_spying_on(
stacks=True)``), and the in-process collectors where the observer cannot run."""

from __future__ import annotations

import mmap
import threading
import time
from collections.abc import Iterator

import pytest

from onnxrt_backend_dev.monitoring._observe import session
from onnxrt_backend_dev.monitoring._report.sampling import Sampling, sample, sampling
from onnxrt_backend_dev.monitoring._sampling.model import SampledProfile

pytestmark = pytest.mark.skipif(
    not session.availability().ok,
    reason=f"the observer cannot run here: {session.availability().reason}",
)


def busy_leaf(seconds: float) -> int:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def busy_branch(seconds: float) -> int:
    return busy_leaf(seconds)


def _functions(profile: SampledProfile) -> set[str]:
    return {f.name for stack in profile.stacks for f in stack}


def test_a_block_is_rooted_at_its_frame_and_shows_none_of_the_tool() -> None:
    # WHEN a block is sampled by the observer
    with sampling(interval=0.002, collector="observer") as s:
        busy_branch(0.4)
    assert s.result is not None
    profile = s.result.profile
    # THEN the main thread's stacks start at this test function (its callers, pytest's,
    # left out), the work is seen, and none of the tool's own frames is
    main = profile.threads[0]
    assert main.is_main and main.totals
    roots = {profile.stacks[sid][0].name for sid in main.totals}
    assert roots == {"test_a_block_is_rooted_at_its_frame_and_shows_none_of_the_tool"}
    names = _functions(profile)
    assert {"busy_branch", "busy_leaf"} <= names
    assert not {"start", "stop", "_observed", "__enter__", "__exit__"} & names
    assert profile.split_known and profile.timer == "observer"
    assert any("collector: the observer" in n for n in profile.notes)


def test_sample_is_rooted_at_the_function() -> None:
    result = sample(busy_branch, 0.3)
    assert result.value > 0
    main = result.profile.threads[0]
    assert {result.profile.stacks[sid][0].name for sid in main.totals} == {"busy_branch"}


def test_a_thread_of_the_block_is_named_and_its_time_its_own() -> None:
    # GIVEN a named worker thread busy during the block, the main thread waiting
    with sampling(collector="observer") as s:
        worker = threading.Thread(target=busy_leaf, args=(0.4,), name="worker-7")
        worker.start()
        worker.join()
    assert s.result is not None
    threads = {t.name: t for t in s.result.profile.threads}
    # THEN the worker is there by its name, busy; the main thread mostly waiting
    assert "worker-7" in threads
    worker_cpu = threads["worker-7"].cpu
    assert worker_cpu > 0.05
    assert threads["MainThread"].cpu < worker_cpu


@pytest.fixture
def no_observer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The observer refused here (a container without CAP_SYS_PTRACE, say)."""
    monkeypatch.setattr(
        session, "_AVAILABLE", [session.Availability(False, "refused for the test")]
    )
    yield


def test_auto_falls_back_to_the_in_process_sampler_and_says_why(no_observer: None) -> None:
    with sampling(collector="auto") as s:
        busy_leaf(0.1)
    assert s.result is not None
    notes = s.result.profile.notes
    assert any("in-process sampler" in n and "refused for the test" in n for n in notes)
    assert s.result.profile.timer != "observer"


def test_asking_for_the_observer_where_it_cannot_run_is_an_error(no_observer: None) -> None:
    with pytest.raises(RuntimeError, match="refused for the test"):
        Sampling(collector="observer").start()


def test_a_bad_collector_is_refused() -> None:
    with pytest.raises(ValueError, match="collector"):
        Sampling(collector="outside")


def allocate_block() -> int:
    # 60 MiB of fresh pages, touched: memory the long suite freed and still holds would
    # serve a bytearray without the RSS rising.
    block = mmap.mmap(-1, 60 * 2**20)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    time.sleep(0.05)
    size = len(block)
    block.close()
    return size


def test_monitor_reports_the_block_through_the_observer() -> None:
    from onnxrt_backend_dev.monitoring.report import monitor

    with monitor("block", interval=0.005) as m:
        allocate_block()
    report = m.report
    assert report is not None
    assert any("collector: the observer" in n for n in report.notes)
    # the 60 MiB are seen rising, or falling at the end (on a busy machine the first tick
    # of the observer, another process starting, may come once some pages are touched)
    peak = report.peak
    assert max(peak.value - peak.start, peak.value - report.end_rss) > 40 * 2**20
    names = {r.site.function for r in report.functions}
    assert "allocate_block" in names
    assert not any(n.startswith("_") and "monitor" in n for n in names)


def test_spy_stacks_read_from_outside_say_where_the_peak_was() -> None:
    from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

    spy = start_spying_on(stacks=True, delay=0.005)
    allocate_block()
    stat = spy.stop()
    assert getattr(spy, "observed", None) is not None
    where = stat["cpu"].where
    assert where is not None
    top = where.functions[0]
    assert top.function == "allocate_block"
    assert top.to_peak > 40 * 2**20
