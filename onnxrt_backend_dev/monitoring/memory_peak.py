"""Memory spy: the peak, mean, first and last memory of a process while code runs.

::

    from onnxrt_backend_dev.monitoring.memory_peak import start_spying_on

    p = start_spying_on()
    # ...
    # code to measure
    # ...
    stat = p.stop()
    print(stat)

The spy is a separate, small process (``python -I -S``, started with ``subprocess``,
never with multiprocessing, so it works from scripts without a main guard, ``python -c``
and notebooks, under any start method, and never copies the parent's memory). On Linux it
reads the kernel's high-water mark (``VmHWM``) and resets it at each tick by writing ``5``
to ``/proc/PID/clear_refs``, so that a spike shorter than ``delay`` still sets
``max_peak``. Before the first reset it records the mark left by what ran before
(``stat['cpu'].previous_peak``). **The reset also resets the spied process's**
``ru_maxrss`` (``resource.getrusage``); pass ``reset_peak=False`` to leave it alone
(peaks are then exact only when they exceed the high-water mark the process had before
the spy started, sampled otherwise). Where the reset is not permitted (another user's
process) the spy falls back to sampling; ``stat['cpu'].peak_source`` says which was used:
``"hwm"``, ``"sampling+hwm"`` or ``"sampling"``.

With ``stacks=True`` (the current process only) a thread inside the process samples the
Python stacks at every tick as well: ``stat['cpu'].peak_time``, ``.peak_stack`` and
``.where`` say when and in which function the peak happened and how much memory each
function added (text, JSON, memory flame graphs).

The spy ends on its own when the spied process ends (``stop()`` then returns what was
measured, with ``stat['target_exited']`` true) and when the process that started it dies.
A Ctrl-C at any moment of :func:`start_spying_on` leaves no spy process. ``stop()`` may be
called from several threads and again later: each call returns the same result, or
raises the same error once the spy died or did not answer within ``stop_timeout``.
``delay`` is at least ``MIN_DELAY`` (1 ms), where the spy takes about 5-6 % of a core on
a 2-core VM, 2-3 % of it the cost of waking up a thousand times a second
(``benchmarks/bench_spy_cpu.py``).

GPUs and other devices are read by device probes chosen by name from a registry
(``probes=("nvml",)``; ``cuda=True`` is the reference's spelling of it). Each device
monitor carries ``probe``, ``device`` and ``group`` (the result key listing it, ``'gpus'``
or ``'gpus_process'`` for NVML) and ``stat['devices']`` holds them all by ``qualname``
(``"nvml:gpu0"``). A new probe is a :class:`DeviceProbe` subclass in its own module,
registered with :func:`register_probe`.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import marshal
import math
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from types import FrameType, TracebackType
from typing import IO, Any

from ._errors import rebuild
from ._memory import registry as _registry
from ._memory.probes import get_memory_rss as _get_memory_rss
from ._memory.series import DEFAULT_MAX_POINTS, Monitor, SpyResult

__all__ = [
    "MIN_DELAY",
    "DeviceProbe",
    "MemorySpy",
    "Monitor",
    "SpyResult",
    "get_memory_rss",
    "register_probe",
    "spied",
    "spy_call",
    "start_spying_on",
]

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
DeviceProbe = _registry.DeviceProbe


def register_probe(
    name: str, target: str, lib: str | None = None, package: str = "", extra: str = ""
) -> None:
    """Makes a device probe available by name (``probes=(name,)``).

    :param name: the registry name (``"nvml"`` is taken by NVIDIA's)
    :param target: ``"module:Class"``, a :class:`DeviceProbe` subclass the spy imports
    :param lib: a library module the spy imports and hands to the class (None if none)
    :param package: the package providing ``lib``, named when it is missing
    :param extra: the extra of this project that installs it
    """
    _registry.register(_registry.ProbeSpec(name, target, lib, package, extra))


def get_memory_rss(pid: int) -> int:
    """Returns the resident memory (RSS) of a process in bytes.

    :param pid: the process id
    :return: bytes
    """
    _check_pid_value(pid)
    return _get_memory_rss(pid)


def _pid_max() -> int:
    """The largest pid this system gives (Linux: ``/proc/sys/kernel/pid_max``)."""
    try:
        with open("/proc/sys/kernel/pid_max", "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 2**31 - 1  # pid_t is a signed 32-bit int on every POSIX system we run on


def _check_pid_value(pid: int) -> None:
    """Refuses what cannot be a pid: the type, zero or less, beyond the system's range."""
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise TypeError(f"pid must be an int, got {type(pid).__name__}")
    if pid <= 0:
        raise ValueError(f"pid must be > 0, got {pid}")
    limit = _pid_max()
    if pid > limit:
        raise ValueError(f"pid must be <= {limit} (this system's pid_max), got {pid}")


def _check_pid(pid: int) -> None:
    _check_pid_value(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise ProcessLookupError(f"no process with pid {pid}") from None
    except PermissionError:
        pass  # it exists, owned by another user: the spy says what it can read


def _check_seconds(name: str, value: float, floor: float = 0.0) -> None:
    """Refuses a duration that is not a finite number of seconds above ``floor``.

    :param name: the parameter, for the message
    :param value: what was given
    :param floor: the smallest value accepted (0 itself is never accepted)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}")
    if not (value >= floor and 0 < value < math.inf):
        rule = f">= {floor} s" if floor else "> 0"
        raise ValueError(f"{name} must be {rule} and finite, got {value!r}")


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


def _probe_names(probes: Sequence[str], cuda: bool) -> tuple[str, ...]:
    """The device probes asked for: ``probes``, plus ``"nvml"`` with ``cuda=True``.

    :param probes: registry names
    :param cuda: the reference's spelling of ``"nvml"``
    :return: the names, each once, in order
    """
    if isinstance(probes, str):
        raise TypeError(f"probes must be a sequence of names, got the str {probes!r}")
    names = [*(["nvml"] if cuda else []), *probes]
    for name in names:
        _registry.get_spec(name)  # unknown: ValueError naming the known ones
    return tuple(dict.fromkeys(names))


class _Reader:
    """Reads the spy's frames in a daemon thread, then reaps the spy.

    :param proc: the spy process
    """

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
        stream = self.proc.stdout
        assert stream is not None
        try:
            self._read_frames(stream)
        except (OSError, ValueError):
            pass  # the spy died mid-frame: stop() reports it
        finally:
            self.ready.set()
            self.done.set()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=KILL_TIMEOUT)  # reap it at once: no zombie

    @staticmethod
    def _read_exact(stream: IO[bytes], size: int) -> bytes:
        """Reads ``size`` bytes (an unbuffered pipe returns what is there); fewer at EOF."""
        chunks, left = [], size
        while left > 0:
            chunk = stream.read(left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _read_frames(self, stream: IO[bytes]) -> None:
        while True:
            sizes = self._read_exact(stream, 16)
            if len(sizes) < 16:
                return
            head = self._read_exact(stream, int.from_bytes(sizes[:8], "little"))
            payload = self._read_exact(stream, int.from_bytes(sizes[8:], "little"))
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


def _raise_error(header: dict[str, Any]) -> None:
    raise rebuild(header.get("type", ""), header.get("message", "the memory spy failed"))


class MemorySpy:
    """Spies on the memory of a process from another process.

    The spy starts on construction. :meth:`stop` returns a :class:`SpyResult`, a dict
    ``{'cpu': Monitor}``, plus ``'gpus'`` (one Monitor per GPU, device-wide used memory)
    and ``'gpus_process'`` (the process's own usage per GPU, where the driver reports it)
    with ``cuda=True``, and ``'duration'``, ``'target_exited'``, ``'marks'``; with any
    device probe, ``'devices'`` holds every device monitor by ``qualname``
    (``"nvml:gpu0"``).

    :param pid: process id of the process to spy on
    :param delay: spy on every delay seconds, at least ``MIN_DELAY`` (1 ms)
    :param cuda: enable cuda monitoring (nvidia-ml-py, the gpu extra)
    :param include_children: count the whole process tree (never the spy itself)
    :param reset_peak: reset the kernel's high-water mark at each tick for exact peaks;
        this also resets the spied process's ``ru_maxrss``; while another spy of this
        process already resets the same pid, this one follows its resets instead (two
        resetting spies would erase each other's peaks)
    :param max_points: points kept per retained series (decimated beyond, keeping the max)
    :param nvml_module: the module implementing NVML (tests pass a fake)
    :param start_timeout: seconds to wait for the spy to be ready
    :param probes: device probes to read beside the process, by registry name
        (``("nvml",)`` is what ``cuda=True`` asks for), see
        :mod:`onnxrt_backend_dev.monitoring._memory.registry`
    :param stop_timeout: seconds :meth:`stop` waits for the spy's answer
    :param stacks: also sample the Python stacks of the spied process's threads at each
        tick, from a thread inside it (so ``pid`` must be the current process): the CPU
        monitor then says where the peak happened (``peak_stack``) and how much memory
        each function added (``where``)
    """

    def __init__(
        self,
        pid: int,
        delay: float = 0.01,
        cuda: bool = False,
        include_children: bool = False,
        reset_peak: bool = True,
        max_points: int = DEFAULT_MAX_POINTS,
        nvml_module: str = "pynvml",
        start_timeout: float = START_TIMEOUT,
        probes: Sequence[str] = (),
        stop_timeout: float = STOP_TIMEOUT,
        stacks: bool = False,
    ) -> None:
        _check_pid(pid)
        if stacks and pid != os.getpid():
            raise ValueError(
                f"stacks=True samples the stacks inside the spied process: pid must be the "
                f"current process ({os.getpid()}), got {pid}"
            )
        _check_seconds("delay", delay, MIN_DELAY)
        _check_seconds("start_timeout", start_timeout)
        _check_seconds("stop_timeout", stop_timeout)
        if isinstance(max_points, bool) or not isinstance(max_points, int):
            raise TypeError(f"max_points must be an int, got {type(max_points).__name__}")
        if max_points < 2:
            raise ValueError(f"max_points must be >= 2, got {max_points!r}")
        self.pid = pid
        self.delay = float(delay)
        self.cuda = cuda
        self.include_children = include_children
        self.reset_peak = reset_peak
        self.max_points = max_points
        self.nvml_module = nvml_module
        self.start_timeout = float(start_timeout)
        self.stop_timeout = float(stop_timeout)
        self.probes = _probe_names(probes, cuda)
        self._lock = threading.Lock()
        self._error: Exception | None = None
        self.stacks = stacks
        self._sampler: Any = None  # the StackSampler with stacks=True
        self._samples: Any = None  # what it recorded, once stopped
        self.result: SpyResult | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: _Reader | None = None
        self._marks: list[tuple[float, str]] = []
        self._owner = os.getpid()
        self._resets = reset_peak
        self.start()

    def _command(self) -> list[str]:
        if not sys.executable:
            raise RuntimeError("the memory spy needs sys.executable to start a Python process")
        # With device probes, the parent's path: where their libraries are installed.
        paths = [p for p in sys.path if p] if self.probes else []
        code = _WORKER_CODE.format(paths=paths, package=os.path.dirname(os.path.abspath(__file__)))
        libs = {"nvml": self.nvml_module}
        opts = {
            "pid": self.pid,
            "delay": self.delay,
            "parent": os.getpid(),
            "max_points": self.max_points,
            "children": self.include_children,
            "no_reset": not self._resets,
            "probes": [_registry.get_spec(n).to_arg(libs.get(n)) for n in self.probes],
        }
        return [sys.executable, "-I", "-S", "-c", code, *_registry.to_argv(opts)]

    def _check_probes(self) -> None:
        """Refuses a device probe whose library is missing, naming the extra."""
        for name in self.probes:
            spec = _registry.get_spec(name)
            lib = self.nvml_module if name == "nvml" else spec.lib
            if lib and importlib.util.find_spec(lib.split(".")[0]) is None:
                from ._optional import MissingDependencyError

                asked = "cuda=True" if name == "nvml" and self.cuda else f"probe {name!r}"
                raise MissingDependencyError(
                    f"{asked} needs {lib!r} ({spec.package}): "
                    f"pip install 'onnxrt-backend-dev[{spec.extra}]'"
                )

    def start(self) -> MemorySpy:
        """Starts another process and tells it to spy (nothing if it already spies).

        A Ctrl-C at any moment leaves no spy process behind: it is held back while the
        process is created (until this object holds it), then the spy is killed.

        :return: self
        """
        if self._proc is not None and self.result is None and self._error is None:
            return self
        self._check_probes()
        self.result = None
        self._error = None
        self._marks = []
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
            if self.stacks:
                from ._memory.stacks import StackSampler

                self._samples = None
                self._sampler = StackSampler(self.delay, self.max_points).start()
        except BaseException:
            self._kill()
            self._proc = self._reader = None  # not started: start() may try again
            raise
        return self

    def _wait_ready(self, proc: subprocess.Popen[bytes], reader: _Reader) -> None:
        """Waits for the spy's ``ready`` frame; raises what the spy reported otherwise."""
        if not reader.ready.wait(self.start_timeout):
            raise RuntimeError(f"the memory spy did not start within {self.start_timeout} s")
        if reader.ready_frame is None:
            final = reader.final
            if final is not None and final[0].get("kind") == "error":
                _raise_error(final[0])
            raise RuntimeError(f"the memory spy ended at start (exit code {proc.poll()})")

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
        """The CPU peak measured so far, in bytes, as of the previous call (None at first).

        Each call asks the spy for a fresh figure, received in the background.

        :return: bytes or None
        """
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

    def stop(self) -> SpyResult:
        """Stops spying on and returns the measures.

        Thread-safe and idempotent: every call, concurrent or later, returns the same
        result, or raises the same error once the spy failed (it died, or did not answer
        within ``stop_timeout`` seconds and was killed).

        :return: ``{'cpu': Monitor, ...}``, see the class
        """
        with self._lock:
            if self.result is not None:
                return self.result
            if self._error is not None:
                raise self._error.with_traceback(None)
            proc, reader = self._proc, self._reader
            if proc is None or reader is None:
                raise RuntimeError("the memory spy was not started")
            if os.getpid() != self._owner:
                raise RuntimeError("stop() must be called by the process that started the spy")
            try:
                self.result = self._collect(proc, reader)
            except Exception as e:
                self._error = e
                raise
            return self.result

    def _collect(self, proc: subprocess.Popen[bytes], reader: _Reader) -> SpyResult:
        """Asks the spy for its measures and waits for them (see :meth:`stop`)."""
        # OSError: the spy already ended (the spied process exited); ValueError: closed.
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.write(b"stop\n")
        if not reader.done.wait(self.stop_timeout):
            self._kill()  # stopped (SIGSTOP) or stuck: a frozen spy is not a dead one
            raise RuntimeError(
                f"the memory spy (pid {proc.pid}) did not answer within {self.stop_timeout} s"
                " (killed)"
            )
        final = reader.final
        self._close()
        if final is None:
            raise RuntimeError(
                f"the memory spy ended without its measures (exit code {proc.returncode})"
            )
        header, payload = final
        if header.get("kind") == "error":
            _raise_error(header)
        self.result = self._build(header, payload)
        if self._samples is not None:
            from ._memory.where import attach

            attach(self.result["cpu"], self._samples)
        return self.result

    def _build(self, header: dict[str, Any], payload: bytes) -> SpyResult:
        monitors, offset = [], 0
        for state in header["monitors"]:
            size = state["nbytes"]
            monitors.append(Monitor.from_state(state, payload[offset : offset + size]))
            offset += size
        t0 = header["t0"]
        result = SpyResult(cpu=monitors[0], t0=t0)
        # Device monitors under their group's key ('gpus'...), and all by qualname.
        devices: dict[str, Monitor] = {}
        for mon in monitors[1:]:
            result.setdefault(str(mon.group), []).append(mon)
            devices[mon.qualname] = mon
        result["duration"] = header["duration"]
        result["target_exited"] = header["target_exited"]
        result["marks"] = [(t - t0, label) for t, label in self._marks]
        if devices:
            result["devices"] = devices
        return result

    def _stop_sampler(self) -> None:
        """Stops the stack sampler (after the spy's last tick) and keeps its records."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.stop()
            self._samples = sampler.snapshot()

    def _close(self) -> None:
        """Closes the pipe (the spy exits at end-of-file), reaps it, kills it if needed."""
        self._stop_sampler()
        proc = self._proc
        if proc is None:
            return
        _LIVE.discard(self)
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=KILL_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._kill()
        if self._reader is not None:
            self._reader.thread.join(KILL_TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()

    def _kill(self) -> None:
        self._stop_sampler()
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.stop()
        elif self.result is None:
            self._kill()  # the block failed: do not hide its exception behind ours

    def __del__(self) -> None:
        # getattr: the constructor may have failed before setting them. No wait here: a
        # finalizer that blocks can be interrupted (Ctrl-C) and print "Exception ignored";
        # the reader thread reaps the killed spy.
        proc, owner = getattr(self, "_proc", None), getattr(self, "_owner", None)
        if getattr(self, "result", None) is None and proc is not None and os.getpid() == owner:
            with contextlib.suppress(OSError):
                if proc.returncode is None:
                    proc.kill()


def start_spying_on(
    pid: int | None = None,
    delay: float = 0.01,
    cuda: bool = False,
    include_children: bool = False,
    reset_peak: bool = True,
    stacks: bool = False,
    **kwargs: Any,
) -> MemorySpy:
    """Starts the memory spy. The function starts another process spying on the one sent
    as an argument. Use :meth:`MemorySpy.stop` to get the measures, or a ``with`` block
    (the result is then in ``spy.result``).

    :param pid: process id to spy or the current one
    :param delay: delay between two measures, in seconds, at least ``MIN_DELAY`` (1 ms)
    :param cuda: True or False to get memory for cuda devices
    :param include_children: count the whole process tree (never the spy itself)
    :param reset_peak: reset the high-water mark at each tick (exact peaks; also resets
        the process's ``ru_maxrss``)
    :param stacks: sample the Python stacks too (current process only): where the peak
        happened, memory growth per function, see :class:`MemorySpy`
    :param kwargs: other arguments of :class:`MemorySpy`
    :return: the started spy
    """
    return MemorySpy(
        os.getpid() if pid is None else pid,
        delay=delay,
        cuda=cuda,
        include_children=include_children,
        reset_peak=reset_peak,
        stacks=stacks,
        **kwargs,
    )


def spy_call(
    fct: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    delay: float = 0.01,
    cuda: bool = False,
    **spy_kwargs: Any,
) -> tuple[Any, SpyResult]:
    """Measures the memory of one call ``fct(*args, **kwargs)`` in the current process.

    :param fct: the function
    :param args: its positional arguments
    :param kwargs: its keyword arguments
    :param delay: delay between two measures
    :param cuda: measure the GPUs as well
    :param spy_kwargs: other arguments of :class:`MemorySpy`
    :return: what the function returned and the spy's result
    """
    spy = start_spying_on(delay=delay, cuda=cuda, **spy_kwargs)
    try:
        value = fct(*args, **(kwargs or {}))
    except BaseException:
        spy._kill()
        raise
    return value, spy.stop()


def spied(**spy_kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: each call is measured; the last result is in ``wrapper.memory``.

    :param spy_kwargs: arguments of :func:`start_spying_on`
    :return: the decorator
    """

    def decorator(fct: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fct)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value, wrapper.memory = spy_call(fct, args, kwargs, **spy_kwargs)  # type: ignore[attr-defined]
            return value

        wrapper.memory = None  # type: ignore[attr-defined]
        return wrapper

    return decorator


@atexit.register
def _stop_all() -> None:
    """Kills the spies left running at exit (they would exit anyway at end-of-file)."""
    pid = os.getpid()
    for spy in list(_LIVE):
        if spy._owner == pid:
            spy._kill()
