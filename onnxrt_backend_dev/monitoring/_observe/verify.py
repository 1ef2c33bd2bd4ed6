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

The same live interpreter checks the C walk (:mod:`.walk`), when built: it must find
the same stacks, else the Python reader reads the program and the notes say why.

A check is kept between runs, per interpreter file (:mod:`.checks`): a start with the
same interpreter does not pay for it again.

A failed check is not an error of the program: the caller falls back to the in-process
sampler and says why.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .._errors import ObserveError, ReadError
from . import checks, opcodes, walk
from .reader import StackReader, ThreadSample
from .target import Interpreter, locate

if TYPE_CHECKING:
    import subprocess

CHECK_VERSION = 2  # changed with what a check does: the checks kept before are not used
# (2: the instructions' table holds their kinds, Python, call or operator, not 0 or 1)
PROBE_TIMEOUT = 20.0  # seconds for the probe child to start and print (a loaded machine)

# The known thread, run in the probe child or in this process: two functions of known
# names waiting; ``_observer_wait`` gives the interpreter's own view of its stack once it
# waits (``(name, line)``, outermost first), [] when it never does.
KNOWN_THREAD = r"""
import sys, threading, time, traceback
def _observer_probe_inner(ev):
    ev.wait(60)
def _observer_probe_outer(ev):
    _observer_probe_inner(ev)
def _observer_wait(t, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        f = sys._current_frames().get(t.ident)
        stack = [(s.name, s.lineno or 0) for s in traceback.extract_stack(f)] if f else []
        if "_observer_probe_inner" in [n for n, _ in stack] and stack[-1][0] == "wait":
            return stack
        time.sleep(0.001)
    return []
"""
# The probe child's program: the opcode table (see :mod:`.opcodes`) goes between the
# two halves (:func:`_probe`).
PROBE_HEAD = (
    KNOWN_THREAD
    + r"""
import json
ev = threading.Event()
t = threading.Thread(target=_observer_probe_outer, args=(ev,), daemon=True)
t.start()
_stack = _observer_wait(t, 30)
import io, contextlib
out = io.StringIO()
with contextlib.redirect_stdout(out):
"""
)
PROBE_TAIL = r"""
info = {"ident": t.ident, "native": getattr(t, "native_id", 0) or 0, "name": t.name,
        "main_ident": threading.main_thread().ident, "stack": _stack,
        "ops": out.getvalue(), "hexversion": sys.hexversion}
sys.stdout.write(json.dumps(info) + "\n")
sys.stdout.flush()
sys.stdin.read()
"""


def _probe() -> str:
    body = "\n".join("    " + line for line in opcodes.OPS_SCRIPT.strip().splitlines())
    return PROBE_HEAD + body + PROBE_TAIL


class Verified(NamedTuple):
    """A layout checked against a live interpreter.

    :param how: ``self`` (this process) or ``probe`` (a child of the executable)
    :param native_flags: 256 kinds (see :mod:`.opcodes`): what a leaf on that instruction runs
    :param pthread_tid: 3.10: the offset of the kernel id in glibc's thread descriptor
    :param seconds: what the check took
    :param names: threads' names are read right (the known thread's name was)
    :param native: '' when the C walk passed the check too, else why it is not used
    :param kept: the check was read back from the cache of earlier runs
    """

    how: str
    native_flags: bytes
    pthread_tid: int
    seconds: float
    names: bool = False
    native: str = "not checked"
    kept: bool = False


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
    """Checks ``interp``'s layout against a live interpreter of the same file (kept per
    file for this process, and between runs in the user's cache, see :mod:`.checks`).

    :param interp: the program's interpreter, as :func:`.target.locate` found it
    :param memory_factory: pid -> its memory (tests: nothing is kept between runs)
    :return: what the check found
    :raises ObserveError: the check failed (reason ``unverified``), with why
    """
    key = (_identity(interp.path), interp.layout.source, interp.version)
    found = _CACHE.get(key)
    if found is not None:
        return found
    disk = "" if memory_factory is not None else checks.key_of(interp.path, _parts(interp))
    found = _kept(checks.load("check", disk)) if disk else None
    if found is None:
        found = _check(interp, memory_factory)
        if disk:
            checks.store("check", disk, [found.how, found.native_flags.hex(),
                                         str(found.pthread_tid), "1" if found.names else "0",
                                         found.native])  # fmt: skip
    _CACHE[key] = found
    return found


def _kept(fields: list[str] | None) -> Verified | None:
    """A check kept from an earlier run, its fields checked (types, bounds)."""
    if fields is None or len(fields) != 5:
        return None
    how, flags, tid, names, native = fields
    if how not in ("self", "probe") or len(flags) != 512 or names not in ("0", "1"):
        return None
    try:
        raw, offset = bytes.fromhex(flags), int(tid)
    except ValueError:
        return None
    if any(b > opcodes.OPERATOR for b in raw) or not -1 <= offset < 1 << 16:
        return None
    return Verified(how, raw, offset, 0.0, names == "1", native[:300], kept=True)


def _parts(interp: Interpreter) -> tuple[Any, ...]:
    """What a check depends on besides the interpreter's file: the layout, the check's
    own version and the C walk's."""
    offsets = tuple(sorted(interp.layout.offsets.items()))
    return (interp.layout.source, interp.version, offsets, CHECK_VERSION, walk.BUILD_TAG)


def _check(interp: Interpreter, memory_factory: Callable[[int], Any] | None) -> Verified:
    start = time.perf_counter()
    own = _own_interpreter()
    if (
        own is not None
        and _identity(own.path) == _identity(interp.path)
        and (own.version == interp.version)
    ):
        how, flags = "self", opcodes.kinds(opcodes.table_here())
        tid, names, native = _check_self(own, memory_factory)
    else:
        how = "probe"
        flags, tid, names, native = _check_probe(interp, memory_factory)
    return Verified(how, flags, tid, time.perf_counter() - start, names, native)


def _reader(interp: Interpreter, memory_factory: Callable[[int], Any] | None) -> StackReader:
    from .memory import open_memory

    memory = memory_factory(interp.pid) if memory_factory else open_memory(interp.pid)
    return StackReader(memory, interp.layout, interp.runtime, interp.types)


def _decoded(reader: StackReader, sample: ThreadSample) -> list[tuple[str, int]]:
    """``(name, line)`` per frame, outermost first."""
    out = []
    frames = sample.frames
    for i in range(len(frames) - 2, -1, -2):
        info = reader.infos[frames[i]]
        out.append((info.name.rsplit(".", 1)[-1], info.line(frames[i + 1])))
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


def _read_known(
    interp: Interpreter,
    memory_factory: Callable[[int], Any] | None,
    known: tuple[int, int, str],
    expected: list[tuple[str, int]],
    where: str,
) -> tuple[int, bool, str]:
    """Reads the known thread (``ident, kernel id, name``) of a live interpreter, this
    process or the probe, with the Python reader, then with the C walk: the 3.10 thread
    id offset, whether its name read right, and '' when the C walk found the same stack,
    else why it is not used."""
    ident, native, name = known
    reader = _reader(interp, memory_factory)
    sample = _compare(reader, ident, expected, where)
    tid, names = _pthread_tid(reader, sample, native), _name_read(reader, sample, name)
    if walk.WHY_NOT:
        return tid, names, walk.WHY_NOT
    reader = _reader(interp, memory_factory)  # a fresh one: the C walk finds every code
    reason = walk.attach_native(reader, reader.memory if memory_factory else interp.pid)
    if reason:
        return tid, names, f"the C walker cannot read this interpreter: {reason}"
    try:
        _compare(reader, ident, expected, where)
    except (ObserveError, walk.Fault, ReadError) as e:
        return tid, names, f"the C walker failed the check: {e}"
    finally:
        walk.drop_native(reader)
    return tid, names, ""


def _check_self(
    own: Interpreter, memory_factory: Callable[[int], Any] | None
) -> tuple[int, bool, str]:
    """Reads a thread of this process waiting in known functions (the probe's,
    :data:`KNOWN_THREAD`); returns the 3.10 thread id offset, whether its name was read
    right, and the C walk's check."""
    code: dict[str, Any] = {}
    exec(KNOWN_THREAD, code)  # the probe child's functions, here
    ev = threading.Event()
    thread = threading.Thread(target=code["_observer_probe_outer"], args=(ev,), daemon=True,
                              name="onnxrt-layout-check")  # fmt: skip
    try:  # started inside: a Ctrl-C in start() (it waits for the thread) still ends it
        thread.start()
        expected = code["_observer_wait"](thread, 10)
        if not expected:
            raise ObserveError("layout check: the check's thread never reached its wait",
                               "unverified")  # fmt: skip
        known = (thread.ident or 0, thread.native_id or 0, thread.name)
        return _read_known(own, memory_factory, known, expected, "this interpreter")
    finally:
        ev.set()
        if thread.ident is not None:
            thread.join(5)


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
) -> tuple[bytes, int, bool, str]:
    """Starts the program's executable on :func:`_probe`'s program, reads it, compares."""
    import json  # here: a check kept from an earlier run needs neither
    import subprocess

    if not interp.executable:
        raise ObserveError("layout check: the program's executable is unknown", "unverified")
    try:
        proc = subprocess.Popen(
            [interp.executable, "-I", "-S", "-c", _probe()],
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
            known = (int(info["ident"]), int(info["native"]), str(info.get("name", "")))
        except (ValueError, KeyError, TypeError) as e:
            raise ObserveError(f"layout check: the probe said {line[:80]!r}",
                               "unverified") from e  # fmt: skip
        probe = locate(proc.pid)
        if probe.layout.offsets != interp.layout.offsets:
            raise ObserveError("layout check: the probe's layout differs", "unverified")
        flags = opcodes.kinds(opcodes.parse_table(str(info.get("ops", ""))))
        return (flags, *_read_known(probe, memory_factory, known, expected, interp.executable))
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
