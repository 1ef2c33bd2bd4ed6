"""Round ticks of the page's axes (_report/axis.py): 1-2-5 steps, one unit per axis."""

from __future__ import annotations

import math

import pytest

from onnxrt_backend_dev.monitoring._report.axis import MAX_TICKS, byte_ticks, nice_step, time_ticks

MIB = 2**20


@pytest.mark.parametrize(
    ("span", "labels"),
    [
        (0.00999, [f"{i} ms" for i in range(10)]),  # was 0 s, 999 µs, ... 9.99 ms
        (0.0374, [f"{i} ms" for i in range(0, 40, 5)]),
        (0.275, [f"{i} ms" for i in range(0, 300, 50)]),
        (3.15, ["0.0 s", "0.5 s", "1.0 s", "1.5 s", "2.0 s", "2.5 s", "3.0 s"]),
        (12.3, [f"{i} s" for i in range(0, 14, 2)]),
        (150.0, [f"{i} s" for i in range(0, 160, 20)]),
        (1e-5, [f"{i} µs" for i in range(11)]),
    ],
)
def test_time_ticks_are_round_in_one_unit(span: float, labels: list[str]) -> None:
    ticks = time_ticks(span)
    assert [label for _, label in ticks] == labels
    assert ticks[0][0] == 0.0 and ticks[-1][0] <= span * (1 + 1e-9)


@pytest.mark.parametrize(
    ("top", "labels"),
    [
        (93.4 * MIB, ["0 MiB", "20 MiB", "40 MiB", "60 MiB", "80 MiB"]),
        (1.5 * MIB, [f"{i / 10:.1f} MiB" for i in range(0, 15, 2)]),
        (900 * 1024, ["0 KiB", "200 KiB", "400 KiB", "600 KiB", "800 KiB"]),
        (5000 * MIB, ["0 GiB", "1 GiB", "2 GiB", "3 GiB", "4 GiB"]),
        (3.0, ["0 B", "1 B", "2 B", "3 B"]),  # never a fraction of a byte
    ],
)
def test_byte_ticks_are_round_in_one_unit(top: float, labels: list[str]) -> None:
    assert [label for _, label in byte_ticks(top, 5)] == labels


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_an_empty_or_bad_axis_has_one_tick_at_zero(bad: float) -> None:
    assert time_ticks(bad) == [(0.0, "0 s")] and byte_ticks(bad) == [(0.0, "0 B")]


@pytest.mark.parametrize("span", [1e-4, 0.0123, 0.7, 1.0, 9.9, 86400.0, 3.3e7])
def test_a_step_is_1_2_or_5_times_a_power_of_ten_and_the_ticks_are_bounded(span: float) -> None:
    for target in (1, 4, 8, 50):
        step = nice_step(span, target)
        mantissa = step / 10 ** math.floor(math.log10(step) + 1e-9)
        assert round(mantissa, 6) in (1.0, 2.0, 5.0)
        assert span / step <= MAX_TICKS - 1 + 1e-6
