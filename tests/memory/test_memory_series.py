"""Tests for the spy's data (``_memory/series.py``: the bounded series, the monitor,
the result) and its views (``_memory/views.py``, ``_memory/plot.py``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import TESTS as _TESTS

from onnxrt_backend_dev.monitoring._memory.series import MemorySeries, Monitor
from onnxrt_backend_dev.monitoring._memory.views import SpyReport

MIB = 2**20
TESTS = _TESTS
REAL_TIMEOUT = 30  # seconds for any child process of these tests


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
