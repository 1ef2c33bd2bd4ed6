"""``python -m onnxrt_backend_dev.monitoring``: the command line."""

import signal
import sys


def _ignore_late_signals() -> None:
    """The process ends next: a late signal (a second Ctrl-C) cannot change its exit code.
    (Here only: ``main()`` is also called in processes that go on, tests and callers.)"""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)


if __name__ == "__main__":
    try:
        from ._cli import main
    except KeyboardInterrupt:  # Ctrl-C while the command line is imported
        _ignore_late_signals()
        sys.stderr.write("interrupted\n")
        exec("pass")  # clears CPython's mark of it (see _cli.dispatch.forget_interrupt)
        sys.exit(130)
    code = main()
    _ignore_late_signals()
    sys.exit(code)
