"""What the observer decodes from untrusted bytes: line tables, ELF symbols, the
interpreter's debug offsets, the opcode table."""

from __future__ import annotations

import os
import struct
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from onnxrt_backend_dev.monitoring._observe import elf, layouts, linetable, opcodes


def _codes(module: types.ModuleType) -> list[types.CodeType]:
    path = module.__file__
    assert path is not None
    with open(path, "rb") as f:
        top = compile(f.read(), path, "exec")
    out, todo = [], [top]
    while todo:
        code = todo.pop()
        out.append(code)
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return out


def _lookup(table: bytes, first: int, minor: int) -> Callable[[int], int]:
    """The Python lookup of one line table, by offset."""
    return lambda offset: linetable.line(table, first, offset, minor)


@pytest.mark.parametrize("module", ["json.decoder", "argparse", "asyncio.base_events"])
def test_line_tables_decode_as_the_interpreter_does(module: str) -> None:
    # GIVEN every code object of a stdlib module, compiled by this interpreter
    import importlib

    version = sys.version_info[:2]
    for code in _codes(importlib.import_module(module)):
        table = _lookup(code.co_linetable, code.co_firstlineno, version[1])
        # THEN every offset with a line has the line co_lines() gives it
        for start, end, line in code.co_lines():
            if line is not None:
                assert {table(o) for o in range(start, end, 2)} == {line}, code
        # AND the C lookup (where built) gives every offset the decoder's line
        line_of = linetable.line_of
        if line_of is not None:
            for o in range(-2, len(code.co_code) + 8, 2):
                c_line = line_of(code.co_linetable, code.co_firstlineno, o, version[1])
                assert c_line == table(o), (code, o)


@pytest.mark.skipif(linetable.line_of is None, reason="the C walk's module is not built")
@pytest.mark.parametrize("minor", [10, 11])
def test_the_c_lookup_agrees_with_the_decoder_on_garbage(minor: int) -> None:
    # GIVEN random bytes as line tables (a torn read, a foreign object)
    import random

    line_of = linetable.line_of
    assert line_of is not None
    rnd = random.Random(minor)
    for _ in range(300):
        data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(40)))
        table = _lookup(data, 10, minor)
        # THEN both stop where the table goes wrong and give the same lines
        for o in range(-2, 90, 2):
            assert line_of(data, 10, o, minor) == table(o), (data.hex(), o)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x80", b"\xf8\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x00\x01\x02", b"\xe8"],
)
def test_a_malformed_line_table_stops_where_it_goes_wrong(data: bytes) -> None:
    # WHEN decoded, THEN no exception, and every line given is a line (never garbage)
    table = _lookup(data, 10, 11)
    assert all(0 <= table(o) < 10_000 for o in range(-2, 40, 2))
    assert table(-2) == 10  # before the code: the first line


def test_the_310_format_decodes_pairs_of_deltas() -> None:
    # 3 bytes on line 5 (first + 0), 4 bytes on line 7, 2 bytes without a line
    table = _lookup(bytes([3, 0, 4, 2, 2, 0x80]), 5, 10)
    assert [table(o) for o in (0, 2, 3, 6, 7, 8)] == [5, 5, 7, 7, 7, 7]


def test_elf_symbols_of_this_interpreter() -> None:
    from onnxrt_backend_dev.monitoring._observe.process import executable, mappings

    maps = mappings(os.getpid())
    files = [m.path for m in maps if "libpython" in os.path.basename(m.path)]
    path = files[0] if files else executable(os.getpid())
    assert path is not None
    found = elf.symbols_of(path, ["_PyRuntime", "PyCode_Type", "no_such_symbol_here"])
    assert "_PyRuntime" in found.symbols and "PyCode_Type" in found.symbols
    assert "no_such_symbol_here" not in found.symbols


@pytest.mark.parametrize(
    ("content", "match"),
    [(b"", "too short"), (b"hello world, not an elf" * 10, "not an ELF"),
     (b"\x7fELF\x01\x01" + b"\0" * 100, "not a 64-bit")],
)  # fmt: skip
def test_a_file_that_is_not_an_elf_is_refused(tmp_path: Path, content: bytes, match: str) -> None:
    bad = tmp_path / "bad.so"
    bad.write_bytes(content)
    with pytest.raises(elf.ElfError, match=match):
        elf.ElfSymbols(str(bad), ["_PyRuntime"])


def test_an_elf_whose_tables_lie_is_refused_or_yields_nothing(tmp_path: Path) -> None:
    # GIVEN a header pointing its section table far beyond the file
    head = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01", 3, 62, 1, 0, 0,
                       1 << 40, 0, 64, 56, 0, 64, 30, 0)  # fmt: skip
    bad = tmp_path / "lying.so"
    bad.write_bytes(head + b"\0" * 64)
    with pytest.raises(elf.ElfError, match="beyond the end"):
        elf.ElfSymbols(str(bad), ["_PyRuntime"])


def _debug_offsets(values: dict[str, int], cookie: bytes = layouts.DEBUG_COOKIE) -> bytes:
    data = bytearray(cookie + struct.pack("<QQ", 0x030D00F0, values.pop("free_threaded", 0)))
    for section, fields in layouts._DEBUG_313:
        for field in fields:
            name = field.partition("=")[0]
            data += struct.pack("<Q", values.get(f"{section}.{name}", 8))
    return bytes(data)


def test_debug_offsets_are_read_and_the_gil_made_relative() -> None:
    data = _debug_offsets({
        "interpreter_state.gil_runtime_state": 7752,
        "interpreter_state.gil_runtime_state_locked": 7768,
        "interpreter_state.gil_runtime_state_holder": 7760,
        "thread_state.current_frame": 72,
    })  # fmt: skip
    version, offsets = layouts.parse_debug_offsets(data)
    assert layouts.version_of_hex(version) == (3, 13)
    assert offsets["gil.locked"] == 16 and offsets["gil.holder"] == 8
    assert offsets["tstate.current_frame"] == 72


@pytest.mark.parametrize(
    ("values", "cookie", "match"),
    [
        ({}, b"notdebug", "cookie"),
        ({"free_threaded": 1}, layouts.DEBUG_COOKIE, "free-threaded"),
        ({"thread_state.next": 1 << 40}, layouts.DEBUG_COOKIE, "implausible"),
    ],
)
def test_bad_debug_offsets_are_refused(values: dict[str, int], cookie: bytes, match: str) -> None:
    with pytest.raises(layouts.LayoutError, match=match):
        layouts.parse_debug_offsets(_debug_offsets(dict(values), cookie))


def test_an_unknown_version_has_no_layout() -> None:
    with pytest.raises(layouts.LayoutError, match=r"3\.9 is not supported"):
        layouts.from_table((3, 9))


def test_the_opcode_table_tells_calls_and_operators_from_bytecode() -> None:
    table = opcodes.table_here()
    flags = opcodes.kinds(table)
    by_name = {name: op for op, (name, _) in table.items()}
    call = by_name.get("CALL", by_name.get("CALL_FUNCTION"))
    assert call is not None and flags[call]
    assert not flags[by_name["LOAD_FAST"]]
    if "BINARY_OP_ADD_INT" in by_name:  # a specialised int add stays in the interpreter
        assert not flags[by_name["BINARY_OP_ADD_INT"]]
    # stepping a loop over a range or a list is Python, in every version
    assert not flags[by_name["FOR_ITER"]] and not flags[by_name["GET_ITER"]]
    assert opcodes.parse_table("not json") == {}
    assert opcodes.parse_table('{"x": [1, 2], "300": ["A", "A"], "5": ["A"]}') == {}
