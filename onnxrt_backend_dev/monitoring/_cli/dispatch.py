"""Command line: ``python -m onnxrt_backend_dev.monitoring <command>``.

Each subcommand is a small class in its own ``cmd_<name>.py`` module exposing
``COMMAND``; it declares its options in ``prepare_parser`` and does its work in
``run``, writing to the given streams. Heavy imports stay inside ``run`` so that
``--help`` is instant. :func:`main` turns user mistakes into one line on stderr
and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from ... import __version__
from .._optional import MissingDependencyError
from .common import EXIT_ERROR, EXIT_USAGE, Command, CommandError

# Subcommand name -> module holding its COMMAND; the order is the one shown by --help.
_COMMAND_MODULES: dict[str, str] = {
    "demo": ".cmd_demo",
    "time": ".cmd_time",
    "spy": ".cmd_spy",
    "profile": ".cmd_profile",
}


def _load_commands() -> list[Command]:
    commands = []
    for name, module in _COMMAND_MODULES.items():
        command: Command = importlib.import_module(module, __package__).COMMAND
        assert command.name == name, (command.name, name)
        commands.append(command)
    return commands


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """Builds the parser with one sub-parser per command.

    :return: the parser and the commands by name
    """
    parser = argparse.ArgumentParser(
        prog="python -m onnxrt_backend_dev.monitoring",
        description="Time, memory and profile monitoring for Python code.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands: dict[str, Command] = {}
    for command in _load_commands():
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.prepare_parser(p)
        commands[command.name] = command
    return parser, commands


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


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Runs the command line.

    :param argv: arguments without the program name, ``sys.argv[1:]`` if None
    :param out: stream for results, ``sys.stdout`` if None
    :param err: stream for errors and status, ``sys.stderr`` if None
    :return: the exit code
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    parser, commands = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as e:  # --help, --version or a usage error, already written
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help(out)
        return EXIT_USAGE
    try:
        return commands[args.command].run(args, out, err)
    except BrokenPipeError:
        # The reader went away (``... | head``): stop quietly, as cat does.
        _discard_rest(out)
        return EXIT_ERROR
    except CommandError as e:
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
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
