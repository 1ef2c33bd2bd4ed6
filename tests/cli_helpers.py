"""What the CLI tests share: a fake terminal and an in-process run of ``main``."""

from __future__ import annotations

import io

from onnxrt_backend_dev.monitoring import _cli


class Terminal(io.StringIO):
    """A stream that says it is a terminal, so that live status lines are drawn."""

    def isatty(self) -> bool:
        return True


def run_cli(command: str, *argv: str, err: io.StringIO | None = None) -> tuple[int, str, str]:
    """Runs ``main([command, *argv])`` in process.

    :param command: the subcommand
    :param argv: its arguments
    :param err: the error stream (a new StringIO if None)
    :return: exit code, stdout, stderr
    """
    out = io.StringIO()
    err = io.StringIO() if err is None else err
    code = _cli.main([command, *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()
