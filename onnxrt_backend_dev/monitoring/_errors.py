"""One family of errors for the whole package.

Every error this package raises on purpose derives from :class:`MonitoringError`, so a
caller can catch all of them at once. A mistake of the caller's is *also* a
:class:`ValueError` or a :class:`TypeError` (:class:`BadValue`, :class:`BadType`), so code
written ``except ValueError`` keeps working. The spy process sends its errors back by
name (:data:`BY_NAME`): an error of this family arrives as its own class, a built-in as
itself, anything else as :class:`SpyError` with the original class named in the message.

``guard.Terminated`` (a signal asked the program to stop) stays a :class:`BaseException`,
as :class:`KeyboardInterrupt`: ``except Exception`` in the user's code must not swallow it.
"""

from __future__ import annotations

import builtins


class MonitoringError(Exception):
    """The base of every error this package raises on purpose."""


class BadValue(MonitoringError, ValueError):
    """An argument has the right type but a value outside its rule; the message names the
    parameter, its value and the rule (``repeat must be >= 1, got 0``)."""


class BadType(MonitoringError, TypeError):
    """An argument has the wrong type; the message names the parameter and the type."""


class ClockError(MonitoringError, RuntimeError):
    """The clock cannot time the statement: it went backwards, returned NaN or never
    advanced."""


class SpyError(MonitoringError, RuntimeError):
    """The memory spy could not start, answer or hand its result over."""


class TargetGone(MonitoringError):
    """The spied process ended (or is a zombie)."""


class ObserveError(MonitoringError, RuntimeError):
    """A process cannot be read from outside: it is gone, not Python, of a version or
    build this tool cannot read, or the system refuses (permissions). ``reason`` is one
    word (``gone``, ``zombie``, ``refused``, ``not-python``, ``unsupported``,
    ``unverified``, ``starting``); the message says what to do."""

    def __init__(self, message: str, reason: str = "unsupported") -> None:
        super().__init__(message)
        self.reason = reason


class ProfileFormatError(MonitoringError, ValueError):
    """A profile that cannot be read or does not have the shape of pstats data."""


class ResultFormatError(MonitoringError, ValueError):
    """A saved result that cannot be read, or does not follow its schema."""


class MissingDependencyError(MonitoringError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


# The errors the spy process may report, rebuilt as such in the parent.
_FAMILY: tuple[type[Exception], ...] = (
    MonitoringError,
    BadValue,
    BadType,
    ClockError,
    SpyError,
    TargetGone,
    ObserveError,
    ProfileFormatError,
    ResultFormatError,
    MissingDependencyError,
)
BY_NAME: dict[str, type[Exception]] = {cls.__name__: cls for cls in _FAMILY}


def rebuild(name: str, message: str) -> Exception:
    """Rebuilds an error sent by name from another process.

    :param name: the class name the other process sent
    :param message: its message
    :return: an error of this family or a built-in exception of that name; any other name
        gives a :class:`SpyError` whose message keeps the original class name
    """
    cls = BY_NAME.get(name)
    if cls is None:
        builtin = getattr(builtins, name, None)
        if isinstance(builtin, type) and issubclass(builtin, Exception):
            cls = builtin
    if cls is None:
        return SpyError(f"{name}: {message}")
    try:
        return cls(message)
    except Exception:  # a built-in whose constructor wants more (UnicodeDecodeError)
        return SpyError(f"{name}: {message}")
