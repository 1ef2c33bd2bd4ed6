"""The one program harness, and the program's side.

The program a command runs (:class:`Target`: a script, a ``-m`` module or a command, with
its arguments), its checks and their one-line errors, its command lines; the command's
one supervisor (:func:`supervised`), a child run to its end under it (:func:`run_child`:
its own process group, a timeout and the kill path of :mod:`.supervise`, the last line
of its standard error kept for a message), the rounds of repeated runs
(:func:`run_rounds`) and the line saying a signal cut them short (:func:`say_stopped`).

The program's side: a Python program run in this process as ``python script.py`` or
``python -m module`` would (``profile``, ``spy --where``, ``run``'s child, the sampled
runs' child). Only the standard library at the top here, the supervision imported where
used: every import counts in the program's memory.
"""

from __future__ import annotations

import os
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, TextIO

from .._errors import CommandError, Terminated, signal_name

if TYPE_CHECKING:
    from .supervise import Exit, Supervisor

# Characters of the last line of a failed child's standard error kept for its message.
TAIL = 300


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


class Target(NamedTuple):
    """The program a command runs, or the running process it reads (``--pid``).

    :param kind: ``script`` (or a folder), ``module`` (``-m``), ``command`` or ``pid``
    :param name: the script, the module, the command or the process id
    :param args: its arguments
    """

    kind: str
    name: str
    args: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        """Its name in a report: ``-m mod``, the script, the command line or ``process
        PID``."""
        if self.kind == "module":
            return f"-m {self.name}"
        if self.kind == "pid":
            return f"process {self.name}"
        return self.name if self.kind == "script" else " ".join([self.name, *self.args])

    @property
    def python(self) -> bool:
        """Whether it is Python code this tool starts (a script or a module)."""
        return self.kind in ("script", "module")

    def argv(self, head: Sequence[str] = ()) -> list[str]:
        """Its command line: ``head`` (what runs it), ``-m`` for a module, its name, its
        arguments.

        :param head: an interpreter and its flags, this tool's command... (none for a
            command, which is its own words)
        """
        module = ["-m"] if self.kind == "module" else []
        return [*head, *module, self.name, *self.args]

    def fresh(self) -> list[str]:
        """Its command line in a fresh interpreter: this one with its flags (``-X``,
        ``-W``, ``-O``) for Python code; a command as given."""
        import subprocess

        if not self.python:
            return self.argv()
        # What multiprocessing passes to its own fresh interpreters (spawn).
        flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
        if self.kind == "script" and self.name.startswith("-"):
            # A name starting with "-" would be one of Python's options ("-dash.py").
            return self._replace(name=os.path.join(".", self.name)).argv([sys.executable, *flags])
        return self.argv([sys.executable, *flags])

    def code(self) -> tuple[types.CodeType, types.ModuleType, list[str], str]:
        """Its code, ``__main__`` module, ``sys.argv`` and ``sys.path[0]``, to run it as
        ``__main__`` in this process (:func:`script_code`, :func:`module_code`).

        :raises CommandError: a missing script or module, exit 2
        """
        found = module_code(self.name) if self.kind == "module" else script_code(self.name)
        return found[0], found[1], found[2] + list(self.args), found[3]

    def check(self) -> str | None:
        """Refuses a program that cannot run, before anything starts: a missing script
        or module (exit 2), a command not found (127) or not executable (126).

        :return: the script's path as its code names it, None for a module or a command
        """
        if self.kind == "command":
            from .supervise import check_command

            check_command(self.name)
            return None
        code = self.code()[0]
        return str(code.co_filename) if self.kind == "script" else None


def target_of(args: Any, commands: bool = False, missing: str = "") -> Target | None:
    """The program of a command's parsed arguments (``-m``, a script, ``-- COMMAND``,
    ``--pid``); the options that would be ignored with it refused (exit 2).

    :param args: with ``module``, ``target``, ``args``, and ``pid``, ``duration`` and
        ``repeat`` where the command has them
    :param commands: a target that is not Python is a command (``run``), not a script
    :param missing: the usage error (exit 2) when none was given, empty for none
    :return: the program, None when none was given
    :raises CommandError: an option that would be ignored, or none was given and
        ``missing`` says so
    """
    pid = getattr(args, "pid", None)
    if getattr(args, "duration", None) is not None and pid is None:
        raise _usage("--duration is for --pid PID (stop after that many seconds); a program "
                     "started here runs to its end")  # fmt: skip
    if pid is not None:
        if getattr(args, "repeat", None) is not None:
            raise _usage("--repeat runs the program anew: it cannot repeat --pid")
        if args.target is not None or args.module:
            raise _usage("--pid profiles a running process: give no script")
        return Target("pid", str(pid))
    if args.module:
        return Target("module", args.module[0], tuple(args.module[1:]))
    if args.target is None:
        if missing:
            raise _usage(missing)
        return None
    # ``run`` runs a script or a folder with a ``__main__.py`` as Python, else a command.
    script = not commands or args.target.endswith((".py", ".pyw")) or os.path.isdir(args.target)
    return Target("script" if script else "command", args.target, tuple(args.args))


@contextmanager
def supervised(
    supervisor: Supervisor | None = None, grace: float | None = None, janitor: bool = True
) -> Iterator[Supervisor]:
    """The command's one supervisor: the caller's, or one entered for the time of the
    ``with`` block (SIGINT, SIGTERM and SIGHUP forwarded to the children).

    :param supervisor: the caller's, None for a new one
    :param grace: a new one's seconds between a forwarded signal and SIGKILL, None for
        :data:`.supervise.GRACE`
    :param janitor: a new one starts the janitor
    :return: the supervisor
    """
    from .supervise import GRACE, Supervisor

    if supervisor is not None:
        yield supervisor
        return
    with Supervisor(grace=GRACE if grace is None else grace, janitor=janitor) as sup:
        yield sup


def last_line(path: str) -> str:
    """The end of the last line of a child's standard error, for a message.

    :param path: the file it was written to
    """
    try:
        with open(path, "rb") as f:
            f.seek(max(os.path.getsize(path) - 4096, 0))
            text = f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""
    last = text.splitlines()[-1] if text else ""
    return last[-TAIL:]


def run_child(
    sup: Supervisor,
    argv: Sequence[str],
    errors: str | None = None,
    timeout: float | None = None,
    show_output: bool = False,
    **popen: Any,
) -> Exit | None:
    """Runs a command to its end in a process group of its own under ``sup``, ended
    past ``timeout``.

    :param sup: the command's supervisor, entered
    :param argv: the command line
    :param errors: the file its standard error goes to (unless shown), None for none
    :param timeout: seconds before it is ended, None for no limit
    :param show_output: its input and output this process's, else none and ``errors``
    :param popen: more of :meth:`.supervise.Supervisor.start`'s options (``cwd``,
        ``env``, ``group``: a group of its own by default)
    :return: its exit (``timed_out`` when the timeout ended it), None when a signal
        stopped the command
    :raises CommandNotFound: the command cannot be run (127, 126)
    """
    import subprocess

    if sup.stopped is not None:
        return None
    quiet = subprocess.DEVNULL if not show_output else None
    popen.setdefault("group", True)
    with open(errors or os.devnull, "wb") as err:
        child = sup.start(argv, stdin=quiet, stdout=quiet, stderr=err if quiet else None,
                          **popen)  # fmt: skip
        ended = sup.wait(child, timeout)
    return None if sup.stopped is not None else ended


def run_rounds(
    run_one: Callable[[int, int], bool],
    rounds: int,
    sides: int = 1,
    max_time: float | None = None,
    on_run: Callable[[int, int], None] | None = None,
) -> bool:
    """Runs rounds of one run of each side (A B A B ...), so that a drift of the machine
    weighs on all of them alike.

    :param run_one: runs side ``i`` in round ``r``; False when a signal stopped it
    :param rounds: rounds at most
    :param sides: runs in a round
    :param max_time: start no round after this many seconds (two rounds at least)
    :param on_run: called with (round, side) after each run
    :return: False when a signal stopped the runs
    """
    start = time.monotonic()
    for r in range(rounds):
        if max_time is not None and r >= 2 and time.monotonic() - start >= max_time:
            break
        for i in range(sides):
            if not run_one(r, i):
                return False
            if on_run is not None:
                on_run(r, i)
    return True


def say_stopped(err: TextIO, what: str, signum: int, done: int) -> None:
    """Says, even with ``-q``, that a signal cut the runs short.

    :param err: the error stream
    :param what: the command and option (``run --repeat``)
    :param signum: the signal
    :param done: the runs that ended
    """
    runs = f"the {done} run(s) done" if done else "no run ended"
    err.write(f"{what}: stopped by {signal_name(signum)}: {runs}\n")
