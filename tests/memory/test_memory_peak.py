"""Tests for the memory spy: logic through fakes, failure modes with real processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import FakeProbe, write_status
from helpers import TESTS as _TESTS

from onnxrt_backend_dev.monitoring._memory import nvml as _nvml
from onnxrt_backend_dev.monitoring._memory import probes as _probes
from onnxrt_backend_dev.monitoring._memory import registry as _registry
from onnxrt_backend_dev.monitoring._memory import worker as _spy_worker
from onnxrt_backend_dev.monitoring._memory.series import MemorySeries, Monitor, SpyResult
from onnxrt_backend_dev.monitoring._memory.spy import _raise_error, _Reader
from onnxrt_backend_dev.monitoring._memory.views import SpyReport
from onnxrt_backend_dev.monitoring.memory_peak import (
    MemorySpy,
    get_memory_rss,
    register_probe,
    spied,
    spy_call,
    start_spying_on,
)

MIB = 2**20
TESTS = _TESTS
REAL_TIMEOUT = 30  # seconds for any child process of these tests


def _run_python(
    code: str, *, env: dict[str, str] | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=REAL_TIMEOUT,
        env=env,
        cwd=cwd,
    )


def _gone_or_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(b")") + 2 :].split()[0] == b"Z"


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone_or_zombie(pid):
            return True
        time.sleep(0.02)
    return False


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(REAL_TIMEOUT)
    return proc.pid


# --- the series and the monitor -------------------------------------------------------


def test_series_keeps_its_maximum_and_stays_bounded() -> None:
    # GIVEN a series of 8 points at most WHEN 1000 ticks with one spike come in
    series = MemorySeries(max_points=8)
    for i in range(1000):
        series.append(float(i), 5000.0 if i == 617 else float(i % 7))
    series.finish()
    # THEN the spike survives the decimation and the size stays under the bound
    assert max(v for _, v in series) == 5000.0
    assert (617.0, 5000.0) in list(series)
    assert len(series.values) < 8
    assert series.stride > 1


def test_series_bound_at_delay_10ms_for_one_hour_is_under_10_mb() -> None:
    series = MemorySeries()
    for i in range(360_000):
        series.append(i * 0.01, float(i % 1000))
    assert series.nbytes <= 10 * 10**6
    assert max(v for _, v in series) == 999.0


def test_series_round_trips_through_bytes() -> None:
    series = MemorySeries(max_points=4)
    for i in range(10):
        series.append(float(i), float(i * i))
    data = series.to_bytes()
    back = MemorySeries.from_bytes(data, 4, series.stride)
    assert list(back) == list(series)


def test_series_rejects_a_bound_below_two() -> None:
    with pytest.raises(ValueError, match="max_points must be >= 2, got 1"):
        MemorySeries(1)


def test_monitor_statistics_and_to_dict() -> None:
    mon = Monitor()
    for value, peak in [(10.0, 10.0), (20.0, 50.0), (30.0, None)]:
        mon.update(value, peak, 0.0)
    assert (mon.begin, mon.end, mon.max_peak, mon.n_measures) == (10.0, 30.0, 50.0, 3)
    assert mon.mean == 20.0
    d = mon.to_dict(unit=10)
    assert d == {"peak": 5.0, "mean": 2.0, "n": 3, "begin": 1.0, "end": 3.0, "peak_time": 0.0}
    assert (mon.delta_peak, mon.delta_end) == (40.0, 20.0)


def test_monitor_without_measures_has_zero_mean() -> None:
    assert Monitor().to_dict(2**20) == {
        "peak": 0,
        "mean": 0,
        "n": 0,
        "begin": 0,
        "end": 0,
        "peak_time": 0,
    }
    with pytest.raises(ValueError, match="unit must be > 0"):
        Monitor().to_dict(0)


def test_monitor_prints_with_units_and_round_trips() -> None:
    mon = Monitor("cpu")
    mon.update(300 * MIB, 312 * MIB, 1.0)
    mon.previous_peak = 400 * MIB
    assert "peak 312 MiB" in repr(mon) and "300 MiB" in repr(mon)
    header, data = mon.to_state()
    back = Monitor.from_state(header, data)
    assert back.to_dict() == mon.to_dict()
    assert (back.previous_peak, back.peak_source, list(back.series)) == (
        400 * MIB,
        "sampling",
        [(1.0, 312 * MIB)],
    )


def test_spy_result_prints_readably_and_exports_rows() -> None:
    cpu = Monitor("cpu")
    cpu.update(MIB, 2 * MIB, 10.0)
    cpu.update(MIB, MIB, 10.5)
    result = SpyReport(cpu=cpu, duration=0.5, target_exited=True, marks=[(0.25, "x")], t0=10.0)
    text = str(result)
    assert "cpu: peak 2.00 MiB" in text and "500 ms" in text and "exited" in text
    rows = result.to_rows()
    assert rows[0] == {"time": 0.0, "channel": "cpu", "bytes": 2 * MIB, "label": None}
    assert rows[-1] == {"time": 0.25, "channel": "mark", "bytes": None, "label": "x"}
    df = result.to_dataframe()
    assert list(df.columns) == ["time", "channel", "bytes", "label"] and len(df) == 3


def test_plot_returns_axes_and_draws_each_channel() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    cpu = Monitor("cpu")
    for i in range(5):
        cpu.update(i * MIB, None, float(i))
    result = SpyReport(cpu=cpu, marks=[(1.0, "here")], t0=0.0)
    ax = Figure().subplots()
    assert result.plot(ax=ax) is ax
    assert len(ax.get_lines()) == 3  # the series, the mark and the peak's marker
    with pytest.raises(ValueError, match="unit must be one of"):
        result.plot(ax=ax, unit=3)


# --- probes, through a fake procfs ----------------------------------------------------


def test_process_probe_reads_and_resets_the_high_water_mark(tmp_path: Path) -> None:
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=5000)
    probe = _probes.ProcessProbe(42, proc_root=str(tmp_path))
    assert (probe.source, probe.previous_peak) == ("hwm", 5000 * 1024)
    assert (tmp_path / "42" / "clear_refs").read_bytes() == b"5"
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=3000)
    assert probe.read() == (1000 * 1024, 3000 * 1024)
    write_status(tmp_path, 42, rss_kb=None, hwm_kb=None)  # a zombie shows no memory
    with pytest.raises(_probes.TargetGone):
        probe.read()
    probe.close()


def test_probe_without_reset_uses_the_mark_only_when_it_rises(tmp_path: Path) -> None:
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=5000)
    probe = _probes.ProcessProbe(42, reset_peak=False, proc_root=str(tmp_path))
    assert probe.source == "sampling+hwm"
    assert (tmp_path / "42" / "clear_refs").read_bytes() == b""
    assert probe.read() == (1000 * 1024, 1000 * 1024)  # the old mark is not ours
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=7000)
    assert probe.read() == (1000 * 1024, 7000 * 1024)  # a new mark: this interval's peak
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=2000)
    assert probe.read() == (1000 * 1024, 2000 * 1024)  # another spy reset it: since then
    assert probe.read() == (1000 * 1024, 1000 * 1024)
    probe.close()


def test_probe_falls_back_to_sampling_when_reset_is_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=5000)
    real_open = os.open

    def deny_clear_refs(path: str, flags: int, *args: int) -> int:
        if path.endswith("clear_refs"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(_probes.os, "open", deny_clear_refs)
    probe = _probes.ProcessProbe(42, proc_root=str(tmp_path))
    assert probe.source == "sampling+hwm"
    probe.close()


def test_probe_permission_denied_gives_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_status(tmp_path, 42, rss_kb=1000, hwm_kb=5000)

    def deny(path: str, flags: int, *args: int) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_probes.os, "open", deny)
    with pytest.raises(PermissionError, match=r"pid 42.*same user.*root"):
        _probes.ProcessProbe(42, proc_root=str(tmp_path))


def test_probe_of_a_missing_process_names_the_pid(tmp_path: Path) -> None:
    with pytest.raises(ProcessLookupError, match="no process with pid 77"):
        _probes.ProcessProbe(77, proc_root=str(tmp_path))
    with pytest.raises(ProcessLookupError, match="77"):
        _probes.read_status(77, proc_root=str(tmp_path))


def test_tree_probe_sums_descendants_and_skips_the_excluded_subtree(tmp_path: Path) -> None:
    # GIVEN 10 -> (11 -> 13, 12 the spy -> 14)
    write_status(tmp_path, 10, 1000, 1000, ppid=1)
    write_status(tmp_path, 11, 200, 300, ppid=10)
    write_status(tmp_path, 13, 20, 30, ppid=11)
    write_status(tmp_path, 12, 5000, 5000, ppid=10)
    write_status(tmp_path, 14, 5000, 5000, ppid=12)
    (tmp_path / "self").mkdir()
    children = _probes.children_map(str(tmp_path))
    assert sorted(_probes.descendants(10, children, exclude=[12])) == [11, 13]
    # WHEN the tree is read THEN the spy's subtree is not counted
    tree = _probes.TreeProbe(10, exclude=[12], proc_root=str(tmp_path), clock=lambda: 0.0)
    assert tree.read() == (1220 * 1024, 1330 * 1024)
    assert sorted(tree.probes) == [11, 13]
    tree.close()


# --- NVML, through a fake -------------------------------------------------------------


def test_nvml_probe_reads_devices_and_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import fakes

    monkeypatch.setenv("FAKE_NVML", "ok")
    monkeypatch.setenv("FAKE_NVML_PID", "42")
    probe = _nvml.NvmlProbe(fakes, lambda: {42})
    assert [c.name for c in probe.channels] == ["gpu0", "gpu1", "gpu0:process", "gpu1:process"]
    assert [(c.group, c.device) for c in probe.channels[1:3]] == [("gpus", 1), ("gpus_process", 0)]
    assert probe.read() == [2**30, 2 * 2**30, 256 * MIB, 0.0]
    probe.close()


@pytest.mark.parametrize(
    ("mode", "cause"),
    [
        ("LibraryNotFound", "NVML library"),
        ("DriverNotLoaded", "driver is not loaded"),
        ("NoPermission", "no permission"),
        ("nogpu", "no GPU"),
    ],
)
def test_nvml_failures_name_their_cause(
    monkeypatch: pytest.MonkeyPatch, mode: str, cause: str
) -> None:
    import fakes

    monkeypatch.setenv("FAKE_NVML", mode)
    with pytest.raises(RuntimeError, match=cause):
        _nvml.NvmlProbe(fakes, set)


# --- the device probe registry --------------------------------------------------------


@pytest.fixture
def fake_amd() -> Iterator[_registry.ProbeSpec]:
    """The second device probe, registered (through the public face) for the test only."""
    register_probe("fakeamd", "fakes:FakeAmdProbe", package="fake-amdsmi", extra="amd")
    spec = _registry.get_spec("fakeamd")
    try:
        yield spec
    finally:
        _registry.unregister(spec.name)


def test_registry_lists_nvml_and_refuses_unknown_names() -> None:
    assert _registry.get_spec("nvml").lib == "pynvml"
    with pytest.raises(ValueError, match=r"probes: unknown probe 'rocm', choose from \['nvml'\]"):
        start_spying_on(probes=("rocm",))
    with pytest.raises(TypeError, match="probes must be a sequence of names"):
        start_spying_on(probes="nvml")
    with pytest.raises(ValueError, match="probe target must be 'module:Class'"):
        _registry.ProbeSpec("x", "no_colon")


def test_a_second_device_probe_is_opened_from_its_registry_entry(
    fake_amd: _registry.ProbeSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVML", "ok")
    # GIVEN the spy's options asking for NVML and the fake AMD probe, as the parent writes them
    probes = [_registry.get_spec("nvml").to_arg("fakes"), fake_amd.to_arg()]
    opts = _registry.parse_args(
        _registry.to_argv({"pid": os.getpid(), "delay": 0.01, "parent": 1, "probes": probes})
    )
    loop = _spy_worker.build_loop(opts)
    try:
        # THEN both are open behind the one interface, their monitors named by probe and device
        assert all(isinstance(p, _registry.DeviceProbe) for p in loop.devices)
        assert [m.qualname for m in loop.monitors] == [
            "cpu", "nvml:gpu0", "nvml:gpu1", "nvml:gpu0:process", "nvml:gpu1:process",
            "fakeamd:amd0", "fakeamd:amd1",
        ]  # fmt: skip
        assert loop.tick()
        amd = loop.monitors[-1]
        assert (amd.max_peak, amd.peak_source, amd.device, amd.group) == (
            3.0 * 2**30, "fake-amd", 1, "amd_gpus"
        )  # fmt: skip
    finally:
        loop.close()
    assert all(getattr(p, "closed", True) for p in loop.devices)
    # AND a class that does not implement the interface is refused by name
    with pytest.raises(RuntimeError, match="fakes:NotAProbe is not a DeviceProbe"):
        _registry.open_probe("bad=fakes:NotAProbe,", set)


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_second_device_probe_end_to_end_through_the_spy(
    fake_amd: _registry.ProbeSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the fake AMD probe registered beside NVML (faked too)
    monkeypatch.setenv("FAKE_NVML", "ok")
    monkeypatch.setenv("FAKE_NVML_PID", str(os.getpid()))
    # WHEN a real spy measures both
    stat = start_spying_on(cuda=True, probe_libs={"nvml": "fakes"}, probes=("fakeamd",)).stop()
    # THEN the reference's keys are unchanged, the new probe's monitors sit beside them
    assert [m.name for m in stat["gpus"]] == ["gpu0", "gpu1"]
    assert [m.max_peak for m in stat["gpus_process"]] == [256 * MIB, 0.0]
    assert [m.max_peak for m in stat["amd_gpus"]] == [2**30, 3 * 2**30]
    assert list(stat["devices"]) == [
        "nvml:gpu0", "nvml:gpu1", "nvml:gpu0:process", "nvml:gpu1:process",
        "fakeamd:amd0", "fakeamd:amd1",
    ]  # fmt: skip
    assert "amd1: peak 3.00 GiB" in str(stat)
    # AND its failure to open is the spy's error, as NVML's is
    monkeypatch.setenv("FAKE_AMD", "fail")
    with pytest.raises(RuntimeError, match="fake AMD driver not loaded"):
        start_spying_on(probes=("fakeamd",))


# --- the spy's loop and protocol, in-process ------------------------------------------


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
    header, payload, rest = _spy_worker.decode_frame(out)
    if header["kind"] == "peek":  # both lines may come in one read or in two
        assert header["peak"] == 1.0
        header, payload, rest = _spy_worker.decode_frame(rest)
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
        header, _, rest = _spy_worker.decode_frame(f.read())
    assert (header["kind"], header["target_exited"], rest) == ("result", True, b"")
    os.close(r_in)
    os.close(w_in)


def test_write_frame_gives_up_when_nobody_reads() -> None:
    r, w = os.pipe()
    assert not _spy_worker.write_frame(w, {"kind": "result"}, b"x" * 2**20, timeout=0.05)
    os.close(r)
    os.close(w)


class _FakeProc:
    """Stands for the spy process: its stdout is a pipe the test writes to."""

    def __init__(self, fd: int) -> None:
        self.stdout = open(fd, "rb", buffering=0)  # noqa: SIM115 (closed by the test)

    def wait(self, timeout: float | None = None) -> int:
        return 0


def test_reader_reassembles_large_frames_from_short_reads() -> None:
    # GIVEN a 1 MiB payload, far more than a pipe holds, written in odd-sized pieces
    r, w = os.pipe()
    data = _spy_worker.encode_frame({"kind": "ready", "t0": 1.0})
    data += _spy_worker.encode_frame({"kind": "result"}, bytes(range(256)) * 4096)
    proc = _FakeProc(r)
    reader = _Reader(proc)  # type: ignore[arg-type]
    for i in range(0, len(data), 7777):
        os.write(w, data[i : i + 7777])
    os.close(w)
    # THEN both frames arrive whole
    assert reader.done.wait(REAL_TIMEOUT)
    reader.thread.join(REAL_TIMEOUT)
    proc.stdout.close()
    assert reader.ready_frame == {"kind": "ready", "t0": 1.0}
    assert reader.final is not None and reader.final[1] == bytes(range(256)) * 4096


def test_worker_arguments_are_validated() -> None:
    assert _registry.parse_args(["--pid", "3", "--delay", "0.5", "--parent", "1"])["pid"] == 3
    with pytest.raises(ValueError, match="missing spy argument --parent"):
        _registry.parse_args(["--pid", "3", "--delay", "0.5"])
    with pytest.raises(ValueError, match="unexpected spy argument '--bogus'"):
        _registry.parse_args(["--bogus"])
    with pytest.raises(ValueError, match="unexpected spy argument '--pid'"):
        _registry.parse_args(["--pid"])


def test_worker_argv_is_built_and_parsed_from_one_table() -> None:
    # GIVEN every option of the table set to a non-default value
    opts = {
        "pid": 12,
        "delay": 0.1 + 0.2,  # repr keeps every digit
        "parent": 7,
        "max_points": 99,
        "children": True,
        "no_reset": True,
        "probes": ["nvml=a.b:C,pynvml", "fake=x:Y,"],
    }
    # WHEN written by the parent then read by the spy THEN nothing is lost
    argv = _registry.to_argv(opts)
    assert _registry.parse_args(argv) == opts
    assert [o for o in argv if o.startswith("--")] == [o for o, *_ in _registry.WORKER_OPTIONS] + [
        "--probe"
    ]
    # AND the defaults round-trip too, and a key outside the table is refused
    minimal = {"pid": 1, "delay": 0.5, "parent": 2}
    assert _registry.parse_args(_registry.to_argv(minimal)) == {
        **minimal, "max_points": 65536, "children": False, "no_reset": False, "probes": []
    }  # fmt: skip
    with pytest.raises(ValueError, match="unexpected spy options \\['bogus'\\]"):
        _registry.to_argv({**minimal, "bogus": 1})


def test_errors_reported_by_the_spy_keep_their_type() -> None:
    with pytest.raises(PermissionError, match="advice"):
        _raise_error({"type": "PermissionError", "message": "advice"})
    with pytest.raises(RuntimeError, match="odd"):
        _raise_error({"type": "SomethingElse", "message": "odd"})


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"delay": 0}, ValueError, "delay must be >= 0.001 s and finite, got 0"),
        ({"delay": -1.0}, ValueError, "delay must be >= 0.001 s and finite, got -1.0"),
        ({"delay": 1e-6}, ValueError, "delay must be >= 0.001 s and finite, got 1e-06"),
        ({"delay": float("nan")}, ValueError, "got nan"),
        ({"delay": float("inf")}, ValueError, "got inf"),
        ({"delay": "0.1"}, TypeError, "delay must be a number of seconds, got str"),
        ({"pid": 0}, ValueError, "pid must be > 0, got 0"),
        ({"pid": "12"}, TypeError, "pid must be an int, got str"),
        ({"pid": 2**63}, ValueError, "pid must be <= [0-9]+ \\(this system's pid_max\\), got 92"),
        ({"pid": 2**22 + 1}, ValueError, "pid must be <= [0-9]+ \\(this system's pid_max\\)"),
        ({"max_points": 1}, ValueError, "max_points must be >= 2, got 1"),
        ({"max_points": "10"}, TypeError, "max_points must be an int, got str"),
        ({"max_points": 10.0}, TypeError, "max_points must be an int, got float"),
        ({"start_timeout": 0}, ValueError, "start_timeout must be > 0 and finite, got 0"),
        ({"start_timeout": "5"}, TypeError, "start_timeout must be a number of seconds, got str"),
        ({"stop_timeout": -1}, ValueError, "stop_timeout must be > 0 and finite, got -1"),
        ({"probes": ("nope",)}, ValueError, "unknown probe 'nope'"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, object], exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        start_spying_on(**kwargs)  # type: ignore[arg-type]


@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_pid_that_does_not_exist_is_refused_at_once() -> None:
    pid = _dead_pid()
    begin = time.perf_counter()
    with pytest.raises(ProcessLookupError, match=f"pid {pid}"):
        start_spying_on(pid)
    assert time.perf_counter() - begin < 1.0  # no spy is even started
    with pytest.raises(ProcessLookupError, match=str(pid)):
        get_memory_rss(pid)


def test_get_memory_rss_of_this_process() -> None:
    assert 1 * MIB < get_memory_rss(os.getpid()) < 100 * 2**30


@pytest.mark.parametrize(
    ("pid", "exc", "match"),
    [
        (None, TypeError, "pid must be an int, got NoneType"),
        ("1", TypeError, "pid must be an int, got str"),
        (-3, ValueError, "pid must be > 0, got -3"),
        (2**64, ValueError, "pid must be <= [0-9]+ \\(this system's pid_max\\)"),
    ],
)
def test_get_memory_rss_refuses_what_is_not_a_pid(pid: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        get_memory_rss(pid)  # type: ignore[arg-type]


# --- real spies -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_reference_example_runs_verbatim() -> None:
    code = (
        "from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on\n"
        "p = start_spying_on()\n# ...\n# code to measure\n# ...\n"
        "stat = p.stop()\nprint(stat)\n"
    )
    res = _run_python(code)
    assert res.returncode == 0, res.stderr
    assert "cpu: peak" in res.stdout and "iB" in res.stdout
    assert res.stderr == ""


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_spike_shorter_than_delay_sets_the_peak() -> None:
    # GIVEN a spy ticking every 0.5 s WHEN 100 MiB live for a few ms between two ticks
    spy = start_spying_on(delay=0.5)
    block = b"\x01" * (100 * MIB)
    del block
    stat = spy.stop()
    cpu = stat["cpu"]
    # THEN the high-water mark still caught it
    assert cpu.peak_source == "hwm"
    assert 90 * MIB < cpu.max_peak - cpu.begin < 140 * MIB
    assert cpu.n_measures >= 2 and stat["target_exited"] is False
    assert cpu.previous_peak is not None


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_stop_twice_returns_the_same_result_and_leaves_no_process() -> None:
    spy = start_spying_on()
    assert spy.start() is spy
    stat = spy.stop()
    assert spy.stop() is stat
    assert spy._proc is not None and spy._proc.returncode is not None
    # start() after stop() measures anew
    again = spy.start().stop()
    assert again is not stat and again["cpu"].n_measures >= 1


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_context_manager_helper_and_decorator() -> None:
    with start_spying_on() as spy:
        spy.mark("inside")
    assert spy.result is not None and spy.result["marks"][0][1] == "inside"
    value, stat = spy_call(lambda n: len(b"\x01" * n), (20 * MIB,))
    assert value == 20 * MIB and stat["cpu"].delta_peak > 15 * MIB

    @spied(delay=0.05)
    def work() -> int:
        return 7

    assert work() == 7 and work.memory["cpu"].n_measures >= 1  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_spy_ends_on_its_own_when_the_target_exits() -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    spy = MemorySpy(target.pid, delay=0.01)
    target.wait(REAL_TIMEOUT)
    assert spy.wait(10.0)
    assert spy._proc is not None
    deadline = time.monotonic() + 10.0
    while os.path.exists(f"/proc/{spy._proc.pid}") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(f"/proc/{spy._proc.pid}")  # ended and reaped before stop()
    stat = spy.stop()
    assert stat["target_exited"] is True and stat["cpu"].n_measures >= 1
    assert spy._proc.returncode == 0


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
@pytest.mark.parametrize("ending", ["os._exit(0)", "sys.exit(0)", "os.kill(os.getpid(), 9)"])
def test_the_spy_ends_when_its_parent_dies_without_stop(ending: str) -> None:
    code = textwrap.dedent(
        f"""
        import os, sys
        from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on
        spy = start_spying_on()
        print(spy._proc.pid, flush=True)
        {ending}
        """
    )
    res = _run_python(code)
    worker = int(res.stdout.split()[0])
    assert _wait_gone(worker), f"the spy {worker} outlived its parent"
    assert res.stderr == ""


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_spy_ends_when_its_parent_dies_even_if_a_fork_holds_the_pipe() -> None:
    # A forked child keeps the pipe open: no end-of-file; the spy sees its parent change.
    code = textwrap.dedent(
        """
        import os, time
        from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on
        spy = start_spying_on()
        print(spy._proc.pid, flush=True)
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        os._exit(0)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    worker = int(proc.stdout.readline())
    proc.wait(REAL_TIMEOUT)
    assert _wait_gone(worker, timeout=3.0), f"the spy {worker} outlived its parent"
    proc.stdout.close()


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_works_from_a_script_without_main_guard(tmp_path: Path, method: str) -> None:
    # A spy built on multiprocessing would re-run this script (spawn, forkserver).
    script = tmp_path / "no_guard.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import multiprocessing
            multiprocessing.set_start_method({method!r}, force=True)
            from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on
            print("script body runs")
            spy = start_spying_on()
            data = b"x" * (30 * 2**20)
            stat = spy.stop()
            print("delta", int(stat["cpu"].delta_peak > 20 * 2**20))
            """
        )
    )
    res = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=REAL_TIMEOUT
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("script body runs") == 1
    assert "delta 1" in res.stdout


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_the_spy_never_copies_a_large_parent() -> None:
    block = b"\x01" * (200 * MIB)
    spy = start_spying_on()
    assert spy._proc is not None
    try:
        assert get_memory_rss(spy._proc.pid) < 40 * MIB  # a fresh small interpreter
    finally:
        spy.stop()
    del block


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_works_from_an_ipython_shell() -> None:
    pytest.importorskip("IPython")
    code = textwrap.dedent(
        """
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        cell = (
            "from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on\\n"
            "p = start_spying_on()\\n"
            "data = b'x' * (30 * 2**20)\\n"
            "stat = p.stop()\\n"
        )
        res = shell.run_cell(cell)
        print(res.success, shell.user_ns["stat"]["cpu"].delta_peak > 20 * 2**20)
        """
    )
    res = _run_python(code)
    assert res.stdout.split()[-2:] == ["True", "True"], res.stderr


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_children_are_counted_and_the_spy_is_not() -> None:
    alone = start_spying_on(include_children=True, delay=0.02).stop()["cpu"]
    assert alone.max_peak < get_memory_rss(os.getpid()) + 8 * MIB  # the spy is not counted
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; b = b'x' * (80 * 2**20); time.sleep(30)"]
    )
    try:
        deadline = time.monotonic() + REAL_TIMEOUT
        while get_memory_rss(child.pid) < 80 * MIB and time.monotonic() < deadline:
            time.sleep(0.02)
        stat = start_spying_on(include_children=True, delay=0.02).stop()
    finally:
        child.kill()
        child.wait(REAL_TIMEOUT)
    assert stat["cpu"].max_peak > get_memory_rss(os.getpid()) + 75 * MIB


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_cuda_through_a_fake_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML", "ok")
    monkeypatch.setenv("FAKE_NVML_PID", str(os.getpid()))
    stat = start_spying_on(cuda=True, probe_libs={"nvml": "fakes"}).stop()
    assert [m.max_peak for m in stat["gpus"]] == [2**30, 2 * 2**30]
    assert [m.max_peak for m in stat["gpus_process"]] == [256 * MIB, 0.0]
    assert stat["gpus"][0].peak_source == "nvml"
    assert "gpu1: peak 2.00 GiB" in str(stat)


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_cuda_failure_is_a_clear_error_within_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML", "DriverNotLoaded")
    begin = time.perf_counter()
    with pytest.raises(RuntimeError, match="driver is not loaded"):
        start_spying_on(cuda=True, probe_libs={"nvml": "fakes"})
    assert time.perf_counter() - begin < 1.0


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
@pytest.mark.skipif(_has_gpu(), reason="a GPU driver is present")
def test_real_nvml_without_a_driver_raises_runtime_error() -> None:
    pytest.importorskip("pynvml")
    res = _run_python(
        "from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on\n"
        "try:\n    start_spying_on(cuda=True)\n"
        "except RuntimeError as e:\n    print('RuntimeError', e)\n"
    )
    assert res.returncode == 0 and res.stdout.startswith("RuntimeError cuda=True")
    assert res.stderr == ""  # no traceback from the spy


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU and its driver")
def test_real_gpu() -> None:
    pytest.importorskip("pynvml")
    stat = start_spying_on(cuda=True).stop()
    assert len(stat["gpus"]) >= 1 and stat["gpus"][0].max_peak > 0


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_importing_the_module_stays_light() -> None:
    res = _run_python(
        "import sys\nimport onnxrt_backend_dev.monitoring.memory_peak\n"
        "print(sorted({'pandas', 'matplotlib', 'pynvml', 'numpy'} & set(sys.modules)))"
    )
    assert res.stdout.strip() == "[]", res.stderr


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_real_series_exports_rows() -> None:
    spy = start_spying_on(delay=0.005)
    time.sleep(0.05)
    spy.mark("half")
    time.sleep(0.05)
    stat = spy.stop()
    rows = stat.to_rows()
    cpu_rows = [r for r in rows if r["channel"] == "cpu"]
    assert len(cpu_rows) == stat["cpu"].n_measures
    assert max(r["bytes"] for r in cpu_rows) == stat["cpu"].max_peak
    assert [r["label"] for r in rows if r["channel"] == "mark"] == ["half"]
    assert 0.0 < stat["marks"][0][0] < stat["duration"] + 0.05


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_a_nested_spy_follows_the_outer_resets_and_both_see_the_spike() -> None:
    # GIVEN a resetting spy with a slow tick, and a second, faster spy started inside it
    outer = start_spying_on(delay=0.05)
    inner = start_spying_on(delay=0.002)
    try:
        # THEN only the first one resets the high-water mark
        assert outer._resets and not inner._resets
        # WHEN a short 200 MiB spike happens, several times
        for _ in range(3):
            spike = b"x" * (200 * MIB)
            del spike
            time.sleep(0.06)
    finally:
        inner_res = inner.stop()
        outer_res = outer.stop()
    # THEN the outer spy's peak is exact, and the inner one sees the spike too
    assert outer_res["cpu"].peak_source == "hwm"
    assert inner_res["cpu"].peak_source == "sampling+hwm"
    for res in (outer_res, inner_res):
        added = res["cpu"].max_peak - res["cpu"].begin
        assert added >= 0.97 * 200 * MIB, (res["cpu"].peak_source, added / MIB)
    # AND once the outer one stopped, a new spy resets again
    alone = start_spying_on()
    try:
        assert alone._resets
    finally:
        alone.stop()


# --- faults: Ctrl-C, a dead or frozen spy, concurrent stop() ----------------------------

# Interrupts start_spying_on() with a real SIGINT after delays from 10 us to 100 ms (the
# spy starts in tens of ms), then checks that no spy is left, not even a zombie.
INTERRUPTED_STARTS = """
import os, signal, time
import psutil
from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

signal.signal(signal.SIGALRM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
outcomes = {"interrupted": 0, "started": 0}
for k in range(40):
    spy = None
    try:
        signal.setitimer(signal.ITIMER_REAL, 1e-5 * 1.3**k)
        spy = start_spying_on(delay=0.05)
        signal.setitimer(signal.ITIMER_REAL, 0)
        outcomes["started"] += 1
    except KeyboardInterrupt:
        outcomes["interrupted"] += 1
    if spy is not None:
        spy.stop()
me = psutil.Process()
deadline = time.monotonic() + 10
while me.children() and time.monotonic() < deadline:
    time.sleep(0.02)
print(outcomes["interrupted"], outcomes["started"], len(me.children()), os.getpid())
"""


def _spies_of(parent: int) -> list[int]:
    """Spy processes started by ``parent`` (their argv names it), wherever they are now."""
    marker = f"\0--parent\0{parent}\0".encode()
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue  # gone meanwhile
    return found


@pytest.mark.slow
@pytest.mark.timeout(2 * REAL_TIMEOUT)
def test_ctrl_c_at_any_moment_of_the_start_leaves_no_spy() -> None:
    # GIVEN a process interrupting its own start_spying_on() at 40 moments
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_STARTS],
        capture_output=True,
        text=True,
        timeout=2 * REAL_TIMEOUT,
    )
    # THEN some starts were interrupted, some not, no spy is left and nothing was printed
    assert proc.returncode == 0, proc.stderr
    interrupted, started, children, pid = map(int, proc.stdout.split())
    assert interrupted > 0 and started > 0 and children == 0, proc.stdout
    assert proc.stderr == ""  # no "Exception ignored in ... __del__", no traceback
    # AND no orphan (reparented to pid 1) once the process is gone
    assert _spies_of(pid) == []
    spy = start_spying_on()
    try:  # (the scan does find a live spy by its parent)
        assert spy._proc is not None and spy._proc.pid in _spies_of(os.getpid())
    finally:
        spy.stop()


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_concurrent_stop_calls_all_get_the_same_result() -> None:
    import threading

    spy = start_spying_on(delay=0.005)
    barrier = threading.Barrier(8)
    results: list[object] = []

    def stop() -> None:
        barrier.wait()
        results.append(spy.stop())

    threads = [threading.Thread(target=stop) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(REAL_TIMEOUT)
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert spy.stop() is results[0]


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_after_the_spy_died_every_stop_raises_the_same_error() -> None:
    import signal

    spy = start_spying_on()
    assert spy._proc is not None
    os.kill(spy._proc.pid, signal.SIGKILL)
    assert spy.wait(10.0)
    errors = []
    for _ in range(3):
        with pytest.raises(RuntimeError, match=r"ended without its measures \(exit code -9\)") as e:
            spy.stop()
        errors.append(e.value)
    assert errors[0] is errors[1] is errors[2]


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_frozen_spy_is_reported_as_not_answering_and_killed() -> None:
    import signal

    spy = start_spying_on(stop_timeout=0.5)
    assert spy._proc is not None
    os.kill(spy._proc.pid, signal.SIGSTOP)
    with pytest.raises(RuntimeError, match=r"did not answer within 0.5 s \(killed\)") as e:
        spy.stop()
    assert "exit code" not in str(e.value)
    assert _wait_gone(spy._proc.pid)
    with pytest.raises(RuntimeError) as again:
        spy.stop()
    assert again.value is e.value
