"""One family of errors for the whole package, every exception class of which is defined
here (``tests/test_errors.py`` checks the source).

Every error raised on purpose derives from :class:`MonitoringError`; a mistake of the
caller's is *also* a :class:`ValueError` or a :class:`TypeError` (:class:`BadValue`,
:class:`BadType`), so ``except ValueError`` keeps working. The spy process sends its
errors back by name (:func:`rebuild`). :class:`Terminated` stays a
:class:`BaseException`, as :class:`KeyboardInterrupt`, so that ``except Exception`` in
the user's code does not swallow it.
"""

from __future__ import annotations

import builtins
import signal


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


class StateError(MonitoringError, RuntimeError):
    """An object used out of its order or place: ``stop()`` before ``start()``, a timer
    that another tool holds, a profiler already running."""


class ProbeError(MonitoringError, RuntimeError):
    """A device probe cannot be used: its library is missing or broken, it sees no
    device, its registered class is not a probe."""


class BadData(MonitoringError, ValueError):
    """Data read from another process or a file has not the shape it must have (the
    report's stream, a curve): refused, never trusted."""


class CommandError(MonitoringError):
    """A user mistake or a failure of a command, reported as one line with an exit code.

    :param message: the line
    :param exit_code: the command's exit code (1 errors, 2 usage, 126/127 a command that
        cannot be run, as a shell says)
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class CommandNotFound(CommandError):
    """A command to run does not exist (exit code 127) or cannot be run (126)."""


class ReaderGone(CommandError):
    """The reader of the standard output went away (``... | head``)."""


class OutputFailed(CommandError):
    """The standard output could not be written (full, closed by the system)."""


class RunFailed(MonitoringError):
    """A run of a program failed: it exited with an error, or ran past its timeout."""


class CounterError(MonitoringError, RuntimeError):
    """The counter cannot count here: valgrind is missing, was killed or ran out of
    memory, the program forked, or its interpreter cannot be counted as asked. The
    message says what to do.

    :param message: the line
    :param usage: the cause is the caller's input or the machine (a command exits 2), not
        a run that failed (exit 1)
    """

    def __init__(self, message: str, usage: bool = True) -> None:
        super().__init__(message)
        self.usage = usage


class ElfError(MonitoringError):
    """The file is not an ELF file the observer's reader understands (or it is cut
    short)."""


class LayoutError(MonitoringError):
    """No layout for this interpreter (its version, its build), with the reason."""


class WalkerFault(MonitoringError, RuntimeError):
    """The observer's C walk faulted (a bug of its own, caught while it walked): the
    observer drops it and reads on with its Python reader, saying so."""


class ReadError(MonitoringError):
    """A read of the other process failed (unmapped, freed, or the process is gone);
    the observer's reader turns it into a dropped or partial sample.

    :param address: where the read started
    :param size: bytes asked for
    :param why: the reason
    """

    def __init__(self, address: int, size: int, why: str) -> None:
        super().__init__(f"cannot read {size} bytes at {address:#x}: {why}")
        self.address = address
        self.size = size
        self.why = why


class RingError(MonitoringError):
    """What is at the allocation ring's address is not a ring this reader understands.

    :param message: what is wrong
    :param starting: the ring is still blank (the shim has not started yet: read again)
    """

    def __init__(self, message: str, starting: bool = False) -> None:
        super().__init__(message)
        self.starting = starting


class Stopped(MonitoringError):
    """A signal (SIGINT, SIGTERM, SIGHUP) stopped a long work early; what was done is
    kept for the caller to write.

    :param signum: the signal
    :param done: what was done (its shape is the raiser's to say)
    """

    def __init__(self, signum: int, done: object = None) -> None:
        super().__init__(f"stopped by {signal_name(signum)}")
        self.signum = signum
        self.done = done


class Terminated(BaseException):
    """Raised in a program run in this process when the command receives SIGTERM or
    SIGHUP (see the module's docstring).

    :param signum: the signal received
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by {signal_name(signum)}")
        self.signum = signum


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15; ``signal 99`` for a number without a name.

    :param signum: a signal number
    :return: its name
    """
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


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
    StateError,
    ProbeError,
    BadData,
    RunFailed,
    CounterError,
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
