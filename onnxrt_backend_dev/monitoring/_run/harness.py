"""The one program harness: every program a command measures is named and started here.

What the program is (:class:`Target`: a script, a ``-m`` module or a command, with its
arguments), its checks and their one-line errors, its command line; the command's one
supervisor (:func:`supervised`), a child run to its end under it (:func:`run_child`: its
own process group, a timeout and the kill path of :mod:`.supervise`, the last line of its
standard error kept for a message), the rounds of repeated runs (:func:`run_rounds`) and the
line saying that a signal cut them short (:func:`say_stopped`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from types import CodeType, ModuleType
from typing import Any, NamedTuple, TextIO

from .._errors import CommandError
from .supervise import GRACE, Exit, Supervisor, check_command

# Characters of the last line of a failed child's standard error kept for its message.
TAIL = 300


class Target(NamedTuple):
    """The program a command runs.

    :param kind: ``script`` (or a folder), ``module`` (``-m``) or ``command``
    :param name: the script, the module or the command
    :param args: its arguments
    """

    kind: str
    name: str
    args: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        """Its name in a report: ``-m mod``, the script, or the command line."""
        if self.kind == "module":
            return f"-m {self.name}"
        return self.name if self.kind == "script" else " ".join([self.name, *self.args])

    @property
    def python(self) -> bool:
        """Whether it is Python code (a script or a module), not a command."""
        return self.kind != "command"

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
        if not self.python:
            return self.argv()
        # What multiprocessing passes to its own fresh interpreters (spawn).
        flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
        if self.kind == "script" and self.name.startswith("-"):
            # A name starting with "-" would be one of Python's options ("-dash.py").
            return self._replace(name=os.path.join(".", self.name)).argv([sys.executable, *flags])
        return self.argv([sys.executable, *flags])

    def code(self) -> tuple[CodeType, ModuleType, list[str], str]:
        """Its code, ``__main__`` module, ``sys.argv`` and ``sys.path[0]``, to run it as
        ``__main__`` in this process (:mod:`.program`).

        :raises CommandError: a missing script or module, exit 2
        """
        from .program import module_code, script_code

        found = module_code(self.name) if self.kind == "module" else script_code(self.name)
        return found[0], found[1], found[2] + list(self.args), found[3]

    def check(self) -> str | None:
        """Refuses a program that cannot run, before anything starts: a missing script
        or module (exit 2), a command not found (127) or not executable (126).

        :return: the script's path as its code names it, None for a module or a command
        """
        if self.kind == "command":
            check_command(self.name)
            return None
        code = self.code()[0]
        return str(code.co_filename) if self.kind == "script" else None


def target_of(args: Any, commands: bool = False, missing: str = "") -> Target | None:
    """The program of a command's parsed arguments (``-m``, a script, ``-- COMMAND``).

    :param args: with ``module``, ``target`` and ``args``
    :param commands: a target that is not Python is a command (``run``), not a script
    :param missing: the usage error (exit 2) when none was given, empty for none
    :return: the program, None when none was given
    :raises CommandError: none was given and ``missing`` says so
    """
    if args.module:
        return Target("module", args.module[0], tuple(args.module[1:]))
    if args.target is None:
        if missing:
            raise CommandError(missing, 2)
        return None
    # ``run`` runs a script or a folder with a ``__main__.py`` as Python, else a command.
    script = not commands or args.target.endswith((".py", ".pyw")) or os.path.isdir(args.target)
    return Target("script" if script else "command", args.target, tuple(args.args))


@contextlib.contextmanager
def supervised(
    supervisor: Supervisor | None = None, grace: float = GRACE, janitor: bool = True
) -> Iterator[Supervisor]:
    """The command's one supervisor: the caller's, or one entered for the time of the
    ``with`` block (SIGINT, SIGTERM and SIGHUP forwarded to the children).

    :param supervisor: the caller's, None for a new one
    :param grace: a new one's seconds between a forwarded signal and SIGKILL
    :param janitor: a new one starts the janitor
    :return: the supervisor
    """
    if supervisor is not None:
        yield supervisor
        return
    with Supervisor(grace=grace, janitor=janitor) as sup:
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
    from .._errors import signal_name

    runs = f"the {done} run(s) done" if done else "no run ended"
    err.write(f"{what}: stopped by {signal_name(signum)}: {runs}\n")
