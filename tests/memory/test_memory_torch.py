"""The ``torch`` probe (``_memory/torch_probe.py``) and the in-process reading of device
probes (``_memory/inprocess.py``), through the fake ``torch.cuda`` of
``fake_torch_cuda.py``: exact peaks (a spike between two readings included), the line
where the peak rose, the join with NVML's process usage (the CUDA context apart), and
every entry point that names probes (the library, the spy's result, ``run``'s hook)."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import pytest
from fakes import FakeClock

from onnxrt_backend_dev.monitoring._errors import BadValue, MissingDependencyError
from onnxrt_backend_dev.monitoring._memory import inprocess, registry
from onnxrt_backend_dev.monitoring._memory.series import CONTEXT_WORDS, Monitor, join_context
from onnxrt_backend_dev.monitoring._memory.torch_probe import TorchProbe
from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

MIB = 2**20
GIB = 2**30
REAL_TIMEOUT = 30
FAKE = "fake_torch_cuda"


def _arg() -> str:
    return registry.get_spec("torch").to_arg(FAKE)


def _reader(clock: FakeClock, reset: bool = True, **kw: Any) -> inprocess.InProcessProbes:
    """A reader whose thread never wakes during the test: the test takes the readings."""
    return inprocess.InProcessProbes([_arg()], 3600.0, clock=clock, reset=reset, **kw)


# --- the probe --------------------------------------------------------------------------


def test_the_probe_reads_allocated_and_reserved_per_device(fake_torch: Any) -> None:
    # GIVEN 300 MiB allocated on GPU 1
    fake_torch.alloc(300 * MIB, device=1)
    probe = TorchProbe(fake_torch, set)
    # THEN one channel per device for each counter, named and grouped
    assert [(c.name, c.group, c.device, c.role) for c in probe.channels] == [
        ("cuda0", "torch", 0, "allocated"),
        ("cuda1", "torch", 1, "allocated"),
        ("cuda0:reserved", "torch_reserved", 0, "reserved"),
        ("cuda1:reserved", "torch_reserved", 1, "reserved"),
    ]
    # AND each reading gives the bytes now and, when the mark moved, the interval's peak
    assert probe.read_peaks() == [(0.0, None), (300.0 * MIB, 300.0 * MIB), (0.0, None), (
        300.0 * MIB, 300.0 * MIB)]  # fmt: skip
    assert probe.read_peaks() == [(0.0, None), (300.0 * MIB, None), (0.0, None), (
        300.0 * MIB, None)]  # fmt: skip
    # AND the devices' UUIDs, learnt once CUDA runs, join NVML's of the same GPU
    assert registry.get_spec("torch").inprocess
    assert probe.channels[1].uuid == fake_torch.uuid_of(1)


def test_before_cuda_starts_nothing_initializes_it(fake_torch: Any) -> None:
    # GIVEN a program that imported torch but did not use CUDA yet
    fake_torch.reset(initialized=False)
    probe = TorchProbe(fake_torch, set)
    probe.reset_peaks()
    # THEN the figures are 0 and neither the reset nor the UUIDs were asked for (torch
    # would create a context of hundreds of MiB for them)
    assert probe.read() == [0.0] * 4
    assert fake_torch.calls == []
    fake_torch.init()
    fake_torch.alloc(10 * MIB)
    assert probe.read()[0] == 10 * MIB
    assert fake_torch.calls == ["get_device_properties(0)", "get_device_properties(1)"]


@pytest.mark.parametrize(
    ("available", "devices", "cause"),
    [(False, 2, "torch sees no CUDA device"), (True, 0, "torch sees no CUDA device")],
)
def test_no_cuda_device_is_a_clear_error(
    fake_torch: Any, available: bool, devices: int, cause: str
) -> None:
    fake_torch.reset(devices=devices, available=available)
    with pytest.raises(RuntimeError, match=cause):
        TorchProbe(fake_torch, set)


def test_a_broken_torch_cuda_is_a_clear_error() -> None:
    class Broken:
        def is_available(self) -> bool:
            raise OSError("libcudart.so: cannot open shared object file")

    with pytest.raises(RuntimeError, match=r"torch\.cuda is unusable \(OSError: libcudart"):
        TorchProbe(Broken(), set)


# --- the floor: the peak is the allocator's, exactly ------------------------------------


def test_the_peak_is_max_memory_allocated_including_a_spike_between_two_readings(
    fake_torch: Any, fake_clock: FakeClock
) -> None:
    # GIVEN memory allocated before the block, whose old peak must not count
    fake_torch.spike(5 * GIB)
    fake_torch.alloc(100 * MIB)
    reader = _reader(fake_clock).start()  # reads at 0 s
    # WHEN the block allocates, then spikes by 3,000 MiB between two readings, then frees
    fake_clock.advance(0.01)
    fake_torch.alloc(400 * MIB)
    reader.tick()  # 0.01 s: 500 MiB
    fake_torch.spike(3000 * MIB)  # 3.42 GiB for an instant: no reading sees it
    fake_clock.advance(0.01)
    reader.tick()  # 0.02 s: 500 MiB again
    fake_torch.free(400 * MIB)
    fake_clock.advance(0.01)
    monitors = reader.stop()  # 0.03 s: 100 MiB
    cuda0 = monitors[0]
    # THEN the probe's peak is the allocator's max_memory_allocated, exactly
    assert cuda0.qualname == "torch:cuda0" and cuda0.peak_source == "torch"
    assert cuda0.max_peak == fake_torch.max_memory_allocated(0) == 3500 * MIB
    # AND it is dated in the interval where it happened, the curve shows it there only
    assert (cuda0.peak_prev_timestamp, cuda0.peak_timestamp) == (0.01, 0.02)
    assert list(cuda0.series) == [
        (0.0, 100.0 * MIB), (0.01, 500.0 * MIB), (0.02, 3500.0 * MIB), (0.03, 100.0 * MIB)
    ]  # fmt: skip
    assert (cuda0.begin, cuda0.end) == (100 * MIB, 100 * MIB)
    # AND the reserved memory's peak is the allocator's too
    reserved = next(m for m in monitors if m.name == "cuda0:reserved")
    assert reserved.max_peak == fake_torch.max_memory_reserved(0)


def test_a_spike_just_before_stop_counts(fake_torch: Any, fake_clock: FakeClock) -> None:
    reader = _reader(fake_clock).start()
    fake_torch.spike(700 * MIB, device=1)
    fake_clock.advance(0.001)
    cuda1 = reader.stop()[1]
    assert cuda1.max_peak == fake_torch.max_memory_allocated(1) == 700 * MIB


def test_without_reset_the_peak_since_cuda_started_counts(
    fake_torch: Any, fake_clock: FakeClock
) -> None:
    # GIVEN a program's peak reached before the reader opened (run's hook resets nothing)
    fake_torch.spike(2 * GIB)
    reader = _reader(fake_clock, reset=False).start()
    fake_clock.advance(0.01)
    assert reader.stop()[0].max_peak == 2 * GIB
    assert fake_torch.calls.count("reset_peak_memory_stats(0)") == 0


def test_an_inner_block_resetting_the_mark_does_not_lose_the_outer_peak(
    fake_torch: Any, fake_clock: FakeClock
) -> None:
    # GIVEN an outer measure, then a spike it has not read yet
    outer = _reader(fake_clock).start()
    fake_torch.spike(1 * GIB)
    # WHEN an inner measure starts (it resets the allocator's mark) and ends
    fake_clock.advance(0.01)
    inner = _reader(fake_clock).start()
    fake_torch.spike(200 * MIB)
    fake_clock.advance(0.01)
    inner_peak = inner.stop()[0].max_peak
    fake_clock.advance(0.01)
    # THEN the inner one has its own peak, the outer one kept the spike before the reset
    assert inner_peak == 200 * MIB
    assert outer.stop()[0].max_peak == 1 * GIB


def test_the_line_running_when_the_peak_rose_is_kept(fake_torch: Any) -> None:
    # GIVEN a reader whose readings the test takes from another thread, as its thread
    # does, while this one allocates
    clock = FakeClock()
    reader = _reader(clock).start()
    ticked = threading.Event()
    go = threading.Event()

    def tick_later() -> None:
        go.wait(REAL_TIMEOUT)
        clock.advance(0.01)
        reader.tick()
        ticked.set()

    worker = threading.Thread(target=tick_later)
    worker.start()
    fake_torch.alloc(2 * GIB)
    go.set()
    ticked.wait(REAL_TIMEOUT)  # the line below runs while the peak is seen
    worker.join(REAL_TIMEOUT)
    monitors = reader.stop()
    # THEN the stack of this (the measured) thread at that reading names this test
    from onnxrt_backend_dev.monitoring._memory.frames import innermost_user

    frames = monitors[0].peak_frames
    assert frames is not None
    assert frames[innermost_user(frames)].name.endswith(
        "test_the_line_running_when_the_peak_rose_is_kept"
    )
    assert monitors[0].peak_stack is not None
    assert any("test_memory_torch.py" in label for label in monitors[0].peak_stack)
    assert monitors[1].peak_frames is None  # GPU 1's peak never rose


# --- the CUDA context measured apart ------------------------------------------------------


def _mon(name: str, role: str, uuid: str | None, value: float) -> Monitor:
    mon = Monitor(name, 16, probe="x", device=0, group="g")
    mon.role, mon.uuid = role, uuid
    mon.update(value, None, 1.0)
    return mon


def test_the_context_is_nvml_process_usage_less_torch_reserved_on_the_same_gpu() -> None:
    process0 = _mon("gpu0:process", "process", "GPU-00000000-0000-0000-0000-000000000000", 900)
    process1 = _mon("gpu1:process", "process", "GPU-00000000-0000-0000-0000-000000000001", 50)
    unknown = _mon("gpu2:process", "process", None, 700)
    reserved0 = _mon("cuda0:reserved", "reserved", "00000000-0000-0000-0000-000000000000", 400)
    reserved1 = _mon("cuda1:reserved", "reserved", "00000000-0000-0000-0000-000000000001", 60)
    join_context([process0, process1, unknown, reserved0, reserved1])
    # THEN GPU 0 has it; GPU 1's readings a tick apart do not add up (unknown, not
    # negative); an unknown UUID joins nothing
    assert (process0.context, process1.context, unknown.context) == (500, None, None)
    assert CONTEXT_WORDS in process0.summary() and "context" in process0.to_dict()


# --- through the spy ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_library_reads_torch_beside_the_rss_and_nvml(
    fake_torch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML", "ok")
    monkeypatch.setenv("FAKE_NVML_PID", str(os.getpid()))
    # GIVEN NVML and torch read together, a spike on GPU 1 inside the block
    spy = start_spying_on(cuda=True, probes=["torch"], probe_libs={"nvml": "fakes"})
    fake_torch.alloc(100 * MIB)
    fake_torch.spike(3000 * MIB, device=1)
    stat = spy.stop()
    # THEN torch's monitors are in the result, by group and by qualname, after NVML's
    assert [m.name for m in stat["torch"]] == ["cuda0", "cuda1"]
    assert [m.name for m in stat["torch_reserved"]] == ["cuda0:reserved", "cuda1:reserved"]
    assert list(stat["devices"]) == [
        "nvml:gpu0", "nvml:gpu1", "nvml:gpu0:process", "nvml:gpu1:process",
        "torch:cuda0", "torch:cuda1", "torch:cuda0:reserved", "torch:cuda1:reserved",
    ]  # fmt: skip
    # AND the peaks are the allocator's, the spike included
    assert stat["torch"][1].max_peak == fake_torch.max_memory_allocated(1) == 3000 * MIB
    assert stat["torch"][0].max_peak == 100 * MIB
    # AND on the spy's time axis: within the RSS monitor's span
    cpu_times = [t for t, _ in stat["cpu"].series]
    torch_times = [t for t, _ in stat["torch"][0].series]
    assert cpu_times[0] - 1.0 < torch_times[0] and torch_times[-1] < cpu_times[-1] + 1.0
    # AND GPU 0's process usage (256 MiB in the fake NVML) less torch's reserved memory
    # (100 MiB in 2 MiB blocks) is named as the CUDA context and memory outside torch
    process0 = stat["gpus_process"][0]
    assert process0.context == 256 * MIB - fake_torch.memory_reserved(0)
    assert f"of which 156 MiB {CONTEXT_WORDS}" in str(stat)
    assert "torch:cuda1" not in str(stat) and "cuda1: peak 2.93 GiB" in str(stat)


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_with_stacks_the_torch_peak_has_its_attribution(fake_torch: Any) -> None:
    spy = start_spying_on(probes=["torch"], stacks=True, delay=0.005)
    fake_torch.alloc(GIB)
    stat = spy.stop()
    cuda0 = stat["torch"][0]
    assert cuda0.max_peak == GIB and cuda0.where is not None


def test_an_in_process_probe_of_another_process_is_refused(fake_torch: Any) -> None:
    # The counters live in the measured process: another pid cannot be read from here.
    with pytest.raises(BadValue, match=r"probe 'torch' reads its counters inside the measured"):
        start_spying_on(pid=os.getppid(), probes=["torch"])


def test_without_torch_the_error_names_the_extra() -> None:
    if registry.get_spec("torch").lib != "torch.cuda":
        pytest.skip("the torch probe is replaced")
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed")
    with pytest.raises(MissingDependencyError, match=r"pip install 'onnxrt-backend-dev\[torch\]'"):
        start_spying_on(probes=["torch"])


def test_no_device_fails_the_start_and_leaves_no_spy(fake_torch: Any) -> None:
    fake_torch.reset(available=False)
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(RuntimeError, match="torch sees no CUDA device"):
        start_spying_on(probes=["torch"])
    assert inprocess.THREAD_NAME not in {t.name for t in threading.enumerate()} - before


# --- run's hook: the program's side --------------------------------------------------------


def test_the_program_hook_opens_the_probe_once_the_program_initialized_cuda(
    fake_torch: Any,
) -> None:
    # GIVEN a program that imported torch (its module in sys.modules) without using CUDA
    fake_torch.reset(initialized=False)
    assert FAKE in sys.modules
    reader = inprocess.InProcessProbes(
        [_arg()], 3600.0, reset=False, wait_import=True, thread=threading.get_ident()
    ).start()
    reader.tick()
    assert reader.devices.probes == [] and fake_torch.calls == []  # nothing opened, nothing asked
    # WHEN it starts CUDA and allocates
    fake_torch.init()
    fake_torch.alloc(64 * MIB)
    reader.tick()
    fake_torch.spike(GIB)
    monitors = reader.stop()
    # THEN the probe is read from then on, the peak exact, nothing reset
    assert [m.qualname for m in monitors][:2] == ["torch:cuda0", "torch:cuda1"]
    assert monitors[0].max_peak == GIB + 64 * MIB
    assert not any(c.startswith("reset") for c in fake_torch.calls)
    # AND the report's plain facts carry each device, its role, UUID and the line
    curves, devices = inprocess.device_facts(monitors)
    assert [c[0] for c in curves] == [d[0] for d in devices]
    name, peak, _, end, extras = devices[0]
    assert (name, peak, end, extras["role"]) == (
        "torch:cuda0",
        GIB + 64 * MIB,
        64 * MIB,
        "allocated",
    )
    assert extras["uuid"] == fake_torch.uuid_of(0)
    assert extras["site"][0].endswith("test_the_program_hook_opens_the_probe_once_the_program"
                                      "_initialized_cuda")  # fmt: skip


def test_the_program_hook_never_opens_a_library_the_program_does_not_import(
    fake_torch: Any,
) -> None:
    arg = registry.ProbeSpec("x", registry.get_spec("torch").target, "no_such_lib_xyz").to_arg()
    reader = inprocess.program_probes([arg], delay=3600.0)
    reader.tick()
    assert reader.stop() == [] and reader.notes == []


def test_a_probe_failing_to_open_in_the_program_is_a_note(fake_torch: Any) -> None:
    fake_torch.reset(available=False)
    reader = inprocess.program_probes([_arg()], delay=3600.0)
    reader.tick()
    assert reader.stop() == []
    assert reader.notes and "torch sees no CUDA device" in reader.notes[0]
