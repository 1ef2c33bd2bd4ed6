"""The memory spy's orchestration in the parent: starting the spy process, reading its
pipe, holding Ctrl-C back while it is created, stopping, killing and reaping it.

:class:`MemorySpy` is what ``memory_peak`` (the public face), the ``spy`` command and the
pytest plugin all use. The spy process runs :mod:`.worker`; the two share the tables of
:mod:`.registry` (device probes by name, the spy's options).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import io
import marshal
import math
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from .._errors import BadType, BadValue, MissingDependencyError, SpyError, rebuild
from .._validate import check_bool, check_int
from . import registry
from .series import DEFAULT_MAX_POINTS, Monitor, check_max_points, join_context

if TYPE_CHECKING:
    from .views import SpyReport

START_TIMEOUT = 10.0  # seconds for the spy to open its probes (a loaded machine is slow)
STOP_TIMEOUT = 10.0  # seconds for the spy to hand its result over
KILL_TIMEOUT = 2.0  # seconds to reap the spy once killed
# The shortest delay: below it the spy's own reading of /proc (tens of microseconds per
# tick) becomes a large share of a core; see benchmarks/RESULTS.md (issue 10b).
MIN_DELAY = 0.001

# The spy's program. Empty stand-ins for the two packages keep their __init__ (and what
# they import) out of the spy; os._exit skips the interpreter's shutdown: nothing is left
# to flush, and stop() returns sooner.
_WORKER_CODE = (
    "import sys, os; sys.path[:0] = {paths!r}\n"
    "for name, path in (('onnxrt_backend_dev', os.path.dirname({package!r})),"
    " ('onnxrt_backend_dev.monitoring', {package!r})):\n"
    "    if name not in sys.modules:\n"
    "        sys.modules[name] = m = type(sys)(name); m.__path__ = [path]\n"
    "from onnxrt_backend_dev.monitoring._memory.worker import main\n"
    "os._exit(main())"
)
_LIVE: weakref.WeakSet[MemorySpy] = weakref.WeakSet()
# The package directory (``.../monitoring``) the spy imports its program from.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pid_max() -> int:
    """The largest pid this system gives."""
    try:
        with open("/proc/sys/kernel/pid_max", "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 2**31 - 1  # pid_t is a signed 32-bit int on every POSIX system we run on


def check_pid_value(pid: Any, name: str = "pid") -> int:
    """Refuses what cannot be a pid: the type, zero or less, beyond the system's range.

    :param pid: what was given
    :param name: the parameter (or option) named in the message
    :return: the pid
    """
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise BadType(f"{name} must be an int, got {type(pid).__name__}")
    if pid <= 0:
        raise BadValue(f"{name} must be > 0, got {pid}")
    limit = _pid_max()
    if pid > limit:
        raise BadValue(f"{name} must be <= {limit} (this system's pid_max), got {pid}")
    return pid


def check_pid(pid: Any) -> int:
    """:func:`check_pid_value`, and refuses a pid no process has."""
    pid = check_pid_value(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise ProcessLookupError(f"no process with pid {pid}") from None
    except PermissionError:
        pass  # it exists, owned by another user: the spy says what it can read
    return pid


def check_seconds(name: str, value: Any, floor: float = 0.0) -> float:
    """Refuses a duration that is not a finite number of seconds above ``floor``.

    :param name: the parameter (or option), for the message
    :param value: what was given
    :param floor: the smallest value accepted (0 itself is never accepted)
    :return: the duration
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadType(f"{name} must be a number of seconds, got {type(value).__name__}")
    if not (value >= floor and 0 < value < math.inf):
        rule = f">= {floor} s" if floor else "> 0"
        raise BadValue(f"{name} must be {rule} and finite, got {value!r}")
    return float(value)


def check_delay(value: Any, name: str = "delay") -> float:
    """:func:`check_seconds` with ``MIN_DELAY`` as the floor.

    :param value: what was given
    :param name: the parameter (or option) named in the message
    """
    return check_seconds(name, value, MIN_DELAY)


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """Holds a Ctrl-C back until the block ends, then raises it as usual.

    Around the creation of the spy: a KeyboardInterrupt inside ``Popen`` (after the
    fork) would leave a spy process nobody holds. Python runs signal handlers in the main
    thread only: elsewhere, and when SIGINT is not handled by Python, nothing is held.
    """
    previous = (
        signal.getsignal(signal.SIGINT)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    if not callable(previous):
        yield
        return
    caught: list[FrameType | None] = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            previous(signal.SIGINT, caught[0])


def probe_names(probes: Sequence[str], cuda: bool = False) -> tuple[str, ...]:
    """The device probes asked for: ``probes``, plus ``"nvml"`` with ``cuda=True``.

    :param probes: registry names
    :param cuda: the reference's spelling of ``"nvml"``
    :return: the names, each once, in order
    """
    check_bool("cuda", cuda)
    if isinstance(probes, str) or not isinstance(probes, (list, tuple)):
        shown = f"the str {probes!r}" if isinstance(probes, str) else type(probes).__name__
        raise BadType(f"probes must be a sequence of names, got {shown}")
    names = [*([registry.CUDA_PROBE] if cuda else []), *probes]
    for name in names:
        registry.get_spec(name)  # unknown: ValueError naming the known ones
    return tuple(dict.fromkeys(names))


class _Reader:
    """Reads the spy's frames in a daemon thread, then reaps the spy."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.ready = threading.Event()
        self.done = threading.Event()
        self.ready_frame: dict[str, Any] | None = None
        self.final: tuple[dict[str, Any], bytes] | None = None
        self.peek: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, name="memory-spy-reader", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        assert self.proc.stdout is not None
        try:
            # Buffered over the raw pipe (bufsize=0): read(n) returns n bytes, fewer only at
            # end-of-file; closing the pipe from stop() still ends the reading at once.
            self._read_frames(io.BufferedReader(self.proc.stdout))  # type: ignore[type-var]
        except (OSError, ValueError):
            pass  # the spy died mid-frame: stop() reports it
        finally:
            self.ready.set()
            self.done.set()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=KILL_TIMEOUT)  # reap it at once: no zombie

    def _read_frames(self, stream: IO[bytes]) -> None:
        while True:
            sizes = stream.read(16)
            if len(sizes) < 16:
                return
            head = stream.read(int.from_bytes(sizes[:8], "little"))
            payload = stream.read(int.from_bytes(sizes[8:], "little"))
            header = marshal.loads(head)
            if header["kind"] == "ready":
                self.ready_frame = header
                self.ready.set()
                continue
            if header["kind"] == "peek":
                self.peek = header
                continue
            self.final = (header, payload)
            self.done.set()


def _check_libs(libs: Mapping[str, str] | None, probes: Sequence[str]) -> dict[str, str]:
    """Refuses a library module given for a probe not asked for, or not a module name."""
    if libs is None:
        return {}
    if not isinstance(libs, Mapping):
        raise BadType(f"probe_libs must be a mapping, got {type(libs).__name__}")
    for name, lib in libs.items():
        if name not in probes:
            raise BadValue(f"probe_libs names {name!r}, not among the probes {list(probes)}")
        if not isinstance(lib, str) or not lib:
            raise BadValue(f"probe_libs[{name!r}] must be a module name, got {lib!r}")
    return dict(libs)


def _raise_error(header: dict[str, Any]) -> None:
    raise rebuild(header.get("type", ""), header.get("message", "the memory spy failed"))


_STACKS_FALLBACK = "the in-process stack sampler"


class MemorySpy:
    """Spies on the memory of a process from another process.

    The spy starts on construction; :meth:`stop` returns a :class:`SpyReport` (its keys:
    see :class:`SpyResult <.series.SpyResult>`).

    :param pid: process id of the process to spy on
    :param delay: spy on every delay seconds, at least ``MIN_DELAY`` (1 ms)
    :param cuda: enable cuda monitoring (nvidia-ml-py, the gpu extra)
    :param include_children: count the whole process tree (never the spy itself)
    :param reset_peak: reset the kernel's high-water mark at each tick for exact peaks;
        this also resets the spied process's ``ru_maxrss``; while another spy of this
        process already resets the same pid, this one follows its resets instead (two
        resetting spies would erase each other's peaks)
    :param max_points: points kept per retained series (decimated beyond, keeping the max)
    :param start_timeout: seconds to wait for the spy to be ready
    :param probes: device probes to read beside the process, by registry name
        (``("nvml",)`` is what ``cuda=True`` asks for), see
        :mod:`onnxrt_backend_dev.monitoring._memory.registry`
    :param stop_timeout: seconds :meth:`stop` waits for the spy's answer
    :param stacks: also sample the Python stacks of the spied process's threads at each
        tick, from a thread inside it (so ``pid`` must be the current process): the CPU
        monitor then says where the peak happened (``peak_stack``) and how much memory
        each function added (``where``)
    :param probe_libs: another library module than the registry's for some probes, by
        probe name (tests pass a fake: ``{"nvml": "fakes"}``)
    :param alloc: with ``stacks``: the allocation shim's file when this process samples
        its allocations into the shim's ring (:func:`.._alloc.block.start_sampling`);
        the spy's observer then reads them too (:attr:`observed`'s ``allocations``)

    A probe registered ``inprocess`` (``"torch"``) is read by a thread of this process
    (see :mod:`.inprocess`), so ``pid`` must then be the current process.
    """

    def __init__(
        self,
        pid: int,
        delay: float = 0.01,
        cuda: bool = False,
        include_children: bool = False,
        reset_peak: bool = True,
        max_points: int = DEFAULT_MAX_POINTS,
        start_timeout: float = START_TIMEOUT,
        probes: Sequence[str] = (),
        stop_timeout: float = STOP_TIMEOUT,
        stacks: bool = False,
        probe_libs: Mapping[str, str] | None = None,
        alloc: str = "",
    ) -> None:
        check_pid(pid)
        for flag, value in (("include_children", include_children), ("reset_peak", reset_peak)):
            check_bool(flag, value)
        if check_bool("stacks", stacks) and pid != os.getpid():
            raise BadValue(
                f"stacks=True samples the stacks inside the spied process: pid must be the "
                f"current process ({os.getpid()}), got {pid}"
            )
        self.pid = pid
        self.delay = check_delay(delay)
        self.start_timeout = check_seconds("start_timeout", start_timeout)
        self.stop_timeout = check_seconds("stop_timeout", stop_timeout)
        self.max_points = check_max_points(max_points)
        self.cuda = cuda
        self.include_children = include_children
        self.reset_peak = reset_peak
        self.probes = probe_names(probes, cuda)
        self.probe_libs = _check_libs(probe_libs, self.probes)
        self._spy_probes, self._inside_probes = registry.split_probes(self.probes)
        if self._inside_probes and pid != os.getpid():
            raise BadValue(
                f"probe {self._inside_probes[0]!r} reads its counters inside the measured "
                f"process: pid must be the current process ({os.getpid()}), got {pid}"
            )
        self._lock = threading.Lock()
        self._error: Exception | None = None
        self.stacks = stacks
        self.alloc = alloc
        self.stacks_note = ""  # why the stacks were sampled in process, if they were
        # What the spy's observer read of this process (plain values, see
        # _memory.observed), once stopped; None when the stacks were sampled in process.
        self.observed: dict[str, Any] | None = None
        self._inside: Any = None  # the InProcessProbes reading in-process probes
        self._sampler: Any = None  # the in-process recorder's Ticker (no observer)
        self._samples: Any = None  # what it recorded, once stopped
        self.result: SpyReport | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: _Reader | None = None
        self._marks: list[tuple[float, str]] = []
        self._signal: int | None = None
        self._owner = os.getpid()
        self._resets = reset_peak
        self.start()

    @property
    def resets(self) -> bool:
        """True when this spy resets the high-water mark, False when it samples or
        follows another spy's resets."""
        return self._resets

    def note_signal(self, signum: int) -> None:
        """Records the signal that ended the measure (SIGTERM...) as ``result['signal']``.

        :param signum: the signal's number
        """
        self._signal = check_int("signum", signum, minimum=1)
        if self.result is not None:
            self.result["signal"] = self._signal

    def _command(self) -> list[str]:
        if not sys.executable:
            raise SpyError("the memory spy needs sys.executable to start a Python process")
        # With device probes, the parent's path: where their libraries are installed.
        paths = [p for p in sys.path if p] if self._spy_probes else []
        code = _WORKER_CODE.format(paths=paths, package=_PACKAGE)
        opts = {
            "pid": self.pid,
            "delay": self.delay,
            "parent": os.getpid(),
            "max_points": self.max_points,
            "children": self.include_children,
            "no_reset": not self._resets,
            "stacks": self.stacks and self._observed_stacks(),
            "probes": [self._probe_arg(n) for n in self._spy_probes],
            "alloc": self.alloc if self.stacks else "",
        }
        return [sys.executable, "-I", "-S", "-c", code, *registry.to_argv(opts)]

    def _observed_stacks(self) -> bool:
        """Whether the spy reads this process's stacks from outside (the observer), as
        this machine allows; the in-process sampler runs otherwise."""
        from .._observe.session import choose

        found = choose()
        self.stacks_note = found.note(_STACKS_FALLBACK)
        return found.observer

    def _probe_arg(self, name: str) -> str:
        return registry.get_spec(name).to_arg(self.probe_libs.get(name))

    def _check_probes(self) -> None:
        """Refuses a device probe whose library is missing, naming the extra."""
        for name in self.probes:
            spec = registry.get_spec(name)
            lib = self.probe_libs.get(name, spec.lib)
            if lib and importlib.util.find_spec(lib.split(".")[0]) is None:
                asked = (
                    "cuda=True" if self.cuda and name == registry.CUDA_PROBE else f"probe {name!r}"
                )
                raise MissingDependencyError(
                    f"{asked} needs {lib!r} ({spec.package}): "
                    f"pip install 'onnxrt-backend-dev[{spec.extra}]'"
                )

    def start(self) -> MemorySpy:
        """Starts the spy process (nothing if it already spies). A Ctrl-C is held back
        while the process is created, so none is left behind.

        :return: self
        """
        if self._proc is not None and self.result is None and self._error is None:
            return self
        self._check_probes()
        self.result = None
        self._error = None
        self._marks = []
        self._signal = None
        self._owner = os.getpid()
        # Two spies resetting the high-water mark of one process erase each other's peaks:
        # a spy started while another one of this process resets that pid follows its
        # resets instead (peak_source 'sampling+hwm'), and the first one stays exact.
        self._resets = self.reset_peak and not any(
            spy is not self and spy.pid == self.pid and spy._resets and spy.running
            for spy in list(_LIVE)
        )
        command = self._command()
        self._proc = self._reader = None
        try:
            with _sigint_held():
                self._proc = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,  # the spy reports errors as frames, never prints
                    bufsize=0,
                    # Its own session: Ctrl-C on the terminal is for the parent, which stops it.
                    start_new_session=True,
                )
                self._reader = _Reader(self._proc)
            self._wait_ready(self._proc, self._reader)
            _LIVE.add(self)
            if self._inside_probes:
                from .inprocess import InProcessProbes

                args = [self._probe_arg(n) for n in self._inside_probes]
                self._inside = InProcessProbes(args, self.delay, self.max_points).start()
            ready = self._reader.ready_frame or {}
            if ready.get("stacks_error"):
                from .._observe.session import Choice

                self.stacks_note = Choice(False, ready["stacks_error"]).note(_STACKS_FALLBACK)
            if self.stacks and not ready.get("stacks"):
                from .._sampling.recorder import spy_recorder
                from .._sampling.timer import Ticker

                self._samples = None
                # Its first sample comes after ``delay``: one taken now would show the
                # spy starting, not the code measured.
                self._sampler = Ticker(spy_recorder(self.delay, self.max_points), "thread")
                self._sampler.start()
        except BaseException:
            self.abort()
            self._proc = self._reader = None  # not started: start() may try again
            raise
        return self

    def _wait_ready(self, proc: subprocess.Popen[bytes], reader: _Reader) -> None:
        """Waits for the spy's ``ready`` frame, or raises what it reported."""
        if not reader.ready.wait(self.start_timeout):
            raise SpyError(f"the memory spy did not start within {self.start_timeout} s")
        if reader.ready_frame is None:
            final = reader.final
            if final is not None and final[0].get("kind") == "error":
                _raise_error(final[0])
            raise SpyError(f"the memory spy ended at start (exit code {proc.poll()})")

    @property
    def running(self) -> bool:
        """True while the spy measures (False once the spied process ended)."""
        return self._reader is not None and not self._reader.done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Waits until the spy ends on its own (the spied process ended).

        :param timeout: seconds, None to wait without limit
        :return: True if it ended
        """
        return self._reader is not None and self._reader.done.wait(timeout)

    def peak_so_far(self) -> float | None:
        """The CPU peak in bytes as of the previous call (None at first): each call asks
        the spy for a fresh figure, received in the background."""
        if self.running and self._proc is not None and self._proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):  # stopped meanwhile
                self._proc.stdin.write(b"peek\n")
        peak = self._reader.peek.get("peak") if self._reader is not None else None
        return None if peak is None else float(peak)

    def mark(self, label: str) -> float:
        """Puts a labelled mark into the series (``stat['marks']``), e.g. ``"epoch 2"``.

        :param label: the label
        :return: seconds since the spy started
        """
        t = time.monotonic()
        self._marks.append((t, str(label)))
        return t - (self._reader.ready_frame or {}).get("t0", t) if self._reader else 0.0

    def stop(self) -> SpyReport:
        """Stops spying and returns the measures. Thread-safe and idempotent: every call
        returns the same result, or raises the same error once the spy failed (it died,
        or did not answer within ``stop_timeout`` seconds and was killed).

        :return: ``{'cpu': Monitor, ...}``, see the class
        """
        with self._lock:
            if self.result is not None:
                return self.result
            if self._error is not None:
                raise self._error.with_traceback(None)
            proc, reader = self._proc, self._reader
            if proc is None or reader is None:
                raise SpyError("the memory spy was not started")
            if os.getpid() != self._owner:
                raise SpyError("stop() must be called by the process that started the spy")
            try:
                self.result = self._collect(proc, reader)
            except Exception as e:
                self._error = e
                raise
            return self.result

    def _collect(self, proc: subprocess.Popen[bytes], reader: _Reader) -> SpyReport:
        """Asks the spy for its measures and waits for them (see :meth:`stop`)."""
        # The last reading inside, then the spy's last tick: both at the end of the block.
        probes, self._inside = self._inside, None
        inside = [] if probes is None else probes.stop()
        # OSError: the spy already ended (the spied process exited); ValueError: closed.
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.write(b"stop\n")
        if not reader.done.wait(self.stop_timeout):
            self.abort()  # stopped (SIGSTOP) or stuck: a frozen spy is not a dead one
            raise SpyError(
                f"the memory spy (pid {proc.pid}) did not answer within {self.stop_timeout} s"
                " (killed)"
            )
        final = reader.final
        self._close()
        if final is None:
            raise SpyError(
                f"the memory spy ended without its measures (exit code {proc.returncode})"
            )
        header, payload = final
        if header.get("kind") == "error":
            _raise_error(header)
        self.result = self._build(header, payload, inside)
        samples = self._samples
        self.observed = header.get("stacks")
        if "stacks" in header:
            from .observed import from_observer

            samples = from_observer(header["stacks"])
        if samples is not None:
            from .views import attach

            attach(self.result["cpu"], samples)
            for mon in inside:  # where the allocator's memory rose, as the RSS's
                attach(mon, samples)
        return self.result

    def _build(
        self, header: dict[str, Any], payload: bytes, inside: Sequence[Monitor] = ()
    ) -> SpyReport:
        monitors, offset = [], 0
        for state in header["monitors"]:
            size = state["nbytes"]
            monitors.append(Monitor.from_state(state, payload[offset : offset + size]))
            offset += size
        monitors.extend(inside)
        join_context(monitors[1:])
        t0 = header["t0"]
        from .views import SpyReport  # the views' modules only once there is a result

        result = SpyReport(cpu=monitors[0], t0=t0)
        # Device monitors under their group's key ('gpus'...), and all by qualname.
        devices: dict[str, Monitor] = {}
        for mon in monitors[1:]:
            result.setdefault(str(mon.group), []).append(mon)
            devices[mon.qualname] = mon
        result["duration"] = header["duration"]
        result["target_exited"] = header["target_exited"]
        result["marks"] = [(t - t0, label) for t, label in self._marks]
        if self._signal is not None:
            result["signal"] = self._signal
        if devices:
            result["devices"] = devices
        return result

    def _close(self) -> None:
        """Closes the pipe (the spy exits at end-of-file) and reaps it, killed if it does
        not exit."""
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            try:
                proc.wait(timeout=KILL_TIMEOUT)
                if self._reader is not None:
                    self._reader.thread.join(KILL_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass  # killed below
        self.abort()

    def abort(self) -> None:
        """Kills the spy without its measures (the measured code failed)."""
        inside, self._inside = self._inside, None
        if inside is not None:
            inside.close()
        sampler, self._sampler = self._sampler, None
        if sampler is not None:  # after the spy's last tick: its records are kept
            sampler.stop()
            self._samples = sampler.recorder.running_samples()
        proc = self._proc
        if proc is None:
            return
        _LIVE.discard(self)
        if proc.poll() is None:
            with contextlib.suppress(OSError):  # ended meanwhile
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=KILL_TIMEOUT)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def __enter__(self) -> MemorySpy:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.stop()
        elif self.result is None:
            self.abort()  # the block failed: do not hide its exception behind ours

    def __del__(self) -> None:
        # getattr: the constructor may have failed before setting them. No wait here: a
        # finalizer that blocks can be interrupted (Ctrl-C) and print "Exception ignored";
        # the reader thread reaps the killed spy.
        proc, owner = getattr(self, "_proc", None), getattr(self, "_owner", None)
        if getattr(self, "result", None) is None and proc is not None and os.getpid() == owner:
            with contextlib.suppress(OSError):
                if proc.returncode is None:
                    proc.kill()


@atexit.register
def _stop_all() -> None:
    """Kills the spies left running at exit (they would exit anyway at end-of-file)."""
    pid = os.getpid()
    for spy in list(_LIVE):
        if spy._owner == pid:
            spy.abort()
