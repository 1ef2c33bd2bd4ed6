"""The janitor: a tiny shell that ends the children's process groups and removes the
temporary folders of a command that died without cleaning up (``kill -9``, the OOM
killer: nothing in a process runs after SIGKILL).

It runs in a session of its own and reads, from a pipe only this process writes, which
groups and folders are live (``+g PGID``, ``-g PGID``, ``+d PATH``, ``-d PATH``). When
the pipe ends (closed, or this process died) it kills the groups and removes the
folders still registered. A group is unregistered before its leader is reaped: its id
cannot have been reused.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

__all__ = ["Janitor"]

_SHELL = "/bin/sh"
# Pure POSIX sh, builtins only (it must work when nothing else can start): the groups
# as " 12 34 ", the folders one per line; globbing off (a folder may hold a '*').
_SCRIPT = r"""
trap '' INT TERM HUP QUIT
set -f
g=" "
nl="
"
d="$nl"
while IFS= read -r l; do
  case $l in
  "+g "*) g="$g${l#"+g "} " ;;
  "-g "*) x=${l#"-g "}; case $g in *" $x "*) g="${g%%" $x "*} ${g#*" $x "}" ;; esac ;;
  "+d "*) d="$d${l#"+d "}$nl" ;;
  "-d "*) x=${l#"-d "}
          case $d in *"$nl$x$nl"*) d="${d%%"$nl$x$nl"*}$nl${d#*"$nl$x$nl"}" ;; esac ;;
  esac
done
for x in $g; do kill -9 -"$x" 2>/dev/null; done
IFS=$nl
for x in $d; do [ -n "$x" ] && rm -rf "$x"; done
exit 0
"""
# Seconds a janitor told to stop has to exit before it is left to end on its own.
_STOP_WAIT = 1.0


class Janitor:
    """The janitor of one command (see the module's docstring); started on first use.

    :param enabled: False to start nothing (every method then does nothing)
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled and os.path.exists(_SHELL)
        self._proc: subprocess.Popen[bytes] | None = None
        self._pipe: int | None = None

    @property
    def fd(self) -> int | None:
        """The write end of its pipe (a forked child closes it), None when not started."""
        return self._pipe

    def _start(self) -> bool:
        if self._pipe is not None:
            return True
        if not self.enabled:
            return False
        read, write = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [_SHELL, "-c", _SCRIPT],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # no Ctrl-C, no signal sent to our group
                close_fds=True,
            )
        except OSError:
            os.close(write)
            self.enabled = False
            return False
        finally:
            os.close(read)
        self._pipe = write
        return True

    def _say(self, line: str) -> None:
        if "\n" in line or "\0" in line or not self._start():
            return  # a folder name with a line break is not registered: left to the caller
        assert self._pipe is not None
        with contextlib.suppress(OSError):  # the janitor died: nothing more to do
            os.write(self._pipe, (line + "\n").encode("utf-8", "surrogateescape"))

    def add_group(self, pgid: int) -> None:
        """Registers a process group, killed if this process dies.

        :param pgid: the group's id
        """
        self._say(f"+g {int(pgid)}")

    def drop_group(self, pgid: int) -> None:
        """Unregisters a group (its leader ended and was not reaped yet).

        :param pgid: the group's id
        """
        if self._pipe is not None:
            self._say(f"-g {int(pgid)}")

    def add_folder(self, path: str) -> None:
        """Registers a folder, removed if this process dies.

        :param path: its absolute path
        """
        self._say(f"+d {os.path.abspath(path)}")

    def drop_folder(self, path: str) -> None:
        """Unregisters a folder (removed by this process).

        :param path: as given to :meth:`add_folder`
        """
        if self._pipe is not None:
            self._say(f"-d {os.path.abspath(path)}")

    def stop(self) -> None:
        """Closes the pipe and reaps the janitor (it does what is still registered)."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(_STOP_WAIT)
