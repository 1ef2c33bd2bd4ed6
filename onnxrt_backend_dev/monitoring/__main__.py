"""``python -m onnxrt_backend_dev.monitoring``: the command line."""

import sys

if __name__ == "__main__":
    try:
        from ._cli import main
    except KeyboardInterrupt:  # Ctrl-C while the command line is imported
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    sys.exit(main())
