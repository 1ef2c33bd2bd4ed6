"""The one error family and the shared argument checks."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from onnxrt_backend_dev.monitoring import _errors, _validate
from onnxrt_backend_dev.monitoring._errors import (
    BadType,
    BadValue,
    ClockError,
    MonitoringError,
    SpyError,
    TargetGone,
)


def test_every_error_is_a_monitoring_error_and_keeps_its_builtin_meaning() -> None:
    for cls in _errors.BY_NAME.values():
        assert issubclass(cls, MonitoringError)
    assert issubclass(BadValue, ValueError) and issubclass(BadType, TypeError)
    assert issubclass(ClockError, RuntimeError) and issubclass(SpyError, RuntimeError)
    from onnxrt_backend_dev.monitoring._cli.common import CommandError
    from onnxrt_backend_dev.monitoring._optional import MissingDependencyError
    from onnxrt_backend_dev.monitoring._profiling.load import ProfileFormatError
    from onnxrt_backend_dev.monitoring.benchmark import ClockError as FaceClockError

    assert FaceClockError is ClockError
    for cls in (CommandError, MissingDependencyError, ProfileFormatError):
        assert issubclass(cls, MonitoringError)
    assert issubclass(MissingDependencyError, ImportError)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("TargetGone", TargetGone),
        ("BadValue", BadValue),
        ("ValueError", ValueError),
        ("PermissionError", PermissionError),
        ("ProcessLookupError", ProcessLookupError),
    ],
)
def test_an_error_sent_by_name_comes_back_as_its_class(name: str, expected: type) -> None:
    error = _errors.rebuild(name, "what happened")
    assert type(error) is expected and str(error) == "what happened"


@pytest.mark.parametrize("name", ["NoSuchError", "UnicodeDecodeError", "int", "SystemExit"])
def test_an_unknown_or_odd_name_becomes_a_spy_error_naming_it(name: str) -> None:
    error = _errors.rebuild(name, "boom")
    assert type(error) is SpyError and str(error) == f"{name}: boom"


@pytest.mark.parametrize(
    ("check", "value", "error", "message"),
    [
        (lambda v: _validate.check_bool("flag", v), "no", BadType, "flag must be a bool"),
        (lambda v: _validate.check_bool("flag", v), 1, BadType, "got int"),
        (lambda v: _validate.check_int("repeat", v, 1), 0, BadValue, "repeat must be >= 1, got 0"),
        (lambda v: _validate.check_int("repeat", v, 1), 2.0, BadType, "repeat must be an int"),
        (lambda v: _validate.check_int("repeat", v, 1), True, BadType, "got bool"),
        (lambda v: _validate.check_int("n", v, 0, 9), 10, BadValue, "n must be <= 9, got 10"),
        (lambda v: _validate.check_number("delay", v, above=0), 0, BadValue, "delay must be > 0"),
        (lambda v: _validate.check_number("delay", v), math.nan, BadValue, "finite number"),
        (lambda v: _validate.check_number("delay", v), math.inf, BadValue, "got inf"),
        (lambda v: _validate.check_number("delay", v), "1", BadType, "delay must be a number"),
        (lambda v: _validate.check_number("delay", v), False, BadType, "got bool"),
        (lambda v: _validate.check_number("x", v, maximum=1), 2, BadValue, "x must be <= 1"),
        (lambda v: _validate.check_number("x", v, minimum=1), 0.5, BadValue, "x must be >= 1"),
        (lambda v: _validate.check_callable("f", v), 5, BadType, "f must be a callable, got int"),
        (lambda v: _validate.check_str("t", v, optional=True), 5, BadType, "t must be a str or"),
        (lambda v: _validate.check_choice("unit", v, ["s", "ms"]), "MiB", BadValue, "'s', 'ms'"),
        (lambda v: _validate.check_choice("unit", v, {"s": 1}), [], BadValue, "got []"),
    ],
)
def test_checks_name_the_parameter_the_value_and_the_rule(
    check: object, value: object, error: type, message: str
) -> None:
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        check(value)  # type: ignore[operator]


def test_checks_return_what_passes() -> None:
    assert _validate.check_number("x", Fraction(1, 2), above=0) == 0.5
    assert _validate.check_int("x", 3, 1) == 3
    assert _validate.check_callable("f", None, optional=True) is None
    assert _validate.check_choice("u", "s", ("s",)) == "s"
