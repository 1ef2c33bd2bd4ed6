"""The one error family and the shared argument checks."""

from __future__ import annotations

import ast
import builtins
import math
from fractions import Fraction
from pathlib import Path

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


# --- the family, checked on the source ---------------------------------------------------

PACKAGE = Path(_errors.__file__).resolve().parent
# Built-in errors a module raises as such only through a class of the family (a BadValue
# is still a ValueError): their message then names the parameter, its value and the rule.
RAISED_THROUGH_THE_FAMILY = {"ValueError", "TypeError", "RuntimeError"}


def _sources() -> list[tuple[Path, ast.AST]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(PACKAGE.rglob("*.py"))]


def _raised_name(node: ast.Raise) -> str | None:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    if isinstance(exc, ast.Name):
        return exc.id
    if isinstance(exc, ast.Attribute) and isinstance(exc.value, ast.Name):
        return exc.attr if exc.value.id == "builtins" else None
    return None


def _built(node: ast.AST) -> str | None:
    """The built-in error a node raises or builds (``raise X``, ``X(...)`` anywhere: a
    helper returning the error to raise), None otherwise."""
    if isinstance(node, ast.Raise):
        name = _raised_name(node)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
    else:
        return None
    return name if name in RAISED_THROUGH_THE_FAMILY else None


def test_no_module_raises_a_bare_builtin_error() -> None:
    found = sorted(
        {
            f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', 0)} {_built(node)}"
            for path, tree in _sources()
            for node in ast.walk(tree)
            if _built(node)
        }
    )
    assert found == [], "raise these through _errors (BadValue, BadType, ...):\n" + "\n".join(found)


def _base_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def test_every_exception_class_is_defined_in_errors() -> None:
    # The exception classes: the built-ins, and every class deriving from one, anywhere.
    exceptions = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)}
    exceptions = {n for n in exceptions if issubclass(getattr(builtins, n), BaseException)}
    classes = [
        (path, node)
        for path, tree in _sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    ]
    grew = True
    while grew:  # a class deriving from an exception class is one (through any module)
        known = len(exceptions)
        exceptions |= {node.name for _, node in classes if _base_names(node) & exceptions}
        grew = len(exceptions) > known
    outside = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} class {node.name}"
        for path, node in classes
        if node.name in exceptions and path.name != "_errors.py"
    ]
    assert outside == [], "define these in _errors.py:\n" + "\n".join(outside)


def test_the_family_s_classes_keep_their_builtin_meaning() -> None:
    assert issubclass(_errors.StateError, RuntimeError) and issubclass(
        _errors.ProbeError, RuntimeError
    )
    assert issubclass(_errors.BadData, ValueError) and issubclass(
        _errors.CommandNotFound, _errors.CommandError
    )
    assert issubclass(_errors.Terminated, BaseException) and not issubclass(
        _errors.Terminated, Exception
    )
    assert _errors.CommandError("x", 127).exit_code == 127 and _errors.Stopped(15).signum == 15
