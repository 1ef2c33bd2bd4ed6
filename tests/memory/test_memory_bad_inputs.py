"""Bad inputs of the memory library's entry points, one table each: the error is of the
family (``BadValue``/``BadType``, also ``ValueError``/``TypeError``) and its message names
the parameter and the rule. And errors of the family raised inside the spy process arrive
as their own class, through a real spy."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from onnxrt_backend_dev.monitoring import memory_peak
from onnxrt_backend_dev.monitoring._errors import (
    BadType,
    BadValue,
    MonitoringError,
    SpyError,
    TargetGone,
)
from onnxrt_backend_dev.monitoring._memory import registry
from onnxrt_backend_dev.monitoring.memory_peak import Monitor, spy_call, start_spying_on

REAL_TIMEOUT = 30


def _fed() -> Monitor:
    mon = Monitor()
    mon.update(5.0, None, 1.0)
    return mon


# Each row: what is called, the error class, the words of the message.
LIBRARY_CASES: list[tuple[str, Callable[[], Any], type, str]] = [
    ("max_points str", lambda: Monitor(max_points="x"), BadType, "max_points must be an int"),  # type: ignore[arg-type]
    ("max_points 1", lambda: Monitor(max_points=1), BadValue, "max_points must be >= 2, got 1"),
    ("name int", lambda: Monitor(5), BadType, "name must be a str, got int"),  # type: ignore[arg-type]
    ("update nan", lambda: Monitor().update(math.nan), BadValue, "value must be finite, got nan"),
    ("update inf", lambda: Monitor().update(math.inf), BadValue, "value must be finite, got inf"),
    ("update str", lambda: Monitor().update("5"), BadType, "value must be a number, got str"),  # type: ignore[arg-type]
    ("peak nan", lambda: Monitor().update(1.0, math.nan), BadValue, "peak must be finite"),
    ("time nan", lambda: Monitor().update(1.0, None, math.nan), BadValue, "timestamp must be"),
    ("final nan", lambda: _fed().add_final_peak(math.nan, 2.0), BadValue, "value must be finite"),
    ("unit str", lambda: _fed().to_dict(unit="MiB"), BadType, "unit must be a number, got str"),  # type: ignore[arg-type]
    ("unit nan", lambda: _fed().to_dict(unit=math.nan), BadValue, "unit must be finite, got nan"),
    ("unit inf", lambda: _fed().to_dict(unit=math.inf), BadValue, "unit must be finite, got inf"),
    ("unit 0", lambda: _fed().to_dict(unit=0), BadValue, "unit must be > 0, got 0"),
    ("unit -1", lambda: _fed().to_dict(unit=-1), BadValue, "unit must be > 0, got -1"),
    ("spy_call int", lambda: spy_call(5), BadType, "fct must be a callable, got int"),  # type: ignore[arg-type]
    ("spy_call args", lambda: spy_call(print, args=5), BadType, "args must be a tuple, got int"),  # type: ignore[arg-type]
    ("spy_call kwargs", lambda: spy_call(print, kwargs=[1]), BadType, "kwargs must be a dict"),  # type: ignore[arg-type]
    ("cuda 'no'", lambda: start_spying_on(cuda="no"), BadType, "cuda must be a bool"),  # type: ignore[arg-type]
    ("children 'no'", lambda: start_spying_on(include_children="no"), BadType, "include_children"),  # type: ignore[arg-type]
    ("reset 1", lambda: start_spying_on(reset_peak=1), BadType, "reset_peak must be a bool"),  # type: ignore[arg-type]
    ("stacks 'yes'", lambda: start_spying_on(stacks="yes"), BadType, "stacks must be a bool"),  # type: ignore[arg-type]
    ("delay inf", lambda: start_spying_on(delay=math.inf), BadValue, "delay must be >= 0.001 s"),
    ("delay nan", lambda: spy_call(print, delay=math.nan), BadValue, "delay must be >= 0.001 s"),
    ("probes int", lambda: start_spying_on(probes=5), BadType, "probes must be a sequence"),
    ("probe name", lambda: start_spying_on(probes=("rocm",)), BadValue, "unknown probe 'rocm'"),
    ("probe_libs x", lambda: start_spying_on(probe_libs={"nvml": "x"}), BadValue, "probe_libs"),
    (
        "probe_libs ''",
        lambda: start_spying_on(probes=("nvml",), probe_libs={"nvml": ""}),
        BadValue,
        "probe_libs['nvml'] must be a module name",
    ),
    ("rss pid str", lambda: memory_peak.get_memory_rss("1"), BadType, "pid must be an int"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(
    ("call", "exc", "words"),
    [pytest.param(call, exc, words, id=name) for name, call, exc, words in LIBRARY_CASES],
)
def test_library_bad_inputs_name_the_parameter(
    call: Callable[[], Any], exc: type, words: str
) -> None:
    # WHEN the entry point gets a bad value THEN the family's error names it, before any spy
    with pytest.raises(exc) as info:
        call()
    assert words in str(info.value)
    assert isinstance(info.value, MonitoringError)
    # AND the existing spelling of the catch keeps working
    assert isinstance(info.value, ValueError if exc is BadValue else TypeError)


def test_a_nan_never_reaches_the_peak() -> None:
    # GIVEN a monitor fed with good values, then refused a NaN
    mon = _fed()
    with pytest.raises(BadValue):
        mon.update(math.nan)
    # THEN its figures are those of the good values
    assert (mon.max_peak, mon.n_measures, mon.end) == (5.0, 1, 5.0)


# --- errors raised in the spy process arrive as their class -----------------------------


@pytest.fixture
def failing_probe() -> Iterator[str]:
    memory_peak.register_probe("failing", "fakes:FailingProbe")
    try:
        yield "failing"
    finally:
        registry.unregister("failing")


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
@pytest.mark.parametrize(
    ("setting", "exc", "words"),
    [
        ("open:BadValue", BadValue, "BadValue from the probe"),
        ("open:MissingDependencyError", ImportError, "MissingDependencyError from the probe"),
        ("open:SubSpyError", SpyError, "a vendor's own kind of spy error"),
        ("read:TargetGone", TargetGone, "TargetGone from the probe"),
        ("read:BadType", BadType, "BadType from the probe"),
        ("read:ClockError", RuntimeError, "ClockError from the probe"),
    ],
)
def test_errors_of_the_family_cross_the_spy_pipe_as_their_class(
    failing_probe: str, monkeypatch: pytest.MonkeyPatch, setting: str, exc: type, words: str
) -> None:
    # GIVEN a probe raising an error of the family in the spy process, at open or at a tick
    monkeypatch.setenv("FAKE_PROBE_ERROR", setting)
    # WHEN a real spy runs it THEN the parent raises that class (or its family ancestor)
    with pytest.raises(exc, match=words) as info:
        start_spying_on(probes=(failing_probe,)).stop()
    assert isinstance(info.value, MonitoringError)
    name = setting.partition(":")[2]
    expected = "SpyError" if name == "SubSpyError" else name
    assert type(info.value).__name__ == expected


@pytest.mark.slow
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_probe_reading_nan_is_skipped_not_poisoning(
    failing_probe: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a probe whose channel reads NaN at every tick
    monkeypatch.setenv("FAKE_PROBE_ERROR", "")
    stat = start_spying_on(probes=(failing_probe,)).stop()
    # THEN its monitor has no measure and the CPU's figures are sound
    (mon,) = stat["bad_gpus"]
    assert mon.n_measures == 0 and math.isfinite(stat["cpu"].max_peak)
