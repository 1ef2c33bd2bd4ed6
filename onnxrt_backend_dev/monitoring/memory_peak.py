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
(``"nvml:gpu0"``). ``probes=("torch",)`` (the torch extra) reads torch's caching
allocator inside this process: per GPU, ``'torch'`` (allocated, its exact peak
``max_memory_allocated``) and ``'torch_reserved'``. A new probe is a :class:`DeviceProbe`
subclass in its own module, registered with :func:`register_probe`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from ._errors import BadType
from ._memory import registry as _registry
from ._memory.probes import get_memory_rss as _get_memory_rss
from ._memory.series import Monitor, SpyResult
from ._memory.spy import MIN_DELAY, MemorySpy, check_pid_value
from ._validate import check_callable

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

DeviceProbe = _registry.DeviceProbe


def register_probe(
    name: str,
    target: str,
    lib: str | None = None,
    package: str = "",
    extra: str = "",
    inprocess: bool = False,
) -> None:
    """Makes a device probe available by name (``probes=(name,)``, ``--probe name``).

    :param name: the registry name (``"nvml"`` and ``"torch"`` are taken)
    :param target: ``"module:Class"``, a :class:`DeviceProbe` subclass the spy imports
    :param lib: a library module the spy imports and hands to the class (None if none)
    :param package: the package providing ``lib``, named when it is missing
    :param extra: the extra of this project that installs it
    :param inprocess: read it inside the measured process, not from the spy process
        (counters only that process holds, as torch's allocator)
    """
    _registry.register(_registry.ProbeSpec(name, target, lib, package, extra, inprocess))


def get_memory_rss(pid: int) -> int:
    """Returns the resident memory (RSS) of a process in bytes.

    :param pid: the process id
    """
    return _get_memory_rss(check_pid_value(pid))


def start_spying_on(
    pid: int | None = None,
    delay: float = 0.01,
    cuda: bool = False,
    include_children: bool = False,
    reset_peak: bool = True,
    stacks: bool = False,
    **kwargs: Any,
) -> MemorySpy:
    """Starts the memory spy, another process spying on ``pid``. Use
    :meth:`MemorySpy.stop` to get the measures, or a ``with`` block (the result is then in
    ``spy.result``).

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
    check_callable("fct", fct)
    if not isinstance(args, (tuple, list)):
        raise BadType(f"args must be a tuple, got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise BadType(f"kwargs must be a dict or None, got {type(kwargs).__name__}")
    spy = start_spying_on(delay=delay, cuda=cuda, **spy_kwargs)
    try:
        value = fct(*args, **(kwargs or {}))
    except BaseException:
        spy.abort()
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
