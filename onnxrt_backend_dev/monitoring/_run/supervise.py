"""Supervision of the processes a command starts (``run``, ``profile --repeat``,
``compare --a/--b``, ``time -p N``, ``spy -- CMD``...).

A child starts in a process group of its own, from an argv (:meth:`Supervisor.start`),
optionally held at a start gate until :meth:`Child.release` (so that a probe attached to
its pid sees its first instruction).
It dies with this process (``PR_SET_PDEATHSIG``), and the janitor (:mod:`.janitor`)
cleans up if this process is killed outright. While the :class:`Supervisor` is entered,
SIGINT, SIGTERM and SIGHUP (:mod:`.signals`) are forwarded at once to every running
child's group, killed ``grace`` seconds later if still there; the command then writes
what was measured and exits with ``128 + N``. What is left of a group is killed before
its leader is reaped (so its id cannot have been reused).

On a terminal, a child that reads this process's standard input stays in the
terminal's foreground job (a group of its own could not read the terminal): Ctrl-C then
reaches it directly, and a SIGINT sent to this process alone is forwarded after
``OWN_EXIT`` seconds; its descendants are then ended by pid.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from .._errors import CommandNotFound
from .janitor import Janitor
from .signals import Signals

__all__ = [
    "GRACE",
    "OWN_EXIT",
    "Child",
    "Exit",
    "Supervisor",
    "check_command",
    "shell_code",
]

# Seconds a child has to end after the signal forwarded to it, before SIGKILL.
GRACE = 1.0
# Seconds a child sharing the terminal's job has to end on its own after SIGINT (Ctrl-C
# reached it too) before SIGINT is forwarded to it.
OWN_EXIT = 0.5
# The start gate of an argv: a POSIX shell blocked on reading a pipe (descriptor fd) until
# released, then ``exec``ing the command in that same pid. A shell rather than Python in
# the forked child. ``read`` fails at end-of-file: this process died or gave up before
# releasing it, and the command does not run unsupervised (125, as env and timeout when
# they cannot run one). A command that cannot be run makes ``exec`` exit 127 (not found)
# or 126, the shell's codes.
_SHELL = "/bin/sh"
_GATE = 'read _ <&{fd} || exit 125; exec {fd}<&-; exec "$@"'
# dash takes single-digit descriptors only: above 9 the shell opens the pipe by path.
_GATE_BY_PATH = 'read _ < /dev/fd/{fd} || exit 125; exec "$@"'
# Linux's prctl option and the signal a child gets when this process dies.
_PR_SET_PDEATHSIG = 1


def shell_code(status: int) -> int:
    """The shell's exit code of a wait status: 128 + N for a process killed by signal N.

    :param status: as ``os.wait4`` returns it
    :return: the code
    """
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


def check_command(name: str) -> str:
    """Refuses a command that cannot be run, as a shell would (127 not found, 126 not
    executable), before anything starts.

    :param name: the command, a name looked up in ``PATH`` or a path
    :return: the executable's path
    :raises CommandNotFound: one line naming the command, its exit code 127 or 126
    """
    if "/" not in name:
        import shutil  # here: its import costs every command's start

        found = shutil.which(name) if name else None
        if found is None:
            here = ""
            if name and os.path.isfile(name):  # as a shell: not looked for here, but say so
                here = (f" (a file {name!r} is here: ./{name} runs it if executable; a "
                        f"Python script runs with python {name})")  # fmt: skip
            raise CommandNotFound(f"command not found: {name}{here}", 127)
        return found
    if not os.path.exists(name):
        raise CommandNotFound(f"command not found: {name}", 127)
    if os.path.isdir(name) or not os.access(name, os.X_OK):
        raise CommandNotFound(f"command not executable: {name}", 126)
    return name


def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up in this process (never in a forked child): the C
    walk's where the observer loaded it (the harness imports nothing of the layers above
    it), else through ctypes."""
    if not sys.platform.startswith("linux"):
        return None
    walker = sys.modules.get(__package__.rsplit(".", 1)[0] + "._observe._walker")
    found = getattr(walker, "prctl", None)
    if found is not None:
        return found
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _in_terminal_job(stdin: Any) -> bool:
    """Whether a child given ``stdin`` must stay in this process's group: it reads this
    process's standard input, a terminal whose foreground job is this process's."""
    if stdin is not None:
        return False
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


class Exit(NamedTuple):
    """How a child ended.

    :param status: the wait status
    :param rusage: its resource usage (``os.wait4``), None when unknown
    :param timed_out: it ran past its timeout and was ended
    """

    status: int
    rusage: Any = None
    timed_out: bool = False

    @property
    def code(self) -> int:
        """The shell's exit code (128 + N when killed by signal N)."""
        return shell_code(self.status)

    @property
    def killed_by(self) -> int | None:
        """The signal that killed it, None when it exited."""
        return os.WTERMSIG(self.status) if os.WIFSIGNALED(self.status) else None


class Child:
    """A child process as its supervisor sees it (reaped exactly once).

    :param pid: its pid
    :param group: it leads a process group of its own
    :param gate: the write end of its start gate, None when not gated
    :param proc: its ``Popen`` (its ``returncode`` is set once reaped here)
    :param janitor: told when the group ends
    """

    def __init__(
        self,
        pid: int,
        group: bool,
        gate: int | None = None,
        proc: subprocess.Popen[bytes] | None = None,
        janitor: Janitor | None = None,
    ) -> None:
        self.pid = pid
        self.group = group
        self.proc = proc
        self.exit: Exit | None = None
        self._gate = gate
        self._janitor = janitor
        # Reaping vs. a signal sent from the timer thread or from the handler (which runs
        # in the main thread, maybe in the middle of reaping: reentrant).
        self._lock = threading.RLock()
        self._reaping = False
        self._pidfd: int | None = None
        self._descendants: list[Any] = []

    @property
    def gated(self) -> bool:
        """Whether it still waits at its start gate."""
        return self._gate is not None

    def release(self) -> None:
        """Opens the start gate: the command runs (nothing if not gated)."""
        gate, self._gate = self._gate, None
        if gate is None:
            return
        try:
            with contextlib.suppress(OSError):  # killed at the gate: wait() says how
                os.write(gate, b"\n")
        finally:
            os.close(gate)

    def _close_gate(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            os.close(gate)  # the gated shell reads end-of-file and exits 125

    def send(self, signum: int, descendants: bool = False) -> None:
        """Sends a signal to the child's group (to the child alone when it shares this
        process's group), and to its descendants met earlier or now.

        :param signum: the signal
        :param descendants: also look for its descendants that left its group (a
            ``setsid`` daemon) and send them the signal, if it still runs
        """
        with self._lock:
            if self.exit is not None or self._reaping:
                return  # reaped: the pid and the group id may be someone else's now
            if descendants or not self.group:
                self._note_descendants()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if self.group:
                    os.killpg(self.pid, signum)
                else:
                    os.kill(self.pid, signum)
            for process in self._descendants:
                with contextlib.suppress(Exception):  # gone, or its pid reused: psutil checks
                    process.send_signal(signum)

    def _note_descendants(self) -> None:
        try:
            import psutil

            found = psutil.Process(self.pid).children(recursive=True)
        except Exception:  # gone, a zombie, no psutil: the group is what there is
            return
        known = {p.pid for p in self._descendants}
        self._descendants.extend(p for p in found if p.pid not in known)

    def _exited(self) -> bool:
        """Whether the leader ended (not reaped: its pid stays reserved)."""
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True  # reaped by someone else (SIGCHLD ignored): nothing to wait for
        return info is not None

    def _reap(self, timed_out: bool = False) -> Exit:
        """Kills what is left of the group, then reaps the leader (it ended)."""
        with self._lock:
            if self.exit is not None:
                return self.exit
            if self.group:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pid, signal.SIGKILL)  # the leader's zombie holds the id
                if self._janitor is not None:
                    self._janitor.drop_group(self.pid)
            for process in self._descendants:
                with contextlib.suppress(Exception):
                    process.kill()
            self._reaping = True
            try:
                _, status, rusage = os.wait4(self.pid, 0)
            except ChildProcessError:
                status, rusage = 0, None
            self.exit = Exit(status, rusage, timed_out)
            if self.proc is not None:  # reaped here: Popen must not wait for it
                self.proc.returncode = os.waitstatus_to_exitcode(status)
            self._close_gate()
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
            return self.exit

    def poll(self) -> Exit | None:
        """How it ended, None while it runs (never blocks)."""
        if self.exit is not None:
            return self.exit
        return self._reap() if self._exited() else None

    def wait(self, timeout: float | None = None) -> Exit | None:
        """Waits for it to end (signals received meanwhile are handled).

        :param timeout: seconds, None for no limit
        :return: the exit, None if it still runs after ``timeout``
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.0005
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if not self._wait_pidfd(left):
                time.sleep(pause if left is None else max(min(pause, left), 0.0))
                pause = min(2 * pause, 0.02)
        return self.exit

    def _wait_pidfd(self, timeout: float | None) -> bool:
        """Blocks until the leader ends or ``timeout`` (Linux's pidfd); False when no
        pidfd can be had (the caller then polls)."""
        if self._pidfd is None:
            opener = getattr(os, "pidfd_open", None)
            if opener is None:
                return False
            try:
                self._pidfd = opener(self.pid)
            except OSError:
                return False
        select.select([self._pidfd], [], [], timeout)
        return True

    def end(self, signum: int = signal.SIGTERM, grace: float = GRACE) -> Exit:
        """Ends the child and its group: ``signum``, then SIGKILL after ``grace`` seconds
        if it still runs; always reaps it.

        :param signum: the first signal
        :param grace: seconds before SIGKILL
        :return: its exit
        """
        if self.exit is not None:
            return self.exit
        if self.gated:  # never started: its shell reads end-of-file and exits 125
            self._close_gate()
            ended = self.wait(grace)
            if ended is not None:
                return ended
        for sent in (signum, signal.SIGKILL):
            self.send(sent, descendants=True)
            ended = self.wait(grace)
            if ended is not None:
                return ended
        return self._reap()


class Supervisor:
    """The children of a command, supervised: a context manager that catches SIGINT,
    SIGTERM and SIGHUP for its time (see the module's docstring) and ends every child
    still running when it exits.

    :param grace: seconds a child has to end after a forwarded signal (or a timeout's
        SIGTERM) before SIGKILL
    :param signals: the handler to listen to, when the caller installed one itself (a
        program in this process and children at once); None to install one
    :param janitor: start the janitor (children's groups and temporary folders cleaned
        even if this process is killed outright)
    """

    def __init__(
        self, grace: float = GRACE, signals: Signals | None = None, janitor: bool = True
    ) -> None:
        self.grace = grace
        self.signals = signals if signals is not None else Signals(interrupts=True)
        self._own_signals = signals is None
        self.janitor = Janitor(janitor)
        self.children: list[Child] = []
        self._timers: list[threading.Timer] = []
        self._prctl = _prctl()

    @property
    def stopped(self) -> int | None:
        """The first signal received (the command must stop), None without one."""
        return self.signals.first

    @property
    def exit_code(self) -> int | None:
        """``128 + N`` for the first signal N received, None without one."""
        return self.signals.exit_code

    def __enter__(self) -> Supervisor:
        if self._own_signals:
            self.signals.install()
        self.signals.listen(self._forward)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            for child in list(self.children):
                child.end(signal.SIGTERM, self.grace)
            self.children.clear()
        finally:
            self.signals.forget(self._forward)
            if self._own_signals:
                self.signals.uninstall()
            while self._timers:
                self._timers.pop().cancel()
            self.janitor.stop()

    def _running(self) -> list[Child]:
        self.children = [c for c in self.children if c.exit is None]
        return list(self.children)

    def _forward(self, signum: int) -> None:
        """The listener of the handler: the signal to every running child now (after
        ``OWN_EXIT`` for SIGINT to a child sharing the terminal's job: Ctrl-C reached it
        too), SIGKILL ``grace`` seconds later to those still there."""
        shared = signum == signal.SIGINT
        for child in self._running():
            if child.gated:  # never started: it ends at its closed gate
                child._close_gate()
            if shared and not child.group:
                self._later(OWN_EXIT, functools.partial(child.send, signal.SIGINT))
            else:
                child.send(signum, descendants=True)
        delay = self.grace + (OWN_EXIT if shared else 0.0)
        self._later(delay, self._kill_running)

    def _later(self, delay: float, action: Callable[[], None]) -> None:
        """Runs ``action`` from a timer thread (the main thread may be busy)."""
        timer = threading.Timer(delay, action)
        timer.daemon = True
        timer.start()
        self._timers.append(timer)

    def _kill_running(self) -> None:
        for child in self._running():
            child.send(signal.SIGKILL, descendants=True)

    def _adopt(self, child: Child) -> Child:
        self.children.append(child)
        if child.group:
            self.janitor.add_group(child.pid)
        if self.stopped is not None:  # a signal came while it started: it never runs
            child._close_gate()
            child.send(signal.SIGKILL, descendants=True)
        return child

    def start(
        self,
        argv: Sequence[str],
        gate: bool = False,
        stdin: Any = None,
        stdout: Any = None,
        stderr: Any = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        pass_fds: Sequence[int] = (),
        group: bool | None = None,
    ) -> Child:
        """Starts a command in a group of its own, dying with this process.

        :param argv: the command line (its first word a path or a name in ``PATH``)
        :param gate: hold it at a start gate until :meth:`Child.release`
        :param stdin: as ``subprocess.Popen``'s (None: this process's)
        :param stdout: as ``subprocess.Popen``'s
        :param stderr: as ``subprocess.Popen``'s
        :param cwd: the folder it runs in
        :param env: its environment, None for this process's
        :param pass_fds: descriptors it inherits
        :param group: a group of its own; None decides (not when it reads the terminal
            this process has in the foreground, see the module's docstring)
        :return: the child
        :raises CommandNotFound: the command cannot be run (exit code 127 or 126)
        """
        own = not _in_terminal_job(stdin) if group is None else group
        command = list(argv)
        fds = list(pass_fds)
        gate_read = gate_write = slot = None
        if gate:
            gate_read, gate_write = os.pipe()
            slot = _gate_slot(gate_read, fds)
            script = (_GATE if slot is not None else _GATE_BY_PATH).format(fd=slot or gate_read)
            command = [_SHELL, "-c", script, "supervised", *command]
            fds.append(gate_read if slot is None else slot)
        setup = functools.partial(_child_setup, os.getpid(), own, self._prctl, gate_read, slot)
        try:
            proc = subprocess.Popen(
                command, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=env,
                pass_fds=tuple(fds), preexec_fn=setup,
            )  # fmt: skip
        except (FileNotFoundError, PermissionError, NotADirectoryError) as e:
            if gate_write is not None:
                os.close(gate_write)
            if cwd is not None and not os.path.isdir(cwd):
                raise
            code = 127 if isinstance(e, FileNotFoundError) else 126
            what = "command not found" if code == 127 else "command not executable"
            raise CommandNotFound(f"{what}: {command[0]}", code) from None
        except BaseException:
            if gate_write is not None:
                os.close(gate_write)
            raise
        finally:
            if gate_read is not None:
                os.close(gate_read)
        return self._adopt(Child(proc.pid, own, gate_write, proc, self.janitor))

    def wait(self, child: Child, timeout: float | None = None) -> Exit:
        """Waits for a child; past ``timeout`` its group is ended (SIGTERM, then SIGKILL
        after the grace).

        :param child: one of this supervisor's
        :param timeout: seconds, None for no limit
        :return: its exit (``timed_out`` when the timeout ended it)
        """
        ended = child.wait(timeout)
        if ended is not None:
            return ended
        child.exit = child.end(signal.SIGTERM, self.grace)._replace(timed_out=True)
        return child.exit

    @contextlib.contextmanager
    def folder(self, prefix: str) -> Iterator[str]:
        """A temporary folder for the children's files, removed at the end, and by the
        janitor if this process is killed outright.

        :param prefix: the start of its name
        :return: its path
        """
        import tempfile  # only here: a sampled run imports none of it

        path = tempfile.mkdtemp(prefix=prefix)
        self.janitor.add_folder(path)
        try:
            yield path
        finally:
            import shutil

            shutil.rmtree(path, ignore_errors=True)
            self.janitor.drop_folder(path)


def _child_setup(
    parent: int,
    group: bool,
    prctl: Callable[..., int] | None,
    gate: int | None = None,
    slot: int | None = None,
) -> None:
    """Run in the forked child by ``subprocess`` before ``exec``: its own group, and
    death with its parent (SIGKILL, kept across ``exec``; a parent already gone kills it
    at once). Nothing is imported or
    looked up here (a fork of a process with threads must not take a lock another thread
    held): ``prctl`` is libc's, looked up before the fork."""
    if group:
        os.setpgid(0, 0)
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:  # died before the death signal was armed
        os.kill(os.getpid(), signal.SIGKILL)
    if gate is not None and slot is not None and slot != gate:
        os.dup2(gate, slot)  # the gate where the shell can name it


def _gate_slot(gate: int, pass_fds: Sequence[int]) -> int | None:
    """The single-digit descriptor the gate gets in the child (dash names no other in a
    redirection): the pipe's own number when it is one, else one of 3 to 9 (all open
    here: the pipe took the lowest free number) that the child does not inherit,
    replaced by the gate after the fork; None when all are inherited (the shell then
    opens the gate by path)."""
    if gate <= 9:
        return gate
    return next((n for n in range(9, 2, -1) if n not in pass_fds), None)
