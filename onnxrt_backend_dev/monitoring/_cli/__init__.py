"""The command line: :func:`main <.dispatch.main>` and one module per subcommand
(``cmd_<name>.py``); what they share sits in :mod:`.common`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Runs the command line (see :func:`.dispatch.main`); the console script's entry
    point. The dispatcher is imported here, so that Ctrl-C while it loads is an
    interruption (exit 130), not a traceback.

    :param argv: arguments without the program name, ``sys.argv[1:]`` if None
    :param out: stream for results, ``sys.stdout`` if None
    :param err: stream for errors and status, ``sys.stderr`` if None
    :return: the exit code
    """
    try:
        from .dispatch import main as dispatch_main
    except KeyboardInterrupt:
        stream = sys.stderr if err is None else err
        if stream is not None:
            stream.write("interrupted\n")
        return 130
    return dispatch_main(argv, out, err)


__all__ = ["main"]
