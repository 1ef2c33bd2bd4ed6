"""What every subcommand shares: the exit codes, the error to report as one line and
the checks of output paths."""

from __future__ import annotations

import argparse
import os
from typing import Protocol, TextIO

EXIT_USAGE = 2
EXIT_ERROR = 1


class CommandError(Exception):
    """A user mistake or a failure to report as one line, with an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def check_output_path(path: str, option: str) -> None:
    """Refuses an output file that cannot be created, before any long work starts.

    :param path: the file to write
    :param option: the option that named it, for the message (``-o``, ``--json``...)
    :raises CommandError: the path is a folder, its folder does not exist, or the file
        or its folder may not be written
    """
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder):
        raise CommandError(f"cannot write {option} {path!r}: not a file in an existing folder")
    writable = os.access(path, os.W_OK) if os.path.exists(path) else os.access(folder, os.W_OK)
    if not writable:
        raise CommandError(f"cannot write {option} {path!r}: permission denied")


class Command(Protocol):
    """What a subcommand provides."""

    name: str
    help: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        """Adds the subcommand's arguments to ``parser``."""

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        """Runs the subcommand and returns its exit code."""
