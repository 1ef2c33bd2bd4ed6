"""The layout checked against a live interpreter before it is trusted.

A layout comes from a table or from offsets the interpreter publishes; a build with other
options (debug, free-threaded, a distribution's patches) may place things elsewhere. So
before the observer reads a program, it reads an interpreter whose stacks it knows: this
process itself when the program runs the same interpreter file (a thread of known
functions waiting on an event), or else a short probe child of the program's executable
(that prints its own stacks). The decoded stack must equal the interpreter's own view,
function by function and line by line. The same read finds, on 3.10, where glibc keeps
a thread's kernel id (3.10's thread state does not have it), and gives the opcode table
of that interpreter (:mod:`.opcodes`).

A failed check is not an error of the program: the caller falls back to the in-process
sampler and says why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from .._errors import ObserveError
from .opcodes import OPS_SCRIPT, kinds, parse_table, table_here
from .reader import StackReader, ThreadSample
from .target import Interpreter, locate

PROBE_TIMEOUT = 20.0  # seconds for the probe child to start and print (a loaded machine)

PROBE = (
    r"""
import json, sys, threading, traceback
def _observer_probe_inner(ev):
    ev.wait(60)
def _observer_probe_outer(ev):
    _observer_probe_inner(ev)
ev = threading.Event()
t = threading.Thread(target=_observer_probe_outer, args=(ev,), daemon=True)
t.start()
import time
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    f = sys._current_frames().get(t.ident)
    _stack = [(s.name, s.lineno) for s in traceback.extract_stack(f)] if f else []
    _names = [n for n, _ in _stack]
    if "_observer_probe_inner" in _names and _names[-1] == "wait":
        break
    time.sleep(0.001)
import io, contextlib
out = io.StringIO()
with contextlib.redirect_stdout(out):
"""
    + "\n".join("    " + line for line in OPS_SCRIPT.strip().splitlines())
    + r"""
info = {"ident": t.ident, "native": getattr(t, "native_id", 0) or 0, "name": t.name,
        "main_ident": threading.main_thread().ident, "stack": _stack,
        "ops": out.getvalue(), "hexversion": sys.hexversion}
sys.stdout.write(json.dumps(info) + "\n")
sys.stdout.flush()
sys.stdin.read()
"""
)


class Verified(NamedTuple):
    """A layout checked against a live interpreter.

    :param how: ``self`` (this process) or ``probe`` (a child of the executable)
    :param native_flags: 256 flags, 1 where a leaf on that instruction runs native code
    :param pthread_tid: 3.10: the offset of the kernel id in glibc's thread descriptor
    :param seconds: what the check took
    :param names: threads' names are read right (the known thread's name was)
    """

    how: str
    native_flags: bytes
    pthread_tid: int
    seconds: float
    names: bool = False


_CACHE: dict[tuple[Any, ...], Verified] = {}


def _identity(path: str) -> tuple[Any, ...]:
    try:
        st = os.stat(path)
    except OSError:
        return (path,)
    return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _own_interpreter() -> Interpreter | None:
    try:
        return locate(os.getpid())
    except ObserveError:
        return None


def verify(interp: Interpreter, memory_factory: Callable[[int], Any] | None = None) -> Verified:
    """Checks ``interp``'s layout against a live interpreter of the same file (cached per
    file for this process).

    :param interp: the program's interpreter, as :func:`.target.locate` found it
    :param memory_factory: pid -> its memory (tests)
    :return: what the check found
    :raises ObserveError: the check failed (reason ``unverified``), with why
    """
    key = (_identity(interp.path), interp.layout.source, interp.version)
    found = _CACHE.get(key)
    if found is not None:
        return found
    start = time.perf_counter()
    own = _own_interpreter()
    if own is not None and _identity(own.path) == key[0] and own.version == interp.version:
        how, flags = "self", kinds(table_here())
        tid, names = _check_self(own, memory_factory)
    else:
        how = "probe"
        flags, tid, names = _check_probe(interp, memory_factory)
    found = _CACHE[key] = Verified(how, flags, tid, time.perf_counter() - start, names)
    return found


def _reader(interp: Interpreter, memory_factory: Callable[[int], Any] | None) -> StackReader:
    from .memory import ProcessMemory

    memory = memory_factory(interp.pid) if memory_factory else ProcessMemory(interp.pid)
    return StackReader(memory, interp.layout, interp.runtime, interp.types)


def _decoded(reader: StackReader, sample: ThreadSample) -> list[tuple[str, int]]:
    """``(name, line)`` per frame, outermost first."""
    out = []
    frames = sample.frames
    for i in range(len(frames) - 2, -1, -2):
        info = reader.infos[frames[i]]
        out.append((info.name.rsplit(".", 1)[-1], info.table.line(frames[i + 1])))
    return out


def _compare(
    reader: StackReader, ident: int, expected: list[tuple[str, int]], where: str
) -> ThreadSample:
    samples = reader.threads()
    mine = next((s for s in samples if s.ident == ident), None)
    if mine is None:
        idents = ", ".join(hex(s.ident) for s in samples) or "none"
        raise ObserveError(
            f"layout check failed on {where}: the known thread {ident:#x} was not found "
            f"among the threads read ({idents})",
            "unverified",
        )
    got = _decoded(reader, mine)
    if got != expected:
        raise ObserveError(
            f"layout check failed on {where}: read {got[-3:]}, expected {expected[-3:]}",
            "unverified",
        )
    return mine


def _expected(frame: Any) -> list[tuple[str, int]]:
    """The interpreter's own view of a stack: ``(name, line)``, outermost first."""
    import traceback

    if frame is None:
        return []
    return [(f.name, f.lineno or 0) for f in traceback.extract_stack(frame)]


def _observer_check_inner(ev: threading.Event) -> None:
    ev.wait(60)


def _observer_check_outer(ev: threading.Event) -> None:
    _observer_check_inner(ev)


def _check_self(own: Interpreter, memory_factory: Callable[[int], Any] | None) -> tuple[int, bool]:
    """Reads a thread of this process waiting in known functions; returns the 3.10
    thread id offset and whether its name was read right."""
    ev = threading.Event()
    thread = threading.Thread(target=_observer_check_outer, args=(ev,), daemon=True,
                              name="onnxrt-layout-check")  # fmt: skip
    try:  # started inside: a Ctrl-C in start() (it waits for the thread) still ends it
        thread.start()
        expected = _wait_for_stack(thread)
        reader = _reader(own, memory_factory)
        sample = _compare(reader, thread.ident or 0, expected, "this interpreter")
        tid = _pthread_tid(reader, sample, thread.native_id or 0)
        return tid, _name_read(reader, sample, thread.name)
    finally:
        ev.set()
        if thread.ident is not None:
            thread.join(5)


def _wait_for_stack(thread: threading.Thread) -> list[tuple[str, int]]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(thread.ident or 0)
        names = _expected(frame)
        inner = [n for n, _ in names]
        if "_observer_check_inner" in inner and inner[-1] == "wait":
            return names
        time.sleep(0.001)
    raise ObserveError("layout check: the check's thread never reached its wait", "unverified")


def _name_read(reader: StackReader, sample: ThreadSample, name: str) -> bool:
    """Whether the known thread's name reads as itself (else names are not read)."""
    try:
        return reader.thread_name(sample) == name
    except Exception:  # an unexpected layout of dicts: no names, the stacks still read
        return False


def _pthread_tid(reader: StackReader, sample: ThreadSample, native: int) -> int:
    """3.10: where glibc keeps the kernel id in the thread descriptor (``pthread_t``
    is its address): the first 4-byte slot equal to the known thread's id."""
    if reader.layout.version >= (3, 11) or not native or not sample.ident:
        return -1
    from .memory import ReadError

    try:
        data = reader.memory.read(sample.ident, 2048)
    except ReadError:
        return -1
    key = native.to_bytes(4, "little", signed=True)
    at = data.find(key)
    while at >= 0 and at % 4:
        at = data.find(key, at + 1)
    return at


def _check_probe(
    interp: Interpreter, memory_factory: Callable[[int], Any] | None
) -> tuple[bytes, int, bool]:
    """Starts the program's executable on :data:`PROBE`, reads it, compares."""
    if not interp.executable:
        raise ObserveError("layout check: the program's executable is unknown", "unverified")
    try:
        proc = subprocess.Popen(
            [interp.executable, "-I", "-S", "-c", PROBE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as e:
        raise ObserveError(f"layout check: cannot start {interp.executable}: {e}",
                           "unverified") from e  # fmt: skip
    try:
        line = _read_line(proc, PROBE_TIMEOUT)
        try:
            info = json.loads(line)
            expected = [(str(n), int(ln)) for n, ln in info["stack"]]
            ident, native = int(info["ident"]), int(info["native"])
            name = str(info.get("name", ""))
        except (ValueError, KeyError, TypeError) as e:
            raise ObserveError(f"layout check: the probe said {line[:80]!r}",
                               "unverified") from e  # fmt: skip
        probe = locate(proc.pid)
        if probe.layout.offsets != interp.layout.offsets:
            raise ObserveError("layout check: the probe's layout differs", "unverified")
        reader = _reader(probe, memory_factory)
        sample = _compare(reader, ident, expected, interp.executable)
        flags = kinds(parse_table(str(info.get("ops", ""))))
        return flags, _pthread_tid(reader, sample, native), _name_read(reader, sample, name)
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The probe's one line, within ``timeout`` seconds (the probe is killed after)."""
    import select

    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ObserveError(f"layout check: the probe did not answer within {timeout:.0f} s",
                               "unverified")  # fmt: skip
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ObserveError("layout check: the probe ended without a word", "unverified")
            data += chunk
            if len(data) > 1 << 20:
                break
    return data.split(b"\n", 1)[0].decode(errors="replace")
