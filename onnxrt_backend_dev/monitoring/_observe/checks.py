"""What the observer keeps between runs: the layout checks (see :mod:`.verify`) and the
interpreter's symbols (see :mod:`.target`).

A check reads a live interpreter: a thread of this process, or a probe child of the
program's executable (5 to 100 ms at every start); finding the symbols parses the
interpreter's ELF file (3 ms). Both depend only on the interpreter's file and on this
tool's own code, so they are kept, per interpreter file, in the user's cache folder, and
used again while the file is the same: its path, device, inode, size, modification time
and build id, the C library's version, and what the caller adds (the layout, its C
walk's version). What is read back is checked by its reader like everything read from
outside: a file that does not parse or a line of the wrong shape or bounds is ignored
(and rewritten at the next start), never trusted blindly.

``ONNXRT_MONITORING_CACHE_DIR`` moves the folder; set to an empty string, nothing is kept.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

ENV = "ONNXRT_MONITORING_CACHE_DIR"
FILE = "observer-checks.txt"
# The file: this first line, then one line per check, tab-separated fields (no JSON:
# its import alone costs a millisecond of every start).
FORMAT = "onnxrt-monitoring observer checks 1"
MAX_ENTRIES = 64
MAX_BYTES = 1 << 20


def folder() -> str:
    """The cache folder ('' when caching is off)."""
    given = os.environ.get(ENV)
    if given is not None:
        return given
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "onnxrt-monitoring")


def key_of(path: str, parts: tuple[Any, ...]) -> str:
    """The key of an interpreter file and what else the check depends on ('' when the
    file cannot be identified: nothing is kept for it).

    :param path: the file holding the interpreter
    :param parts: the layout, the version, this tool's own versions
    """
    from .elf import ElfError, build_id

    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        built = build_id(real)
    except (OSError, ElfError):
        return ""
    libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else ""
    identity = (real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, built, libc, parts)
    return repr(identity)  # escapes tabs, line ends and what cannot be printed


def _path() -> str:
    where = folder()
    return os.path.join(where, FILE) if where else ""


_READ: dict[str, dict[tuple[str, str], list[str]]] = {}  # path -> its lines, read once


def _read(path: str) -> dict[tuple[str, str], list[str]]:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError:
        return {}
    lines = raw.decode("utf-8", "replace").split("\n") if len(raw) <= MAX_BYTES else []
    if not lines or lines[0] != FORMAT:
        return {}
    out: dict[tuple[str, str], list[str]] = {}
    for line in lines[1 : 1 + MAX_ENTRIES]:
        fields = line.split("\t")
        if len(fields) >= 2:
            out[fields[0], fields[1]] = fields[2:]
    return out


def load(kind: str, key: str) -> list[str] | None:
    """The fields kept for a key, as text (the caller checks them), None if none; the
    file is read once per process (a start looks up several keys).

    :param kind: what is kept (``check``, ``symbols``)
    :param key: from :func:`key_of`
    """
    path = _path()
    if not key or not path:
        return None
    if path not in _READ:
        _READ[path] = _read(path)
    return _READ[path].get((kind, key))


def _clean(text: str) -> str:
    return "".join(c if c.isprintable() and c != "\t" else "?" for c in text)


def store(kind: str, key: str, fields: list[str]) -> None:
    """Keeps fields for a key (the file written whole, then moved in place: a reader
    never sees half of it; the oldest lines go beyond :data:`MAX_ENTRIES`); nothing
    when the folder cannot be written.

    :param kind: what is kept
    :param key: from :func:`key_of`
    :param fields: the text of each field
    """
    path = _path()
    if not key or not path:
        return
    entries = _read(path)  # afresh: another run may have kept something meanwhile
    entries.pop((kind, key), None)
    while len(entries) >= MAX_ENTRIES:  # oldest first (insertion order)
        entries.pop(next(iter(entries)))
    entries[kind, key] = [_clean(f) for f in fields]
    _READ[path] = dict(entries)
    lines = ["\t".join([k, n, *v]) for (k, n), v in entries.items()]
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("\n".join([FORMAT, *lines]))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
