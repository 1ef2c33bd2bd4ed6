"""The layout checks kept between runs (see :mod:`.verify`).

A check reads a live interpreter: a thread of this process, or a probe child of the
program's executable (5 to 100 ms at every start). Its outcome depends only on the
interpreter's file and on this tool's own code, so it is kept, per interpreter file, in
the user's cache folder, and used again while the file is the same: its path, device,
inode, size, modification time and build id, the layout, the C library's version, this
tool's version and its C walk's. What is read back is checked like everything read
from outside: a file that does not parse or an entry of the wrong shape or bounds is
ignored (and rewritten by the next check), never trusted blindly.

``ONNXRT_MONITORING_CACHE_DIR`` moves the folder; set to an empty string, nothing is kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from typing import Any

ENV = "ONNXRT_MONITORING_CACHE_DIR"
FILE = "observer-checks.json"
FORMAT = 1
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
    return hashlib.sha256(repr(identity).encode()).hexdigest()


def _path() -> str:
    where = folder()
    return os.path.join(where, FILE) if where else ""


def _entries() -> dict[str, Any]:
    path = _path()
    if not path:
        return {}
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
        doc = json.loads(raw) if len(raw) <= MAX_BYTES else None
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return {}
    entries = doc.get("entries")
    return entries if isinstance(entries, dict) else {}


def load(key: str) -> dict[str, Any] | None:
    """A check kept for a key, None when there is none or it is not well-formed.

    :param key: from :func:`key_of`
    :return: ``{"how", "flags" (256 bytes), "tid", "names", "native"}``
    """
    if not key:
        return None
    return _valid(_entries().get(key))


def _valid(entry: Any) -> dict[str, Any] | None:
    """An entry as read back, checked: its fields, their types and bounds."""
    if not isinstance(entry, dict):
        return None
    how, flags, tid = entry.get("how"), entry.get("flags"), entry.get("tid")
    names, native = entry.get("names"), entry.get("native")
    if how not in ("self", "probe") or not isinstance(flags, str) or len(flags) != 512:
        return None
    try:
        raw = bytes.fromhex(flags)
    except ValueError:
        return None
    if any(b > 1 for b in raw) or not isinstance(names, bool) or not isinstance(native, str):
        return None
    if isinstance(tid, bool) or not isinstance(tid, int) or not -1 <= tid < 1 << 16:
        return None
    return {"how": how, "flags": raw, "tid": tid, "names": names, "native": native[:300]}


def store(key: str, how: str, flags: bytes, tid: int, names: bool, native: str) -> None:
    """Keeps a check (the file written whole, then moved in place: a reader never sees
    half of it); nothing when the folder cannot be written.

    :param key: from :func:`key_of`
    :param how: ``self`` or ``probe``
    :param flags: the 256 native-instruction flags
    :param tid: 3.10's kernel id offset in glibc's thread descriptor (-1 unknown)
    :param names: threads' names are read right
    :param native: '' when the C walk passed the check, else why it is not used
    """
    path = _path()
    if not key or not path:
        return
    entries = _entries()
    entries.pop(key, None)
    while len(entries) >= MAX_ENTRIES:  # oldest first (insertion order)
        entries.pop(next(iter(entries)))
    entries[key] = {"how": how, "flags": flags.hex(), "tid": tid, "names": names,
                    "native": native}  # fmt: skip
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            json.dump({"format": FORMAT, "entries": entries}, f)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
