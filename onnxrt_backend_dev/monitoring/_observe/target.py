"""Finding the interpreter inside a process: which file holds ``_PyRuntime`` (the
executable, or a ``libpython`` it loaded), where it is loaded, which Python version it
is, and the layout to read it with.

Every failure is an :class:`..._errors.ObserveError` with a one-word reason and one line
saying what to do; nothing here runs code in the process or stops it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import struct
from typing import NamedTuple

from .._errors import ObserveError
from . import checks
from .elf import ElfError, symbols_of
from .layouts import (
    DEBUG_COOKIE,
    DEBUG_OFFSETS_SIZE,
    Layout,
    LayoutError,
    from_debug_offsets,
    from_table,
    version_of_hex,
)
from .memory import Memory, ReadError, open_memory
from .process import Mapping, executable, load_base, mappings, state_of

SYMBOLS = ("_PyRuntime", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type", "Py_Version")
_LIBPYTHON = re.compile(r"libpython(\d)\.(\d+)[a-z]*\.so")
_PYTHON = re.compile(r"python(\d)\.(\d+)[a-z]*$")
REFUSED_HELP = (
    "run the command as the same user as the process (or as root), allow tracing "
    "(sysctl kernel.yama.ptrace_scope=0), or add CAP_SYS_PTRACE to the container "
    "(docker run --cap-add SYS_PTRACE)"
)


class Interpreter(NamedTuple):
    """Where a process's interpreter is.

    :param pid: the process
    :param path: the file holding ``_PyRuntime``
    :param base: where that file is loaded
    :param runtime: the address of ``_PyRuntime``
    :param types: type objects' addresses by name (``PyCode_Type``...)
    :param version: ``(major, minor)``
    :param layout: its offsets
    :param executable: the process's executable
    """

    pid: int
    path: str
    base: int
    runtime: int
    types: dict[str, int]
    version: tuple[int, int]
    layout: Layout
    executable: str


def check_process(pid: int) -> None:
    """Refuses a process that cannot be observed at all, with the reason.

    :param pid: the process
    :raises ObserveError: no such process, a zombie, or the process is this one's init
    """
    state = state_of(pid)
    if state is None:
        raise ObserveError(f"no process {pid} (it ended, or never existed)", "gone")
    if state in ("Z", "X"):
        raise ObserveError(f"process {pid} is a zombie: it ended, its parent has not reaped it",
                           "zombie")  # fmt: skip


def _candidates(maps: list[Mapping], exe: str | None) -> list[str]:
    """The files that may hold ``_PyRuntime``: a mapped ``libpython``, then the
    executable."""
    found = [m.path for m in maps if m.path and _LIBPYTHON.search(os.path.basename(m.path))]
    return list(dict.fromkeys(found + ([exe] if exe else [])))


def _version_from_name(path: str) -> tuple[int, int] | None:
    name = os.path.basename(path)
    match = _LIBPYTHON.search(name) or _PYTHON.search(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def locate(pid: int, memory: Memory | None = None) -> Interpreter:
    """Finds the interpreter of a process.

    :param pid: the process
    :param memory: its memory (:func:`.memory.open_memory` by default)
    :raises ObserveError: gone, refused, not Python, or a version without a layout
    """
    check_process(pid)
    try:
        maps = mappings(pid)
    except PermissionError as e:
        raise ObserveError(f"permission denied reading process {pid}: {REFUSED_HELP}",
                           "refused") from e  # fmt: skip
    except OSError as e:
        raise ObserveError(f"no process {pid} (it ended)", "gone") from e
    exe = executable(pid)
    for path in _candidates(maps, exe):
        found = _find_runtime(pid, maps, path)
        if found is not None:
            return _interpreter(pid, path, found, memory, exe or "")
    what = os.path.basename(exe) if exe else "its executable"
    raise ObserveError(
        f"process {pid} ({what}) is not a Python process this tool can read: no _PyRuntime "
        "symbol in its executable or in a libpython it loaded (a stripped or static build "
        "without symbols, or not CPython)",
        "not-python",
    )


def _find_runtime(pid: int, maps: list[Mapping], path: str) -> tuple[int, dict[str, int]] | None:
    """``(load base, symbols)`` of a file holding ``_PyRuntime``, None otherwise."""
    # The file as this process can open it: through /proc/PID/root when the process lives
    # in another mount namespace (a container).
    found = _symbols(path if os.path.exists(path) else f"/proc/{pid}/root{path}")
    if found is None or "_PyRuntime" not in found[1]:
        return None
    base = load_base(maps, path)
    if base is None:
        return None
    bias = base - found[0]
    return bias, {name: bias + value for name, value in found[1].items()}


def _symbols(path: str) -> tuple[int, dict[str, int]] | None:
    """The lowest address a file loads at and the symbols of :data:`SYMBOLS` it has,
    kept between runs per file (:mod:`.checks`): parsing the interpreter's ELF file
    costs a few milliseconds of every start."""
    key = checks.key_of(path, ("symbols", SYMBOLS))
    kept = _kept_symbols(checks.load("symbols", key) if key else None)
    if kept is not None:
        return kept
    try:
        syms = symbols_of(path, SYMBOLS)
    except (OSError, ElfError):
        return None
    if key:
        fields = [str(syms.base_vaddr), *(f"{k}={v}" for k, v in sorted(syms.symbols.items()))]
        checks.store("symbols", key, fields)
    return syms.base_vaddr, dict(syms.symbols)


def _kept_symbols(fields: list[str] | None) -> tuple[int, dict[str, int]] | None:
    """Symbols kept from an earlier run, checked: known names, addresses in range."""
    if not fields:
        return None
    try:
        base = int(fields[0])
        pairs = [f.split("=", 1) for f in fields[1:]]
        symbols = {name: int(value) for name, value in pairs}
    except ValueError:
        return None
    values = [base, *symbols.values()]
    if set(symbols) - set(SYMBOLS) or not all(0 <= v < 1 << 48 for v in values):
        return None
    return base, symbols


def _interpreter(
    pid: int, path: str, found: tuple[int, dict[str, int]], memory: Memory | None, exe: str
) -> Interpreter:
    bias, symbols = found
    try:
        mem = memory if memory is not None else open_memory(pid)
    except OSError as e:
        raise ObserveError(f"cannot read another process's memory here: {e}", "unsupported") from e
    runtime = symbols["_PyRuntime"]
    try:
        head = mem.read(runtime, DEBUG_OFFSETS_SIZE)
    except ReadError as e:
        if e.why.startswith((os.strerror(errno.EPERM), os.strerror(errno.EACCES))):
            raise ObserveError(
                f"the system refused to read process {pid}: {REFUSED_HELP}", "refused"
            ) from e
        if state_of(pid) in (None, "Z", "X"):
            raise ObserveError(f"process {pid} ended while being read", "gone") from e
        # Alive but unreadable there: a library mapped in pieces (a start under way).
        raise ObserveError(f"process {pid}: its interpreter is not readable yet ({e.why})",
                           "starting") from e  # fmt: skip
    version = _version(mem, symbols, path, head)
    try:
        layout = _layout(version, head)
    except LayoutError as e:
        raise ObserveError(f"process {pid}: {e}", "unsupported") from e
    types = {k: v for k, v in symbols.items() if k.endswith("_Type")}
    return Interpreter(pid, path, bias, runtime, types, version, layout, exe)


def _version(mem: Memory, symbols: dict[str, int], path: str, head: bytes) -> tuple[int, int]:
    if head[:8] == DEBUG_COOKIE:
        return version_of_hex(struct.unpack_from("<Q", head, 8)[0])
    if "Py_Version" in symbols:  # 3.11+: PY_VERSION_HEX as a constant
        try:
            return version_of_hex(struct.unpack("<I", mem.read(symbols["Py_Version"], 4))[0])
        except ReadError:
            pass
    version = _version_from_name(path)
    if version is None:
        raise ObserveError(f"cannot tell the Python version of {path}", "unsupported")
    return version


def _layout(version: tuple[int, int], head: bytes) -> Layout:
    if version >= (3, 13):
        layout = from_debug_offsets(head)
        table = None
        with contextlib.suppress(LayoutError):
            table = from_table(version)
        if table is not None:
            wrong = [k for k, v in table.offsets.items() if layout.offsets.get(k, v) != v]
            if wrong:
                raise LayoutError(
                    "its debug offsets disagree with the known layout of "
                    f"{layout.name} ({', '.join(sorted(wrong)[:4])}): a build with other options"
                )
            layout = Layout(version, {**table.offsets, **layout.offsets}, "debug offsets")
        return layout
    return from_table(version)
