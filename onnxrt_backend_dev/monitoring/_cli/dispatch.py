"""Command line: ``python -m onnxrt_backend_dev.monitoring <command>``.

Each subcommand is a small class in its own ``cmd_<name>.py`` module exposing
``COMMAND``; it declares its options in ``prepare_parser`` and does its work in
``run``, writing to the given streams. Heavy imports stay inside ``run`` so that
``--help`` is instant. :func:`main` turns user mistakes into one line on stderr
and a non-zero exit code, never a traceback. The results go to ``out`` through
:class:`GuardedOutput`: a failure of the tool's own output (a closed, full or vanished
standard output) is reported as such, never blamed on the user's code.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import io
import os
import sys
from collections.abc import Collection, Sequence
from typing import Any, TextIO, cast

from ... import __version__
from .._errors import OutputFailed, ReaderGone
from .._optional import MissingDependencyError
from .common import (
    EXIT_CODES_EPILOG,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Command,
    CommandError,
    save_fallback,
    text_writer,
)

# Subcommand name -> the module holding its COMMAND and its one-line help; the order is
# the one shown by --help. The help is kept here so that a run imports only the command it
# runs: each command module pulls its own machinery (about 0.1 s of start-up for all six,
# which a profiled or monitored program would pay on every run).
_COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "demo": (
        ".cmd_demo",
        "run the reference examples (time, memory, profile) and write their pictures",
    ),
    "time": (".cmd_time", "measure how long a Python statement takes (like python -m timeit)"),
    "spy": (
        ".cmd_spy",
        "measure the memory peak of a command or a running process (CPU, and devices with "
        "--probe NAME or --cuda)",
    ),
    "profile": (
        ".cmd_profile",
        "profile a script or module (sampled, or --cprofile) and show its call tree",
    ),
    "compare": (
        ".cmd_compare",
        "compare two saved results (or two programs run interleaved), with significance",
    ),
    "run": (".cmd_run", "run a program once and report its time, memory and GPU on one page"),
    "dump": (
        ".cmd_dump",
        "print every thread's Python stack of a running process now (like py-spy dump)",
    ),
}


def _load_command(name: str) -> Command:
    """Imports the module of command ``name`` and returns its ``COMMAND``."""
    command: Command = importlib.import_module(_COMMAND_MODULES[name][0], __package__).COMMAND
    assert command.name == name, (command.name, name)
    return command


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command a command line runs: its first argument when that names one (the
    program's own options, ``--help`` and ``--version``, take no value), else None.

    :param argv: the arguments without the program name
    :return: the command's name, or None
    """
    if argv and argv[0] in _COMMAND_MODULES:
        return argv[0]
    return None


# How --help and usage errors name the program when it is run with -m (or in process).
MODULE_PROG = "python -m onnxrt_backend_dev.monitoring"


def program_name(argv0: str | None) -> str:
    """The name the program was invoked by, for ``usage:`` lines: the console script's
    name (``onnxrt-monitoring``), or ``python -m onnxrt_backend_dev.monitoring`` when run
    as a module (``argv[0]`` is then the path of ``__main__.py``, or ``-c``/``-m``).

    :param argv0: ``sys.argv[0]``, None when the command line was given in process
    :return: the program's name
    """
    name = os.path.basename(argv0 or "")
    if not name or name.startswith("-") or name.endswith((".py", ".pyc")):
        return MODULE_PROG
    return name


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, its width from the terminal found without ``shutil``:
    argparse makes one per option declared, and the first import of ``shutil`` (for
    its terminal size) cost every command's start about two milliseconds."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:  # fmt: skip
        if width is None:
            width = _columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it (``COLUMNS``, the
    standard output's terminal, else 80)."""
    try:
        return max(int(os.environ.get("COLUMNS", "")), 1)
    except ValueError:
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


def build_parser(
    prog: str = MODULE_PROG, load: Collection[str] | None = None
) -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """Builds the parser with one sub-parser per command.

    :param prog: the program's name in usage lines (see :func:`program_name`)
    :param load: the commands whose module is imported and whose options are declared, all
        if None; the others get a bare sub-parser (enough for the top-level ``--help``),
        none when ``load`` names one command (its run needs no other: each sub-parser
        costs a command's start half a millisecond)
    :return: the parser and the loaded commands by name
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Time, memory and profile monitoring for Python code.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands: dict[str, Command] = {}
    only = load is not None and len(load) == 1
    for name, (_, help_text) in _COMMAND_MODULES.items():
        if only and load is not None and name not in load:
            continue
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=_Formatter)
        if load is not None and name not in load:
            continue
        command = _load_command(name)
        command.prepare_parser(p)
        if p.epilog is None:
            p.epilog = getattr(command, "exit_codes", EXIT_CODES_EPILOG)
        commands[name] = command
    return parser, commands


class GuardedOutput:
    """Wraps the standard output: a write that fails raises :class:`ReaderGone` or
    :class:`OutputFailed`, which are no ``OSError`` (so no command mistakes them for its
    user's code failing), and keeps a copy of what was written, saved elsewhere when the
    output fails.

    :param stream: the output stream
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.copy: list[str] = []

    def _guard(self, error: OSError) -> CommandError:
        if isinstance(error, BrokenPipeError):
            return ReaderGone("the reader of the standard output went away")
        return OutputFailed(f"cannot write the standard output: {error.strerror or error}")

    def write(self, text: str) -> int:
        """Writes ``text``, keeping a copy."""
        self.copy.append(text)
        try:
            return self.stream.write(text)
        except OSError as e:
            raise self._guard(e) from None

    def writelines(self, lines: Sequence[str]) -> None:
        """Writes each line."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flushes the stream (nothing if a profiled program closed it: what the command
        wrote after that went to a duplicate of its descriptor)."""
        if getattr(self.stream, "closed", False):
            return
        try:
            self.stream.flush()
        except OSError as e:
            raise self._guard(e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _QuietErrors(io.TextIOBase):
    """The error stream, best effort: a closed or full stderr must not turn a reported
    error into a traceback (that nobody could read either)."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        if self.stream is not None:
            with contextlib.suppress(OSError, ValueError):
                self.stream.write(text)
        return len(text)

    def flush(self) -> None:
        if self.stream is not None:
            with contextlib.suppress(OSError, ValueError):
                self.stream.flush()

    def isatty(self) -> bool:
        return self.stream is not None and self.stream.isatty()


def _save_copy(guarded: GuardedOutput, error: OutputFailed) -> str:
    """The message of a failed standard output, the output being saved into a file."""
    text = "".join(guarded.copy)
    if not text:
        return str(error)
    try:
        return f"{error}; the output was saved to {save_fallback(text_writer(text), '.txt')!r}"
    except OSError as e:
        return f"{error}; the output could not be saved elsewhere either ({e.strerror or e})"


def _discard_rest(out: TextIO) -> None:
    """Points the file descriptor of ``out`` to the null device after a broken pipe, so
    that Python's final flush of stdout does not fail again at exit ("Exception ignored
    ... BrokenPipeError"), as the Python documentation advises.

    :param out: the output stream whose reader went away
    """
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file (a StringIO in tests): nothing is flushed at exit
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def forget_interrupt() -> None:
    """Clears CPython's mark of a KeyboardInterrupt escaping code run from a string
    (``exec(str)``: dataclasses and namedtuples made while a command imports its
    modules): with ``python -m``, that mark makes the interpreter kill itself with
    SIGINT at exit whatever the exit code returned (-2, not the 130 documented). Each
    run of a string resets it first: one that ends well leaves it clear."""
    with contextlib.suppress(BaseException):
        exec("pass")


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Runs the command line.

    :param argv: arguments without the program name, ``sys.argv[1:]`` if None
    :param out: stream for results, ``sys.stdout`` if None
    :param err: stream for errors and status, ``sys.stderr`` if None
    :return: the exit code
    """
    # Python sets sys.stdout and sys.stderr to None when their descriptor is closed.
    out = sys.stdout if out is None else out
    err = cast(TextIO, _QuietErrors(sys.stderr if err is None else err))
    if out is None:
        err.write("error: the standard output is closed: nothing could be printed\n")
        return EXIT_ERROR
    guarded = GuardedOutput(out)
    try:
        code = _run(argv, cast(TextIO, guarded), err)
        guarded.flush()  # a full output fails here (it is buffered), reported as such
        return code
    except KeyboardInterrupt:
        # Ctrl-C before a command runs (importing the commands, parsing): as in one.
        err.write("interrupted\n")
        return EXIT_INTERRUPTED
    except ReaderGone:
        # The reader went away (``... | head``): stop quietly, as cat does.
        _discard_rest(out)
        return EXIT_ERROR
    except OutputFailed as e:
        _discard_rest(out)  # so that the flush at exit does not fail again
        err.write(f"error: {_save_copy(guarded, e)}\n")
        return EXIT_ERROR
    finally:
        forget_interrupt()


def _run(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    """Parses the arguments and runs the command (see :func:`main`)."""
    # Given in process (tests, a caller), the line is not how the program was invoked.
    invoked = None if argv is not None or not sys.argv else sys.argv[0]
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = chosen_command(argv)
    parser, commands = build_parser(program_name(invoked), [] if chosen is None else [chosen])
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # told by the command's own parser, with the option meant
            _unknown(parser, args.command, unknown)
    except SystemExit as e:  # --help, --version or a usage error, already written
        if sys.stdout is not None:  # argparse writes there and ignores errors
            GuardedOutput(sys.stdout).flush()
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help(out)
        return EXIT_USAGE
    command = commands[args.command]
    code = _run_command(command, args, out, err)
    if invoked is not None and not getattr(command, "user_code_in_process", True):
        # This process ends next and holds nothing of the user's (the program ran in a
        # child): its objects need no collection at exit, where freeing the cycles of the
        # commands' modules and classes took tens of milliseconds after the report.
        gc.freeze()
    return code


def _unknown(parser: argparse.ArgumentParser, command: str | None, unknown: list[str]) -> None:
    """Refuses unknown arguments in the usage of the command given, suggesting the
    option meant (``--intervl``: did you mean ``--interval``?)."""
    import difflib

    sub = parser
    for action in parser._actions:  # the sub-parsers' action: argparse's one way to them
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and command in choices:
            sub = choices[command]
    known = [o for a in sub._actions for o in a.option_strings]
    text = f"unrecognized arguments: {' '.join(unknown)}"
    for word in unknown:
        close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.7)
        if word.startswith("-") and close:
            text += f" (did you mean {close[0]}?)"
            break
    sub.error(text)


def _run_command(command: Command, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Runs a command; its mistakes become one line on ``err`` and an exit code."""
    try:
        return command.run(args, out, err)
    except BrokenPipeError as e:  # from a stream other than ``out``
        raise ReaderGone(str(e)) from None
    except (ReaderGone, OutputFailed):
        raise
    except CommandError as e:
        if isinstance(e.__cause__, BrokenPipeError):  # the user's code printed into it
            raise ReaderGone(str(e)) from None
        err.write(f"error: {e}\n")
        return e.exit_code
    except MissingDependencyError as e:
        err.write(f"error: {e}\n")
        return EXIT_ERROR
    except (ValueError, TypeError, SyntaxError, OSError, RuntimeError) as e:
        # Bad input from the user (a statement, a file, a pid): one line, no traceback.
        err.write(f"error: {type(e).__name__}: {e}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return EXIT_INTERRUPTED
