"""``python -m onnxrt_backend_dev.monitoring``: the command line."""

import sys

if __name__ == "__main__":
    try:
        from ._cli import main
    except KeyboardInterrupt:  # Ctrl-C while the command line is imported
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one cannot change the code
        sys.stderr.write("interrupted\n")
        exec("pass")  # clears CPython's mark of it (see _cli.dispatch.forget_interrupt)
        sys.exit(130)
    sys.exit(main())
