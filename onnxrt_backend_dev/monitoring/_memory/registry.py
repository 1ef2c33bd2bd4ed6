"""The tables the parent and the spy process share: device probes and the spy's options.

Device probes (GPUs, other accelerators) implement :class:`DeviceProbe` and are listed
in :data:`PROBES` by name (``"nvml"``, ``"torch"``; ``cuda=True`` is the reference's
spelling of ``probes=("nvml",)``). Adding one (say AMD through ``amdsmi``) takes a module
with its :class:`DeviceProbe` subclass and one :func:`register` call here, nothing else:
the spy opens it by the ``module:Class`` path it gets on its command line, and its
monitors land in the result under their channel's ``group``.

Most probes read the devices from the spy process (NVML sees every process). A probe
whose figures exist only inside the measured process (torch's caching allocator keeps
its counters in the program's memory) is registered with ``inprocess=True``: a thread
of the measured process reads it (:mod:`.inprocess`) on the same clock as the spy
(``time.monotonic``, system-wide), and its monitors join the spy's result.

:data:`WORKER_OPTIONS` is the one table of the spy's options: the parent builds the
spy's argv from it (:func:`to_argv`), the spy parses it back (:func:`parse_args`).

The spy process imports this module: the standard library only, ``abc`` (loaded at
every interpreter start anyway) and ``importlib`` (when a device probe is opened).
"""

from __future__ import annotations

import abc

from .._errors import BadValue, ProbeError
from .series import DEFAULT_MAX_POINTS

TYPE_CHECKING = False  # typing is not imported at run time: the spy process stays small
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any


# What a channel measures (``Channel.role``), and how every view names it.
ROLES: dict[str, str] = {
    "device": "device-wide, every process",
    "process": "this process",
    "allocated": "allocated, the allocator's exact peak",
    "reserved": "reserved by the caching allocator",
}


class Channel:
    """One series a device probe measures.

    :param name: the monitor's name, unique within a result (``"gpu0"``, ``"gpu0:process"``)
    :param group: the result key whose list holds its monitor (``"gpus"``, ``"gpus_process"``)
    :param device: the device's index for this probe
    :param role: what it measures, a key of :data:`ROLES` (``"device"``, ``"process"``,
        ``"allocated"``, ``"reserved"``); empty if none of these
    :param uuid: the device's identity (its UUID) where known: two probes' channels of
        one device are joined on it (the CUDA context measured apart)
    """

    __slots__ = ("device", "group", "name", "role", "uuid")

    def __init__(
        self, name: str, group: str, device: int, role: str = "", uuid: str | None = None
    ) -> None:
        self.name, self.group, self.device, self.role, self.uuid = name, group, device, role, uuid

    def __repr__(self) -> str:
        return f"Channel({self.name!r}, {self.group!r}, {self.device}, {self.role!r})"


class DeviceProbe(abc.ABC):
    """Memory of devices beside the process: one figure per channel at each tick.

    The spy builds it as ``cls(lib, pids)`` where ``lib`` is the imported module named
    by the probe's spec (None without one) and ``pids()`` returns the pids whose own
    usage is wanted (the spied process, its children with ``include_children``). The
    constructor raises RuntimeError with the cause in words when the devices cannot be
    read; the parent re-raises it as such.

    :param lib: the library module (or a fake), None if the spec names none
    :param pids: returns the spied pids
    """

    #: the registry name, set by the spy once the probe is opened
    name: str = "device"
    #: what the monitors report as ``peak_source``
    source: str = "device"
    #: what ``read()`` returns, in the same order
    channels: list[Channel]

    @abc.abstractmethod
    def __init__(self, lib: Any, pids: Callable[[], set[int]]) -> None:
        """Opens the devices."""

    @abc.abstractmethod
    def read(self) -> list[float | None]:
        """Returns the bytes of every channel (None where unknown at this tick)."""

    def read_peaks(self) -> list[tuple[float | None, float | None]]:
        """Returns ``(bytes now, highest since the previous read)`` per channel, in the
        order of ``channels``. A probe whose library keeps a high-water mark (torch's
        ``max_memory_allocated``) overrides it for exact peaks; by default the peak is
        unknown (None): the monitors sample."""
        return [(value, None) for value in self.read()]

    def reset_peaks(self) -> None:
        """Called once as a measure starts (``start_spying_on``, a ``monitor()`` block):
        a probe whose library keeps a high-water mark resets it there, so that the peak
        is the block's. Nothing by default."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Releases the devices; never raises."""


class ProbeSpec:
    """How to open one device probe.

    :param name: the registry name (``"nvml"``)
    :param target: ``"module:Class"``, the :class:`DeviceProbe` subclass
    :param lib: the library module the probe needs, imported by the spy (None if none)
    :param package: the package that provides ``lib``, for the error message
    :param extra: this project's extra that installs it
    :param inprocess: the probe reads counters that exist only inside the measured process
        (torch's allocator): a thread of that process reads it, never the spy process
    """

    __slots__ = ("extra", "inprocess", "lib", "name", "package", "target")

    def __init__(
        self,
        name: str,
        target: str,
        lib: str | None = None,
        package: str = "",
        extra: str = "",
        inprocess: bool = False,
    ) -> None:
        if not name or any(c in name for c in "=,"):
            raise BadValue(f"probe name must be non-empty without '=' or ',', got {name!r}")
        if target.count(":") != 1:
            raise BadValue(f"probe target must be 'module:Class', got {target!r}")
        self.name = name
        self.target = target
        self.lib = lib
        self.package = package or (lib or "")
        self.extra = extra
        self.inprocess = bool(inprocess)

    def to_arg(self, lib: str | None = None) -> str:
        """The value of the spy's ``--probe`` option: ``name=module:Class,lib``.

        :param lib: another library module than the spec's (tests pass a fake)
        """
        chosen = self.lib if lib is None else lib
        return f"{self.name}={self.target},{chosen or ''}"


PROBES: dict[str, ProbeSpec] = {}
# The probe ``cuda=True`` (``--cuda``) asks for: the reference's spelling of it.
CUDA_PROBE = "nvml"


def register(spec: ProbeSpec) -> ProbeSpec:
    """Adds (or replaces) a device probe.

    :param spec: how to open it
    """
    PROBES[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Removes a device probe by name (tests register fakes)."""
    PROBES.pop(name, None)


def get_spec(name: str) -> ProbeSpec:
    """The spec of a registered probe.

    :param name: its registry name
    :raises ValueError: unknown name, the message lists the known ones
    """
    spec = PROBES.get(name) if isinstance(name, str) else None
    if spec is None:
        raise BadValue(f"probes: unknown probe {name!r}, choose from {sorted(PROBES)}")
    return spec


register(
    ProbeSpec(
        "nvml",
        "onnxrt_backend_dev.monitoring._memory.nvml:NvmlProbe",
        lib="pynvml",
        package="nvidia-ml-py",
        extra="gpu",
    )
)


register(
    ProbeSpec(
        "torch",
        "onnxrt_backend_dev.monitoring._memory.torch_probe:TorchProbe",
        lib="torch.cuda",
        package="torch",
        extra="torch",
        inprocess=True,
    )
)


def split_probes(names: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The probes the spy process reads, and those read inside the measured process,
    each in the given order.

    :param names: registered probe names
    """
    inside = tuple(n for n in names if get_spec(n).inprocess)
    return tuple(n for n in names if n not in inside), inside


def open_probe(arg: str, pids: Callable[[], set[int]]) -> DeviceProbe:
    """Opens the probe described by a ``--probe`` value (see :meth:`ProbeSpec.to_arg`).

    :param arg: ``name=module:Class,lib``
    :param pids: returns the spied pids
    """
    import importlib

    name, _, rest = arg.partition("=")
    target, _, lib = rest.partition(",")
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, DeviceProbe)):
        raise ProbeError(f"probe {name!r}: {target} is not a DeviceProbe")
    module = None
    if lib:
        try:
            module = importlib.import_module(lib)
        except ImportError as e:
            raise ProbeError(f"probe {name!r} cannot import {lib!r} ({e})") from None
    probe = cls(module, pids)
    probe.name = name
    return probe


# --- the spy's command line -----------------------------------------------------------

REQUIRED = None  # a default of None: the option must be given
# (option, key, type, default). bool: a flag, present when true; list: repeated.
WORKER_OPTIONS: tuple[tuple[str, str, type, Any], ...] = (
    ("--pid", "pid", int, REQUIRED),
    ("--delay", "delay", float, REQUIRED),
    ("--parent", "parent", int, REQUIRED),
    ("--max-points", "max_points", int, DEFAULT_MAX_POINTS),
    ("--children", "children", bool, False),
    ("--no-reset", "no_reset", bool, False),
    ("--stacks", "stacks", bool, False),
    ("--alloc", "alloc", str, ""),
    ("--probe", "probes", list, ()),
)


def to_argv(opts: dict[str, Any]) -> list[str]:
    """The spy's argv for ``opts`` (keys of :data:`WORKER_OPTIONS`; others refused).

    :param opts: the options
    """
    known = {key for _, key, _, _ in WORKER_OPTIONS}
    unknown = set(opts) - known
    if unknown:
        raise BadValue(f"unexpected spy options {sorted(unknown)}")
    argv: list[str] = []
    for option, key, kind, default in WORKER_OPTIONS:
        value = opts.get(key, default)
        if kind is bool:
            argv.extend([option] if value else [])
        elif kind is list:
            for item in value:
                argv.extend([option, str(item)])
        elif value is not None:
            argv.extend([option, repr(value) if kind is float else str(value)])
    return argv


def parse_args(argv: Sequence[str]) -> dict[str, Any]:
    """Parses what :func:`to_argv` wrote into every key of :data:`WORKER_OPTIONS`
    (argparse is left out: the spy starts faster).

    :param argv: the arguments
    """
    table = {option: (key, kind) for option, key, kind, _ in WORKER_OPTIONS}
    opts: dict[str, Any] = {
        key: list(default) if kind is list else default for _, key, kind, default in WORKER_OPTIONS
    }
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg not in table or (table[arg][1] is not bool and not args):
            raise BadValue(f"unexpected spy argument {arg!r}")
        key, kind = table[arg]
        if kind is bool:
            opts[key] = True
        elif kind is list:
            opts[key].append(args.pop(0))
        else:
            opts[key] = kind(args.pop(0))
    for option, key, _, default in WORKER_OPTIONS:
        if default is REQUIRED and opts[key] is None:
            raise BadValue(f"missing spy argument {option}")
    return opts
