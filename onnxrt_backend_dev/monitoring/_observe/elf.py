"""The symbols of an ELF file (64-bit, little-endian): where the interpreter keeps its
runtime state (``_PyRuntime``) and its code type (``PyCode_Type``), found without
loading or running the file.

The file is untrusted: every offset and size is checked against the file's length, and
a file that is not a 64-bit little-endian ELF is refused with :class:`ElfError`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .._errors import ElfError

if TYPE_CHECKING:
    import mmap

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_PHDR = struct.Struct("<IIQQQQQQ")
_SYM = struct.Struct("<IBBHQQ")
SHT_SYMTAB, SHT_DYNSYM = 2, 11
PT_LOAD = 1
MAX_SECTIONS = 1 << 16


class ElfSymbols:
    """The symbols asked for, and the lowest virtual address loaded.

    :param path: the file
    :param names: the symbols wanted
    :raises ElfError: not a 64-bit little-endian ELF, or malformed
    :raises OSError: unreadable
    """

    def __init__(self, path: str, names: Iterable[str]) -> None:
        self.path = path
        self.symbols: dict[str, int] = {}
        self.base_vaddr = 0
        wanted = set(names)
        import mmap  # here: a start with the symbols kept parses no file

        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < _EHDR.size:
                raise ElfError(f"{path}: too short for an ELF file")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                self._parse(data, size, wanted)

    def _parse(self, data: mmap.mmap, size: int, wanted: set[str]) -> None:
        head = _header(self.path, data[: _EHDR.size])
        phoff, shoff = head[5], head[6]
        phentsize, phnum, shentsize, shnum = head[9:13]
        loads = [
            p[3] for p in _table(data, size, phoff, phentsize, phnum, _PHDR) if p[0] == PT_LOAD
        ]
        self.base_vaddr = min(loads) & ~0xFFF if loads else 0
        if shnum > MAX_SECTIONS:
            raise ElfError(f"{self.path}: {shnum} sections")
        sections = list(_table(data, size, shoff, shentsize, shnum, _SHDR))
        for kind in (SHT_SYMTAB, SHT_DYNSYM):
            for sh in sections:
                if sh[1] != kind or not 0 <= sh[6] < len(sections):
                    continue
                strtab = sections[sh[6]]
                self._symbols(data, size, sh, strtab, wanted - set(self.symbols))

    def _symbols(
        self, data: mmap.mmap, size: int, sh: tuple[int, ...], strtab: tuple[int, ...],
        wanted: set[str],
    ) -> None:  # fmt: skip
        if not wanted:
            return
        str_off, str_size = strtab[4], strtab[5]
        if str_off + str_size > size:
            raise ElfError(f"{self.path}: string table beyond the end of the file")
        offsets: dict[int, str] = {}
        for name in wanted:  # every place the name (or a string ending with it) is stored
            key = name.encode() + b"\0"
            at = data.find(key, str_off, str_off + str_size)
            while at >= 0:
                offsets[at - str_off] = name
                at = data.find(key, at + 1, str_off + str_size)
        if not offsets:
            return
        sym_off, sym_size = sh[4], sh[5]
        if sym_off + sym_size > size:
            raise ElfError(f"{self.path}: symbol table beyond the end of the file")
        count = sym_size // _SYM.size
        for st_name, _info, _other, shndx, value, _sz in _SYM.iter_unpack(
            data[sym_off : sym_off + count * _SYM.size]
        ):
            found = offsets.get(st_name)
            if found is not None and shndx != 0 and value and found not in self.symbols:
                self.symbols[found] = value


def _table(
    data: mmap.mmap, size: int, offset: int, entsize: int, count: int, shape: struct.Struct
) -> Iterable[tuple[int, ...]]:
    if count == 0 or offset == 0:
        return []
    if entsize < shape.size or offset + entsize * count > size:
        raise ElfError("a header table beyond the end of the file")
    return [shape.unpack_from(data, offset + i * entsize) for i in range(count)]


def _header(path: str, head: bytes) -> tuple[int, ...]:
    """The fields of an ELF header, checked: a 64-bit little-endian ELF file."""
    if len(head) < _EHDR.size or head[:4] != b"\x7fELF":
        raise ElfError(f"{path}: not an ELF file")
    if head[4] != 2 or head[5] != 1:
        raise ElfError(f"{path}: not a 64-bit little-endian ELF file")
    return _EHDR.unpack(head)


PT_NOTE = 4
NT_GNU_BUILD_ID = 3
MAX_NOTES = 1 << 16  # bytes of notes read at most


def build_id(path: str) -> str:
    """The GNU build id of an ELF file (hex, '' when it has none), read from its program
    headers' notes: the file mapped, a few pages read.

    :param path: the file
    :raises ElfError: not a 64-bit little-endian ELF, or malformed
    :raises OSError: unreadable
    """
    import mmap

    with open(path, "rb") as f:
        head = _header(path, f.read(_EHDR.size))  # checked before the file is mapped
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            for p in _table(data, len(data), head[5], head[9], head[10], _PHDR):
                if p[0] == PT_NOTE and 0 < p[5] <= MAX_NOTES:
                    found = _gnu_build_id(data[p[2] : p[2] + p[5]])
                    if found:
                        return found
    return ""


def _gnu_build_id(notes: bytes) -> str:
    at = 0
    while at + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, at)
        name_at = at + 12
        desc_at = name_at + ((namesz + 3) & ~3)
        end = desc_at + ((descsz + 3) & ~3)
        if end > len(notes):
            return ""
        if kind == NT_GNU_BUILD_ID and notes[name_at : name_at + namesz] == b"GNU\0":
            return notes[desc_at : desc_at + descsz].hex()
        at = end
    return ""


_CACHE: dict[tuple[str, int, int, int, int], ElfSymbols] = {}


def symbols_of(path: str, names: Iterable[str]) -> ElfSymbols:
    """:class:`ElfSymbols` of a file, cached by its identity (device, inode, size, time).

    :param path: the file
    :param names: the symbols wanted
    """
    st = os.stat(path)
    wanted = tuple(sorted(set(names)))
    key = (path + "|" + ",".join(wanted), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    found = _CACHE.get(key)
    if found is None:
        found = _CACHE[key] = ElfSymbols(path, wanted)
    return found
