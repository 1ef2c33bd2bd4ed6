"""Checks of arguments at the boundary, shared by every entry point: each names the
parameter, its value and the rule in a :class:`BadType` or :class:`BadValue`. A bool is
never taken for a number, NaN never passes a bound, a string never passes for a bool.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from ._errors import BadType, BadValue


def check_bool(name: str, value: Any) -> bool:
    """``value`` must be a bool (``'no'`` or ``1`` are refused: they read as True).

    :param name: the parameter's name, for the message
    :param value: what the caller passed
    :return: the value
    """
    if not isinstance(value, bool):
        raise BadType(f"{name} must be a bool (True or False), got {type(value).__name__}")
    return value


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` must be an int (numpy integers too, not a bool or a float) in bounds.

    :param name: the parameter's name, for the message
    :param value: what the caller passed
    :param minimum: the smallest value allowed, None for no bound
    :param maximum: the largest value allowed, None for no bound
    :return: the value as an int
    """
    if isinstance(value, bool):
        raise BadType(f"{name} must be an int, got bool")
    try:
        number = operator.index(value)
    except TypeError:
        raise BadType(f"{name} must be an int, got {type(value).__name__}") from None
    if minimum is not None and number < minimum:
        raise BadValue(f"{name} must be >= {minimum}, got {value!r}")
    if maximum is not None and number > maximum:
        raise BadValue(f"{name} must be <= {maximum}, got {value!r}")
    return number


def check_number(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
) -> float:
    """``value`` must be a finite real number (not a bool, NaN or infinity) in bounds.

    :param name: the parameter's name, for the message
    :param value: what the caller passed
    :param minimum: the smallest value allowed (inclusive), None for no bound
    :param above: a value it must be strictly greater than, None for no bound
    :param maximum: the largest value allowed (inclusive), None for no bound
    :return: the value as a float
    """
    if isinstance(value, bool) or (not isinstance(value, (int, float)) and not _is_real(value)):
        raise BadType(f"{name} must be a number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise BadValue(f"{name} must be a finite number, got {value!r}")
    if minimum is not None and number < minimum:
        raise BadValue(f"{name} must be >= {minimum:g}, got {value!r}")
    if above is not None and number <= above:
        raise BadValue(f"{name} must be > {above:g}, got {value!r}")
    if maximum is not None and number > maximum:
        raise BadValue(f"{name} must be <= {maximum:g}, got {value!r}")
    return number


def _is_real(value: Any) -> bool:
    # numpy floats and ints, Fraction, Decimal: anything float() takes without a string.
    if isinstance(value, (str, bytes)):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def check_callable(name: str, value: Any, *, optional: bool = False) -> Any:
    """``value`` must be callable (or None when ``optional``).

    :param name: the parameter's name, for the message
    :param value: what the caller passed
    :param optional: None is allowed
    :return: the value
    """
    return _check_kind(name, value, callable(value), "a callable", optional)


def check_str(name: str, value: Any, *, optional: bool = False) -> Any:
    """``value`` must be a str (or None when ``optional``), with the parameters of
    :func:`check_callable`."""
    return _check_kind(name, value, isinstance(value, str), "a str", optional)


def _check_kind(name: str, value: Any, ok: bool, kind: str, optional: bool) -> Any:
    if ok or (value is None and optional):
        return value
    allowed = f"{kind} or None" if optional else kind
    raise BadType(f"{name} must be {allowed}, got {type(value).__name__}")


def check_choice(name: str, value: Any, choices: Any) -> Any:
    """``value`` must be one of ``choices``.

    :param name: the parameter's name, for the message
    :param value: what the caller passed
    :param choices: the values allowed (a sequence or a mapping's keys)
    :return: the value
    """
    allowed = list(choices)
    try:
        ok = value in allowed
    except TypeError:  # an unhashable value against a dict's keys
        ok = False
    if not ok:
        raise BadValue(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def checked_text_function(name: str, function: Any) -> Any:
    """``function`` (a callable of one str, None for the identity) wrapped so that what it
    returns is checked to be a str.

    :param name: the parameter's name, for the message (``clean_text``)
    :param function: what the caller passed
    :return: a function of one str returning a str
    """
    if function is None:
        return lambda text: text
    check_callable(name, function)

    def call(text: str) -> str:
        result = function(text)
        if not isinstance(result, str):
            raise BadType(
                f"{name} must return a str, got {type(result).__name__} for {text[:80]!r}"
            )
        return result

    return call
