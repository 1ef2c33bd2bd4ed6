"""The environment a result was measured in: Python, the platform, the CPU model, this
package's version and the git commit of the folder, when it is in a repository."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Any

from ... import __version__

# git may hang on a network file system or a lock: the commit is a nicety, not a must.
GIT_TIMEOUT = 2.0


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), else :mod:`platform`'s, or ``""``.

    :param cpuinfo: the file to read, for tests
    """
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "Processor"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or ""


def git_commit(folder: str | None = None, timeout: float = GIT_TIMEOUT) -> str | None:
    """The commit checked out in ``folder``, None outside a repository, without git, or
    when git does not answer within ``timeout`` seconds.

    :param folder: where to ask
    :param timeout: seconds
    """
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    commit = done.stdout.strip()
    ok = done.returncode == 0 and len(commit) == 40
    return commit if ok and all(c in "0123456789abcdef" for c in commit) else None


def capture(folder: str | None = None) -> dict[str, Any]:
    """The environment as a JSON-ready dictionary.

    :param folder: the folder whose git commit is recorded (the current one by default)
    :return: ``python``, ``implementation``, ``executable``, ``platform``, ``machine``,
        ``cpu``, ``cpu_count``, ``package_version``, ``git_commit``
    """
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count() or 0,
        "package_version": __version__,
        "git_commit": git_commit(folder),
    }
