"""Where CPython keeps what the observer reads, per version.

3.10-3.12 publish nothing for external readers: their offsets come from a table, made by
compiling ``offsetof`` of each field against that version's own internal headers (see
``tools/layout_offsets.c``) and checked against CPython's sources. 3.13 publishes them in
``_Py_DebugOffsets`` at the start of ``_PyRuntime`` (for exactly this use): they are read
from the process, and must agree with the table where the table has the field.

A layout is a hypothesis until :mod:`.verify` has read a live interpreter with it and
found the stacks that interpreter reports of itself: a build with other options (a debug
build moves ``ob_type``; a free-threaded build changes the frames) fails that check and
the in-process sampler runs instead, saying why.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from .._errors import LayoutError

# Offsets in bytes, x86-64 and aarch64 (LP64) release builds, GIL enabled.
_COMMON = {
    # Reading a thread's name (its Thread object's ``_name``): types and dicts.
    "type.flags": 168,
    "type.basicsize": 32,
    "type.dictoffset": 288,
    "dict.keys": 32,
    "dict.values": 40,
    "object.type": 8,
    "type.name": 24,
    "bytes.size": 16,
    "bytes.data": 32,
    "unicode.length": 16,
    "unicode.state": 32,
    "chunk.previous": 0,
    "chunk.size": 8,
    "chunk.top": 16,
    "chunk.data": 24,
    # The same in 3.10 and 3.11 (3.12 and 3.13 change some of them; 3.13's debug offsets
    # give each of them).
    "interp.next": 0,
    "tstate.next": 8,
    "tstate.interp": 16,
    "frame.code": 32,
    "unicode.ascii_size": 48,
    "unicode.compact_size": 72,
}
TABLE: dict[tuple[int, int], dict[str, int]] = {
    (3, 10): {
        "runtime.interpreters_head": 32,
        "runtime.gil_locked": 368,
        "runtime.gil_holder": 360,
        "interp.threads_head": 8,
        "tstate.thread_id": 176,
        "tstate.frame": 24,
        "frame.back": 24,
        "frame.lasti": 96,
        "code.code": 48,
        "code.filename": 104,
        "code.name": 112,
        "code.linetable": 120,
        "code.firstlineno": 40,
        "frame.localsplus": 352,
        "heaptype.cached_keys": 872,
        "keys.size": 8,
        "keys.nentries": 32,
        "keys.indices": 40,
    },
    (3, 11): {
        "runtime.interpreters_head": 40,
        "runtime.gil_locked": 376,
        "runtime.gil_holder": 368,
        "interp.threads_head": 16,
        "tstate.thread_id": 152,
        "tstate.native_thread_id": 160,
        "tstate.datastack_chunk": 296,
        "tstate.cframe": 56,
        "cframe.current_frame": 8,
        "frame.back": 48,
        "frame.instr": 56,
        "frame.owner": 69,
        "frame.size": 80,
        "code.qualname": 128,
        "code.adaptive": 184,
        "code.filename": 112,
        "code.name": 120,
        "code.linetable": 136,
        "code.firstlineno": 72,
        "frame.localsplus": 72,
        "heaptype.cached_keys": 872,
        "keys.log2_index_bytes": 9,
        "keys.kind": 10,
        "keys.nentries": 24,
        "keys.indices": 32,
        "values.values": 0,
    },
}
# 3.12 moved the GIL into the interpreter and most of the thread state's and frame's
# fields: otherwise 3.11's offsets.
TABLE[(3, 12)] = {
    k: v for k, v in TABLE[(3, 11)].items() if k not in ("runtime.gil_locked", "runtime.gil_holder")
} | {
    "interp.gil": 384,
    "gil.locked": 16,
    "gil.holder": 8,
    "interp.threads_head": 72,
    "tstate.thread_id": 136,
    "tstate.native_thread_id": 144,
    "tstate.datastack_chunk": 232,
    "cframe.current_frame": 0,
    "frame.back": 8,
    "frame.code": 0,
    "frame.owner": 70,
    "code.adaptive": 192,
    "code.firstlineno": 68,
    "unicode.ascii_size": 40,
    "unicode.compact_size": 56,
    "heaptype.cached_keys": 880,
}
# 3.13 moved the interpreter's fields and has no C-level frame: otherwise 3.12's offsets.
TABLE[(3, 13)] = {
    k: v for k, v in TABLE[(3, 12)].items() if k not in ("tstate.cframe", "cframe.current_frame")
} | {
    "runtime.interpreters_head": 632,
    "interp.gil": 16,
    "interp.next": 7264,
    "interp.threads_head": 7344,
    "tstate.thread_id": 152,
    "tstate.native_thread_id": 160,
    "tstate.current_frame": 72,
    "code.adaptive": 200,
    "values.valid": 3,
    "values.values": 8,
}
SUPPORTED = tuple(sorted(TABLE))
FRAME_OWNED_BY_CSTACK = 3  # 3.12+: a shim frame of the C stack, not Python code
DEBUG_COOKIE = b"xdebugpy"


class Layout:
    """The offsets of one interpreter.

    :param version: ``(major, minor)``
    :param offsets: field name -> offset in bytes
    :param source: where they come from (``table``, ``debug offsets``)
    """

    def __init__(self, version: tuple[int, int], offsets: Mapping[str, int], source: str) -> None:
        self.version = version
        self.offsets = {**_COMMON, **offsets}
        self.source = source
        get = self.offsets.get
        # The hot fields as attributes: the reader's loop reads them at every frame.
        self.frame_back = self.offsets["frame.back"]
        self.frame_code = self.offsets["frame.code"]
        self.frame_instr = get("frame.instr", -1)
        self.frame_lasti = get("frame.lasti", -1)
        self.frame_owner = get("frame.owner", -1)
        self.frame_size = get("frame.size", 0)
        self.code_adaptive = get("code.adaptive", -1)
        self.tstate_span = 8 + max(v for k, v in self.offsets.items() if k.startswith("tstate."))

    @property
    def name(self) -> str:
        """``3.11`` ..."""
        return f"{self.version[0]}.{self.version[1]}"

    def __getitem__(self, field: str) -> int:
        return self.offsets[field]

    def __contains__(self, field: object) -> bool:
        return field in self.offsets

    def __repr__(self) -> str:
        return f"<Layout {self.name} from {self.source}>"


def from_table(version: tuple[int, int]) -> Layout:
    """The table's layout of a version.

    :param version: ``(major, minor)``
    :raises LayoutError: a version the table does not know
    """
    offsets = TABLE.get(version)
    if offsets is None:
        known = ", ".join(f"{a}.{b}" for a, b in SUPPORTED)
        raise LayoutError(f"Python {version[0]}.{version[1]} is not supported (known: {known})")
    return Layout(version, offsets, "table")


# The 3.13 ``_Py_DebugOffsets``: (section, [fields]) in order, each a uint64; a field
# this tool reads is written ``theirs=ours`` (the name of the offset in a Layout).
_DEBUG_313 = (
    ("runtime_state", ("size", "finalizing", "interpreters_head=runtime.interpreters_head")),
    ("interpreter_state", ("size", "id", "next=interp.next",
                           "threads_head=interp.threads_head", "gc", "imports_modules",
                           "sysdict", "builtins", "ceval_gil=interp.gil", "gil_runtime_state",
                           "gil_runtime_state_enabled", "gil_runtime_state_locked=gil.locked",
                           "gil_runtime_state_holder=gil.holder")),
    ("thread_state", ("size", "prev", "next=tstate.next", "interp=tstate.interp",
                      "current_frame=tstate.current_frame", "thread_id=tstate.thread_id",
                      "native_thread_id=tstate.native_thread_id",
                      "datastack_chunk=tstate.datastack_chunk", "status")),
    ("interpreter_frame", ("size=frame.size", "previous=frame.back", "executable=frame.code",
                           "instr_ptr=frame.instr", "localsplus", "owner=frame.owner")),
    ("code_object", ("size", "filename=code.filename", "name=code.name",
                     "qualname=code.qualname", "linetable=code.linetable",
                     "firstlineno=code.firstlineno", "argcount", "localsplusnames",
                     "localspluskinds", "co_code_adaptive=code.adaptive")),
    ("pyobject", ("size", "ob_type=object.type")),
    ("type_object", ("size", "tp_name=type.name", "tp_repr", "tp_flags")),
    ("tuple_object", ("size", "ob_item", "ob_size")),
    ("list_object", ("size", "ob_item", "ob_size")),
    ("dict_object", ("size", "ma_keys", "ma_values")),
    ("float_object", ("size", "ob_fval")),
    ("long_object", ("size", "lv_tag", "ob_digit")),
    ("bytes_object", ("size", "ob_size=bytes.size", "ob_sval=bytes.data")),
    ("unicode_object", ("size", "state=unicode.state", "length=unicode.length",
                        "asciiobject_size=unicode.ascii_size")),
)  # fmt: skip
DEBUG_OFFSETS_SIZE = 8 + 8 * (2 + sum(len(f) for _, f in _DEBUG_313))
MAX_OFFSET = 1 << 16  # a struct bigger than this is not a release build's


def parse_debug_offsets(data: bytes) -> tuple[int, dict[str, int]]:
    """Reads a 3.13 ``_Py_DebugOffsets`` (the first bytes of ``_PyRuntime``).

    :param data: at least :data:`DEBUG_OFFSETS_SIZE` bytes
    :return: the interpreter's ``PY_VERSION_HEX`` and our offsets
    :raises LayoutError: no cookie, a free-threaded build, or implausible offsets
    """
    if len(data) < DEBUG_OFFSETS_SIZE or data[:8] != DEBUG_COOKIE:
        raise LayoutError("no _Py_DebugOffsets cookie at the start of _PyRuntime")
    version, free_threaded = struct.unpack_from("<QQ", data, 8)
    if free_threaded:
        raise LayoutError("a free-threaded build (its frames are not read by this tool)")
    raw: dict[str, int] = {}
    offsets: dict[str, int] = {}
    at = 24
    for section, fields in _DEBUG_313:
        for field in fields:
            name, _, ours = field.partition("=")
            value = raw[f"{section}.{name}"] = struct.unpack_from("<Q", data, at)[0]
            if ours:
                offsets[ours] = value
            at += 8
    # The lock and the holder are given inside the interpreter's own embedded GIL; the
    # interpreter points at the GIL it uses (its own or the main one's): make them
    # relative to the GIL.
    gil = raw["interpreter_state.gil_runtime_state"]
    offsets["gil.locked"] -= gil
    offsets["gil.holder"] -= gil
    # The compact unicode object follows the ASCII one by a wstr-free header (3.12+).
    offsets["unicode.compact_size"] = raw["unicode_object.asciiobject_size"] + 16
    for name, value in offsets.items():
        if not 0 <= value < MAX_OFFSET:
            raise LayoutError(f"implausible debug offset {name} = {value}")
    return int(version), offsets


def version_of_hex(hexversion: int) -> tuple[int, int]:
    """``(major, minor)`` of a ``PY_VERSION_HEX``."""
    return (hexversion >> 24) & 0xFF, (hexversion >> 16) & 0xFF


def from_debug_offsets(data: bytes) -> Layout:
    """A layout from the interpreter's own ``_Py_DebugOffsets`` (3.13).

    :param data: the first bytes of ``_PyRuntime``
    :raises LayoutError: not readable, or a version whose struct this tool does not know
    """
    hexversion, offsets = parse_debug_offsets(data)
    version = version_of_hex(hexversion)
    if version != (3, 13):
        raise LayoutError(
            f"Python {version[0]}.{version[1]}: its debug offsets are not read by this "
            "version of the tool"
        )
    return Layout(version, offsets, "debug offsets")
