"""The one reader of untrusted files (saved results, a baseline given to the pytest
gate): the file's type and size are checked from ``stat`` before it is opened, and again
on the open descriptor, so that a device (``/dev/zero`` never ends), a named pipe
(opening one waits for a writer) or a directory is refused in one line naming the file,
and no more than the cap is ever read.
"""

from __future__ import annotations

import os
import stat

from ._errors import MonitoringError

# What ``stat`` calls the files that are not regular files, for the message.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str | None:
    return next((label for test, label in _KINDS if test(mode)), None)


def read_untrusted(
    path: str | os.PathLike[str],
    what: str,
    max_size: int,
    error: type[MonitoringError] = MonitoringError,
) -> bytes:
    """Reads a whole regular file of at most ``max_size`` bytes.

    :param path: the file
    :param what: what the file should be, for messages (``result``)
    :param max_size: the largest size read, in bytes
    :param error: the error raised (a class of the package's family)
    :return: the bytes
    :raises MonitoringError: of class ``error``, e.g. ``cannot read result 'x.json': it
        is a named pipe (FIFO), not a file``
    """
    name = os.fspath(path)
    where = f"cannot read {what} {name!r}"
    try:
        check_stat(name, what, max_size, error)
        # Non-blocking: a file swapped for a FIFO after the stat must not hang the open.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        fd = os.open(name, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error(f"{where}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{where}: it is {_kind(st.st_mode) or 'not a regular file'}, not a file")
        _check_size(st.st_size, max_size, where, error)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            data = f.read(max_size + 1)
    except OSError as e:
        raise error(f"{where}: {e.strerror or e}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > max_size:  # it grew since the stat
        raise error(f"{where}: more than {max_size} bytes")
    return data


def check_stat(name: str, what: str, max_size: int, error: type[MonitoringError]) -> None:
    """Refuses, from ``stat`` alone (the file is not opened), what is not a regular file
    of 1 to ``max_size`` bytes, with the parameters and messages of :func:`read_untrusted`.

    :raises OSError: the file cannot be looked at
    """
    st = os.stat(name)
    where = f"cannot read {what} {name!r}"
    kind = _kind(st.st_mode)
    if kind is not None:
        raise error(f"{where}: it is {kind}, not a file")
    _check_size(st.st_size, max_size, where, error)


def _check_size(size: int, max_size: int, where: str, error: type[MonitoringError]) -> None:
    if size > max_size:
        raise error(f"{where}: {size} bytes, more than {max_size}")
    if size == 0:
        raise error(f"{where}: the file is empty")
