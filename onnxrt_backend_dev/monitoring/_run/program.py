"""Running a Python program in this process, as ``python script.py`` or ``python -m
module`` would (``profile``, ``spy --where``, ``run``'s child, the sampled runs' child):
only the standard library here, as every import counts in the program's memory."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple, NoReturn, TextIO

from .._errors import CommandError, Terminated


def _usage(message: str) -> CommandError:
    """A usage error (exit 2)."""
    return CommandError(message, 2)


@contextmanager
def as_main(module: types.ModuleType, argv: list[str], path0: str) -> Iterator[None]:
    """Installs ``module`` as ``__main__`` with ``argv`` and ``sys.path[0]``, restored
    afterwards whatever happens."""
    saved = sys.argv, sys.path[0] if sys.path else None, sys.modules.get("__main__")
    sys.argv = argv
    if sys.path:
        sys.path[0] = path0
    else:
        sys.path.append(path0)
    sys.modules["__main__"] = module
    try:
        yield
    finally:
        sys.argv = saved[0]
        if saved[1] is not None:
            sys.path[0] = saved[1]
        if saved[2] is not None:
            sys.modules["__main__"] = saved[2]


@contextmanager
def before_os_exit(callback: Callable[[int], None]) -> Iterator[None]:
    """Calls ``callback(code)`` when the program calls ``os._exit`` (no unwinding: the
    profile can still be written); in a forked child it exits as usual.

    :param callback: what to do first, given the exit code
    """
    real = os._exit
    pid = os.getpid()

    def _exit(code: int) -> NoReturn:
        try:
            if os.getpid() == pid:
                callback(code)
        finally:
            real(code)

    setattr(os, "_exit", _exit)  # noqa: B010 -- mypy refuses assigning a function
    try:
        yield
    finally:
        setattr(os, "_exit", real)  # noqa: B010


def script_code(path: str) -> tuple[types.CodeType, types.ModuleType, list[str], str]:
    """Compiles a script, or the ``__main__.py`` of a folder, the way ``python PATH``
    does: ``__file__`` is absolute and ``sys.path[0]`` is the script's folder. The code
    keeps the path as given, so the profile shows it as ``python -m cProfile`` does."""
    folder = os.path.isdir(path)
    given = os.path.join(path, "__main__.py") if folder else path
    if not os.path.isfile(given):
        what = "folder has no __main__.py" if folder else "script not found"
        raise _usage(f"{what}: {path!r}")
    with open(given, "rb") as f:
        source = f.read()
    code = compile(source, given, "exec")
    module = types.ModuleType("__main__")
    module.__file__ = os.path.abspath(given)
    return code, module, [path], os.path.dirname(module.__file__)


def module_code(name: str) -> tuple[types.CodeType, types.ModuleType, list[str], str]:
    import importlib
    import importlib.util

    importlib.invalidate_caches()  # a module written since the last import is found
    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(name + ".__main__")
            if spec is None:
                raise _usage(f"{name!r} is a package and has no __main__ module: it cannot be run")
    except (ImportError, ValueError) as e:
        raise _usage(f"cannot find module {name!r}: {e}") from e
    if spec is None:
        raise _usage(f"no module named {name!r}")
    get_code = getattr(spec.loader, "get_code", None)
    code = get_code(spec.name) if get_code is not None else None
    if code is None and spec.origin and os.path.isfile(spec.origin):
        # Import hooks (pytest's, for one) may not expose get_code: read the source.
        code = script_code(spec.origin)[0]
    if code is None:
        raise _usage(f"module {name!r} has no code to run")
    module = types.ModuleType("__main__")
    module.__file__ = spec.origin
    module.__spec__ = spec
    module.__package__ = spec.parent
    module.__loader__ = spec.loader
    return code, module, [spec.origin or name], os.getcwd()


def exit_code(e: SystemExit, err: TextIO) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    err.write(f"{e.code}\n")
    return 1


def report_raised(name: str, failure: BaseException, err: TextIO) -> int:
    """Reports an exception the program raised: its traceback (without this tool's
    frame), then one line naming it.

    :param name: the program's name
    :param failure: the exception
    :param err: the error stream
    :return: the exit code, 1
    """
    import traceback

    tb = failure.__traceback__
    lines = traceback.format_exception(type(failure), failure, tb.tb_next if tb else None)
    err.write("".join(lines))
    err.write(f"error: {name} raised {type(failure).__name__}: {failure}\n")
    return 1


class Outcome(NamedTuple):
    """How a program run as ``__main__`` ended.

    :param kind: ``exit``, ``interrupted``, ``signal`` or ``exception``
    :param code: the exit code
    :param detail: one sentence
    """

    kind: str
    code: int
    detail: str


def run_main(code: types.CodeType, module: types.ModuleType, name: str, err: TextIO) -> Outcome:
    """Runs a program's code in its ``__main__`` module (see :func:`as_main`), every way
    it can end caught.

    :param code: its code
    :param module: its ``__main__`` module
    :param name: its name in error messages
    :param err: where its traceback goes
    :return: how it ended
    """
    try:
        exec(code, module.__dict__)
    except SystemExit as e:
        rc = exit_code(e, err)
        return Outcome("exit", rc, f"exited with code {rc}")
    except KeyboardInterrupt:
        return Outcome("interrupted", 130, "interrupted (SIGINT)")
    except Terminated as e:
        return Outcome("signal", 128 + e.signum, f"stopped: {e}")
    except BaseException as e:
        report_raised(name, e, err)
        what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        return Outcome("exception", 1, f"raised {what}")
    return Outcome("exit", 0, "exited with code 0")
