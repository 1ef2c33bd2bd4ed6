"""A made-up process image for the observer's reader: a runtime, an interpreter, thread
states, frames in a data-stack chunk, code objects, strings and bytes, laid out with a
real layout (3.11's by default) in a :class:`FakeMemory`. Tests move it under the reader
(``memory.hook``) to make torn reads."""

from __future__ import annotations

import struct

from onnxrt_backend_dev.monitoring._observe.layouts import Layout, from_table
from onnxrt_backend_dev.monitoring._observe.memory import FakeMemory

CODE_TYPE, STR_TYPE, BYTES_TYPE = 0x1000, 0x2000, 0x3000
TYPES = {"PyCode_Type": CODE_TYPE, "PyUnicode_Type": STR_TYPE, "PyBytes_Type": BYTES_TYPE}


def location_table(lines: list[int], first_line: int, units: int = 4) -> bytes:
    """A 3.11 location table: ``units`` code units per line, the "no column" form."""
    out = bytearray()
    previous = first_line
    for line in lines:
        delta = line - previous
        previous = line
        value = (-delta << 1) | 1 if delta < 0 else delta << 1
        out.append(0x80 | (13 << 3) | (units - 1))
        while True:  # a varint of 6-bit chunks, bit 6 "more"
            chunk = value & 63
            value >>= 6
            out.append(chunk | (64 if value else 0))
            if not value:
                break
    return bytes(out)


class Image:
    """A process image in a fake memory.

    :param layout: the offsets (3.11's by default)
    """

    def __init__(self, layout: Layout | None = None) -> None:
        self.layout = layout or from_table((3, 11))
        self.memory = FakeMemory()
        self.heap = bytearray(1 << 20)
        self.base = 0x100000
        self.used = 0
        self.memory.regions[self.base] = self.heap
        self.runtime = self.alloc(1024)
        self.interp = self.alloc(256)
        self.put(self.runtime + self.layout["runtime.interpreters_head"], self.interp)

    def alloc(self, size: int) -> int:
        addr = self.base + self.used
        self.used += (size + 15) & ~15
        return addr

    def put(self, addr: int, value: int, fmt: str = "<Q") -> None:
        struct.pack_into(fmt, self.heap, addr - self.base, value)

    def put_bytes(self, addr: int, data: bytes) -> None:
        self.heap[addr - self.base : addr - self.base + len(data)] = data

    def string(self, text: str) -> int:
        lay = self.layout
        raw = text.encode("ascii")
        addr = self.alloc(lay["unicode.ascii_size"] + len(raw) + 1)
        self.put(addr + 8, STR_TYPE)
        self.put(addr + lay["unicode.length"], len(raw))
        self.put(addr + lay["unicode.state"], (1 << 2) | (1 << 5) | (1 << 6), "<I")
        self.put_bytes(addr + lay["unicode.ascii_size"], raw)
        return addr

    def bytes_object(self, data: bytes) -> int:
        lay = self.layout
        addr = self.alloc(lay["bytes.data"] + len(data) + 1)
        self.put(addr + 8, BYTES_TYPE)
        self.put(addr + lay["bytes.size"], len(data))
        self.put_bytes(addr + lay["bytes.data"], data)
        return addr

    def code(self, name: str, file: str, first_line: int, lines: list[int]) -> int:
        """A code object of ``4 * len(lines)`` code units, 4 per line."""
        lay = self.layout
        units = 4 * len(lines)
        addr = self.alloc(lay["code.adaptive"] + 2 * units)
        self.put(addr + 8, CODE_TYPE)
        self.put(addr + lay["bytes.size"], units)
        self.put(addr + lay["code.qualname"], self.string(name))
        self.put(addr + lay["code.name"], self.string(name))
        self.put(addr + lay["code.filename"], self.string(file))
        table = location_table(lines, first_line)
        self.put(addr + lay["code.linetable"], self.bytes_object(table))
        self.put(addr + lay["code.firstlineno"], first_line, "<i")
        return addr

    def thread(self, ident: int, native: int, frames: list[tuple[int, int]]) -> int:
        """A thread state whose stack is ``frames`` (code, byte offset), outermost first,
        in a chunk of its own; returns the thread state's address."""
        lay = self.layout
        tstate = self.alloc(lay.tstate_span + 16)
        cframe = self.alloc(32)
        chunk = self.alloc(24 + lay.frame_size * (len(frames) + 1))
        self.put(tstate + lay["tstate.thread_id"], ident)
        self.put(tstate + lay["tstate.native_thread_id"], native)
        self.put(tstate + lay["tstate.cframe"], cframe)
        self.put(tstate + lay["tstate.datastack_chunk"], chunk)
        back = 0
        at = chunk + 24
        for code, offset in frames:
            self.put(at + lay.frame_code, code)
            self.put(at + lay.frame_back, back)
            self.put(at + lay.frame_instr, code + lay.code_adaptive + offset)
            back, at = at, at + lay.frame_size
        self.put(cframe + lay["cframe.current_frame"], back)
        self.put(tstate + lay["tstate.datastack_chunk"] + 8, at)  # the chunk's top
        head = self.interp + lay["interp.threads_head"]
        first = struct.unpack_from("<Q", self.heap, head - self.base)[0]
        self.put(tstate + lay["tstate.next"], first)  # newest first, as CPython links them
        self.put(head, tstate)
        return tstate

    def leaf(self, tstate: int) -> int:
        lay = self.layout
        cframe = struct.unpack_from("<Q", self.heap, tstate + lay["tstate.cframe"] - self.base)[0]
        at = cframe + lay["cframe.current_frame"] - self.base
        return int(struct.unpack_from("<Q", self.heap, at)[0])

    def cframe_of(self, tstate: int) -> int:
        lay = self.layout
        at = tstate + lay["tstate.cframe"] - self.base
        return int(struct.unpack_from("<Q", self.heap, at)[0])

    def set_leaf(self, tstate: int, frame: int) -> None:
        lay = self.layout
        cframe = struct.unpack_from("<Q", self.heap, tstate + lay["tstate.cframe"] - self.base)[0]
        self.put(cframe + lay["cframe.current_frame"], frame)

    def hold_gil(self, tstate: int) -> None:
        lay = self.layout
        self.put(self.runtime + lay["runtime.gil_locked"], 1, "<i")
        self.put(self.runtime + lay["runtime.gil_holder"], tstate)
