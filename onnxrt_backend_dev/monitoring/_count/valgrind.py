"""A command counted by valgrind: the whole run (cachegrind, about 20 times the CPU of a
plain run) or each Python function (callgrind with the interpreter's perf trampolines,
Python >= 3.12, about 65 times), under the caller's supervisor.

The hash seed is fixed (``PYTHONHASHSEED=0`` unless set): two runs of the same program
then count the same instructions to the last one (without, about 0.02 % apart). A
program that forks leaves one count per process: refused rather than cut to the
parent's. A child started with ``exec`` runs outside valgrind and is not counted.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import shutil
import signal
import string
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import BadValue, CounterError, RunFailed
from .._run.program import TAIL, last_line, run_child
from . import COUNTERS
from .callgraph import ALLOCATORS, DHAT_ARGS, read_callgrind, read_dhat, read_total

INSTALL = (
    "--counter instructions needs valgrind, which is not installed: apt-get install "
    "valgrind (Debian, Ubuntu) or dnf install valgrind (Fedora); valgrind does not run "
    "on macOS or Windows"
)
# The probe of an interpreter: its real binary (a pyenv or venv launcher may be a
# script: valgrind would count the shell), its version, its perf trampolines.
_PROBE = (
    "import json, sys, sysconfig; print(json.dumps([sys.executable, "
    "list(sys.version_info[:2]), bool(sysconfig.get_config_var('PY_HAVE_PERF_TRAMPOLINE'))]))"
)
_PROBE_TIMEOUT = 60.0
# Characters a symbol's name starts with: callgrind skips every named function (their
# instructions go to the nearest function kept, a Python function's trampoline), keeping
# the unnamed code (the trampolines, valgrind's own stubs), the bottoms of the stacks,
# the lazy binding of the dynamic loader, which callgrind follows itself, and the
# allocators, whose calls are counted per function.
_ALPHABET = string.ascii_letters + string.digits + "_.$@("
_KEEP = ("0x", "_dl_runtime_resolve", "start_thread", "clone", *ALLOCATORS)


def check_counter(counter: str | None) -> str | None:
    """Refuses an unknown counter (BadValue); None (timing) passes.

    :param counter: the name given
    """
    if counter is not None and counter not in COUNTERS:
        raise BadValue(f"counter must be one of {', '.join(COUNTERS)}, got {counter!r}")
    return counter


def find_valgrind() -> str:
    """The valgrind command's path (CounterError saying how to get it if missing)."""
    found = shutil.which("valgrind")
    if found is None:
        raise CounterError(INSTALL)
    return found


@dataclass(frozen=True)
class Interpreter:
    """A Python interpreter as valgrind must run it.

    :param binary: its real executable (never a launcher script)
    :param version: ``(major, minor)``
    :param perf: it has perf trampolines (``-X perf``): per-function counts
    """

    binary: str
    version: tuple[int, int]
    perf: bool

    @property
    def per_function(self) -> bool:
        """Whether each Python function can be counted."""
        return self.perf and self.version >= (3, 12)


@functools.lru_cache(maxsize=16)
def interpreter(python: str) -> Interpreter:
    """Probes an interpreter once (per process); CounterError when it cannot be run or
    is no native program valgrind can count.

    :param python: its command, a path or a name in ``PATH``
    """
    try:
        done = subprocess.run(
            [python, "-c", _PROBE], stdin=subprocess.DEVNULL, capture_output=True,
            timeout=_PROBE_TIMEOUT, check=False,
        )  # fmt: skip
        binary, version, perf = json.loads(done.stdout.decode("utf-8", "replace"))
        major, minor = (int(v) for v in version)
    except (OSError, subprocess.SubprocessError, ValueError, TypeError) as e:
        raise CounterError(f"cannot probe the interpreter {python!r}: {e}") from None
    # Not resolved: a virtual environment's interpreter is a link whose own path
    # finds the environment's packages (valgrind runs it as given).
    binary = str(binary)
    try:
        with open(binary, "rb") as f:
            elf = f.read(4) == b"\x7fELF"
    except OSError:
        elf = False
    if not elf:
        raise CounterError(
            f"the interpreter {python!r} runs {binary!r}, which is not a native program "
            "valgrind can count"
        )
    return Interpreter(binary, (major, minor), bool(perf))


@functools.lru_cache(maxsize=1)
def skip_patterns() -> tuple[str, ...]:
    """callgrind's ``--fn-skip`` patterns: every name not starting with one of
    :data:`_KEEP` (a prefix tree of the alphabet, about 1,500 patterns; a name that is
    only the start of one, ``PyObject_Call`` for ``PyObject_Calloc``, skipped by itself)."""
    out: list[str] = []
    todo = [""]
    while todo:
        prefix = todo.pop()
        for c in _ALPHABET:
            name = prefix + c
            if name in _KEEP:
                continue
            if any(k.startswith(name) for k in _KEEP):
                out.append(name)  # the exact name: no '*', no other name
                todo.append(name)
            else:
                out.append(name + "*")
    return tuple(sorted(out))


@dataclass
class Counted:
    """A counted run.

    :param total: the instructions of the whole run
    :param functions: per Python function, cProfile's shape (``{(file, line, name): (cc,
        nc, own, inclusive, {caller: (cc, nc, own, inclusive)})}``, instructions), None
        when the whole run alone was counted
    :param wall: seconds the counted run took (valgrind's, not the program's)
    :param notes: what the reader must know (why functions are not counted...)
    :param allocations: each Python function's calls to the allocators
    :param alloc_bytes: each Python function's allocated bytes (``--count-bytes``)
    """

    total: int
    functions: dict[Any, Any] | None = None
    wall: float = 0.0
    notes: list[str] = field(default_factory=list)
    allocations: dict[Any, int] = field(default_factory=dict)
    alloc_bytes: dict[Any, int] | None = None


def environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a counted run: the hash seed fixed unless one is set.

    :param base: the environment to start from, this process's when None
    """
    env = dict(os.environ if base is None else base)
    env.setdefault("PYTHONHASHSEED", "0")
    env.pop("PYTHONPERFSUPPORT", None)
    return env


def _argv(valgrind: str, out: str, log: str, per_function: bool) -> list[str]:
    common = [valgrind, f"--log-file={log}.%p"]
    if not per_function:
        return [*common, "--tool=cachegrind", "--cache-sim=no", "--branch-sim=no",
                f"--cachegrind-out-file={out}.%p"]  # fmt: skip
    return [
        *common, "--tool=callgrind", f"--callgrind-out-file={out}.%p", "--compress-strings=no",
        "--compress-pos=no", "--dump-line=no", "--dump-instr=no",
        *(f"--fn-skip={p}" for p in skip_patterns()),
    ]  # fmt: skip


@dataclass(frozen=True)
class Run:
    """How to run the counted command.

    :param argv: the command, its first word the interpreter's real binary
    :param per_function: count each Python function (callgrind), else the whole run
    :param cwd: the folder it runs in
    :param env: its environment (see :func:`environment`)
    :param show_output: its output goes to this process's (else discarded, the end of
        its standard error kept for the message of a failed run)
    :param timeout: seconds before it is killed
    :param what: how messages name it
    :param count_bytes: with ``per_function``, a second run under DHAT counts each
        function's allocated bytes (:func:`.callgraph.read_dhat`)
    """

    argv: Sequence[str]
    per_function: bool = False
    cwd: str | None = None
    env: dict[str, str] | None = None
    show_output: bool = False
    timeout: float = 600.0
    what: str = "the counted program"
    count_bytes: bool = False


def count(run: Run, folder: str, supervisor: Any) -> Counted | None:
    """Counts one run of a command (two with ``run.count_bytes``).

    :param run: what to run and how
    :param folder: a folder of the caller's for the run's files (emptied afterwards)
    :param supervisor: the command's ``_run.supervise.Supervisor``
    :return: the count, None when a signal stopped it
    :raises CounterError: valgrind is missing, was killed, or the program forked
    :raises RunFailed: the program failed or ran past its timeout
    """
    valgrind = find_valgrind()
    out, log = os.path.join(folder, "count"), os.path.join(folder, "valgrind")
    argv = list(run.argv)
    if run.per_function:
        argv[1:1] = ["-X", "perf"]
    env = run.env if run.env is not None else environment()
    try:
        start = time.perf_counter()
        tool = _argv(valgrind, out, log, run.per_function)
        if not _under(run, [*tool, *argv], env, folder, supervisor, log):
            return None
        counted = _read(out, run, time.perf_counter() - start)
        if run.per_function and run.count_bytes:
            bytes_out = os.path.join(folder, "bytes")
            tool = [valgrind, f"--log-file={log}.%p", *DHAT_ARGS, f"--dhat-out-file={bytes_out}.%p"]
            # Every object one malloc, which DHAT sees (Python's arenas it does not).
            if not _under(run, [*tool, *argv], {**env, "PYTHONMALLOC": "malloc"}, folder,
                          supervisor, log):  # fmt: skip
                return None
            counted.alloc_bytes = _read_bytes(bytes_out, run)
        return counted
    finally:
        for prefix in (out, os.path.join(folder, "bytes")):
            _remove_perf_maps(prefix)
        for path in glob.glob(os.path.join(folder, "*")):
            if os.path.isfile(path):
                os.remove(path)


def _under(
    run: Run, argv: list[str], env: dict[str, str], folder: str, supervisor: Any, log: str
) -> bool:
    """Runs ``argv`` (valgrind and the command) to its end; False when a signal stopped
    it."""
    errors = os.path.join(folder, "stderr")
    ended = run_child(supervisor, argv, errors, run.timeout, run.show_output, cwd=run.cwd,
                      env=env)  # fmt: skip
    if ended is None:
        return False
    _check_ended(run, ended, errors, log)
    return True


def _read_bytes(out: str, run: Run) -> dict[Any, int]:
    files = _outputs(out)
    if len(files) != 1:
        raise CounterError(f"DHAT left {len(files)} outputs of {run.what}", usage=False)
    pid = files[0].rsplit(".", 1)[-1]
    return read_dhat(files[0], f"/tmp/perf-{pid}.map", cwd=run.cwd)


def _check_ended(run: Run, ended: Any, errors: str, log: str) -> None:
    if ended.timed_out:
        raise RunFailed(f"{run.what} ran past its timeout of {run.timeout:g} s under valgrind")
    if ended.killed_by == signal.SIGKILL:  # the OOM killer, or someone's kill -9
        raise CounterError(
            f"valgrind was killed by SIGKILL counting {run.what} (out of memory?)"
            f"{_last(log + '.*')}",
            usage=False,
        )
    if ended.code != 0:
        tail = last_line(errors) or _last(log + ".*").lstrip(": ")
        raise RunFailed(f"{run.what} exited with {ended.code}" + (f": {tail}" if tail else ""))


def _last(pattern: str) -> str:
    """The last line of valgrind's log that says something, for a message."""
    for path in glob.glob(pattern):
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        said = [ln.split("==", 2)[-1].strip() for ln in lines if ln.strip("= 0123456789")]
        if said:
            return ": " + said[-1][-TAIL:]
    return ""


def _outputs(out: str) -> list[str]:
    return sorted(glob.glob(out + ".*"))


def _read(out: str, run: Run, wall: float) -> Counted:
    files = _outputs(out)
    if len(files) != 1:
        raise CounterError(
            f"{run.what} forked {len(files) - 1} process(es): the counter counts one "
            "process (multiprocessing's workers would go uncounted); count a program "
            "that does not fork"
            if files
            else f"valgrind left no count of {run.what}",
            usage=bool(files),
        )
    total = read_total(files[0])
    if not run.per_function:
        return Counted(total, wall=wall)
    pid = files[0].rsplit(".", 1)[-1]
    found = read_callgrind(files[0], f"/tmp/perf-{pid}.map", total, cwd=run.cwd)
    return Counted(total, found[0], wall, found[2], found[1])


def _remove_perf_maps(out: str) -> None:
    """The perf maps the interpreter wrote (``/tmp/perf-PID.map``): never left behind."""
    for path in _outputs(out):
        pid = path.rsplit(".", 1)[-1]
        if pid.isdigit():
            with contextlib.suppress(OSError):
                os.remove(f"/tmp/perf-{pid}.map")
