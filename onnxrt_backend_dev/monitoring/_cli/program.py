"""Running a Python program in this process, as ``python script.py`` or ``python -m
module`` would: its code, its ``__main__`` module, ``sys.argv`` and ``sys.path[0]``, its
exit code; used by ``profile``, ``spy --where`` and the child of ``run`` (a fresh
interpreter whose every import counts in the program's memory: the command's machinery,
``common`` and its ``argparse``, is imported only to report a usage error)."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn, TextIO

if TYPE_CHECKING:
    import argparse

    from .common import CommandError


def _usage(message: str) -> CommandError:
    """A usage error (exit 2)."""
    from .common import EXIT_USAGE, CommandError

    return CommandError(message, EXIT_USAGE)


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
    """Calls ``callback(code)`` when the program calls ``os._exit``, which ends the process
    at once, without unwinding: the profile can still be written. ``os._exit`` in a forked
    child (multiprocessing's workers) exits as usual.

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
    """Reports an exception the program raised: its traceback (without this tool's frame
    that ran it), then one line naming it.

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


def program_inputs(args: argparse.Namespace) -> list[str]:
    """The files a command reads (the profiles shown, the program and its arguments), which
    its outputs must not overwrite.

    :param args: the parsed arguments of ``profile`` or ``run``
    :return: the paths
    """
    if getattr(args, "files", None) is not None:
        return list(args.files)
    if args.module:
        import importlib.util

        try:
            spec = importlib.util.find_spec(args.module[0])
        except (ImportError, ValueError):
            spec = None  # reported when the module is run
        return [*args.module[1:], *([spec.origin] if spec and spec.origin else [])]
    target = args.target or ""
    return [target, os.path.join(target, "__main__.py"), *args.args]
